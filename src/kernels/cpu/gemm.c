#include "config.h"
#include "kernels/cpu/gemm.h"
#include "base/thread_pool.h"

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

/* One thread's GEMM: the BLAS (kept at one thread of its own, kernels/cpu/cpu_threads.c) or
 * the fallback. */
static void serial_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                       int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
#ifdef DT_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
              (int)k, alpha, a, (int)ld(lda), b, (int)ld(ldb), beta, c, (int)ld(ldc));
#else
  dt_gemm_f32_fallback(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

static void serial_f64(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                       int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
#ifdef DT_HAVE_CBLAS
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
              (int)k, alpha, a, (int)ld(lda), b, (int)ld(ldb), beta, c, (int)ld(ldc));
#else
  dt_gemm_f64_fallback(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

/* The intra-op threads split C into blocks of whole rows (or of whole columns when C is wider
 * than tall: each block repacks the operand that is not split, so the smaller one is repacked),
 * each block one single-threaded BLAS call.  The blocks follow from the shape alone and are never
 * merged (a BLAS kernel may round an element differently when a call's m or n changes, e.g. in
 * its tail kernels), so the bits do not depend on the thread count.  The rank's pool is the only
 * set of threads: the BLAS's own workers would share the cores with the pool's and spin between
 * calls while the element-wise kernels want the cores. */
#define GEMM_MIN_BLOCK (1 << 18) /* multiply-adds below which a block is not worth a call */
#define GEMM_MAX_BLOCKS 8        /* enough to balance 2-4 threads on a busy machine */
/* rows a block wants: each call repacks the other operand's panels, which costs about
 * 4 / rows of the product on one thread (measured: 15-23% at 64 rows, K = 1024-2048) */
#define GEMM_GOOD_BLOCK 256
typedef struct {
  int trans_a, trans_b, split_rows;
  int64_t m, n, k, block, lda, ldb, ldc;
  double alpha, beta;
  const void *a, *b;
  void *c;
} gemm_job;

#define GEMM_PIECE(NAME, T, SERIAL)                                                                            \
  static void NAME(int64_t b0, int64_t b1, void *vj) {                                                         \
    const gemm_job *j = vj;                                                                                    \
    const T *a = j->a, *b = j->b;                                                                              \
    T *c = j->c;                                                                                               \
    for (int64_t blk = b0; blk < b1; blk++) {                                                                  \
      int64_t lo = blk * j->block, len = j->split_rows ? j->m : j->n;                                          \
      int64_t cnt = len - lo < j->block ? len - lo : j->block;                                                 \
      if (j->split_rows)                                                                                       \
        SERIAL(j->trans_a, j->trans_b, cnt, j->n, j->k, (T)j->alpha, a + (j->trans_a ? lo : lo * j->lda),      \
               j->lda, b, j->ldb, (T)j->beta, c + lo * j->ldc, j->ldc);                                        \
      else                                                                                                     \
        SERIAL(j->trans_a, j->trans_b, j->m, cnt, j->k, (T)j->alpha, a, j->lda,                                \
               b + (j->trans_b ? lo * j->ldb : lo), j->ldb, (T)j->beta, c + lo, j->ldc);                       \
    }                                                                                                          \
  }
GEMM_PIECE(piece_f32, float, serial_f32)
GEMM_PIECE(piece_f64, double, serial_f64)

/* Runs the GEMM as its blocks on the calling rank's threads; false when it is one block (the
 * caller makes one call). */
static int split_gemm(gemm_job *j, dt_parallel_fn piece) {
  j->split_rows = j->m >= j->n;
  int64_t len = j->split_rows ? j->m : j->n, other = j->split_rows ? j->n : j->m;
  double row_macs = (double)other * (double)j->k;
  if (row_macs <= 0 || (double)len * row_macs < 2.0 * GEMM_MIN_BLOCK) return 0;
  /* multiples of 64 rows (the kernels' panels fill), GEMM_GOOD_BLOCK or more and at most
   * GEMM_MAX_BLOCKS of them; halves when that leaves one block (a second thread pays more than
   * the repacking costs) */
  int64_t block = (len + GEMM_MAX_BLOCKS - 1) / GEMM_MAX_BLOCKS;
  if (block < GEMM_GOOD_BLOCK) block = GEMM_GOOD_BLOCK;
  if (block >= len) block = (len + 1) / 2;
  if ((double)block * row_macs < GEMM_MIN_BLOCK) block = (int64_t)(GEMM_MIN_BLOCK / row_macs) + 1;
  block = (block + 63) / 64 * 64;
  int64_t blocks = (len + block - 1) / block;
  if (blocks < 2) return 0;
  j->block = block;
  dt_parallel_for(blocks, 1, piece, j);
  return 1;
}

void dt_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  gemm_job j = {.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
                .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c};
  if (!split_gemm(&j, piece_f32)) serial_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void dt_gemm_f64(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                 int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  gemm_job j = {.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
                .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c};
  if (!split_gemm(&j, piece_f64)) serial_f64(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
