/* Replicated random sampling: randperm and multinomial.  Every rank computes the whole
 * result from the same words, so replicas agree without communication. */
#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "kernels/philox.h"
#include "kernels/random.h"
#include "kernels/cpu/kernel_table.h"

/* 64 random bits from words p, p+1 (high word first). */
static uint64_t word64(uint64_t seed, uint64_t p) {
  return (uint64_t)dt_philox_word(seed, p) << 32 | dt_philox_word(seed, p + 1);
}

/* Fisher-Yates, i = n-1 down to 1, swapping i with j = bits(i) mod (i + 1), where bits(i)
 * is word offset+i (offset+2i, +2i+1 when n > 2^32).  Values ints[1] .. ints[1] + n - 1. */
int dt_cpu_randperm(const dt_op_args *a, dt_tensor **out) {
  int64_t n = a->ints[0], first = a->ints[1];
  uint64_t seed = dt_rng_args_seed(a), off = dt_rng_args_offset(a);
  int wide = (uint64_t)n > 0xffffffffull;
  int64_t *perm = malloc(sizeof *perm * (size_t)(n > 0 ? n : 1));
  if (!perm) return dt_error("randperm: out of memory for %lld elements", (long long)n);
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t x = wide ? word64(seed, off + 2 * (uint64_t)i) : dt_philox_word(seed, off + (uint64_t)i);
    int64_t j = (int64_t)(x % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  size_t es = dt_tensor_elsize(out[0]);
  char *d = dt_tensor_data(out[0]);
  for (int64_t i = 0; i < n; i++) dt_store_i64(d + i * es, out[0]->dtype, first + perm[i]);
  free(perm);
  return DT_OK;
}

/* ---- multinomial -------------------------------------------------------------------- */
typedef struct keyed {
  double key;
  int64_t idx;
} keyed;

static int keyed_cmp(const void *x, const void *y) {
  const keyed *a = x, *b = y;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Draw g (global index in the op's draw grid) as a uniform in [0, 1) from words 2g, 2g+1. */
static double unit_at(uint64_t seed, uint64_t off, int64_t g) {
  uint64_t p = off + 2 * (uint64_t)g;
  return dt_philox_unit_f64(dt_philox_word(seed, p), dt_philox_word(seed, p + 1));
}

/* With replacement: draw (row, s) = g = row*k + s picks the first category whose
 * cumulative probability exceeds u * total. */
static void sample_with(const double *p, int64_t c, int64_t row, int64_t k, uint64_t seed, uint64_t off,
                        double *cdf, int64_t *o) {
  double total = 0;
  int64_t last = 0;
  for (int64_t j = 0; j < c; j++) {
    total += p[j];
    cdf[j] = total;
    if (p[j] > 0) last = j;
  }
  for (int64_t s = 0; s < k; s++) {
    double x = unit_at(seed, off, row * k + s) * total;
    int64_t lo = 0, hi = c - 1;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (cdf[mid] > x) hi = mid;
      else lo = mid + 1;
    }
    o[s] = cdf[lo] > x ? lo : last; /* rounding can put x at the total */
  }
}

/* Without replacement: the exponential race.  Category j of row gets E_j / p_j with
 * E_j = -ln(1 - u), u from draw g = row*c + j; the k smallest win, in order. */
static void sample_without(const double *p, int64_t c, int64_t row, int64_t k, uint64_t seed, uint64_t off,
                           keyed *keys, int64_t *o) {
  for (int64_t j = 0; j < c; j++) {
    double e = -log1p(-unit_at(seed, off, row * c + j));
    keys[j].key = p[j] > 0 ? e / p[j] : INFINITY;
    keys[j].idx = j;
  }
  qsort(keys, (size_t)c, sizeof *keys, keyed_cmp);
  for (int64_t s = 0; s < k; s++) o[s] = keys[s].idx;
}

static int check_row(const char *op, const double *p, int64_t c, int64_t k, int replacement) {
  double total = 0;
  int64_t nonzero = 0;
  for (int64_t j = 0; j < c; j++) {
    if (!(p[j] >= 0) || isinf(p[j])) return dt_error("%s: probabilities must be finite and non-negative, got %g", op, p[j]);
    total += p[j];
    nonzero += p[j] > 0;
  }
  if (!(total > 0)) return dt_error("%s: a row of probabilities sums to 0", op);
  if (!replacement && nonzero < k)
    return dt_error("%s: only %lld categories have non-zero probability, cannot draw %lld without replacement",
                    op, (long long)nonzero, (long long)k);
  return DT_OK;
}

/* in[0] = probs [c] or [r, c] (unnormalised weights); ints[0] = k, ints[1] = replacement.
 * Output int64 [k] or [r, k], 0-based category indices. */
int dt_cpu_multinomial(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *in = a->in[0];
  int64_t k = a->ints[0], c = in->shape[in->ndim - 1], rows = in->ndim == 2 ? in->shape[0] : 1;
  int replacement = a->ints[1] != 0;
  uint64_t seed = dt_rng_args_seed(a), off = dt_rng_args_offset(a);
  if (rows == 0) return DT_OK;
  dt_tensor *p = dt_tensor_contiguous_as((dt_tensor *)in, DT_FLOAT64);
  if (!p) return DT_ERR;
  const double *pd = dt_tensor_data(p);
  int rc = DT_OK;
  for (int64_t r = 0; r < rows && rc == DT_OK; r++) rc = check_row(a->name, pd + r * c, c, k, replacement);
  void *scratch = rc == DT_OK ? malloc((size_t)c * (replacement ? sizeof(double) : sizeof(keyed))) : NULL;
  if (rc == DT_OK && !scratch) rc = dt_error("%s: out of memory", a->name);
  int64_t *o = dt_tensor_data(out[0]);
  for (int64_t r = 0; r < rows && rc == DT_OK; r++) {
    if (replacement) sample_with(pd + r * c, c, r, k, seed, off, scratch, o + r * k);
    else sample_without(pd + r * c, c, r, k, seed, off, scratch, o + r * k);
  }
  free(scratch);
  dt_tensor_release(p);
  return rc;
}
