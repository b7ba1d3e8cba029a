/* Bindings: dt.cuda (is_available, device_count, current_device, set_device, synchronize,
 * memory_stats, empty_cache, allow_tf32) and moving tensors between devices (t:cuda(), t:cpu(),
 * and t:to(device), which l_pointwise.c's `to` hands here).  A rank's default device is its
 * local rank modulo the device count, chosen on its first CUDA call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "base/error.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"
#include "tensor/cuda.h"

#include "config.h"
#ifdef DT_HAVE_CUDA
#include "kernels/cuda/bench_raw.h"
#endif

void dt_lua_open_cuda(lua_State *L, const dt_lua_targets *tg);

/* The default device of this rank: its local rank (threads: every rank is local) */
static void use_rank_default(lua_State *L) {
  dt_context *ctx = dt_lua_context(L);
  dt_cuda_set_default(ctx ? ctx->local_rank : 0);
}

/* Why "cuda" cannot be used here, or NULL when it can. */
static const char *cuda_unavailable(void) {
  if (!dt_cuda_built()) return "tensors are on cpu in this build";
  static _Thread_local char why[160];
  const char *reason = NULL;
  if (dt_cuda_device_count(&reason) > 0) return NULL;
  snprintf(why, sizeof why, "no CUDA device: %s", reason ? reason : "none found");
  return why;
}

int dt_lua_move_to_device(lua_State *L, int idx, const char *op, const char *dev) {
  dt_value *v = dt_lua_check_value_for(L, idx, op, "self");
  dt_device_type target;
  if (strcmp(dev, "cpu") == 0) {
    target = DT_CPU;
  } else if (strncmp(dev, "cuda", 4) == 0 && (dev[4] == 0 || dev[4] == ':')) {
    const char *why = cuda_unavailable();
    if (why) return luaL_error(L, "%s: device '%s' is not available (%s)", op, dev, why);
    use_rank_default(L);
    if (dev[4] == ':') {
      char *end;
      long i = strtol(dev + 5, &end, 10);
      if (*end || end == dev + 5 || i != dt_cuda_current_device())
        return luaL_error(L, "%s: device '%s' is not this rank's device (cuda:%d; dt.cuda.set_device chooses it)", op, dev,
                          dt_cuda_current_device());
    }
    target = DT_CUDA;
  } else {
    return luaL_error(L, "%s: unknown device '%s' (expected \"cpu\", \"cuda\" or \"cuda:N\")", op, dev);
  }
  if (dt_tensor_device(v->local) == target) {
    lua_pushvalue(L, idx);
    return 1;
  }
  if (dt_value_is_dtensor(v))
    return luaL_error(L, "%s: a DTensor cannot move to '%s' (its mesh's device type places it)", op, dev);
  if (dt_autograd_requires_grad(v))
    return luaL_error(L, "%s: moving a tensor that requires grad to '%s' is not differentiable yet; detach() it first", op, dev);
  dt_lua_push_tensor(L, dt_tensor_to_device(v->local, target));
  return 1;
}

static int l_cuda(lua_State *L) { return dt_lua_move_to_device(L, 1, "cuda", "cuda"); }
static int l_cpu(lua_State *L) { return dt_lua_move_to_device(L, 1, "cpu", "cpu"); }

static int l_is_available(lua_State *L) {
  lua_pushboolean(L, dt_cuda_device_count(NULL) > 0);
  return 1;
}

static int l_device_count(lua_State *L) {
  lua_pushinteger(L, dt_cuda_device_count(NULL));
  return 1;
}

static int l_current_device(lua_State *L) {
  use_rank_default(L);
  int d = dt_cuda_current_device();
  if (d < 0) return dt_lua_raise(L);
  lua_pushinteger(L, d);
  return 1;
}

static int l_set_device(lua_State *L) {
  int isnum = 0;
  lua_Integer i = lua_type(L, 1) == LUA_TNUMBER ? lua_tointegerx(L, 1, &isnum) : 0;
  if (!isnum) return luaL_error(L, "cuda.set_device: expected a device number (0-based), got %s", luaL_typename(L, 1));
  if (i < 0 || i > 1 << 20) return luaL_error(L, "cuda.set_device: device %d is out of range", (int)(i < 0 ? -1 : i));
  if (dt_cuda_set_device((int)i) != DT_OK) return dt_lua_raise(L);
  return 0;
}

static int l_synchronize(lua_State *L) {
  use_rank_default(L);
  if (dt_cuda_synchronize() != DT_OK) return dt_lua_raise(L);
  return 0;
}

static int l_memory_stats(lua_State *L) {
  use_rank_default(L);
  dt_cache_stats s;
  if (dt_cuda_memory_stats(&s) != DT_OK) return dt_lua_raise(L);
  lua_createtable(L, 0, 8);
  const struct {
    const char *k;
    int64_t v;
  } f[] = {{"allocated_bytes", s.allocated_bytes},       {"reserved_bytes", s.reserved_bytes},
           {"peak_allocated_bytes", s.peak_allocated_bytes}, {"cached_blocks", s.cached_blocks},
           {"num_allocs", s.num_allocs},                 {"num_cache_hits", s.num_cache_hits},
           {"num_backing_allocs", s.num_backing_allocs}, {"num_backing_frees", s.num_backing_frees}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    lua_pushinteger(L, (lua_Integer)f[i].v);
    lua_setfield(L, -2, f[i].k);
  }
  return 1;
}

static int l_empty_cache(lua_State *L) {
  use_rank_default(L);
  if (dt_cuda_empty_cache() != DT_OK) return dt_lua_raise(L);
  return 0;
}

/* allow_tf32(flag) sets, allow_tf32() reads: float32 matmuls on TF32 tensor cores */
static int l_allow_tf32(lua_State *L) {
  if (!lua_isnone(L, 1)) {
    if (!lua_isboolean(L, 1)) return luaL_error(L, "cuda.allow_tf32: expected a boolean, got %s", luaL_typename(L, 1));
    dt_cuda_set_allow_tf32(lua_toboolean(L, 1));
  }
  lua_pushboolean(L, dt_cuda_allow_tf32());
  return 1;
}

static int l_is_built(lua_State *L) {
  lua_pushboolean(L, dt_cuda_built());
  return 1;
}

/* bench/gpu.lua's yardsticks: _bench_gemm(n, "bfloat16"|"float32", reps), _bench_memcpy(bytes, reps)
 * -> seconds of the best run */
static int l_bench_gemm(lua_State *L) {
  int n = (int)luaL_checkinteger(L, 1), reps = (int)luaL_optinteger(L, 3, 5);
  const char *dtype = luaL_optstring(L, 2, "bfloat16");
  if (n < 1 || n > 65536 || reps < 1) return luaL_error(L, "cuda._bench_gemm: bad size %d or reps %d", n, reps);
  use_rank_default(L);
#ifdef DT_HAVE_CUDA
  double s;
  if (dt_cuda_bench_gemm(n, strcmp(dtype, "float32") != 0, reps, &s) != DT_OK) return dt_lua_raise(L);
  lua_pushnumber(L, s);
  return 1;
#else
  return luaL_error(L, "cuda._bench_gemm: this build has no CUDA (%s)", dtype);
#endif
}

static int l_bench_memcpy(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 5);
  if (bytes < 1 || reps < 1) return luaL_error(L, "cuda._bench_memcpy: bad size or reps");
  use_rank_default(L);
#ifdef DT_HAVE_CUDA
  double s;
  if (dt_cuda_bench_memcpy((size_t)bytes, (int)reps, &s) != DT_OK) return dt_lua_raise(L);
  lua_pushnumber(L, s);
  return 1;
#else
  return luaL_error(L, "cuda._bench_memcpy: this build has no CUDA");
#endif
}

static const luaL_Reg cuda_funcs[] = {
    {"_bench_gemm", l_bench_gemm}, {"_bench_memcpy", l_bench_memcpy},
    {"is_available", l_is_available}, {"device_count", l_device_count}, {"current_device", l_current_device},
    {"set_device", l_set_device},     {"synchronize", l_synchronize},   {"memory_stats", l_memory_stats},
    {"empty_cache", l_empty_cache},   {"allow_tf32", l_allow_tf32},     {"is_built", l_is_built},
    {NULL, NULL},
};

void dt_lua_open_cuda(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_newlib(L, cuda_funcs);
  lua_setfield(L, -2, "cuda");
  lua_pop(L, 1);
  lua_pushvalue(L, tg->methods);
  lua_pushcfunction(L, l_cuda);
  lua_setfield(L, -2, "cuda");
  lua_pushcfunction(L, l_cpu);
  lua_setfield(L, -2, "cpu");
  lua_pop(L, 1);
}
