/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) and
 * the mapping from a random op's global element index to its 32-bit random words.
 *
 * Pure arithmetic on fixed-width integers, every function static inline and free of
 * CPU-only constructs, so a CUDA file can include this header and produce bit-identical
 * streams (under nvcc DT_PHILOX_FN marks the functions __host__ __device__).
 *
 * The stream: word p (p = 0, 1, 2, ...) of generator (seed, ·) is
 *     philox4x32_10(counter = {p/4 low 32 bits, p/4 high 32 bits, 0, 0},
 *                   key = {seed low 32 bits, seed high 32 bits})[p % 4].
 * A random op starting at generator offset `off` gives element i (row-major in the GLOBAL
 * tensor) the words off + w*i .. off + w*i + w-1, with w = 1 word per element, or 2 for
 * 64-bit draws (see doc/random.md).  Offsets advance by a multiple of 4, so every op starts
 * on a fresh Philox block. */
#ifndef DT_KERNELS_PHILOX_H
#define DT_KERNELS_PHILOX_H

#include <stdint.h>

#ifndef DT_PHILOX_FN
#if defined(__CUDACC__)
#define DT_PHILOX_FN static __host__ __device__ __forceinline__
#elif defined(__GNUC__)
/* forced: gcc otherwise keeps the unrolled rounds out of line and loses ~1.7x */
#define DT_PHILOX_FN static inline __attribute__((always_inline))
#else
#define DT_PHILOX_FN static inline
#endif
#endif

#define DT_PHILOX_M0 0xD2511F53u
#define DT_PHILOX_M1 0xCD9E8D57u
#define DT_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define DT_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

typedef struct dt_philox4 {
  uint32_t v[4];
} dt_philox4;

DT_PHILOX_FN void dt_philox_round(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3, uint32_t k0,
                                  uint32_t k1) {
  uint64_t p0 = (uint64_t)DT_PHILOX_M0 * *c0;
  uint64_t p1 = (uint64_t)DT_PHILOX_M1 * *c2;
  uint32_t n0 = (uint32_t)(p1 >> 32) ^ *c1 ^ k0;
  uint32_t n2 = (uint32_t)(p0 >> 32) ^ *c3 ^ k1;
  *c1 = (uint32_t)p1;
  *c3 = (uint32_t)p0;
  *c0 = n0;
  *c2 = n2;
}

/* The Random123 philox4x32 with 10 rounds. */
DT_PHILOX_FN dt_philox4 dt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  /* rounds written out, bumping the key in place */
#define DT_PHILOX_RB                                  \
  dt_philox_round(&c0, &c1, &c2, &c3, k0, k1);        \
  k0 += DT_PHILOX_W0;                                 \
  k1 += DT_PHILOX_W1
  DT_PHILOX_RB; DT_PHILOX_RB; DT_PHILOX_RB; DT_PHILOX_RB; DT_PHILOX_RB;
  DT_PHILOX_RB; DT_PHILOX_RB; DT_PHILOX_RB; DT_PHILOX_RB;
  dt_philox_round(&c0, &c1, &c2, &c3, k0, k1);
#undef DT_PHILOX_RB
  dt_philox4 out = {{c0, c1, c2, c3}};
  return out;
}

/* Block b (= word index / 4) of the stream of seed: 4 consecutive words. */
DT_PHILOX_FN dt_philox4 dt_philox_block(uint64_t seed, uint64_t b) {
  uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0u, 0u};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  return dt_philox4x32_10(ctr, key);
}

/* Word p of the stream of seed (one Philox call; loops should use whole blocks). */
DT_PHILOX_FN uint32_t dt_philox_word(uint64_t seed, uint64_t p) { return dt_philox_block(seed, p >> 2).v[p & 3]; }

/* ---- words to numbers ---------------------------------------------------------------- */
/* Uniform in [0, 1) from the top `bits` bits of w (bits <= 24 is exact in float32). */
DT_PHILOX_FN float dt_philox_unit_f32(uint32_t w, int bits) {
  return (float)(w >> (32 - bits)) * (1.0f / (float)(1u << bits));
}
/* Uniform in [0, 1) with 53 random bits from two words (never 1.0). */
DT_PHILOX_FN double dt_philox_unit_f64(uint32_t hi, uint32_t lo) {
  uint64_t x = ((uint64_t)hi << 32 | lo) >> 11;
  return (double)x * (1.0 / 9007199254740992.0);
}

#endif
