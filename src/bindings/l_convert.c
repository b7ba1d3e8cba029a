/* Values between Lua and tensors: dt.tensor(nested table), t:item(), t:totable(). */
#include "base/error.h"
#include "bindings/l_tensor.h"

#include <math.h>

typedef struct {
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  int has_float, has_int, has_bool;
} nested_info;

/* Walks the first elements to find the shape, then checks every element against it. */
static void nested_shape(lua_State *L, int idx, nested_info *info) {
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1) && !dt_lua_test_tensor(L, -1)) {
    if (info->ndim == DT_MAX_DIMS) luaL_error(L, "tensor: nesting deeper than %d dims", DT_MAX_DIMS);
    int64_t n = (int64_t)luaL_len(L, -1);
    info->shape[info->ndim++] = n;
    if (n == 0) break;
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

static void nested_fill(lua_State *L, int idx, nested_info *info, int depth, dt_tensor *t, int64_t *pos) {
  if (depth == info->ndim) {
    char *p = (char *)dt_tensor_data(t) + *pos * (int64_t)dt_dtype_size(t->dtype);
    (*pos)++;
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN: dt_store_i64(p, t->dtype, lua_toboolean(L, idx)); return;
    case LUA_TNUMBER:
      if (dt_check_value_fits("tensor", t->dtype, lua_isinteger(L, idx), lua_tointeger(L, idx), lua_tonumber(L, idx)) !=
          DT_OK)
        dt_lua_raise(L);
      if (lua_isinteger(L, idx)) dt_store_i64(p, t->dtype, lua_tointeger(L, idx));
      else dt_store_f64(p, t->dtype, lua_tonumber(L, idx));
      return;
    default:
      luaL_error(L, "tensor: elements must be numbers or booleans, got %s at depth %d", luaL_typename(L, idx), depth + 1);
    }
  }
  if (!lua_istable(L, idx) || (int64_t)luaL_len(L, idx) != info->shape[depth])
    luaL_error(L, "tensor: ragged nested table: expected %d elements at depth %d, got %s", (int)info->shape[depth],
               depth + 1, lua_istable(L, idx) ? lua_pushfstring(L, "%d", (int)luaL_len(L, idx)) : luaL_typename(L, idx));
  for (int64_t i = 1; i <= info->shape[depth]; i++) {
    lua_geti(L, idx, i);
    nested_fill(L, lua_gettop(L), info, depth + 1, t, pos);
    lua_pop(L, 1);
  }
}

static void nested_kinds(lua_State *L, int idx, nested_info *info, int depth) {
  if (depth == info->ndim) {
    int tp = lua_type(L, idx);
    if (tp == LUA_TBOOLEAN) info->has_bool = 1;
    else if (tp == LUA_TNUMBER && lua_isinteger(L, idx)) info->has_int = 1;
    else if (tp == LUA_TNUMBER) info->has_float = 1;
    return;
  }
  if (!lua_istable(L, idx)) return; /* reported by nested_fill */
  int64_t n = (int64_t)luaL_len(L, idx);
  for (int64_t i = 1; i <= n; i++) {
    lua_geti(L, idx, i);
    nested_kinds(L, lua_gettop(L), info, depth + 1);
    lua_pop(L, 1);
  }
}

/* dt.tensor(value, opts?): value is a number, a boolean, a nested table or a tensor (copied). */
static int l_tensor(lua_State *L) {
  dt_tensor *src = dt_lua_test_tensor(L, 1);
  if (src) {
    dt_dtype d = dt_lua_opt_dtype_field(L, 2, src->dtype);
    dt_tensor *c = dt_tensor_contiguous_as(src, d);
    if (c == src) { /* always a new tensor */
      dt_tensor_release(c);
      c = dt_tensor_clone(src);
    }
    dt_lua_push_tensor(L, c);
    return dt_lua_requires_grad_option(L, 2, "tensor");
  }
  int tp = lua_type(L, 1);
  if (tp != LUA_TTABLE && tp != LUA_TNUMBER && tp != LUA_TBOOLEAN)
    return luaL_error(L, "tensor: expected a number, boolean, nested table or tensor, got %s", luaL_typename(L, 1));
  nested_info info = {0};
  if (tp == LUA_TTABLE) nested_shape(L, 1, &info);
  nested_kinds(L, 1, &info, 0);
  /* like torch.tensor: any float -> float32, else any integer -> int64, else bool */
  dt_dtype def = info.has_float ? DT_DEFAULT_FLOAT : info.has_int ? DT_INT64 : info.has_bool ? DT_BOOL : DT_DEFAULT_FLOAT;
  dt_dtype dtype = dt_lua_opt_dtype_field(L, 2, def);
  dt_tensor *t = dt_tensor_empty(dtype, info.ndim, info.shape, DT_HOST);
  if (!t) return dt_lua_raise(L);
  dt_lua_push_tensor(L, t); /* owned by Lua before anything can raise */
  int64_t pos = 0;
  nested_fill(L, 1, &info, 0, t, &pos);
  return dt_lua_requires_grad_option(L, 2, "tensor");
}

static void push_element(lua_State *L, const char *p, dt_dtype dtype) {
  if (dtype == DT_BOOL) lua_pushboolean(L, *p != 0);
  else if (dt_dtype_is_integer(dtype)) lua_pushinteger(L, dt_load_i64(p, dtype));
  else lua_pushnumber(L, dt_load_f64(p, dtype));
}

static int l_item(lua_State *L) {
  dt_lua_capture_refuse(L, "t:item() (a tensor's value read into Lua: control flow on tensor values)");
  dt_tensor *t = dt_lua_check_tensor(L, 1);
  int64_t n = dt_tensor_numel(t);
  if (n != 1) return luaL_error(L, "item: a tensor with %d elements cannot be converted to a number", (int)n);
  dt_tensor *h = dt_tensor_to_host(t); /* t itself, retained, for host memory */
  if (!h) return dt_lua_raise(L);
  push_element(L, dt_tensor_data(h), h->dtype);
  dt_tensor_release(h);
  return 1;
}

static void push_nested(lua_State *L, const dt_tensor *t, int depth, const char *p) {
  if (depth == t->ndim) {
    push_element(L, p, t->dtype);
    return;
  }
  int64_t step = t->stride[depth] * (int64_t)dt_dtype_size(t->dtype);
  luaL_checkstack(L, 4, "totable");
  lua_createtable(L, (int)t->shape[depth], 0);
  for (int64_t i = 0; i < t->shape[depth]; i++) {
    push_nested(L, t, depth + 1, p + i * step);
    lua_rawseti(L, -2, i + 1);
  }
}

/* t:totable(): nested Lua tables (a 0-d tensor gives its number). */
static int l_totable(lua_State *L) {
  dt_lua_capture_refuse(L, "t:totable() (tensor values read into Lua)");
  dt_tensor *t = dt_lua_check_tensor(L, 1);
  /* values are read on the host: a copy only for a device tensor (not leaked by raises otherwise) */
  dt_tensor *h = dt_device_is_host(dt_tensor_device(t)) ? NULL : dt_tensor_to_host(t);
  if (!dt_device_is_host(dt_tensor_device(t)) && !h) return dt_lua_raise(L);
  push_nested(L, h ? h : t, 0, dt_tensor_data(h ? h : t));
  dt_tensor_release(h);
  return 1;
}

void dt_lua_open_convert(lua_State *L, const dt_lua_targets *tg) {
  lua_pushcfunction(L, l_tensor);
  lua_setfield(L, tg->module, "tensor");
  lua_pushcfunction(L, l_item);
  lua_setfield(L, tg->methods, "item");
  lua_pushcfunction(L, l_totable);
  lua_setfield(L, tg->methods, "totable");
  lua_pushcfunction(L, l_totable);
  lua_setfield(L, tg->methods, "tolist");
}
