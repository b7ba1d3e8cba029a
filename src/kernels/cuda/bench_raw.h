/* bench/gpu.lua's yardsticks (bench_raw.c, CUDA builds): seconds of the best of reps. */
#ifndef DT_KERNELS_CUDA_BENCH_RAW_H
#define DT_KERNELS_CUDA_BENCH_RAW_H

#include <stddef.h>

/* One n x n x n GEMM by cublasGemmEx (bf16 with float32 accumulation, or float32). */
int dt_cuda_bench_gemm(int n, int bf16, int reps, double *seconds);
/* One device-to-device cudaMemcpyAsync of bytes. */
int dt_cuda_bench_memcpy(size_t bytes, int reps, double *seconds);

#endif
