/* The sharding dispatcher: runs an op of the operator table on DTensor operands.
 * Schema key (op, input specs, static args) -> cached decision; on a miss the op family's
 * rule (distributed/sharding_rules) lists strategies, each priced by the redistribute planner's cost of
 * moving the actual inputs there; the cheapest wins (ties: fewer inputs moved, then the
 * rule's order, so every rank agrees).  Then inputs are redistributed, the local kernel runs
 * on the local shards through the ops front door, and the outputs get the strategy's spec.
 * DTLUA_LOG=dispatch prints one line per decision on stderr. */
#ifndef DT_DISTRIBUTED_DISPATCH_H
#define DT_DISTRIBUTED_DISPATCH_H

#include "base/export.h"

#include "distributed/dtensor.h"
#include "distributed/value.h"
#include "kernels/local_op.h"

/* Per mesh dim, one tensor's placements (a strategy holds one row per input). */
typedef dt_placement dt_placement_row[DT_MESH_MAX_DIMS];

typedef struct dt_dispatch_stats {
  long long hits, misses;
} dt_dispatch_stats;

/* Runs op id on distributed operands, any number of them: specs[i] for a->in[i] (NULL: a plain tensor, or an absent
 * optional operand when a->in[i] is NULL).  The per-rank modes (implicit replication, explain)
 * and rule overrides come from ctx.  Explain mode decides without the cache, describes every
 * strategy with its cost (dt_dispatch_explain_text), runs nothing and returns DT_ERR with
 * "explained".  On success out[i] are this rank's local outputs and
 * out_spec[i] their specs (new, owned by the caller); off-mesh ranks get empty locals.
 * In-place ops: out[0] is a->in[0] retained and its placements are kept (or an error). */
DT_API int dt_dispatch(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *specs, dt_tensor **out,
                dt_dspec **out_spec);
DT_API dt_dispatch_stats dt_dispatch_get_stats(dt_context *ctx);
/* The text of the last explain call (valid until the next one). */
DT_API const char *dt_dispatch_explain_text(dt_context *ctx);
/* Forgets every decision (benchmarks of the miss path; tests). */
DT_API void dt_dispatch_cache_clear(dt_context *ctx);

typedef struct dt_dispatch_state dt_dispatch_state;
DT_API void dt_dispatch_state_free(dt_dispatch_state *s);

/* A decision the dispatcher executed: the inputs' target placements (in: nin rows, owned by
 * the holder: free(in)), the outputs' placements and global metadata.  Graph capture copies
 * it after the call (dt_dispatch_last_decision: 1 copied, 0 the last call took no priced
 * decision -- a random or write op --, -1 out of memory) and replay executes it again
 * (dt_dispatch_run_decision: the execution steps of dt_dispatch without key, lookup or
 * pricing; the operands must have the specs the decision was taken for). */
typedef struct dt_dispatch_decision {
  int nin, nout;
  dt_placement_row *in;
  dt_placement out[DT_OP_MAX_OUT][DT_MESH_MAX_DIMS];
  dt_meta meta[DT_OP_MAX_OUT];
} dt_dispatch_decision;
DT_API int dt_dispatch_last_decision(dt_context *ctx, dt_dispatch_decision *d);
DT_API int dt_dispatch_run_decision(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *specs,
                                    const dt_dispatch_decision *d, dt_tensor **out, dt_dspec **out_spec);

/* Named decisions: those of the ops composed from other ops (embedding, cross_entropy, *_like,
 * ops of dt.register_op), kept in the same cache as the dispatcher's own.  The key is the
 * name, a static key (the static args that matter, any bytes) and, per DTensor value, its
 * global shape, dtype, placements and mesh shape.  A decision holds the inputs' target
 * placements (in: one row per value; NULL: they stay), the outputs' (out), a cost (< 0: not
 * priced) for the log, and a blob: whatever else the op keeps (its caller's encoding). */
typedef struct dt_named_decision {
  const dt_placement_row *in;
  const dt_placement_row *out;
  int nout; /* at most DT_OP_MAX_OUT */
  double cost;
  const char *blob;
  size_t nblob;
} dt_named_decision;

/* Looks a named decision up: its blob (valid until the cache changes) and *hit = 1, or
 * *hit = 0.  A hit counts in the stats and logs a line under DTLUA_LOG=dispatch unless
 * quiet (then it is a memo of the op's, not a decision). */
DT_API int dt_dispatch_named_lookup(dt_context *ctx, const char *name, const char *stat, size_t nstat,
                             const dt_value *const *v, int n, int quiet, const char **blob, size_t *nblob, int *hit);
/* Stores (or replaces) a named decision; unless quiet it counts a miss and logs it. */
DT_API int dt_dispatch_named_store(dt_context *ctx, const char *name, const char *stat, size_t nstat,
                            const dt_value *const *v, int n, int quiet, const dt_named_decision *d);

/* A plain tensor t beside DTensors in op `name` (`what`: "argument 2", ...): one element, or
 * any under implicit replication, is taken as replicated (a warning once per rank for one
 * element in 1 dim); anything else is an error saying to convert it. */
DT_API int dt_dispatch_check_plain(dt_context *ctx, const char *name, const char *what, const dt_tensor *t, int implicit);

#endif
