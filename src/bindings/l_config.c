/* Bindings: dt.config(), how this build computes on this machine: {blas = "openblas" | "blis" |
 * "none", blas_core = the BLAS kernels in use (OpenBLAS core name, BLIS arch), blas_threads,
 * cpu = "amx" | "avx512" | "avx2" | "sse"}.  A fresh table per call: the caller may keep it. */
#include "bindings/l_tensor.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/cpu_threads.h"

static int l_config(lua_State *L) {
  dt_blas_info b;
  dt_blas_get_info(&b);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, dt_get_num_threads());
  lua_setfield(L, -2, "threads");
  lua_pushstring(L, b.library);
  lua_setfield(L, -2, "blas");
  lua_pushstring(L, b.core ? b.core : "unknown");
  lua_setfield(L, -2, "blas_core");
  lua_pushinteger(L, b.threads);
  lua_setfield(L, -2, "blas_threads");
  lua_pushstring(L, b.cpu);
  lua_setfield(L, -2, "cpu");
  return 1;
}

/* dt.set_num_threads(n): this rank's intra-op threads and the BLAS's (doc/performance.md) */
static int l_set_num_threads(lua_State *L) {
  int isnum = 0;
  lua_Integer n = lua_tointegerx(L, 1, &isnum);
  if (!isnum) return luaL_error(L, "set_num_threads: expected an integer thread count, got %s", luaL_typename(L, 1));
  if (n < 1 || n > DT_MAX_THREADS)
    return luaL_error(L, "set_num_threads: the thread count must be an integer in 1..%d, got %I", DT_MAX_THREADS, n);
  if (dt_cpu_set_threads((int)n, "set_num_threads") != DT_OK) return luaL_error(L, "%s", dt_error_message());
  return 0;
}

static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, dt_get_num_threads());
  return 1;
}

void dt_lua_open_config(lua_State *L, const dt_lua_targets *tg) {
  const char *bad = dt_num_threads_env_invalid();
  if (bad) luaL_error(L, "DTLUA_NUM_THREADS: expected an integer in 1..%d, got '%s'", DT_MAX_THREADS, bad);
  dt_cpu_sync_blas_threads(); /* each rank starts with the BLAS at its own count */
  lua_pushcfunction(L, l_config);
  lua_setfield(L, tg->module, "config");
  lua_pushcfunction(L, l_set_num_threads);
  lua_setfield(L, tg->module, "set_num_threads");
  lua_pushcfunction(L, l_get_num_threads);
  lua_setfield(L, tg->module, "get_num_threads");
}
