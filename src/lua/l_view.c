/* Bindings: views, indexing and slicing (to be written). */
#include "lua/l_tensor.h"

void dt_lua_open_view(lua_State *L, const dt_lua_targets *tg) {}
int dt_lua_tensor_index(lua_State *L) { return 0; }
int dt_lua_tensor_newindex(lua_State *L) { return luaL_error(L, "tensor assignment: not implemented yet"); }
