/* Backward rules of the view rows: the gradient takes the inverse view (or is scattered
 * back into zeros of the input's shape for views that drop elements). */
#include "autograd/backward.h"

#include "base/error.h"

/* view/reshape/flatten: the gradient reshaped to the input's shape */
static int reshape_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (dt_bw_reshape(b, b->grad[0], b->in_meta[0].ndim, b->in_meta[0].shape, &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(view, reshape_backward, 0, 0, 0)
DT_BACKWARD(reshape, reshape_backward, 0, 0, 0)
DT_BACKWARD(flatten, reshape_backward, 0, 0, 0)
