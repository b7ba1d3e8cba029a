/* Bindings: the fused backward kernels the backward rules call (src/ops/op_list.h, "fused
 * backward kernels"), reachable from Lua for their tests: dt._gelu_backward(grad, x, tanh),
 * dt._layer_norm_backward(grad, x, w, normalized_shape, eps, rms), dt._sdpa_backward(grad, q,
 * k, v, mask, causal, scale), dt._softmax_backward(grad, y, dim, log); and the fused
 * training-step ops the Lua library calls: dt._adam_step_ (lua/dtensor/optim/adam.lua);
 * dt._cross_entropy_backward is in l_nn.c beside dt._cross_entropy, whose arguments it takes. */
#include "bindings/l_tensor.h"

#include <string.h>

/* dt._gelu_backward(grad, x, tanh?) -> grad * gelu'(x) */
static int l_gelu_backward(lua_State *L) {
  dt_value *in[2] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2)};
  dt_op_args a = {0};
  a.ints[0] = lua_toboolean(L, 3), a.nints = 1;
  return dt_lua_call(L, DT_OP_GELU_BACKWARD, &a, in, 2);
}

/* dt._layer_norm_backward(grad, x, w | nil, normalized_shape, eps, rms?) -> dx, dw, db */
static int l_layer_norm_backward(lua_State *L) {
  dt_value *in[3] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2), lua_isnil(L, 3) ? NULL : dt_lua_check_value(L, 3)};
  dt_op_args a = {0};
  luaL_checktype(L, 4, LUA_TTABLE);
  lua_Integer k = luaL_len(L, 4);
  if (k < 1 || k > DT_MAX_DIMS) return luaL_error(L, "_layer_norm_backward: normalized_shape must have 1 to %d dims", DT_MAX_DIMS);
  a.ints[0] = k, a.nints = (int)k + 1;
  for (lua_Integer i = 1; i <= k; i++) {
    lua_geti(L, 4, i);
    a.ints[i] = luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  a.scalar[0] = luaL_optnumber(L, 5, 1e-5), a.nscalar = 1;
  a.flags = lua_toboolean(L, 6) ? 1 : 0;
  return dt_lua_call(L, DT_OP_LAYER_NORM_BACKWARD, &a, in, 3);
}

/* dt._sdpa_backward(grad, q, k, v, mask | nil, causal?, scale | nil) -> dq, dk, dv */
static int l_sdpa_backward(lua_State *L) {
  static const char *const names[] = {"grad", "q", "k", "v", "mask"};
  dt_value *in[5] = {0};
  for (int i = 0; i < 4; i++) in[i] = dt_lua_check_value_for(L, i + 1, "sdpa_backward", names[i]);
  if (!lua_isnoneornil(L, 5)) in[4] = dt_lua_check_value_for(L, 5, "sdpa_backward", names[4]);
  dt_op_args a = {0};
  a.flags = lua_toboolean(L, 6) ? 1 : 0;
  if (!lua_isnoneornil(L, 7)) {
    if (lua_type(L, 7) != LUA_TNUMBER) return luaL_error(L, "sdpa_backward: scale must be a number, got %s", luaL_typename(L, 7));
    a.scalar[0] = lua_tonumber(L, 7), a.nscalar = 1;
  }
  return dt_lua_call(L, DT_OP_SDPA_BACKWARD, &a, in, in[4] ? 5 : 4);
}

static int64_t bits_of(double d) {
  int64_t b;
  memcpy(&b, &d, sizeof b);
  return b;
}

/* dt._adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq | nil, step_size,
 * bias_correction2_sqrt, beta1, beta2, eps, decay, decoupled, maximize) -> param; step_size,
 * bias_correction2_sqrt and decay may be 1-element tensors (inside dt.compile: computed by the
 * graph from the step tensor), read when the op runs. */
static int l_adam_step_(lua_State *L) {
  static const char *const ARGN[] = {NULL, "param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  static const int TENSOR_ARG[3] = {6, 7, 11}; /* the numbers that may be tensors: in[5], in[6], in[7] */
  dt_value *in[8] = {dt_lua_check_value_for(L, 1, "adam_step_", ARGN[1]), dt_lua_check_value_for(L, 2, "adam_step_", ARGN[2]),
                     dt_lua_check_value_for(L, 3, "adam_step_", ARGN[3]), dt_lua_check_value_for(L, 4, "adam_step_", ARGN[4]),
                     lua_isnoneornil(L, 5) ? NULL : dt_lua_check_value_for(L, 5, "adam_step_", ARGN[5])};
  dt_op_args a = {0};
  int nin = in[4] ? 5 : 4;
  for (int k = 0; k < 3; k++)
    if (luaL_testudata(L, TENSOR_ARG[k], DT_TENSOR_MT)) {
      in[5 + k] = dt_lua_check_value_for(L, TENSOR_ARG[k], "adam_step_", k == 0 ? "step_size" : k == 1 ? "bias_correction2_sqrt" : "decay");
      nin = 6 + k;
    }
  for (int i = 6; i <= 11; i++)
    if (lua_type(L, i) != LUA_TNUMBER && !(i == 6 && in[5]) && !(i == 7 && in[6]) && !(i == 11 && in[7]))
      return luaL_error(L, "adam_step_: argument %d must be a number, got %s", i, luaL_typename(L, i));
  for (int i = 0; i < 4; i++) a.scalar[i] = lua_type(L, 6 + i) == LUA_TNUMBER ? lua_tonumber(L, 6 + i) : 0;
  a.nscalar = 4;
  a.ints[0] = bits_of(lua_tonumber(L, 10)), a.ints[1] = bits_of(in[7] ? 0 : lua_tonumber(L, 11)), a.nints = 2;
  a.flags = (lua_toboolean(L, 12) ? 1 : 0) | (lua_toboolean(L, 13) ? 2 : 0);
  return dt_lua_call_inplace(L, 1, DT_OP_ADAM_STEP_, &a, in, nin);
}

/* dt._softmax_backward(grad, y, dim, log?) -> softmax's (log: log_softmax's) d x from its
 * output y */
static int l_softmax_backward(lua_State *L) {
  int log_out = lua_toboolean(L, 4);
  const char *op = log_out ? "log_softmax_backward" : "softmax_backward";
  dt_value *in[2] = {dt_lua_check_value_for(L, 1, op, "grad"), dt_lua_check_value_for(L, 2, op, "y")};
  if (lua_isnoneornil(L, 3)) return luaL_error(L, "%s: dim is required", op);
  dt_op_args a = {0};
  a.ints[0] = dt_lua_check_dim(L, 3, dt_value_ndim(in[1]), 0, op), a.nints = 1;
  return dt_lua_call(L, log_out ? DT_OP_LOG_SOFTMAX_BACKWARD : DT_OP_SOFTMAX_BACKWARD, &a, in, 2);
}

static const luaL_Reg funcs[] = {{"_gelu_backward", l_gelu_backward},
                                 {"_softmax_backward", l_softmax_backward},
                                 {"_layer_norm_backward", l_layer_norm_backward},
                                 {"_sdpa_backward", l_sdpa_backward},
                                 {"_adam_step_", l_adam_step_},
                                 {NULL, NULL}};

void dt_lua_open_fused_backward(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
