/* Backward rules of the linear-algebra rows.  c = a @ b gives da = g @ b^T and db = a^T @ g
 * (transposes of the last two dims), whatever the batch dims. */
#include "autograd/backward.h"

#include "base/error.h"

/* op(x^T if tx, y^T if ty) times s (s = 1: no multiply). */
static int product(dt_bw *b, dt_op_id op, const dt_value *x, int tx, const dt_value *y, int ty, double s,
                   dt_value *out) {
  dt_value xt, yt, p;
  dt_value_init(&xt, NULL, NULL), dt_value_init(&yt, NULL, NULL);
  int st = DT_OK;
  if (tx) st = dt_bw_transpose(b, x, dt_value_ndim(x) - 2, dt_value_ndim(x) - 1, &xt);
  if (st == DT_OK && ty) st = dt_bw_transpose(b, y, dt_value_ndim(y) - 2, dt_value_ndim(y) - 1, &yt);
  dt_op_args a = dt_bw_args();
  if (st == DT_OK) st = dt_bw_call(b, op, &a, tx ? &xt : x, ty ? &yt : y, s == 1.0 ? out : &p);
  dt_value_clear(&xt), dt_value_clear(&yt);
  if (st != DT_OK || s == 1.0) return st;
  st = dt_bw_mul_scalar(b, &p, s, out);
  dt_value_clear(&p);
  return st;
}

/* c = a @ b (mm, bmm; addmm's a and b at 1, 2 scaled by alpha) */
static int two_operand(dt_bw *b, dt_op_id op, int ia, double s) {
  const dt_value *A = b->in[ia], *B = b->in[ia + 1], *g = b->grad[0];
  dt_value r;
  if (b->needs[ia]) {
    if (product(b, op, g, 0, B, 1, s, &r) != DT_OK) return DT_ERR;
    dt_bw_set(b, ia, &r);
  }
  if (b->needs[ia + 1]) {
    if (product(b, op, A, 1, g, 0, s, &r) != DT_OK) return DT_ERR;
    dt_bw_set(b, ia + 1, &r);
  }
  return DT_OK;
}

static int mm_backward(dt_bw *b) { return b->grad[0] ? two_operand(b, DT_OP_MM, 0, 1.0) : DT_OK; }
DT_BACKWARD(mm, mm_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)
static int bmm_backward(dt_bw *b) { return b->grad[0] ? two_operand(b, DT_OP_BMM, 0, 1.0) : DT_OK; }
DT_BACKWARD(bmm, bmm_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)

/* beta*c + alpha*(a @ b): dc = beta*g summed to c's shape (c broadcasts) */
static int addmm_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  const dt_op_args *a = b->args;
  double beta = a->nscalar >= 1 ? a->scalar[0] : 1.0, alpha = a->nscalar >= 2 ? a->scalar[1] : 1.0;
  if (b->needs[0]) {
    dt_value t, r;
    if (dt_bw_mul_scalar(b, b->grad[0], beta, &t) != DT_OK) return DT_ERR;
    int st = dt_bw_sum_to_input(b, &t, 0, &r);
    dt_value_clear(&t);
    if (st != DT_OK) return DT_ERR;
    dt_bw_set(b, 0, &r);
  }
  return two_operand(b, DT_OP_MM, 1, alpha);
}
DT_BACKWARD(addmm, addmm_backward, DT_SAVE(1) | DT_SAVE(2), 0, 0)

/* ---- matmul: PyTorch's rules.  A 1-d a is the row [1, k], a 1-d b the column [k, 1]; the
 * gradient is taken in that full form [batch..., n, m], summed over the batch dims each
 * operand broadcast along, and reshaped back. */
static int reshaped(dt_bw *b, const dt_value *x, int nd, const int64_t *shape, dt_value *out) {
  if (nd == dt_value_ndim(x)) return dt_bw_share(x, out);
  return dt_bw_reshape(b, x, nd, shape, out);
}

/* x [batch..., r, c] flattened to [batch * r, c] */
static int rows_of(dt_bw *b, const dt_value *x, dt_value *out) {
  int nd = dt_value_ndim(x);
  int64_t shape[2] = {-1, dt_value_shape(x)[nd - 1]};
  if (dt_value_numel(x) == 0) shape[0] = 0; /* -1 is ambiguous for 0 elements */
  return dt_bw_reshape(b, x, 2, shape, out);
}

/* db for a 2-d b and a batched a: one mm over the flattened batch rows, (a rows)^T @ (g rows),
 * instead of a batch of products summed afterwards (F.linear's weight) */
static int flat_db(dt_bw *b, const dt_value *a2, const dt_value *g2, dt_value *out) {
  dt_value ar, gr;
  if (rows_of(b, a2, &ar) != DT_OK) return DT_ERR;
  if (rows_of(b, g2, &gr) != DT_OK) return dt_value_clear(&ar), DT_ERR;
  int st = product(b, DT_OP_MM, &ar, 1, &gr, 0, 1.0, out);
  dt_value_clear(&ar), dt_value_clear(&gr);
  return st;
}

static int matmul_grads(dt_bw *b, const dt_value *a2, const dt_value *b2, const dt_value *g2) {
  const dt_slot_meta *ma = &b->in_meta[0], *mb = &b->in_meta[1];
  for (int i = 0; i < 2; i++) {
    if (!b->needs[i]) continue;
    const dt_value *x = i == 0 ? a2 : b2;
    dt_value full, summed, r;
    int st;
    if (i == 1 && dt_value_ndim(b2) == 2 && dt_value_ndim(a2) > 2) st = flat_db(b, a2, g2, &full);
    else st = i == 0 ? product(b, DT_OP_MATMUL, g2, 0, b2, 1, 1.0, &full) : product(b, DT_OP_MATMUL, a2, 1, g2, 0, 1.0, &full);
    if (st != DT_OK) return DT_ERR;
    st = dt_bw_sum_to_shape(b, &full, dt_value_ndim(x), dt_value_shape(x), &summed);
    dt_value_clear(&full);
    if (st != DT_OK) return DT_ERR;
    const dt_slot_meta *m = i == 0 ? ma : mb;
    st = reshaped(b, &summed, m->ndim, m->shape, &r);
    dt_value_clear(&summed);
    if (st != DT_OK) return DT_ERR;
    dt_bw_set(b, i, &r);
  }
  return DT_OK;
}

static int matmul_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  const dt_slot_meta *ma = &b->in_meta[0], *mb = &b->in_meta[1], *mo = &b->out_meta[0];
  int an = ma->ndim, bn = mb->ndim;
  int nb = mo->ndim - (an > 1) - (bn > 1); /* batch dims of the output */
  int64_t as[2] = {1, ma->shape[0]}, bs[2] = {mb->shape[0], 1}, gs[DT_MAX_DIMS];
  for (int d = 0; d < nb; d++) gs[d] = mo->shape[d];
  gs[nb] = an > 1 ? mo->shape[nb] : 1;
  gs[nb + 1] = bn > 1 ? mo->shape[mo->ndim - 1] : 1;
  dt_value a2, b2, g2;
  if (reshaped(b, b->in[0], an > 1 ? an : 2, an > 1 ? ma->shape : as, &a2) != DT_OK) return DT_ERR;
  if (reshaped(b, b->in[1], bn > 1 ? bn : 2, bn > 1 ? mb->shape : bs, &b2) != DT_OK) return dt_value_clear(&a2), DT_ERR;
  int st = reshaped(b, b->grad[0], nb + 2, gs, &g2);
  if (st == DT_OK) st = matmul_grads(b, &a2, &b2, &g2), dt_value_clear(&g2);
  dt_value_clear(&a2), dt_value_clear(&b2);
  return st;
}
DT_BACKWARD(matmul, matmul_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)
