/* Device-side element access shared by the CUDA copy (cuda_copy.cu) and the CUDA kernels
 * (src/kernels/cuda): loads and stores of any dtype with the CPU's exact conversions (the
 * half-precision rounding of base/dtype.c, float -> integer truncation with NaN/inf -> 0), and
 * the offsets of an element of an N-operand strided loop. */
#ifndef DT_TENSOR_CUDA_ELEM_CUH
#define DT_TENSOR_CUDA_ELEM_CUH

/* tensor.h (C11 atomics) is not C++: the dims limit is repeated here, checked in device_cuda.c */
#define DTC_MAX_DIMS 8

#include <stdint.h>

extern "C" {
#include "base/dtype.h"
#include "tensor/device.h"
}

__device__ inline float dtc_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ inline uint16_t dtc_f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
__device__ inline float dtc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) mant <<= 1, exp--;
      u = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return __uint_as_float(u);
}
__device__ inline uint16_t dtc_f32_to_f16(float f) {
  uint32_t u = __float_as_uint(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
  uint32_t mant = u & 0x7fffffu;
  if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++;
  return (uint16_t)half;
}

__device__ inline double dtc_load_f64(const char *p, int t) {
  switch (t) {
  case DT_FLOAT32: return *(const float *)p;
  case DT_FLOAT64: return *(const double *)p;
  case DT_BFLOAT16: return dtc_bf16_to_f32(*(const uint16_t *)p);
  case DT_FLOAT16: return dtc_f16_to_f32(*(const uint16_t *)p);
  case DT_INT64: return (double)*(const int64_t *)p;
  case DT_INT32: return *(const int32_t *)p;
  case DT_UINT8: return *(const uint8_t *)p;
  case DT_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

__device__ inline int64_t dtc_f64_to_i64(double v) {
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18)) return 0;
  return (int64_t)v;
}

__device__ inline void dtc_store_f64(char *p, int t, double v) {
  switch (t) {
  case DT_FLOAT32: *(float *)p = (float)v; break;
  case DT_FLOAT64: *(double *)p = v; break;
  case DT_BFLOAT16: *(uint16_t *)p = dtc_f32_to_bf16((float)v); break;
  case DT_FLOAT16: *(uint16_t *)p = dtc_f32_to_f16((float)v); break;
  case DT_INT64: *(int64_t *)p = dtc_f64_to_i64(v); break;
  case DT_INT32: *(int32_t *)p = (int32_t)dtc_f64_to_i64(v); break;
  case DT_UINT8: *(uint8_t *)p = (uint8_t)dtc_f64_to_i64(v); break;
  case DT_BOOL: *(uint8_t *)p = v != 0; break;
  default: break;
  }
}

__device__ inline int64_t dtc_load_i64(const char *p, int t) {
  switch (t) {
  case DT_INT64: return *(const int64_t *)p;
  case DT_INT32: return *(const int32_t *)p;
  case DT_UINT8: return *(const uint8_t *)p;
  case DT_BOOL: return *(const uint8_t *)p != 0;
  default: return dtc_f64_to_i64(dtc_load_f64(p, t));
  }
}

__device__ inline void dtc_store_i64(char *p, int t, int64_t v) {
  switch (t) {
  case DT_INT64: *(int64_t *)p = v; break;
  case DT_INT32: *(int32_t *)p = (int32_t)v; break;
  case DT_UINT8: *(uint8_t *)p = (uint8_t)v; break;
  case DT_BOOL: *(uint8_t *)p = v != 0; break;
  default: dtc_store_f64(p, t, (double)v); break;
  }
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
