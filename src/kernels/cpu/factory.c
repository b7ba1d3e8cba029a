/* Factories: empty, full, arange, eye. */
#include "base/error.h"
#include "kernels/cpu/kernel_table.h"

#include <math.h>
#include <string.h>

int dt_cpu_empty(const dt_op_args *a, dt_tensor **out) { /* the storage is already allocated */
  (void)a, (void)out;
  return DT_OK;
}

int dt_cpu_full(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *t = out[0];
  int64_t n = dt_tensor_numel(t);
  size_t es = dt_dtype_size(t->dtype);
  char *p = dt_tensor_data(t);
  if (n == 0) return DT_OK;
  if (a->flags & DT_ARG_SCALAR_INT) dt_store_i64(p, t->dtype, a->ints[DT_MAX_DIMS]);
  else dt_store_f64(p, t->dtype, a->scalar[0]);
  dt_fill_repeat(p, es, n);
  return DT_OK;
}

/* Each value is start + i * step (not accumulated), as torch: in int64 with
 * DT_ARG_SCALAR_INT (exact), else in double. */
int dt_cpu_arange(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *t = out[0];
  int64_t n = dt_tensor_numel(t);
  size_t es = dt_dtype_size(t->dtype);
  char *p = dt_tensor_data(t);
  if (a->flags & DT_ARG_SCALAR_INT) {
    int64_t start = a->ints[0], step = a->ints[2];
    if (t->dtype == DT_INT64)
      for (int64_t i = 0; i < n; i++) ((int64_t *)p)[i] = start + i * step;
    else
      for (int64_t i = 0; i < n; i++) dt_store_i64(p + i * (int64_t)es, t->dtype, start + i * step);
    return DT_OK;
  }
  double start = a->scalar[0], step = a->scalar[2];
  if (t->dtype == DT_FLOAT32)
    for (int64_t i = 0; i < n; i++) ((float *)p)[i] = (float)(start + (double)i * step);
  else
    for (int64_t i = 0; i < n; i++) dt_store_f64(p + i * (int64_t)es, t->dtype, start + (double)i * step);
  return DT_OK;
}

int dt_cpu_eye(const dt_op_args *a, dt_tensor **out) {
  (void)a;
  dt_tensor *t = out[0];
  int64_t rows = t->shape[0], cols = t->shape[1];
  size_t es = dt_dtype_size(t->dtype);
  char *p = dt_tensor_data(t);
  memset(p, 0, (size_t)(rows * cols) * es);
  for (int64_t i = 0; i < rows && i < cols; i++) dt_store_f64(p + (i * cols + i) * (int64_t)es, t->dtype, 1.0);
  return DT_OK;
}
