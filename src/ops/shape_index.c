/* Shape rules of the indexing ops: index_select. */
#include "base/error.h"
#include "ops/ops.h"

/* index_select(x, index, dim): x's shape with dim replaced by the index's length. */
int dt_shape_index_select(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 2 || !a->in[0] || !a->in[1]) return dt_error("index_select: expected a tensor and an index tensor");
  const dt_tensor *x = a->in[0], *ix = a->in[1];
  if (ix->dtype != DT_INT64 && ix->dtype != DT_INT32)
    return dt_error("index_select: index must be an int64 or int32 tensor, got %s", dt_dtype_name(ix->dtype));
  if (ix->ndim > 1) return dt_error("index_select: index must be 0-d or 1-d, got a %d-d tensor", ix->ndim);
  int64_t d = a->nints ? a->ints[0] : -1, nd = x->ndim ? x->ndim : 1;
  if (d < 0 || d >= nd) return dt_error("index_select: dim %lld out of range for a %d-d tensor", (long long)d + 1, x->ndim);
  *out = (dt_meta){.dtype = x->dtype, .ndim = x->ndim};
  for (int i = 0; i < x->ndim; i++) out->shape[i] = i == d ? dt_tensor_numel(ix) : x->shape[i];
  return DT_OK;
}
