/* Tensor creation: dt.zeros/ones/empty/full and their *_like forms, dt.arange, dt.eye. */
#include "base/error.h"
#include "bindings/l_tensor.h"
#include "tensor/tensor.h"

#include <string.h>

/* The argument at idx must be an options table or absent: a stray value is an error, not
 * ignored; so is a device other than "cpu", the only one of this build. */
/* dt.<factory>(shape..., opts?) where shape is varargs or one table. */
static int create_filled(lua_State *L, const char *op, dt_op_id id, double value) {
  dt_op_args a = {0};
  int used = dt_lua_check_shape(L, 1, &a.nints, a.ints, op);
  if (dt_check_shape(op, a.nints, a.ints) != DT_OK) return dt_lua_raise(L); /* names zeros/ones/empty */
  int opts = 1 + used;
  dt_lua_check_opts(L, opts, op);
  a.dtype = dt_lua_opt_dtype_field(L, opts, DT_DEFAULT_FLOAT);
  a.has_dtype = 1;
  a.scalar[0] = value;
  a.nscalar = 1;
  a.name = op; /* errors past the shape check (out of memory) name zeros/ones too */
  dt_lua_call(L, id, &a, NULL, 0);
  return dt_lua_requires_grad_option(L, opts, op);
}

static int l_zeros(lua_State *L) { return create_filled(L, "zeros", DT_OP_FULL, 0); }
static int l_ones(lua_State *L) { return create_filled(L, "ones", DT_OP_FULL, 1); }
static int l_empty(lua_State *L) { return create_filled(L, "empty", DT_OP_EMPTY, 0); }

/* The fill value at idx into a (a Lua integer exactly, beyond 2^53 too). */
static void set_fill_value(lua_State *L, int idx, dt_op_args *a) {
  a->scalar[0] = lua_isboolean(L, idx) ? lua_toboolean(L, idx) : lua_tonumber(L, idx);
  a->nscalar = 1;
  if (lua_isinteger(L, idx)) a->flags |= DT_ARG_SCALAR_INT, a->ints[DT_MAX_DIMS] = lua_tointeger(L, idx);
}

/* dt.full(shape, value, opts?) */
static int l_full(lua_State *L) {
  dt_op_args a = {0};
  if (!lua_istable(L, 1)) return luaL_error(L, "full: shape must be a table, e.g. dt.full({2, 3}, 7)");
  dt_lua_check_shape(L, 1, &a.nints, a.ints, "full");
  if (dt_check_shape("full", a.nints, a.ints) != DT_OK) return dt_lua_raise(L);
  if (!lua_isnumber(L, 2) && !lua_isboolean(L, 2))
    return luaL_error(L, "full: fill value must be a number, got %s", luaL_typename(L, 2));
  set_fill_value(L, 2, &a);
  dt_lua_check_opts(L, 3, "full");
  /* like torch.full: an integer fill gives int64, a boolean gives bool, otherwise float32 */
  dt_dtype def = lua_isboolean(L, 2) ? DT_BOOL : lua_isinteger(L, 2) ? DT_INT64 : DT_DEFAULT_FLOAT;
  a.dtype = dt_lua_opt_dtype_field(L, 3, def);
  a.has_dtype = 1;
  dt_lua_call(L, DT_OP_FULL, &a, NULL, 0);
  return dt_lua_requires_grad_option(L, 3, "full");
}

/* *_like(t, opts?): same shape, dtype from opts or t; the fill value at stack index 3. */
static int like(lua_State *L, dt_op_id id, const char *op) {
  dt_tensor *t = dt_lua_check_tensor(L, 1);
  dt_op_args a = {0};
  a.nints = t->ndim;
  for (int i = 0; i < t->ndim; i++) a.ints[i] = t->shape[i];
  dt_lua_check_opts(L, 2, op);
  a.dtype = dt_lua_opt_dtype_field(L, 2, t->dtype);
  a.has_dtype = 1;
  set_fill_value(L, 3, &a);
  dt_lua_call(L, id, &a, NULL, 0);
  return dt_lua_requires_grad_option(L, 2, op);
}
static int like_value(lua_State *L, dt_op_id id, const char *op, lua_Integer v) {
  lua_settop(L, 2);
  lua_pushinteger(L, v);
  return like(L, id, op);
}
static int l_zeros_like(lua_State *L) { return like_value(L, DT_OP_FULL, "zeros_like", 0); }
static int l_ones_like(lua_State *L) { return like_value(L, DT_OP_FULL, "ones_like", 1); }
static int l_empty_like(lua_State *L) { return like_value(L, DT_OP_EMPTY, "empty_like", 0); }
static int l_full_like(lua_State *L) {
  if (!lua_isnumber(L, 2) && !lua_isboolean(L, 2))
    return luaL_error(L, "full_like: fill value must be a number, got %s", luaL_typename(L, 2));
  lua_settop(L, 3);
  lua_rotate(L, 2, -1); /* t, opts, value */
  return like(L, DT_OP_FULL, "full_like");
}

/* dt.arange(stop), dt.arange(start, stop, step?), opts? last: end exclusive (torch).
 * All-integer arguments give int64, any float argument float32, unless opts.dtype. */
static int l_arange(lua_State *L) {
  int n = 0, all_int = 1;
  double v[3] = {0, 0, 1};
  lua_Integer iv[3] = {0, 0, 1};
  while (n < 3 && lua_type(L, n + 1) == LUA_TNUMBER) {
    v[n] = lua_tonumber(L, n + 1);
    iv[n] = lua_tointeger(L, n + 1);
    all_int &= lua_isinteger(L, n + 1);
    n++;
  }
  if (n == 0) return luaL_error(L, "arange: expected arange(stop), arange(start, stop) or arange(start, stop, step)");
  dt_op_args a = {0};
  a.scalar[0] = n == 1 ? 0 : v[0];
  a.scalar[1] = n == 1 ? v[0] : v[1];
  a.scalar[2] = n == 3 ? v[2] : 1;
  a.nscalar = 3;
  if (all_int) { /* exact beyond 2^53 */
    a.flags = DT_ARG_SCALAR_INT;
    a.ints[0] = n == 1 ? 0 : iv[0];
    a.ints[1] = n == 1 ? iv[0] : iv[1];
    a.ints[2] = n == 3 ? iv[2] : 1;
    a.nints = 3;
  }
  if (!lua_isnoneornil(L, n + 1) && !lua_istable(L, n + 1))
    return luaL_error(L, "arange: expected numbers then an options table, got %s", luaL_typename(L, n + 1));
  dt_lua_check_opts(L, n + 1, "arange");
  a.dtype = dt_lua_opt_dtype_field(L, n + 1, all_int ? DT_INT64 : DT_DEFAULT_FLOAT);
  a.has_dtype = 1;
  dt_lua_call(L, DT_OP_ARANGE, &a, NULL, 0);
  return dt_lua_requires_grad_option(L, n + 1, "arange");
}

/* dt.eye(n, m = n, opts?) */
static int l_eye(lua_State *L) {
  dt_op_args a = {0};
  a.ints[0] = luaL_checkinteger(L, 1);
  int opts = 2;
  if (lua_isinteger(L, 2)) a.ints[1] = lua_tointeger(L, 2), opts = 3;
  else a.ints[1] = a.ints[0];
  dt_lua_check_opts(L, opts, "eye");
  a.nints = 2;
  a.dtype = dt_lua_opt_dtype_field(L, opts, DT_DEFAULT_FLOAT);
  a.has_dtype = 1;
  dt_lua_call(L, DT_OP_EYE, &a, NULL, 0);
  return dt_lua_requires_grad_option(L, opts, "eye");
}

static const luaL_Reg create_funcs[] = {
    {"arange", l_arange},         {"eye", l_eye},
    {"zeros", l_zeros},           {"ones", l_ones},           {"empty", l_empty},
    {"full", l_full},             {"zeros_like", l_zeros_like}, {"ones_like", l_ones_like},
    {"empty_like", l_empty_like}, {"full_like", l_full_like}, {NULL, NULL},
};

void dt_lua_open_create(lua_State *L, const dt_lua_targets *tg) {
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, create_funcs, 0);
  lua_pop(L, 1);
}
