/* Lua bindings of placements: dt.Shard(d), dt.Replicate(), dt.Partial(op), dt._StridedShard(d, k) (immutable
 * userdata values) and the placement lists every DTensor API takes (objects or shorthand
 * strings).  Shard dims are 1-based as written (negative from the end). */
#include <string.h>

#include "base/error.h"
#include "bindings/l_mesh.h"
#include "bindings/l_tensor.h"

#define PLACEMENT_MT "dtensor.Placement"

static dt_placement *check_placement(lua_State *L, int idx) { return luaL_checkudata(L, idx, PLACEMENT_MT); }

void dt_lua_push_placement(lua_State *L, dt_placement p) {
  dt_placement *u = lua_newuserdatauv(L, sizeof *u, 0);
  *u = p;
  luaL_setmetatable(L, PLACEMENT_MT);
}

static int l_shard(lua_State *L) {
  if (!lua_isinteger(L, 1)) return luaL_error(L, "Shard: dim must be an integer, got %s", luaL_typename(L, 1));
  lua_Integer d = lua_tointeger(L, 1);
  if (d == 0) return luaL_error(L, "Shard(0) is invalid: tensor dims are 1-based (Shard(1) is the first dim, Shard(-1) the last)");
  dt_lua_push_placement(L, (dt_placement){DT_SHARD, d > 0 ? (int)(d - 1) : (int)d, DT_REDUCE_SUM, 0});
  return 1;
}
/* dt._StridedShard(dim, split_factor): PyTorch's internal placement, what flattening a
 * non-leading sharded dim gives (doc/dtensor.md); split_factor also as {split_factor = k}
 * or {sf = k}. */
static int l_strided_shard(lua_State *L) {
  if (!lua_isinteger(L, 1)) return luaL_error(L, "_StridedShard: dim must be an integer, got %s", luaL_typename(L, 1));
  lua_Integer d = lua_tointeger(L, 1), k;
  if (d == 0) return luaL_error(L, "_StridedShard(0, ...) is invalid: tensor dims are 1-based");
  if (lua_istable(L, 2)) {
    if (lua_getfield(L, 2, "split_factor") == LUA_TNIL) lua_pop(L, 1), lua_getfield(L, 2, "sf");
    lua_replace(L, 2);
  }
  if (!lua_isinteger(L, 2))
    return luaL_error(L, "_StridedShard: split_factor must be an integer, got %s", luaL_typename(L, 2));
  k = lua_tointeger(L, 2);
  if (k < 1 || k > DT_STRIDED_MAX_SPLIT)
    return luaL_error(L, "_StridedShard: split_factor must be 1..%d, got %I", DT_STRIDED_MAX_SPLIT, (LUAI_UACINT)k);
  dt_lua_push_placement(L, (dt_placement){DT_STRIDED_SHARD, d > 0 ? (int)(d - 1) : (int)d, DT_REDUCE_SUM, (int)k});
  return 1;
}
static int l_replicate(lua_State *L) {
  dt_lua_push_placement(L, (dt_placement){DT_REPLICATE, 0, DT_REDUCE_SUM, 0});
  return 1;
}
static dt_reduce_op check_partial_op(lua_State *L, const char *name) {
  dt_reduce_op op;
  if (dt_reduce_op_from_name(name, &op) != DT_OK)
    luaL_error(L, "Partial: unknown reduce op '%s' (expected sum, avg, max, min or prod)", name);
  return op;
}
static int l_partial(lua_State *L) {
  dt_lua_push_placement(L, (dt_placement){DT_PARTIAL, 0, check_partial_op(L, luaL_optstring(L, 1, "sum")), 0});
  return 1;
}

static int placement_tostring(lua_State *L) {
  char buf[48];
  lua_pushstring(L, dt_placement_format(*check_placement(L, 1), buf, sizeof buf));
  return 1;
}
static int placement_eq(lua_State *L) {
  dt_placement *a = luaL_testudata(L, 1, PLACEMENT_MT), *b = luaL_testudata(L, 2, PLACEMENT_MT);
  return lua_pushboolean(L, a && b && dt_placement_equal(*a, *b)), 1;
}
static int placement_is_shard(lua_State *L) {
  dt_placement *p = check_placement(L, 1);
  int yes = p->kind == DT_SHARD;
  if (yes && !lua_isnoneornil(L, 2)) {
    lua_Integer d = luaL_checkinteger(L, 2);
    yes = (d > 0 ? d - 1 : d) == p->dim;
  }
  return lua_pushboolean(L, yes), 1;
}
static int placement_is_strided_shard(lua_State *L) {
  return lua_pushboolean(L, check_placement(L, 1)->kind == DT_STRIDED_SHARD), 1;
}
static int placement_is_replicate(lua_State *L) { return lua_pushboolean(L, check_placement(L, 1)->kind == DT_REPLICATE), 1; }
static int placement_is_partial(lua_State *L) { return lua_pushboolean(L, check_placement(L, 1)->kind == DT_PARTIAL), 1; }

static const luaL_Reg placement_methods[] = {
    {"is_shard", placement_is_shard},
    {"is_strided_shard", placement_is_strided_shard},
    {"is_replicate", placement_is_replicate},
    {"is_partial", placement_is_partial},
    {NULL, NULL},
};

/* p.dim (1-based, or negative as written), p.reduce_op, methods. */
static int placement_index(lua_State *L) {
  dt_placement *p = check_placement(L, 1);
  const char *k = luaL_checkstring(L, 2);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  if (strcmp(k, "dim") == 0 && (p->kind == DT_SHARD || p->kind == DT_STRIDED_SHARD))
    return lua_pushinteger(L, p->dim >= 0 ? p->dim + 1 : p->dim), 1;
  if (strcmp(k, "split_factor") == 0 && p->kind == DT_STRIDED_SHARD) return lua_pushinteger(L, p->split), 1;
  if (strcmp(k, "reduce_op") == 0 && p->kind == DT_PARTIAL) return lua_pushstring(L, dt_reduce_op_name(p->op)), 1;
  return 0;
}

static void one_placement(lua_State *L, int idx, dt_placement *out, const char *op) {
  dt_placement *u = luaL_testudata(L, idx, PLACEMENT_MT);
  if (u) {
    *out = *u;
    return;
  }
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "%s: a placement is dt.Shard(d), dt.Replicate(), dt.Partial(op) or a string such as \"S1\", \"R\", "
                  "\"P\", got %s", op, luaL_typename(L, idx));
  if (dt_placement_parse(lua_tostring(L, idx), out) != DT_OK) dt_error_prefix("%s", op), dt_lua_raise(L);
}

void dt_lua_check_placements(lua_State *L, int idx, int mesh_ndim, dt_placement *out, const char *op) {
  if (!lua_istable(L, idx)) {
    if (mesh_ndim != 1)
      luaL_error(L, "%s: 1 placement for a %d-d mesh (one per mesh dim is needed)", op, mesh_ndim);
    one_placement(L, idx, out, op);
    return;
  }
  int n = (int)luaL_len(L, idx);
  if (n != mesh_ndim)
    luaL_error(L, "%s: %d placements for a %d-d mesh (one per mesh dim is needed)", op, n, mesh_ndim);
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 1);
    one_placement(L, lua_gettop(L), out + i, op);
    lua_pop(L, 1);
  }
}

void dt_lua_open_placement(lua_State *L, const dt_lua_targets *tg) {
  static const luaL_Reg funcs[] = {
      {"Shard", l_shard},
      {"Replicate", l_replicate},
      {"Partial", l_partial},
      {"_StridedShard", l_strided_shard},
      {NULL, NULL},
  };
  lua_pushvalue(L, tg->module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
  dt_lua_new_meta(L, PLACEMENT_MT, placement_methods, placement_index);
  lua_pushcfunction(L, placement_tostring), lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, placement_eq), lua_setfield(L, -2, "__eq");
  lua_pushstring(L, "Placement"), lua_setfield(L, -2, "__name");
  dt_lua_protect_meta(L, "Placement"); /* an immutable value: nothing to release */
  lua_pop(L, 1);
}
