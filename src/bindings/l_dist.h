/* The rank's runtime context as seen from Lua: stored in the registry of each rank's
 * lua_State by the launcher; a stock lua5.4 gets a single-rank world on first use. */
#ifndef DT_BINDINGS_L_DIST_H
#define DT_BINDINGS_L_DIST_H

#include <lua.h>

#include "distributed/context.h"

/* The context of the rank that owns L (creates a 1-rank world if none was set). */
dt_context *dt_lua_context(lua_State *L);
/* Installs ctx as L's context (borrowed: the launcher frees it after lua_close). */
void dt_lua_set_context(lua_State *L, dt_context *ctx);
/* Pushes a group object (as dt.distributed.new_group returns) for a cached group. */
void dt_lua_push_group(lua_State *L, const dt_group_entry *e);

#endif
