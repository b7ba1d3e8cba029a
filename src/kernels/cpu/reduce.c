/* Reductions: sum mean prod amax amin max min argmax argmin var std norm, and the math
 * family's logsumexp all any var_mean.
 * The input is split into kept dims (one output element each) and reduced dims (walked in
 * row-major order, so a position counter is the flat index argmax needs).  Each run of the
 * innermost reduced dim is converted in chunks into a double (or, for exact integer
 * results, int64) buffer, and an accumulator folds the chunk in. */
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/sum_lanes.h"
#include "ops/shape_reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 512

typedef enum { R_SUM, R_PROD, R_MAX, R_MIN, R_VAR, R_NORM, R_LSE, R_ALL, R_ANY } red_kind;

typedef struct acc {
  double s;      /* sum / product / best value / norm accumulator */
  int64_t is;    /* the same in int64 for integer inputs */
  int64_t idx;   /* position of the best value */
  int64_t n;     /* elements folded so far */
  double mean, m2; /* Welford (var/std); logsumexp: the running max and sum of exp(x - max) */
} acc;

typedef struct plan {
  red_kind kind;
  int integer; /* accumulate in int64 (integer/bool input, exact) */
  int last_kept; /* the input's last dim is not reduced */
  double p;    /* norm order */
  /* kept dims (output order) and reduced dims (input order), strides in elements */
  int nk, nr;
  int64_t kshape[DT_MAX_DIMS], kstride[DT_MAX_DIMS];
  int64_t rshape[DT_MAX_DIMS], rstride[DT_MAX_DIMS];
  const char *base;
  dt_dtype dtype;
  size_t es;
} plan;

/* ---- chunk conversion -------------------------------------------------------------- */
static void load_f64(const char *p, int64_t st, dt_dtype t, int64_t n, double *v) {
  switch (t) {
  case DT_FLOAT32: {
    const float *f = (const float *)p;
    if (st == 1)
      for (int64_t i = 0; i < n; i++) v[i] = f[i];
    else
      for (int64_t i = 0; i < n; i++) v[i] = f[i * st];
    break;
  }
  case DT_FLOAT64: {
    const double *f = (const double *)p;
    for (int64_t i = 0; i < n; i++) v[i] = f[i * st];
    break;
  }
  case DT_BFLOAT16:
    for (int64_t i = 0; i < n; i++) v[i] = dt_bf16_to_f32(((const uint16_t *)p)[i * st]);
    break;
  case DT_FLOAT16:
    for (int64_t i = 0; i < n; i++) v[i] = dt_f16_to_f32(((const uint16_t *)p)[i * st]);
    break;
  default: {
    size_t es = dt_dtype_size(t);
    for (int64_t i = 0; i < n; i++) v[i] = dt_load_f64(p + i * st * (int64_t)es, t);
  }
  }
}

static void load_i64(const char *p, int64_t st, dt_dtype t, int64_t n, int64_t *v) {
  if (t == DT_INT64) {
    for (int64_t i = 0; i < n; i++) v[i] = ((const int64_t *)p)[i * st];
    return;
  }
  size_t es = dt_dtype_size(t);
  for (int64_t i = 0; i < n; i++) v[i] = dt_load_i64(p + i * st * (int64_t)es, t);
}

/* ---- folding a chunk in -------------------------------------------------------------- */
/* Sums with 4 pairs of independent partial sums (a single running sum costs one add
 * latency per element); the pairing also helps accuracy.  sq: add (v - shift)^2. */
#define DEFINE_SUM_RUN(NAME, T, TERM)                                        \
  static double NAME(const T *v, int64_t n, double shift) {                  \
    double p0 = 0, p1 = 0, p2 = 0, p3 = 0, p4 = 0, p5 = 0, p6 = 0, p7 = 0;   \
    int64_t i = 0;                                                           \
    (void)shift;                                                             \
    for (; i + 8 <= n; i += 8) {                                             \
      p0 += TERM(v[i]), p1 += TERM(v[i + 1]), p2 += TERM(v[i + 2]);          \
      p3 += TERM(v[i + 3]), p4 += TERM(v[i + 4]), p5 += TERM(v[i + 5]);      \
      p6 += TERM(v[i + 6]), p7 += TERM(v[i + 7]);                            \
    }                                                                        \
    for (; i < n; i++) p0 += TERM(v[i]);                                     \
    return ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7));                \
  }
#define PLAIN(x) ((double)(x))
#define SQDEV(x) (((double)(x) - shift) * ((double)(x) - shift))
DEFINE_SUM_RUN(sum_run, double, PLAIN)
DEFINE_SUM_RUN(sumsq_run, double, SQDEV)
/* the contiguous float32 sum/mean reads the input directly: dt_sum_f32 (kernels/cpu/sum_lanes.h) */

/* max/min propagate NaN (the first one wins), as PyTorch does. */
static void fold_best(acc *a, const double *v, int64_t n, int want_max) {
  if (isnan(a->s) && a->n > 0) return;
  for (int64_t i = 0; i < n; i++) {
    double x = v[i];
    if (a->n + i == 0 || isnan(x) || (want_max ? x > a->s : x < a->s)) {
      a->s = x;
      a->idx = a->n + i;
      if (isnan(x)) break;
    }
  }
}

static void fold_f64(const plan *pl, acc *a, const double *v, int64_t n) {
  switch (pl->kind) {
  case R_SUM:
    a->s += sum_run(v, n, 0);
    break;
  case R_PROD:
    for (int64_t i = 0; i < n; i++) a->s *= v[i];
    break;
  case R_MAX:
  case R_MIN:
    fold_best(a, v, n, pl->kind == R_MAX);
    break;
  case R_VAR: { /* merge the chunk's mean and squared deviations (Chan et al.) */
    double mean = sum_run(v, n, 0) / (double)n, m2 = sumsq_run(v, n, mean);
    double na = (double)a->n, nt = na + (double)n, d = mean - a->mean;
    a->m2 += m2 + d * d * na * (double)n / nt;
    a->mean += d * (double)n / nt;
    break;
  }
  case R_NORM: {
    double p = pl->p, s = a->s;
    if (p == 2)
      s += sumsq_run(v, n, 0);
    else if (p == 1)
      for (int64_t i = 0; i < n; i++) s += fabs(v[i]);
    else if (isinf(p) && p > 0)
      for (int64_t i = 0; i < n; i++) s = fabs(v[i]) > s || isnan(v[i]) ? fabs(v[i]) : s;
    else if (isinf(p))
      for (int64_t i = 0; i < n; i++) s = a->n + i == 0 || fabs(v[i]) < s || isnan(v[i]) ? fabs(v[i]) : s;
    else if (p == 0)
      for (int64_t i = 0; i < n; i++) s += v[i] != 0;
    else
      for (int64_t i = 0; i < n; i++) s += pow(fabs(v[i]), p);
    a->s = s;
    break;
  }
  case R_LSE: /* rescaled when a larger value comes; NaN and +inf decide the result alone */
    for (int64_t i = 0; i < n; i++) {
      double x = v[i], m = a->mean;
      if (isnan(m) || (isinf(m) && m > 0)) break;
      if (isnan(x) || x > m) a->m2 = (isinf(x) || isnan(x)) ? 1 : a->m2 * exp(m - x) + 1, a->mean = x;
      else if (x != -INFINITY) a->m2 += exp(x - m);
    }
    break;
  case R_ALL:
    for (int64_t i = 0; i < n && a->s != 0; i++) a->s = v[i] != 0;
    break;
  case R_ANY:
    for (int64_t i = 0; i < n && a->s == 0; i++) a->s = v[i] != 0;
    break;
  }
  a->n += n;
}

/* Integer sums/products wrap like PyTorch's int64 (unsigned arithmetic: no UB). */
static void fold_i64(const plan *pl, acc *a, const int64_t *v, int64_t n) {
  uint64_t s = (uint64_t)a->is;
  switch (pl->kind) {
  case R_SUM:
    for (int64_t i = 0; i < n; i++) s += (uint64_t)v[i];
    break;
  case R_PROD:
    for (int64_t i = 0; i < n; i++) s *= (uint64_t)v[i];
    break;
  default: { /* max / min */
    int64_t best = a->is;
    for (int64_t i = 0; i < n; i++)
      if (a->n + i == 0 || (pl->kind == R_MAX ? v[i] > best : v[i] < best)) best = v[i], a->idx = a->n + i;
    s = (uint64_t)best;
  }
  }
  a->is = (int64_t)s;
  a->n += n;
}

/* ---- walking the reduced dims of one output element ------------------------------------ */
/* Steps the counters cnt over shape[0..nd) (last dim fastest); returns the change of the
 * element offset. */
static int64_t odometer_step(int nd, const int64_t *shape, const int64_t *stride, int64_t *cnt) {
  int64_t delta = 0;
  for (int i = nd - 1; i >= 0; i--) {
    delta += stride[i];
    if (++cnt[i] < shape[i]) break;
    delta -= shape[i] * stride[i];
    cnt[i] = 0;
  }
  return delta;
}

/* A long contiguous float32 sum as the ordered sum of fixed blocks' sums: the blocks do not
 * depend on the thread count, so neither do the bits. */
#define SUM_BLOCK 65536
typedef struct {
  const float *x;
  int64_t n;
  double *part;
} sum_job;

static void sum_piece(int64_t b, int64_t e, void *vj) {
  const sum_job *j = vj;
  for (int64_t k = b; k < e; k++) {
    int64_t len = j->n - k * SUM_BLOCK < SUM_BLOCK ? j->n - k * SUM_BLOCK : SUM_BLOCK;
    j->part[k] = dt_sum_f32(j->x + k * SUM_BLOCK, len);
  }
}

static int sum_blocks(const float *x, int64_t n, acc *a) {
  int64_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  double *part = malloc(sizeof(double) * (size_t)nb);
  if (!part) return DT_ERR; /* the caller sums serially */
  sum_job j = {x, n, part};
  dt_parallel_for(nb, 1, sum_piece, &j);
  double s = 0;
  for (int64_t k = 0; k < nb; k++) s += part[k];
  free(part);
  a->s = s;
  a->n = n;
  return DT_OK;
}

static void reduce_one(const plan *pl, const char *base, acc *a) {
  a->s = pl->kind == R_PROD || pl->kind == R_ALL ? 1 : 0;
  a->is = pl->kind == R_PROD ? 1 : 0;
  a->idx = a->n = 0;
  a->mean = pl->kind == R_LSE ? -INFINITY : 0;
  a->m2 = 0;
  int nr = pl->nr;
  int64_t inner = nr ? pl->rshape[nr - 1] : 1, ist = nr ? pl->rstride[nr - 1] : 0;
  int64_t outer = 1;
  for (int i = 0; i < nr - 1; i++) outer *= pl->rshape[i];
  if (inner == 0) return;
  int64_t cnt[DT_MAX_DIMS] = {0};
  const char *p = base;
  double vbuf[CHUNK];
  int64_t ibuf[CHUNK];
  int direct = pl->kind == R_SUM && pl->dtype == DT_FLOAT32 && ist == 1;
  if (direct && outer == 1 && inner >= 2 * SUM_BLOCK && sum_blocks((const float *)p, inner, a) == DT_OK) return;
  for (int64_t o = 0; o < outer; o++) {
    if (direct) {
      a->s += dt_sum_f32((const float *)p, inner);
      a->n += inner;
    }
    for (int64_t j = 0; j < inner && !direct; j += CHUNK) {
      int64_t n = inner - j < CHUNK ? inner - j : CHUNK;
      const char *q = p + j * ist * (int64_t)pl->es;
      if (pl->integer) {
        load_i64(q, ist, pl->dtype, n, ibuf);
        fold_i64(pl, a, ibuf, n);
      } else {
        load_f64(q, ist, pl->dtype, n, vbuf);
        fold_f64(pl, a, vbuf, n);
      }
    }
    if (nr > 1) p += odometer_step(nr - 1, pl->rshape, pl->rstride, cnt) * (int64_t)pl->es;
  }
}

static int make_plan(const dt_op_args *a, red_kind kind, plan *pl) {
  const dt_tensor *x = a->in[0];
  int mask[DT_MAX_DIMS];
  if (dt_reduce_mask(a, x, mask) != DT_OK) return DT_ERR;
  pl->kind = kind;
  pl->dtype = x->dtype;
  pl->es = dt_dtype_size(x->dtype);
  pl->base = dt_tensor_data(x);
  pl->integer = !dt_dtype_is_float(x->dtype) && (kind == R_SUM || kind == R_PROD || kind == R_MAX || kind == R_MIN);
  pl->p = a->nscalar > 0 ? a->scalar[0] : 2;
  pl->nk = pl->nr = 0;
  pl->last_kept = x->ndim > 0 && !mask[x->ndim - 1];
  for (int i = 0; i < x->ndim; i++) {
    if (mask[i]) {
      /* merge with the previous reduced dim when memory steps through both as one */
      if (pl->nr > 0 && i > 0 && mask[i - 1] && pl->rstride[pl->nr - 1] == x->stride[i] * x->shape[i]) {
        pl->rshape[pl->nr - 1] *= x->shape[i];
        pl->rstride[pl->nr - 1] = x->stride[i];
      } else {
        pl->rshape[pl->nr] = x->shape[i];
        pl->rstride[pl->nr++] = x->stride[i];
      }
    } else {
      pl->kshape[pl->nk] = x->shape[i];
      pl->kstride[pl->nk++] = x->stride[i];
    }
  }
  return DT_OK;
}

/* The statistic of one output element from its accumulator. */
static double finish(const plan *pl, const acc *a, dt_op_id op, double correction) {
  switch (op) {
  case DT_OP_MEAN: return a->s / (double)a->n; /* 0/0 = nan for an empty reduction, like PyTorch */
  case DT_OP_VAR:
  case DT_OP_STD: {
    double dof = (double)a->n - correction;
    double v = a->m2 / (dof > 0 ? dof : 0);
    return op == DT_OP_STD ? sqrt(v) : v;
  }
  case DT_OP_NORM:
    if (pl->p == 2) return sqrt(a->s);
    if (pl->p == 1 || pl->p == 0 || isinf(pl->p)) return a->s;
    return pow(a->s, 1 / pl->p);
  case DT_OP_LOGSUMEXP: /* empty or all -inf: -inf; NaN or +inf: itself */
    return isnan(a->mean) || isinf(a->mean) ? a->mean : a->mean + log(a->m2);
  default: return a->s;
  }
}

/* gcc -O2's "very cheap" vectoriser model leaves loops of unknown count scalar */
#if defined(__GNUC__) && !defined(__clang__)
#define DT_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define DT_VECTORIZE
#endif

/* Adds rows[0], rows[1], ... (n values of any dtype each) into acc in that order: each
 * column's own double sum, so any vector width gives the same bits; float32 reads at memory
 * speed (dt_add_rows_f32). */
DT_VECTORIZE static void add_rows(double *restrict acc, const char *const *rows, int nrows, dt_dtype t, int64_t n) {
  if (t == DT_FLOAT32) {
    dt_add_rows_f32(acc, (const float *const *)rows, nrows, n);
    return;
  }
  double buf[CHUNK];
  size_t es = dt_dtype_size(t);
  for (int k = 0; k < nrows; k++)
    for (int64_t c = 0; c < n; c += CHUNK) {
      int64_t m = n - c < CHUNK ? n - c : CHUNK;
      load_f64(rows[k] + c * (int64_t)es, 1, t, m, buf);
      for (int64_t i = 0; i < m; i++) acc[c + i] += buf[i];
    }
}

/* sum/mean when the input's last dim is kept with unit stride (reducing leading dims, as
 * for a bias gradient): whole rows are added, in memory order, into a row of double
 * accumulators, instead of walking each output's strided column.  Many rows go in fixed
 * blocks of ROWS_BLOCK, each block's sums a partial row, the partials then added in block
 * order: the threads share a few output columns too, and the blocks (not the thread count)
 * fix the bits. */
#define ROWS_BLOCK 128
#define ROWS_COLS 4096 /* columns per item: 16 KiB float32 runs of each row, 32 KiB of sums */
typedef struct {
  const plan *pl;
  dt_tensor *vals;
  int mean;
  int64_t len, count, nblk, nrb;
  double *part; /* [outer][nrb][len] when nrb > 1 */
} rows_job;

/* Writes one output chunk: v = sum (or mean) into vals. */
static void put_row(const rows_job *j, int64_t o, int64_t c0, int64_t w, const double *acc) {
  size_t ves = dt_dtype_size(j->vals->dtype);
  char *dst = (char *)dt_tensor_data(j->vals) + (o * j->len + c0) * (int64_t)ves;
  for (int64_t i = 0; i < w; i++) {
    double v = j->mean ? acc[i] / (double)j->count : acc[i];
    if (j->vals->dtype == DT_FLOAT32) ((float *)dst)[i] = (float)v;
    else dt_store_f64(dst + i * (int64_t)ves, j->vals->dtype, v);
  }
}

/* items [b, e): (kept row, row block, ROWS_COLS columns) triples; each column adds the block's
 * rows in memory order, whatever the split */
static void rows_piece(int64_t b, int64_t e, void *vj) {
  const rows_job *j = vj;
  const plan *pl = j->pl;
  int64_t es = (int64_t)pl->es, len = j->len;
  double acc[ROWS_COLS];
  for (int64_t item = b; item < e; item++) {
    int64_t c0 = item % j->nblk * ROWS_COLS, w = len - c0 < ROWS_COLS ? len - c0 : ROWS_COLS;
    int64_t rb = item / j->nblk % j->nrb, o = item / j->nblk / j->nrb;
    int64_t koff = 0, rem = o;
    for (int d = pl->nk - 2; d >= 0; d--) koff += rem % pl->kshape[d] * pl->kstride[d], rem /= pl->kshape[d];
    const char *p = pl->base + (koff + c0) * es;
    int64_t r0 = j->nrb == 1 ? 0 : rb * ROWS_BLOCK;
    int64_t r1 = j->nrb == 1 || j->count - r0 < ROWS_BLOCK ? j->count : r0 + ROWS_BLOCK;
    int64_t rcnt[DT_MAX_DIMS] = {0}, roff = 0, rest = r0;
    for (int d = pl->nr - 1; d >= 0 && r0 > 0; d--) { /* the reduced dims' counters at row r0 */
      rcnt[d] = rest % pl->rshape[d], rest /= pl->rshape[d];
      roff += rcnt[d] * pl->rstride[d];
    }
    for (int64_t i = 0; i < w; i++) acc[i] = 0;
    for (int64_t r = r0; r < r1; r += DT_ADD_ROWS) { /* a few rows a pass: more reads in flight */
      const char *rows[DT_ADD_ROWS];
      int nrows = r1 - r < DT_ADD_ROWS ? (int)(r1 - r) : DT_ADD_ROWS;
      for (int k = 0; k < nrows; k++) {
        rows[k] = p + roff * es;
        roff += odometer_step(pl->nr, pl->rshape, pl->rstride, rcnt);
      }
      add_rows(acc, rows, nrows, pl->dtype, w);
    }
    if (j->nrb == 1) put_row(j, o, c0, w, acc);
    else memcpy(j->part + (o * j->nrb + rb) * len + c0, acc, sizeof(double) * (size_t)w);
  }
}

/* the blocks' partial rows added in block order, columns [b, e) of every kept row */
static void rows_combine(int64_t b, int64_t e, void *vj) {
  const rows_job *j = vj;
  double acc[ROWS_COLS];
  for (int64_t item = b; item < e; item++) {
    int64_t o = item / j->nblk, c0 = item % j->nblk * ROWS_COLS, w = j->len - c0 < ROWS_COLS ? j->len - c0 : ROWS_COLS;
    const double *part = j->part + o * j->nrb * j->len + c0;
    for (int64_t i = 0; i < w; i++) acc[i] = part[i];
    for (int64_t rb = 1; rb < j->nrb; rb++)
      for (int64_t i = 0; i < w; i++) acc[i] += part[rb * j->len + i];
    put_row(j, o, c0, w, acc);
  }
}

static int reduce_rows(const plan *pl, dt_tensor *vals, int mean) {
  int64_t len = pl->kshape[pl->nk - 1], outer = dt_shape_numel(pl->nk - 1, pl->kshape);
  int64_t count = dt_shape_numel(pl->nr, pl->rshape), nrb = count > ROWS_BLOCK ? (count + ROWS_BLOCK - 1) / ROWS_BLOCK : 1;
  rows_job j = {pl, vals, mean, len, count, (len + ROWS_COLS - 1) / ROWS_COLS, nrb, NULL};
  if (nrb > 1 && !(j.part = malloc(sizeof(double) * (size_t)(outer * nrb * len))))
    return dt_error("sum: out of memory for %lld partial rows", (long long)(outer * nrb));
  int64_t per = (nrb > 1 ? ROWS_BLOCK : count) * (len < ROWS_COLS ? len : ROWS_COLS);
  dt_parallel_for(outer * nrb * j.nblk, per >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / (per ? per : 1), rows_piece, &j);
  if (nrb > 1) {
    int64_t cper = nrb * (len < ROWS_COLS ? len : ROWS_COLS);
    dt_parallel_for(outer * j.nblk, cper >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / cper, rows_combine, &j);
    free(j.part);
  }
  return DT_OK;
}

typedef struct {
  const plan *pl;
  dt_tensor *vals, *idx;
  dt_op_id op;
  double correction;
  int index_only;
} out_job;

/* output elements [o0, o1): each reduced exactly as on one thread */
static void out_piece(int64_t o0, int64_t o1, void *vj) {
  const out_job *j = vj;
  const plan *pl = j->pl;
  char *vp = dt_tensor_data(j->vals);
  size_t ves = dt_dtype_size(j->vals->dtype);
  int64_t cnt[DT_MAX_DIMS] = {0}, off = 0, rem = o0;
  for (int d = pl->nk - 1; d >= 0; d--) {
    cnt[d] = rem % pl->kshape[d], rem /= pl->kshape[d];
    off += cnt[d] * pl->kstride[d];
  }
  const char *p = pl->base + off * (int64_t)pl->es;
  for (int64_t o = o0; o < o1; o++) {
    acc ac;
    reduce_one(pl, p, &ac);
    char *dst = vp + o * (int64_t)ves;
    if (j->index_only) ((int64_t *)dst)[0] = ac.idx;
    else if (pl->integer && j->vals->dtype == DT_INT64) ((int64_t *)dst)[0] = ac.is;
    else if (pl->integer) dt_store_i64(dst, j->vals->dtype, ac.is);
    else if (j->vals->dtype == DT_FLOAT32) ((float *)dst)[0] = (float)finish(pl, &ac, j->op, j->correction);
    else dt_store_f64(dst, j->vals->dtype, finish(pl, &ac, j->op, j->correction));
    if (j->idx) ((int64_t *)dt_tensor_data(j->idx))[o] = ac.idx;
    if (o + 1 < o1) p += odometer_step(pl->nk, pl->kshape, pl->kstride, cnt) * (int64_t)pl->es;
  }
}

static int run_reduce(const dt_op_args *a, dt_tensor **out, red_kind kind, dt_op_id op) {
  plan pl;
  if (make_plan(a, kind, &pl) != DT_OK) return DT_ERR;
  if (kind == R_SUM && !pl.integer && pl.last_kept && pl.nr > 0 && pl.kstride[pl.nk - 1] == 1 &&
      pl.kshape[pl.nk - 1] >= 16) {
    return reduce_rows(&pl, out[0], op == DT_OP_MEAN);
  }
  double correction = a->nscalar > 0 ? a->scalar[0] : 1;
  dt_tensor *vals = out[0];
  dt_tensor *idx = NULL;
  if (op == DT_OP_MAX || op == DT_OP_MIN) idx = out[1];
  int index_only = op == DT_OP_ARGMAX || op == DT_OP_ARGMIN;
  out_job j = {&pl, vals, idx, op, correction, index_only};
  int64_t nout = dt_tensor_numel(vals), per = nout ? dt_shape_numel(pl.nr, pl.rshape) : 1;
  dt_parallel_for(nout, per >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / (per ? per : 1), out_piece, &j);
  return DT_OK;
}

int dt_cpu_sum(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_SUM, DT_OP_SUM); }
int dt_cpu_mean(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_SUM, DT_OP_MEAN); }
int dt_cpu_prod(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_PROD, DT_OP_PROD); }
int dt_cpu_amax(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_MAX, DT_OP_AMAX); }
int dt_cpu_amin(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_MIN, DT_OP_AMIN); }
int dt_cpu_max(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_MAX, DT_OP_MAX); }
int dt_cpu_min(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_MIN, DT_OP_MIN); }
int dt_cpu_argmax(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_MAX, DT_OP_ARGMAX); }
int dt_cpu_argmin(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_MIN, DT_OP_ARGMIN); }
int dt_cpu_var(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_VAR, DT_OP_VAR); }
int dt_cpu_std(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_VAR, DT_OP_STD); }
int dt_cpu_norm(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_NORM, DT_OP_NORM); }
int dt_cpu_logsumexp(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_LSE, DT_OP_LOGSUMEXP); }
int dt_cpu_all(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_ALL, DT_OP_ALL); }
int dt_cpu_any(const dt_op_args *a, dt_tensor **out) { return run_reduce(a, out, R_ANY, DT_OP_ANY); }
/* var_mean: var's pass, then mean's (out[1]) */
int dt_cpu_var_mean(const dt_op_args *a, dt_tensor **out) {
  if (run_reduce(a, out, R_VAR, DT_OP_VAR) != DT_OK) return DT_ERR;
  return run_reduce(a, out + 1, R_SUM, DT_OP_MEAN);
}
