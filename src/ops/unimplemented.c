/* TEMPORARY while the kernels are written in parallel: weak fallbacks so the tree links.
 * Deleted once every kernel and shape rule exists. */
#include "base/error.h"
#include "ops/ops.h"

#define DT_OP(E, name, rule, nout, flags, schema) \
  __attribute__((weak)) int dt_cpu_##name(const dt_op_args *a, dt_tensor **out) { \
    return dt_error(#name ": not implemented yet"); \
  }
#include "ops/op_list.h"
#undef DT_OP
#define DT_RULE(name) \
  __attribute__((weak)) int dt_shape_##name(const dt_op_args *a, dt_meta *out) { \
    return dt_error("shape rule " #name ": not implemented yet"); \
  }
#include "ops/rule_list.h"
#undef DT_RULE
