/* Unary pointwise kernels: neg abs relu clamp (every dtype) and the float functions
 * exp log sqrt rsqrt tanh sigmoid gelu silu sin cos (integers compute in float32). */
/* The contiguous loops below vectorise only with runtime alias checks (out may be an input:
 * a:add_(b)), which -O2's very-cheap cost model never adds: this file gets the dynamic one. */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#include <math.h>

#include "base/error.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/vec_math.h"

/* NAME over (out, x): EXPR reads x (type T) and c (pw_ctx). */
#define PW_UN(NAME, T, EXPR)                                                  \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vc) {         \
    const pw_ctx *c = vc;                                                     \
    (void)c;                                                                  \
    if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {           \
      T *o = (T *)p[0];                                                       \
      const T *in = (const T *)p[1];                                          \
      for (int64_t i = 0; i < n; i++) {                                       \
        T x = in[i];                                                          \
        o[i] = (EXPR);                                                        \
      }                                                                       \
    } else {                                                                  \
      for (int64_t i = 0; i < n; i++) {                                       \
        T x = *(const T *)(p[1] + i * s[1]);                                  \
        *(T *)(p[0] + i * s[0]) = (EXPR);                                     \
      }                                                                       \
    }                                                                         \
  }

#define SQRT1_2 0.70710678118654752440
#define SQRT_2_PI 0.79788456080286535588 /* sqrt(2/pi) */

/* ---- every dtype (int64 computes with wrap-around, never undefined overflow) ---- */
PW_UN(neg_f32, float, -x)
PW_UN(neg_f64, double, -x)
PW_UN(neg_i64, int64_t, (int64_t)(0 - (uint64_t)x))
PW_UN(abs_f32, float, fabsf(x))
PW_UN(abs_f64, double, fabs(x))
PW_UN(abs_i64, int64_t, x < 0 ? (int64_t)(0 - (uint64_t)x) : x)
PW_UN(relu_f32, float, x > 0 ? x : (x != x ? x : 0)) /* NaN stays NaN, as in torch */
PW_UN(relu_f64, double, x > 0 ? x : (x != x ? x : 0))
PW_UN(relu_i64, int64_t, x > 0 ? x : 0)
/* clamp is min(max(x, lo), hi) as in torch: NaN passes through, min > max gives max */
static inline float clampf_(float x, const pw_ctx *c) {
  float v = c->has_lo && x < (float)c->lo ? (float)c->lo : x;
  return c->has_hi && v > (float)c->hi ? (float)c->hi : v;
}
static inline double clampd_(double x, const pw_ctx *c) {
  double v = c->has_lo && x < c->lo ? c->lo : x;
  return c->has_hi && v > c->hi ? c->hi : v;
}
static inline int64_t clampi_(int64_t x, const pw_ctx *c) {
  int64_t v = c->has_lo && x < c->loi ? c->loi : x;
  return c->has_hi && v > c->hii ? c->hii : v;
}
PW_UN(clamp_f32, float, clampf_(x, c))
PW_UN(clamp_f64, double, clampd_(x, c))
PW_UN(clamp_i64, int64_t, clampi_(x, c))
PW_UN(leaky_relu_f32, float, x > 0 ? x : x * (float)c->lo) /* NaN * slope stays NaN */
PW_UN(leaky_relu_f64, double, x > 0 ? x : x * c->lo)

/* ---- floating point only ---- */
PW_UN(exp_f32, float, expf(x))
PW_UN(exp_f64, double, exp(x))
PW_UN(log_f32, float, logf(x))
PW_UN(log_f64, double, log(x))
PW_UN(sqrt_f32, float, sqrtf(x))
PW_UN(sqrt_f64, double, sqrt(x))
PW_UN(rsqrt_f32, float, 1.0f / sqrtf(x))
PW_UN(rsqrt_f64, double, 1.0 / sqrt(x))
PW_UN(tanh_f32, float, tanhf(x))
PW_UN(tanh_f64, double, tanh(x))
PW_UN(sigmoid_f32, float, 1.0f / (1.0f + expf(-x)))
PW_UN(sigmoid_f64, double, 1.0 / (1.0 + exp(-x)))
/* float32 gelu: vec_math.h's vector erf, 4/8/16 lanes (scalar erff was most of a GPT step's
 * gelu time) */
DEFINE_VEC_MAP(gelu_map_f32, gelu4, gelu8, gelu16)
static void gelu_f32(char **p, const int64_t *s, int64_t n, void *vc) {
  (void)vc;
  if (s[0] == (int64_t)sizeof(float) && s[1] == (int64_t)sizeof(float)) {
    gelu_map_f32((const float *)p[1], NULL, (float *)p[0], n);
    return;
  }
  for (int64_t i = 0; i < n; i++) gelu_map_f32((const float *)(p[1] + i * s[1]), NULL, (float *)(p[0] + i * s[0]), 1);
}
PW_UN(gelu_f64, double, 0.5 * x * (1.0 + erf(x * SQRT1_2)))
PW_UN(gelut_f32, float, 0.5f * x * (1.0f + tanhf((float)SQRT_2_PI * (x + 0.044715f * x * x * x))))
PW_UN(gelut_f64, double, 0.5 * x * (1.0 + tanh(SQRT_2_PI * (x + 0.044715 * x * x * x))))
PW_UN(silu_f32, float, x / (1.0f + expf(-x)))
PW_UN(silu_f64, double, x / (1.0 + exp(-x)))
PW_UN(sin_f32, float, sinf(x))
PW_UN(sin_f64, double, sin(x))
PW_UN(cos_f32, float, cosf(x))
PW_UN(cos_f64, double, cos(x))

/* Runs the loop for out's compute dtype; i64 is NULL for float-only ops (the shape rule
 * gave integer inputs a float output, so it is never needed). */
static int unary(const dt_op_args *a, dt_tensor *out, dt_iter_inner_fn f32, dt_iter_inner_fn f64,
                 dt_iter_inner_fn i64, pw_ctx *c) {
  dt_dtype ct = pw_compute(out->dtype);
  dt_iter_inner_fn fn = ct == DT_FLOAT32 ? f32 : ct == DT_FLOAT64 ? f64 : i64;
  if (!fn) return dt_error("%s: not supported for %s", a->name, dt_dtype_name(a->in[0]->dtype));
  pw_ctx zero = {0};
  return pw_run(out, ct, out->dtype, 1, a->in, &ct, fn, c ? c : &zero, a->name);
}

#define PW_UNARY_ALL(name) \
  int dt_cpu_##name(const dt_op_args *a, dt_tensor **out) { \
    return unary(a, out[0], name##_f32, name##_f64, name##_i64, NULL); \
  }
#define PW_UNARY_FLOAT(name) \
  int dt_cpu_##name(const dt_op_args *a, dt_tensor **out) { return unary(a, out[0], name##_f32, name##_f64, NULL, NULL); }

PW_UNARY_ALL(neg)
PW_UNARY_ALL(abs)
PW_UNARY_ALL(relu)
PW_UNARY_FLOAT(exp)
PW_UNARY_FLOAT(log)
PW_UNARY_FLOAT(sqrt)
PW_UNARY_FLOAT(rsqrt)
PW_UNARY_FLOAT(tanh)
PW_UNARY_FLOAT(sigmoid)
PW_UNARY_FLOAT(silu)
PW_UNARY_FLOAT(sin)
PW_UNARY_FLOAT(cos)

int dt_cpu_gelu(const dt_op_args *a, dt_tensor **out) {
  if (a->flags & DT_ARG_GELU_TANH) return unary(a, out[0], gelut_f32, gelut_f64, NULL, NULL);
  return unary(a, out[0], gelu_f32, gelu_f64, NULL, NULL);
}

/* clamp: scalar[0] / ints[0] is min, scalar[1] / ints[1] max (ints when DT_ARG_SCALAR_INT). */
int dt_cpu_clamp(const dt_op_args *a, dt_tensor **out) {
  pw_ctx c = {0};
  c.has_lo = !!(a->flags & DT_ARG_HAS_MIN);
  c.has_hi = !!(a->flags & DT_ARG_HAS_MAX);
  c.lo = a->scalar[0];
  c.hi = a->scalar[1];
  int is_int = a->flags & DT_ARG_SCALAR_INT;
  c.loi = is_int ? a->ints[0] : (int64_t)c.lo;
  c.hii = is_int ? a->ints[1] : (int64_t)c.hi;
  return unary(a, out[0], clamp_f32, clamp_f64, clamp_i64, &c);
}

/* hardtanh: clamp to [scalar[0], scalar[1]] (floating dtypes; NaN passes through). */
int dt_cpu_hardtanh(const dt_op_args *a, dt_tensor **out) {
  pw_ctx c = {0};
  c.has_lo = c.has_hi = 1;
  c.lo = a->scalar[0];
  c.hi = a->scalar[1];
  return unary(a, out[0], clamp_f32, clamp_f64, NULL, &c);
}

/* leaky_relu: x, or x * scalar[0] (the negative slope) where x <= 0. */
int dt_cpu_leaky_relu(const dt_op_args *a, dt_tensor **out) {
  pw_ctx c = {0};
  c.lo = a->scalar[0];
  return unary(a, out[0], leaky_relu_f32, leaky_relu_f64, NULL, &c);
}
