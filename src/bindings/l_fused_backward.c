/* Bindings: the fused backward kernels the backward rules call (src/ops/op_list.h, "fused
 * backward kernels"), reachable from Lua for their tests: dt._gelu_backward(grad, x, tanh). */
#include "bindings/l_tensor.h"

/* dt._gelu_backward(grad, x, tanh?) -> grad * gelu'(x) */
static int l_gelu_backward(lua_State *L) {
  dt_value *in[2] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2)};
  dt_op_args a = {0};
  a.ints[0] = lua_toboolean(L, 3), a.nints = 1;
  return dt_lua_call(L, DT_OP_GELU_BACKWARD, &a, in, 2);
}

static const luaL_Reg funcs[] = {{"_gelu_backward", l_gelu_backward}, {NULL, NULL}};

void dt_lua_open_fused_backward(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
