/* The CUDA kernel table: kernel_list.h's rows by op id. */
#include "kernels/cuda/kernel_table.h"

const dt_kernel_fn dt_cuda_kernel_table[DT_OP_COUNT] = {
#define DT_CUDA_KERNEL(E, fn) [DT_OP_##E] = fn,
#include "kernels/cuda/kernel_list.h"
#undef DT_CUDA_KERNEL
};
