/* The DTensor API (doc/dtensor.md): conversions between tensors and DTensors and between
 * placements, and writes into a DTensor.  Values in, new values out: each output is
 * initialised (dt_value_init) only on success and then belongs to the caller; inputs are
 * never consumed.  Every check that can fail reads global metadata (or metadata all ranks
 * agreed on first), so an error is raised alike on every rank before any data collective;
 * messages start with the op's name.  These are the functions autograd makes
 * differentiable.  Off-mesh ranks hold an empty {0} local tensor and join no collective. */
#ifndef DT_DISTRIBUTED_DTENSOR_API_H
#define DT_DISTRIBUTED_DTENSOR_API_H

#include "base/export.h"

#include <limits.h>

#include "ops/index_key.h"
#include "distributed/value.h"

/* src_rank of dt_distribute_tensor: every rank chunks its own tensor, no communication. */
#define DT_SRC_LOCAL INT_MIN

/* A DTensor of placements p (Shard dims 0-based, negative from the end) on mesh m from
 * the tensor t of world rank src_rank: its metadata is broadcast, then its data (broadcast
 * when nothing is sharded, else one scatter of the shards); Partial placements start as the
 * value on coordinate 0 (sum) and zeros elsewhere.  t may be NULL on ranks other than
 * src_rank.  src_rank = DT_SRC_LOCAL: every mesh rank passes the same t and keeps its chunk. */
DT_API int dt_distribute_tensor(dt_context *ctx, dt_tensor *t, dt_mesh *m, const dt_placement *p, int src_rank,
                         dt_value *out);

/* The DTensor whose shard on this rank is local (taken as is, retained).  shape (ndim
 * entries; on a mesh rank ndim = local->ndim) is the global shape; NULL: even shards, the
 * local shape times the ranks sharding each dim.  run_check: every rank's dtype and local
 * shape are checked against the spec (an all_gather of metadata), and Replicate mesh dims
 * are made to agree (a broadcast from coordinate 0); the local is then a copy. */
DT_API int dt_from_local(dt_context *ctx, dt_tensor *local, dt_mesh *m, const dt_placement *p, int run_check, int ndim,
                  const int64_t *shape, dt_value *out);

/* This rank's shard of the DTensor v, retained (no communication). */
DT_API int dt_to_local(const dt_value *v, dt_tensor **out);

/* The whole global tensor of the DTensor v on every mesh rank (to Replicate everywhere);
 * off-mesh ranks get their empty local. */
DT_API int dt_full_tensor(dt_context *ctx, const dt_value *v, dt_tensor **out);

/* v with placements `to` on mesh (NULL: v's; another mesh is refused).  A Partial target v
 * lacks is reached locally: from Replicate coordinate 0 of the mesh dim keeps the value and
 * the others hold zeros for Partial(sum) (ones for product), every rank keeps it for
 * avg/max/min; from Shard the shard is padded with the op's identity (avg: gathered first). */
DT_API int dt_redistribute(dt_context *ctx, const dt_value *v, dt_mesh *mesh, const dt_placement *to, dt_value *out);

/* dt_redistribute, by the name the gradients' code (autograd's grad_placements) calls it. */
DT_API int dt_redistribute_to_any(dt_context *ctx, const dt_value *v, dt_mesh *mesh, const dt_placement *to,
                                  dt_value *out);

/* dt_redistribute's plan as text (one line per step, then the total), malloc'd in *text; no
 * collective runs. */
DT_API int dt_explain_redistribute(dt_context *ctx, const dt_value *v, const dt_placement *to, char **text);
/* The redistribute planner's price (seconds) of moving v to placements `to`, or -1 when no
 * plan reaches them (strategies of the ops composed in Lua are priced with it).  DT_ERR for
 * placements that do not fit v. */
DT_API int dt_redistribute_cost(dt_context *ctx, const dt_value *v, const dt_placement *to, double *cost);

/* dst[key] = src in place, dst's placements kept (key resolved against dst's global shape).
 * src: a DTensor on dst's mesh (redistributed so that each rank finds what it writes in its
 * own block), or a plain tensor of one element (a scalar: the same everywhere; the caller
 * checks that a Lua number fits dst's dtype), or of several inside implicit replication.
 * Partial(sum) targets: ranks off coordinate 0 of a Partial(sum) mesh dim write 0. */
DT_API int dt_dtensor_write(dt_context *ctx, dt_value *dst, const dt_index_key *key, const dt_value *src);

#endif
