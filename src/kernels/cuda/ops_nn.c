/* The CUDA backend's nn rows: layer_norm, rms_norm and embedding (nn_kernel.cu), on contiguous
 * copies of their inputs, as the CPU kernels take them. */
#include "kernels/cuda/desc.h"
#include "kernels/cuda/kernel_table.h"

#include "base/error.h"

static int norm(const dt_op_args *a, dt_tensor **out, int rms) {
  dt_tensor *x = dt_tensor_contiguous(a->in[0]);
  dt_tensor *w = x && a->nin > 1 && a->in[1] ? dt_tensor_contiguous(a->in[1]) : NULL;
  dt_tensor *b = x && !rms && a->nin > 2 && a->in[2] ? dt_tensor_contiguous(a->in[2]) : NULL;
  int rc = DT_ERR;
  if (x && (w || a->nin < 2 || !a->in[1]) && (b || rms || a->nin < 3 || !a->in[2])) {
    int k = (int)a->ints[0];
    int64_t n = dt_shape_numel(k, x->shape + x->ndim - k), rows = n ? dt_tensor_numel(x) / n : 0;
    rc = dtc_launch_norm(rms, dt_tensor_data(x), w ? dt_tensor_data(w) : NULL, b ? dt_tensor_data(b) : NULL,
                         dt_tensor_data(out[0]), x->dtype, w ? w->dtype : x->dtype, b ? b->dtype : x->dtype, rows, n,
                         a->scalar[0]);
  } else {
    dt_error_prefix("%s", a->name);
  }
  dt_tensor_release(x), dt_tensor_release(w), dt_tensor_release(b);
  return rc;
}

int dt_cuda_layer_norm(const dt_op_args *a, dt_tensor **out) { return norm(a, out, 0); }
int dt_cuda_rms_norm(const dt_op_args *a, dt_tensor **out) { return norm(a, out, 1); }

int dt_cuda_embedding(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *ids = dt_tensor_contiguous_as(a->in[0], DT_INT64);
  dt_tensor *w = ids ? dt_tensor_contiguous(a->in[1]) : NULL;
  if (!w) {
    dt_tensor_release(ids);
    return dt_error_prefix("%s", a->name);
  }
  int shard = (a->flags & DT_ARG_VOCAB_SHARD) != 0;
  int rc = dtc_launch_embedding(dt_tensor_data(ids), dt_tensor_numel(ids), dt_tensor_data(w), w->shape[0],
                                shard ? a->ints[0] : 0, (size_t)w->shape[1] * dt_tensor_elsize(w), dt_tensor_data(out[0]),
                                shard, a->name);
  dt_tensor_release(ids);
  dt_tensor_release(w);
  return rc;
}
