/* Shared by the reduction shape rules and kernels. */
#ifndef DT_OPS_SHAPE_REDUCE_H
#define DT_OPS_SHAPE_REDUCE_H

#include "ops/op_args.h"

/* mask[i] = 1 for each dim of x the op reduces (validated: in range, no repeats). */
int dt_reduce_mask(const dt_op_args *a, const dt_tensor *x, int *mask);

#endif
