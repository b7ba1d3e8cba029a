#include "tensor/iter.h"
#include "base/error.h"
#include "base/thread_pool.h"

#include <string.h>

int dt_iter_init(dt_iter *it, int nops, dt_tensor *const *ops, int ndim, const int64_t *shape, const char *op) {
  it->nops = nops;
  for (int k = 0; k < nops; k++) {
    const dt_tensor *t = ops[k];
    if (t->ndim > ndim) goto bad;
    int64_t es = (int64_t)dt_dtype_size(t->dtype);
    it->base[k] = dt_tensor_data(t);
    for (int i = 0; i < ndim; i++) {
      int j = t->ndim - ndim + i;
      if (j < 0) it->strides[k][i] = 0;
      else if (t->shape[j] == shape[i]) it->strides[k][i] = shape[i] == 1 ? 0 : t->stride[j] * es;
      else if (t->shape[j] == 1) it->strides[k][i] = 0;
      else goto bad;
    }
    continue;
  bad:;
    char bufa[160], bufb[160];
    return dt_error("%s: shape %s does not broadcast to %s", op, dt_format_shape(bufa, sizeof bufa, t->ndim, t->shape),
                    dt_format_shape(bufb, sizeof bufb, ndim, shape));
  }
  /* drop size-1 dims, then merge dim i into i+1 when every operand steps through them as one */
  int n = 0;
  int64_t sh[DT_MAX_DIMS], st[DT_ITER_MAX_OPERANDS][DT_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 1) continue;
    sh[n] = shape[i];
    for (int k = 0; k < nops; k++) st[k][n] = it->strides[k][i];
    n++;
  }
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (m > 0) {
      int mergeable = 1;
      for (int k = 0; k < nops; k++)
        if (it->strides[k][m - 1] != st[k][i] * sh[i]) mergeable = 0;
      if (mergeable) {
        it->shape[m - 1] *= sh[i];
        for (int k = 0; k < nops; k++) it->strides[k][m - 1] = st[k][i];
        continue;
      }
    }
    it->shape[m] = sh[i];
    for (int k = 0; k < nops; k++) it->strides[k][m] = st[k][i];
    m++;
  }
  it->ndim = m;
  return DT_OK;
}

int64_t dt_iter_numel(const dt_iter *it) {
  int64_t n = 1;
  for (int i = 0; i < it->ndim; i++) n *= it->shape[i];
  return n;
}

/* fn over the elements [begin, end) of the iteration space in row-major order: the first and
 * last inner runs may be partial rows. */
static void run_range(const dt_iter *it, dt_iter_inner_fn fn, void *ctx, int64_t begin, int64_t end) {
  int nops = it->nops, nd = it->ndim;
  char *ptrs[DT_ITER_MAX_OPERANDS];
  int64_t inner_strides[DT_ITER_MAX_OPERANDS], idx[DT_MAX_DIMS] = {0};
  if (nd == 0) { /* a single element */
    for (int k = 0; k < nops; k++) ptrs[k] = it->base[k], inner_strides[k] = 0;
    fn(ptrs, inner_strides, 1, ctx);
    return;
  }
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; d--) idx[d] = rem % it->shape[d], rem /= it->shape[d];
  for (int k = 0; k < nops; k++) {
    ptrs[k] = it->base[k];
    for (int d = 0; d < nd; d++) ptrs[k] += idx[d] * it->strides[k][d];
    inner_strides[k] = it->strides[k][nd - 1];
  }
  int64_t inner = it->shape[nd - 1], left = end - begin;
  for (;;) {
    int64_t run = inner - idx[nd - 1];
    if (run > left) run = left;
    fn(ptrs, inner_strides, run, ctx);
    left -= run;
    if (left <= 0) return;
    for (int k = 0; k < nops; k++) ptrs[k] -= idx[nd - 1] * it->strides[k][nd - 1];
    idx[nd - 1] = 0;
    int d = nd - 2;
    for (; d >= 0; d--) {
      for (int k = 0; k < nops; k++) ptrs[k] += it->strides[k][d];
      if (++idx[d] < it->shape[d]) break;
      for (int k = 0; k < nops; k++) ptrs[k] -= it->strides[k][d] * it->shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

void dt_iter_run(const dt_iter *it, dt_iter_inner_fn fn, void *ctx) {
  int64_t n = dt_iter_numel(it);
  if (n > 0) run_range(it, fn, ctx, 0, n);
}

typedef struct {
  const dt_iter *it;
  dt_iter_inner_fn fn;
  void *ctx;
} par_job;

static void par_piece(int64_t begin, int64_t end, void *vj) {
  par_job *j = vj;
  run_range(j->it, j->fn, j->ctx, begin, end);
}

void dt_iter_run_parallel(const dt_iter *it, dt_iter_inner_fn fn, void *ctx) {
  int64_t n = dt_iter_numel(it);
  if (n <= 0) return;
  if (n < 2 * DT_ITER_PARALLEL_GRAIN) {
    run_range(it, fn, ctx, 0, n);
    return;
  }
  par_job j = {it, fn, ctx};
  dt_parallel_for(n, DT_ITER_PARALLEL_GRAIN, par_piece, &j);
}

int dt_iter_is_flat(const dt_iter *it, const size_t *elsizes) {
  if (it->ndim > 1) return 0;
  if (it->ndim == 0) return 1;
  for (int k = 0; k < it->nops; k++)
    if (it->strides[k][0] != (int64_t)elsizes[k]) return 0;
  return 1;
}
