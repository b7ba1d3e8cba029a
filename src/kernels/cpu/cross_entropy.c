/* CPU kernels of cross_entropy and its fused backward over logits [n, c, d...] (or [c]) and
 * 0-based targets [n, d...]: both start from the softmax op's own computation of the logits
 * along the class dim (softmax.c, vectorised), so the backward's values are the composed
 * rule's bit for bit: d logits = (softmax - onehot(target)) * w.  Rows of classes (no spatial
 * dims, the language-model case) go over the rank's threads one row at a time, each row's
 * softmax kept in cache (forward: a row buffer; backward: the row of d logits itself); with
 * spatial dims the softmax op's whole computation comes first. */
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/softmax_line.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* The layout of the logits: n samples of c classes, inner positions each (spatial dims). */
typedef struct {
  int64_t n, c, inner;
} ce_dims;

static ce_dims dims_of(const dt_tensor *x) {
  ce_dims d = {x->ndim == 1 ? 1 : x->shape[0], x->shape[x->ndim == 1 ? 0 : 1], 1};
  if (x->ndim > 2) d.inner = dt_shape_numel(x->ndim - 2, x->shape + 2);
  return d;
}

/* Every target is a class or ignore_index; returns the count of the ones not ignored. */
static int check_targets(const dt_op_args *a, const int64_t *t, int64_t m, int64_t classes, int64_t *count) {
  int64_t ignore = a->ints[0], k = 0;
  for (int64_t s = 0; s < m; s++) {
    if (t[s] == ignore) continue;
    if (t[s] < 0 || t[s] >= classes)
      return dt_error("%s: target %lld out of range for %lld classes (0-based)", a->name, (long long)t[s],
                      (long long)classes);
    k++;
  }
  *count = k;
  return DT_OK;
}

/* logits in the compute dtype, contiguous; targets as int64; softmax (or log_softmax) of
 * the logits along the class dim into `p` (a new tensor in the compute dtype) */
typedef struct {
  dt_tensor *lg, *tg, *p;
  ce_dims d;
  int64_t count;
  int f64;
} ce_in;

static void ce_release(ce_in *c) {
  if (c->lg) dt_tensor_release(c->lg);
  if (c->tg) dt_tensor_release(c->tg);
  if (c->p) dt_tensor_release(c->p);
}

/* rows: with no spatial dims the rows are swept by the caller (p not made) */
static int ce_prepare(const dt_op_args *a, dt_tensor *logits, dt_tensor *target, int log_out, dt_tensor *into, ce_in *c,
                      int rows) {
  dt_dtype cd = dt_dtype_compute(logits->dtype);
  *c = (ce_in){.d = dims_of(logits), .f64 = cd == DT_FLOAT64};
  c->lg = dt_tensor_contiguous_as(logits, cd);
  c->tg = c->lg ? dt_tensor_contiguous_as(target, DT_INT64) : NULL;
  if (!c->tg) return ce_release(c), dt_error_prefix("%s", a->name);
  if (check_targets(a, dt_tensor_data(c->tg), c->d.n * c->d.inner, c->d.c, &c->count) != DT_OK) return ce_release(c), DT_ERR;
  c->p = into && into->dtype == cd ? (dt_tensor_retain(into), into) : rows ? NULL : dt_tensor_empty(cd, logits->ndim, logits->shape, DT_CPU);
  if (!c->p && !rows) return ce_release(c), dt_error_prefix("%s", a->name);
  if (!rows && dt_tensor_numel(c->lg) > 0)
    dt_cpu_softmax_dim(dt_tensor_data(c->lg), dt_tensor_data(c->p), c->d.n, c->d.c, c->d.inner, log_out, c->f64);
  return DT_OK;
}

/* ---- cross_entropy: ints[0] ignore_index, ints[1] reduction (0 none, 1 mean, 2 sum); the
 * losses -log_softmax[target] summed in sample order (the same on any thread count) ---- */
typedef struct {
  const void *x;
  const int64_t *t;
  double *loss;
  int64_t c, ignore;
  int f64;
  atomic_int oom;
} cef_job;

/* rows [s0, s1): each row's log_softmax at its target (the row buffer takes the exps), the loss */
static void cef_rows(int64_t s0, int64_t s1, void *vj) {
  cef_job *j = vj;
  int64_t C = j->c;
  void *buf = malloc((size_t)(C > 0 ? C : 1) * (j->f64 ? sizeof(double) : sizeof(float)));
  if (!buf) {
    atomic_store(&j->oom, 1);
    return;
  }
  for (int64_t s = s0; s < s1; s++) {
    int64_t t = j->t[s];
    if (t == j->ignore) {
      j->loss[s] = 0;
    } else if (j->f64) {
      j->loss[s] = -dt_cpu_log_softmax_at_f64((const double *)j->x + s * C, buf, C, t);
    } else {
      j->loss[s] = -(double)dt_cpu_log_softmax_at_f32((const float *)j->x + s * C, buf, C, t);
    }
  }
  free(buf);
}

int dt_cpu_cross_entropy(const dt_op_args *a, dt_tensor **out) {
  ce_in c;
  int rows = dims_of(a->in[0]).inner == 1;
  if (ce_prepare(a, a->in[0], a->in[1], 1, NULL, &c, rows) != DT_OK) return DT_ERR;
  const int64_t *t = dt_tensor_data(c.tg);
  int64_t ignore = a->ints[0], reduction = a->ints[1], C = c.d.c, inner = c.d.inner, m = c.d.n * inner;
  double *losses = rows ? malloc(sizeof(double) * (size_t)(m > 0 ? m : 1)) : NULL;
  if (rows) {
    cef_job j = {.x = dt_tensor_data(c.lg), .t = t, .loss = losses, .c = C, .ignore = ignore, .f64 = c.f64};
    if (losses) dt_parallel_for(m, C >= DT_PARALLEL_GRAIN / 4 ? 1 : DT_PARALLEL_GRAIN / 4 / (C ? C : 1), cef_rows, &j);
    if (!losses || atomic_load(&j.oom)) {
      free(losses);
      ce_release(&c);
      return dt_error("%s: out of memory", a->name);
    }
  }
  char *o = dt_tensor_data(out[0]);
  size_t osize = dt_tensor_elsize(out[0]);
  double total = 0;
  for (int64_t s = 0; s < m; s++) {
    double loss = 0;
    if (t[s] != ignore) {
      int64_t at = (s / inner) * C * inner + t[s] * inner + s % inner;
      loss = rows ? losses[s]
             : c.f64 ? -((const double *)dt_tensor_data(c.p))[at] : -(double)((const float *)dt_tensor_data(c.p))[at];
      total += loss;
    }
    if (reduction == 0) dt_store_f64(o + (size_t)s * osize, out[0]->dtype, loss);
  }
  /* mean over the non-ignored samples; none left gives 0/0 = NaN, as in PyTorch */
  if (reduction == 1) dt_store_f64(o, out[0]->dtype, total / (double)c.count);
  if (reduction == 2) dt_store_f64(o, out[0]->dtype, total);
  free(losses);
  ce_release(&c);
  return DT_OK;
}

/* ---- cross_entropy_backward(grad, logits, target): the rule's arithmetic, in its order:
 * w = valid * (g / count (mean) or g), d = (p - hot) * w, in the compute dtype R ---- */
typedef struct {
  void *dx;
  const void *g, *x; /* x: the logits when the rows' softmax is made here (no spatial dims) */
  const int64_t *t;
  ce_dims d;
  int64_t ignore, reduction, count;
} ceb_job;

/* samples [s0, s1): (p - hot) * w along each sample's classes, p already in dx, or (x set) a
 * row's softmax made into its row of dx and scaled by w in the same sweep, while the row is
 * in cache (dt_cpu_softmax_line_scaled: ((e * a) - hot) * w, the composed rule's bits) */
#define CEB_PIECE(NAME, R, LINE)                                                            \
  static void NAME(int64_t s0, int64_t s1, void *vj) {                                      \
    const ceb_job *j = vj;                                                                  \
    R *dx = j->dx;                                                                          \
    const R *g = j->g, *x = j->x;                                                           \
    int64_t C = j->d.c, inner = j->d.inner;                                                 \
    for (int64_t s = s0; s < s1; s++) {                                                     \
      int64_t t = j->t[s];                                                                  \
      R per = j->reduction == 0 ? g[s] : j->reduction == 1 ? g[0] / (R)j->count : g[0];     \
      R w = (R)(t != j->ignore) * per;                                                      \
      R *row = dx + (s / inner) * C * inner + s % inner;                                    \
      if (x) {                                                                              \
        LINE(x + s * C, row, C, t, w);                                                      \
        continue;                                                                           \
      }                                                                                     \
      for (int64_t c = 0; c < C; c++) row[c * inner] = (row[c * inner] - (R)(c == t)) * w;  \
    }                                                                                       \
  }
CEB_PIECE(ceb_piece_f32, float, dt_cpu_softmax_line_scaled_f32)
CEB_PIECE(ceb_piece_f64, double, dt_cpu_softmax_line_scaled_f64)

int dt_cpu_cross_entropy_backward(const dt_op_args *a, dt_tensor **out) {
  ce_in c;
  int rows = dims_of(a->in[1]).inner == 1;
  if (ce_prepare(a, a->in[1], a->in[2], 0, out[0], &c, rows) != DT_OK) return DT_ERR;
  dt_dtype cd = c.f64 ? DT_FLOAT64 : DT_FLOAT32;
  if (!c.p) c.p = dt_tensor_empty(cd, a->in[1]->ndim, a->in[1]->shape, DT_CPU); /* out[0] in another dtype */
  dt_tensor *g = c.p ? dt_tensor_contiguous_as(a->in[0], cd) : NULL;
  if (!g) return ce_release(&c), dt_error_prefix("%s", a->name);
  ceb_job j = {.dx = dt_tensor_data(c.p), .g = dt_tensor_data(g), .x = rows ? dt_tensor_data(c.lg) : NULL,
               .t = dt_tensor_data(c.tg), .d = c.d, .ignore = a->ints[0], .reduction = a->ints[1], .count = c.count};
  int64_t m = c.d.n * c.d.inner;
  dt_parallel_for(m, c.d.c >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / (c.d.c ? c.d.c : 1),
                  c.f64 ? ceb_piece_f64 : ceb_piece_f32, &j);
  dt_tensor_release(g);
  int rc = c.p == out[0] ? DT_OK : dt_tensor_copy_(out[0], c.p, a->name);
  ce_release(&c);
  return rc;
}
