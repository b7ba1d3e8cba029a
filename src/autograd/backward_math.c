/* Backward rules of the math family (op_list.h's last block).  Formulas are torch's
 * (derivatives.yaml): the rounding ops and sign are piecewise constant, so their gradient is
 * zeros; erf's is 2/sqrt(pi) exp(-x^2); nan_to_num passes the gradient where x is finite;
 * the scans run the gradient back along their dim (cumprod without dividing by zeros). */
#include "autograd/backward.h"

#include <math.h>

#include "base/error.h"

/* floor, ceil, round, trunc, sign: zeros (backward_pointwise.c's overwrite rule) */

/* erf: g 2/sqrt(pi) exp(-x^2) */
static int erf_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *x = dt_bx_in(&e, 0);
  const dt_value *d = dt_bx_mul_scalar(&e, dt_bx_unary(&e, DT_OP_EXP, dt_bx_mul_scalar(&e, dt_bx_mul(&e, x, x), -1)),
                                       2 / sqrt(3.14159265358979323846));
  dt_bx_set(&e, 0, dt_bx_mul(&e, b->grad[0], d));
  return dt_bx_end(&e);
}
DT_BACKWARD(erf, erf_backward, DT_SAVE(0), 0, 0)

/* nan_to_num: g where x is finite (the replaced elements do not depend on x) */
static int nan_to_num_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  dt_bx_set(&e, 0, dt_bx_keep_where(&e, dt_bx_unary(&e, DT_OP_ISFINITE, dt_bx_in(&e, 0)), b->grad[0]));
  return dt_bx_end(&e);
}
DT_BACKWARD(nan_to_num, nan_to_num_backward, DT_SAVE(0), 0, 0)

/* lerp(a, b, w): da = g (1 - w), db = g w, dw = g (b - a); a number w takes no gradient */
static int lerp_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0];
  if (b->args->flags & DT_ARG_SCALAR) {
    double w = b->args->scalar[0];
    if (b->needs[0]) dt_bx_set_summed(&e, 0, dt_bx_mul_scalar(&e, g, 1 - w));
    if (b->needs[1]) dt_bx_set_summed(&e, 1, dt_bx_mul_scalar(&e, g, w));
  } else {
    const dt_value *w = dt_bx_in(&e, 2);
    if (b->needs[0]) dt_bx_set_summed(&e, 0, dt_bx_mul(&e, g, dt_bx_rsub_scalar(&e, 1, w)));
    if (b->needs[1]) dt_bx_set_summed(&e, 1, dt_bx_mul(&e, g, w));
    if (b->needs[2]) dt_bx_set_summed(&e, 2, dt_bx_mul(&e, g, dt_bx_sub(&e, dt_bx_in(&e, 1), dt_bx_in(&e, 0))));
  }
  return dt_bx_end(&e);
}
DT_BACKWARD(lerp, lerp_backward, DT_SAVE_ALL, 0, 0)

/* addcmul(s, t1, t2, v): ds = g, dt1 = g v t2, dt2 = g v t1;
 * addcdiv: dt1 = g v / t2, dt2 = -g v t1 / t2^2 */
static int addc_backward(dt_bw *b, int div) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0], *t1 = dt_bx_in(&e, 1), *t2 = dt_bx_in(&e, 2);
  const dt_value *gv = dt_bx_mul_scalar(&e, g, b->args->scalar[0]);
  if (b->needs[0]) dt_bx_set_summed(&e, 0, g);
  if (b->needs[1]) dt_bx_set_summed(&e, 1, div ? dt_bx_div(&e, gv, t2) : dt_bx_mul(&e, gv, t2));
  if (b->needs[2])
    dt_bx_set_summed(&e, 2, div ? dt_bx_div(&e, dt_bx_mul_scalar(&e, dt_bx_mul(&e, gv, t1), -1), dt_bx_mul(&e, t2, t2)) : dt_bx_mul(&e, gv, t1));
  return dt_bx_end(&e);
}
static int addcmul_backward(dt_bw *b) { return addc_backward(b, 0); }
static int addcdiv_backward(dt_bw *b) { return addc_backward(b, 1); }
DT_BACKWARD(addcmul, addcmul_backward, DT_SAVE(1) | DT_SAVE(2), 0, 0)
DT_BACKWARD(addcdiv, addcdiv_backward, DT_SAVE(1) | DT_SAVE(2), 0, 0)

/* logsumexp: g exp(x - y), with g and y kept over the reduced dims */
static int logsumexp_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *soft = dt_bx_unary(&e, DT_OP_EXP, dt_bx_sub(&e, dt_bx_in(&e, 0), dt_bx_keepdim(&e, dt_bx_out(&e, 0))));
  dt_bx_set(&e, 0, dt_bx_mul(&e, dt_bx_keepdim(&e, b->grad[0]), soft));
  return dt_bx_end(&e);
}
DT_BACKWARD(logsumexp, logsumexp_backward, DT_SAVE(0), DT_SAVE(0), 0)

/* The sum along dim from each position to the end: sum(p) - cumsum(p) + p. */
static const dt_value *reverse_cumsum(dt_bx *e, const dt_value *p, int64_t dim) {
  const dt_value *total = dt_bx_reduce_dims(e, DT_OP_SUM, p, 1, &dim, 1);
  return dt_bx_add(e, dt_bx_sub(e, total, dt_bx_ints(e, DT_OP_CUMSUM, p, 1, &dim)), p);
}

/* cumsum: the gradient summed from each position to the end of the dim */
static int cumsum_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  dt_bx_set(&e, 0, reverse_cumsum(&e, b->grad[0], b->args->ints[0]));
  return dt_bx_end(&e);
}
DT_BACKWARD(cumsum, cumsum_backward, 0, 0, 0)

/* cumprod: dx_k = sum_{j >= k} g_j prod_{i <= j, i != k} x_i, without dividing by a zero.
 * With z = (x == 0), x' = x with zeros as 1, P = cumprod(x'), c = cumsum(z):
 *   nonzero x_k: the terms with no zero up to j (c_j = 0): revsum(g P [c = 0])_k / x_k
 *   zero x_k:    the terms whose only zero up to j is x_k (c_j = 1; none unless x_k is the
 *                first zero): revsum(g P [c = 1])_k
 * Exact for any number of zeros (torch's rule handles them too). */
static int cumprod_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  int64_t dim = b->args->ints[0];
  const dt_value *x = dt_bx_in(&e, 0), *z = dt_bx_scalar(&e, DT_OP_EQ, x, 0);
  const dt_value *x1 = dt_bx_where_scalar(&e, z, 1, x);
  const dt_value *gp = dt_bx_mul(&e, b->grad[0], dt_bx_ints(&e, DT_OP_CUMPROD, x1, 1, &dim));
  const dt_value *c = dt_bx_ints(&e, DT_OP_CUMSUM, z, 1, &dim);
  const dt_value *none_before = reverse_cumsum(&e, dt_bx_keep_where(&e, dt_bx_scalar(&e, DT_OP_EQ, c, 0), gp), dim);
  const dt_value *first_zero = reverse_cumsum(&e, dt_bx_keep_where(&e, dt_bx_scalar(&e, DT_OP_EQ, c, 1), gp), dim);
  dt_bx_set(&e, 0, dt_bx_where(&e, z, first_zero, dt_bx_div(&e, none_before, x1)));
  return dt_bx_end(&e);
}
DT_BACKWARD(cumprod, cumprod_backward, DT_SAVE(0), 0, 0)

/* var_mean: var's gradient g_v 2 (x - mean) / dof plus mean's g_m / n (n: the elements each
 * output reduces; dof = n - correction, as var's rule) */
static int var_mean_backward(dt_bw *b) {
  if (!b->grad[0] && !b->grad[1]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  int64_t nin = 1, nout = 1;
  for (int d = 0; d < b->in_meta[0].ndim; d++) nin *= b->in_meta[0].shape[d];
  for (int d = 0; d < b->out_meta[0].ndim; d++) nout *= b->out_meta[0].shape[d];
  double n = nout > 0 ? (double)(nin / nout) : 0;
  double correction = b->args->nscalar > 0 ? b->args->scalar[0] : 1, dof = n - correction;
  const dt_value *x = dt_bx_in(&e, 0);
  const dt_value *centered = dt_bx_sub(&e, x, dt_bx_keepdim(&e, dt_bx_out(&e, 1)));
  const dt_value *dv = dt_bx_mul(&e, dt_bx_mul_scalar(&e, dt_bx_keepdim(&e, dt_bx_grad(&e, 0)), dof != 0 ? 2 / dof : INFINITY),
                                 centered);
  const dt_value *dm = dt_bx_unreduce(&e, dt_bx_grad(&e, 1));
  dt_bx_set(&e, 0, dt_bx_add(&e, dv, n > 0 ? dt_bx_scalar(&e, DT_OP_DIV, dm, n) : dm));
  return dt_bx_end(&e);
}
DT_BACKWARD(var_mean, var_mean_backward, DT_SAVE(0), DT_SAVE(1), 0)
