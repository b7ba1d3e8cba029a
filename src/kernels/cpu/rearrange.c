/* Kernels that place each output element from one input element (or zero): flip, roll,
 * repeat, tril/triu, diag.  They walk the (contiguous) output and read the input at the
 * coordinates the op maps to, so any input strides work and the values move bit for bit. */
#include <string.h>

#include "base/error.h"
#include "kernels/cpu/elem_walk.h"
#include "kernels/cpu/kernel_table.h"

/* for each output coordinate c: src(c, s) fills s with the input's coordinates, or returns 0
 * for a zero element */
typedef int (*source_fn)(const dt_op_args *a, const int64_t *c, int64_t *s);

static int place(const dt_op_args *a, dt_tensor *out, source_fn src) {
  const dt_tensor *x = a->in[0];
  int64_t n = dt_tensor_numel(out), c[DT_MAX_DIMS] = {0}, s[DT_MAX_DIMS] = {0};
  size_t es = dt_tensor_elsize(out);
  char *o = dt_tensor_data(out);
  for (int64_t j = 0; j < n; j++, dt_walk_next(out->ndim, out->shape, c)) {
    if (src(a, c, s)) memcpy(o + j * (int64_t)es, dt_walk_at(x, s), es);
    else memset(o + j * (int64_t)es, 0, es); /* zero is all-zero bytes in every dtype */
  }
  return DT_OK;
}

static int flip_source(const dt_op_args *a, const int64_t *c, int64_t *s) {
  const dt_tensor *x = a->in[0];
  memcpy(s, c, sizeof(int64_t) * (size_t)x->ndim);
  for (int i = 0; i < a->nints && x->ndim; i++) {
    int d = (int)a->ints[i];
    s[d] = x->shape[d] - 1 - c[d];
  }
  return 1;
}

static int roll_source(const dt_op_args *a, const int64_t *c, int64_t *s) {
  const dt_tensor *x = a->in[0];
  int n = a->nints / 2;
  memcpy(s, c, sizeof(int64_t) * (size_t)x->ndim);
  for (int i = 0; i < n && x->ndim; i++) {
    int d = (int)a->ints[n + i];
    int64_t size = x->shape[d], sh = a->ints[i] % size; /* size > 0: the output has elements */
    s[d] = (s[d] - sh + 2 * size) % size; /* repeated dims: the shifts add up, as torch */
  }
  return 1;
}

static int repeat_source(const dt_op_args *a, const int64_t *c, int64_t *s) {
  const dt_tensor *x = a->in[0];
  int lead = a->nints - x->ndim;
  for (int d = 0; d < x->ndim; d++) s[d] = c[d + lead] % x->shape[d];
  return 1;
}

/* which diagonal the last two dims' element c is on: column - row (compared with the op's
 * diagonal, never subtracted from it: any int64 diagonal is valid) */
static int64_t diagonal_of(const int64_t *c, int nd) { return c[nd - 1] - c[nd - 2]; }
static int tril_source(const dt_op_args *a, const int64_t *c, int64_t *s) {
  memcpy(s, c, sizeof(int64_t) * (size_t)a->in[0]->ndim);
  return diagonal_of(c, a->in[0]->ndim) <= a->ints[0];
}
static int triu_source(const dt_op_args *a, const int64_t *c, int64_t *s) {
  memcpy(s, c, sizeof(int64_t) * (size_t)a->in[0]->ndim);
  return diagonal_of(c, a->in[0]->ndim) >= a->ints[0];
}

static int diag_source(const dt_op_args *a, const int64_t *c, int64_t *s) {
  int64_t k = a->nints ? a->ints[0] : 0;
  if (a->in[0]->ndim == 1) { /* the matrix: x[i] at (i, i + k) or (i - k, i) */
    if (c[1] - c[0] != k) return 0;
    s[0] = k >= 0 ? c[0] : c[1];
    return 1;
  }
  s[0] = k >= 0 ? c[0] : c[0] - k;
  s[1] = k >= 0 ? c[0] + k : c[0];
  return 1;
}

int dt_cpu_flip(const dt_op_args *a, dt_tensor **out) { return place(a, out[0], flip_source); }
int dt_cpu_roll(const dt_op_args *a, dt_tensor **out) { return place(a, out[0], roll_source); }
int dt_cpu_repeat(const dt_op_args *a, dt_tensor **out) { return place(a, out[0], repeat_source); }
int dt_cpu_tril(const dt_op_args *a, dt_tensor **out) { return place(a, out[0], tril_source); }
int dt_cpu_triu(const dt_op_args *a, dt_tensor **out) { return place(a, out[0], triu_source); }
int dt_cpu_diag(const dt_op_args *a, dt_tensor **out) { return place(a, out[0], diag_source); }
