/* Bindings: t:equal(u) and t:allclose(u, rtol = 1e-5, atol = 1e-8, equal_nan = false),
 * answering Lua booleans.  rtol/atol may also come as an opts table {rtol=, atol=, equal_nan=}. */
#include "base/error.h"
#include "kernels/cpu/compare_all.h"
#include "bindings/l_compare.h"

static int l_equal(lua_State *L) {
  int r;
  if (dt_cpu_equal(dt_lua_check_tensor(L, 1), dt_lua_check_tensor(L, 2), &r) != DT_OK) return dt_lua_raise(L);
  lua_pushboolean(L, r);
  return 1;
}

static int l_allclose(lua_State *L) {
  dt_tensor *a = dt_lua_check_tensor(L, 1), *b = dt_lua_check_tensor(L, 2);
  double rtol, atol;
  int equal_nan, r;
  if (lua_istable(L, 3)) {
    rtol = dt_lua_opt_number_field(L, 3, "rtol", 1e-5);
    atol = dt_lua_opt_number_field(L, 3, "atol", 1e-8);
    equal_nan = dt_lua_opt_bool_field(L, 3, "equal_nan", 0);
  } else {
    rtol = luaL_optnumber(L, 3, 1e-5);
    atol = luaL_optnumber(L, 4, 1e-8);
    equal_nan = lua_toboolean(L, 5);
  }
  if (dt_cpu_allclose(a, b, rtol, atol, equal_nan, &r) != DT_OK) return dt_lua_raise(L);
  lua_pushboolean(L, r);
  return 1;
}

static const luaL_Reg compare_funcs[] = {{"equal", l_equal}, {"allclose", l_allclose}, {NULL, NULL}};

void dt_lua_open_compare(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->methods);
  luaL_setfuncs(L, compare_funcs, 0);
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, compare_funcs, 0);
  lua_pop(L, 2);
}
