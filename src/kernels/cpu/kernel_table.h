/* The CPU backend's kernels: dt_cpu_<name> for every row of the operator table, and the
 * table that indexes them by op id (kernel_table.c). */
#ifndef DT_KERNELS_CPU_KERNEL_TABLE_H
#define DT_KERNELS_CPU_KERNEL_TABLE_H

#include "ops/ops.h"

#define DT_OP(E, name, rule, nout, flags, sharding, backward, schema) int dt_cpu_##name(const dt_op_args *a, dt_tensor **out);
#include "ops/op_list.h"
#undef DT_OP

extern const dt_kernel_fn dt_cpu_kernel_table[DT_OP_COUNT];

/* The error of an index kernel (index_select, index_add, gather, scatter) for index i (0-based)
 * outside dim d of this size, worded 1-based as Lua users wrote it (cpu/index.c). */
int dt_cpu_index_out_of_range(const char *op, int64_t i, int d, int64_t size);

#endif
