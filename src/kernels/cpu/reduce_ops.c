/* The reduction arithmetic of the collectives, one typed loop per (dtype, op). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3") /* vectorise the typed loops: they are the reductions' whole cost */
#endif
#include "kernels/cpu/reduce_ops.h"

#include <string.h>

#define OP_SUM(a, b) ((a) + (b))
#define OP_PROD(a, b) ((a) * (b))
/* signed integers wrap as torch's do, computed unsigned (a signed overflow is undefined) */
#define OP_WSUM(a, b) ((__typeof__(a))((uint64_t)(a) + (uint64_t)(b)))
#define OP_WPROD(a, b) ((__typeof__(a))((uint64_t)(a) * (uint64_t)(b)))
#define OP_MAX(a, b) ((a) > (b) || (a) != (a) ? (a) : (b)) /* NaN propagates, as in torch */
#define OP_MIN(a, b) ((a) < (b) || (a) != (a) ? (a) : (b))

/* out = in0 OP in1 OP ... OP in[nin-1], folded per element in input order (the bits do not
 * depend on the path).  Two inputs: one pass.  More: a sub-block's partial results stay in an
 * L1-sized accumulator while each input streams through once, and the last input's pass
 * writes out, so out may be any one of the inputs (each element is read before written). */
#define ACC_BYTES 4096
#define FOLD(T, OP)                                                                          \
  do {                                                                                       \
    T *o = out;                                                                              \
    const T *a = in[0];                                                                      \
    if (nin == 1) {                                                                          \
      if ((const void *)o != (const void *)a) memmove(o, a, count * sizeof(T));              \
      break;                                                                                 \
    }                                                                                        \
    const T *b = in[1];                                                                      \
    if (nin == 2) {                                                                          \
      for (size_t i = 0; i < count; i++) o[i] = OP(a[i], b[i]);                              \
      break;                                                                                 \
    }                                                                                        \
    enum { ACC_N = ACC_BYTES / sizeof(T) };                                                  \
    T acc[ACC_N];                                                                            \
    for (size_t base = 0; base < count; base += ACC_N) {                                     \
      size_t m = count - base < ACC_N ? count - base : ACC_N;                                \
      for (size_t i = 0; i < m; i++) acc[i] = OP(a[base + i], b[base + i]);                 \
      for (int k = 2; k < nin - 1; k++) {                                                    \
        const T *c = (const T *)in[k] + base;                                                \
        for (size_t i = 0; i < m; i++) acc[i] = OP(acc[i], c[i]);                            \
      }                                                                                      \
      const T *z = (const T *)in[nin - 1] + base;                                            \
      for (size_t i = 0; i < m; i++) o[base + i] = OP(acc[i], z[i]);                         \
    }                                                                                        \
  } while (0)

/* One fold function per type, built for the baseline ISA and for AVX2 (picked at run time;
 * the same per-element operations, so the same bits: a fold has nothing to contract). */
#define TYPED_AS(T, NAME, ATTR, SUM, PROD)                                                        \
  ATTR static void NAME(dt_reduce_op op, void *out, const void *const *in, int nin, size_t count) { \
    switch (op) {                                                                                 \
    case DT_REDUCE_SUM:                                                                           \
    case DT_REDUCE_AVG: FOLD(T, SUM); break;                                                      \
    case DT_REDUCE_PRODUCT: FOLD(T, PROD); break;                                              \
    case DT_REDUCE_MAX: FOLD(T, OP_MAX); break;                                                   \
    case DT_REDUCE_MIN: FOLD(T, OP_MIN); break;                                                   \
    default: break;                                                                               \
    }                                                                                             \
  }
#if defined(__x86_64__) && defined(__GNUC__)
#define TYPED(T, SUM, PROD)                                                                       \
  TYPED_AS(T, fold_##T##_base, , SUM, PROD)                                                       \
  TYPED_AS(T, fold_##T##_avx2, __attribute__((target("avx2"))), SUM, PROD)                        \
  static void fold_##T(dt_reduce_op op, void *out, const void *const *in, int nin, size_t count) { \
    if (__builtin_cpu_supports("avx2")) fold_##T##_avx2(op, out, in, nin, count);                 \
    else fold_##T##_base(op, out, in, nin, count);                                                \
  }
#else
#define TYPED(T, SUM, PROD) TYPED_AS(T, fold_##T, , SUM, PROD)
#endif
TYPED(float, OP_SUM, OP_PROD)
TYPED(double, OP_SUM, OP_PROD)
TYPED(int64_t, OP_WSUM, OP_WPROD)
TYPED(int32_t, OP_WSUM, OP_WPROD)
TYPED(uint8_t, OP_SUM, OP_PROD)

/* bool: sum/max are "or", product/min are "and"; results stay 0/1. */
static void fold_bool(dt_reduce_op op, void *out, const void *const *in, int nin, size_t count) {
  int any = op == DT_REDUCE_SUM || op == DT_REDUCE_MAX || op == DT_REDUCE_AVG;
  uint8_t *o = out;
  for (size_t i = 0; i < count; i++) {
    uint8_t v = ((const uint8_t *)in[0])[i] != 0;
    for (int k = 1; k < nin; k++) {
      uint8_t c = ((const uint8_t *)in[k])[i] != 0;
      v = any ? (v | c) : (v & c);
    }
    o[i] = v;
  }
}

/* bf16/f16: convert a block of every input to f32, fold in f32, round once at the end. */
#define HALF_BLOCK 512
static void fold_half(dt_reduce_op op, dt_dtype dtype, void *out, const void *const *in, int nin, size_t count) {
  float acc[HALF_BLOCK], cur[HALF_BLOCK];
  int bf = dtype == DT_BFLOAT16;
  for (size_t base = 0; base < count; base += HALF_BLOCK) {
    size_t n = count - base < HALF_BLOCK ? count - base : HALF_BLOCK;
    for (int k = 0; k < nin; k++) {
      const uint16_t *src = (const uint16_t *)in[k] + base;
      float *dst = k == 0 ? acc : cur;
      for (size_t i = 0; i < n; i++) dst[i] = bf ? dt_bf16_to_f32(src[i]) : dt_f16_to_f32(src[i]);
      if (k > 0) {
        const void *pair[2] = {acc, cur};
        fold_float(op, acc, pair, 2, n);
      }
    }
    if (op == DT_REDUCE_AVG)
      for (size_t i = 0; i < n; i++) acc[i] /= (float)nin;
    uint16_t *o = (uint16_t *)out + base;
    for (size_t i = 0; i < n; i++) o[i] = bf ? dt_f32_to_bf16(acc[i]) : dt_f32_to_f16(acc[i]);
  }
}

void dt_reduce_ops_apply(dt_reduce_op op, dt_dtype dtype, void *out, const void *const *in, int nin,
                         size_t count) {
  if (nin <= 0 || count == 0) return;
  switch (dtype) {
  case DT_FLOAT32: fold_float(op, out, in, nin, count); break;
  case DT_FLOAT64: fold_double(op, out, in, nin, count); break;
  case DT_INT64: fold_int64_t(op, out, in, nin, count); break;
  case DT_INT32: fold_int32_t(op, out, in, nin, count); break;
  case DT_UINT8: fold_uint8_t(op, out, in, nin, count); break;
  case DT_BOOL: fold_bool(op, out, in, nin, count); break;
  case DT_BFLOAT16:
  case DT_FLOAT16: fold_half(op, dtype, out, in, nin, count); return; /* avg done inside */
  default: return;
  }
  if (op == DT_REDUCE_AVG && nin > 1) dt_reduce_ops_divide(dtype, out, count, nin);
}

void dt_reduce_ops_divide(dt_dtype dtype, void *buf, size_t count, int n) {
  switch (dtype) {
  case DT_FLOAT32:
    for (size_t i = 0; i < count; i++) ((float *)buf)[i] /= (float)n;
    break;
  case DT_FLOAT64:
    for (size_t i = 0; i < count; i++) ((double *)buf)[i] /= n;
    break;
  case DT_BFLOAT16:
    for (size_t i = 0; i < count; i++) {
      uint16_t *p = (uint16_t *)buf + i;
      *p = dt_f32_to_bf16(dt_bf16_to_f32(*p) / (float)n);
    }
    break;
  case DT_FLOAT16:
    for (size_t i = 0; i < count; i++) {
      uint16_t *p = (uint16_t *)buf + i;
      *p = dt_f32_to_f16(dt_f16_to_f32(*p) / (float)n);
    }
    break;
  default: break; /* integers: rejected by dt_reduce_op_check */
  }
}
