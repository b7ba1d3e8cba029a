#include "config.h"
#include "kernels/cpu/gemm.h"

#ifdef DT_HAVE_CBLAS
#include <cblas.h>
#endif

/* The fallback: i-k-j loop order so the inner loop streams rows of B and C; accumulation
 * in the element type (f64 for f64), as BLAS does. */
#define DEFINE_FALLBACK(NAME, T)                                                                         \
  void NAME(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T *a, int64_t lda, \
            const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {                                        \
    for (int64_t i = 0; i < m; i++) {                                                                    \
      T *ci = c + i * ldc;                                                                               \
      for (int64_t j = 0; j < n; j++) ci[j] = beta == 0 ? 0 : beta * ci[j];                              \
      for (int64_t p = 0; p < k; p++) {                                                                  \
        T aip = alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]);                                     \
        if (aip == 0) continue;                                                                          \
        if (trans_b)                                                                                     \
          for (int64_t j = 0; j < n; j++) ci[j] += aip * b[j * ldb + p];                                 \
        else {                                                                                           \
          const T *bp = b + p * ldb;                                                                     \
          for (int64_t j = 0; j < n; j++) ci[j] += aip * bp[j];                                          \
        }                                                                                                \
      }                                                                                                  \
    }                                                                                                    \
  }

DEFINE_FALLBACK(dt_gemm_f32_fallback, float)
DEFINE_FALLBACK(dt_gemm_f64_fallback, double)

#ifdef DT_HAVE_CBLAS
/* BLAS rejects leading dimensions below 1 even when a dimension is empty. */
static int64_t ld(int64_t v) { return v > 0 ? v : 1; }
#endif

void dt_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0) return;
#ifdef DT_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
              (int)k, alpha, a, (int)ld(lda), b, (int)ld(ldb), beta, c, (int)ld(ldc));
#else
  dt_gemm_f32_fallback(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

void dt_gemm_f64(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                 int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
  if (m == 0 || n == 0) return;
#ifdef DT_HAVE_CBLAS
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
              (int)k, alpha, a, (int)ld(lda), b, (int)ld(ldb), beta, c, (int)ld(ldc));
#else
  dt_gemm_f64_fallback(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}
