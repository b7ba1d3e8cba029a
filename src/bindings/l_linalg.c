/* Bindings: matmul, mm, bmm, addmm (methods and dt.*).
 *   a:matmul(b) / dt.matmul(a, b)   PyTorch rules, 1-d to batched N-d with broadcasting
 *   a:mm(b), a:bmm(b)               strict 2-d / 3-d forms
 *   dt.addmm(c, a, b, {beta = 1, alpha = 1}) = beta * c + alpha * (a @ b) */
#include "base/error.h"
#include "bindings/l_tensor.h"

static int binary(lua_State *L, dt_op_id id) {
  dt_value *in[2] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2)};
  dt_op_args a = {0};
  return dt_lua_call(L, id, &a, in, 2);
}
static int l_matmul(lua_State *L) { return binary(L, DT_OP_MATMUL); }
static int l_mm(lua_State *L) { return binary(L, DT_OP_MM); }
static int l_bmm(lua_State *L) { return binary(L, DT_OP_BMM); }

static int l_addmm(lua_State *L) {
  dt_value *in[3] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2), dt_lua_check_value(L, 3)};
  if (!lua_isnoneornil(L, 4) && !lua_istable(L, 4))
    return luaL_error(L, "addmm: options must be a table {beta = , alpha = }, got %s", luaL_typename(L, 4));
  dt_op_args a = {0};
  a.scalar[0] = dt_lua_opt_number_field(L, 4, "beta", 1);
  a.scalar[1] = dt_lua_opt_number_field(L, 4, "alpha", 1);
  a.nscalar = 2;
  return dt_lua_call(L, DT_OP_ADDMM, &a, in, 3);
}

static const luaL_Reg linalg_funcs[] = {
    {"matmul", l_matmul}, {"mm", l_mm}, {"bmm", l_bmm}, {"addmm", l_addmm}, {NULL, NULL},
};

void dt_lua_open_linalg(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module); /* dt.matmul(a, b) */
  luaL_setfuncs(L, linalg_funcs, 0);
  lua_pushvalue(L, tg->methods); /* a:matmul(b) */
  luaL_setfuncs(L, linalg_funcs, 0);
  lua_pop(L, 2);
}
