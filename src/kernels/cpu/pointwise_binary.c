/* Binary pointwise kernels: add sub mul div pow remainder and the comparisons.
 * Loops exist for the compute dtypes float32, float64 and int64 (see pw_compute) in
 * three forms: tensor-tensor (tt), tensor-scalar (ts) and scalar-tensor (st).  Each
 * inner loop has a contiguous branch the compiler vectorises and a strided one. */
/* The contiguous loops below vectorise only with runtime alias checks (out may be an input:
 * a:add_(b)), which -O2's very-cheap cost model never adds: this file gets the dynamic one. */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#include <math.h>

#include "base/error.h"
#include "base/stream_copy.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/kernel_table.h"

/* ---- scalar helpers ---------------------------------------------------------------------- */
/* Integer arithmetic wraps (two's complement) instead of being undefined on overflow. */
static inline int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t wneg(int64_t a) { return (int64_t)(0 - (uint64_t)a); } /* -INT64_MIN wraps to itself */
/* A double as int64 without the UB of an out-of-range cast (only integral compute reads it,
 * and there the number was an integer: saturating is never observable). */
static inline int64_t sat_i64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

/* torch.remainder: the result has the sign of the divisor (Lua's % and Python's %). */
static inline float remf_(float a, float b) {
  float m = fmodf(a, b);
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
static inline double rem_(double a, double b) {
  double m = fmod(a, b);
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
static inline int64_t remi_(int64_t a, int64_t b, pw_ctx *c) {
  if (b == 0) return c->err = PW_ERR_ZERO_DIV, 0;
  if (b == -1) return 0; /* INT64_MIN % -1 traps in C */
  int64_t m = a % b;
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
static inline int64_t powi_(int64_t a, int64_t b, pw_ctx *c) {
  if (b < 0) return c->err = PW_ERR_NEG_POW, 0;
  int64_t r = 1;
  for (; b; b >>= 1, a = wmul(a, a))
    if (b & 1) r = wmul(r, a);
  return r;
}

/* ---- loop generator ------------------------------------------------------------------------ */
/* A contiguous out when pw_ctx.stream is set: blocks of EXPR computed into an L1 buffer, each
 * written out with non-temporal stores (an add past the cache: 3 memory transfers per element
 * instead of 4).  BODY sets buf[i] from element i0 + i. */
#define PW_STREAM_ELEMS 1024
#define PW_STREAMED(TO, o, n, ...)                                                              \
  do {                                                                                          \
    TO buf[PW_STREAM_ELEMS] __attribute__((aligned(64)));                                       \
    for (int64_t i0 = 0; i0 < n; i0 += PW_STREAM_ELEMS) {                                       \
      int64_t m = n - i0 < PW_STREAM_ELEMS ? n - i0 : PW_STREAM_ELEMS;                          \
      for (int64_t i = 0; i < m; i++) __VA_ARGS__                                               \
      dt_stream_copy(o + i0, buf, sizeof(TO) * (size_t)m);                                      \
    }                                                                                           \
    dt_stream_fence();                                                                          \
  } while (0)

/* FN over (out, x) where the scalar operand is SV and the tensor element TV. */
#define PW_BIN_S(FN, TO, T, SCAL, EXPR, SV, TV)                                                 \
  static void FN(char **p, const int64_t *s, int64_t n, void *vc) {                            \
    pw_ctx *c = vc;                                                                             \
    const T SV = (T)(SCAL);                                                                     \
    if (s[0] == (int64_t)sizeof(TO) && s[1] == (int64_t)sizeof(T)) {                            \
      TO *o = (TO *)p[0];                                                                       \
      const T *x = (const T *)p[1];                                                             \
      if (c->stream) {                                                                          \
        PW_STREAMED(TO, o, n, { T TV = x[i0 + i]; buf[i] = (TO)(EXPR); });                      \
        return;                                                                                 \
      }                                                                                         \
      for (int64_t i = 0; i < n; i++) {                                                         \
        T TV = x[i];                                                                            \
        o[i] = (TO)(EXPR);                                                                      \
      }                                                                                         \
    } else {                                                                                    \
      for (int64_t i = 0; i < n; i++) {                                                         \
        T TV = *(const T *)(p[1] + i * s[1]);                                                   \
        *(TO *)(p[0] + i * s[0]) = (TO)(EXPR);                                                  \
      }                                                                                         \
    }                                                                                           \
  }

/* NAME_tt over (out, a, b), NAME_ts over (out, a) with b the scalar, NAME_st over (out, b)
 * with a the scalar.  EXPR reads a, b (type T) and c (pw_ctx); output type TO. */
#define PW_BIN(NAME, TO, T, SCAL, EXPR)                                                         \
  static void NAME##_tt(char **p, const int64_t *s, int64_t n, void *vc) {                     \
    pw_ctx *c = vc;                                                                             \
    (void)c;                                                                                    \
    const int64_t eo = sizeof(TO), ei = sizeof(T);                                              \
    if (s[0] == eo && s[1] == ei && s[2] == ei) {                                               \
      TO *o = (TO *)p[0];                                                                       \
      const T *x = (const T *)p[1], *y = (const T *)p[2];                                       \
      if (c->stream) {                                                                          \
        PW_STREAMED(TO, o, n, { T a = x[i0 + i], b = y[i0 + i]; buf[i] = (TO)(EXPR); });        \
        return;                                                                                 \
      }                                                                                         \
      for (int64_t i = 0; i < n; i++) {                                                         \
        T a = x[i], b = y[i];                                                                   \
        o[i] = (TO)(EXPR);                                                                      \
      }                                                                                         \
    } else if (s[0] == eo && s[1] == ei && s[2] == 0) {                                         \
      TO *o = (TO *)p[0];                                                                       \
      const T *x = (const T *)p[1], b = *(const T *)p[2];                                       \
      for (int64_t i = 0; i < n; i++) {                                                         \
        T a = x[i];                                                                             \
        o[i] = (TO)(EXPR);                                                                      \
      }                                                                                         \
    } else {                                                                                    \
      for (int64_t i = 0; i < n; i++) {                                                         \
        T a = *(const T *)(p[1] + i * s[1]), b = *(const T *)(p[2] + i * s[2]);                 \
        *(TO *)(p[0] + i * s[0]) = (TO)(EXPR);                                                  \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  PW_BIN_S(NAME##_ts, TO, T, SCAL, EXPR, b, a)                                                 \
  PW_BIN_S(NAME##_st, TO, T, SCAL, EXPR, a, b)

/* One op in the three compute dtypes. */
#define PW_BIN3(NAME, TO32, TO64, TOI, EF, ED, EI)  \
  PW_BIN(NAME##_f32, TO32, float, c->s, EF)         \
  PW_BIN(NAME##_f64, TO64, double, c->s, ED)        \
  PW_BIN(NAME##_i64, TOI, int64_t, c->si, EI)

PW_BIN3(add, float, double, int64_t, a + b, a + b, wadd(a, b))
PW_BIN3(adda, float, double, int64_t, a + (float)c->alpha * b, a + c->alpha * b, wadd(a, wmul(c->alphai, b)))
PW_BIN3(mul, float, double, int64_t, a * b, a * b, wmul(a, b))
PW_BIN3(div, float, double, int64_t, a / b, a / b, a / (b ? b : 1)) /* int: unused, div computes in float */
PW_BIN3(pow, float, double, int64_t, b == 2 ? a * a : powf(a, b), b == 2 ? a * a : pow(a, b), powi_(a, b, c))
PW_BIN3(rem, float, double, int64_t, remf_(a, b), rem_(a, b), remi_(a, b, c))
PW_BIN3(eq, uint8_t, uint8_t, uint8_t, a == b, a == b, a == b)
PW_BIN3(ne, uint8_t, uint8_t, uint8_t, a != b, a != b, a != b)
PW_BIN3(lt, uint8_t, uint8_t, uint8_t, a < b, a < b, a < b)
PW_BIN3(le, uint8_t, uint8_t, uint8_t, a <= b, a <= b, a <= b)
PW_BIN3(gt, uint8_t, uint8_t, uint8_t, a > b, a > b, a > b)
PW_BIN3(ge, uint8_t, uint8_t, uint8_t, a >= b, a >= b, a >= b)

enum { F_ADD, F_ADDA, F_MUL, F_DIV, F_POW, F_REM, F_EQ, F_NE, F_LT, F_LE, F_GT, F_GE, F_COUNT };
enum { V_TT, V_TS, V_ST };

#define PW_ROW(NAME)                                                    \
  {{NAME##_f32_tt, NAME##_f32_ts, NAME##_f32_st},                       \
   {NAME##_f64_tt, NAME##_f64_ts, NAME##_f64_st},                       \
   {NAME##_i64_tt, NAME##_i64_ts, NAME##_i64_st}}

static const dt_iter_inner_fn loops[F_COUNT][3][3] = {
    PW_ROW(add), PW_ROW(adda), PW_ROW(mul), PW_ROW(div), PW_ROW(pow), PW_ROW(rem),
    PW_ROW(eq),  PW_ROW(ne),   PW_ROW(lt),  PW_ROW(le),  PW_ROW(gt),  PW_ROW(ge),
};

static int family(int op) {
  switch (op) {
  case DT_OP_ADD: case DT_OP_SUB: case DT_OP_ADD_: return F_ADD;
  case DT_OP_MUL: case DT_OP_MUL_: return F_MUL;
  case DT_OP_DIV: return F_DIV;
  case DT_OP_POW: return F_POW;
  case DT_OP_REMAINDER: return F_REM;
  case DT_OP_EQ: return F_EQ;
  case DT_OP_NE: return F_NE;
  case DT_OP_LT: return F_LT;
  case DT_OP_LE: return F_LE;
  case DT_OP_GT: return F_GT;
  default: return F_GE;
  }
}

int pw_binary(const dt_op_args *a, dt_tensor *out, int op) {
  int fam = family(op), compare = fam >= F_EQ;
  dt_dtype rt = dt_result_type_binary(a);
  if (fam == F_DIV && !dt_dtype_is_float(rt)) rt = DT_DEFAULT_FLOAT;
  dt_dtype ct = pw_compute(rt);
  int ti = ct == DT_FLOAT32 ? 0 : ct == DT_FLOAT64 ? 1 : 2;
  int scalar = a->flags & DT_ARG_SCALAR, left = scalar && (a->flags & DT_ARG_SCALAR_LEFT);
  pw_ctx c = {0};
  c.s = a->scalar[0];
  c.si = (a->flags & DT_ARG_SCALAR_INT) ? a->ints[0] : sat_i64(a->scalar[0]);
  if (compare && scalar && dt_dtype_is_float(rt)) { /* the number rounds to the common dtype, as in torch */
    char buf[8];
    dt_store_f64(buf, rt, c.s);
    c.s = dt_load_f64(buf, rt);
  }
  /* sub is add with -alpha; a scalar operand absorbs alpha.  Integer arithmetic wraps as
   * torch's int64 does: a - alpha*b == a + (-alpha)*b modulo 2^64, -INT64_MIN included. */
  if (fam == F_ADD) {
    c.alpha = a->nscalar >= 2 ? a->scalar[1] : 1;
    c.alphai = a->nscalar < 2 ? 1 : (a->flags & DT_ARG_ALPHA_INT) ? a->ints[1] : sat_i64(c.alpha);
    if (op == DT_OP_SUB) c.alpha = -c.alpha, c.alphai = wneg(c.alphai);
    if (scalar && !left) c.s *= c.alpha, c.si = wmul(c.si, c.alphai);
    else if (c.alpha != 1) fam = F_ADDA;
  }
  dt_dtype in_dt[2] = {ct, ct};
  dt_iter_inner_fn fn = loops[fam][ti][scalar ? (left ? V_ST : V_TS) : V_TT];
  return pw_run(out, compare ? DT_BOOL : ct, rt, scalar ? 1 : 2, a->in, in_dt, fn, &c, a->name);
}

#define PW_KERNEL(name, ID) \
  int dt_cpu_##name(const dt_op_args *a, dt_tensor **out) { return pw_binary(a, out[0], ID); }
PW_KERNEL(add, DT_OP_ADD)
PW_KERNEL(sub, DT_OP_SUB)
PW_KERNEL(mul, DT_OP_MUL)
PW_KERNEL(div, DT_OP_DIV)
PW_KERNEL(pow, DT_OP_POW)
PW_KERNEL(remainder, DT_OP_REMAINDER)
PW_KERNEL(eq, DT_OP_EQ)
PW_KERNEL(ne, DT_OP_NE)
PW_KERNEL(lt, DT_OP_LT)
PW_KERNEL(le, DT_OP_LE)
PW_KERNEL(gt, DT_OP_GT)
PW_KERNEL(ge, DT_OP_GE)
PW_KERNEL(add_, DT_OP_ADD_)
PW_KERNEL(mul_, DT_OP_MUL_)
