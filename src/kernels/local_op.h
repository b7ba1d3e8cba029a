/* The local op: an op of the operator table on plain tensors of one device, i.e. its
 * shape rule and that device's kernel.  Each device backend has a kernel table indexed by
 * op id (NULL = unsupported); local_op.c keeps one line per backend. */
#ifndef DT_KERNELS_LOCAL_OP_H
#define DT_KERNELS_LOCAL_OP_H

#include "base/export.h"

#include "ops/ops.h"

/* The kernel of op id on device dev; NULL when the device does not support the op. */
DT_API dt_kernel_fn dt_kernel_get(dt_device_type dev, dt_op_id id);
static inline int dt_device_supports_op(dt_device_type dev, dt_op_id id) { return dt_kernel_get(dev, id) != NULL; }

/* Runs op id on the device of its inputs (the host for factories): shape rule,
 * allocation, kernel.  Sets a->op and a->name.  On success out[0..nout-1] hold new
 * references. */
DT_API int dt_op_call(dt_op_id id, dt_op_args *a, dt_tensor **out);

#endif
