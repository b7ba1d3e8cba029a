/* The reduce ops of collectives and Partial placements (sum, avg, max, min, product): the
 * enum, its names and the dtype check; the arithmetic is the kernels' (kernels/cpu/reduce_ops.h). */
#ifndef DT_BASE_REDUCE_OP_H
#define DT_BASE_REDUCE_OP_H

#include "base/export.h"

#include "base/dtype.h"

typedef enum dt_reduce_op {
  DT_REDUCE_SUM = 0,
  DT_REDUCE_AVG,
  DT_REDUCE_MAX,
  DT_REDUCE_MIN,
  DT_REDUCE_PRODUCT,
  DT_NREDUCE_OPS
} dt_reduce_op;

DT_API const char *dt_reduce_op_name(dt_reduce_op op);
/* "sum", "avg"/"mean", "max", "min", "product"/"prod"; DT_ERR + message otherwise. */
DT_API int dt_reduce_op_from_name(const char *name, dt_reduce_op *out);
/* avg needs a floating dtype (as in PyTorch); DT_ERR + message naming `who` otherwise. */
DT_API int dt_reduce_op_check(dt_reduce_op op, dt_dtype dtype, const char *who);

#endif
