/* PyTorch's result-type rules (torch.result_type), device-neutral: the shape rules decide an
 * op's output dtype with them, and every device's kernels compute in the same dtype. */
#ifndef DT_OPS_RESULT_TYPE_H
#define DT_OPS_RESULT_TYPE_H

#include "ops/op_args.h"

/* Operands fall in three tiers: dimensioned tensors, 0-d tensors, Lua numbers ("wrapped
 * numbers": an integer counts as int64, a float as float32).  A lower tier only changes
 * the result when it is of a higher category (bool < integer < floating). */
typedef struct dt_result_type {
  int dim, zero, wrapped; /* dt_dtype, or -1 when no operand of that tier */
} dt_result_type;

void dt_result_type_init(dt_result_type *r);
void dt_result_type_tensor(dt_result_type *r, const dt_tensor *t);
void dt_result_type_number(dt_result_type *r, int is_int);
dt_dtype dt_result_type_get(const dt_result_type *r);

/* The common dtype of a binary op's operands (in[0], in[1] or the scalar). */
dt_dtype dt_result_type_binary(const dt_op_args *a);
/* clamp: the tensor with its given bounds. */
dt_dtype dt_result_type_clamp(const dt_op_args *a);
/* where: a and b (tensors or scalars). */
dt_dtype dt_result_type_where(const dt_op_args *a);

#endif
