/* `require "dtensor.core"` from a stock lua5.4: the C module entry point. */
#include "bindings/l_tensor.h"

int luaopen_dtensor_core(lua_State *L);
int luaopen_dtensor_core(lua_State *L) { return dt_lua_open(L); }
