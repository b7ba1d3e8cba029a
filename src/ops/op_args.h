/* The op calling convention: what shape rules and every device's kernels receive.  Dims
 * in here are 0-based and already normalised (the Lua bindings convert); shapes and dtypes
 * have been validated by the op's shape rule before a kernel runs. */
#ifndef DT_OPS_OP_ARGS_H
#define DT_OPS_OP_ARGS_H

#include "ops/op_id.h"
#include "tensor/tensor.h"

#define DT_OP_MAX_INTS (4 * DT_MAX_DIMS) /* index_put_: four per dim */
#define DT_OP_MAX_OUT 3 /* sdpa_backward: dq, dk, dv */

/* flags */
#define DT_ARG_SCALAR 1      /* binary op with a Lua number as its second operand: scalar[0] */
#define DT_ARG_SCALAR_LEFT 2 /* ... and the number is the left operand (2 - t) */
#define DT_ARG_SCALAR_INT 4  /* the number is a Lua integer (promotion: like a Python int) */
#define DT_ARG_ALL_DIMS 8    /* reduction over every dim */
#define DT_ARG_HAS_MIN 16    /* clamp: scalar[0] is a lower bound */
#define DT_ARG_HAS_MAX 32    /* clamp: scalar[1] is an upper bound */
/* Flags private to the pointwise ops (high bits: the generic ones above use the low ones). */
#define DT_ARG_ALPHA_FLOAT (1 << 20) /* add/sub: alpha (scalar[1]) is a non-integer Lua number */
#define DT_ARG_ALPHA_INT (1 << 24)   /* add/sub: alpha is a Lua integer, exactly ints[1] (scalar[1] rounds it) */
#define DT_ARG_WHERE_A_INT (1 << 21) /* where: scalar a (in[1] == NULL) is an integer, in ints[0] */
#define DT_ARG_WHERE_B_INT (1 << 22) /* where: scalar b (in[2] == NULL) is an integer, in ints[1] */
#define DT_ARG_GELU_TANH 1           /* gelu: tanh approximation */
#define DT_ARG_EQUAL_NAN 1           /* allclose: NaN is close to NaN */
/* embedding: the weight holds only the vocab rows ints[0] .. ints[0] + its rows - 1 (a
 * row-wise shard, set by the dispatcher's local args); an id outside them reads a row of
 * zeros instead of being an error, so the shards' lookups sum to the whole one. */
#define DT_ARG_VOCAB_SHARD (1 << 23)
/* index_add on a shard (set by the dispatcher's local args): NO_BASE: this rank's x is not
 * added (x is replicated but the output Partial(sum): another rank adds it); BLOCK: x is the
 * block of the indexed dim that starts at global index ints[1], in a dim of ints[2]: indices
 * outside the block are other ranks' and skipped. */
#define DT_ARG_INDEX_NO_BASE (1 << 25)
#define DT_ARG_INDEX_BLOCK (1 << 26)

typedef struct dt_op_args {
  dt_op_id op;          /* the op, set by the local op (and by callers of a shape rule) */
  const char *name;     /* the op's name, set likewise, for error messages */
  dt_tensor *const *in; /* tensor operands (cat/stack take many) */
  int nin;
  double scalar[4]; /* numbers: the scalar operand, alpha, eps, fill value, clamp bounds... */
  int nscalar;
  int64_t ints[DT_OP_MAX_INTS]; /* dims (0-based) or sizes, as the op documents */
  int nints;
  int keepdim;
  int flags;
  dt_dtype dtype; /* requested dtype (factories, casts), valid when has_dtype */
  int has_dtype;
  /* Random ops on a shard (dist/rng.c): the block of the global tensor that the local
   * tensors are, so each element draws at its global index (ops/random.h).  NULL: the
   * whole tensor. */
  const struct dt_rng_region *region;
} dt_op_args;

/* Output metadata, produced by an op's shape rule. */
typedef struct dt_meta {
  dt_dtype dtype;
  int ndim;
  int64_t shape[DT_MAX_DIMS];
} dt_meta;

/* Kernels of ordinary ops receive out[] already allocated (contiguous, from the shape
 * rule) and fill it; view ops create out[] themselves; in-place ops get out[0] == in[0]. */
typedef int (*dt_kernel_fn)(const dt_op_args *a, dt_tensor **out);
typedef int (*dt_shape_fn)(const dt_op_args *a, dt_meta *out);

#endif
