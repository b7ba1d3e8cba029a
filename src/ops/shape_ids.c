/* ids_to_zero_based's shape rule: an integer tensor in, int64 of its shape out; and the
 * names of its kinds, which its kernels' errors share. */
#include <string.h>

#include "base/error.h"
#include "ops/ids_kind.h"
#include "ops/ops.h"

int dt_ids_kind_names(long long kind, const char **op, const char **what, const char **range) {
  switch (kind) {
  case DT_IDS_EMBEDDING: *op = "embedding", *what = "id", *range = "vocab size %lld"; return DT_OK;
  case DT_IDS_CROSS_ENTROPY: *op = "cross_entropy", *what = "target", *range = "%lld classes"; return DT_OK;
  case DT_IDS_CROSS_ENTROPY_BACKWARD:
    *op = "cross_entropy_backward", *what = "target", *range = "%lld classes";
    return DT_OK;
  default: return dt_error("ids_to_zero_based: unknown kind %lld (ints[3])", kind);
  }
}

int dt_shape_ids(const dt_op_args *a, dt_meta *out) {
  const char *op = "", *what = "", *range = "";
  if (a->nints != 4) return dt_error("ids_to_zero_based: expected ints {hi, has_skip, skip, kind}, got %d ints", a->nints);
  if (dt_ids_kind_names(a->ints[3], &op, &what, &range) != DT_OK) return DT_ERR;
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected the %ss as a tensor", op, what);
  const dt_tensor *t = a->in[0];
  if (t->dtype != DT_INT64 && t->dtype != DT_INT32 && t->dtype != DT_UINT8)
    return dt_error("%s: %ss must be an integer tensor, got %s", op, what, dt_dtype_name(t->dtype));
  out->dtype = DT_INT64;
  out->ndim = t->ndim;
  memcpy(out->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  return DT_OK;
}
