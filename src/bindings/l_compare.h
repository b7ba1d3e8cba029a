/* Bindings of t:equal(u) and t:allclose(u, rtol, atol), registered by l_view.c. */
#ifndef DT_BINDINGS_L_COMPARE_H
#define DT_BINDINGS_L_COMPARE_H

#include "bindings/l_tensor.h"

void dt_lua_open_compare(lua_State *L, const dt_lua_targets *tg);

#endif
