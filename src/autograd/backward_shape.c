/* Backward rules of the shape and index family (op_list.h's SHAPE rows). */
#include "autograd/backward.h"

#include "base/error.h"

/* op(p, index, q) along the forward's dim (gather: q NULL) */
static const dt_value *along(dt_bx *x, dt_op_id op, const dt_value *p, const dt_value *index, const dt_value *q) {
  dt_op_args a = dt_bw_args();
  a.ints[0] = x->b->args->ints[0], a.nints = 1;
  const dt_value *in[3] = {p, index, q};
  if (!p || !index || (op != DT_OP_GATHER && !q)) {
    x->failed = 1; /* an operand failed: its error is set */
    return NULL;
  }
  return dt_bx_op(x, op, &a, in, op == DT_OP_GATHER ? 2 : 3);
}

/* gather(x, index): each gathered element's gradient added back where it came from */
static int gather_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  dt_bx_set(&x, 0, along(&x, DT_OP_SCATTER_ADD, dt_bx_full_input(&x, 0, 0.0), dt_bx_in(&x, 1), dt_bx_grad(&x, 0)));
  return dt_bx_end(&x);
}
DT_BACKWARD(gather, gather_backward, DT_SAVE(1), 0, 0)

/* scatter(x, index, src): x's gradient is g with the written positions zeroed; src's is g at
 * them (a position written twice: the last write's source gets it, as the forward kept it --
 * torch leaves that case undefined) */
static int scatter_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  const dt_value *g = dt_bx_grad(&x, 0), *index = dt_bx_in(&x, 1);
  if (b->needs[0]) dt_bx_set(&x, 0, along(&x, DT_OP_SCATTER, g, index, dt_bx_full_input(&x, 2, 0.0)));
  if (b->needs[2]) dt_bx_set(&x, 2, along(&x, DT_OP_GATHER, g, index, NULL));
  return dt_bx_end(&x);
}
DT_BACKWARD(scatter, scatter_backward, DT_SAVE(1), 0, 0)

/* scatter_add(x, index, src): x's gradient passes; src's is g at the positions */
static int scatter_add_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  const dt_value *g = dt_bx_grad(&x, 0);
  if (b->needs[0]) dt_bx_set(&x, 0, g);
  if (b->needs[2]) dt_bx_set(&x, 2, along(&x, DT_OP_GATHER, g, dt_bx_in(&x, 1), NULL));
  return dt_bx_end(&x);
}
DT_BACKWARD(scatter_add, scatter_add_backward, DT_SAVE(1), 0, 0)

/* sort, topk: the values' gradient back at the positions the indices output names */
static int sort_topk_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  dt_bx_set(&x, 0, along(&x, DT_OP_SCATTER_ADD, dt_bx_full_input(&x, 0, 0.0), dt_bx_out(&x, 1), dt_bx_grad(&x, 0)));
  return dt_bx_end(&x);
}
DT_BACKWARD(sort, sort_topk_backward, 0, DT_SAVE(1), 0)
DT_BACKWARD(topk, sort_topk_backward, 0, DT_SAVE(1), 0)

/* flip: flipped back; tril/triu: the same mask (the forward's args) */
static int same_op_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  dt_op_args a = *b->args;
  const dt_value *g = dt_bx_grad(&x, 0);
  dt_bx_set(&x, 0, dt_bx_op(&x, b->node->op, &a, &g, 1));
  return dt_bx_end(&x);
}
DT_BACKWARD(flip, same_op_backward, 0, 0, 0)
DT_BACKWARD(tril, same_op_backward, 0, 0, 0)
DT_BACKWARD(triu, same_op_backward, 0, 0, 0)

/* roll: rolled back by the negated shifts */
static int roll_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  dt_op_args a = *b->args;
  for (int i = 0, n = a.nints / 2; i < n; i++) { /* -(shift mod size): no overflow for INT64_MIN */
    int64_t size = b->in_meta[0].ndim ? b->in_meta[0].shape[a.ints[n + i]] : 1;
    a.ints[i] = size ? -(a.ints[i] % size) : 0;
  }
  const dt_value *g = dt_bx_grad(&x, 0);
  dt_bx_set(&x, 0, dt_bx_op(&x, DT_OP_ROLL, &a, &g, 1));
  return dt_bx_end(&x);
}
DT_BACKWARD(roll, roll_backward, 0, 0, 0)

/* repeat: each output dim e is reps[e] copies of size s: viewed as (reps[e], s) and summed
 * over the copies, one dim at a time; then the leading new dims dropped */
static int repeat_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  const dt_slot_meta *in = &b->in_meta[0];
  int n = b->args->nints, lead = n - in->ndim;
  int64_t shape[DT_MAX_DIMS];
  const dt_value *g = dt_bx_grad(&x, 0);
  for (int e = 0; e < n; e++) shape[e] = b->out_meta[0].shape[e];
  for (int e = 0; e < n && g; e++) {
    int64_t r = b->args->ints[e], s = e < lead ? 1 : in->shape[e - lead];
    if (r == 1) continue;
    if (n + 1 > DT_MAX_DIMS) return dt_bx_end(&x), dt_error("repeat: backward of %d repeats needs %d dims (at most %d)", n, n + 1, DT_MAX_DIMS);
    int64_t split[DT_MAX_DIMS];
    for (int k = 0, j = 0; k < n; k++) {
      if (k == e) split[j++] = r, split[j++] = s;
      else split[j++] = shape[k];
    }
    int64_t dim = e;
    g = dt_bx_reduce_dims(&x, DT_OP_SUM, dt_bx_ints(&x, DT_OP_RESHAPE, g, n + 1, split), 1, &dim, 0);
    shape[e] = s;
  }
  dt_bx_set(&x, 0, dt_bx_ints(&x, DT_OP_RESHAPE, g, in->ndim, in->shape));
  return dt_bx_end(&x);
}
DT_BACKWARD(repeat, repeat_backward, 0, 0, 0)

/* diag: 1-d -> matrix: the gradient's diagonal; matrix -> 1-d: the gradient placed on the
 * diagonal of a matrix of the input's shape */
static int diag_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  dt_op_args a = dt_bw_args();
  a.ints[0] = b->args->nints ? b->args->ints[0] : 0, a.nints = 1;
  if (b->in_meta[0].ndim == 2) a.ints[1] = b->in_meta[0].shape[0], a.ints[2] = b->in_meta[0].shape[1], a.nints = 3;
  const dt_value *g = dt_bx_grad(&x, 0);
  dt_bx_set(&x, 0, dt_bx_op(&x, DT_OP_DIAG, &a, &g, 1));
  return dt_bx_end(&x);
}
DT_BACKWARD(diag, diag_backward, 0, 0, 0)
