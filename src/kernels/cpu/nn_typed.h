/* The typed inner loops of nn.c, included once per compute type with
 *   R        the element type (float or double)
 *   SUF(x)   x##_f32 or x##_f64
 *   GEMM     dt_gemm_f32 or dt_gemm_f64
 *   EXP      expf or exp
 * (layer_norm's rows: norm_rows.h.) */

/* 16-byte vectors of R (4 floats or 2 doubles: one SSE register), two at a time, written out
 * because GCC -O2 leaves these loops scalar (unknown trip count, and float sums it may not
 * reorder).  Only locals and memcpy: no vector crosses a call. */
typedef R SUF(vec) __attribute__((vector_size(16)));

/* In-place softmax of each row of scores [L, S]; mask (additive) and causal applied first.
 * Row i is query row0 + i (for the causal diagonal): its keys past the diagonal are not
 * exponentiated, they get 0 (NaN when the row's sum is NaN, as an all -inf row gives, as
 * PyTorch's math path does).  Rows go over the intra-op threads, each with a row buffer. */
typedef struct {
  R *scores;
  int64_t S, m_rs, m_cs, row0;
  const R *mask;
  int causal;
} SUF(sm_job);

static void SUF(sm_rows)(int64_t i0, int64_t i1, void *vj) {
  const SUF(sm_job) *j = vj;
  int64_t S = j->S;
  R *tmp = malloc(sizeof(R) * (size_t)(S > 0 ? S : 1));
  for (int64_t i = i0; i < i1; i++) {
    R *row = j->scores + i * S;
    if (j->mask)
      for (int64_t c = 0; c < S; c++) row[c] += j->mask[i * j->m_rs + c * j->m_cs];
    int64_t live = j->causal && j->row0 + i + 1 < S ? j->row0 + i + 1 : S;
    if (tmp) {
      SOFTMAX_LINE(row, tmp, live, 0);
      memcpy(row, tmp, sizeof(R) * (size_t)live);
    } else { /* no memory for the buffer: the scalar path */
      R mx = -INFINITY;
      for (int64_t c = 0; c < live; c++) mx = row[c] > mx ? row[c] : mx;
      if (isinf(mx) && mx < 0) mx = 0;
      double sum = 0;
      for (int64_t c = 0; c < live; c++) sum += row[c] = EXP(row[c] - mx);
      R inv = (R)(1.0 / sum);
      for (int64_t c = 0; c < live; c++) row[c] *= inv;
    }
    R rest = live > 0 && row[0] != row[0] ? row[0] : 0;
    for (int64_t c = live; c < S; c++) row[c] = rest;
  }
  free(tmp);
}

static void SUF(masked_softmax)(R *scores, int64_t L, int64_t S, const R *mask, int64_t m_rs, int64_t m_cs, int causal,
                                int64_t row0) {
  SUF(sm_job) j = {scores, S, m_rs, m_cs, row0, mask, causal};
  dt_parallel_for(L, S >= DT_PARALLEL_GRAIN / 4 ? 1 : DT_PARALLEL_GRAIN / 4 / (S ? S : 1), SUF(sm_rows), &j);
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

/* sdpa's backward rows: dS = P * (dP - rowsum(dP * P)) in place in dp (rows of s), the row
 * sums in double. */
typedef struct {
  const R *p;
  R *dp;
  int64_t s;
} SUF(ds_job);

/* The row sums in vector lanes of R over at most 256 elements, each such partial then added
 * in double (row_sum's scheme); the products dP * P in R, as the lanes make them. */
static void SUF(ds_rows)(int64_t i0, int64_t i1, void *vj) {
  const SUF(ds_job) *j = vj;
  const int64_t lanes = (int64_t)(16 / sizeof(R));
  int64_t s = j->s;
  for (int64_t i = i0; i < i1; i++) {
    const R *pr = j->p + i * s;
    R *dr = j->dp + i * s;
    double acc = 0;
    int64_t c = 0;
    while (c + 2 * lanes <= s) {
      int64_t end = s - c > 256 ? c + 256 : s;
      SUF(vec) lo = {0}, hi = {0};
      for (; c + 2 * lanes <= end; c += 2 * lanes) {
        SUF(vec) a, b, pa, pb;
        memcpy(&a, dr + c, sizeof a);
        memcpy(&b, dr + c + lanes, sizeof b);
        memcpy(&pa, pr + c, sizeof pa);
        memcpy(&pb, pr + c + lanes, sizeof pb);
        lo += a * pa, hi += b * pb;
      }
      for (int64_t l = 0; l < lanes; l++) acc += (double)lo[l] + hi[l];
    }
    for (; c < s; c++) acc += (double)(dr[c] * pr[c]);
    R rs = (R)acc;
    for (c = 0; c + lanes <= s; c += lanes) {
      SUF(vec) d, pv;
      memcpy(&d, dr + c, sizeof d);
      memcpy(&pv, pr + c, sizeof pv);
      d = pv * (d - rs);
      memcpy(dr + c, &d, sizeof d);
    }
    for (; c < s; c++) dr[c] = pr[c] * (dr[c] - rs);
  }
}

/* One attention batch's backward, by the forward's blocks of query rows: P recomputed as the
 * forward made it (same GEMM, mask and softmax), then dv += P^T g, dP = g v^T, dS, dq = scale
 * dS k, dk += scale dS^T q.  Causal blocks touch only the keys their rows see.  dk and dv
 * must start zeroed; scores and dp hold block * S elements each. */
static void SUF(attention_backward)(const R *q, const R *k, const R *v, const R *g, R *scores, R *dp, R *dq, R *dk,
                                    R *dv, int64_t L, int64_t S, int64_t E, int64_t Ev, R scale, const R *mask,
                                    int64_t m_rs, int64_t m_cs, int causal, int64_t block) {
  for (int64_t r0 = 0; r0 < L; r0 += block) {
    int64_t nr = L - r0 < block ? L - r0 : block;
    int64_t s = causal && r0 + nr < S ? r0 + nr : S;
    GEMM(0, 1, nr, s, E, scale, q + r0 * E, E, k, E, 0, scores, s);
    SUF(masked_softmax)(scores, nr, s, mask ? mask + r0 * m_rs : NULL, m_rs, m_cs, causal, r0);
    GEMM(1, 0, s, Ev, nr, 1, scores, s, g + r0 * Ev, Ev, 1, dv, Ev);
    GEMM(0, 1, nr, s, Ev, 1, g + r0 * Ev, Ev, v, Ev, 0, dp, s);
    SUF(ds_job) j = {scores, dp, s};
    dt_parallel_for(nr, s >= DT_PARALLEL_GRAIN / 4 ? 1 : DT_PARALLEL_GRAIN / 4 / (s ? s : 1), SUF(ds_rows), &j);
    GEMM(0, 0, nr, E, s, scale, dp, s, k, E, 0, dq + r0 * E, E);
    GEMM(1, 0, s, E, nr, scale, dp, s, q + r0 * E, E, 1, dk, E);
  }
}
