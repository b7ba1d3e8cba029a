/* The per-rank generator state of the random ops, as Lua bindings reach it: the
 * (seed, offset) of the rank's runtime context (dist/context.h; no C globals: ranks are
 * threads of one process). */
#ifndef DT_BINDINGS_L_RANDOM_H
#define DT_BINDINGS_L_RANDOM_H

#include <lua.h>

#include "kernels/random.h"

/* This rank's state (the default seed and offset 0 in a fresh context). */
dt_rng_state *dt_lua_rng_state(lua_State *L);

#endif
