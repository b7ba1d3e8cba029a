/* `require "dtensor.core"` from a stock lua5.4: the C module entry point (the module's only
 * exported symbol). */
#include "base/export.h"
#include "bindings/l_tensor.h"

DT_API int luaopen_dtensor_core(lua_State *L);
DT_API int luaopen_dtensor_core(lua_State *L) { return dt_lua_open(L); }
