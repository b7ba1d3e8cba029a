/* The join rules (torch.cat's), device-neutral: shared by the cat/stack shape rules
 * (shape_join.c) and every device's join kernels. */
#ifndef DT_OPS_JOIN_H
#define DT_OPS_JOIN_H

#include "ops/op_args.h"

/* The input the others are checked against: the first that is not a 1-d empty tensor. */
const dt_tensor *dt_join_ref(const dt_op_args *a);
/* torch.cat skips 1-d empty inputs (shape {0}) whatever the other shapes: legacy
 * behaviour that lets code start from an empty accumulator. */
int dt_join_skips(const dt_tensor *t, const dt_tensor *ref);

#endif
