/* Lua side of the sharding dispatcher (src/dist/dispatch.c).
 * Bindings take their tensors with dt_lua_check_tensor, which refuses DTensors except in
 * the bindings listed here: those only read dtype/ndim of their operands and go through
 * dt_lua_call_op, so a DTensor's local shard can stand for it until the front door.  There
 * (dt_lua_dispatch_try) the binding's stack frame is scanned for the DTensors whose local
 * shards are the op's inputs, and the call goes to the dispatcher instead.
 * Also: dt.dispatch_stats(), dt.dispatch_cache_clear(), dt.implicit_replication(fn | <close>). */
#include <string.h>

#include "base/error.h"
#include "dist/dispatch.h"
#include "lua/l_dist.h"
#include "lua/l_dtensor.h"

#define ALLOWED_KEY "dtlua.dispatch_bindings"
#define IMPLICIT_KEY "dtlua.implicit_replication"

/* The per-lua_State flag "a DTensor was let through since the last op call" lives in the
 * state's extra space (per coroutine, nothing global). */
static int *armed(lua_State *L) { return (int *)lua_getextraspace(L); }

int dt_lua_dispatch_allowed(lua_State *L) {
  lua_Debug ar;
  if (!lua_getstack(L, 0, &ar) || !lua_getinfo(L, "f", &ar)) return 0;
  lua_getfield(L, LUA_REGISTRYINDEX, ALLOWED_KEY);
  lua_insert(L, -2);
  int ok = lua_rawget(L, -2) == LUA_TBOOLEAN;
  lua_pop(L, 2);
  if (ok) *armed(L) = 1;
  return ok;
}

int dt_lua_dispatch_try(lua_State *L, dt_op_id id, const dt_op_args *a, dt_tensor **out, dt_dspec **spec) {
  if (!*armed(L)) return 0;
  *armed(L) = 0;
  dt_dispatch_call c = {0};
  int found = 0, top = lua_gettop(L);
  for (int i = 0; i < a->nin && i < DT_DISPATCH_MAX_IN; i++) {
    if (!a->in[i]) continue;
    int dist = 0, plain = 0;
    for (int s = 1; s <= top; s++) {
      dt_lua_tensor *u = dt_lua_test_any(L, s);
      if (!u || (u->t != a->in[i] && (!u->offmesh || u->offmesh != a->in[i]))) continue;
      if (u->spec) c.specs[i] = u->spec, dist = 1;
      else plain = 1;
    }
    if (dist && plain)
      return dt_error("%s: argument %d is both a DTensor's local shard and a plain tensor (from_local shares "
                      "storage); clone one of them",
                      dt_op_get(id)->name, i + 1),
             dt_lua_raise(L);
    found |= dist;
  }
  if (!found) return 0;
  if (a->nin > DT_DISPATCH_MAX_IN)
    return dt_error("%s: too many operands for DTensor dispatch", dt_op_get(id)->name), dt_lua_raise(L);
  lua_getfield(L, LUA_REGISTRYINDEX, IMPLICIT_KEY);
  c.implicit_replication = (int)lua_tointeger(L, -1) > 0;
  lua_pop(L, 1);
  if (dt_dispatch(dt_lua_context(L), id, a, &c, out, spec) != DT_OK) dt_lua_raise(L);
  return 1;
}

static int l_dispatch_stats(lua_State *L) {
  dt_dispatch_stats s = dt_dispatch_get_stats(dt_lua_context(L));
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, s.hits);
  lua_setfield(L, -2, "hits");
  lua_pushinteger(L, s.misses);
  lua_setfield(L, -2, "misses");
  return 1;
}

static int l_dispatch_cache_clear(lua_State *L) {
  dt_dispatch_cache_clear(dt_lua_context(L));
  return 0;
}

static void implicit_add(lua_State *L, int d) {
  lua_getfield(L, LUA_REGISTRYINDEX, IMPLICIT_KEY);
  lua_Integer n = lua_tointeger(L, -1) + d;
  lua_pop(L, 1);
  lua_pushinteger(L, n < 0 ? 0 : n);
  lua_setfield(L, LUA_REGISTRYINDEX, IMPLICIT_KEY);
}

static int implicit_close(lua_State *L) {
  lua_settop(L, 1);
  if (lua_toboolean(L, lua_upvalueindex(1))) return 0; /* closed already */
  lua_pushboolean(L, 1);
  lua_replace(L, lua_upvalueindex(1));
  implicit_add(L, -1);
  return 0;
}

/* dt.implicit_replication(fn, ...) runs fn with plain tensors taken as replicated;
 * dt.implicit_replication() returns a to-be-closed value: local _ <close> = ... */
static int l_implicit_replication(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_newtable(L);
    lua_newtable(L);
    lua_pushboolean(L, 0);
    lua_pushcclosure(L, implicit_close, 1);
    lua_setfield(L, -2, "__close");
    lua_setmetatable(L, -2);
    implicit_add(L, 1);
    return 1;
  }
  luaL_checktype(L, 1, LUA_TFUNCTION);
  implicit_add(L, 1);
  int st = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  implicit_add(L, -1);
  if (st != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* Bindings whose DTensor operands the dispatcher handles (names in the dt table, the
 * Tensor methods and the metatable). */
static const char *const allowed[] = {
    "add", "sub", "mul", "div", "pow", "remainder", "eq", "ne", "lt", "le", "gt", "ge", "neg", "abs", "exp",
    "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "sin", "cos", "clamp", "clip", "clone",
    "contiguous", "to", "float", "double", "half", "bfloat16", "long", "int", "bool", "where", "add_", "mul_",
    "zero_", "fill_", "copy_", "__add", "__sub", "__mul", "__div", "__mod", "__pow", "__unm",
    "matmul", "mm", "bmm", "addmm",
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "norm", "softmax",
    "log_softmax", NULL,
};

void dt_lua_open_dispatch(lua_State *L, const dt_lua_targets *tg) {
  *armed(L) = 0; /* the main thread's extra space starts uninitialised */
  lua_newtable(L);
  int where[3] = {tg->module, tg->methods, tg->meta};
  for (int w = 0; w < 3; w++)
    for (int i = 0; allowed[i]; i++) {
      if (lua_getfield(L, where[w], allowed[i]) == LUA_TFUNCTION) {
        lua_pushboolean(L, 1);
        lua_rawset(L, -3);
      } else lua_pop(L, 1);
    }
  lua_setfield(L, LUA_REGISTRYINDEX, ALLOWED_KEY);
  lua_pushvalue(L, tg->module);
  lua_pushcfunction(L, l_dispatch_stats);
  lua_setfield(L, -2, "dispatch_stats");
  lua_pushcfunction(L, l_dispatch_cache_clear);
  lua_setfield(L, -2, "dispatch_cache_clear");
  lua_pushcfunction(L, l_implicit_replication);
  lua_setfield(L, -2, "implicit_replication");
  lua_pop(L, 1);
}
