/* softmax and log_softmax along one dim, numerically stable: exp(x - max) / sum.
 * The input is made contiguous in its compute dtype (bf16/f16 compute in f32) and seen as
 * [outer, n, inner]; each of the outer*inner lines of n elements is done in three passes. */
#include "base/error.h"
#include "ops/ops.h"

#include <math.h>

#define DEFINE_SOFTMAX(NAME, T, EXP, LOG)                                                          \
  static void NAME(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, int log_out) {     \
    for (int64_t o = 0; o < outer; o++)                                                           \
      for (int64_t i = 0; i < inner; i++) {                                                       \
        const T *xl = x + o * n * inner + i;                                                      \
        T *yl = y + o * n * inner + i;                                                            \
        T mx = -INFINITY;                                                                         \
        for (int64_t k = 0; k < n; k++)                                                           \
          if (xl[k * inner] > mx || isnan(xl[k * inner])) mx = xl[k * inner];                     \
        if (isinf(mx) && mx < 0) mx = 0; /* all -inf: exp gives 0s, sum 0, result nan as torch */ \
        double sum = 0;                                                                           \
        for (int64_t k = 0; k < n; k++) {                                                         \
          T e = EXP(xl[k * inner] - mx);                                                          \
          sum += e;                                                                               \
          if (!log_out) yl[k * inner] = e;                                                        \
        }                                                                                         \
        if (log_out) {                                                                            \
          T lse = (T)LOG(sum);                                                                    \
          for (int64_t k = 0; k < n; k++) yl[k * inner] = xl[k * inner] - mx - lse;               \
        } else {                                                                                  \
          T inv = (T)(1.0 / sum);                                                                 \
          for (int64_t k = 0; k < n; k++) yl[k * inner] *= inv;                                   \
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
