#include "ops/ops.h"
#include "base/error.h"

#include <string.h>

/* The backward column names a rule of src/autograd, or `none`; this layer only learns
 * whether there is one: DT_NAMES_BACKWARD(none) is 0, of any other name 1 (a probe macro). */
#define DT_BACKWARD_PROBE_none ~, 0
#define DT_SECOND_(a, b, ...) b
#define DT_NAMES_BACKWARD_(...) DT_SECOND_(__VA_ARGS__, 1, ~)
#define DT_NAMES_BACKWARD(bw) DT_NAMES_BACKWARD_(DT_BACKWARD_PROBE_##bw)
static const dt_op_def op_table[DT_OP_COUNT] = {
#define DT_OP(E, n, rule, nout_, flags_, sharding_, backward_, schema_)                                       \
  [DT_OP_##E] = {.name = #n, .schema = schema_, .nout = nout_, .flags = flags_, .shape = dt_shape_##rule, \
                 .sharding = DT_SHARDING_##sharding_, .differentiable = DT_NAMES_BACKWARD(backward_)},
#include "ops/op_list.h"
#undef DT_OP
};

static const char *const family_names[DT_SHARDING_COUNT] = {
#define DT_SHARDING(F, name) [DT_SHARDING_##F] = name,
#include "ops/sharding_families.h"
#undef DT_SHARDING
};

const dt_op_def *dt_op_get(dt_op_id id) { return &op_table[id]; }

int dt_op_shape(const dt_op_def *op, const dt_op_args *a, dt_meta *out) {
  if (op->shape(a, out) != DT_OK) return DT_ERR;
  for (int i = 0; i < op->nout; i++)
    if (dt_check_shape(a->name ? a->name : op->name, out[i].ndim, out[i].shape) != DT_OK) return DT_ERR;
  return DT_OK;
}

const char *dt_sharding_family_name(dt_sharding_family f) {
  return (unsigned)f < DT_SHARDING_COUNT ? family_names[f] : "?";
}

int dt_op_find(const char *name, dt_op_id *id) {
  for (int i = 0; i < DT_OP_COUNT; i++)
    if (strcmp(op_table[i].name, name) == 0) return *id = (dt_op_id)i, DT_OK;
  return dt_error("unknown op '%s'", name);
}
