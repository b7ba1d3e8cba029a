/* Device-side element access shared by the CUDA copy (cuda_copy.cu) and the CUDA kernels
 * (src/kernels/cuda): loads and stores of any dtype with the CPU's exact conversions
 * (base/dtype_convert.h, the same code), and the offsets of an element of an N-operand strided
 * loop. */
#ifndef DT_TENSOR_CUDA_ELEM_CUH
#define DT_TENSOR_CUDA_ELEM_CUH

/* tensor.h (C11 atomics) is not C++: the dims limit is repeated here, checked in device_cuda.c */
#define DTC_MAX_DIMS 8

#include <stdint.h>

extern "C" {
#include "base/dtype.h"
#include "tensor/device.h"
}

__host__ __device__ inline int dtc_is_float(int t) {
  return t == DT_FLOAT32 || t == DT_FLOAT64 || t == DT_BFLOAT16 || t == DT_FLOAT16;
}

/* N operands walked over one shape: byte strides per operand (0 = broadcast). */
template <int N> struct dtc_iter {
  int ndim;
  int64_t n;
  int64_t shape[DTC_MAX_DIMS];
  int64_t stride[N][DTC_MAX_DIMS];
  char *ptr[N];
  int dtype[N];
};

template <int N> __device__ inline void dtc_offsets(const dtc_iter<N> &it, int64_t i, char *p[N]) {
  for (int k = 0; k < N; k++) p[k] = it.ptr[k];
  for (int d = it.ndim - 1; d >= 0; d--) {
    int64_t s = it.shape[d], idx = i % s;
    i /= s;
    for (int k = 0; k < N; k++) p[k] += idx * it.stride[k][d];
  }
}

#define DTC_THREADS 256
/* Blocks for n elements with a grid-stride loop (capped: each thread then takes several). */
static inline unsigned dtc_blocks(int64_t n) {
  int64_t b = (n + DTC_THREADS - 1) / DTC_THREADS;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

#endif
