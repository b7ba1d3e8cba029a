/* layer_norm / rms_norm rows and their backward, included by nn.c once per compute type and
 * instruction set with
 *   R          the element type (float or double)
 *   NSUF(x)    the name suffix (x##_f32, x##_f32_avx2, ...)
 *   NORM_ISA   a function attribute: empty (SSE2) or __attribute__((target("avx2")))
 * The loops work on 32-byte vectors of R (GCC vector extensions: two SSE registers per
 * operation in the default build, one AVX register under target("avx2")), so every
 * instruction set adds the same lanes in the same order: the same bits on any x86-64 CPU,
 * and the AVX2 form halves the instructions.  Only locals and memcpy: no vector crosses a
 * call (GCC's -Wpsabi).  Statistics end in double whatever R is (see row_sum). */

typedef R NSUF(nvec) __attribute__((vector_size(32)));
#define NLANES (int64_t)(32 / sizeof(R))
#define NHALF (NLANES / 2)

/* a vector's lanes in double: lane l with lane l + NHALF, then those pairwise (short add
 * chains: this runs twice per row) */
NORM_ISA static inline __attribute__((always_inline)) double NSUF(lanes_sum)(const NSUF(nvec) *pa) {
  NSUF(nvec) a = *pa;
  double h[NHALF];
  for (int64_t l = 0; l < NHALF; l++) h[l] = (double)a[l] + a[l + NHALF];
  for (int64_t w = NHALF / 2; w >= 1; w /= 2)
    for (int64_t l = 0; l < w; l++) h[l] += h[l + w];
  return h[0];
}

/* one vector of the sum: x, or (x - shift)^2 */
#define NORM_TERM(v, x, i)        \
  memcpy(&v, (x) + (i), sizeof v); \
  if (square) {                   \
    v -= shift;                   \
    v *= v;                       \
  }

/* sum of x[i] (square = 0) or of (x[i] - shift)^2 (square = 1) over at most 256 elements at a
 * time: four vectors of lanes (four independent add chains: one chain waited on the add's
 * latency), added (a0 + a1) + (a2 + a3), the lanes then in double (lanes_sum), so the error
 * stays near a double sum's.  Inlined: square folds away. */
NORM_ISA static inline __attribute__((always_inline)) double NSUF(row_sum)(const R *restrict x, int64_t n, R shift,
                                                                          int square) {
  double total = 0;
  int64_t i = 0;
  while (i + NLANES <= n) {
    int64_t end = n - i > 256 ? i + 256 : n;
    NSUF(nvec) a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, v0, v1, v2, v3;
    for (; i + 4 * NLANES <= end; i += 4 * NLANES) {
      NORM_TERM(v0, x, i)
      NORM_TERM(v1, x, i + NLANES)
      NORM_TERM(v2, x, i + 2 * NLANES)
      NORM_TERM(v3, x, i + 3 * NLANES)
      a0 += v0, a1 += v1, a2 += v2, a3 += v3;
    }
    for (; i + NLANES <= end; i += NLANES) {
      NORM_TERM(v0, x, i)
      a0 += v0;
    }
    a0 = (a0 + a1) + (a2 + a3);
    total += NSUF(lanes_sum)(&a0);
  }
  for (; i < n; i++) total += square ? ((double)x[i] - shift) * ((double)x[i] - shift) : x[i];
  return total;
}
#undef NORM_TERM

/* Rows go in groups of NORM_GROUP: each row's mean (0 for rms) and 1 / sqrt(var + eps) in
 * two sweeps (no cancellation), a sweep over the group's rows at a time, so one row's sums,
 * square root and division overlap the next row's instead of waiting on their latency (the
 * statistics were most of a 256-wide row's time).  Each row's arithmetic is its own. */
#ifndef NORM_GROUP
#define NORM_GROUP 8
#endif
NORM_ISA static inline __attribute__((always_inline)) void NSUF(group_stats)(const R *restrict x, int64_t rows,
                                                                             int64_t n, double eps, int rms, R *mu,
                                                                             R *inv) {
  double var[NORM_GROUP];
  for (int64_t r = 0; r < rows; r++) mu[r] = rms ? 0 : (R)(NSUF(row_sum)(x + r * n, n, 0, 0) / (double)n);
  for (int64_t r = 0; r < rows; r++) var[r] = NSUF(row_sum)(x + r * n, n, mu[r], 1) / (double)n;
  for (int64_t r = 0; r < rows; r++) inv[r] = (R)(1.0 / sqrt(var[r] + eps));
}

/* layer_norm (rms = 0) or rms_norm (rms = 1) over rows of n contiguous elements: the
 * statistics, then y = (x - mean) * inv * w + b in one sweep. */
NORM_ISA static void NSUF(norm_rows)(const R *restrict x, const R *restrict w, const R *restrict b, R *restrict y,
                                     int64_t rows, int64_t n, double eps, int rms) {
  R mus[NORM_GROUP], invs[NORM_GROUP];
  for (int64_t r = 0; r < rows; r++) {
    if (r % NORM_GROUP == 0)
      NSUF(group_stats)(x + r * n, rows - r < NORM_GROUP ? rows - r : NORM_GROUP, n, eps, rms, mus, invs);
    const R *xr = x + r * n, mu = mus[r % NORM_GROUP], inv = invs[r % NORM_GROUP];
    R *yr = y + r * n;
    int64_t i = 0;
    for (; i + NLANES <= n; i += NLANES) { /* the w and b branches are the same every time */
      NSUF(nvec) v, t;
      memcpy(&v, xr + i, sizeof v);
      v = (v - mu) * inv;
      if (w) memcpy(&t, w + i, sizeof t), v *= t;
      if (b) memcpy(&t, b + i, sizeof t), v += t;
      memcpy(yr + i, &v, sizeof v);
    }
    for (; i < n; i++) {
      R v = (xr[i] - mu) * inv;
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = v;
    }
  }
}

/* layer_norm / rms_norm backward over rows of n: the statistics recomputed as norm_rows makes
 * them, xhat = (x - mean) * rstd, gy = g * w, and
 * dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)) (rms: without mean(gy)); in the same
 * sweep g * xhat and g are added into the rows dwp and dbp (this block's partial dw and db,
 * which the caller combines).  The two row sums: lanes over at most 256 elements, then double. */
NORM_ISA static void NSUF(norm_backward_rows)(const R *restrict g, const R *restrict x, const R *restrict w,
                                              R *restrict dx, R *restrict dwp, R *restrict dbp, int64_t rows,
                                              int64_t n, double eps, int rms) {
  R mus[NORM_GROUP], invs[NORM_GROUP];
  for (int64_t r = 0; r < rows; r++) {
    if (r % NORM_GROUP == 0)
      NSUF(group_stats)(x + r * n, rows - r < NORM_GROUP ? rows - r : NORM_GROUP, n, eps, rms, mus, invs);
    const R *xr = x + r * n, *gr = g + r * n, mu = mus[r % NORM_GROUP], inv = invs[r % NORM_GROUP];
    R *dr = dx + r * n;
    double sum_gy = 0, sum_gyxh = 0;
    int64_t i = 0;
    while (i + NLANES <= n) {
      int64_t end = n - i > 256 ? i + 256 : n;
      NSUF(nvec) s1 = {0}, s2 = {0};
      for (; i + NLANES <= end; i += NLANES) {
        NSUF(nvec) xv, gv, wv, acc;
        memcpy(&xv, xr + i, sizeof xv);
        memcpy(&gv, gr + i, sizeof gv);
        NSUF(nvec) xh = (xv - mu) * inv, gy = gv;
        if (w) memcpy(&wv, w + i, sizeof wv), gy = gv * wv;
        memcpy(&acc, dwp + i, sizeof acc);
        acc += gv * xh;
        memcpy(dwp + i, &acc, sizeof acc);
        memcpy(&acc, dbp + i, sizeof acc);
        acc += gv;
        memcpy(dbp + i, &acc, sizeof acc);
        s1 += gy, s2 += gy * xh;
      }
      sum_gy += NSUF(lanes_sum)(&s1), sum_gyxh += NSUF(lanes_sum)(&s2);
    }
    for (; i < n; i++) {
      R xh = (xr[i] - mu) * inv, gy = w ? gr[i] * w[i] : gr[i];
      dwp[i] += gr[i] * xh, dbp[i] += gr[i];
      sum_gy += gy, sum_gyxh += (double)gy * xh;
    }
    R a = rms ? 0 : (R)(sum_gy / (double)n), b = (R)(sum_gyxh / (double)n);
    for (i = 0; i + NLANES <= n; i += NLANES) {
      NSUF(nvec) xv, gv, wv;
      memcpy(&xv, xr + i, sizeof xv);
      memcpy(&gv, gr + i, sizeof gv);
      NSUF(nvec) xh = (xv - mu) * inv, gy = gv;
      if (w) memcpy(&wv, w + i, sizeof wv), gy = gv * wv;
      NSUF(nvec) d = inv * (gy - a - xh * b);
      memcpy(dr + i, &d, sizeof d);
    }
    for (; i < n; i++) {
      R xh = (xr[i] - mu) * inv, gy = w ? gr[i] * w[i] : gr[i];
      dr[i] = inv * (gy - a - xh * b);
    }
  }
}
#undef NLANES
#undef NHALF
