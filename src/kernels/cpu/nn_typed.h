/* The typed inner loops of nn.c, included once per compute type with
 *   R        the element type (float or double)
 *   SUF(x)   x##_f32 or x##_f64
 *   GEMM     dt_gemm_f32 or dt_gemm_f64
 *   EXP      expf or exp
 * Statistics are accumulated in double whatever R is, in four independent sums so the
 * loops are not bound by the latency of one add chain. */

/* sum of x[i] (square = 0) or of (x[i] - shift)^2 (square = 1). */
static double SUF(row_sum)(const R *x, int64_t n, double shift, int square) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  if (square) {
    for (; i + 4 <= n; i += 4) {
      double d0 = x[i] - shift, d1 = x[i + 1] - shift, d2 = x[i + 2] - shift, d3 = x[i + 3] - shift;
      s0 += d0 * d0, s1 += d1 * d1, s2 += d2 * d2, s3 += d3 * d3;
    }
    for (; i < n; i++) s0 += (x[i] - shift) * (x[i] - shift);
  } else {
    for (; i + 4 <= n; i += 4) s0 += x[i], s1 += x[i + 1], s2 += x[i + 2], s3 += x[i + 3];
    for (; i < n; i++) s0 += x[i];
  }
  return (s0 + s1) + (s2 + s3);
}

/* layer_norm (rms = 0) or rms_norm (rms = 1) over rows of n contiguous elements. */
static void SUF(norm_rows)(const R *x, const R *w, const R *b, R *y, int64_t rows, int64_t n, double eps, int rms) {
  for (int64_t r = 0; r < rows; r++) {
    const R *xr = x + r * n;
    R *yr = y + r * n;
    double mean = rms ? 0 : SUF(row_sum)(xr, n, 0, 0) / (double)n;
    double var = SUF(row_sum)(xr, n, mean, 1) / (double)n;
    R inv = (R)(1.0 / sqrt(var + eps)), mu = (R)mean;
    /* branch-free loops; the row is in L1 for the second and third */
    for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - mu) * inv;
    if (w)
      for (int64_t i = 0; i < n; i++) yr[i] *= w[i];
    if (b)
      for (int64_t i = 0; i < n; i++) yr[i] += b[i];
  }
}

/* In-place softmax of each row of scores [L, S]; mask (additive) and causal applied first.
 * Row i is query row0 + i (for the causal diagonal).  A row whose every entry is -inf gives
 * NaN, as PyTorch's math path does. */
static void SUF(masked_softmax)(R *scores, int64_t L, int64_t S, const R *mask, int64_t m_rs, int64_t m_cs, int causal,
                                int64_t row0) {
  for (int64_t i = 0; i < L; i++) {
    R *row = scores + i * S;
    if (mask)
      for (int64_t j = 0; j < S; j++) row[j] += mask[i * m_rs + j * m_cs];
    if (causal)
      for (int64_t j = row0 + i + 1; j < S; j++) row[j] = -INFINITY;
    R mx = -INFINITY;
    for (int64_t j = 0; j < S; j++) mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int64_t j = 0; j < S; j++) sum += row[j] = EXP(row[j] - mx);
    R inv = (R)(1.0 / sum);
    for (int64_t j = 0; j < S; j++) row[j] *= inv;
  }
}

/* One attention batch: out[L, Ev] = softmax(scale * q k^T + mask) v, by blocks of `block`
 * query rows so scores stay small.  Causal blocks skip the keys no row of theirs can see. */
static void SUF(attention)(const R *q, const R *k, const R *v, R *scores, R *out, int64_t L, int64_t S, int64_t E,
                           int64_t Ev, R scale, const R *mask, int64_t m_rs, int64_t m_cs, int causal, int64_t block) {
  for (int64_t r0 = 0; r0 < L; r0 += block) {
    int64_t nr = L - r0 < block ? L - r0 : block;
    int64_t s = causal && r0 + nr < S ? r0 + nr : S;
    GEMM(0, 1, nr, s, E, scale, q + r0 * E, E, k, E, 0, scores, s);
    SUF(masked_softmax)(scores, nr, s, mask ? mask + r0 * m_rs : NULL, m_rs, m_cs, causal, r0);
    GEMM(0, 0, nr, Ev, s, 1, scores, s, v, Ev, 0, out + r0 * Ev, Ev);
  }
}

/* -log softmax(x)[target] for one sample whose C logits are `step` elements apart. */
static double SUF(nll_one)(const R *x, int64_t C, int64_t step, int64_t target) {
  R mx = -INFINITY;
  for (int64_t c = 0; c < C; c++) mx = x[c * step] > mx ? x[c * step] : mx;
  double s0 = 0, s1 = 0;
  int64_t c = 0;
  for (; c + 2 <= C; c += 2) s0 += EXP(x[c * step] - mx), s1 += EXP(x[(c + 1) * step] - mx);
  if (c < C) s0 += EXP(x[c * step] - mx);
  return (double)mx + log(s0 + s1) - (double)x[target * step];
}
