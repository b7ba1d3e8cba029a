/* layer_norm's row kernels (src/kernels/cpu/norm_rows.h) in the default ISA and under AVX2
 * give the same bits: forward and backward, float and double, with and without weight and
 * bias, layer_norm and rms_norm, widths around the vector and 256-element chunk edges. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctest.h"

#include "kernels/cpu/norm_forms.h"

static uint64_t seed = 12345;
static double rnd(void) { /* xorshift, uniform in [-2, 2) plus an offset: layer_norm's centring matters */
  seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
  return (double)(seed >> 11) / 9007199254740992.0 * 4 - 2 + 0.75;
}

/* forward and backward of `rows` rows of n in both forms; 1 when every output matches bitwise */
#define DEFINE_COMPARE(NAME, T, SUF_A, SUF_B)                                                        \
  static int NAME(int64_t rows, int64_t n, int with_w, int with_b, int rms) {                        \
    size_t tot = (size_t)(rows * n), nn = (size_t)(n ? n : 1);                                      \
    T *x = malloc(sizeof(T) * (tot + 1)), *g = malloc(sizeof(T) * (tot + 1)), *w = malloc(sizeof(T) * nn); \
    T *b = malloc(sizeof(T) * nn), *y[2], *dx[2], *dw[2], *db[2];                                    \
    for (size_t i = 0; i < tot; i++) x[i] = (T)rnd(), g[i] = (T)rnd();                              \
    for (size_t i = 0; i < (size_t)n; i++) w[i] = (T)rnd(), b[i] = (T)rnd();                        \
    for (int k = 0; k < 2; k++) {                                                                    \
      y[k] = malloc(sizeof(T) * (tot + 1)), dx[k] = malloc(sizeof(T) * (tot + 1));                   \
      dw[k] = calloc(nn, sizeof(T)), db[k] = calloc(nn, sizeof(T));                                  \
    }                                                                                                \
    const T *wp = with_w ? w : NULL, *bp = with_b ? b : NULL;                                        \
    norm_rows##SUF_A(x, wp, bp, y[0], rows, n, 1e-5, rms);                                           \
    norm_rows##SUF_B(x, wp, bp, y[1], rows, n, 1e-5, rms);                                           \
    norm_backward_rows##SUF_A(g, x, wp, dx[0], dw[0], db[0], rows, n, 1e-5, rms);                    \
    norm_backward_rows##SUF_B(g, x, wp, dx[1], dw[1], db[1], rows, n, 1e-5, rms);                    \
    int same = memcmp(y[0], y[1], sizeof(T) * tot) == 0 && memcmp(dx[0], dx[1], sizeof(T) * tot) == 0 && \
               memcmp(dw[0], dw[1], sizeof(T) * (size_t)n) == 0 && memcmp(db[0], db[1], sizeof(T) * (size_t)n) == 0; \
    int finite = 1;                                                                                  \
    for (size_t i = 0; i < tot; i++) finite &= isfinite(y[0][i]) && isfinite(dx[0][i]);              \
    free(x), free(g), free(w), free(b);                                                              \
    for (int k = 0; k < 2; k++) free(y[k]), free(dx[k]), free(dw[k]), free(db[k]);                   \
    return same && finite;                                                                           \
  }

#ifdef DT_NORM_HAVE_AVX2_FORM
DEFINE_COMPARE(compare_f32, float, _f32, _f32_avx2)
DEFINE_COMPARE(compare_f64, double, _f64, _f64_avx2)
#endif

static void test_norm_rows_same_bits_in_every_isa(void) {
#ifdef DT_NORM_HAVE_AVX2_FORM
  if (!norm_isa_avx2()) return;
  const int64_t widths[] = {1, 3, 4, 7, 8, 9, 15, 16, 31, 32, 33, 40, 63, 64, 100, 255, 256, 257, 300, 520, 1024};
  const int64_t rows[] = {1, 5, 8, 9, 17};
  for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
      for (int v = 0; v < 6; v++) {
        int with_w = v & 1, with_b = (v >> 1) & 1, rms = v >= 4;
        if (rms && with_b) continue;
        int ok32 = compare_f32(rows[ri], widths[wi], with_w, with_b, rms);
        int ok64 = compare_f64(rows[ri], widths[wi], with_w, with_b, rms);
        if (!ok32 || !ok64)
          printf("  rows %lld n %lld w %d b %d rms %d: f32 %s, f64 %s\n", (long long)rows[ri], (long long)widths[wi],
                 with_w, with_b, rms, ok32 ? "same" : "DIFFERENT", ok64 ? "same" : "DIFFERENT");
        CHECK(ok32 && ok64);
      }
#endif
}

int main(void) {
  TEST_CASE(test_norm_rows_same_bits_in_every_isa);
  return CTEST_END();
}
