/* softmax and log_softmax along one dim, numerically stable: exp(x - max) / sum.
 * The input is made contiguous in its compute dtype (bf16/f16 compute in f32) and seen as
 * [outer, n, inner]; each line of n elements takes three sweeps (max, exp+sum, scale), the
 * last dim's vectorised for float32. */
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/softmax_line.h"
#include "kernels/cpu/vec_math.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- exp(x - m) for a row: exp4/exp8 of vec_math.h (glibc's expf is scalar and was ~85% of
 * softmax's time) ---- */
/* y[i] = exp(x[i] - m[mstep ? i : 0]) for i < n. */
static void exp_sub_f32(const float *x, const float *m, int mstep, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f xv, mv = splat(m[0]);
    memcpy(&xv, x + i, sizeof xv);
    if (mstep) memcpy(&mv, m + i, sizeof mv);
    v4f e = xv - mv;
    exp4(&e);
    memcpy(y + i, &e, sizeof e);
  }
  if (i < n) { /* the tail, padded into one vector */
    v4f xv = splat(0), mv = splat(m[0]);
    for (int64_t j = 0; i + j < n; j++) xv[j] = x[i + j], mv[j] = m[mstep ? i + j : 0];
    v4f e = xv - mv;
    exp4(&e);
    for (int64_t j = 0; i + j < n; j++) y[i + j] = e[j];
  }
}

static void exp_sub_f64(const double *x, const double *m, int mstep, double *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = exp(x[i] - m[mstep ? i : 0]);
}

/* ---- one contiguous line: max, then exp + sum in one sweep, then scale -------------------
 * float32 runs 4 lanes (the scalar max with its ?: does not vectorise without -ffast-math).
 * The max skips NaNs (v > m is false for them): a NaN makes the sum NaN anyway. */
static float max_f32_sse(const float *restrict x, int64_t n) {
  v4f mv = splat(-INFINITY);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f v;
    memcpy(&v, x + i, sizeof v);
    v4i gt = v > mv;
    mv = (v4f)(((v4i)v & gt) | ((v4i)mv & ~gt));
  }
  float m = mv[0] > mv[1] ? mv[0] : mv[1], m2 = mv[2] > mv[3] ? mv[2] : mv[3];
  m = m2 > m ? m2 : m;
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

/* y = exp(x - m), returning sum(y): 16 float lanes (lane k adds the elements i = k mod 16) for
 * at most 256 elements at a time, each such partial then added in double in a fixed tree, so
 * the sum's error stays that of a double sum.  The sweep is compute bound, so it comes three
 * times: the 16 lanes as four SSE registers, as two AVX2 registers where the CPU has AVX2, as
 * one AVX-512 register where it has AVX-512F.  All add the same lanes in the same order, the
 * exp is the same lane arithmetic in every width (vec_math.h), and GCC keeps
 * -ffp-contract=off under -std=c11 (no fused multiply-add): the same bits on every machine. */
/* The 16 lanes' total in double, halving: p[k] = l[k] + l[k+8], then p[k] + p[k+4], then
 * + [k+2], then the last two (lanes16_total_avx512: the same adds in registers). */
static inline double lanes16_total(const float *l) {
  double p[8];
  for (int k = 0; k < 8; k++) p[k] = (double)l[k] + l[k + 8];
  for (int k = 0; k < 4; k++) p[k] += p[k + 4];
  for (int k = 0; k < 2; k++) p[k] += p[k + 2];
  return p[0] + p[1];
}

static double exp_sum_tail(const float *x, float m, float *y, int64_t i, int64_t n, double total) {
  if (i < n) {
    exp_sub_f32(x + i, &m, 0, y + i, n - i);
    for (; i < n; i++) total += y[i];
  }
  return total;
}

/* The SSE form of the 16 lanes: total += the lanes' sums of vectors `a` that BODY makes for
 * elements j..j+3, over at most 256 elements at a time (i advances; the tail is the caller's). */
#define SUM16_SSE(total, i, n, BODY)                                    \
  while (i + 16 <= n) {                                                 \
    int64_t end_ = n - i > 256 ? i + 256 : n;                           \
    v4f acc_[4] = {splat(0), splat(0), splat(0), splat(0)};             \
    for (; i + 16 <= end_; i += 16)                                     \
      for (int64_t j = i; j < i + 16; j += 4) {                         \
        v4f a;                                                          \
        BODY;                                                           \
        acc_[(j - i) / 4] += a;                                         \
      }                                                                 \
    float l_[16];                                                       \
    memcpy(l_, acc_, sizeof l_);                                        \
    total += lanes16_total(l_);                                         \
  }

static double exp_sum_f32_sse(const float *restrict x, float m, float *restrict y, int64_t n) {
  double total = 0;
  int64_t i = 0;
  SUM16_SSE(total, i, n, {
    memcpy(&a, x + j, sizeof a);
    a -= splat(m);
    exp4(&a);
    memcpy(y + j, &a, sizeof a);
  })
  return exp_sum_tail(x, m, y, i, n, total);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_WIDE_SWEEP 1
__attribute__((target("avx2"))) static double exp_sum_f32_avx2(const float *restrict x, float m, float *restrict y,
                                                                int64_t n) {
  double total = 0;
  int64_t i = 0;
  while (i + 16 <= n) {
    int64_t end = n - i > 256 ? i + 256 : n;
    v8f lo = splat8(0), hi = splat8(0);
    for (; i + 16 <= end; i += 16) {
      v8f a, b;
      memcpy(&a, x + i, sizeof a);
      memcpy(&b, x + i + 8, sizeof b);
      a -= splat8(m), b -= splat8(m);
      exp8(&a), exp8(&b);
      memcpy(y + i, &a, sizeof a);
      memcpy(y + i + 8, &b, sizeof b);
      lo += a, hi += b;
    }
    float l[16];
    memcpy(l, &lo, sizeof lo);
    memcpy(l + 8, &hi, sizeof hi);
    total += lanes16_total(l);
  }
  return exp_sum_tail(x, m, y, i, n, total);
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static inline double lanes16_total_avx512(__m512 acc) {
  __m512d p = _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(acc)), _mm512_cvtps_pd(_mm512_extractf32x8_ps(acc, 1)));
  __m256d q = _mm256_add_pd(_mm512_castpd512_pd256(p), _mm512_extractf64x4_pd(p, 1));
  __m128d r = _mm_add_pd(_mm256_castpd256_pd128(q), _mm256_extractf128_pd(q, 1));
  return _mm_cvtsd_f64(r) + _mm_cvtsd_f64(_mm_unpackhi_pd(r, r));
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static double
exp_sum_f32_avx512(const float *restrict x, float m, float *restrict y, int64_t n) {
  double total = 0;
  int64_t i = 0;
  __m512 mv = _mm512_set1_ps(m);
  while (i + 16 <= n) {
    int64_t end = n - i > 256 ? i + 256 : n;
    __m512 acc = _mm512_setzero_ps();
    for (; i + 16 <= end; i += 16) {
      __m512 v = exp16v(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
      _mm512_storeu_ps(y + i, v);
      acc = _mm512_add_ps(acc, v);
    }
    total += lanes16_total_avx512(acc);
  }
  if (i < n) { /* the tail in one masked register: each element's exp as in any width */
    __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, exp16v(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv)));
    for (; i < n; i++) total += y[i];
  }
  return total;
}

/* the row's max, 16 lanes at a time (a max does not depend on the grouping) */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static float max_f32_avx512(const float *restrict x,
                                                                                          int64_t n) {
  __m512 mv = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) mv = _mm512_max_ps(_mm512_loadu_ps(x + i), mv); /* x NaN: keeps mv, as max_f32 */
  float m = _mm512_reduce_max_ps(mv);
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}
#endif

static double exp_sum_f32(const float *restrict x, float m, float *restrict y, int64_t n) {
#ifdef HAVE_WIDE_SWEEP
  if (__builtin_cpu_supports("avx512f")) return exp_sum_f32_avx512(x, m, y, n);
  if (__builtin_cpu_supports("avx2")) return exp_sum_f32_avx2(x, m, y, n);
#endif
  return exp_sum_f32_sse(x, m, y, n);
}

/* The row's max, the shift of its exps: a zero max is made +0, so -0 and +0 rows give the same
 * bits in any width; all -inf gives 0, so exp gives 0s and the 0/0 gives nan as in PyTorch. */
static float max_f32(const float *restrict x, int64_t n) {
  float m;
#ifdef HAVE_WIDE_SWEEP
  if (n >= 16 && __builtin_cpu_supports("avx512f")) m = max_f32_avx512(x, n);
  else
#endif
    m = max_f32_sse(x, n);
  return m == 0 || (isinf(m) && m < 0) ? 0.0f : m;
}

/* y = y * a (log_out 0) or y = x - a - b (log_out 1): GCC -O2 leaves such loops scalar when
 * the trip count is unknown (its cheap cost model), so the lanes are written out. */
#ifdef HAVE_WIDE_SWEEP
/* the same per-element arithmetic 16 lanes at a time, the tail in a masked register */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void
finish_f32_avx512(const float *restrict x, float *restrict y, int64_t n, float a, float b, int log_out) {
  __m512 av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
    __m512 v = log_out ? _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), av), bv)
                       : _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), av);
    _mm512_mask_storeu_ps(y + i, k, v);
  }
}
#endif

static void finish_f32(const float *restrict x, float *restrict y, int64_t n, float a, float b, int log_out) {
#ifdef HAVE_WIDE_SWEEP
  if (__builtin_cpu_supports("avx512f")) {
    finish_f32_avx512(x, y, n, a, b, log_out);
    return;
  }
#endif
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f v;
    if (log_out) {
      memcpy(&v, x + i, sizeof v);
      v = v - splat(a) - splat(b);
    } else {
      memcpy(&v, y + i, sizeof v);
      v = v * splat(a);
    }
    memcpy(y + i, &v, sizeof v);
  }
  for (; i < n; i++) y[i] = log_out ? x[i] - a - b : y[i] * a;
}

static void finish_f64(const double *restrict x, double *restrict y, int64_t n, double a, double b, int log_out) {
  for (int64_t i = 0; i < n; i++) y[i] = log_out ? x[i] - a - b : y[i] * a;
}

/* max_f32's shift in double (all -inf: 0) */
static double max_f64(const double *restrict x, int64_t n) {
  double m = -INFINITY;
  for (int64_t k = 0; k < n; k++) m = x[k] > m ? x[k] : m;
  return isinf(m) && m < 0 ? 0 : m;
}

static double exp_sum_f64(const double *restrict x, double m, double *restrict y, int64_t n) {
  exp_sub_f64(x, &m, 0, y, n);
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* independent partial sums */
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) s0 += y[k], s1 += y[k + 1], s2 += y[k + 2], s3 += y[k + 3];
  for (; k < n; k++) s0 += y[k];
  return (s0 + s1) + (s2 + s3);
}

/* ---- the three passes ------------------------------------------------------------------
 * The n rows of `inner` contiguous elements are swept BLOCK columns at a time with a max
 * and a sum per column, so memory is read row by row rather than with stride `inner`
 * (the last dim, inner == 1, goes line by line). */
#define BLOCK 256
#define DEFINE_SOFTMAX(NAME, T, EXPSUB, MAX, EXPSUM, FINISH, LOG)                                                       \
  static void NAME##_line(const T *restrict x, T *restrict y, int64_t n, int log_out) {          \
    T mx = (T)MAX(x, n);                                                                          \
    double sum = EXPSUM(x, mx, y, n);                                                             \
    if (log_out) FINISH(x, y, n, mx, (T)LOG(sum), 1);                                             \
    else FINISH(x, y, n, (T)(1.0 / sum), 0, 0);                                                   \
  }                                                                                               \
  /* items [b, e): rows when inner == 1, else (outer index, column block) pairs */              \
  static void NAME(const T *x, T *y, int64_t n, int64_t inner, int log_out, int64_t b, int64_t e) { \
    T mx[BLOCK];                                                                                  \
    double sum[BLOCK];                                                                            \
    if (inner == 1) {                                                                             \
      for (int64_t o = b; o < e; o++) NAME##_line(x + o * n, y + o * n, n, log_out);              \
      return;                                                                                     \
    }                                                                                             \
    int64_t nblocks = (inner + BLOCK - 1) / BLOCK;                                                \
    for (int64_t item = b; item < e; item++) {                                                    \
        int64_t o = item / nblocks, i0 = item % nblocks * BLOCK;                                  \
        int64_t w = inner - i0 < BLOCK ? inner - i0 : BLOCK;                                      \
        const T *xb = x + o * n * inner + i0;                                                     \
        T *yb = y + o * n * inner + i0;                                                           \
        for (int64_t i = 0; i < w; i++) mx[i] = -INFINITY, sum[i] = 0;                            \
        for (int64_t k = 0; k < n; k++)                                                           \
          for (int64_t i = 0; i < w; i++) {                                                       \
            T v = xb[k * inner + i];                                                              \
            mx[i] = v > mx[i] ? v : mx[i];                                                        \
          }                                                                                       \
        /* all -inf: use 0 so exp gives 0s, and the 0/0 gives nan as in PyTorch */                \
        for (int64_t i = 0; i < w; i++)                                                           \
          if (isinf(mx[i]) && mx[i] < 0) mx[i] = 0;                                               \
        for (int64_t k = 0; k < n; k++) {                                                         \
          EXPSUB(xb + k * inner, mx, 1, yb + k * inner, w);                                       \
          for (int64_t i = 0; i < w; i++) sum[i] += yb[k * inner + i];                            \
        }                                                                                         \
        if (log_out) {                                                                            \
          for (int64_t i = 0; i < w; i++) sum[i] = LOG(sum[i]);                                   \
          for (int64_t k = 0; k < n; k++)                                                         \
            for (int64_t i = 0; i < w; i++) yb[k * inner + i] = xb[k * inner + i] - mx[i] - (T)sum[i]; \
        } else {                                                                                  \
          for (int64_t i = 0; i < w; i++) sum[i] = 1.0 / sum[i];                                  \
          for (int64_t k = 0; k < n; k++)                                                         \
            for (int64_t i = 0; i < w; i++) yb[k * inner + i] *= (T)sum[i];                       \
        }                                                                                         \
      }                                                                                           \
  }

DEFINE_SOFTMAX(softmax_f32, float, exp_sub_f32, max_f32, exp_sum_f32, finish_f32, log)
DEFINE_SOFTMAX(softmax_f64, double, exp_sub_f64, max_f64, exp_sum_f64, finish_f64, log)

void dt_cpu_softmax_line_f32(const float *x, float *y, int64_t n, int log_out) { softmax_f32_line(x, y, n, log_out); }
void dt_cpu_softmax_line_f64(const double *x, double *y, int64_t n, int log_out) { softmax_f64_line(x, y, n, log_out); }

/* ---- cross_entropy's rows: the line's own max and exp sum, then only what the loss or its
 * gradient reads, with the line's arithmetic for each element ---- */
/* log_softmax(x)[t] alone: (x[t] - max) - log(sum), as finish's log_out lanes (y: the exps) */
float dt_cpu_log_softmax_at_f32(const float *x, float *y, int64_t n, int64_t t) {
  float mx = max_f32(x, n);
  double sum = exp_sum_f32(x, mx, y, n);
  return x[t] - mx - (float)log(sum);
}

double dt_cpu_log_softmax_at_f64(const double *x, double *y, int64_t n, int64_t t) {
  double mx = max_f64(x, n);
  double sum = exp_sum_f64(x, mx, y, n);
  return x[t] - mx - log(sum);
}

/* y = (y * a) * w, every lane alone (the same bits in any width) */
static void scale2_f32_sse(float *restrict y, int64_t n, float a, float w) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f v;
    memcpy(&v, y + i, sizeof v);
    v = v * splat(a) * splat(w);
    memcpy(y + i, &v, sizeof v);
  }
  for (; i < n; i++) y[i] = y[i] * a * w;
}

#ifdef HAVE_WIDE_SWEEP
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void scale2_f32_avx512(float *restrict y, int64_t n,
                                                                                            float a, float w) {
  __m512 av = _mm512_set1_ps(a), wv = _mm512_set1_ps(w);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), av), wv));
  }
}
#endif

/* y = (softmax(x) - onehot(t)) * w in one sweep after the exps: softmax's (e * a) and then the
 * rule's (p - hot) * w, the same operations per element as the softmax line and a pass of
 * (p - hot) * w (subtracting 0 changes no bits: p >= 0 or NaN); t outside 0..n-1: no hot */
void dt_cpu_softmax_line_scaled_f32(const float *x, float *y, int64_t n, int64_t t, float w) {
  float mx = max_f32(x, n);
  float a = (float)(1.0 / exp_sum_f32(x, mx, y, n));
  float et = t >= 0 && t < n ? y[t] : 0;
#ifdef HAVE_WIDE_SWEEP
  if (__builtin_cpu_supports("avx512f")) scale2_f32_avx512(y, n, a, w);
  else
#endif
    scale2_f32_sse(y, n, a, w);
  if (t >= 0 && t < n) y[t] = (et * a - 1.0f) * w;
}

void dt_cpu_softmax_line_scaled_f64(const double *x, double *y, int64_t n, int64_t t, double w) {
  double mx = max_f64(x, n);
  double a = 1.0 / exp_sum_f64(x, mx, y, n);
  for (int64_t c = 0; c < n; c++) y[c] = (y[c] * a - (double)(c == t)) * w;
}

typedef struct {
  void *x, *y;
  int64_t n, inner;
  int log_out, f64;
} sm_job;

static void sm_piece(int64_t b, int64_t e, void *vj) {
  const sm_job *j = vj;
  if (j->f64) softmax_f64(j->x, j->y, j->n, j->inner, j->log_out, b, e);
  else softmax_f32(j->x, j->y, j->n, j->inner, j->log_out, b, e);
}

void dt_cpu_softmax_dim(const void *x, void *y, int64_t outer, int64_t n, int64_t inner, int log_out, int f64) {
  sm_job j = {(void *)x, y, n, inner, log_out, f64};
  /* rows (or column blocks) over the threads: each item's arithmetic is the same on any */
  int64_t items = inner == 1 ? outer : outer * ((inner + BLOCK - 1) / BLOCK);
  int64_t per_item = n * (inner < BLOCK ? inner : BLOCK);
  if (per_item == 0) return;
  dt_parallel_for(items, per_item >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / per_item, sm_piece, &j);
}

static int run_softmax(const dt_op_args *a, dt_tensor **out, int log_out) {
  dt_tensor *x = a->in[0], *y = out[0];
  int dim = (int)a->ints[0];
  int64_t n = x->ndim ? x->shape[dim] : 1, outer = 1, inner = 1;
  for (int i = 0; i < dim; i++) outer *= x->shape[i];
  for (int i = dim + 1; i < x->ndim; i++) inner *= x->shape[i];
  if (dt_tensor_numel(x) == 0) return DT_OK;
  dt_dtype ct = dt_dtype_compute(x->dtype);
  dt_tensor *xc = dt_tensor_contiguous_as(x, ct);
  dt_tensor *yc = ct == y->dtype ? y : dt_tensor_empty_like(xc);
  if (!xc || !yc) {
    if (xc) dt_tensor_release(xc);
    return dt_error_prefix("%s", a->name);
  }
  dt_cpu_softmax_dim(dt_tensor_data(xc), dt_tensor_data(yc), outer, n, inner, log_out, ct == DT_FLOAT64);
  int rc = DT_OK;
  if (yc != y) {
    rc = dt_tensor_copy_(y, yc, a->name);
    dt_tensor_release(yc);
  }
  dt_tensor_release(xc);
  return rc;
}

int dt_cpu_softmax(const dt_op_args *a, dt_tensor **out) { return run_softmax(a, out, 0); }
int dt_cpu_log_softmax(const dt_op_args *a, dt_tensor **out) { return run_softmax(a, out, 1); }

/* ---- softmax_backward (dx = y (g - sum(g y))) and log_softmax_backward (dx = g - exp(y)
 * sum(g)) along one dim: per line one sweep for the sum, one for dx.  The sums in double
 * (float32: lanes over at most 256 elements, then added in double, as exp_sum's). ---- */

/* sum(g y) (log_out 0) or sum(g) (log_out 1) of one contiguous float32 line: 16 lanes as the
 * exp sweep's (four SSE registers, or one AVX-512), the same bits in both */
static double bw_sum_f32(const float *restrict g, const float *restrict y, int64_t n, int log_out) {
  double total = 0;
  int64_t i = 0;
  SUM16_SSE(total, i, n, {
    memcpy(&a, g + j, sizeof a);
    if (!log_out) {
      v4f c;
      memcpy(&c, y + j, sizeof c);
      a *= c;
    }
  })
  for (; i < n; i++) total += log_out ? g[i] : g[i] * y[i];
  return total;
}

/* dx = y (g - s) (log_out 0) or g - exp(y) s (log_out 1), 4 lanes, the tail padded */
static void bw_finish_f32(const float *restrict g, const float *restrict y, float *restrict dx, int64_t n, float s,
                          int log_out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f gv, yv;
    memcpy(&gv, g + i, sizeof gv), memcpy(&yv, y + i, sizeof yv);
    if (log_out) exp4(&yv), gv = gv - yv * splat(s);
    else gv = yv * (gv - splat(s));
    memcpy(dx + i, &gv, sizeof gv);
  }
  if (i < n) {
    v4f gv = splat(0), yv = splat(0);
    for (int64_t j = 0; i + j < n; j++) gv[j] = g[i + j], yv[j] = y[i + j];
    if (log_out) exp4(&yv), gv = gv - yv * splat(s);
    else gv = yv * (gv - splat(s));
    for (int64_t j = 0; i + j < n; j++) dx[i + j] = gv[j];
  }
}

static void bw_line_f32_sse(const float *g, const float *y, float *dx, int64_t n, int log_out) {
  bw_finish_f32(g, y, dx, n, (float)bw_sum_f32(g, y, n, log_out), log_out);
}

#ifdef HAVE_WIDE_SWEEP
/* the same line in AVX-512: the same lanes for the sum, the same element arithmetic for dx */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void
bw_line_f32_avx512(const float *g, const float *y, float *dx, int64_t n, int log_out) {
  double total = 0;
  int64_t i = 0;
  while (i + 16 <= n) {
    int64_t end = n - i > 256 ? i + 256 : n;
    __m512 acc = _mm512_setzero_ps();
    for (; i + 16 <= end; i += 16) {
      __m512 a = _mm512_loadu_ps(g + i);
      acc = _mm512_add_ps(acc, log_out ? a : _mm512_mul_ps(a, _mm512_loadu_ps(y + i)));
    }
    total += lanes16_total_avx512(acc);
  }
  for (; i < n; i++) total += log_out ? g[i] : g[i] * y[i];
  __m512 sv = _mm512_set1_ps((float)total);
  for (i = 0; i < n; i += 16) {
    __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
    __m512 gv = _mm512_maskz_loadu_ps(k, g + i), yv = _mm512_maskz_loadu_ps(k, y + i);
    __m512 d = log_out ? _mm512_sub_ps(gv, _mm512_mul_ps(exp16v(yv), sv)) : _mm512_mul_ps(yv, _mm512_sub_ps(gv, sv));
    _mm512_mask_storeu_ps(dx + i, k, d);
  }
}
#endif

static void bw_line_f32(const float *g, const float *y, float *dx, int64_t n, int log_out) {
#ifdef HAVE_WIDE_SWEEP
  if (__builtin_cpu_supports("avx512f")) {
    bw_line_f32_avx512(g, y, dx, n, log_out);
    return;
  }
#endif
  bw_line_f32_sse(g, y, dx, n, log_out);
}

#define DEFINE_SOFTMAX_BW(NAME, T, EXP, LINE)                                                                         \
  /* items [b, e): rows when inner == 1, else (outer index, column block) pairs */                                   \
  static void NAME(const T *g, const T *y, T *dx, int64_t n, int64_t inner, int log_out, int64_t b, int64_t e) {     \
    double sum[BLOCK];                                                                                                \
    if (inner == 1) {                                                                                                 \
      for (int64_t o = b; o < e; o++) LINE(g + o * n, y + o * n, dx + o * n, n, log_out);                            \
      return;                                                                                                         \
    }                                                                                                                 \
    int64_t nblocks = (inner + BLOCK - 1) / BLOCK;                                                                    \
    for (int64_t item = b; item < e; item++) {                                                                        \
      int64_t o = item / nblocks, i0 = item % nblocks * BLOCK, w = inner - i0 < BLOCK ? inner - i0 : BLOCK;          \
      int64_t base = o * n * inner + i0;                                                                              \
      const T *gb = g + base, *yb = y + base;                                                                         \
      T *db = dx + base;                                                                                              \
      for (int64_t i = 0; i < w; i++) sum[i] = 0;                                                                     \
      for (int64_t k = 0; k < n; k++)                                                                                 \
        for (int64_t i = 0; i < w; i++)                                                                               \
          sum[i] += log_out ? gb[k * inner + i] : (double)(gb[k * inner + i] * yb[k * inner + i]);                    \
      for (int64_t k = 0; k < n; k++)                                                                                 \
        for (int64_t i = 0; i < w; i++) {                                                                             \
          T gv = gb[k * inner + i], yv = yb[k * inner + i], sv = (T)sum[i];                                           \
          db[k * inner + i] = log_out ? gv - (T)EXP(yv) * sv : yv * (gv - sv);                                        \
        }                                                                                                             \
    }                                                                                                                 \
  }

static void bw_line_f64(const double *g, const double *y, double *dx, int64_t n, int log_out) {
  double s0 = 0, s1 = 0; /* two partial sums */
  int64_t k = 0;
  for (; k + 2 <= n; k += 2) s0 += log_out ? g[k] : g[k] * y[k], s1 += log_out ? g[k + 1] : g[k + 1] * y[k + 1];
  if (k < n) s0 += log_out ? g[k] : g[k] * y[k];
  double s = s0 + s1;
  for (k = 0; k < n; k++) dx[k] = log_out ? g[k] - exp(y[k]) * s : y[k] * (g[k] - s);
}

DEFINE_SOFTMAX_BW(softmax_bw_f32, float, expf, bw_line_f32)
DEFINE_SOFTMAX_BW(softmax_bw_f64, double, exp, bw_line_f64)

typedef struct {
  const void *g, *y;
  void *dx;
  int64_t n, inner;
  int log_out, f64;
} smb_job;

static void smb_piece(int64_t b, int64_t e, void *vj) {
  const smb_job *j = vj;
  if (j->f64) softmax_bw_f64(j->g, j->y, j->dx, j->n, j->inner, j->log_out, b, e);
  else softmax_bw_f32(j->g, j->y, j->dx, j->n, j->inner, j->log_out, b, e);
}

static int run_softmax_backward(const dt_op_args *a, dt_tensor **out, int log_out) {
  dt_tensor *y = a->in[1];
  int dim = (int)a->ints[0];
  int64_t n = y->ndim ? y->shape[dim] : 1, outer = 1, inner = 1;
  for (int i = 0; i < dim; i++) outer *= y->shape[i];
  for (int i = dim + 1; i < y->ndim; i++) inner *= y->shape[i];
  if (dt_tensor_numel(y) == 0) return DT_OK;
  dt_dtype ct = dt_dtype_compute(y->dtype);
  dt_tensor *gc = dt_tensor_contiguous_as(a->in[0], ct), *yc = gc ? dt_tensor_contiguous_as(y, ct) : NULL;
  dt_tensor *dc = !yc ? NULL : ct == out[0]->dtype ? (dt_tensor_retain(out[0]), out[0]) : dt_tensor_empty_like(yc);
  int rc = dc ? DT_OK : dt_error_prefix("%s", a->name);
  if (rc == DT_OK) {
    smb_job j = {dt_tensor_data(gc), dt_tensor_data(yc), dt_tensor_data(dc), n, inner, log_out, ct == DT_FLOAT64};
    int64_t items = inner == 1 ? outer : outer * ((inner + BLOCK - 1) / BLOCK);
    int64_t per_item = n * (inner < BLOCK ? inner : BLOCK);
    dt_parallel_for(items, per_item >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / per_item, smb_piece, &j);
    if (dc != out[0]) rc = dt_tensor_copy_(out[0], dc, a->name);
  }
  if (dc) dt_tensor_release(dc);
  if (yc) dt_tensor_release(yc);
  if (gc) dt_tensor_release(gc);
  return rc;
}

int dt_cpu_softmax_backward(const dt_op_args *a, dt_tensor **out) { return run_softmax_backward(a, out, 0); }
int dt_cpu_log_softmax_backward(const dt_op_args *a, dt_tensor **out) { return run_softmax_backward(a, out, 1); }
