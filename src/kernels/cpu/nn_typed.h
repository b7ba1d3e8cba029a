/* The typed inner loops of nn.c, included once per compute type with
 *   R        the element type (float or double)
 *   SUF(x)   x##_f32 or x##_f64
 *   GEMM     dt_gemm_f32 or dt_gemm_f64
 * Statistics are accumulated in double whatever R is. */

/* layer_norm (rms = 0) or rms_norm (rms = 1) over rows of n contiguous elements. */
static void SUF(norm_rows)(const R *x, const R *w, const R *b, R *y, int64_t rows, int64_t n, double eps, int rms) {
  for (int64_t r = 0; r < rows; r++) {
    const R *xr = x + r * n;
    R *yr = y + r * n;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t i = 0; i < n; i++) mean += xr[i];
      mean /= (double)n;
    }
    for (int64_t i = 0; i < n; i++) {
      double d = xr[i] - mean;
      var += d * d;
    }
    var /= (double)n;
    R inv = (R)(1.0 / sqrt(var + eps)), mu = (R)mean;
    for (int64_t i = 0; i < n; i++) {
      R v = (xr[i] - mu) * inv;
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = v;
    }
  }
}

/* In-place softmax of each row of scores [L, S]; mask (additive) and causal applied first.
 * A row whose every entry is -inf gives NaN, as PyTorch's math path does. */
static void SUF(masked_softmax)(R *scores, int64_t L, int64_t S, const R *mask, int64_t m_rs, int64_t m_cs, int causal) {
  for (int64_t i = 0; i < L; i++) {
    R *row = scores + i * S;
    if (mask)
      for (int64_t j = 0; j < S; j++) row[j] += mask[i * m_rs + j * m_cs];
    if (causal)
      for (int64_t j = i + 1; j < S; j++) row[j] = -INFINITY;
    R mx = -INFINITY;
    for (int64_t j = 0; j < S; j++) mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int64_t j = 0; j < S; j++) sum += row[j] = (R)exp(row[j] - mx);
    R inv = (R)(1.0 / sum);
    for (int64_t j = 0; j < S; j++) row[j] *= inv;
  }
}

/* One attention batch: out[L, Ev] = softmax(scale * q k^T + mask) v. */
static void SUF(attention)(const R *q, const R *k, const R *v, R *scores, R *out, int64_t L, int64_t S, int64_t E,
                           int64_t Ev, R scale, const R *mask, int64_t m_rs, int64_t m_cs, int causal) {
  GEMM(0, 1, L, S, E, scale, q, E, k, E, 0, scores, S);
  SUF(masked_softmax)(scores, L, S, mask, m_rs, m_cs, causal);
  GEMM(0, 0, L, Ev, S, 1, scores, S, v, Ev, 0, out, Ev);
}

/* -log softmax(x)[target] for one sample whose C logits are `step` elements apart. */
static double SUF(nll_one)(const R *x, int64_t C, int64_t step, int64_t target) {
  double mx = -INFINITY, sum = 0;
  for (int64_t c = 0; c < C; c++) mx = x[c * step] > mx ? x[c * step] : mx;
  for (int64_t c = 0; c < C; c++) sum += exp(x[c * step] - mx);
  return mx + log(sum) - x[target * step];
}
