/* The CPU backend's kernels: dt_cpu_<name> for every row of the operator table, and the
 * table that indexes them by op id (kernel_table.c). */
#ifndef DT_KERNELS_CPU_KERNEL_TABLE_H
#define DT_KERNELS_CPU_KERNEL_TABLE_H

#include "ops/ops.h"

#define DT_OP(E, name, rule, nout, flags, sharding, backward, schema) int dt_cpu_##name(const dt_op_args *a, dt_tensor **out);
#include "ops/op_list.h"
#undef DT_OP

extern const dt_kernel_fn dt_cpu_kernel_table[DT_OP_COUNT];

#endif
