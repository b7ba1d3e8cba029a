/* Shared by the DTensor binding files (l_dtensor.c, l_dtensor_factory.c, l_comm_debug.c). */
#ifndef DT_BINDINGS_L_DTENSOR_H
#define DT_BINDINGS_L_DTENSOR_H

#include "distributed/dtensor.h"
#include "bindings/l_tensor.h"

/* The DTensor at idx; raises naming op for a plain tensor. */
dt_value *dt_lua_check_dtensor(lua_State *L, int idx, const char *op);
/* A spec (dt_dspec_new) or a raised error. */
dt_dspec *dt_lua_new_spec(lua_State *L, dt_mesh *m, const dt_placement *p, int ndim, const int64_t *shape,
                          dt_dtype dtype, const char *op);
void dt_lua_open_dtensor_factory(lua_State *L, const dt_lua_targets *tg);
void dt_lua_open_comm_debug(lua_State *L, const dt_lua_targets *tg);
/* l_dispatch.c: registers the bindings the dispatcher serves (after all the others). */
void dt_lua_open_dispatch(lua_State *L, const dt_lua_targets *tg);

#endif
