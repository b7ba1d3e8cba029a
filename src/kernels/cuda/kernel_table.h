/* The CUDA backend's kernel table (a CUDA build only): the rows of kernel_list.h, indexed by op
 * id (NULL = no CUDA kernel). */
#ifndef DT_KERNELS_CUDA_KERNEL_TABLE_H
#define DT_KERNELS_CUDA_KERNEL_TABLE_H

#include "ops/ops.h"

#define DT_CUDA_KERNEL(E, fn) int fn(const dt_op_args *a, dt_tensor **out);
#include "kernels/cuda/kernel_list.h"
#undef DT_CUDA_KERNEL

extern const dt_kernel_fn dt_cuda_kernel_table[DT_OP_COUNT];

#endif
