/* Shape rules of the reductions and of softmax.
 * Reductions: ints[0..nints-1] are the 0-based dims to reduce; DT_ARG_ALL_DIMS (or no
 * dims at all) reduces every dim.  keepdim leaves the reduced dims with size 1. */
#include "base/error.h"
#include "ops/ops.h"
#include "ops/shape_reduce.h"

#include <string.h>

int dt_reduce_mask(const dt_op_args *a, const dt_tensor *x, int *mask) {
  int nd = x->ndim;
  for (int i = 0; i < DT_MAX_DIMS; i++) mask[i] = 0;
  if ((a->flags & DT_ARG_ALL_DIMS) || a->nints == 0) {
    for (int i = 0; i < nd; i++) mask[i] = 1;
    return DT_OK;
  }
  for (int j = 0; j < a->nints; j++) {
    int64_t d = a->ints[j];
    /* a 0-d tensor accepts dim 0 (PyTorch: 0 or -1), which reduces nothing */
    if (nd == 0 && d == 0) continue;
    if (d < 0 || d >= nd) return dt_error("%s: dim %lld out of range for a %d-d tensor", a->name, (long long)d + 1, nd);
    if (mask[d]) return dt_error("%s: dim %lld appears more than once", a->name, (long long)d + 1);
    mask[d] = 1;
  }
  return DT_OK;
}

/* Output shape of x reduced over mask (checks zero-size dims when the op needs an element). */
static int reduce_shape(const dt_op_args *a, int need_element, dt_meta *out) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor", a->name);
  const dt_tensor *x = a->in[0];
  int mask[DT_MAX_DIMS];
  if (dt_reduce_mask(a, x, mask) != DT_OK) return DT_ERR;
  int n = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (mask[i] && x->shape[i] == 0 && need_element)
      return dt_error("%s: cannot reduce over a zero-size dim", a->name);
    if (!mask[i]) out->shape[n++] = x->shape[i];
    else if (a->keepdim) out->shape[n++] = 1;
  }
  out->ndim = n;
  out->dtype = x->dtype;
  return DT_OK;
}

/* sum, prod: integers and bool accumulate into int64; floats keep their dtype. */
int dt_shape_reduce(const dt_op_args *a, dt_meta *out) {
  if (reduce_shape(a, 0, out) != DT_OK) return DT_ERR;
  if (a->has_dtype) out->dtype = a->dtype;
  else if (!dt_dtype_is_float(out->dtype)) out->dtype = DT_INT64;
  return DT_OK;
}

/* mean, var, std, norm: floating inputs only, as in PyTorch. */
int dt_shape_reduce_float(const dt_op_args *a, dt_meta *out) {
  if (reduce_shape(a, 0, out) != DT_OK) return DT_ERR;
  if (!dt_dtype_is_float(out->dtype))
    return dt_error("%s: input dtype %s is not floating point; use :to('float32')", a->name,
                    dt_dtype_name(out->dtype));
  return DT_OK;
}

/* amax, amin: same dtype; an empty reduction has no answer. */
int dt_shape_reduce_keep_dtype(const dt_op_args *a, dt_meta *out) { return reduce_shape(a, 1, out); }

/* max, min along one dim: (values, int64 indices). */
int dt_shape_reduce_with_index(const dt_op_args *a, dt_meta *out) {
  if (a->nints != 1 || (a->flags & DT_ARG_ALL_DIMS)) return dt_error("%s: expected exactly one dim", a->name);
  if (reduce_shape(a, 1, out) != DT_OK) return DT_ERR;
  out[1] = out[0];
  out[1].dtype = DT_INT64;
  return DT_OK;
}

/* argmax, argmin: one dim, or every dim (flat index). */
int dt_shape_reduce_index(const dt_op_args *a, dt_meta *out) {
  if (a->nints > 1) return dt_error("%s: expected one dim or none", a->name);
  if (reduce_shape(a, 1, out) != DT_OK) return DT_ERR;
  out->dtype = DT_INT64;
  return DT_OK;
}

/* softmax, log_softmax: ints[0] = dim; same shape, floating dtype. */
int dt_shape_softmax(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor", a->name);
  const dt_tensor *x = a->in[0];
  int64_t d = a->ints[0];
  if (a->nints != 1 || !(d >= 0 && (d < x->ndim || (x->ndim == 0 && d == 0))))
    return dt_error("%s: dim %lld out of range for a %d-d tensor", a->name, (long long)d + 1, x->ndim);
  if (!dt_dtype_is_float(x->dtype))
    return dt_error("%s: input dtype %s is not floating point; use :to('float32')", a->name,
                    dt_dtype_name(x->dtype));
  out->dtype = x->dtype;
  out->ndim = x->ndim;
  for (int i = 0; i < x->ndim; i++) out->shape[i] = x->shape[i];
  return DT_OK;
}

/* softmax_backward, log_softmax_backward (grad, y; ints[0] = dim): y is the forward's output,
 * grad its gradient: one shape and one floating dtype; the result is like y. */
int dt_shape_softmax_backward(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 2 || !a->in[0] || !a->in[1]) return dt_error("%s: expected grad and the forward's output", a->name);
  const dt_tensor *g = a->in[0], *y = a->in[1];
  char b1[96], b2[96];
  if (g->ndim != y->ndim || (g->ndim && memcmp(g->shape, y->shape, sizeof(int64_t) * (size_t)g->ndim) != 0))
    return dt_error("%s: grad has shape %s, the output %s", a->name, dt_format_shape(b1, sizeof b1, g->ndim, g->shape),
                    dt_format_shape(b2, sizeof b2, y->ndim, y->shape));
  if (g->dtype != y->dtype)
    return dt_error("%s: grad has dtype %s, the output %s", a->name, dt_dtype_name(g->dtype), dt_dtype_name(y->dtype));
  dt_tensor *const ys[1] = {a->in[1]};
  dt_op_args one = *a;
  one.nin = 1, one.in = ys; /* the dim and the dtype checked as softmax checks them */
  return dt_shape_softmax(&one, out);
}
