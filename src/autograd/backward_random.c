/* Backward rules of the random rows.  An in-place draw replaces self's values by ones that
 * do not depend on them: self's gradient is zero.  dropout's gradient reuses the keep mask its
 * forward drew (saved output 1), so backward draws nothing and leaves the generator alone. */
#include "autograd/backward.h"

#include "base/error.h"

static int draw_backward(dt_bw *b) {
  (void)b; /* no gradient flows to the old values */
  return DT_OK;
}
DT_BACKWARD(uniform_, draw_backward, 0, 0, 0)
DT_BACKWARD(normal_, draw_backward, 0, 0, 0)

/* g * keep / (1 - p) with the given mask */
static int masked(dt_bw *b, const dt_value *keep, dt_value *out) {
  dt_op_args a = dt_bw_args();
  a.scalar[0] = b->args->scalar[0], a.nscalar = 1;
  return dt_bw_call(b, DT_OP_DROPOUT_BACKWARD, &a, b->grad[0], keep, out);
}

/* dropout(x, p) -> (x * keep / (1 - p), keep) */
static int dropout_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (masked(b, b->out[1], &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(dropout, dropout_backward, 0, DT_SAVE(1), 0)

/* dropout_backward(grad, keep, p) is linear in grad: the same mask again */
static int dropout_backward_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (masked(b, b->in[1], &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(dropout_backward, dropout_backward_backward, DT_SAVE(1), 0, 0)
