/* Float32 sums into double lanes (orders: sum_lanes.h), one body per vector width. */
#include "kernels/cpu/sum_lanes.h"

#include <string.h>

/* the tail (fewer than 32 elements, i mod 32 = k) into the lanes, then the fold */
static double finish(double *p, const float *x, int64_t n) {
  for (int64_t k = 0; k < n; k++) p[k] += (double)x[k];
  for (int w = DT_SUM_LANES / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; k++) p[k] += p[k + w];
  return p[0];
}

static double sum_plain(const float *x, int64_t n) {
  double p[DT_SUM_LANES] = {0};
  int64_t i = 0;
  for (; i + DT_SUM_LANES <= n; i += DT_SUM_LANES)
    for (int k = 0; k < DT_SUM_LANES; k++) p[k] += (double)x[i + k];
  return finish(p, x + i, n - i);
}

/* rows[0..nrows) into the column sums, element by element (the plain body and every tail) */
static void add_rows_plain(double *acc, const float *const *rows, int nrows, int64_t i, int64_t n) {
  for (; i < n; i++) {
    double s = acc[i];
    for (int k = 0; k < nrows; k++) s += (double)rows[k][i];
    acc[i] = s;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* one body per width: L doubles a step (P: the intrinsics' prefix, VD: the double vector,
 * LOADF: the load of L floats), the tail element by element */
#define DEFINE_ADD_ROWS(NAME, TARGET, L, P, VD, LOADF)                                                  \
  __attribute__((target(TARGET))) static void NAME(double *acc, const float *const *rows, int nrows,    \
                                                   int64_t n) {                                         \
    int64_t i = 0;                                                                                      \
    for (; i + L <= n; i += L) {                                                                        \
      VD s = P##_loadu_pd(acc + i);                                                                     \
      for (int k = 0; k < nrows; k++) s = P##_add_pd(s, P##_cvtps_pd(LOADF(rows[k] + i)));              \
      P##_storeu_pd(acc + i, s);                                                                        \
    }                                                                                                   \
    add_rows_plain(acc, rows, nrows, i, n);                                                             \
  }
DEFINE_ADD_ROWS(add_rows_avx512, "avx512f", 8, _mm512, __m512d, _mm256_loadu_ps)
DEFINE_ADD_ROWS(add_rows_avx2, "avx2", 4, _mm256, __m256d, _mm_loadu_ps)

int dt_add_rows_f32_width(double *acc, const float *const *rows, int nrows, int64_t n, int width) {
  if (width >= 16 && __builtin_cpu_supports("avx512f")) return add_rows_avx512(acc, rows, nrows, n), 16;
  if (width >= 8 && __builtin_cpu_supports("avx2")) return add_rows_avx2(acc, rows, nrows, n), 8;
  return add_rows_plain(acc, rows, nrows, 0, n), 1;
}

/* lanes 8j .. 8j+7 in register a[j] */
__attribute__((target("avx512f"))) static double sum_avx512(const float *x, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + DT_SUM_LANES <= n; i += DT_SUM_LANES) {
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
    a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 16)));
    a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 24)));
  }
  double p[DT_SUM_LANES];
  _mm512_storeu_pd(p, a0), _mm512_storeu_pd(p + 8, a1), _mm512_storeu_pd(p + 16, a2), _mm512_storeu_pd(p + 24, a3);
  return finish(p, x + i, n - i);
}

/* lanes 4j .. 4j+3 in register a[j] */
__attribute__((target("avx2"))) static double sum_avx2(const float *x, int64_t n) {
  __m256d a[8];
  for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + DT_SUM_LANES <= n; i += DT_SUM_LANES)
    for (int j = 0; j < 8; j++) a[j] = _mm256_add_pd(a[j], _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * j)));
  double p[DT_SUM_LANES];
  for (int j = 0; j < 8; j++) _mm256_storeu_pd(p + 4 * j, a[j]);
  return finish(p, x + i, n - i);
}

int dt_sum_f32_width(const float *x, int64_t n, int width, double *sum) {
  if (width >= 16 && __builtin_cpu_supports("avx512f")) return *sum = sum_avx512(x, n), 16;
  if (width >= 8 && __builtin_cpu_supports("avx2")) return *sum = sum_avx2(x, n), 8;
  return *sum = sum_plain(x, n), 1;
}
#else
int dt_add_rows_f32_width(double *acc, const float *const *rows, int nrows, int64_t n, int width) {
  (void)width;
  return add_rows_plain(acc, rows, nrows, 0, n), 1;
}

int dt_sum_f32_width(const float *x, int64_t n, int width, double *sum) {
  (void)width;
  return *sum = sum_plain(x, n), 1;
}
#endif

double dt_sum_f32(const float *x, int64_t n) {
  double s;
  dt_sum_f32_width(x, n, 16, &s);
  return s;
}

void dt_add_rows_f32(double *acc, const float *const *rows, int nrows, int64_t n) {
  dt_add_rows_f32_width(acc, rows, nrows, n, 16);
}
