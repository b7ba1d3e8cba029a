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
#include "kernels/local_op.h"

#define DT_DISPATCH_MAX_IN 4

typedef struct dt_dispatch_stats {
  long long hits, misses;
} dt_dispatch_stats;

/* Runs op id on distributed operands: specs[i] for a->in[i] (NULL: a plain tensor, or an absent
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

/* Decisions of the ops composed in Lua (embedding, cross_entropy, cat/stack, *_like, ops of
 * dt.register_op), cached on the Lua side: count a hit or a miss in the stats and, under
 * DTLUA_LOG=dispatch, log a line in the dispatcher's format (cost < 0: not priced). */
DT_API void dt_dispatch_note_lua(dt_context *ctx, const char *name, const char *inputs, const char *choice, const char *moves,
                          int hit, double cost);
DT_API int dt_dispatch_logging(dt_context *ctx);

/* A plain tensor t beside DTensors in op `name` (`what`: "argument 2", ...): one element, or
 * any under implicit replication, is taken as replicated (a warning once per rank for one
 * element in 1 dim); anything else is an error saying to convert it. */
DT_API int dt_dispatch_check_plain(dt_context *ctx, const char *name, const char *what, const dt_tensor *t, int implicit);

#endif
