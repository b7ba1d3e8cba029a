/* The per-rank runtime context: everything one rank owns (its rank, its world
 * communicator, its cache of sub-groups, its generator state, its caches).  Nothing
 * mutable is global, so N ranks can live as N threads of one process. */
#ifndef DT_DISTRIBUTED_CONTEXT_H
#define DT_DISTRIBUTED_CONTEXT_H

#include "comm/comm.h"
#include "kernels/random.h"

typedef struct dt_group_entry {
  int n;
  int *ranks;    /* world ranks, sorted */
  dt_comm *comm; /* NULL on ranks outside the group */
} dt_group_entry;

typedef struct dt_context {
  int rank, world_size, local_rank;
  const char *backend; /* "threads", "mpi" */
  dt_comm *world;      /* owned */
  dt_group_entry **groups; /* entries never move: Lua group objects point at them */
  int ngroups, capgroups;
  struct dt_comm_debug *comm_debug; /* dist/comm_debug.h, created on first use */
  struct dt_plan_cache *plans;      /* dist/redistribute.h, created on first use */
  struct dt_dispatch_state *dispatch; /* dist/dispatch.h: decision cache, stats; on first use */
  dt_rng_state rng; /* the generator (seed, offset) of every random op (dist/rng.h, doc/random.md) */
} dt_context;

/* Takes ownership of world.  NULL + dt_error on out of memory. */
dt_context *dt_context_new(dt_comm *world, int local_rank);
void dt_context_free(dt_context *ctx);
/* The group over `ranks` (world ranks, any order, distinct), created on first use and
 * cached: later calls with the same set return the same entry. */
int dt_context_group(dt_context *ctx, const int *ranks, int n, const dt_group_entry **out);

#endif
