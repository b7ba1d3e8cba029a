/* Philox blocks in batches (see philox_batch.h).  The AVX2 path runs the 10 rounds on
 * 8 counters per register: _mm256_mul_epu32 gives the 64-bit products of the even
 * lanes, a shift brings the odd lanes down, shuffles regroup high and low halves. */
#include "kernels/cpu/philox_batch.h"

#include <string.h>

#include "kernels/philox.h"

void dt_philox_blocks_scalar(uint64_t seed, uint64_t b0, int64_t n, uint32_t *out) {
  for (int64_t i = 0; i < n; i++) {
    dt_philox4 r = dt_philox_block(seed, b0 + (uint64_t)i);
    memcpy(out + 4 * i, r.v, sizeof r.v);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DT_AVX2 __attribute__((target("avx2")))

/* hi and lo 32-bit halves of a * m in each of 8 lanes. */
DT_AVX2 static inline void mulhilo8(__m256i a, __m256i m, __m256i *hi, __m256i *lo) {
  __m256i ev = _mm256_mul_epu32(a, m);                       /* lanes 0 2 4 6 */
  __m256i od = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m); /* lanes 1 3 5 7 */
  __m256i e = _mm256_shuffle_epi32(ev, _MM_SHUFFLE(3, 1, 2, 0)); /* per 128 bits: lo lo hi hi */
  __m256i o = _mm256_shuffle_epi32(od, _MM_SHUFFLE(3, 1, 2, 0));
  *lo = _mm256_unpacklo_epi32(e, o);
  *hi = _mm256_unpackhi_epi32(e, o);
}

static inline int lane_word(uint64_t b, int i, int high) { return (int)(uint32_t)((b + (uint64_t)i) >> (high ? 32 : 0)); }

DT_AVX2 static void blocks8(uint64_t seed, uint64_t b, uint32_t *out) {
  __m256i c0 = _mm256_setr_epi32(lane_word(b, 0, 0), lane_word(b, 1, 0), lane_word(b, 2, 0), lane_word(b, 3, 0),
                                 lane_word(b, 4, 0), lane_word(b, 5, 0), lane_word(b, 6, 0), lane_word(b, 7, 0));
  __m256i c1 = _mm256_setr_epi32(lane_word(b, 0, 1), lane_word(b, 1, 1), lane_word(b, 2, 1), lane_word(b, 3, 1),
                                 lane_word(b, 4, 1), lane_word(b, 5, 1), lane_word(b, 6, 1), lane_word(b, 7, 1));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  const __m256i m0 = _mm256_set1_epi32((int)DT_PHILOX_M0), m1 = _mm256_set1_epi32((int)DT_PHILOX_M1);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo8(c0, m0, &hi0, &lo0);
    mulhilo8(c2, m1, &hi1, &lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
    c1 = lo1, c3 = lo0;
    k0 += DT_PHILOX_W0, k1 += DT_PHILOX_W1;
  }
  /* transpose to stream order: 4x4 per 128-bit half (blocks 0-3 low, 4-7 high) */
  __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpacklo_epi32(c2, c3);
  __m256i t2 = _mm256_unpackhi_epi32(c0, c1), t3 = _mm256_unpackhi_epi32(c2, c3);
  __m256i r0 = _mm256_unpacklo_epi64(t0, t1), r1 = _mm256_unpackhi_epi64(t0, t1);
  __m256i r2 = _mm256_unpacklo_epi64(t2, t3), r3 = _mm256_unpackhi_epi64(t2, t3);
  _mm256_storeu_si256((__m256i *)out, _mm256_permute2x128_si256(r0, r1, 0x20));
  _mm256_storeu_si256((__m256i *)(out + 8), _mm256_permute2x128_si256(r2, r3, 0x20));
  _mm256_storeu_si256((__m256i *)(out + 16), _mm256_permute2x128_si256(r0, r1, 0x31));
  _mm256_storeu_si256((__m256i *)(out + 24), _mm256_permute2x128_si256(r2, r3, 0x31));
}

void dt_philox_blocks(uint64_t seed, uint64_t b0, int64_t n, uint32_t *out) {
  int64_t i = 0;
  if (n >= 8 && __builtin_cpu_supports("avx2"))
    for (; i + 8 <= n; i += 8) blocks8(seed, b0 + (uint64_t)i, out + 4 * i);
  dt_philox_blocks_scalar(seed, b0 + (uint64_t)i, n - i, out + 4 * i);
}
#else
void dt_philox_blocks(uint64_t seed, uint64_t b0, int64_t n, uint32_t *out) {
  dt_philox_blocks_scalar(seed, b0, n, out);
}
#endif
