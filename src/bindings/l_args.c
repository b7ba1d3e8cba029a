/* Argument conversion shared by the binding files. */
#include "base/error.h"
#include "bindings/l_tensor.h"

#include <string.h>

int dt_lua_to_dim(lua_State *L, lua_Integer d, int ndim, int extra, const char *op) {
  lua_Integer n = ndim + extra;
  if (n == 0) n = 1; /* a 0-d tensor accepts dim 1 / -1 (as PyTorch accepts 0 / -1) */
  if (d == 0) return luaL_error(L, "%s: dim 0 is invalid (dims are 1-based: 1..%d or -%d..-1)", op, (int)n, (int)n);
  lua_Integer z = d > 0 ? d - 1 : d + n;
  if (z < 0 || z >= n)
    return luaL_error(L, "%s: dim %d out of range for a %d-d tensor (dims are 1-based: 1..%d or -%d..-1)", op, (int)d,
                      ndim, (int)n, (int)n);
  return (int)z;
}

int dt_lua_check_dim(lua_State *L, int idx, int ndim, int extra, const char *op) {
  if (!lua_isinteger(L, idx)) return luaL_error(L, "%s: dim must be an integer, got %s", op, luaL_typename(L, idx));
  return dt_lua_to_dim(L, lua_tointeger(L, idx), ndim, extra, op);
}

static int64_t check_size(lua_State *L, int idx, const char *op) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum) return luaL_error(L, "%s: sizes must be integers, got %s", op, luaL_typename(L, idx));
  return v;
}

int dt_lua_check_shape(lua_State *L, int idx, int *ndim, int64_t *shape, const char *op) {
  if (lua_istable(L, idx) && !dt_lua_test_tensor(L, idx)) {
    int n = (int)luaL_len(L, idx);
    if (n > DT_MAX_DIMS) return luaL_error(L, "%s: %d dims (at most %d supported)", op, n, DT_MAX_DIMS);
    for (int i = 0; i < n; i++) {
      lua_geti(L, idx, i + 1);
      shape[i] = check_size(L, -1, op);
      lua_pop(L, 1);
    }
    *ndim = n;
    return 1;
  }
  int n = 0, top = lua_gettop(L);
  while (idx + n <= top && lua_type(L, idx + n) == LUA_TNUMBER) {
    if (n == DT_MAX_DIMS) return luaL_error(L, "%s: too many dims (at most %d supported)", op, DT_MAX_DIMS);
    shape[n] = check_size(L, idx + n, op);
    n++;
  }
  *ndim = n;
  return n;
}

/* Raises "<op>: <msg>" when op is given, else Lua's "bad argument #idx to '<function>' (<msg>)". */
static int arg_error(lua_State *L, int idx, const char *op, const char *msg) {
  if (op) return luaL_error(L, "%s: %s", op, msg);
  return luaL_argerror(L, idx, msg);
}

void dt_lua_check_opts(lua_State *L, int idx, const char *op) {
  if (lua_isnoneornil(L, idx)) return;
  if (!lua_istable(L, idx) || dt_lua_test_tensor(L, idx)) {
    lua_pushfstring(L, "expected an options table such as {dtype = \"float64\"}, got %s", luaL_typename(L, idx));
    arg_error(L, idx, op, lua_tostring(L, -1));
  }
  lua_getfield(L, idx, "device");
  if (!lua_isnil(L, -1) && (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "cpu") != 0)) {
    lua_pushfstring(L, "device '%s' is not available (tensors are on cpu in this build)", luaL_tolstring(L, -1, NULL));
    arg_error(L, idx, op, lua_tostring(L, -1));
  }
  lua_pop(L, 1);
}

dt_dtype dt_lua_opt_dtype(lua_State *L, int idx, dt_dtype def) {
  if (lua_isnoneornil(L, idx)) return def;
  const char *name = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
  if (!name) {
    lua_pushfstring(L, "dtype must be a string such as \"float32\", got %s", luaL_typename(L, idx));
    luaL_argerror(L, idx, lua_tostring(L, -1));
  }
  dt_dtype d;
  if (dt_dtype_from_name(name, &d) != DT_OK) luaL_argerror(L, idx, dt_error_message());
  return d;
}

dt_dtype dt_lua_opt_dtype_field(lua_State *L, int idx, dt_dtype def) {
  dt_lua_check_opts(L, idx, NULL);
  if (lua_isnoneornil(L, idx)) return def;
  lua_getfield(L, idx, "dtype");
  dt_dtype d = def;
  if (!lua_isnil(L, -1)) {
    dt_dtype parsed;
    if (lua_type(L, -1) != LUA_TSTRING || dt_dtype_from_name(lua_tostring(L, -1), &parsed) != DT_OK) {
      lua_pushfstring(L, "option dtype: %s",
                      lua_type(L, -1) == LUA_TSTRING ? dt_error_message() : "must be a string such as \"float32\"");
      luaL_argerror(L, idx, lua_tostring(L, -1));
    }
    d = parsed;
  }
  lua_pop(L, 1);
  return d;
}

int dt_lua_opt_bool_field(lua_State *L, int idx, const char *field, int def) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, field);
  int v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

double dt_lua_opt_number_field(lua_State *L, int idx, const char *field, double def) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, field);
  double v = def;
  if (!lua_isnil(L, -1)) {
    if (!lua_isnumber(L, -1)) luaL_error(L, "option '%s' must be a number, got %s", field, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

lua_Integer dt_lua_check_integer(lua_State *L, int idx, const char *op, const char *what) {
  int ok;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok) luaL_error(L, "%s: %s must be an integer, got %s", op, what, luaL_typename(L, idx));
  return v;
}

/* Index values held in tensors are 1-based in Lua and 0-based in the core.  Both directions
 * are ops through the front door, so a DTensor's values convert on every rank alike. */
static void add_integer(dt_op_args *a, lua_Integer k) {
  a->flags = DT_ARG_SCALAR | DT_ARG_SCALAR_INT, a->nscalar = 1;
  a->ints[0] = k, a->scalar[0] = (double)k;
}

dt_value *dt_lua_push_zero_based(lua_State *L, dt_value *ix) {
  dt_op_args a = {0};
  add_integer(&a, 1);
  dt_lua_call(L, DT_OP_SUB, &a, &ix, 1);
  return lua_touserdata(L, -1);
}

/* Out of place, then the userdata at idx takes the result: an op's index output may be saved
 * for backward (max/min), and must stay the 0-based tensor the rule reads. */
void dt_lua_to_one_based(lua_State *L, int idx) {
  dt_value *v = dt_lua_check_value(L, idx);
  dt_op_args a = {0};
  add_integer(&a, 1);
  dt_lua_call(L, DT_OP_ADD, &a, &v, 1);
  dt_value *r = lua_touserdata(L, -1), old = *v;
  *v = *r, *r = old;
  dt_value_clear(r);
  lua_pop(L, 1);
}
