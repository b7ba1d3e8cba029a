/* Bindings: t:equal(u) and t:allclose(u, rtol = 1e-5, atol = 1e-8, equal_nan = false),
 * answering Lua booleans (the ops give a 0-d bool).  rtol/atol may also come as an opts table
 * {rtol=, atol=, equal_nan=}. */
#include "base/error.h"
#include "bindings/l_compare.h"

/* Runs the comparison op on the tensors at 1 and 2 and answers its 0-d bool as a boolean. */
static int answer(lua_State *L, dt_op_id id, dt_op_args *a) {
  dt_lua_capture_refuse(L, "a comparison read as a Lua boolean (dt.equal / dt.allclose: control flow on tensor values)");
  dt_value *in[2] = {dt_lua_check_value(L, 1), dt_lua_check_value(L, 2)};
  dt_lua_call(L, id, a, in, 2);
  dt_tensor *r = dt_tensor_to_host(dt_lua_check_value(L, -1)->local);
  if (!r) return dt_lua_raise(L);
  lua_pushboolean(L, *(const unsigned char *)dt_tensor_data(r));
  dt_tensor_release(r);
  return 1;
}

static int l_equal(lua_State *L) {
  dt_op_args a = {0};
  return answer(L, DT_OP_EQUAL, &a);
}

static int l_allclose(lua_State *L) {
  dt_op_args a = {.nscalar = 2};
  if (lua_istable(L, 3)) {
    a.scalar[0] = dt_lua_opt_number_field(L, 3, "rtol", 1e-5);
    a.scalar[1] = dt_lua_opt_number_field(L, 3, "atol", 1e-8);
    if (dt_lua_opt_bool_field(L, 3, "equal_nan", 0)) a.flags = DT_ARG_EQUAL_NAN;
  } else {
    a.scalar[0] = luaL_optnumber(L, 3, 1e-5);
    a.scalar[1] = luaL_optnumber(L, 4, 1e-8);
    if (lua_toboolean(L, 5)) a.flags = DT_ARG_EQUAL_NAN;
  }
  return answer(L, DT_OP_ALLCLOSE, &a);
}

static const luaL_Reg compare_funcs[] = {{"equal", l_equal}, {"allclose", l_allclose}, {NULL, NULL}};

void dt_lua_open_compare(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->methods);
  luaL_setfuncs(L, compare_funcs, 0);
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, compare_funcs, 0);
  lua_pop(L, 2);
}
