/* The C fallback GEMM against the configured one (CBLAS when built with it), and the
 * reduction/softmax/matmul kernels on strided (transposed) views built with view_of. */
#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/gemm.h"
#include "kernels/local_op.h"
#include "tensor/tensor.h"
#include "ctest.h"

static double rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return ((*s >> 8) & 0xffff) / 32768.0 - 1.0;
}

static void test_fallback_matches_blas_f32(void) {
  unsigned seed = 7;
  const int64_t m = 37, n = 29, k = 23;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      float a[64 * 64], b[64 * 64], c1[64 * 64], c2[64 * 64];
      for (int i = 0; i < 64 * 64; i++) a[i] = (float)rnd(&seed), b[i] = (float)rnd(&seed);
      for (int i = 0; i < 64 * 64; i++) c1[i] = c2[i] = (float)rnd(&seed);
      int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
      dt_gemm_f32(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, c1, ldc);
      dt_gemm_f32_fallback(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, c2, ldc);
      double worst = 0;
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) worst = fmax(worst, fabs((double)c1[i * ldc + j] - c2[i * ldc + j]));
      CHECK(worst < 1e-4);
    }
}

static void test_fallback_matches_blas_f64(void) {
  unsigned seed = 11;
  const int64_t m = 17, n = 31, k = 40;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      double a[64 * 64], b[64 * 64], c1[64 * 64], c2[64 * 64];
      for (int i = 0; i < 64 * 64; i++) a[i] = rnd(&seed), b[i] = rnd(&seed);
      for (int i = 0; i < 64 * 64; i++) c1[i] = c2[i] = rnd(&seed);
      int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
      dt_gemm_f64(ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c1, ldc);
      for (int i = 0; i < 64 * 64; i++) c2[i] = NAN; /* beta = 0 must not read C */
      dt_gemm_f64_fallback(ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c2, ldc);
      double worst = 0;
      for (int64_t i = 0; i < m * n; i++) worst = fmax(worst, fabs(c1[i] - c2[i]));
      CHECK(worst < 1e-12);
    }
}

/* GEMMs large enough to be cut into blocks of rows (tall C) or columns (wide C), on 1, 2 and 3
 * threads, with padded leading dims and beta != 0: the fallback's values, and the same bits
 * on every thread count. */
static void test_blocks_on_threads(void) {
  static const int64_t shapes[][3] = {{300, 70, 130}, {70, 300, 130}, {129, 1000, 40}, {1000, 17, 90}};
  int saved = dt_get_num_threads();
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        unsigned seed = 5 + (unsigned)s;
        int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
        size_t na = (size_t)((ta ? k : m) * lda), nb = (size_t)((tb ? n : k) * ldb), nc = (size_t)(m * ldc);
        double *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c0 = malloc(nc * sizeof *c0);
        double *ref = malloc(nc * sizeof *ref), *c = malloc(nc * sizeof *c), *first = malloc(nc * sizeof *first);
        float *af = malloc(na * sizeof *af), *bf = malloc(nb * sizeof *bf), *cf = malloc(nc * sizeof *cf);
        float *firstf = malloc(nc * sizeof *firstf);
        for (size_t i = 0; i < na; i++) af[i] = (float)(a[i] = rnd(&seed));
        for (size_t i = 0; i < nb; i++) bf[i] = (float)(b[i] = rnd(&seed));
        for (size_t i = 0; i < nc; i++) ref[i] = c0[i] = rnd(&seed);
        dt_gemm_f64_fallback(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 2.0, ref, ldc);
        for (int threads = 1; threads <= 3; threads++) {
          dt_set_num_threads(threads);
          for (size_t i = 0; i < nc; i++) c[i] = c0[i], cf[i] = (float)c0[i];
          dt_gemm_f64(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 2.0, c, ldc);
          dt_gemm_f32(ta, tb, m, n, k, 0.5f, af, lda, bf, ldb, 2.0f, cf, ldc);
          double worst = 0, worstf = 0;
          int same = 1;
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
              size_t at = (size_t)(i * ldc + j);
              worst = fmax(worst, fabs(c[at] - ref[at]));
              worstf = fmax(worstf, fabs((double)cf[at] - ref[at]));
              if (threads > 1 && (c[at] != first[at] || cf[at] != firstf[at])) same = 0;
            }
          for (size_t i = 0; i < nc; i += (size_t)ldc) CHECK(c[i + (size_t)n] == c0[i + (size_t)n]); /* padding untouched */
          CHECK(worst < 1e-12 * (double)k);
          CHECK(worstf < 1e-4 * (double)k);
          CHECK(same);
          if (threads == 1)
            for (size_t i = 0; i < nc; i++) first[i] = c[i], firstf[i] = cf[i];
        }
        free(a), free(b), free(c0), free(ref), free(c), free(first), free(af), free(bf), free(cf), free(firstf);
      }
  }
  dt_set_num_threads(saved);
}

/* A [rows, cols] float64 tensor holding its transpose's storage: data laid out [cols, rows]. */
static dt_tensor *transposed(int64_t rows, int64_t cols, unsigned *seed, dt_tensor **base) {
  int64_t shape[2] = {cols, rows};
  *base = dt_tensor_empty(DT_FLOAT64, 2, shape, DT_CPU);
  double *p = dt_tensor_data(*base);
  for (int64_t i = 0; i < rows * cols; i++) p[i] = rnd(seed);
  int64_t vs[2] = {rows, cols}, st[2] = {1, rows};
  return dt_tensor_view_of(*base, 2, vs, st, 0);
}

static double at(const dt_tensor *t, int64_t i, int64_t j) {
  return dt_load_f64((const char *)dt_tensor_data(t) + (i * t->stride[0] + j * t->stride[1]) * 8, DT_FLOAT64);
}

static void test_matmul_transposed_views(void) {
  unsigned seed = 3;
  dt_tensor *ba, *bb;
  dt_tensor *a = transposed(5, 4, &seed, &ba), *b = transposed(4, 3, &seed, &bb);
  dt_tensor *in[2] = {a, b}, *out[2] = {0};
  dt_op_args args = {.in = in, .nin = 2};
  CHECK(dt_op_call(DT_OP_MATMUL, &args, out) == DT_OK);
  double worst = 0;
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 3; j++) {
      double s = 0;
      for (int q = 0; q < 4; q++) s += at(a, i, q) * at(b, q, j);
      worst = fmax(worst, fabs(s - at(out[0], i, j)));
    }
  CHECK(worst < 1e-12);
  dt_tensor_release(out[0]);
  dt_tensor_release(a), dt_tensor_release(b), dt_tensor_release(ba), dt_tensor_release(bb);
}

/* A stride-0 (expanded) right operand: no BLAS layout fits, so it is copied once; the
 * left operand's batch folds into one GEMM against it. */
static void test_matmul_expanded_operand(void) {
  int64_t vs[1] = {5}, as[3] = {2, 3, 4};
  dt_tensor *v = dt_tensor_empty(DT_FLOAT32, 1, vs, DT_CPU), *a = dt_tensor_empty(DT_FLOAT32, 3, as, DT_CPU);
  float *pv = dt_tensor_data(v), *pa = dt_tensor_data(a);
  for (int j = 0; j < 5; j++) pv[j] = (float)j - 1.5f;
  for (int i = 0; i < 24; i++) pa[i] = (float)(i % 7) - 3.0f;
  int64_t bs[2] = {4, 5}, bst[2] = {0, 1};
  dt_tensor *b = dt_tensor_view_of(v, 2, bs, bst, 0); /* every row is v */
  dt_tensor *in[2] = {a, b}, *out[2] = {0};
  dt_op_args args = {.in = in, .nin = 2};
  CHECK(dt_op_call(DT_OP_MATMUL, &args, out) == DT_OK);
  CHECK(out[0]->ndim == 3 && out[0]->shape[0] == 2 && out[0]->shape[1] == 3 && out[0]->shape[2] == 5);
  const float *po = dt_tensor_data(out[0]);
  for (int r = 0; r < 6; r++) {
    float rowsum = 0;
    for (int q = 0; q < 4; q++) rowsum += pa[r * 4 + q];
    for (int j = 0; j < 5; j++) CHECK(fabsf(po[r * 5 + j] - rowsum * pv[j]) < 1e-5f);
  }
  dt_tensor_release(out[0]);
  dt_tensor_release(b), dt_tensor_release(a), dt_tensor_release(v);
}

static void test_reduce_and_softmax_transposed(void) {
  unsigned seed = 5;
  dt_tensor *base, *x = transposed(3, 4, &seed, &base); /* x[i][j], rows have stride 1 */
  dt_tensor *in[1] = {x}, *out[2] = {0};
  dt_op_args args = {.in = in, .nin = 1, .ints = {1}, .nints = 1};
  CHECK(dt_op_call(DT_OP_SUM, &args, out) == DT_OK); /* sum over j: strided inner run */
  for (int i = 0; i < 3; i++) {
    double s = 0;
    for (int j = 0; j < 4; j++) s += at(x, i, j);
    CHECK(fabs(((double *)dt_tensor_data(out[0]))[i] - s) < 1e-12);
  }
  dt_tensor_release(out[0]);
  CHECK(dt_op_call(DT_OP_SOFTMAX, &args, out) == DT_OK);
  for (int i = 0; i < 3; i++) {
    double z = 0;
    for (int j = 0; j < 4; j++) z += exp(at(x, i, j));
    for (int j = 0; j < 4; j++) CHECK(fabs(at(out[0], i, j) - exp(at(x, i, j)) / z) < 1e-12);
  }
  dt_tensor_release(out[0]);
  dt_tensor_release(x), dt_tensor_release(base);
}

int main(void) {
  TEST_CASE(test_fallback_matches_blas_f32);
  TEST_CASE(test_fallback_matches_blas_f64);
  TEST_CASE(test_blocks_on_threads);
  TEST_CASE(test_matmul_transposed_views);
  TEST_CASE(test_matmul_expanded_operand);
  TEST_CASE(test_reduce_and_softmax_transposed);
  return CTEST_END();
}
