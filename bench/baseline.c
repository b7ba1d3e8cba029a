/* C baselines for bench/ops.lua, timed in the same process as the dtlua figures:
 * the CBLAS sgemm dtlua's matmul calls, memcpy, and a monotonic clock.
 * Built by `make` (not installed); loaded with package.cpath = "bench/.libs/?.so;..". */
#include "config.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef DT_HAVE_CBLAS
#include <cblas.h>
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int l_now(lua_State *L) {
  lua_pushnumber(L, now());
  return 1;
}

/* Best GFLOP/s of reps calls of cblas_sgemm on n x n float32 matrices; nil without CBLAS. */
static int l_sgemm_gflops(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 3);
#ifdef DT_HAVE_CBLAS
  float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return luaL_error(L, "sgemm_gflops: out of memory");
  }
  for (lua_Integer i = 0; i < n * n; i++) a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f, c[i] = 0;
  double best = 1e300;
  for (lua_Integer r = 0; r < reps; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n, 0.0f, c,
                (int)n);
    double t = now() - t0;
    if (t < best) best = t;
  }
  free(a), free(b), free(c);
  lua_pushnumber(L, 2.0 * (double)n * (double)n * (double)n / best / 1e9);
#else
  (void)n, (void)reps;
  lua_pushnil(L);
#endif
  return 1;
}

/* Best memcpy bandwidth in GB/s over reps copies of `bytes`, counting bytes read + written. */
static int l_memcpy_gbps(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 5);
  char *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
  if (!src || !dst) {
    free(src), free(dst);
    return luaL_error(L, "memcpy_gbps: out of memory");
  }
  memset(src, 1, (size_t)bytes);
  memset(dst, 0, (size_t)bytes); /* fault the pages in before timing */
  double best = 1e300;
  for (lua_Integer r = 0; r < reps; r++) {
    double t0 = now();
    memcpy(dst, src, (size_t)bytes);
    double t = now() - t0;
    if (t < best) best = t;
  }
  volatile char sink = dst[bytes / 2];
  (void)sink;
  free(src), free(dst);
  lua_pushnumber(L, 2.0 * (double)bytes / best / 1e9);
  return 1;
}

int luaopen_baseline(lua_State *L);
int luaopen_baseline(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"now", l_now}, {"sgemm_gflops", l_sgemm_gflops}, {"memcpy_gbps", l_memcpy_gbps}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
