#include "ops/ops.h"
#include "base/error.h"

#include <string.h>

static const dt_op_def op_table[DT_OP_COUNT] = {
#define DT_OP(E, n, rule, nout_, flags_, schema_) \
  [DT_OP_##E] = {.name = #n, .schema = schema_, .nout = nout_, .flags = flags_, .shape = dt_shape_##rule, \
                 .kernel = {[DT_CPU] = dt_cpu_##n}},
#include "ops/op_list.h"
#undef DT_OP
};

const dt_op_def *dt_op_get(dt_op_id id) { return &op_table[id]; }

int dt_op_find(const char *name, dt_op_id *id) {
  for (int i = 0; i < DT_OP_COUNT; i++)
    if (strcmp(op_table[i].name, name) == 0) return *id = (dt_op_id)i, DT_OK;
  return dt_error("unknown op '%s'", name);
}

int dt_op_call(dt_op_id id, dt_op_args *a, dt_tensor **out) {
  const dt_op_def *op = &op_table[id];
  a->op = id;
  a->name = op->name;
  dt_device_type dev = DT_CPU;
  for (int i = 0; i < a->nin; i++) {
    if (!a->in[i]) continue; /* optional operand */
    dt_device_type d = dt_tensor_device(a->in[i]);
    if (i > 0 && d != dev)
      return dt_error("%s: operands are on different devices (%s and %s)", op->name, dt_device_name(dev),
                      dt_device_name(d));
    dev = d;
  }
  dt_kernel_fn kernel = op->kernel[dev];
  if (!kernel) return dt_error("%s: not implemented on device %s", op->name, dt_device_name(dev));

  dt_meta meta[DT_OP_MAX_OUT];
  if (op->shape(a, meta) != DT_OK) return DT_ERR;
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
      return dt_error_prefix("%s", op->name);
    }
  }
  if (kernel(a, out) != DT_OK) { /* outputs NULL again: callers' cleanup must not release them twice */
    for (int i = 0; i < op->nout; i++) dt_tensor_release(out[i]), out[i] = NULL;
    return DT_ERR;
  }
  return DT_OK;
}
