/* Which rows have a CUDA kernel, known in every build (the op-table spec reports the CUDA
 * coverage from it, with or without CUDA): kernel_list.h read for its op ids only. */
#include "kernels/cuda/coverage.h"

static const unsigned char listed[DT_OP_COUNT] = {
#define DT_CUDA_KERNEL(E, fn) [DT_OP_##E] = 1,
#include "kernels/cuda/kernel_list.h"
#undef DT_CUDA_KERNEL
};

int dt_cuda_row_has_kernel(dt_op_id id) { return (unsigned)id < DT_OP_COUNT && listed[id]; }
