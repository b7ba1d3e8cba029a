/* Names and checks of the reduce ops. */
#include "base/reduce_op.h"

#include <string.h>

#include "base/error.h"

static const char *const op_names[DT_NREDUCE_OPS] = {"sum", "avg", "max", "min", "product"};

const char *dt_reduce_op_name(dt_reduce_op op) { return op < DT_NREDUCE_OPS ? op_names[op] : "?"; }

int dt_reduce_op_from_name(const char *name, dt_reduce_op *out) {
  for (int i = 0; i < DT_NREDUCE_OPS; i++)
    if (strcmp(name, op_names[i]) == 0) return *out = (dt_reduce_op)i, DT_OK;
  if (strcmp(name, "mean") == 0) return *out = DT_REDUCE_AVG, DT_OK;
  if (strcmp(name, "prod") == 0) return *out = DT_REDUCE_PRODUCT, DT_OK;
  return dt_error("unknown reduce op '%s' (expected sum, avg, max, min or product)", name);
}

int dt_reduce_op_check(dt_reduce_op op, dt_dtype dtype, const char *who) {
  if (op >= DT_NREDUCE_OPS) return dt_error("%s: invalid reduce op %d", who, (int)op);
  if (op == DT_REDUCE_AVG && !dt_dtype_is_float(dtype))
    return dt_error("%s: avg needs a floating dtype, got %s", who, dt_dtype_name(dtype));
  return DT_OK;
}
