/* Sharding rules: for one op call on global metadata, the strategies it can run under.
 * A strategy gives, per mesh dim, the placement each input must have and the placement of
 * each output.  One file per op family, mirroring src/ops. */
#ifndef DT_DISTRIBUTED_SHARDING_RULES_H
#define DT_DISTRIBUTED_SHARDING_RULES_H

#include "distributed/dispatch.h"

#define DT_RULE_MAX_STRATEGIES 256

/* One row of placements per input (dt_placement_row): a call may have any number of inputs
 * (cat/stack), so the rows live in storage the caller owns (the dispatcher's strategy list,
 * or the rule args' work rows: dt_rule_strategy). */
typedef struct dt_strategy {
  int nin;
  dt_placement_row *in; /* nin rows */
  dt_placement out[DT_OP_MAX_OUT][DT_MESH_MAX_DIMS];
} dt_strategy;

typedef struct dt_rule_args {
  dt_op_id op;
  const dt_op_args *a;  /* in[] are headers with the global shapes (no storage) */
  const dt_dspec *const *spec; /* per input (NULL for an absent operand); plain ones as Replicate */
  int mesh_ndim;
  const dt_meta *out; /* global output metadata from the op's shape rule */
  int nout;
  dt_placement_row *work; /* a->nin rows for the rule's working strategy (dt_rule_strategy) */
} dt_rule_args;

/* Appends strategies to s[*n] (at most DT_RULE_MAX_STRATEGIES, each with its in rows
 * allocated for a->nin inputs) with dt_rule_push; DT_ERR with dt_error on a rule error. */
typedef int (*dt_rule_fn)(const dt_rule_args *r, dt_strategy *s, int *n);

/* The rule of a sharding family; NULL for LOCAL_ONLY and RANDOM (not priced by a rule). */
dt_rule_fn dt_rule_of_family(dt_sharding_family f);
/* The rule of op's family (its row's sharding column), NULL as above. */
dt_rule_fn dt_rule_for(dt_op_id op);

int dt_rule_pointwise(const dt_rule_args *r, dt_strategy *s, int *n);
int dt_rule_linalg(const dt_rule_args *r, dt_strategy *s, int *n);
int dt_rule_reduce(const dt_rule_args *r, dt_strategy *s, int *n);
int dt_rule_view(const dt_rule_args *r, dt_strategy *s, int *n);
int dt_rule_nn(const dt_rule_args *r, dt_strategy *s, int *n);
int dt_rule_index(const dt_rule_args *r, dt_strategy *s, int *n);
int dt_rule_join(const dt_rule_args *r, dt_strategy *s, int *n);
int dt_rule_shape(const dt_rule_args *r, dt_strategy *s, int *n); /* shape_ops.c */

/* Local args: the static args of the local call where they differ from the global call's,
 * for the families whose kernels need to know which block of the global tensors they get.
 * Called by the dispatcher after the inputs are redistributed, before the local op, with
 * la a copy of the global args; derived from the chosen placements only (not from which
 * rule chose them), so a Lua rule override gets them too.  in: the inputs' specs as called
 * (global shapes; NULL for an absent operand), choice: the chosen strategy (the local
 * inputs' placements), out: the output specs. */
typedef int (*dt_local_args_fn)(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                                const dt_dspec *const *out, dt_op_args *la);
/* The local-args function of op's family (its row's sharding column); NULL: the global args
 * serve unchanged. */
dt_local_args_fn dt_local_args_for(dt_op_id op);
/* POINTWISE: fill_ and masked_fill_ into a Partial write its identity where the rank does
 * not hold the value; NULL for the other pointwise ops. */
dt_local_args_fn dt_rule_pointwise_local_args_for(dt_op_id op);
/* VIEW: sizes of view/reshape/expand (the local output shape), squeeze's global size-1 dims. */
int dt_rule_view_local_args(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                            const dt_dspec *const *out, dt_op_args *la);
/* NN: embedding with a row-wise (vocab) sharded weight: DT_ARG_VOCAB_SHARD and the rank's
 * first vocab row (ops/op_args.h). */
int dt_rule_nn_local_args(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                          const dt_dspec *const *out, dt_op_args *la);
/* INDEX: index_add with x replicated beside a Partial(sum) output (DT_ARG_INDEX_NO_BASE off
 * coordinate 0) or x sharded on the indexed dim (DT_ARG_INDEX_BLOCK and the block's start). */
int dt_rule_index_local_args(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                             const dt_dspec *const *out, dt_op_args *la);
/* SHAPE: tril/triu on a block of the last two dims: the diagonal moved by the block's offsets. */
int dt_rule_shape_local_args(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                             const dt_dspec *const *out, dt_op_args *la);

/* Shared helpers (rules/common.c). */
int dt_rule_push(dt_strategy *s, int *n, const dt_strategy *st); /* deduplicated, copies the rows */
/* The rule's working strategy, all Replicate-zeroed, on r->work (one per rule call). */
dt_strategy dt_rule_strategy(const dt_rule_args *r);
/* Copies src's placements into dst, whose rows are allocated for src->nin. */
void dt_strategy_copy(dt_strategy *dst, const dt_strategy *src);
/* The strategies of a rule that decides each mesh dim on its own: choice(r, c, m, st) sets
 * mesh dim m's placements in st for its choice c (0..nchoice-1) and returns 0 when c does not
 * apply; every combination over the mesh dims is pushed. */
typedef int (*dt_rule_choice_fn)(const dt_rule_args *r, int c, int m, dt_strategy *st);
int dt_rule_product(const dt_rule_args *r, int nchoice, dt_rule_choice_fn choice, dt_strategy *s, int *n);
/* A dim gathered on one mesh dim moves less when a mesh dim on which the operands are
 * replicated (free[m]) chunks another dim first, locally (PyTorch's plan): pushes st with
 * output dim e (any but skip, not sharded elsewhere, at least one element per rank) sharded
 * on each such m in turn; fill(r, st, m, o) sets mesh dim m's output placement o and the
 * inputs' that follow it, and restores Replicate after. */
typedef void (*dt_rule_fill_fn)(const dt_rule_args *r, dt_strategy *st, int m, dt_placement o);
void dt_rule_push_chunked(const dt_rule_args *r, dt_strategy *st, const int *free, int skip, dt_rule_fill_fn fill,
                          dt_strategy *s, int *n);
dt_placement dt_rule_R(void);
dt_placement dt_rule_S(int d);
dt_placement dt_rule_P(dt_reduce_op op);

#endif
