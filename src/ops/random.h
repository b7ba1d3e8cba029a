/* The random ops' device-neutral contract: a random op fills elements of a GLOBAL tensor,
 * element g (row-major index in the global tensor) of an op started at generator position
 * (seed, offset) always getting the same value, whichever rank, shard or device computes
 * it.  Here: the generator position and where the args carry it, the block of the global
 * tensor a shard is, and how far each op advances the generator.  The values themselves
 * (Philox words -> numbers) are the kernels' (kernels/philox.h, kernels/random.h). */
#ifndef DT_OPS_RANDOM_H
#define DT_OPS_RANDOM_H

#include "base/export.h"

#include <stdint.h>

#include "ops/op_args.h"

/* torch's default CPU seed (torch.initial_seed() in a fresh process): reproducible runs
 * without manual_seed, and the same first draws as a fresh dtlua on every rank. */
#define DT_RNG_DEFAULT_SEED UINT64_C(67280421310721)

/* A generator position: a rank's state (in its dt_context), and where a random op starts. */
typedef struct dt_rng_state {
  uint64_t seed;
  uint64_t offset; /* in 32-bit Philox words; a multiple of 4 after every op */
} dt_rng_state;

/* Where the random ops' rows keep the generator position in dt_op_args.ints (after the
 * shape, which uses at most DT_MAX_DIMS slots). */
#define DT_RNG_SLOT_LOW 12    /* randint: low (inclusive) */
#define DT_RNG_SLOT_HIGH 13   /* randint: high (exclusive) */
#define DT_RNG_SLOT_SEED 14   /* generator seed (uint64 bits) */
#define DT_RNG_SLOT_OFFSET 15 /* generator offset in 32-bit words (uint64 bits), a multiple of 4 */

/* A block of a global tensor: the local elements are those with global multi-index
 * start[d] .. start[d] + shape[d] - 1, laid out row-major (contiguous) in dst. */
typedef struct dt_rng_region {
  int ndim;
  int64_t gshape[DT_MAX_DIMS];
  int64_t start[DT_MAX_DIMS];
  int64_t shape[DT_MAX_DIMS];
} dt_rng_region;

/* The region covering a whole tensor of this shape. */
DT_API void dt_rng_region_whole(dt_rng_region *r, int ndim, const int64_t *shape);

/* The block of the global tensor a random op's args fill: a->region, or (NULL) the whole
 * tensor t; DT_ERR when the region's block shape is not t's. */
DT_API int dt_rng_region_of(const dt_op_args *a, const dt_tensor *t, dt_rng_region *r);

/* Generator position of a random op's args. */
static inline uint64_t dt_rng_args_seed(const dt_op_args *a) { return (uint64_t)a->ints[DT_RNG_SLOT_SEED]; }
static inline uint64_t dt_rng_args_offset(const dt_op_args *a) { return (uint64_t)a->ints[DT_RNG_SLOT_OFFSET]; }

static inline uint64_t dt_rng_round_words(uint64_t words) { return (words + 3) & ~(uint64_t)3; }
/* Words an elementwise random op over a GLOBAL tensor of numel elements consumes: the
 * amount the generator offset advances by, identical on every rank.  A normal op pairs
 * elements (2k, 2k+1): w*numel rounded up to 4 also covers an odd tail's pair. */
static inline uint64_t dt_rng_words(int wide, int64_t numel) {
  return dt_rng_round_words((uint64_t)numel * (wide ? 2u : 1u));
}

/* Words randperm (of n values) and multinomial draw: every device's kernels keep these. */
DT_API uint64_t dt_rng_randperm_words(int64_t n);
DT_API uint64_t dt_rng_multinomial_words(int64_t rows, int64_t cats, int64_t samples, int replacement);

#endif
