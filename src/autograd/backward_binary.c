/* Backward rules of the pointwise binary rows beyond add/sub/mul (backward_pointwise.c):
 * div, pow, remainder, and the selections where and masked_fill.  Operands broadcast, so
 * each gradient is summed back to its input's shape.  A number operand (DT_ARG_SCALAR:
 * scalar[0], on the left with DT_ARG_SCALAR_LEFT) takes no gradient; the one tensor is
 * input 0 either way.  Formulas and their edge cases are torch's (derivatives.yaml). */
#include "autograd/backward.h"

#include <math.h>

#include "base/error.h"

static int scalar_form(const dt_bw *b) { return (b->args->flags & DT_ARG_SCALAR) != 0; }
static int scalar_left(const dt_bw *b) { return (b->args->flags & DT_ARG_SCALAR_LEFT) != 0; }

/* a / b: da = g / b, db = -g a / b^2; with a number s: t / s -> g / s, s / t -> -g s / t^2 */
static int div_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0];
  double s = b->args->scalar[0];
  if (scalar_form(b) && scalar_left(b)) {
    const dt_value *t = dt_bx_in(&e, 0);
    dt_bx_set(&e, 0, dt_bx_mul_scalar(&e, dt_bx_div(&e, g, dt_bx_mul(&e, t, t)), -s));
  } else if (scalar_form(b)) {
    dt_bx_set(&e, 0, dt_bx_scalar(&e, DT_OP_DIV, g, s));
  } else {
    const dt_value *den = dt_bx_in(&e, 1), *ga = dt_bx_div(&e, g, den);
    if (b->needs[0]) dt_bx_set_summed(&e, 0, ga);
    if (b->needs[1]) dt_bx_set_summed(&e, 1, dt_bx_unary(&e, DT_OP_NEG, dt_bx_div(&e, dt_bx_mul(&e, ga, dt_bx_in(&e, 0)), den)));
  }
  return dt_bx_end(&e);
}
DT_BACKWARD(div, div_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)

/* a ^ b, y = a ^ b:
 *   da = g b a^(b-1), 0 where b == 0 (no 0 * inf at a = 0)
 *   db = g y log(a), 0 where a == 0 and b >= 0 (the limit, where log(a) = -inf)
 * t ^ s: zeros for s == 0, else g s t^(s-1); s ^ t: g y log(s), 0 where s == 0 and t >= 0. */
static const dt_value *grad_base(dt_bx *e, const dt_value *g, const dt_value *a, const dt_value *expo) {
  const dt_value *d = dt_bx_mul(e, expo, dt_bx_binary(e, DT_OP_POW, a, dt_bx_add_scalar(e, expo, -1)));
  return dt_bx_zero_where(e, dt_bx_scalar(e, DT_OP_EQ, expo, 0), dt_bx_mul(e, g, d));
}
static const dt_value *grad_exponent(dt_bx *e, const dt_value *g, const dt_value *a, const dt_value *expo,
                                     const dt_value *y) {
  const dt_value *d = dt_bx_mul(e, y, dt_bx_unary(e, DT_OP_LOG, a));
  const dt_value *limit = dt_bx_zero_where(e, dt_bx_scalar(e, DT_OP_GE, expo, 0), d);
  return dt_bx_mul(e, g, dt_bx_where(e, dt_bx_scalar(e, DT_OP_EQ, a, 0), limit, d));
}
static int pow_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0];
  double s = b->args->scalar[0];
  if (scalar_form(b) && scalar_left(b)) {
    const dt_value *d = dt_bx_mul_scalar(&e, dt_bx_mul(&e, g, dt_bx_out(&e, 0)), log(s));
    if (s == 0) d = dt_bx_zero_where(&e, dt_bx_scalar(&e, DT_OP_GE, dt_bx_in(&e, 0), 0), d);
    dt_bx_set(&e, 0, d);
  } else if (scalar_form(b)) {
    if (s == 0) dt_bx_set(&e, 0, dt_bx_full_input(&e, 0, 0));
    else dt_bx_set(&e, 0, dt_bx_mul(&e, g, dt_bx_mul_scalar(&e, dt_bx_scalar(&e, DT_OP_POW, dt_bx_in(&e, 0), s - 1), s)));
  } else {
    const dt_value *a = dt_bx_in(&e, 0), *expo = dt_bx_in(&e, 1);
    if (b->needs[0]) dt_bx_set_summed(&e, 0, grad_base(&e, g, a, expo));
    if (b->needs[1]) dt_bx_set_summed(&e, 1, grad_exponent(&e, g, a, expo, dt_bx_out(&e, 0)));
  }
  return dt_bx_end(&e);
}
DT_BACKWARD(pow, pow_backward, DT_SAVE(0) | DT_SAVE(1), DT_SAVE(0), 0)

/* remainder(a, b) = a - floor(a/b) b: da = g, db = -g floor(a/b) (torch's); s % t: dt = -g floor(s/t). */
static int remainder_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0];
  if (scalar_form(b) && scalar_left(b)) {
    const dt_value *t = dt_bx_in(&e, 0);
    dt_op_args q = {.flags = DT_ARG_SCALAR | DT_ARG_SCALAR_LEFT, .nscalar = 1, .scalar = {b->args->scalar[0]}};
    const dt_value *s_over_t = dt_bx_op(&e, DT_OP_DIV, &q, &t, 1);
    dt_bx_set(&e, 0, dt_bx_mul(&e, g, dt_bx_unary(&e, DT_OP_NEG, dt_bx_unary(&e, DT_OP_FLOOR, s_over_t))));
  } else {
    if (b->needs[0]) dt_bx_set_summed(&e, 0, g);
    if (!scalar_form(b) && b->needs[1]) {
      const dt_value *q = dt_bx_unary(&e, DT_OP_FLOOR, dt_bx_div(&e, dt_bx_in(&e, 0), dt_bx_in(&e, 1)));
      dt_bx_set_summed(&e, 1, dt_bx_mul(&e, g, dt_bx_unary(&e, DT_OP_NEG, q)));
    }
  }
  return dt_bx_end(&e);
}
DT_BACKWARD(remainder, remainder_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)

/* where(cond, a, b): g goes to a where cond holds, to b elsewhere (numbers take none) */
static int where_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *cond = dt_bx_in(&e, 0);
  if (b->needs[1]) dt_bx_set_summed(&e, 1, dt_bx_keep_where(&e, cond, b->grad[0]));
  if (b->needs[2]) dt_bx_set_summed(&e, 2, dt_bx_zero_where(&e, cond, b->grad[0]));
  return dt_bx_end(&e);
}
DT_BACKWARD(where, where_backward, DT_SAVE(0), 0, 0)

/* masked_fill(x, mask, v): g where mask is false (the filled elements do not depend on x) */
static int masked_fill_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  dt_bx_set_summed(&e, 0, dt_bx_zero_where(&e, dt_bx_in(&e, 1), b->grad[0]));
  return dt_bx_end(&e);
}
DT_BACKWARD(masked_fill, masked_fill_backward, DT_SAVE(1), 0, 0)
DT_BACKWARD(masked_fill_, masked_fill_backward, DT_SAVE(1), 0, 0) /* in place: the same gradient */
