/* Pointwise kernels of the math family: floor ceil round trunc sign nan_to_num (every
 * non-bool dtype: integers pass unchanged, sign gives -1/0/1), erf (floating), the tests
 * isnan isinf isfinite (bool results), lerp, addcmul and addcdiv (three operands broadcast). */
#include <float.h>
#include <math.h>

#include "base/error.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/kernel_table.h"

/* NAME over (out TO, x T): EXPR reads x and c (pw_ctx). */
#define MATH_UN(NAME, TO, T, EXPR)                                          \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vc) {       \
    const pw_ctx *c = vc;                                                   \
    (void)c;                                                                \
    for (int64_t i = 0; i < n; i++) {                                       \
      T x = *(const T *)(p[1] + i * s[1]);                                  \
      (void)x;                                                              \
      *(TO *)(p[0] + i * s[0]) = (TO)(EXPR);                                \
    }                                                                       \
  }

/* round half to even (the default rounding mode, as torch); decimals d scale by 10^|d| the
 * way torch does: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for d < 0 */
static inline double round_d(double x, const pw_ctx *c) {
  if (c->si == 0) return nearbyint(x);
  return c->si > 0 ? nearbyint(x * c->s) / c->s : nearbyint(x / c->s) * c->s;
}
static inline float round_f(float x, const pw_ctx *c) {
  if (c->si == 0) return nearbyintf(x);
  float t = (float)c->s;
  return c->si > 0 ? nearbyintf(x * t) / t : nearbyintf(x / t) * t;
}
/* nan_to_num: c->s for NaN, c->hi for +inf, c->lo for -inf */
#define NAN_TO_NUM(T, x) ((x) != (x) ? (T)c->s : (x) == (T)INFINITY ? (T)c->hi : (x) == -(T)INFINITY ? (T)c->lo : (x))

MATH_UN(floor_f32, float, float, floorf(x))
MATH_UN(floor_f64, double, double, floor(x))
MATH_UN(ceil_f32, float, float, ceilf(x))
MATH_UN(ceil_f64, double, double, ceil(x))
MATH_UN(trunc_f32, float, float, truncf(x))
MATH_UN(trunc_f64, double, double, trunc(x))
MATH_UN(round_f32, float, float, round_f(x, c))
MATH_UN(round_f64, double, double, round_d(x, c))
MATH_UN(same_i64, int64_t, int64_t, x)
MATH_UN(sign_f32, float, float, x > 0 ? 1.0f : x < 0 ? -1.0f : x) /* 0 and NaN stay */
MATH_UN(sign_f64, double, double, x > 0 ? 1.0 : x < 0 ? -1.0 : x)
MATH_UN(sign_i64, int64_t, int64_t, (x > 0) - (x < 0))
MATH_UN(erf_f32, float, float, erff(x))
MATH_UN(erf_f64, double, double, erf(x))
MATH_UN(nan_to_num_f32, float, float, NAN_TO_NUM(float, x))
MATH_UN(nan_to_num_f64, double, double, NAN_TO_NUM(double, x))
MATH_UN(isnan_f32, uint8_t, float, isnan(x))
MATH_UN(isnan_f64, uint8_t, double, isnan(x))
MATH_UN(isinf_f32, uint8_t, float, isinf(x))
MATH_UN(isinf_f64, uint8_t, double, isinf(x))
MATH_UN(isfinite_f32, uint8_t, float, isfinite(x))
MATH_UN(isfinite_f64, uint8_t, double, isfinite(x))
MATH_UN(false_i64, uint8_t, int64_t, 0)
MATH_UN(true_i64, uint8_t, int64_t, 1)

/* Runs the loop of out's compute dtype (x's for a bool result) over (out, x). */
static int unary(const dt_op_args *a, dt_tensor *out, dt_iter_inner_fn f32, dt_iter_inner_fn f64, dt_iter_inner_fn i64,
                 pw_ctx *c) {
  dt_dtype xt = a->in[0]->dtype, ct = pw_compute(out->dtype == DT_BOOL ? xt : out->dtype);
  dt_iter_inner_fn fn = ct == DT_FLOAT32 ? f32 : ct == DT_FLOAT64 ? f64 : i64;
  if (!fn) return dt_error("%s: not supported for %s", a->name, dt_dtype_name(xt));
  dt_dtype ot = out->dtype == DT_BOOL ? DT_BOOL : ct;
  pw_ctx zero = {0};
  return pw_run(out, ot, out->dtype == DT_BOOL ? xt : out->dtype, 1, a->in, &ct, fn, c ? c : &zero, a->name);
}

#define MATH_UNARY(name, i64)                                                                               \
  int dt_cpu_##name(const dt_op_args *a, dt_tensor **out) { return unary(a, out[0], name##_f32, name##_f64, i64, NULL); }
MATH_UNARY(floor, same_i64)
MATH_UNARY(ceil, same_i64)
MATH_UNARY(trunc, same_i64)
MATH_UNARY(sign, sign_i64)
MATH_UNARY(erf, NULL)
MATH_UNARY(isnan, false_i64)
MATH_UNARY(isinf, false_i64)
MATH_UNARY(isfinite, true_i64)

/* A number the float32 loops convert: beyond float's range it is an infinity (the C cast
 * would be undefined); used where the compute dtype is float32. */
static double fit_f32(double v, const dt_tensor *out) {
  if (pw_compute(out->dtype) != DT_FLOAT32 || !(fabs(v) > FLT_MAX)) return v;
  return v > 0 ? INFINITY : -INFINITY;
}

/* round: decimals in ints[0] (10^|decimals| in c.s) */
int dt_cpu_round(const dt_op_args *a, dt_tensor **out) {
  pw_ctx c = {0};
  c.si = a->nints > 0 ? a->ints[0] : 0;
  c.s = fit_f32(pow(10.0, (double)(c.si < 0 ? -c.si : c.si)), out[0]);
  return unary(a, out[0], round_f32, round_f64, same_i64, &c);
}

/* The largest finite value of a floating dtype (nan_to_num's default for +inf). */
static double finite_max(dt_dtype t) {
  switch (t) {
  case DT_FLOAT64: return DBL_MAX;
  case DT_BFLOAT16: return 3.38953138925153547590470800371487866880e38;
  case DT_FLOAT16: return 65504.0;
  default: return FLT_MAX;
  }
}

/* nan_to_num: scalar[0] for NaN, scalar[1] for +inf (DT_ARG_HAS_MAX), scalar[2] for -inf
 * (DT_ARG_HAS_MIN); without them the dtype's largest and lowest finite values. */
int dt_cpu_nan_to_num(const dt_op_args *a, dt_tensor **out) {
  pw_ctx c = {0};
  double m = finite_max(out[0]->dtype);
  c.s = fit_f32(a->scalar[0], out[0]);
  c.hi = fit_f32((a->flags & DT_ARG_HAS_MAX) ? a->scalar[1] : m, out[0]);
  c.lo = fit_f32((a->flags & DT_ARG_HAS_MIN) ? a->scalar[2] : -m, out[0]);
  return unary(a, out[0], nan_to_num_f32, nan_to_num_f64, same_i64, &c);
}

/* ---- three operands (out, a, b, w): EXPR reads a, b, w (type T) and c ---- */
#define MATH_TERN(NAME, T, EXPR)                                                         \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vc) {                    \
    const pw_ctx *c = vc;                                                                \
    (void)c;                                                                             \
    for (int64_t i = 0; i < n; i++) {                                                    \
      T a = *(const T *)(p[1] + i * s[1]), b = *(const T *)(p[2] + i * s[2]);            \
      T w = *(const T *)(p[3] + i * s[3]);                                               \
      *(T *)(p[0] + i * s[0]) = (EXPR);                                                  \
    }                                                                                    \
  }
/* ... and two with the weight a number (c->s) */
#define MATH_BIN(NAME, T, EXPR)                                                          \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vc) {                    \
    const pw_ctx *c = vc;                                                                \
    const T w = (T)c->s;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                    \
      T a = *(const T *)(p[1] + i * s[1]), b = *(const T *)(p[2] + i * s[2]);            \
      *(T *)(p[0] + i * s[0]) = (EXPR);                                                  \
    }                                                                                    \
  }
/* torch's lerp: exact at both ends (w = 0 gives a, w = 1 gives b) */
#define LERP(T, a, b, w) (fabs((double)(w)) < 0.5 ? (a) + (w) * ((b) - (a)) : (b) - ((b) - (a)) * ((T)1 - (w)))
MATH_TERN(lerp_t_f32, float, LERP(float, a, b, w))
MATH_TERN(lerp_t_f64, double, LERP(double, a, b, w))
MATH_BIN(lerp_s_f32, float, LERP(float, a, b, w))
MATH_BIN(lerp_s_f64, double, LERP(double, a, b, w))
/* addcmul/addcdiv: a + value * b * w (b / w); integers wrap (unsigned arithmetic) */
MATH_TERN(addcmul_f32, float, a + (float)c->s * b * w)
MATH_TERN(addcmul_f64, double, a + c->s * b * w)
MATH_TERN(addcmul_i64, int64_t, (int64_t)((uint64_t)a + (uint64_t)c->si * (uint64_t)b * (uint64_t)w))
MATH_TERN(addcdiv_f32, float, a + (float)c->s * b / w)
MATH_TERN(addcdiv_f64, double, a + c->s * b / w)

/* Runs fn over (out, in[0..nin-1]) with every operand in out's compute dtype. */
static int nary(const dt_op_args *a, dt_tensor *out, int nin, dt_iter_inner_fn f32, dt_iter_inner_fn f64,
                dt_iter_inner_fn i64, pw_ctx *c) {
  dt_dtype ct = pw_compute(out->dtype), in_dt[3] = {ct, ct, ct};
  dt_iter_inner_fn fn = ct == DT_FLOAT32 ? f32 : ct == DT_FLOAT64 ? f64 : i64;
  if (!fn) return dt_error("%s: not supported for %s", a->name, dt_dtype_name(out->dtype));
  return pw_run(out, ct, out->dtype, nin, a->in, in_dt, fn, c, a->name);
}

int dt_cpu_lerp(const dt_op_args *a, dt_tensor **out) {
  pw_ctx c = {0};
  c.s = fit_f32(a->scalar[0], out[0]);
  if (a->flags & DT_ARG_SCALAR) return nary(a, out[0], 2, lerp_s_f32, lerp_s_f64, NULL, &c);
  return nary(a, out[0], 3, lerp_t_f32, lerp_t_f64, NULL, &c);
}

/* value: scalar[0], exactly ints[0] when DT_ARG_SCALAR_INT */
static pw_ctx value_ctx(const dt_op_args *a, const dt_tensor *out) {
  pw_ctx c = {0};
  c.s = fit_f32(a->scalar[0], out);
  c.si = (a->flags & DT_ARG_SCALAR_INT) ? a->ints[0] : 0; /* integer tensors take integer values only */
  return c;
}
int dt_cpu_addcmul(const dt_op_args *a, dt_tensor **out) {
  pw_ctx c = value_ctx(a, out[0]);
  return nary(a, out[0], 3, addcmul_f32, addcmul_f64, addcmul_i64, &c);
}
int dt_cpu_addcdiv(const dt_op_args *a, dt_tensor **out) {
  pw_ctx c = value_ctx(a, out[0]);
  return nary(a, out[0], 3, addcdiv_f32, addcdiv_f64, NULL, &c);
}

/* masked_fill_: masked_fill written into self (out[0] is in[0]) */
int dt_cpu_masked_fill_(const dt_op_args *a, dt_tensor **out) { return dt_cpu_masked_fill(a, out); }
