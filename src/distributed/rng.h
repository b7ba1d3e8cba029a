/* The RNG tracker region: the one place where a random op meets a DTensor.  For an op
 * whose output is (a block of) a global tensor it computes this rank's block from the spec,
 * runs the local kernel on it at the context's (seed, offset), so that every element
 * draws at its GLOBAL index, and advances the offset by the words the op consumes over the
 * global tensor on every rank of the world, ranks outside the mesh included (they fill
 * nothing).  No priced strategy choice: the placements follow fixed rules, so every rank
 * fills its part of the same draw.  doc/random.md. */
#ifndef DT_DISTRIBUTED_RNG_H
#define DT_DISTRIBUTED_RNG_H

#include "base/export.h"

#include "distributed/dtensor.h"
#include "kernels/local_op.h"

/* Sets the generator to (seed, offset 0).  sync: every rank of the world takes rank 0's seed
 * (a broadcast over the world: every rank calls it); else each rank keeps its own seed. */
DT_API int dt_rng_manual_seed(dt_context *ctx, int64_t seed, int sync);

/* Words random op id consumes (what the offset advances by): a holds the GLOBAL operands
 * (headers suffice), out the global output metadata from the op's shape rule. */
DT_API uint64_t dt_rng_op_words(dt_op_id id, const dt_op_args *a, const dt_meta *out);

/* A random op with DTensor operands (the dispatcher's path for rows flagged DT_OPF_RANDOM).
 * sp[i]: the spec of a->in[i] (a->in are the local shards).  The outputs follow the input's
 * placements: uniform_/normal_ keep them (Partial(sum): the draw on the ranks at coordinate
 * 0 of each Partial(sum) mesh dim, zeros elsewhere); bernoulli and dropout turn Partial into
 * Replicate (reading the values redistributes them first); multinomial is replicated.
 * Outputs and specs as dt_dispatch returns them. */
DT_API int dt_rng_dispatch(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp, dt_tensor **out,
                    dt_dspec **out_spec);
/* What dt_rng_dispatch would do, one line for dt.explain (no op runs, no state changes). */
DT_API int dt_rng_explain(dt_op_id id, const dt_op_args *a, const dt_dspec *in, char *buf, size_t len);

/* A random factory on a mesh (rand, randn, randint: any Shard/Replicate placements;
 * randperm: replicated only).  a: the op's args with the GLOBAL shape (randperm: n); p: the
 * placements as the user wrote them; a->name, when set, names the call in errors (rand_like).
 * *out: this rank's block, *out_spec: new. */
DT_API int dt_rng_factory(dt_context *ctx, dt_op_id id, const dt_op_args *a, dt_mesh *mesh, const dt_placement *p,
                   dt_tensor **out, dt_dspec **out_spec);

#endif
