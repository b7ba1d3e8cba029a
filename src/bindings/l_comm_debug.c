/* dt.comm_debug: the collectives a rank issued inside a region (dist/comm_debug.h). */
#include "distributed/comm_debug.h"
#include "bindings/l_dist.h"
#include "bindings/l_dtensor.h"

#define DEBUG_MT "dtensor.CommDebug"

/* The counts table of records [start, n). */
static void push_counts(lua_State *L, int start) {
  dt_comm_debug *d = dt_lua_context(L)->comm_debug;
  lua_newtable(L);
  for (int i = 0; dt_comm_debug_names[i]; i++) lua_pushinteger(L, 0), lua_setfield(L, -2, dt_comm_debug_names[i]);
  lua_newtable(L); /* ops */
  lua_Integer bytes = 0;
  for (int i = start; d && i < d->n; i++) {
    dt_comm_record *r = &d->ops[i];
    lua_getfield(L, -2, r->name);
    lua_Integer c = lua_tointeger(L, -1);
    lua_pop(L, 1);
    lua_pushinteger(L, c + 1), lua_setfield(L, -3, r->name);
    bytes += (lua_Integer)r->bytes;
    lua_createtable(L, 0, 3);
    lua_pushstring(L, r->name), lua_setfield(L, -2, "name");
    lua_pushinteger(L, (lua_Integer)r->bytes), lua_setfield(L, -2, "bytes");
    lua_pushinteger(L, r->group_size), lua_setfield(L, -2, "group_size");
    lua_rawseti(L, -2, i - start + 1);
  }
  lua_setfield(L, -2, "ops");
  lua_pushinteger(L, bytes), lua_setfield(L, -2, "bytes");
}

typedef struct debug_region {
  int start, open;
} debug_region;

static int region_close(lua_State *L) {
  debug_region *r = luaL_checkudata(L, 1, DEBUG_MT);
  if (r->open) dt_comm_debug_end(dt_lua_context(L)), r->open = 0;
  return 0;
}
static int region_counts(lua_State *L) {
  push_counts(L, ((debug_region *)luaL_checkudata(L, 1, DEBUG_MT))->start);
  return 1;
}

/* dt.comm_debug(fn, ...) -> counts (fn's errors propagate after the region closes);
 * dt.comm_debug() -> a region to hold in a <close> variable; region:counts(). */
static int l_comm_debug(lua_State *L) {
  dt_context *ctx = dt_lua_context(L);
  if (lua_isnoneornil(L, 1)) {
    debug_region *r = lua_newuserdatauv(L, sizeof *r, 0);
    r->start = dt_comm_debug_begin(ctx), r->open = 1;
    luaL_setmetatable(L, DEBUG_MT);
    return 1;
  }
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int start = dt_comm_debug_begin(ctx);
  int st = lua_pcall(L, lua_gettop(L) - 1, 0, 0);
  dt_comm_debug_end(ctx);
  if (st != LUA_OK) return lua_error(L);
  push_counts(L, start);
  return 1;
}

void dt_lua_open_comm_debug(lua_State *L, const dt_lua_targets *tg) {
  lua_pushcfunction(L, l_comm_debug);
  lua_setfield(L, tg->module, "comm_debug");
  luaL_newmetatable(L, DEBUG_MT);
  lua_pushcfunction(L, region_close), lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, region_close), lua_setfield(L, -2, "__gc");
  lua_newtable(L);
  lua_pushcfunction(L, region_counts), lua_setfield(L, -2, "counts");
  lua_setfield(L, -2, "__index");
  lua_pushstring(L, "CommDebugRegion"), lua_setfield(L, -2, "__name");
  dt_lua_protect_meta(L, "CommDebugRegion");
  lua_pop(L, 1);
}
