/* Factories: empty, full, arange, eye. */
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/kernel_table.h"

#include <math.h>
#include <string.h>

int dt_cpu_empty(const dt_op_args *a, dt_tensor **out) { /* the storage is already allocated */
  (void)a, (void)out;
  return DT_OK;
}

/* A large fill (dt.ones for a backward's seed, the zeros an index_add starts from): the value
 * repeated over a 4 KiB block, which pieces over the threads copy from (it stays in cache,
 * where doubling the whole prefix would read back megabytes); all-zero bytes: memset. */
#define FILL_BLOCK 4096
typedef struct {
  char *p;
  size_t es;
  int64_t block; /* elements in the block at p */
  int zero;
} fill_job;

static void fill_piece(int64_t b, int64_t e, void *vj) { /* elements [b, e), the block itself excluded */
  const fill_job *j = vj;
  if (b < j->block) b = j->block;
  if (b >= e) return;
  if (j->zero) {
    memset(j->p + (size_t)b * j->es, 0, (size_t)(e - b) * j->es);
    return;
  }
  for (int64_t i = b; i < e; i += j->block)
    memcpy(j->p + (size_t)i * j->es, j->p, (size_t)((e - i < j->block ? e - i : j->block) * (int64_t)j->es));
}

int dt_cpu_full(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *t = out[0];
  int64_t n = dt_tensor_numel(t);
  size_t es = dt_dtype_size(t->dtype);
  char *p = dt_tensor_data(t);
  if (n == 0) return DT_OK;
  if (a->flags & DT_ARG_SCALAR_INT) dt_store_i64(p, t->dtype, a->ints[DT_MAX_DIMS]);
  else dt_store_f64(p, t->dtype, a->scalar[0]);
  int64_t block = (int64_t)(FILL_BLOCK / es);
  if (n <= 2 * DT_PARALLEL_GRAIN || es > FILL_BLOCK) {
    dt_fill_repeat(p, es, n);
    return DT_OK;
  }
  dt_fill_repeat(p, es, block);
  fill_job j = {.p = p, .es = es, .block = block, .zero = 1};
  for (size_t k = 0; k < es; k++) j.zero &= p[k] == 0;
  dt_parallel_for(n, DT_PARALLEL_GRAIN, fill_piece, &j);
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
