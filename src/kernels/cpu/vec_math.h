/* Vector math for the float32 kernels, written with GCC vector extensions (plain SSE2 on
 * x86-64; 8-lane forms for functions compiled with target("avx2"); 16 AVX-512 lanes with
 * fused multiply-adds in intrinsics): exp, erf and gelu (Box-Muller's log and sin/cos: box_muller.h).  On one machine every element goes
 * through the same lanes arithmetic whatever its position, so results do not depend on how a
 * loop is split (intra-op threads) or where a row's tail falls. */
#ifndef DT_KERNELS_CPU_VEC_MATH_H
#define DT_KERNELS_CPU_VEC_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- exp --------------------------------------------------------------------------------
 * A 4-lane exp (GCC vector extensions, plain SSE2 on x86-64): Cephes' range reduction
 * x = n ln2 + r and degree-6 polynomial, 2^n built in the exponent bits; max error 1.4
 * ulp.  Below -87 the result is 0 (PyTorch would give a denormal < 1.6e-38, invisible
 * next to a softmax sum >= 1), above 88 inf; NaN stays NaN. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) v4f splat(float v) { return (v4f){v, v, v, v}; }

/* 8 lanes, for the AVX2 sweep below.  No function takes or returns a v8f by value: a call
 * between it and a default-ISA helper would disagree on how it is passed (GCC's -Wpsabi),
 * hence the macro and the pointer. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
#define splat8(v) ((v8f){(v), (v), (v), (v), (v), (v), (v), (v)})
/* 16 lanes, for target("avx512f") functions (the same rule: macros and pointers only) */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
#define splat16(v) ((v16f){(v), (v), (v), (v), (v), (v), (v), (v), (v), (v), (v), (v), (v), (v), (v), (v)})

#define DEFINE_EXP(NAME, VF, VI, SPLAT)                                                          \
  static inline __attribute__((always_inline)) void NAME(VF *px) { /* in place */                \
    VF x = *px;                                                                                  \
    VI small = x < SPLAT(-87.0f), big = x > SPLAT(88.0f), nan = x != x, out = small | big | nan; \
    VF xc = (VF)((VI)x & ~out); /* out-of-range lanes compute exp(0) and are replaced below */   \
    VF t = xc * SPLAT(1.44269504088896341f) + SPLAT(0.5f);                                       \
    VI ni = __builtin_convertvector(t, VI); /* truncates: floor for t >= 0, fix below */         \
    ni += (VI)(__builtin_convertvector(ni, VF) > t); /* -1 where truncation rounded up */        \
    VF n = __builtin_convertvector(ni, VF);                                                      \
    VF r = xc - n * SPLAT(0.693359375f) + n * SPLAT(2.12194440e-4f);                             \
    VF p = SPLAT(1.9875691500e-4f);                                                              \
    p = p * r + SPLAT(1.3981999507e-3f);                                                         \
    p = p * r + SPLAT(8.3334519073e-3f);                                                         \
    p = p * r + SPLAT(4.1665795894e-2f);                                                         \
    p = p * r + SPLAT(1.6666665459e-1f);                                                         \
    p = p * r + SPLAT(5.0000001201e-1f);                                                         \
    p = p * r * r + r + SPLAT(1.0f);                                                             \
    VF v = p * (VF)((ni + 127) << 23);                                                           \
    v = (VF)(((VI)v & ~out) | ((VI)SPLAT(INFINITY) & big)); /* underflow 0, overflow inf */      \
    *px = (VF)((VI)v | ((VI)x & nan));                        /* NaN in, NaN out */              \
  }

DEFINE_EXP(exp4, v4f, v4i, splat)
DEFINE_EXP(exp8, v8f, v8i, splat8)

/* ---- erf and gelu (4 lanes, and 8 for target("avx2") functions) --------------------------
 * erf by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7), the formula PyTorch's
 * vectorised CPU erf uses: 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p |x|), with
 * x's sign.  NaN stays NaN.  gelu(x) = 0.5 x (1 + erf(x / sqrt 2)); gelu'(x) = Phi(x) + x phi(x),
 * Phi(x) = 0.5 (1 + erf(x / sqrt 2)), phi(x) = exp(-x^2/2) / sqrt(2 pi).  The 4- and 8-lane
 * forms do the same lane arithmetic (no fused multiply-add under -std=c11): the same bits. */
#define DEFINE_GELU(W, VF, VI, SPLAT, EXP)                                                          \
  /* erf in place; *pe (when given) gets exp(-x^2), which gelu' reuses as sqrt(2 pi) phi */       \
  static inline __attribute__((always_inline)) void erf_e##W(VF *px, VF *pe) {                      \
    VF x = *px;                                                                                     \
    VI neg = x < SPLAT(0.0f);                                                                       \
    VF ax = (VF)((VI)x & ~(VI)SPLAT(-0.0f));                                                        \
    VF t = SPLAT(1.0f) / (SPLAT(1.0f) + SPLAT(0.3275911f) * ax);                                    \
    VF poly = SPLAT(1.061405429f);                                                                  \
    poly = poly * t + SPLAT(-1.453152027f);                                                         \
    poly = poly * t + SPLAT(1.421413741f);                                                          \
    poly = poly * t + SPLAT(-0.284496736f);                                                         \
    poly = poly * t + SPLAT(0.254829592f);                                                          \
    poly = poly * t;                                                                                \
    VF e = -(ax * ax);                                                                              \
    EXP(&e);                                                                                        \
    if (pe) *pe = e;                                                                                \
    VF r = SPLAT(1.0f) - poly * e;                                                                  \
    *px = (VF)((VI)r | ((VI)SPLAT(-0.0f) & neg)); /* the sign back; NaN: t, r are NaN */            \
  }                                                                                                 \
  static inline __attribute__((always_inline)) void gelu##W(VF *px) {                               \
    VF x = *px, e = x * SPLAT(0.70710678118654752440f);                                             \
    erf_e##W(&e, 0);                                                                                \
    *px = SPLAT(0.5f) * x * (SPLAT(1.0f) + e);                                                      \
  }                                                                                                 \
  /* phi(x) from erf's own exp(-(x / sqrt 2)^2): one exp, not two */                               \
  static inline __attribute__((always_inline)) void gelu_grad##W(VF *px) {                          \
    VF x = *px, e = x * SPLAT(0.70710678118654752440f), q;                                          \
    erf_e##W(&e, &q);                                                                               \
    *px = SPLAT(0.5f) * (SPLAT(1.0f) + e) + x * q * SPLAT(0.39894228040143267794f);                 \
  }
DEFINE_GELU(4, v4f, v4i, splat, exp4)
DEFINE_GELU(8, v8f, v8i, splat8, exp8)

/* ---- exp, erf and gelu in 16 AVX-512 lanes, with fused multiply-adds ---------------------
 * The formulas above, each multiply-add of the polynomials and range reductions fused (one
 * rounding: a little more accurate, and fewer instructions).  A CPU with AVX-512 runs every
 * element through these 16 lanes, tails padded (VEC_MAP below), so on one machine an element
 * gets the same bits wherever it sits; a CPU without AVX-512 uses the 8/4-lane forms above.
 * Written with intrinsics because GCC 12 turns the 16-lane vector-extension comparisons into
 * a scalar loop per lane. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX512_FN static inline __attribute__((always_inline, target("avx512f,avx512dq,avx512bw,avx512vl")))
#define S16 _mm512_set1_ps
#define FMA16 _mm512_fmadd_ps
/* e^r for |r| <= ln2 / 2: Cephes' degree-6 polynomial, each step one fused multiply-add */
AVX512_FN __m512 exp_poly16(__m512 r) {
  __m512 p = S16(1.9875691500e-4f);
  p = FMA16(p, r, S16(1.3981999507e-3f));
  p = FMA16(p, r, S16(8.3334519073e-3f));
  p = FMA16(p, r, S16(4.1665795894e-2f));
  p = FMA16(p, r, S16(1.6666665459e-1f));
  p = FMA16(p, r, S16(5.0000001201e-1f));
  p = _mm512_add_ps(FMA16(_mm512_mul_ps(p, r), r, r), S16(1.0f));
  return p;
}
AVX512_FN __m512 exp16v(__m512 x) {
  __mmask16 small = _mm512_cmp_ps_mask(x, S16(-87.0f), _CMP_LT_OQ), big = _mm512_cmp_ps_mask(x, S16(88.0f), _CMP_GT_OQ);
  __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), out = small | big | nan;
  __m512 xc = _mm512_maskz_mov_ps((__mmask16)~out, x);
  __m512 t = FMA16(xc, S16(1.44269504088896341f), S16(0.5f));
  __m512i ni = _mm512_cvttps_epi32(t);
  ni = _mm512_mask_sub_epi32(ni, _mm512_cmp_ps_mask(_mm512_cvtepi32_ps(ni), t, _CMP_GT_OQ), ni, _mm512_set1_epi32(1));
  __m512 n = _mm512_cvtepi32_ps(ni);
  __m512 r = FMA16(n, S16(2.12194440e-4f), _mm512_fnmadd_ps(n, S16(0.693359375f), xc));
  __m512 p = exp_poly16(r);
  __m512 v = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(ni, _mm512_set1_epi32(127)), 23)));
  v = _mm512_maskz_mov_ps((__mmask16)~out, v);
  v = _mm512_mask_mov_ps(v, big, S16(INFINITY));
  return _mm512_mask_mov_ps(v, nan, x);
}
/* exp(-s) for s >= 0 or NaN, erf's: exp16v's reduction and polynomial with no range masks.
 * s is clamped to 104 (exp(-104) is below the smallest denormal) and 2^n applied by scalef,
 * which underflows gradually to 0 by itself; n = round(-s log2 e) to nearest (|r| <= ln2/2 as
 * Cephes' floor(. + 0.5)).  A NaN s gives a finite value here: erf's other terms carry the NaN. */
AVX512_FN __m512 exp_neg16v(__m512 s) {
  __m512 xc = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_min_ps(s, S16(104.0f)));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, S16(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = FMA16(n, S16(2.12194440e-4f), _mm512_fnmadd_ps(n, S16(0.693359375f), xc));
  __m512 p = exp_poly16(r);
  return _mm512_scalef_ps(p, n);
}
/* erf; *pe gets its exp(-x^2) (gelu' reuses it as sqrt(2 pi) phi: one exp, not two).
 * 1 / (1 + p |x|) by rcp14 and one Newton step (about one float ulp, under the formula's
 * own 1.5e-7), not a division: the division was the sweep's slowest instruction. */
AVX512_FN __m512 erf16v(__m512 x, __m512 *pe) {
  __mmask16 neg = _mm512_cmp_ps_mask(x, S16(0.0f), _CMP_LT_OQ);
  __m512 ax = _mm512_min_ps(S16(1e4f), _mm512_abs_ps(x)); /* erf is 1 beyond; inf would make t NaN; NaN stays */
  __m512 d = FMA16(S16(0.3275911f), ax, S16(1.0f)), t0 = _mm512_rcp14_ps(d);
  __m512 t = FMA16(t0, _mm512_fnmadd_ps(d, t0, S16(1.0f)), t0);
  __m512 poly = S16(1.061405429f);
  poly = FMA16(poly, t, S16(-1.453152027f));
  poly = FMA16(poly, t, S16(1.421413741f));
  poly = FMA16(poly, t, S16(-0.284496736f));
  poly = FMA16(poly, t, S16(0.254829592f));
  poly = _mm512_mul_ps(poly, t);
  __m512 e = exp_neg16v(_mm512_mul_ps(ax, ax));
  *pe = e;
  __m512 r = _mm512_fnmadd_ps(poly, e, S16(1.0f));
  return _mm512_mask_or_ps(r, neg, r, S16(-0.0f));
}
AVX512_FN void gelu16(v16f *px) {
  __m512 q, x = (__m512)*px, e = erf16v(_mm512_mul_ps(x, S16(0.70710678118654752440f)), &q);
  *px = (v16f)_mm512_mul_ps(_mm512_mul_ps(S16(0.5f), x), _mm512_add_ps(S16(1.0f), e));
}
AVX512_FN void gelu_grad16(v16f *px) {
  __m512 q, x = (__m512)*px, e = erf16v(_mm512_mul_ps(x, S16(0.70710678118654752440f)), &q);
  *px = (v16f)FMA16(_mm512_mul_ps(x, q), S16(0.39894228040143267794f),
                    _mm512_mul_ps(S16(0.5f), _mm512_add_ps(S16(1.0f), e)));
}
AVX512_FN void exp16(v16f *px) { *px = (v16f)exp16v((__m512)*px); }
#undef S16
#undef FMA16
#endif

/* f over n floats, y[i] = f(x[i]) * (g ? g[i] : 1) (y may be x or g): where the CPU has
 * AVX-512, all in 16 lanes (F16, with fused multiply-adds) and the tail padded into one more
 * vector; elsewhere 8 lanes where it has AVX2, then 4, the tail padded (F4 and F8 compute
 * alike, no FMA).  So on one machine each element gets the same arithmetic wherever it sits
 * (the product with g is one float multiply in any width).  The gradient form is the fused
 * backward's grad * f'(x) in the same sweep. */
#define VEC_MAP_BODY(VF, W, F)                                                       \
  int64_t i = 0;                                                                     \
  if (g)                                                                             \
    for (; i + W <= n; i += W) {                                                     \
      VF v, t;                                                                       \
      memcpy(&v, x + i, sizeof v);                                                   \
      memcpy(&t, g + i, sizeof t);                                                   \
      F(&v);                                                                         \
      v *= t;                                                                        \
      memcpy(y + i, &v, sizeof v);                                                   \
    }                                                                                \
  else                                                                               \
    for (; i + W <= n; i += W) {                                                     \
      VF v;                                                                          \
      memcpy(&v, x + i, sizeof v);                                                   \
      F(&v);                                                                         \
      memcpy(y + i, &v, sizeof v);                                                   \
    }
#if defined(__x86_64__) && defined(__GNUC__)
#define DEFINE_VEC_MAP_WIDE(NAME, F8, F16)                                                             \
  __attribute__((target("avx2"))) static int64_t NAME##_avx2(const float *x, const float *g, float *y,  \
                                                              int64_t n) {                            \
    VEC_MAP_BODY(v8f, 8, F8)                                                                          \
    return i;                                                                                         \
  }                                                                                                   \
  /* every element, the tail padded into one more vector */                                           \
  __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static void NAME##_avx512(             \
      const float *x, const float *g, float *y, int64_t n) {                                          \
    VEC_MAP_BODY(v16f, 16, F16)                                                                       \
    if (i < n) {                                                                                      \
      v16f v = splat16(0.0f), t = splat16(0.0f);                                                      \
      memcpy(&v, x + i, sizeof(float) * (size_t)(n - i));                                             \
      F16(&v);                                                                                        \
      if (g) memcpy(&t, g + i, sizeof(float) * (size_t)(n - i)), v *= t;                              \
      memcpy(y + i, &v, sizeof(float) * (size_t)(n - i));                                             \
    }                                                                                                 \
  }
/* AVX-512 CPUs: all of it in 16 lanes (true); else how many leading elements AVX2 took */
#define VEC_MAP_ALL16(NAME, x, g, y, n) (__builtin_cpu_supports("avx512f") ? (NAME##_avx512(x, g, y, n), 1) : 0)
#define VEC_MAP_WIDE_PART(NAME, x, g, y, n) (n >= 8 && __builtin_cpu_supports("avx2") ? NAME##_avx2(x, g, y, n) : 0)
#else
#define DEFINE_VEC_MAP_WIDE(NAME, F8, F16)
#define VEC_MAP_ALL16(NAME, x, g, y, n) 0
#define VEC_MAP_WIDE_PART(NAME, x, g, y, n) 0
#endif
#define DEFINE_VEC_MAP(NAME, F4, F8, F16)                                            \
  DEFINE_VEC_MAP_WIDE(NAME, F8, F16)                                                 \
  static inline void NAME(const float *x, const float *g, float *y, int64_t n) {     \
    if (VEC_MAP_ALL16(NAME, x, g, y, n)) return;                                     \
    int64_t done = VEC_MAP_WIDE_PART(NAME, x, g, y, n);                              \
    x += done, y += done, g = g ? g + done : 0, n -= done;                           \
    VEC_MAP_BODY(v4f, 4, F4)                                                         \
    if (i < n) {                                                                     \
      v4f v = splat(0);                                                              \
      for (int64_t j = 0; i + j < n; j++) v[j] = x[i + j];                           \
      F4(&v);                                                                        \
      for (int64_t j = 0; i + j < n; j++) y[i + j] = g ? v[j] * g[i + j] : v[j];     \
    }                                                                                \
  }

#endif
