/* The local op, and the registry of the device backends' kernel tables. */
#include "kernels/local_op.h"
#include "base/error.h"
#include "kernels/cpu/kernel_table.h"

#include "config.h"
#ifdef DT_HAVE_CUDA
#include "kernels/cuda/kernel_table.h"
#endif

static const dt_kernel_fn *const kernel_tables[DT_NDEVICES] = {
    [DT_CPU] = dt_cpu_kernel_table,
#ifdef DT_HAVE_CUDA
    [DT_CUDA] = dt_cuda_kernel_table,
#endif
};

dt_kernel_fn dt_kernel_get(dt_device_type dev, dt_op_id id) {
  const dt_kernel_fn *table = (unsigned)dev < DT_NDEVICES ? kernel_tables[dev] : NULL;
  return table ? table[id] : NULL;
}

int dt_op_call(dt_op_id id, dt_op_args *a, dt_tensor **out) {
  const dt_op_def *op = dt_op_get(id);
  a->op = id;
  if (!a->name) a->name = op->name; /* a caller may name the user-facing function (t[k] = v) */
  dt_device_type dev = DT_HOST;
  for (int i = 0; i < a->nin; i++) {
    if (!a->in[i]) continue; /* optional operand */
    dt_device_type d = dt_tensor_device(a->in[i]);
    if (i > 0 && d != dev)
      return dt_error("%s: operands are on different devices (%s and %s)", op->name, dt_device_name(dev),
                      dt_device_name(d));
    dev = d;
  }
  dt_kernel_fn kernel = dt_kernel_get(dev, id);
  if (!kernel) return dt_error("%s: not implemented on device %s", op->name, dt_device_name(dev));

  dt_meta meta[DT_OP_MAX_OUT];
  if (dt_op_shape(op, a, meta) != DT_OK) return DT_ERR;
  if (op->flags & DT_OPF_VIEW) return kernel(a, out);
  if (op->flags & DT_OPF_INPLACE) {
    out[0] = a->in[0];
    if (kernel(a, out) != DT_OK) return out[0] = NULL, DT_ERR; /* not retained: callers must not release it */
    dt_tensor_retain(out[0]);
    return DT_OK;
  }
  for (int i = 0; i < op->nout; i++) {
    out[i] = dt_tensor_empty(meta[i].dtype, meta[i].ndim, meta[i].shape, dev);
    if (!out[i]) {
      for (int j = 0; j < i; j++) dt_tensor_release(out[j]), out[j] = NULL;
      return dt_error_prefix("%s", a->name);
    }
  }
  if (kernel(a, out) != DT_OK) { /* outputs NULL again: callers' cleanup must not release them twice */
    for (int i = 0; i < op->nout; i++) dt_tensor_release(out[i]), out[i] = NULL;
    return DT_ERR;
  }
  return DT_OK;
}
