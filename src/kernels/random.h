/* The random-fill engine: random ops as "fill these elements of a GLOBAL tensor" (the
 * contract and the region: ops/random.h).  A plain tensor is the region that covers the
 * whole global tensor; a DTensor shard is the block it owns.  The mapping of g to Philox
 * words is in src/kernels/philox.h and doc/random.md. */
#ifndef DT_KERNELS_RANDOM_H
#define DT_KERNELS_RANDOM_H

#include <stdint.h>

#include "ops/random.h"

typedef enum dt_rng_kind {
  DT_RNG_UNIFORM,   /* a + (b - a) * u, u in [0, 1), never b */
  DT_RNG_NORMAL,    /* a + b * z, z standard normal by Box-Muller over element pairs */
  DT_RNG_RANDINT,   /* low + (bits mod range) */
  DT_RNG_BERNOULLI, /* u < p ? 1 : 0, p per element (probs) or the scalar a */
  DT_RNG_KEEP_MASK, /* dropout mask: u >= a (bool) */
} dt_rng_kind;

/* One random fill.  dst is the local buffer (contiguous, dtype); probs, when set, is the
 * local contiguous buffer of per-element probabilities aligned with dst. */
typedef struct dt_rng_fill {
  dt_rng_kind kind;
  dt_dtype dtype; /* of dst */
  void *dst;
  uint64_t seed, offset;
  double a, b;   /* uniform: [a, b); normal: mean a, std b; bernoulli/keep: probability a */
  int64_t low;   /* randint */
  uint64_t range; /* randint: high - low, >= 1 */
  const void *probs;
  dt_dtype probs_dtype;
  int wide; /* 2 words per element (64-bit draws) instead of 1; see dt_rng_fill_init */
} dt_rng_fill;

/* Sets f->wide from kind/dtype/range (64-bit draws for float64 values or probabilities,
 * and for randint ranges above 2^32): call before filling.  Dropout sets it itself from
 * the dtype of x, since its mask is bool. */
void dt_rng_fill_init(dt_rng_fill *f);
/* Elements [gbegin, gbegin + n) of the global index space into dst[pos .. pos + n). */
int dt_rng_fill_range(const dt_rng_fill *f, int64_t pos, int64_t gbegin, int64_t n);
/* The largest bf16/f16 (t) value below b, as bits: uniform's top in a half dtype, so [a, b)
 * stays half-open after rounding (every device's uniform uses it). */
uint16_t dt_rng_half_below(float b, dt_dtype t);
/* Every element of a region (the plain-tensor case: start 0, shape = gshape). */
int dt_rng_fill_region(const dt_rng_fill *f, const dt_rng_region *r);

#endif
