/* The per-rank generator state of the random ops, behind two small functions so it can
 * move into the per-rank runtime context later.  Today it is a userdata in the Lua
 * registry of the rank's lua_State (no C globals: ranks are threads of one process). */
#ifndef DT_LUA_L_RANDOM_H
#define DT_LUA_L_RANDOM_H

#include <lua.h>
#include <stdint.h>

/* torch's default CPU seed (torch.initial_seed() in a fresh process): reproducible runs
 * without manual_seed, and the same first draws as a fresh dtlua on every rank. */
#define DT_RNG_DEFAULT_SEED UINT64_C(67280421310721)

typedef struct dt_rng_state {
  uint64_t seed;
  uint64_t offset; /* in 32-bit Philox words; a multiple of 4 after every op */
} dt_rng_state;

/* This rank's state (created with the default seed and offset 0 on first use). */
dt_rng_state *dt_lua_rng_state(lua_State *L);
/* Moves the offset past an op that consumed `words` words (already rounded to 4). */
void dt_lua_rng_advance(lua_State *L, uint64_t words);

#endif
