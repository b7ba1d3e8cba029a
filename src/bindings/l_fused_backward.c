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

/* The tensors and flags both forms of dt._adam_step_ share: in[0..4], eps (argument 10),
 * decoupled and maximize (12, 13). */
static int adam_common(lua_State *L, dt_value **in, dt_op_args *a) {
  static const char *const ARGN[] = {"param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  for (int i = 0; i < 4; i++) in[i] = dt_lua_check_value_for(L, i + 1, "adam_step_", ARGN[i]);
  in[4] = lua_isnoneornil(L, 5) ? NULL : dt_lua_check_value_for(L, 5, "adam_step_", ARGN[4]);
  a->nscalar = 4, a->nints = 2;
  a->flags = (lua_toboolean(L, 12) ? 1 : 0) | (lua_toboolean(L, 13) ? 2 : 0);
  return in[4] ? 5 : 4;
}

static double adam_number(lua_State *L, int i) {
  if (lua_type(L, i) != LUA_TNUMBER)
    return luaL_error(L, "adam_step_: argument %d must be a number, got %s", i, luaL_typename(L, i));
  return lua_tonumber(L, i);
}

/* dt._adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq | nil, step_size,
 * bias_correction2_sqrt, beta1, beta2, eps, decay, decoupled, maximize) -> param */
static int l_adam_step_(lua_State *L) {
  dt_value *in[5];
  dt_op_args a = {0};
  int nin = adam_common(L, in, &a);
  for (int i = 0; i < 4; i++) a.scalar[i] = adam_number(L, 6 + i);
  a.ints[0] = bits_of(adam_number(L, 10)), a.ints[1] = bits_of(adam_number(L, 11));
  return dt_lua_call_inplace(L, 1, DT_OP_ADAM_STEP_, &a, in, nin);
}

/* dt._adam_step_from_count_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq | nil, step, lr,
 * beta1, beta2, eps, weight_decay, decoupled, maximize) -> param: the step count a 1-element
 * tensor and lr a number or 1-element tensor, read when the op runs, which computes the bias
 * corrections from them (a graph's optimizer step: no Lua reads their values) */
static int l_adam_step_from_count_(lua_State *L) {
  dt_value *in[7] = {0};
  dt_op_args a = {0};
  adam_common(L, in, &a);
  in[5] = dt_lua_check_value_for(L, 6, "adam_step_", "step");
  int nin = 6;
  if (lua_type(L, 7) == LUA_TNUMBER) a.ints[2] = bits_of(lua_tonumber(L, 7)), a.nints = 3;
  else in[6] = dt_lua_check_value_for(L, 7, "adam_step_", "lr"), nin = 7;
  a.scalar[2] = adam_number(L, 8), a.scalar[3] = adam_number(L, 9);
  a.ints[0] = bits_of(adam_number(L, 10)), a.ints[1] = bits_of(adam_number(L, 11));
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
                                 {"_adam_step_from_count_", l_adam_step_from_count_},
                                 {NULL, NULL}};

void dt_lua_open_fused_backward(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
