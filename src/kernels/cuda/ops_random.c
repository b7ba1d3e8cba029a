/* The CUDA backend's random rows: uniform_ (random_kernel.cu), bit for bit the CPU's for the
 * same generator position and region (arguments: uniform_setup.c). */
#include "kernels/cuda/desc.h"
#include "kernels/cuda/kernel_table.h"
#include "kernels/cuda/uniform_setup.h"

#include "base/error.h"

int dt_cuda_uniform_(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *t = out[0];
  dtc_uniform u;
  if (dtc_uniform_setup(a, t, &u) != DT_OK) return DT_ERR;
  if (dt_tensor_is_contiguous(t)) {
    u.dst = dt_tensor_data(t);
    return dtc_launch_uniform(&u);
  }
  dt_tensor *tmp = dt_tensor_empty_like(t); /* fill in logical order, then copy into t's layout */
  if (!tmp) return dt_error_prefix("%s", a->name);
  u.dst = dt_tensor_data(tmp);
  int rc = dtc_launch_uniform(&u);
  if (rc == DT_OK) rc = dt_tensor_copy_(t, tmp, a->name);
  dt_tensor_release(tmp);
  return rc;
}
