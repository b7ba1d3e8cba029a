/* cat and stack: each input is copied (with dtype conversion) into its slab of the
 * output, a strided view of out, so non-contiguous inputs need no extra copy. */
#include "base/error.h"
#include "kernels/cpu/kernel_table.h"
#include "ops/join.h"

#include <string.h>

/* Copies src into the view of out with src's shape on every dim but d, where it spans
 * [start, start + len); keep_d = 0 drops dim d (stack). */
static int copy_slab(dt_tensor *out, const dt_tensor *src, int d, int64_t start, int keep_d, const char *op) {
  int64_t stride[DT_MAX_DIMS];
  int n = 0;
  for (int k = 0; k < out->ndim; k++)
    if (k != d || keep_d) stride[n++] = out->stride[k];
  dt_tensor *slab = dt_tensor_view_of(out, src->ndim, src->shape, stride, out->offset + start * out->stride[d]);
  if (!slab) return DT_ERR;
  int rc = dt_tensor_copy_(slab, src, op);
  dt_tensor_release(slab);
  return rc;
}

int dt_cpu_cat(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *ref = dt_join_ref(a);
  int d = (int)a->ints[0];
  int64_t pos = 0;
  for (int i = 0; i < a->nin; i++) {
    if (dt_join_skips(a->in[i], ref)) continue;
    if (copy_slab(out[0], a->in[i], d, pos, 1, a->name) != DT_OK) return DT_ERR;
    pos += a->in[i]->shape[d];
  }
  return DT_OK;
}

int dt_cpu_stack(const dt_op_args *a, dt_tensor **out) {
  for (int i = 0; i < a->nin; i++)
    if (copy_slab(out[0], a->in[i], (int)a->ints[0], i, 0, a->name) != DT_OK) return DT_ERR;
  return DT_OK;
}
