/* Scans along one dim: cumsum, cumprod.  The input is taken contiguous in the output's
 * dtype (torch casts first when a dtype is given); floating values accumulate in double (as
 * torch's CPU kernels do), integers in int64 with wrap-around. */
#include "base/error.h"
#include "kernels/cpu/kernel_table.h"

static int scan(const dt_op_args *a, dt_tensor *out, int prod) {
  dt_tensor *x = dt_tensor_contiguous_as(a->in[0], out->dtype);
  if (!x) return dt_error_prefix("%s", a->name);
  int d = (int)a->ints[0], nd = x->ndim;
  int64_t outer = 1, len = nd ? x->shape[d] : 1, inner = 1;
  for (int i = 0; i < d && i < nd; i++) outer *= x->shape[i];
  for (int i = d + 1; i < nd; i++) inner *= x->shape[i];
  const char *src = dt_tensor_data(x);
  char *dst = dt_tensor_data(out);
  dt_dtype t = out->dtype;
  size_t es = dt_dtype_size(t);
  int is_float = dt_dtype_is_float(t);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double acc = prod ? 1 : 0;
      uint64_t iacc = prod ? 1 : 0;
      for (int64_t k = 0; k < len; k++) {
        size_t off = (size_t)((o * len + k) * inner + i) * es;
        if (t == DT_FLOAT64) {
          double v = *(const double *)(src + off);
          acc = prod ? acc * v : acc + v;
          *(double *)(dst + off) = acc;
        } else if (is_float) {
          double v = dt_load_f64(src + off, t);
          acc = prod ? acc * v : acc + v;
          dt_store_f64(dst + off, t, acc);
        } else {
          uint64_t v = (uint64_t)dt_load_i64(src + off, t);
          iacc = prod ? iacc * v : iacc + v;
          dt_store_i64(dst + off, t, (int64_t)iacc);
        }
      }
    }
  dt_tensor_release(x);
  return DT_OK;
}

int dt_cpu_cumsum(const dt_op_args *a, dt_tensor **out) { return scan(a, out[0], 0); }
int dt_cpu_cumprod(const dt_op_args *a, dt_tensor **out) { return scan(a, out[0], 1); }
