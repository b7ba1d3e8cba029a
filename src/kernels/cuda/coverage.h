/* The CUDA column's coverage, in every build (coverage.c). */
#ifndef DT_KERNELS_CUDA_COVERAGE_H
#define DT_KERNELS_CUDA_COVERAGE_H

#include "base/export.h"
#include "ops/op_id.h"

/* 1 when kernel_list.h gives row id a CUDA kernel. */
DT_API int dt_cuda_row_has_kernel(dt_op_id id);

#endif
