/* softmax and log_softmax along one dim, numerically stable: exp(x - max) / sum.
 * The input is made contiguous in its compute dtype (bf16/f16 compute in f32) and seen as
 * [outer, n, inner]; each line of n elements takes three passes (max, exp+sum, scale). */
#include "base/error.h"
#include "ops/ops.h"

#include <math.h>

/* The n rows of `inner` contiguous elements are swept BLOCK columns at a time with a max
 * and a sum per column, so memory is read row by row rather than with stride `inner`
 * (the last dim, inner == 1, goes line by line). */
#define BLOCK 256
#define DEFINE_SOFTMAX(NAME, T, EXP, LOG)                                                          \
  /* one contiguous line; a NaN anywhere makes the sum NaN, so the max may skip NaNs */       \
  static void NAME##_line(const T *x, T *y, int64_t n, int log_out) {                           \
    T mx = -INFINITY;                                                                             \
    for (int64_t k = 0; k < n; k++) mx = x[k] > mx ? x[k] : mx;                                   \
    if (isinf(mx) && mx < 0) mx = 0;                                                              \
    double sum = 0;                                                                               \
    for (int64_t k = 0; k < n; k++) {                                                             \
      T e = EXP(x[k] - mx);                                                                       \
      sum += e;                                                                                   \
      if (!log_out) y[k] = e;                                                                     \
    }                                                                                             \
    if (log_out) {                                                                                \
      T lse = (T)LOG(sum);                                                                        \
      for (int64_t k = 0; k < n; k++) y[k] = x[k] - mx - lse;                                     \
    } else {                                                                                      \
      T inv = (T)(1.0 / sum);                                                                     \
      for (int64_t k = 0; k < n; k++) y[k] *= inv;                                                \
    }                                                                                             \
  }                                                                                               \
  static void NAME(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, int log_out) {     \
    T mx[BLOCK];                                                                                  \
    double sum[BLOCK];                                                                            \
    if (inner == 1) {                                                                             \
      for (int64_t o = 0; o < outer; o++) NAME##_line(x + o * n, y + o * n, n, log_out);          \
      return;                                                                                     \
    }                                                                                             \
    for (int64_t o = 0; o < outer; o++)                                                           \
      for (int64_t i0 = 0; i0 < inner; i0 += BLOCK) {                                             \
        int64_t w = inner - i0 < BLOCK ? inner - i0 : BLOCK;                                      \
        const T *xb = x + o * n * inner + i0;                                                     \
        T *yb = y + o * n * inner + i0;                                                           \
        for (int64_t i = 0; i < w; i++) mx[i] = -INFINITY, sum[i] = 0;                            \
        for (int64_t k = 0; k < n; k++)                                                           \
          for (int64_t i = 0; i < w; i++) {                                                       \
            T v = xb[k * inner + i];                                                              \
            if (v > mx[i] || isnan(v)) mx[i] = v;                                                 \
          }                                                                                       \
        /* all -inf: use 0 so exp gives 0s, and the 0/0 gives nan as in PyTorch */                \
        for (int64_t i = 0; i < w; i++)                                                           \
          if (isinf(mx[i]) && mx[i] < 0) mx[i] = 0;                                               \
        for (int64_t k = 0; k < n; k++)                                                           \
          for (int64_t i = 0; i < w; i++) {                                                       \
            T e = EXP(xb[k * inner + i] - mx[i]);                                                 \
            sum[i] += e;                                                                          \
            if (!log_out) yb[k * inner + i] = e;                                                  \
          }                                                                                       \
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

DEFINE_SOFTMAX(softmax_f32, float, expf, log)
DEFINE_SOFTMAX(softmax_f64, double, exp, log)

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
  if (ct == DT_FLOAT64) softmax_f64(dt_tensor_data(xc), dt_tensor_data(yc), outer, n, inner, log_out);
  else softmax_f32(dt_tensor_data(xc), dt_tensor_data(yc), outer, n, inner, log_out);
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
