/* Row-major GEMM for the kernels: C = alpha * op(A) @ op(B) + beta * C, with op = transpose
 * when trans_* is set.  Uses the configured CBLAS, or a blocked C loop when built without. */
#ifndef DT_KERNELS_CPU_GEMM_H
#define DT_KERNELS_CPU_GEMM_H

#include <stdint.h>

void dt_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void dt_gemm_f64(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                 int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);
/* The plain C kernels behind the fallback, callable directly so tests cover them in BLAS builds. */
void dt_gemm_f32_fallback(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                          int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void dt_gemm_f64_fallback(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                          int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);

#endif
