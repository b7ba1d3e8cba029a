/* Backward rules of softmax and log_softmax over ints[0] = dim, from the saved output y:
 *   softmax:     y (g - sum(g y))
 *   log_softmax: g - exp(y) sum(g)
 * One op, softmax_backward / log_softmax_backward (src/kernels/cpu/softmax.c: a sweep of each
 * row for the sum, one for the result), on a device with its kernel; elsewhere (CUDA) the
 * four composed ops (the forward's args name one dim, so the reduction helpers sum over it). */
#include "autograd/backward.h"

#include "base/error.h"
#include "kernels/local_op.h"

/* the fused op runs where the gradient's device has its kernel (and grad has y's dtype) */
static int fused_here(const dt_value *g, const dt_value *y, dt_op_id op) {
  return g && y && g->local && g->local->storage && dt_value_dtype(g) == dt_value_dtype(y) &&
         dt_device_supports_op(dt_tensor_device(g->local), op);
}

static const dt_value *fused(dt_bx *e, dt_bw *b, dt_op_id op, const dt_value *g, const dt_value *y) {
  dt_op_args a = dt_bw_args();
  a.ints[0] = b->args->ints[0], a.nints = 1;
  const dt_value *in[2] = {g, y};
  return dt_bx_op(e, op, &a, in, 2);
}

static int softmax_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0], *y = dt_bx_out(&e, 0);
  if (fused_here(g, y, DT_OP_SOFTMAX_BACKWARD)) dt_bx_set(&e, 0, fused(&e, b, DT_OP_SOFTMAX_BACKWARD, g, y));
  else dt_bx_set(&e, 0, dt_bx_mul(&e, y, dt_bx_sub(&e, g, dt_bx_reduce_like(&e, DT_OP_SUM, dt_bx_mul(&e, g, y)))));
  return dt_bx_end(&e);
}
DT_BACKWARD(softmax, softmax_backward, 0, DT_SAVE(0), 0)

static int log_softmax_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *g = b->grad[0], *y = dt_bx_out(&e, 0);
  if (fused_here(g, y, DT_OP_LOG_SOFTMAX_BACKWARD)) dt_bx_set(&e, 0, fused(&e, b, DT_OP_LOG_SOFTMAX_BACKWARD, g, y));
  else
    dt_bx_set(&e, 0, dt_bx_sub(&e, g, dt_bx_mul(&e, dt_bx_unary(&e, DT_OP_EXP, y), dt_bx_reduce_like(&e, DT_OP_SUM, g))));
  return dt_bx_end(&e);
}
DT_BACKWARD(log_softmax, log_softmax_backward, 0, DT_SAVE(0), 0)
