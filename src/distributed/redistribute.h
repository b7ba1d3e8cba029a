/* Redistribution: from one DTensor spec's placements to others on the same mesh.
 * The planner (redistribute.c) searches the orders of per-mesh-dim steps for the cheapest
 * valid one under an alpha-beta cost model; the executor (redistribute_exec.c) runs a plan
 * on the local shard with the collectives of each mesh dim's group. */
#ifndef DT_DISTRIBUTED_REDISTRIBUTE_H
#define DT_DISTRIBUTED_REDISTRIBUTE_H

#include "base/export.h"

#include "distributed/dtensor.h"

typedef enum dt_step_kind {
  DT_STEP_ALL_GATHER,     /* Shard -> Replicate */
  DT_STEP_ALL_REDUCE,     /* Partial -> Replicate */
  DT_STEP_REDUCE_SCATTER, /* Partial -> Shard */
  DT_STEP_ALL_TO_ALL,     /* Shard(i) -> Shard(j) */
  DT_STEP_CHUNK,          /* Replicate -> Shard: local */
  DT_STEP_PARTITION,      /* Replicate -> Partial: local */
  DT_STEP_PAD,            /* Shard -> Partial(sum/product/max/min): local, the shard in a block of the op's identity */
} dt_step_kind;

#define DT_PLAN_MAX_STEPS 32

typedef struct dt_redist_step {
  dt_step_kind kind;
  int mesh_dim; /* the first (outermost) mesh dim of the step */
  int mask;     /* every mesh dim it changes (bits): several for merged all_gathers */
  dt_placement from, to;
  double bytes; /* bytes this step moves per rank (the cost model's estimate) */
  double cost;  /* seconds, alpha-beta */
} dt_redist_step;

/* A plan from or to _StridedShard placements runs in phases (redistribute_strided.c): each on
 * the tensor seen with the strided dims split into (split, size / split), where a
 * _StridedShard is a plain Shard of the inner dim; its steps' placements are in that view. */
typedef struct dt_redist_phase {
  int first, count; /* its steps */
  dt_placement from[DT_MESH_MAX_DIMS], to[DT_MESH_MAX_DIMS]; /* in the tensor's own dims */
} dt_redist_phase;

typedef struct dt_redist_plan {
  int n;
  dt_redist_step steps[DT_PLAN_MAX_STEPS];
  double cost, bytes;
  int nphase; /* 0: the steps run on the spec itself */
  dt_redist_phase phase[2];
} dt_redist_plan;

/* Cost model constants (seconds and seconds per byte): a collective costs alpha (its fixed
 * cost: launch, synchronisation) + beta * bytes moved per rank; local steps cost nothing. */
#define DT_COST_ALPHA 1e-5
#define DT_COST_BETA 1e-10
/* The local steps that build a Partial (partition, pad) write a whole buffer: a tiny cost, so
 * that a strategy takes them only to save a collective, never on a tie. */
#define DT_COST_LOCAL_PARTIAL 1e-9

/* The cheapest plan from s's placements to `to` (mesh dims of size 1 need no step).
 * Consecutive all_gathers over different mesh dims are merged into one over the group of
 * those dims when the cost model says so (same bytes, fewer latencies).
 * Cached per rank in ctx (key: mesh shape, global shape, dtype size, both placement lists).
 * allow_partial: the target may add Partial placements (distribute_tensor, internal). */
DT_API int dt_redistribute_plan(dt_context *ctx, const dt_dspec *s, const dt_placement *to, int allow_partial,
                         const dt_redist_plan **out);
/* Runs plan on this rank's local shard `local` of spec s; *out is the new local shard
 * (local itself, retained, when the plan is empty).  Off-mesh ranks: *out = local. */
DT_API int dt_redistribute_exec(dt_context *ctx, const dt_dspec *s, const dt_redist_plan *plan, dt_tensor *local,
                         dt_tensor **out);
DT_API const char *dt_step_name(dt_step_kind k);

/* Internal to the planner and executor. */
/* The cheapest step list from s->p to `to` (no _StridedShard), appended to plan. */
int dt_redistribute_search(const dt_dspec *s, const dt_placement *to, int allow_partial, dt_redist_plan *plan);
/* redistribute_strided.c: the phases of a plan with _StridedShard placements on either side. */
int dt_strided_plan(const dt_dspec *s, const dt_placement *to, int allow_partial, dt_redist_plan *plan);
/* The spec u (mesh borrowed) of s seen with the _StridedShard dims of `from` and `to` split,
 * and both placement lists in it; 0 when some dim cannot be seen so (a plain Shard of a
 * strided dim, two split factors). */
int dt_strided_view(const dt_dspec *s, const dt_placement *from, const dt_placement *to, dt_dspec *u,
                    dt_placement *ufrom, dt_placement *uto);
/* Runs steps[0..n) on the local shard x (contiguous, consumed) of spec s; NULL on error. */
dt_tensor *dt_redistribute_run_steps(dt_context *ctx, const dt_dspec *s, const dt_redist_step *steps, int n,
                                     dt_tensor *x);

typedef struct dt_plan_cache dt_plan_cache;
DT_API void dt_plan_cache_free(dt_plan_cache *c);

#endif
