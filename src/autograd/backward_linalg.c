/* Backward rules of the linear-algebra rows. */
#include "autograd/backward.h"

#include "base/error.h"

/* c = a @ b: da = g @ b^T, db = a^T @ g */
static int mm_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_op_args a = dt_bw_args();
  for (int i = 0; i < 2; i++) {
    if (!b->needs[i]) continue;
    dt_value t, r;
    if (dt_bw_transpose(b, b->in[1 - i], 0, 1, &t) != DT_OK) return DT_ERR;
    int st = i == 0 ? dt_bw_call(b, DT_OP_MM, &a, b->grad[0], &t, &r) : dt_bw_call(b, DT_OP_MM, &a, &t, b->grad[0], &r);
    dt_value_clear(&t);
    if (st != DT_OK) return DT_ERR;
    dt_bw_set(b, i, &r);
  }
  return DT_OK;
}
DT_BACKWARD(mm, mm_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)
