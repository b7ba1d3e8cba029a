/* Backward rules of softmax and log_softmax over ints[0] = dim, from the saved output y
 * (the forward's args name one dim, so the reduction helpers sum over it):
 *   softmax:     y (g - sum(g y))
 *   log_softmax: g - exp(y) sum(g) */
#include "autograd/backward.h"

#include "base/error.h"

static int softmax_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0], *y = dt_bx_out(&e, 0);
  dt_bx_set(&e, 0, dt_bx_mul(&e, y, dt_bx_sub(&e, g, dt_bx_reduce_like(&e, DT_OP_SUM, dt_bx_mul(&e, g, y)))));
  return dt_bx_end(&e);
}
DT_BACKWARD(softmax, softmax_backward, 0, DT_SAVE(0), 0)

static int log_softmax_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0], *y = dt_bx_out(&e, 0);
  dt_bx_set(&e, 0, dt_bx_sub(&e, g, dt_bx_mul(&e, dt_bx_unary(&e, DT_OP_EXP, y), dt_bx_reduce_like(&e, DT_OP_SUM, g))));
  return dt_bx_end(&e);
}
DT_BACKWARD(log_softmax, log_softmax_backward, 0, DT_SAVE(0), 0)
