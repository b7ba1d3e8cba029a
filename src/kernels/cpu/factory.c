/* Factories: empty, full, arange, eye. */
#include "base/error.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

int dt_cpu_empty(const dt_op_args *a, dt_tensor **out) { return DT_OK; }

int dt_cpu_full(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *t = out[0];
  int64_t n = dt_tensor_numel(t);
  size_t es = dt_dtype_size(t->dtype);
  char *p = dt_tensor_data(t);
  if (n == 0) return DT_OK;
  dt_store_f64(p, t->dtype, a->scalar[0]);
  /* double the filled prefix each round: log2(n) memcpy calls */
  for (int64_t done = 1; done < n; done *= 2)
    memcpy(p + done * es, p, (size_t)((done < n - done ? done : n - done) * (int64_t)es));
  return DT_OK;
}

/* Each value is start + i * step computed in double (not by accumulation), as torch. */
int dt_cpu_arange(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *t = out[0];
  int64_t n = dt_tensor_numel(t);
  double start = a->scalar[0], step = a->scalar[2];
  char *p = dt_tensor_data(t);
  if (t->dtype == DT_FLOAT32) {
    float *f = (float *)p;
    for (int64_t i = 0; i < n; i++) f[i] = (float)(start + (double)i * step);
  } else if (t->dtype == DT_INT64 && start == floor(start) && step == floor(step)) {
    int64_t *q = (int64_t *)p, s0 = (int64_t)start, st = (int64_t)step; /* exact beyond 2^53 */
    for (int64_t i = 0; i < n; i++) q[i] = s0 + i * st;
  } else {
    size_t es = dt_dtype_size(t->dtype);
    for (int64_t i = 0; i < n; i++) dt_store_f64(p + i * (int64_t)es, t->dtype, start + (double)i * step);
  }
  return DT_OK;
}

int dt_cpu_eye(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *t = out[0];
  int64_t rows = t->shape[0], cols = t->shape[1];
  size_t es = dt_dtype_size(t->dtype);
  char *p = dt_tensor_data(t);
  memset(p, 0, (size_t)(rows * cols) * es);
  for (int64_t i = 0; i < rows && i < cols; i++) dt_store_f64(p + (i * cols + i) * (int64_t)es, t->dtype, 1.0);
  return DT_OK;
}
