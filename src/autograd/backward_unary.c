/* Backward rules of the pointwise unary rows: math functions and activations.  Each is
 * g * f'(x), from the saved input x or, where torch does so, the saved output y.  Kinks
 * follow PyTorch: relu'(0) = 0, abs'(0) = 0, leaky_relu'(0) = slope, clamp passes the
 * gradient at its bounds (min <= x <= max), hardtanh does not (min < x < max). */
#include "autograd/backward.h"

#include <math.h>

#include "base/error.h"


/* A rule's body: the input's gradient from the output's gradient g and the saved values
 * (NULL after a failure). */
typedef const dt_value *(*unary_grad_fn)(dt_bx *e, const dt_value *g);

static int unary_rule(dt_bw *b, unary_grad_fn f) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  dt_bx_set(&e, 0, f(&e, b->grad[0]));
  return dt_bx_end(&e);
}

#define UNARY_RULE(name, save_in, save_out)                               \
  static int name##_backward(dt_bw *b) { return unary_rule(b, name##_grad); } \
  DT_BACKWARD(name, name##_backward, save_in, save_out, 0)

/* The saved input x and output y. */
static const dt_value *saved_x(dt_bx *e) { return dt_bx_in(e, 0); }
static const dt_value *saved_y(dt_bx *e) { return dt_bx_out(e, 0); }

/* abs: g * sgn(x) */
static const dt_value *abs_grad(dt_bx *e, const dt_value *g) { return dt_bx_mul(e, g, dt_bx_sgn(e, saved_x(e))); }
UNARY_RULE(abs, DT_SAVE(0), 0)

/* exp: g * y */
static const dt_value *exp_grad(dt_bx *e, const dt_value *g) { return dt_bx_mul(e, g, saved_y(e)); }
UNARY_RULE(exp, 0, DT_SAVE(0))

/* log: g / x */
static const dt_value *log_grad(dt_bx *e, const dt_value *g) { return dt_bx_div(e, g, saved_x(e)); }
UNARY_RULE(log, DT_SAVE(0), 0)

/* sqrt: g / (2y) */
static const dt_value *sqrt_grad(dt_bx *e, const dt_value *g) { return dt_bx_div(e, g, dt_bx_mul_scalar(e, saved_y(e), 2)); }
UNARY_RULE(sqrt, 0, DT_SAVE(0))

/* rsqrt: -0.5 g y^3 */
static const dt_value *rsqrt_grad(dt_bx *e, const dt_value *g) {
  return dt_bx_mul(e, g, dt_bx_mul_scalar(e, dt_bx_scalar(e, DT_OP_POW, saved_y(e), 3), -0.5));
}
UNARY_RULE(rsqrt, 0, DT_SAVE(0))

/* tanh: g (1 - y^2) */
static const dt_value *tanh_grad(dt_bx *e, const dt_value *g) {
  const dt_value *y = saved_y(e);
  return dt_bx_mul(e, g, dt_bx_rsub_scalar(e, 1, dt_bx_mul(e, y, y)));
}
UNARY_RULE(tanh, 0, DT_SAVE(0))

/* sigmoid: g y (1 - y) */
static const dt_value *sigmoid_grad(dt_bx *e, const dt_value *g) {
  const dt_value *y = saved_y(e);
  return dt_bx_mul(e, dt_bx_mul(e, g, y), dt_bx_rsub_scalar(e, 1, y));
}
UNARY_RULE(sigmoid, 0, DT_SAVE(0))

/* relu: g where y > 0 (so 0 at x = 0) */
static const dt_value *relu_grad(dt_bx *e, const dt_value *g) {
  return dt_bx_keep_where(e, dt_bx_scalar(e, DT_OP_GT, saved_y(e), 0), g);
}
UNARY_RULE(relu, 0, DT_SAVE(0))

/* gelu: g * gelu'(x) by the fused gelu_backward op (one pass; its kernel holds the formulas:
 * exact Phi(x) + x phi(x), or torch's tanh-approximation derivative) */
static int gelu_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  dt_op_args a = dt_bw_args();
  a.ints[0] = (b->args->flags & DT_ARG_GELU_TANH) ? 1 : 0, a.nints = 1;
  const dt_value *in[2] = {dt_bx_grad(&e, 0), saved_x(&e)};
  dt_bx_set(&e, 0, dt_bx_op(&e, DT_OP_GELU_BACKWARD, &a, in, 2));
  return dt_bx_end(&e);
}
DT_BACKWARD(gelu, gelu_backward, DT_SAVE(0), 0, 0)

/* silu: g s (1 + x (1 - s)), s = sigmoid(x) */
static const dt_value *silu_grad(dt_bx *e, const dt_value *g) {
  const dt_value *in = saved_x(e), *s = dt_bx_unary(e, DT_OP_SIGMOID, in);
  return dt_bx_mul(e, dt_bx_mul(e, g, s), dt_bx_add_scalar(e, dt_bx_mul(e, in, dt_bx_rsub_scalar(e, 1, s)), 1));
}
UNARY_RULE(silu, DT_SAVE(0), 0)

/* sin: g cos(x); cos: -g sin(x) */
static const dt_value *sin_grad(dt_bx *e, const dt_value *g) { return dt_bx_mul(e, g, dt_bx_unary(e, DT_OP_COS, saved_x(e))); }
UNARY_RULE(sin, DT_SAVE(0), 0)
static const dt_value *cos_grad(dt_bx *e, const dt_value *g) {
  return dt_bx_mul(e, g, dt_bx_unary(e, DT_OP_NEG, dt_bx_unary(e, DT_OP_SIN, saved_x(e))));
}
UNARY_RULE(cos, DT_SAVE(0), 0)

/* clamp: g where min <= x <= max (the bounds given; torch's clamp_backward) */
static const dt_value *clamp_grad(dt_bx *e, const dt_value *g) {
  const dt_op_args *a = e->b->args;
  const dt_value *r = g;
  if (a->flags & DT_ARG_HAS_MAX) r = dt_bx_keep_where(e, dt_bx_scalar(e, DT_OP_LE, saved_x(e), a->scalar[1]), r);
  if (a->flags & DT_ARG_HAS_MIN) r = dt_bx_keep_where(e, dt_bx_scalar(e, DT_OP_GE, saved_x(e), a->scalar[0]), r);
  return r;
}
UNARY_RULE(clamp, DT_SAVE(0), 0)

/* hardtanh: g where min_val < x < max_val (torch's hardtanh_backward: 0 at the bounds) */
static const dt_value *hardtanh_grad(dt_bx *e, const dt_value *g) {
  const dt_op_args *a = e->b->args;
  const dt_value *in = saved_x(e);
  return dt_bx_keep_where(e, dt_bx_scalar(e, DT_OP_GT, in, a->scalar[0]),
                          dt_bx_keep_where(e, dt_bx_scalar(e, DT_OP_LT, in, a->scalar[1]), g));
}
UNARY_RULE(hardtanh, DT_SAVE(0), 0)

/* leaky_relu: g where x > 0, else g * slope (slope at 0 too) */
static const dt_value *leaky_relu_grad(dt_bx *e, const dt_value *g) {
  return dt_bx_where(e, dt_bx_scalar(e, DT_OP_GT, saved_x(e), 0), g, dt_bx_mul_scalar(e, g, e->b->args->scalar[0]));
}
UNARY_RULE(leaky_relu, DT_SAVE(0), 0)
