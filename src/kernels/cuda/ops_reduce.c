/* The CUDA backend's reductions and softmax: dims from dt_op_args to reduce_kernel.cu/softmax_kernel.cu. */
#include "kernels/cuda/desc.h"
#include "kernels/cuda/kernel_table.h"

#include "base/error.h"
#include "ops/shape_reduce.h"

static int reduce(const dt_op_args *a, dt_tensor **out, int kind) {
  const dt_tensor *x = a->in[0];
  int m[DT_MAX_DIMS];
  if (dt_reduce_mask(a, x, m) != DT_OK) return DT_ERR;
  unsigned mask = 0;
  for (int i = 0; i < x->ndim; i++) mask |= (unsigned)(m[i] != 0) << i;
  dtc_tensor o = dtc_of(out[0]), xd = dtc_of(x);
  return dtc_launch_reduce(kind, &o, &xd, mask);
}

int dt_cuda_sum(const dt_op_args *a, dt_tensor **out) { return reduce(a, out, DTC_SUM); }
int dt_cuda_mean(const dt_op_args *a, dt_tensor **out) { return reduce(a, out, DTC_MEAN); }
int dt_cuda_prod(const dt_op_args *a, dt_tensor **out) { return reduce(a, out, DTC_PROD); }
int dt_cuda_amax(const dt_op_args *a, dt_tensor **out) { return reduce(a, out, DTC_AMAX); }
int dt_cuda_amin(const dt_op_args *a, dt_tensor **out) { return reduce(a, out, DTC_AMIN); }

static int softmax(const dt_op_args *a, dt_tensor **out, int log) {
  dtc_tensor o = dtc_of(out[0]), x = dtc_of(a->in[0]);
  return dtc_launch_softmax(log, &o, &x, (int)a->ints[0]);
}

int dt_cuda_softmax(const dt_op_args *a, dt_tensor **out) { return softmax(a, out, 0); }
int dt_cuda_log_softmax(const dt_op_args *a, dt_tensor **out) { return softmax(a, out, 1); }
