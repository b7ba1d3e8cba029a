/* The float32 kernels with one body per vector width (plain C, AVX2, AVX-512) give the same
 * bits on every body: the sum's 32 double lanes (against the order written out here), the
 * column sums of a sum over leading dims, and Box-Muller in 4 and 8 lanes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/box_muller.h"
#include "kernels/cpu/sum_lanes.h"
#include "ctest.h"

static const int WIDTHS[] = {1, 8, 16};

/* values of every magnitude and sign, so that a different order would round differently */
static void fill(float *x, int64_t n, unsigned seed) {
  srand(seed);
  for (int64_t i = 0; i < n; i++) x[i] = (float)((rand() / (double)RAND_MAX - 0.5) * pow(10.0, rand() % 12 - 6));
}

/* sum_lanes.h's order, element by element */
static double sum_reference(const float *x, int64_t n) {
  double p[DT_SUM_LANES] = {0};
  for (int64_t i = 0; i < n; i++) p[i % DT_SUM_LANES] += (double)x[i];
  for (int w = DT_SUM_LANES / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; k++) p[k] += p[k + w];
  return p[0];
}

static void test_sum_same_bits_every_width(void) {
  static const int64_t sizes[] = {0, 1, 7, 31, 32, 33, 63, 64, 65, 100, 1000, 4099, 65536};
  float *x = malloc(sizeof(float) * 65536 + 64);
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (int off = 0; off < 3; off++) { /* unaligned starts too */
      int64_t n = sizes[s];
      fill(x, n + off, (unsigned)(s * 3 + off));
      double want = sum_reference(x + off, n);
      for (int w = 0; w < 3; w++) {
        double got = -1;
        dt_sum_f32_width(x + off, n, WIDTHS[w], &got);
        CHECK(memcmp(&got, &want, sizeof got) == 0);
      }
      double dflt = dt_sum_f32(x + off, n);
      CHECK(memcmp(&dflt, &want, sizeof dflt) == 0);
    }
  free(x);
}

static void test_add_rows_same_bits_every_width(void) {
  enum { N = 1037 };
  static float r[DT_ADD_ROWS][N + 1];
  double want[N], got[N];
  const float *rows[DT_ADD_ROWS];
  for (int k = 0; k < DT_ADD_ROWS; k++) fill(r[k], N + 1, 11 + (unsigned)k), rows[k] = r[k] + 1; /* unaligned */
  for (int nrows = 1; nrows <= DT_ADD_ROWS; nrows++)
    for (int64_t n = 0; n <= N; n += n < 40 ? 1 : 333) {
      for (int64_t i = 0; i < n; i++) { /* a running sum so far, then the rows in order */
        want[i] = (double)r[0][N - i] * 1e-3;
        for (int k = 0; k < nrows; k++) want[i] += (double)rows[k][i];
      }
      for (int w = 0; w < 3; w++) {
        for (int64_t i = 0; i < n; i++) got[i] = (double)r[0][N - i] * 1e-3;
        dt_add_rows_f32_width(got, rows, nrows, n, WIDTHS[w]);
        CHECK(n == 0 || memcmp(got, want, sizeof(double) * (size_t)n) == 0);
      }
    }
}

static void box_muller4_only(const float *u1, const float *u2, float *z0, float *z1, int64_t n) {
  BOX_MULLER_LOOP(4, v4f, splat, SQRT4)
}

static void test_box_muller_same_bits_4_and_8_lanes(void) {
  enum { N = 4096 };
  static float u1[N], u2[N], a0[N], a1[N], b0[N], b1[N];
  srand(5);
  for (int i = 0; i < N; i++) u1[i] = (float)(rand() >> 7) / 16777216.0f, u2[i] = (float)(rand() >> 7) / 16777216.0f;
  u1[0] = 0, u2[0] = 0, u1[1] = 16777215.0f / 16777216.0f, u2[1] = 16777215.0f / 16777216.0f; /* the ends */
  box_muller4_only(u1, u2, a0, a1, N);
  box_muller_pairs(u1, u2, b0, b1, N); /* 8 lanes where the CPU has AVX2 */
  CHECK(memcmp(a0, b0, sizeof a0) == 0);
  CHECK(memcmp(a1, b1, sizeof a1) == 0);
  for (int i = 0; i < N; i++) { /* and they are Box-Muller's values */
    double r = sqrt(-2.0 * log(1.0 - (double)u1[i])), t = 6.283185307179586 * u2[i];
    if (fabs(a0[i] - r * cos(t)) > 1e-5 * (1 + r) || fabs(a1[i] - r * sin(t)) > 1e-5 * (1 + r)) {
      CHECK(0);
      break;
    }
  }
}

int main(void) {
  TEST_CASE(test_sum_same_bits_every_width);
  TEST_CASE(test_add_rows_same_bits_every_width);
  TEST_CASE(test_box_muller_same_bits_4_and_8_lanes);
  return CTEST_END();
}
