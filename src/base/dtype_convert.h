/* Scalar conversions between dtypes, written once for the host (base/dtype.h, dtype.c) and for
 * CUDA device code (src/tensor/cuda_elem.cuh), so a device converts exactly as the CPU does:
 * half precisions round to nearest even, float -> integer truncates toward zero with NaN/inf and
 * out-of-range values giving 0.  Included by dtype.h after the dtype enum. */
#ifndef DT_BASE_DTYPE_CONVERT_H
#define DT_BASE_DTYPE_CONVERT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define DT_CONVERT_FN static __host__ __device__ inline
#else
#define DT_CONVERT_FN static inline
#endif

DT_CONVERT_FN float dt_cv_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

DT_CONVERT_FN uint16_t dt_cv_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

DT_CONVERT_FN float dt_cv_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else { /* subnormal: normalise */
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) mant <<= 1, exp--;
      u = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

DT_CONVERT_FN uint16_t dt_cv_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
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
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++; /* may carry into exp: correct */
  return (uint16_t)half;
}

DT_CONVERT_FN double dt_cv_load_f64(const void *p, int t) {
  switch (t) {
  case DT_FLOAT32: return *(const float *)p;
  case DT_FLOAT64: return *(const double *)p;
  case DT_BFLOAT16: return dt_cv_bf16_to_f32(*(const uint16_t *)p);
  case DT_FLOAT16: return dt_cv_f16_to_f32(*(const uint16_t *)p);
  case DT_INT64: return (double)*(const int64_t *)p;
  case DT_INT32: return *(const int32_t *)p;
  case DT_UINT8: return *(const uint8_t *)p;
  case DT_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

/* Float to integer conversion truncates toward zero, as C and PyTorch do; NaN/inf give 0
 * rather than undefined behaviour. */
DT_CONVERT_FN int64_t dt_cv_f64_to_i64(double v) {
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18)) return 0;
  return (int64_t)v;
}

DT_CONVERT_FN void dt_cv_store_f64(void *p, int t, double v) {
  switch (t) {
  case DT_FLOAT32: *(float *)p = (float)v; break;
  case DT_FLOAT64: *(double *)p = v; break;
  case DT_BFLOAT16: *(uint16_t *)p = dt_cv_f32_to_bf16((float)v); break;
  case DT_FLOAT16: *(uint16_t *)p = dt_cv_f32_to_f16((float)v); break;
  case DT_INT64: *(int64_t *)p = dt_cv_f64_to_i64(v); break;
  case DT_INT32: *(int32_t *)p = (int32_t)dt_cv_f64_to_i64(v); break;
  case DT_UINT8: *(uint8_t *)p = (uint8_t)dt_cv_f64_to_i64(v); break;
  case DT_BOOL: *(uint8_t *)p = v != 0; break;
  default: break;
  }
}

DT_CONVERT_FN int64_t dt_cv_load_i64(const void *p, int t) {
  switch (t) {
  case DT_INT64: return *(const int64_t *)p;
  case DT_INT32: return *(const int32_t *)p;
  case DT_UINT8: return *(const uint8_t *)p;
  case DT_BOOL: return *(const uint8_t *)p != 0;
  default: return dt_cv_f64_to_i64(dt_cv_load_f64(p, t));
  }
}

DT_CONVERT_FN void dt_cv_store_i64(void *p, int t, int64_t v) {
  switch (t) {
  case DT_INT64: *(int64_t *)p = v; break;
  case DT_INT32: *(int32_t *)p = (int32_t)v; break;
  case DT_UINT8: *(uint8_t *)p = (uint8_t)v; break;
  case DT_BOOL: *(uint8_t *)p = v != 0; break;
  default: dt_cv_store_f64(p, t, (double)v); break;
  }
}

#endif
