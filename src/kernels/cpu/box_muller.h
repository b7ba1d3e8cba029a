/* Box-Muller for the float32 normal fill, in 4 lanes (GCC vector extensions, SSE2) and 8
 * (functions compiled with target("avx2")): Cephes' logf, sinf and cosf.  The two widths do
 * the same lane arithmetic (no fused multiply-add under -std=c11; the square root is IEEE's
 * either way), so a CPU with AVX2 draws the same bits as one without. */
#ifndef DT_KERNELS_CPU_BOX_MULLER_H
#define DT_KERNELS_CPU_BOX_MULLER_H

#include "kernels/cpu/vec_math.h"

/* log: x > 0 finite (1 - u with u in [0, 1)); ~1 ulp.  sincos: 0 <= x <= 2 pi (2 pi u);
 * reduced by multiples of pi/4 in three parts, then the sin and cos polynomials; ~1 ulp.
 * Vectors by pointer (see vec_math.h on v8f). */
#define DEFINE_LOG_SINCOS(W, VF, VI, SPLAT)                                                               \
  static inline __attribute__((always_inline)) void log##W(VF *px) {                                     \
    VI bits = (VI)*px;                                                                                    \
    VI e = ((bits >> 23) & 0xff) - 126;                   /* x = m 2^e, m in [0.5, 1) */                  \
    VF m = (VF)((bits & 0x007fffff) | 0x3f000000);                                                        \
    VI small = m < SPLAT(0.707106781186547524f);          /* m < sqrt(1/2): 2m - 1 */                     \
    e += small;                                           /* true lanes are -1 */                         \
    m = m + (VF)((VI)m & small) - SPLAT(1.0f);                                                            \
    VF ef = __builtin_convertvector(e, VF), z = m * m;                                                    \
    VF y = SPLAT(7.0376836292e-2f);                                                                       \
    y = y * m + SPLAT(-1.1514610310e-1f);                                                                 \
    y = y * m + SPLAT(1.1676998740e-1f);                                                                  \
    y = y * m + SPLAT(-1.2420140846e-1f);                                                                 \
    y = y * m + SPLAT(1.4249322787e-1f);                                                                  \
    y = y * m + SPLAT(-1.6668057665e-1f);                                                                 \
    y = y * m + SPLAT(2.0000714765e-1f);                                                                  \
    y = y * m + SPLAT(-2.4999993993e-1f);                                                                 \
    y = y * m + SPLAT(3.3333331174e-1f);                                                                  \
    y = y * m * z;                                                                                        \
    y += ef * SPLAT(-2.12194440e-4f);                                                                     \
    y -= SPLAT(0.5f) * z;                                                                                 \
    *px = m + y + ef * SPLAT(0.693359375f);                                                               \
  }                                                                                                       \
  static inline __attribute__((always_inline)) void sincos##W(const VF *px, VF *s, VF *c) {              \
    VF x = *px;                                                                                           \
    VI j = __builtin_convertvector(x * SPLAT(1.27323954473516f), VI); /* x / (pi/4), x >= 0 */            \
    j = (j + 1) & ~1;                                                                                     \
    VF y = __builtin_convertvector(j, VF);                                                                \
    x = ((x - y * SPLAT(0.78515625f)) - y * SPLAT(2.4187564849853515625e-4f)) -                           \
        y * SPLAT(3.77489497744594108e-8f);                                                               \
    VF z = x * x;                                                                                         \
    VF pc = ((SPLAT(2.443315711809948e-5f) * z + SPLAT(-1.388731625493765e-3f)) * z +                    \
             SPLAT(4.166664568298827e-2f)) * z * z -                                                      \
            SPLAT(0.5f) * z + SPLAT(1.0f);                                                                \
    VF ps = ((SPLAT(-1.9515295891e-4f) * z + SPLAT(8.3321608736e-3f)) * z + SPLAT(-1.6666654611e-1f)) *   \
                z * x + x;                                                                                \
    VI swap = (j & 2) != 0, sneg = (j & 4) != 0, cneg = ((j + 2) & 4) != 0;                               \
    VF sv = (VF)(((VI)pc & swap) | ((VI)ps & ~swap)), cv = (VF)(((VI)ps & swap) | ((VI)pc & ~swap));      \
    *s = (VF)((VI)sv ^ ((VI)SPLAT(-0.0f) & sneg));                                                        \
    *c = (VF)((VI)cv ^ ((VI)SPLAT(-0.0f) & cneg));                                                        \
  }
DEFINE_LOG_SINCOS(4, v4f, v4i, splat)
DEFINE_LOG_SINCOS(8, v8f, v8i, splat8)

/* W pairs a step over n pairs (n a multiple of W): z0 = r cos(2 pi u2), z1 = r sin(2 pi u2),
 * r = sqrt(-2 ln(1 - u1)) */
#define BOX_MULLER_LOOP(W, VF, SPLAT, SQRT)                \
  for (int64_t j = 0; j < n; j += W) {                     \
    VF a, b, s, c;                                         \
    memcpy(&a, u1 + j, sizeof a);                          \
    memcpy(&b, u2 + j, sizeof b);                          \
    a = SPLAT(1.0f) - a;                                   \
    log##W(&a);                                            \
    VF r = SPLAT(-2.0f) * a;                               \
    SQRT(r);                                               \
    b *= SPLAT(6.28318530717958647692f);                   \
    sincos##W(&b, &s, &c);                                 \
    c *= r, s *= r;                                        \
    memcpy(z0 + j, &c, sizeof c);                          \
    memcpy(z1 + j, &s, sizeof s);                          \
  }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SQRT4(r) ((r) = (v4f)_mm_sqrt_ps((__m128)(r)))
#define SQRT8(r) ((r) = (v8f)_mm256_sqrt_ps((__m256)(r)))
__attribute__((target("avx2"))) static void box_muller_avx2(const float *u1, const float *u2, float *z0, float *z1,
                                                           int64_t n) {
  BOX_MULLER_LOOP(8, v8f, splat8, SQRT8)
}
#define BOX_MULLER_AVX2(u1, u2, z0, z1, n) (__builtin_cpu_supports("avx2") ? (box_muller_avx2(u1, u2, z0, z1, n), 1) : 0)
#else
#define SQRT4(r) \
  for (int l = 0; l < 4; l++) (r)[l] = sqrtf((r)[l])
#define BOX_MULLER_AVX2(u1, u2, z0, z1, n) 0
#endif

/* n pairs, n a multiple of 8 (the caller pads): 8 lanes where the CPU has AVX2, else 4 */
static inline void box_muller_pairs(const float *u1, const float *u2, float *z0, float *z1, int64_t n) {
  if (BOX_MULLER_AVX2(u1, u2, z0, z1, n)) return;
  BOX_MULLER_LOOP(4, v4f, splat, SQRT4)
}

#endif
