/* Random ops: the fill engine (random.c) over the args' region, the whole tensor for plain
 * tensors or a shard's block of the global tensor (dist/rng.c).  The generator position
 * arrives in ints[DT_RNG_SLOT_SEED/OFFSET]; advancing it is the caller's job. */
#include "base/error.h"

#include <stdint.h>
#include <string.h>

#include "kernels/random.h"
#include "base/thread_pool.h"
#include "kernels/cpu/kernel_table.h"

/* gcc -O2's "very cheap" vectoriser model leaves dropout's masked select scalar */
#if defined(__GNUC__) && !defined(__clang__)
#define DT_MASK_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define DT_MASK_VECTORIZE
#endif

static dt_rng_fill fill_of(const dt_op_args *a, dt_rng_kind kind, dt_dtype dtype, void *dst) {
  dt_rng_fill f = {.kind = kind, .dtype = dtype, .dst = dst, .seed = dt_rng_args_seed(a),
                   .offset = dt_rng_args_offset(a)};
  return f;
}

/* Fills t (any layout) in its logical row-major order. */
static int fill_tensor(const dt_op_args *a, dt_rng_fill *f, dt_tensor *t) {
  dt_rng_region r;
  if (dt_rng_region_of(a, t, &r) != DT_OK) return DT_ERR;
  dt_rng_fill_init(f);
  if (dt_tensor_is_contiguous(t)) {
    f->dst = dt_tensor_data(t);
    return dt_rng_fill_region(f, &r);
  }
  dt_tensor *tmp = dt_tensor_empty_like(t);
  if (!tmp) return DT_ERR;
  f->dst = dt_tensor_data(tmp);
  int rc = dt_rng_fill_region(f, &r);
  if (rc == DT_OK) rc = dt_tensor_copy_(t, tmp, f->kind == DT_RNG_NORMAL ? "normal_" : "uniform_");
  dt_tensor_release(tmp);
  return rc;
}

static int fill_out(const dt_op_args *a, dt_rng_kind kind, double x, double y, dt_tensor *t) {
  dt_rng_fill f = fill_of(a, kind, t->dtype, NULL);
  f.a = x, f.b = y;
  f.low = a->ints[DT_RNG_SLOT_LOW];
  f.range = (uint64_t)a->ints[DT_RNG_SLOT_HIGH] - (uint64_t)a->ints[DT_RNG_SLOT_LOW];
  return fill_tensor(a, &f, t);
}

int dt_cpu_rand(const dt_op_args *a, dt_tensor **out) {
  return fill_out(a, DT_RNG_UNIFORM, a->scalar[0], a->scalar[1], out[0]);
}
int dt_cpu_randn(const dt_op_args *a, dt_tensor **out) {
  return fill_out(a, DT_RNG_NORMAL, a->scalar[0], a->scalar[1], out[0]);
}
int dt_cpu_randint(const dt_op_args *a, dt_tensor **out) { return fill_out(a, DT_RNG_RANDINT, 0, 0, out[0]); }
int dt_cpu_uniform_(const dt_op_args *a, dt_tensor **out) {
  return fill_out(a, DT_RNG_UNIFORM, a->scalar[0], a->scalar[1], out[0]);
}
int dt_cpu_normal_(const dt_op_args *a, dt_tensor **out) {
  return fill_out(a, DT_RNG_NORMAL, a->scalar[0], a->scalar[1], out[0]);
}

/* Probabilities must be in [0, 1] (NaN is not). */
static int check_probs(const char *op, const dt_tensor *p) {
  int64_t n = dt_tensor_numel(p);
  size_t es = dt_tensor_elsize(p);
  const char *d = dt_tensor_data(p);
  for (int64_t i = 0; i < n; i++) {
    double v = dt_load_f64(d + i * es, p->dtype);
    if (!(v >= 0 && v <= 1)) return dt_error("%s: probabilities must be in [0, 1], got %g", op, v);
  }
  return DT_OK;
}

int dt_cpu_bernoulli(const dt_op_args *a, dt_tensor **out) {
  dt_rng_fill f = fill_of(a, DT_RNG_BERNOULLI, out[0]->dtype, dt_tensor_data(out[0]));
  dt_rng_region r;
  if (dt_rng_region_of(a, out[0], &r) != DT_OK) return DT_ERR;
  if (a->flags & DT_ARG_SCALAR) {
    f.a = a->scalar[0];
    dt_rng_fill_init(&f);
    return dt_rng_fill_region(&f, &r);
  }
  dt_tensor *p = dt_tensor_contiguous(a->in[0]);
  if (!p) return DT_ERR;
  int rc = check_probs(a->name, p);
  f.probs = dt_tensor_data(p), f.probs_dtype = p->dtype;
  dt_rng_fill_init(&f);
  if (rc == DT_OK) rc = dt_rng_fill_region(&f, &r);
  dt_tensor_release(p);
  return rc;
}

typedef struct {
  const uint8_t *k;
  const char *s;
  char *d;
  dt_dtype dtype;
  double scale;
} mask_job;

/* d = k ? s * scale : 0 over [i0, i1): a select the compiler vectorises for float32. */
DT_MASK_VECTORIZE static void mask_piece(int64_t i0, int64_t i1, void *vj) {
  const mask_job *j = vj;
  const uint8_t *restrict k = j->k;
  if (j->dtype == DT_FLOAT32) {
    const float *restrict s = (const float *)j->s;
    float *restrict d = (float *)j->d, sc = (float)j->scale;
    for (int64_t i = i0; i < i1; i++) { /* the product's bits and'ed with the mask: +0 when dropped */
      float v = s[i] * sc;
      uint32_t b;
      memcpy(&b, &v, sizeof b);
      b &= 0u - (uint32_t)(k[i] != 0);
      memcpy(d + i, &b, sizeof b);
    }
  } else if (j->dtype == DT_FLOAT64) {
    const double *restrict s = (const double *)j->s;
    double *restrict d = (double *)j->d, sc = j->scale;
    for (int64_t i = i0; i < i1; i++) {
      double v = s[i] * sc;
      uint64_t b;
      memcpy(&b, &v, sizeof b);
      b &= 0u - (uint64_t)(k[i] != 0);
      memcpy(d + i, &b, sizeof b);
    }
  } else {
    size_t es = dt_dtype_size(j->dtype);
    for (int64_t i = i0; i < i1; i++)
      dt_store_f64(j->d + i * es, j->dtype, k[i] ? dt_load_f64(j->s + i * es, j->dtype) * j->scale : 0.0);
  }
}

/* out = mask ? x * scale : 0 (x and mask contiguous, same numel); select, not multiply,
 * so dropped infinities give 0 like the mask product would in exact arithmetic.  Ranges of
 * elements on the intra-op threads. */
static int apply_mask(dt_tensor *out, dt_tensor *x_any, const dt_tensor *mask_any, double p) {
  dt_tensor *x = dt_tensor_contiguous(x_any);
  dt_tensor *m = x ? dt_tensor_contiguous((dt_tensor *)mask_any) : NULL;
  if (!m) {
    if (x) dt_tensor_release(x);
    return DT_ERR;
  }
  mask_job j = {.k = dt_tensor_data(m), .s = dt_tensor_data(x), .d = dt_tensor_data(out), .dtype = x->dtype,
                .scale = p < 1 ? 1.0 / (1.0 - p) : 0.0};
  dt_parallel_for(dt_tensor_numel(out), DT_PARALLEL_GRAIN, mask_piece, &j);
  dt_tensor_release(x);
  dt_tensor_release(m);
  return DT_OK;
}

int dt_cpu_dropout(const dt_op_args *a, dt_tensor **out) {
  dt_rng_fill f = fill_of(a, DT_RNG_KEEP_MASK, DT_BOOL, dt_tensor_data(out[1]));
  f.a = a->scalar[0];
  f.wide = a->in[0]->dtype == DT_FLOAT64; /* u with the precision of x */
  dt_rng_region r;
  if (dt_rng_region_of(a, out[1], &r) != DT_OK || dt_rng_fill_region(&f, &r) != DT_OK) return DT_ERR;
  return apply_mask(out[0], a->in[0], out[1], a->scalar[0]);
}

int dt_cpu_dropout_backward(const dt_op_args *a, dt_tensor **out) {
  return apply_mask(out[0], a->in[0], a->in[1], a->scalar[0]);
}
