/* Backward rules of the pointwise rows (unary, binary, copies and casts, in-place writes).
 * Binary ops broadcast: each gradient is summed back to its input's shape. */
#include "autograd/backward.h"

#include "base/error.h"

/* a + alpha*b (sub: a - alpha*b); with a scalar: t + s, or s + alpha*t when the scalar is
 * on the left (DT_ARG_SCALAR_LEFT). */
static double alpha_of(const dt_op_args *a) { return a->nscalar >= 2 ? a->scalar[1] : 1.0; }

static int grad_scaled_to(dt_bw *b, int i, double s) {
  dt_value t, r;
  const dt_value *g = b->grad[0];
  if (s != 1.0) {
    if (dt_bw_mul_scalar(b, g, s, &t) != DT_OK) return DT_ERR;
  } else if (dt_bw_share(g, &t) != DT_OK) {
    return DT_ERR;
  }
  int st = dt_bw_sum_to_input(b, &t, i, &r);
  dt_value_clear(&t);
  if (st == DT_OK) dt_bw_set(b, i, &r);
  return st;
}

static int add_sub(dt_bw *b, double sign) {
  if (!b->grad[0]) return DT_OK;
  const dt_op_args *a = b->args;
  double alpha = alpha_of(a);
  if (a->flags & DT_ARG_SCALAR) /* one tensor operand */
    return b->needs[0] ? grad_scaled_to(b, 0, (a->flags & DT_ARG_SCALAR_LEFT) ? sign * alpha : 1.0) : DT_OK;
  if (b->needs[0] && grad_scaled_to(b, 0, 1.0) != DT_OK) return DT_ERR;
  if (b->nin > 1 && b->needs[1] && grad_scaled_to(b, 1, sign * alpha) != DT_OK) return DT_ERR;
  return DT_OK;
}
static int add_backward(dt_bw *b) { return add_sub(b, 1.0); }
static int sub_backward(dt_bw *b) { return add_sub(b, -1.0); }
DT_BACKWARD(add, add_backward, 0, 0, 0)
DT_BACKWARD(sub, sub_backward, 0, 0, 0)
DT_BACKWARD(add_, add_backward, 0, 0, 0) /* self += alpha*b: add's args and gradients */

/* d(a*b) = g*b, g*a */
static int mul_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  const dt_op_args *a = b->args;
  if (a->flags & DT_ARG_SCALAR) return b->needs[0] ? grad_scaled_to(b, 0, a->scalar[0]) : DT_OK;
  for (int i = 0; i < 2; i++) {
    if (!b->needs[i]) continue;
    dt_value t, r;
    if (dt_bw_mul(b, b->grad[0], b->in[1 - i], &t) != DT_OK) return DT_ERR;
    int st = dt_bw_sum_to_input(b, &t, i, &r);
    dt_value_clear(&t);
    if (st != DT_OK) return DT_ERR;
    dt_bw_set(b, i, &r);
  }
  return DT_OK;
}
DT_BACKWARD(mul, mul_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)
/* self *= b: mul's gradients, with self as it was before the write */
DT_BACKWARD(mul_, mul_backward, DT_SAVE(0) | DT_SAVE(1), 0, DT_BW_SELF_BEFORE)

static int neg_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (dt_bw_neg(b, b->grad[0], &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(neg, neg_backward, 0, 0, 0)

/* The gradient passes unchanged (the engine casts it to the input's dtype). */
static int identity_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (dt_bw_share(b->grad[0], &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(clone, identity_backward, 0, 0, 0)
DT_BACKWARD(to, identity_backward, 0, 0, 0)
DT_BACKWARD(contiguous, identity_backward, 0, 0, 0)

/* Writes that replace self's values: self's old values no longer reach the result, so its
 * gradient is zeros (as torch's); copy_'s src takes g, summed back over its broadcasting. */
static int overwrite_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  if (b->needs[0]) dt_bx_set(&e, 0, dt_bx_full_input(&e, 0, 0));
  if (b->nin > 1 && b->needs[1]) dt_bx_set_summed(&e, 1, b->grad[0]);
  return dt_bx_end(&e);
}
DT_BACKWARD(copy_, overwrite_backward, 0, 0, 0)
DT_BACKWARD(fill_, overwrite_backward, 0, 0, 0)
DT_BACKWARD(zero_, overwrite_backward, 0, 0, 0)
/* piecewise constant (the math family): zeros, as torch's */
DT_BACKWARD(floor, overwrite_backward, 0, 0, 0)
DT_BACKWARD(ceil, overwrite_backward, 0, 0, 0)
DT_BACKWARD(round, overwrite_backward, 0, 0, 0)
DT_BACKWARD(trunc, overwrite_backward, 0, 0, 0)
DT_BACKWARD(sign, overwrite_backward, 0, 0, 0)
