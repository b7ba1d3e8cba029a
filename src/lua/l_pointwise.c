/* Bindings: pointwise (to be written). */
#include "lua/l_tensor.h"

void dt_lua_open_pointwise(lua_State *L, const dt_lua_targets *tg) {}
