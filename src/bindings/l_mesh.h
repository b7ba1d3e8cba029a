/* DeviceMesh and placement userdata (l_mesh.c, l_placement.c), shared with the DTensor
 * bindings. */
#ifndef DT_BINDINGS_L_MESH_H
#define DT_BINDINGS_L_MESH_H

#include <lauxlib.h>
#include <lua.h>

#include "distributed/mesh.h"
#include "distributed/placement.h"
#include "bindings/l_tensor.h"

dt_mesh *dt_lua_test_mesh(lua_State *L, int idx, const char *op); /* NULL if not a mesh; a released one raises */
/* The mesh at idx, or the current mesh (mesh:use()) when idx is nil; raises naming op. */
dt_mesh *dt_lua_opt_mesh(lua_State *L, int idx, const char *op);
/* Pushes a mesh userdata owning m's reference (m NULL raises the dt_error). */
void dt_lua_push_mesh(lua_State *L, dt_mesh *m);
/* A placement list at idx: a table of placements or shorthand strings ("S1", "R", "P",
 * "P(max)"), or one placement / one string for a 1-d mesh.  Exactly mesh_ndim entries;
 * Shard dims as written (1-based -> 0-based, negatives kept). */
void dt_lua_check_placements(lua_State *L, int idx, int mesh_ndim, dt_placement *out, const char *op);
/* Pushes a placement (Shard dims 0-based in p, shown 1-based). */
void dt_lua_push_placement(lua_State *L, dt_placement p);

/* A metatable `name` whose __index looks up methods first, then calls index (left on the stack). */
void dt_lua_new_meta(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction index);
void dt_lua_open_placement(lua_State *L, const dt_lua_targets *tg);

#endif
