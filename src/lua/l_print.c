/* Bindings: print (to be written). */
#include "lua/l_tensor.h"

void dt_lua_open_print(lua_State *L, const dt_lua_targets *tg) {}
