/* Bindings: dt.config(), how this build computes on this machine: {blas = "openblas" | "blis" |
 * "none", blas_core = the BLAS kernels in use (OpenBLAS core name, BLIS arch), blas_threads,
 * cpu = "amx" | "avx512" | "avx2" | "sse"}.  A fresh table per call: the caller may keep it. */
#include "bindings/l_tensor.h"
#include "kernels/cpu/blas_info.h"

static int l_config(lua_State *L) {
  dt_blas_info b;
  dt_blas_get_info(&b);
  lua_createtable(L, 0, 4);
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

void dt_lua_open_config(lua_State *L, const dt_lua_targets *tg) {
  lua_pushcfunction(L, l_config);
  lua_setfield(L, tg->module, "config");
}
