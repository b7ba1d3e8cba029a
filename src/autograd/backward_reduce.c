/* Backward rules of the reductions.  A reduction's gradient is the output gradient put back
 * over the reduced dims (unsqueezed where keepdim dropped them, then expanded). */
#include "autograd/backward.h"

#include <string.h>

#include "base/error.h"

int dt_bw_unreduce(dt_bw *b, const dt_value *g, dt_value *out) {
  const dt_op_args *a = b->args;
  const dt_slot_meta *m = &b->in_meta[0];
  int64_t kshape[DT_MAX_DIMS];
  int all = (a->flags & DT_ARG_ALL_DIMS) || a->nints == 0;
  for (int d = 0; d < m->ndim; d++) kshape[d] = m->shape[d];
  for (int d = 0; d < m->ndim; d++) {
    int reduced = all;
    for (int k = 0; k < a->nints && !all; k++) reduced |= a->ints[k] == d;
    if (reduced) kshape[d] = 1;
  }
  dt_value kept;
  if (dt_bw_reshape(b, g, m->ndim, kshape, &kept) != DT_OK) return DT_ERR;
  int st = dt_bw_expand(b, &kept, m->ndim, m->shape, out);
  dt_value_clear(&kept);
  return st;
}

static int sum_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (dt_bw_unreduce(b, b->grad[0], &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(sum, sum_backward, 0, 0, 0)
