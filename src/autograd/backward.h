/* Backward rules: one per differentiable row of the op table (its backward column names
 * dt_backward_<name>), written with ops called through the front door, so that on DTensors
 * they pass the sharding dispatcher like the forward did.  The engine runs them with grad
 * mode off, then brings each gradient to its input's dtype and placements (Partial ->
 * Replicate): a rule returns whatever its ops give.
 *
 * A rule reads b (the forward call's args, saved inputs/outputs, the gradients of the
 * outputs) and fills b->grad_in[i] for each input i with b->needs[i] (leaving it empty means
 * "no gradient": zero). */
#ifndef DT_AUTOGRAD_BACKWARD_H
#define DT_AUTOGRAD_BACKWARD_H

#include "autograd/graph.h"
#include "ops/index_key.h"

typedef struct dt_bw {
  dt_context *ctx;
  const dt_node *node;
  const dt_op_args *args;        /* the forward call's static args (in = NULL) */
  int nin;
  const dt_value *const *in;     /* saved forward inputs ([nin]; NULL: not saved, or absent) */
  const dt_slot_meta *in_meta;   /* [nin]: each input's dtype, global shape, gradient spec */
  const dt_value *const *out;    /* saved forward outputs ([nout]; NULL: not saved) */
  const dt_slot_meta *out_meta;  /* [nout] */
  const dt_value *const *grad;   /* [nout]: gradient of each output, NULL when none flowed */
  const unsigned char *needs;    /* [nin] */
  dt_value *grad_in;             /* [nin]: to fill (dt_value_init'ed by the rule's helpers) */
} dt_bw;

typedef int (*dt_backward_fn)(dt_bw *b);

/* save_in / save_out: bit i saves forward input / output i for the rule (DT_SAVE_ALL: all).
 * flags DT_BW_SELF_BEFORE: an in-place op whose rule reads self as it was before the write
 * (saved as a copy in place of input 0). */
#define DT_SAVE_ALL 0xffffffffu
#define DT_SAVE(i) (1u << (i))
#define DT_BW_SELF_BEFORE 1
typedef struct dt_backward_def {
  dt_backward_fn fn; /* NULL: the op has no gradient (the row's `none`) */
  unsigned save_in, save_out;
  int flags;
} dt_backward_def;

#define DT_BACKWARD(name, fn_, save_in_, save_out_, flags_) \
  const dt_backward_def dt_backward_##name = {.fn = fn_, .save_in = save_in_, .save_out = save_out_, .flags = flags_};

/* The rule of a row (its backward column). */
const dt_backward_def *dt_backward_of(dt_op_id op);

/* ---- helpers rules are written with: each makes a new value in *out (the caller clears it,
 *      or hands it to dt_bw_set) and returns DT_OK, or DT_ERR with dt_error set ---- */
/* op on x (and y when not NULL; more inputs: dt_bw_calln) with args a (a->in set here). */
int dt_bw_call(dt_bw *b, dt_op_id op, dt_op_args *a, const dt_value *x, const dt_value *y, dt_value *out);
int dt_bw_calln(dt_bw *b, dt_op_id op, dt_op_args *a, const dt_value *const *in, int nin, dt_value *out);
/* Common ops. */
int dt_bw_mul(dt_bw *b, const dt_value *x, const dt_value *y, dt_value *out);
int dt_bw_mul_scalar(dt_bw *b, const dt_value *x, double s, dt_value *out);
int dt_bw_neg(dt_bw *b, const dt_value *x, dt_value *out);
int dt_bw_unary(dt_bw *b, dt_op_id op, const dt_value *x, dt_value *out); /* exp, sqrt, ... */
/* sum of x over dims (0-based; ndims 0 and all = 1: every dim), keepdim. */
int dt_bw_sum(dt_bw *b, const dt_value *x, const int64_t *dims, int ndims, int all, int keepdim, dt_value *out);
/* x viewed/reshaped to shape; x expanded (broadcast) to shape. */
int dt_bw_reshape(dt_bw *b, const dt_value *x, int ndim, const int64_t *shape, dt_value *out);
int dt_bw_expand(dt_bw *b, const dt_value *x, int ndim, const int64_t *shape, dt_value *out);
int dt_bw_transpose(dt_bw *b, const dt_value *x, int d0, int d1, dt_value *out);
/* x reduced to the shape of input i (the sum over the dims broadcasting added or stretched);
 * to any shape x broadcast from. */
int dt_bw_sum_to_input(dt_bw *b, const dt_value *x, int i, dt_value *out);
int dt_bw_sum_to_shape(dt_bw *b, const dt_value *x, int ndim, const int64_t *shape, dt_value *out);
/* op on x with ints[0..n-1] as its args (dims, sizes: a view's or a reduction's). */
int dt_bw_call_ints(dt_bw *b, dt_op_id op, const dt_value *x, int n, const int64_t *ints, dt_value *out);
/* The view x[k] (select and slice views, as t[k] reads). */
int dt_bw_index_view(dt_bw *b, const dt_value *x, const dt_index_key *k, dt_value *out);
/* The key that takes every element of input i (ranges 0..size step 1), for a rule to narrow. */
void dt_bw_key_all(const dt_bw *b, int i, dt_index_key *k);
/* Zeros with the dtype, shape and gradient placements of input i, with g written into the
 * region k (index_put_): the gradient of an op that keeps part of its input (narrow, slice,
 * select). */
int dt_bw_zeros_with(dt_bw *b, int i, const dt_index_key *k, const dt_value *g, dt_value *out);
/* A reduction's output gradient g (args: the forward's dims, keepdim) expanded back to input
 * 0's shape (backward_reduce.c). */
int dt_bw_unreduce(dt_bw *b, const dt_value *g, dt_value *out);
/* Zeros / a constant with the dtype, shape and gradient placements of input i / output o. */
int dt_bw_full_input(dt_bw *b, int i, double v, dt_value *out);
int dt_bw_full_output(dt_bw *b, int o, double v, dt_value *out);
/* Hands v to grad_in[i] (v is left empty). */
void dt_bw_set(dt_bw *b, int i, dt_value *v);
/* A copy of v that shares its data (local retained, spec copied): for passing a gradient on. */
int dt_bw_share(const dt_value *v, dt_value *out);
/* The positions 0 .. n-1 along dim of input i (n its size there), int64, shaped to broadcast
 * against it (n at dim, 1 elsewhere); replicated on input i's mesh when it is a DTensor.
 * With an index tensor, eq(positions, index) marks where a value came from (max/min). */
int dt_bw_positions(dt_bw *b, int i, int dim, dt_value *out);

/* ---- expressions: a rule written as nested calls ----
 * A dt_bx scope owns the temporaries of one rule.  Each dt_bx_* function returns a value
 * the scope owns, or NULL once a call has failed (and every function given a NULL returns
 * NULL), so a rule composes ops as plain expressions and checks once, in dt_bx_end:
 *
 *   dt_bx x;
 *   dt_bx_begin(&x, b);
 *   const dt_value *y = dt_bx_out(&x, 0);     tanh: g * (1 - y*y)
 *   dt_bx_set(&x, 0, dt_bx_mul(&x, dt_bx_grad(&x, 0), dt_bx_rsub_scalar(&x, 1, dt_bx_mul(&x, y, y))));
 *   return dt_bx_end(&x);
 */
#define DT_BX_MAX 48
typedef struct dt_bx {
  dt_bw *b;
  int n, failed;
  dt_value v[DT_BX_MAX];
} dt_bx;
void dt_bx_begin(dt_bx *x, dt_bw *b);
/* Releases the temporaries: DT_OK, or DT_ERR when a call failed (dt_error says why). */
int dt_bx_end(dt_bx *x);
/* The saved forward input i / output o (an error when the rule did not save it); the
 * gradient of output o (zeros shaped like it when none flowed). */
const dt_value *dt_bx_in(dt_bx *x, int i);
const dt_value *dt_bx_out(dt_bx *x, int o);
const dt_value *dt_bx_grad(dt_bx *x, int o);
/* grad_in[i] = v (v as it is / summed back to input i's shape after broadcasting). */
void dt_bx_set(dt_bx *x, int i, const dt_value *v);
void dt_bx_set_summed(dt_bx *x, int i, const dt_value *v);
/* Zeros (or a constant) shaped like input i, with its dtype and gradient placements. */
const dt_value *dt_bx_full_input(dt_bx *x, int i, double c);
/* Any op: in[] may hold NULL operands the op allows (where's scalars); a->in is set here. */
const dt_value *dt_bx_op(dt_bx *x, dt_op_id op, dt_op_args *a, const dt_value *const *in, int nin);
/* An op with nout outputs (the fused backward kernels), into outs[0..nout-1] (all NULL after
 * a failure); in[0] and in[1] are required. */
int dt_bx_opn(dt_bx *x, dt_op_id op, dt_op_args *a, const dt_value *const *in, int nin, int nout,
              const dt_value **outs);
const dt_value *dt_bx_unary(dt_bx *x, dt_op_id op, const dt_value *p); /* exp, sqrt, abs, ... */
const dt_value *dt_bx_add(dt_bx *x, const dt_value *p, const dt_value *q);
const dt_value *dt_bx_sub(dt_bx *x, const dt_value *p, const dt_value *q);
const dt_value *dt_bx_mul(dt_bx *x, const dt_value *p, const dt_value *q);
const dt_value *dt_bx_div(dt_bx *x, const dt_value *p, const dt_value *q);
/* p op c, with a number c: add, mul, div, pow, and the comparisons (eq, lt, ... -> bool). */
const dt_value *dt_bx_scalar(dt_bx *x, dt_op_id op, const dt_value *p, double c);
const dt_value *dt_bx_add_scalar(dt_bx *x, const dt_value *p, double c);
const dt_value *dt_bx_mul_scalar(dt_bx *x, const dt_value *p, double c);
const dt_value *dt_bx_rsub_scalar(dt_bx *x, double c, const dt_value *p); /* c - p */
/* p op q for two tensors (comparisons -> bool). */
const dt_value *dt_bx_binary(dt_bx *x, dt_op_id op, const dt_value *p, const dt_value *q);
/* where(cond, p, q); p where cond, else 0; 0 where cond, else p. */
const dt_value *dt_bx_where(dt_bx *x, const dt_value *cond, const dt_value *p, const dt_value *q);
const dt_value *dt_bx_keep_where(dt_bx *x, const dt_value *cond, const dt_value *p);
const dt_value *dt_bx_zero_where(dt_bx *x, const dt_value *cond, const dt_value *p);
/* where(cond, c, p) with a number c. */
const dt_value *dt_bx_where_scalar(dt_bx *x, const dt_value *cond, double c, const dt_value *p);
const dt_value *dt_bx_cast(dt_bx *x, const dt_value *p, dt_dtype t);
/* sign(p) in p's dtype: 1, -1, or 0 at 0 (and NaN). */
const dt_value *dt_bx_sgn(dt_bx *x, const dt_value *p);
/* For reductions (the forward's args: ints dims or DT_ARG_ALL_DIMS): op (sum, mean, prod,
 * ...) of p over the forward's reduced dims, keepdim; p (an output or its gradient) reshaped
 * with those dims kept as size 1, so that it broadcasts against input 0; and expanded to
 * input 0's shape. */
const dt_value *dt_bx_reduce_like(dt_bx *x, dt_op_id op, const dt_value *p);
const dt_value *dt_bx_keepdim(dt_bx *x, const dt_value *p);
const dt_value *dt_bx_unreduce(dt_bx *x, const dt_value *p);
/* The positions along dim of input i (dt_bw_positions). */
const dt_value *dt_bx_positions(dt_bx *x, int i, int dim);
/* op on p with ints[0..n-1] as its args (softmax's dim, unsqueeze's, a reshape's sizes...). */
const dt_value *dt_bx_ints(dt_bx *x, dt_op_id op, const dt_value *p, int n, const int64_t *ints);
/* op (sum, mean) of p over dims[0..n-1] (n = 0: every dim), keepdim. */
const dt_value *dt_bx_reduce_dims(dt_bx *x, dt_op_id op, const dt_value *p, int n, const int64_t *dims, int keepdim);
/* p @ q (matmul: 1-d to batched); p with its last two dims swapped. */
const dt_value *dt_bx_matmul(dt_bx *x, const dt_value *p, const dt_value *q);
const dt_value *dt_bx_mT(dt_bx *x, const dt_value *p);
/* p with src's slices added along dim at the index's positions (index_add): the gradient of
 * a gather (index_select, embedding) is one into zeros. */
const dt_value *dt_bx_index_add(dt_bx *x, const dt_value *p, int64_t dim, const dt_value *index, const dt_value *src);

/* Zero-initialised args for op. */
static inline dt_op_args dt_bw_args(void) {
  dt_op_args a = {0};
  return a;
}

#endif
