/* The random-fill engine on CPU: global element ranges -> Philox words -> values.
 * Mapping and value recipes: src/kernels/philox.h and doc/random.md. */
#include "kernels/random.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/philox.h"
#include "kernels/cpu/philox_batch.h"
#include "kernels/cpu/box_muller.h"

#define CHUNK 256 /* elements converted per batch of words (the word buffer stays in L1) */

/* gcc -O2's "very cheap" vectoriser model skips the conversion loops; the cheap model
 * vectorises them (float32 uniform ~1.4x faster). */
#if defined(__GNUC__) && !defined(__clang__)
#define DT_VECTORIZE __attribute__((optimize("vect-cost-model=cheap")))
#else
#define DT_VECTORIZE
#endif
#define TWO_PI 6.283185307179586

void dt_rng_fill_init(dt_rng_fill *f) {
  switch (f->kind) {
  case DT_RNG_RANDINT: f->wide = f->range > 0xffffffffull; break;
  case DT_RNG_BERNOULLI: f->wide = (f->probs ? f->probs_dtype : f->dtype) == DT_FLOAT64; break;
  default: f->wide = f->dtype == DT_FLOAT64; break;
  }
}

/* Words p0 .. p0 + count - 1 of seed's stream: whole blocks in batches, partial blocks at
 * either end word by word. */
static void gen_words(uint64_t seed, uint64_t p0, int64_t count, uint32_t *buf) {
  int64_t k = 0;
  uint64_t p = p0;
  for (; k < count && (p & 3); k++, p++) buf[k] = dt_philox_word(seed, p);
  int64_t nb = (count - k) / 4;
  dt_philox_blocks(seed, p >> 2, nb, buf + k);
  k += 4 * nb, p += 4 * (uint64_t)nb;
  for (; k < count; k++, p++) buf[k] = dt_philox_word(seed, p);
}

/* ---- per-dtype bounds: the largest value below b, so [a, b) stays half-open after rounding -- */
static uint16_t half_enc(float v, dt_dtype t) { return t == DT_BFLOAT16 ? dt_f32_to_bf16(v) : dt_f32_to_f16(v); }
static float half_dec(uint16_t h, dt_dtype t) { return t == DT_BFLOAT16 ? dt_bf16_to_f32(h) : dt_f16_to_f32(h); }
uint16_t dt_rng_half_below(float b, dt_dtype t) {
  uint16_t h = half_enc(b, t);
  float v = half_dec(h, t);
  if (v < b) return h;
  if (v > 0) return (uint16_t)(h - 1);
  if (v == 0) return 0x8001; /* the negative value closest to 0 */
  return (uint16_t)(h + 1);  /* negative: one step away from 0 */
}

/* Uniform values of one chunk (words already generated). */
DT_VECTORIZE static void put_uniform(const dt_rng_fill *f, int64_t pos, int64_t m, const uint32_t *w) {
  switch (f->dtype) {
  case DT_FLOAT32: {
    float a = (float)f->a, b = (float)f->b, span = b - a, top = nextafterf(b, -INFINITY);
    float *d = (float *)f->dst + pos;
    if (!(b > a)) {
      for (int64_t j = 0; j < m; j++) d[j] = a;
      break;
    }
    /* v >= a always, so min(v, top) == (v < b ? v : top).  Branch-free and the 24-bit
     * integer converts signed, so the loop vectorises. */
    for (int64_t j = 0; j < m; j++) {
      float v = a + span * ((float)(int32_t)(w[j] >> 8) * (1.0f / 16777216.0f));
      d[j] = v < top ? v : top;
    }
    break;
  }
  case DT_FLOAT64: {
    double a = f->a, b = f->b, top = nextafter(b, -INFINITY);
    double *d = (double *)f->dst + pos;
    for (int64_t j = 0; j < m; j++) {
      double v = a + (b - a) * dt_philox_unit_f64(w[2 * j], w[2 * j + 1]);
      d[j] = v < b ? v : (b > a ? top : a);
    }
    break;
  }
  default: { /* bf16/f16: as many random bits as the format holds, then round */
    dt_dtype t = f->dtype;
    int bits = t == DT_BFLOAT16 ? 8 : 11;
    float a = half_dec(half_enc((float)f->a, t), t), b = half_dec(half_enc((float)f->b, t), t);
    uint16_t top = b > a ? dt_rng_half_below(b, t) : half_enc(a, t);
    uint16_t *d = (uint16_t *)f->dst + pos;
    for (int64_t j = 0; j < m; j++) {
      uint16_t h = half_enc(a + (b - a) * dt_philox_unit_f32(w[j], bits), t);
      d[j] = half_dec(h, t) < b ? h : top;
    }
    break;
  }
  }
}

static void put_randint(const dt_rng_fill *f, int64_t pos, int64_t m, const uint32_t *w) {
  size_t es = dt_dtype_size(f->dtype);
  for (int64_t j = 0; j < m; j++) {
    uint64_t x = f->wide ? ((uint64_t)w[2 * j] << 32 | w[2 * j + 1]) : w[j];
    int64_t v = (int64_t)((uint64_t)f->low + x % f->range);
    if (f->dtype == DT_INT64) ((int64_t *)f->dst)[pos + j] = v;
    else dt_store_i64((char *)f->dst + (pos + j) * es, f->dtype, v);
  }
}

/* The common draw (a scalar p, 24-bit u, byte or float32 out) as an integer compare the compiler
 * vectorises: u = x / 2^24 with x = w >> 8, so u >= p exactly when x >= ceil(p * 2^24) (scaling
 * by 2^24 is exact in double).  False when it does not apply. */
DT_VECTORIZE static int put_compare_threshold(const dt_rng_fill *f, int64_t pos, int64_t m, const uint32_t *w) {
  double p = f->a;
  if (f->wide || f->probs || p != p) return 0;
  double t = ceil(p * 16777216.0);
  uint32_t thr = t <= 0 ? 0 : t > 16777216.0 ? 16777217u : (uint32_t)t;
  uint32_t keep = f->kind == DT_RNG_KEEP_MASK; /* keep: x >= thr; bernoulli: x < thr */
  if (f->dtype == DT_BOOL || f->dtype == DT_UINT8) {
    uint8_t *restrict d = (uint8_t *)f->dst + pos;
    for (int64_t j = 0; j < m; j++) d[j] = (uint8_t)((uint32_t)((w[j] >> 8) >= thr) == keep);
    return 1;
  }
  if (f->dtype == DT_FLOAT32) {
    float *restrict d = (float *)f->dst + pos;
    for (int64_t j = 0; j < m; j++) d[j] = (uint32_t)((w[j] >> 8) >= thr) == keep ? 1.0f : 0.0f;
    return 1;
  }
  return 0;
}

/* Bernoulli draws and dropout keep-masks: compare u with p. */
static void put_compare(const dt_rng_fill *f, int64_t pos, int64_t m, const uint32_t *w) {
  if (put_compare_threshold(f, pos, m, w)) return;
  size_t es = dt_dtype_size(f->dtype), pes = f->probs ? dt_dtype_size(f->probs_dtype) : 0;
  for (int64_t j = 0; j < m; j++) {
    double u = f->wide ? dt_philox_unit_f64(w[2 * j], w[2 * j + 1]) : dt_philox_unit_f32(w[j], 24);
    double p = f->probs ? dt_load_f64((const char *)f->probs + (pos + j) * pes, f->probs_dtype) : f->a;
    int v = f->kind == DT_RNG_KEEP_MASK ? u >= p : u < p;
    if (f->dtype == DT_BOOL || f->dtype == DT_UINT8) ((uint8_t *)f->dst)[pos + j] = (uint8_t)v;
    else if (f->dtype == DT_FLOAT32) ((float *)f->dst)[pos + j] = (float)v;
    else dt_store_f64((char *)f->dst + (pos + j) * es, f->dtype, v);
  }
}

/* Stores a normal value of global element g if g falls inside [g0, g0 + n). */
static void put_normal_one(const dt_rng_fill *f, int64_t pos, int64_t g0, int64_t n, int64_t g, double z) {
  if (g < g0 || g >= g0 + n) return;
  int64_t at = pos + (g - g0);
  double v = f->a + f->b * z;
  switch (f->dtype) {
  case DT_FLOAT32: ((float *)f->dst)[at] = (float)v; break;
  case DT_FLOAT64: ((double *)f->dst)[at] = v; break;
  default: dt_store_f64((char *)f->dst + at * 2, f->dtype, (float)v); break;
  }
}

/* d[i] = (float)(a + b * z[i]) in double, as put_normal_one rounds: the same operations
 * in any vector width */
#define AFFINE_BODY                                                  \
  for (int64_t i = 0; i < m; i++) d[i] = (float)(a + b * (double)z[i]);
DT_VECTORIZE static void affine_plain(float *restrict d, const float *restrict z, int64_t m, double a, double b) {
  AFFINE_BODY
}
#if defined(__x86_64__) && defined(__GNUC__)
DT_VECTORIZE __attribute__((target("avx2"))) static void affine_avx2(float *restrict d, const float *restrict z,
                                                                    int64_t m, double a, double b) {
  AFFINE_BODY
}
#define AFFINE(d, z, m, a, b) (__builtin_cpu_supports("avx2") ? affine_avx2(d, z, m, a, b) : affine_plain(d, z, m, a, b))
#else
#define AFFINE(d, z, m, a, b) affine_plain(d, z, m, a, b)
#endif

/* Normal: pair k = elements (2k, 2k+1) uses the words of both elements for (u1, u2);
 * z0 = r cos(2 pi u2) goes to 2k, z1 = r sin(2 pi u2) to 2k+1, r = sqrt(-2 ln(1 - u1)). */
static void fill_normal(const dt_rng_fill *f, int64_t pos, int64_t g0, int64_t n) {
  uint32_t w[4 * (CHUNK / 2 + 1)];
  float u1[CHUNK / 2 + 8], u2[CHUNK / 2 + 8], z0f[CHUNK / 2 + 8], z1f[CHUNK / 2 + 8], zz[CHUNK];
  int64_t k = g0 / 2, klast = (g0 + n - 1) / 2;
  unsigned ww = f->wide ? 2 : 1;
  while (k <= klast) {
    int64_t np = klast - k + 1 < CHUNK / 2 ? klast - k + 1 : CHUNK / 2;
    gen_words(f->seed, f->offset + (uint64_t)k * 2 * ww, np * 2 * ww, w);
    int64_t j = 0;
    if (!f->wide) { /* float: 8 or 4 pairs per vector step (box_muller.h), the tail padded: same bits anywhere */
      for (int64_t i = 0; i < np; i++) u1[i] = dt_philox_unit_f32(w[2 * i], 24), u2[i] = dt_philox_unit_f32(w[2 * i + 1], 24);
      int64_t padded = (np + 7) / 8 * 8;
      for (int64_t i = np; i < padded; i++) u1[i] = u2[i] = 0.5f;
      box_muller_pairs(u1, u2, z0f, z1f, padded);
      /* float32 out: the pairs with both elements inside [g0, g0 + n) in one vector sweep */
      int64_t jlo = 2 * k < g0 ? 1 : 0, jhi = np;
      if (2 * (k + jhi - 1) + 1 >= g0 + n) jhi--;
      if (f->dtype == DT_FLOAT32 && jlo < jhi) {
        if (jlo) { /* the leading pair's second element alone */
          put_normal_one(f, pos, g0, n, 2 * k, z0f[0]);
          put_normal_one(f, pos, g0, n, 2 * k + 1, z1f[0]);
        }
        for (int64_t i = jlo; i < jhi; i++) zz[2 * (i - jlo)] = z0f[i], zz[2 * (i - jlo) + 1] = z1f[i];
        AFFINE((float *)f->dst + pos + (2 * (k + jlo) - g0), zz, 2 * (jhi - jlo), f->a, f->b);
        j = jhi;
      }
    }
    for (; j < np; j++) {
      double z0, z1;
      if (f->wide) {
        const uint32_t *q = w + 4 * j;
        double r = sqrt(-2.0 * log(1.0 - dt_philox_unit_f64(q[0], q[1])));
        double th = TWO_PI * dt_philox_unit_f64(q[2], q[3]);
        z0 = r * cos(th), z1 = r * sin(th);
      } else {
        z0 = z0f[j], z1 = z1f[j];
      }
      int64_t g = 2 * (k + j);
      put_normal_one(f, pos, g0, n, g, z0);
      put_normal_one(f, pos, g0, n, g + 1, z1);
    }
    k += np;
  }
}

static void fill_range_serial(const dt_rng_fill *f, int64_t pos, int64_t gbegin, int64_t n) {
  if (f->kind == DT_RNG_NORMAL) {
    fill_normal(f, pos, gbegin, n);
    return;
  }
  uint32_t w[2 * CHUNK];
  unsigned ww = f->wide ? 2 : 1;
  for (int64_t c = 0; c < n; c += CHUNK) {
    int64_t m = n - c < CHUNK ? n - c : CHUNK;
    gen_words(f->seed, f->offset + (uint64_t)(gbegin + c) * ww, m * ww, w);
    switch (f->kind) {
    case DT_RNG_UNIFORM: put_uniform(f, pos + c, m, w); break;
    case DT_RNG_RANDINT: put_randint(f, pos + c, m, w); break;
    case DT_RNG_BERNOULLI:
    default: put_compare(f, pos + c, m, w); break; /* bernoulli, keep mask */
    }
  }
}

typedef struct {
  const dt_rng_fill *f;
  int64_t pos, gbegin;
} fill_job;

static void fill_piece(int64_t b, int64_t e, void *vj) {
  const fill_job *j = vj;
  fill_range_serial(j->f, j->pos + b, j->gbegin + b, e - b);
}

/* Every element's value is a function of its global index alone (counter-based Philox; a
 * normal pair reads the words of its two elements), so any split over threads gives the
 * same bits. */
int dt_rng_fill_range(const dt_rng_fill *f, int64_t pos, int64_t gbegin, int64_t n) {
  if (n <= 0) return DT_OK;
  if (f->kind < DT_RNG_UNIFORM || f->kind > DT_RNG_KEEP_MASK) return dt_error("random fill: unknown kind %d", (int)f->kind);
  fill_job j = {f, pos, gbegin};
  dt_parallel_for(n, DT_PARALLEL_GRAIN / 4, fill_piece, &j); /* compute bound: smaller pieces pay */
  return DT_OK;
}

/* Walks the region as runs of consecutive global indices: the trailing dims the block
 * covers whole, times the first partial dim from the end. */
int dt_rng_fill_region(const dt_rng_fill *f, const dt_rng_region *r) {
  int64_t gstride[DT_MAX_DIMS], idx[DT_MAX_DIMS] = {0};
  dt_contiguous_strides(r->ndim, r->gshape, gstride);
  for (int d = 0; d < r->ndim; d++) {
    if (r->shape[d] == 0) return DT_OK;
    if (r->start[d] < 0 || r->start[d] + r->shape[d] > r->gshape[d])
      return dt_error("random fill: region out of bounds in dim %d", d);
  }
  int d = r->ndim - 1;
  int64_t run = 1;
  while (d >= 0 && r->start[d] == 0 && r->shape[d] == r->gshape[d]) run *= r->shape[d--];
  int64_t base = 0;
  if (d >= 0) run *= r->shape[d], base = r->start[d] * gstride[d];
  for (int64_t pos = 0;; pos += run) {
    int64_t g = base;
    for (int k = 0; k < d; k++) g += (r->start[k] + idx[k]) * gstride[k];
    if (dt_rng_fill_range(f, pos, g, run) != DT_OK) return DT_ERR;
    int k = d - 1;
    while (k >= 0 && ++idx[k] == r->shape[k]) idx[k--] = 0;
    if (k < 0) return DT_OK;
  }
}
