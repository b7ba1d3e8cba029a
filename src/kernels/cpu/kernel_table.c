/* The CPU kernel table: one entry per row of the operator table (NULL = unsupported). */
#include "kernels/cpu/kernel_table.h"

const dt_kernel_fn dt_cpu_kernel_table[DT_OP_COUNT] = {
#define DT_OP(E, name, rule, nout, flags, sharding, backward, schema) [DT_OP_##E] = dt_cpu_##name,
#include "ops/op_list.h"
#undef DT_OP
};
