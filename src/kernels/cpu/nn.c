/* CPU kernels of the neural-network ops.  Inputs are made contiguous in their compute
 * dtype (bf16/f16 compute in f32); outputs in bf16/f16 go through an f32 buffer. */
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/softmax_line.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define R float
#define SUF(x) x##_f32
#define GEMM dt_gemm_f32
#define EXP expf
#define SOFTMAX_LINE dt_cpu_softmax_line_f32
#include "kernels/cpu/nn_typed.h"
#undef R
#undef SUF
#undef GEMM
#undef EXP
#undef SOFTMAX_LINE
#define R double
#define SUF(x) x##_f64
#define GEMM dt_gemm_f64
#define EXP exp
#define SOFTMAX_LINE dt_cpu_softmax_line_f64
#include "kernels/cpu/nn_typed.h"
#undef R
#undef SUF
#undef GEMM
#undef EXP
#undef SOFTMAX_LINE

#include "kernels/cpu/norm_forms.h"

/* Up to 4 inputs converted to one compute dtype (NULL stays NULL), released together. */
typedef struct inputs {
  dt_tensor *t[4];
  int n;
} inputs;

static void inputs_release(inputs *in) {
  for (int i = 0; i < in->n; i++)
    if (in->t[i]) dt_tensor_release(in->t[i]);
  in->n = 0;
}

static int inputs_get(inputs *in, const dt_op_args *a, int n, dt_dtype compute) {
  memset(in, 0, sizeof *in);
  for (int i = 0; i < n; i++) {
    dt_tensor *src = i < a->nin ? a->in[i] : NULL;
    in->n = i + 1;
    if (!src) continue;
    in->t[i] = dt_tensor_contiguous_as(src, compute);
    if (!in->t[i]) return inputs_release(in), dt_error_prefix("%s", a->name);
  }
  return DT_OK;
}

static const void *data_or_null(const dt_tensor *t) { return t ? dt_tensor_data(t) : NULL; }

/* The buffer a kernel writes: out itself when it already has the compute dtype. */
static dt_tensor *out_buffer(dt_tensor *out, dt_dtype compute, const char *op) {
  if (out->dtype == compute) return dt_tensor_retain(out), out;
  dt_tensor *b = dt_tensor_empty(compute, out->ndim, out->shape, DT_CPU);
  if (!b) dt_error_prefix("%s", op);
  return b;
}

static int out_finish(dt_tensor *out, dt_tensor *buf, const char *op) {
  int rc = buf == out ? DT_OK : dt_tensor_copy_(out, buf, op);
  dt_tensor_release(buf);
  return rc;
}

/* ---- embedding: a row gather, any weight dtype.  With DT_ARG_VOCAB_SHARD the weight is
 * the vocab rows ints[0].. (a row-wise shard): ids outside them read zeros, and the caller
 * has checked the ids against the whole vocab.  The ids are checked first, then the rows are
 * copied over the threads. ---- */
typedef struct {
  const int64_t *id;
  const char *src;
  char *dst;
  size_t row;
  int64_t first, vocab;
} emb_job;

static void emb_piece(int64_t i0, int64_t i1, void *vj) {
  const emb_job *j = vj;
  for (int64_t i = i0; i < i1; i++) {
    int64_t r = j->id[i] - j->first;
    if (r < 0 || r >= j->vocab) memset(j->dst + (size_t)i * j->row, 0, j->row); /* another rank's row */
    else memcpy(j->dst + (size_t)i * j->row, j->src + (size_t)r * j->row, j->row);
  }
}

int dt_cpu_embedding(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *ids = dt_tensor_contiguous_as(a->in[0], DT_INT64);
  dt_tensor *w = ids ? dt_tensor_contiguous(a->in[1]) : NULL;
  if (!w) {
    if (ids) dt_tensor_release(ids);
    return dt_error_prefix("%s", a->name);
  }
  int shard = (a->flags & DT_ARG_VOCAB_SHARD) != 0;
  int64_t n = dt_tensor_numel(ids), vocab = w->shape[0], first = shard ? a->ints[0] : 0;
  emb_job j = {.id = dt_tensor_data(ids), .src = dt_tensor_data(w), .dst = dt_tensor_data(out[0]),
               .row = (size_t)w->shape[1] * dt_tensor_elsize(w), .first = first, .vocab = vocab};
  int rc = DT_OK;
  for (int64_t i = 0; i < n && !shard; i++)
    if (j.id[i] < 0 || j.id[i] >= vocab) {
      rc = dt_error("%s: id %lld out of range for vocab size %lld (0-based)", a->name, (long long)j.id[i], (long long)vocab);
      break;
    }
  int64_t per_id = (int64_t)(j.row / 4) + 1; /* about the elements a row moves */
  if (rc == DT_OK && j.row > 0)
    dt_parallel_for(n, per_id >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / per_id, emb_piece, &j);
  dt_tensor_release(ids);
  dt_tensor_release(w);
  return rc;
}

/* ---- layer_norm / rms_norm and their backward: rows over the threads ---- */
typedef struct {
  const void *g, *x, *w, *b; /* g: the backward's gradient */
  void *y, *y2;              /* backward: dx, the blocks' partial dw and db rows */
  int64_t n, rows;
  double eps;
  int rms, f64, avx2; /* avx2: norm_rows.h's AVX2 form (the same bits, half the instructions) */
} norm_job;

/* rows [r0, r1) on one thread: each row's arithmetic is the same on any thread count */
static void norm_piece(int64_t r0, int64_t r1, void *vj) {
  const norm_job *j = vj;
  const double *xd = (const double *)j->x + r0 * j->n;
  const float *xf = (const float *)j->x + r0 * j->n;
  double *yd = (double *)j->y + r0 * j->n;
  float *yf = (float *)j->y + r0 * j->n;
  if (j->f64 && j->avx2) norm_rows_f64_avx2(xd, j->w, j->b, yd, r1 - r0, j->n, j->eps, j->rms);
  else if (j->f64) norm_rows_f64(xd, j->w, j->b, yd, r1 - r0, j->n, j->eps, j->rms);
  else if (j->avx2) norm_rows_f32_avx2(xf, j->w, j->b, yf, r1 - r0, j->n, j->eps, j->rms);
  else norm_rows_f32(xf, j->w, j->b, yf, r1 - r0, j->n, j->eps, j->rms);
}

/* The rows a norm walks: n elements each, x's last ints[0] dims. */
static int64_t norm_rows(const dt_op_args *a, const dt_tensor *x, int64_t *n) {
  int k = (int)a->ints[0];
  *n = dt_shape_numel(k, x->shape + x->ndim - k);
  return *n ? dt_tensor_numel(x) / *n : 0;
}

static int norm(const dt_op_args *a, dt_tensor **out, int rms) {
  const dt_tensor *x = a->in[0];
  dt_dtype cd = dt_dtype_compute(x->dtype);
  int64_t n, rows = norm_rows(a, x, &n);
  inputs in;
  if (inputs_get(&in, a, rms ? 2 : 3, cd) != DT_OK) return DT_ERR;
  dt_tensor *y = out_buffer(out[0], cd, a->name);
  if (!y) return inputs_release(&in), DT_ERR;
  const dt_tensor *b = rms ? NULL : in.t[2];
  norm_job j = {.x = dt_tensor_data(in.t[0]), .w = data_or_null(in.t[1]), .b = data_or_null(b), .y = dt_tensor_data(y),
                .n = n, .eps = a->scalar[0], .rms = rms, .f64 = cd == DT_FLOAT64, .avx2 = norm_isa_avx2()};
  dt_parallel_for(rows, n >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / (n ? n : 1), norm_piece, &j);
  inputs_release(&in);
  return out_finish(out[0], y, a->name);
}

int dt_cpu_layer_norm(const dt_op_args *a, dt_tensor **out) { return norm(a, out, 0); }
int dt_cpu_rms_norm(const dt_op_args *a, dt_tensor **out) { return norm(a, out, 1); }

/* ---- scaled_dot_product_attention ---- */

/* Element offsets of each batch of a contiguous operand whose batch dims are right-aligned
 * to the output's nb batch dims (size-1 dims broadcast: stride 0). */
static void batch_strides(const dt_tensor *t, int nb, const int64_t *bs, int64_t mat, int64_t *st) {
  int tb = t->ndim - 2;
  int64_t stride = mat;
  for (int d = nb - 1; d >= 0; d--) {
    int td = d - (nb - tb);
    int64_t size = td >= 0 ? t->shape[td] : 1;
    st[d] = size == 1 && bs[d] != 1 ? 0 : stride;
    stride *= size;
  }
}

static int64_t batch_offset(int64_t b, int nb, const int64_t *bs, const int64_t *st) {
  int64_t off = 0;
  for (int d = nb - 1; d >= 0; d--) {
    off += (b % bs[d]) * st[d];
    b /= bs[d];
  }
  return off;
}

/* ---- layer_norm_backward(grad, x, w?) -> dx, dw, db ----
 * Rows go in blocks of NORM_BW_BLOCK (a size fixed here, never the thread count); each block
 * adds its rows' g * xhat and g into its own partial dw and db rows, in the same sweep as dx,
 * and the partials are then added in block order (in double): the same bits on any thread
 * count.  This replaces writing g * xhat out and two sums over the leading dims. */
#define NORM_BW_BLOCK 32

static void norm_bw_piece(int64_t b0, int64_t b1, void *vj) {
  const norm_job *j = vj;
  for (int64_t blk = b0; blk < b1; blk++) {
    int64_t r0 = blk * NORM_BW_BLOCK, nr = j->rows - r0 < NORM_BW_BLOCK ? j->rows - r0 : NORM_BW_BLOCK, o = r0 * j->n;
    int64_t p = blk * 2 * j->n; /* this block's dw row, then its db row */
    if (j->f64)
      (j->avx2 ? norm_backward_rows_f64_avx2 : norm_backward_rows_f64)(
          (const double *)j->g + o, (const double *)j->x + o, j->w, (double *)j->y + o, (double *)j->y2 + p,
          (double *)j->y2 + p + j->n, nr, j->n, j->eps, j->rms);
    else
      (j->avx2 ? norm_backward_rows_f32_avx2 : norm_backward_rows_f32)(
          (const float *)j->g + o, (const float *)j->x + o, j->w, (float *)j->y + o, (float *)j->y2 + p,
          (float *)j->y2 + p + j->n, nr, j->n, j->eps, j->rms);
  }
}

/* dw[i] (row 0) and db[i] (row 1) = the blocks' partials added in block order, in double;
 * 64 columns at a time with the blocks outermost (contiguous loads, independent adds) */
#define DEFINE_NORM_COMBINE(NAME, R)                                                       \
  static void NAME(const R *part, int64_t nblocks, int64_t n, R *dw, R *db) {              \
    for (int64_t i0 = 0; i0 < n; i0 += 64) {                                               \
      int64_t m = n - i0 < 64 ? n - i0 : 64;                                               \
      double sw[64] = {0}, sb[64] = {0};                                                   \
      for (int64_t blk = 0; blk < nblocks; blk++) {                                        \
        const R *pw = part + blk * 2 * n + i0, *pb = pw + n;                               \
        for (int64_t i = 0; i < m; i++) sw[i] += pw[i], sb[i] += pb[i];                    \
      }                                                                                    \
      for (int64_t i = 0; i < m; i++) dw[i0 + i] = (R)sw[i], db[i0 + i] = (R)sb[i];        \
    }                                                                                      \
  }
DEFINE_NORM_COMBINE(norm_combine_f32, float)
DEFINE_NORM_COMBINE(norm_combine_f64, double)

int dt_cpu_layer_norm_backward(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *x = a->in[1];
  dt_dtype cd = dt_dtype_compute(x->dtype);
  int64_t n, rows = norm_rows(a, x, &n), nblocks = (rows + NORM_BW_BLOCK - 1) / NORM_BW_BLOCK;
  inputs in;
  if (inputs_get(&in, a, 3, cd) != DT_OK) return DT_ERR;
  dt_tensor *dx = out_buffer(out[0], cd, a->name), *dw = dx ? out_buffer(out[1], cd, a->name) : NULL;
  dt_tensor *db = dw ? out_buffer(out[2], cd, a->name) : NULL;
  int64_t pshape[1] = {nblocks * 2 * n};
  dt_tensor *part = db ? dt_tensor_empty(cd, 1, pshape, DT_CPU) : NULL;
  if (!part) {
    if (db) dt_error_prefix("%s", a->name), dt_tensor_release(db);
    if (dw) dt_tensor_release(dw);
    if (dx) dt_tensor_release(dx);
    return inputs_release(&in), DT_ERR;
  }
  memset(dt_tensor_data(part), 0, (size_t)pshape[0] * dt_tensor_elsize(part));
  norm_job j = {.g = dt_tensor_data(in.t[0]), .x = dt_tensor_data(in.t[1]), .w = data_or_null(in.t[2]),
                .y = dt_tensor_data(dx), .y2 = dt_tensor_data(part), .n = n, .rows = rows, .eps = a->scalar[0],
                .rms = a->flags & 1, .f64 = cd == DT_FLOAT64, .avx2 = norm_isa_avx2()};
  int64_t per_block = NORM_BW_BLOCK * n;
  dt_parallel_for(nblocks, per_block >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / (per_block ? per_block : 1),
                  norm_bw_piece, &j);
  if (cd == DT_FLOAT64) norm_combine_f64(dt_tensor_data(part), nblocks, n, dt_tensor_data(dw), dt_tensor_data(db));
  else norm_combine_f32(dt_tensor_data(part), nblocks, n, dt_tensor_data(dw), dt_tensor_data(db));
  dt_tensor_release(part);
  inputs_release(&in);
  int rc = out_finish(out[0], dx, a->name);
  int rc2 = out_finish(out[1], dw, a->name);
  int rc3 = out_finish(out[2], db, a->name);
  return rc != DT_OK ? rc : rc2 != DT_OK ? rc2 : rc3;
}

/* The mask as an additive float tensor in the compute dtype: bool true -> 0, false -> -inf. */
static dt_tensor *additive_mask(dt_tensor *m, dt_dtype cd, const char *op) {
  if (m->dtype != DT_BOOL) return dt_tensor_contiguous_as(m, cd);
  dt_tensor *bm = dt_tensor_contiguous(m);
  dt_tensor *r = bm ? dt_tensor_empty(cd, m->ndim, m->shape, DT_CPU) : NULL;
  if (!r) {
    if (bm) dt_tensor_release(bm);
    dt_error_prefix("%s", op);
    return NULL;
  }
  const unsigned char *src = dt_tensor_data(bm);
  int64_t n = dt_tensor_numel(bm);
  for (int64_t i = 0; i < n; i++)
    if (cd == DT_FLOAT64) ((double *)dt_tensor_data(r))[i] = src[i] ? 0.0 : -INFINITY;
    else ((float *)dt_tensor_data(r))[i] = src[i] ? 0.0f : -INFINITY;
  dt_tensor_release(bm);
  return r;
}

/* Query rows per block, from the shapes alone (so the same GEMMs on any thread count): a
 * block's GEMMs (block x S x max(E, Ev) multiply-adds) stay at or under 2^18, which OpenBLAS
 * runs on the calling thread without its own threads or their lock, so the batches can run on
 * our threads at once (each batch's GEMMs are too small to gain from the BLAS's threads), and
 * a causal block skips the keys past its last row.  At least 16 rows, at most L. */
static int64_t query_block(int64_t L, int64_t S, int64_t E, int64_t Ev) {
  int64_t width = (E > Ev ? E : Ev) * S;
  int64_t block = width > 0 ? (1 << 18) / width : L;
  block = block < 16 ? 16 : block;
  return block > L ? L : block;
}

typedef struct {
  const dt_tensor *q, *k, *v, *mv, *y;
  int nb;
  const int64_t *bs, *sq, *sk, *sv, *sm;
  int64_t L, S, E, Ev, m_rs, m_cs;
  double scale;
  int causal;
  int64_t block;
  size_t es;
  int f64;
  atomic_int oom;
} sdpa_job;

static void sdpa_piece(int64_t b0, int64_t b1, void *vj) {
  sdpa_job *j = vj;
  int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev, block = j->block;
  void *scores = malloc((size_t)(block * S > 0 ? block * S : 1) * j->es);
  if (!scores) {
    atomic_store(&j->oom, 1);
    return;
  }
  for (int64_t b = b0; b < b1; b++) {
    int64_t oq = batch_offset(b, j->nb, j->bs, j->sq), ok = batch_offset(b, j->nb, j->bs, j->sk);
    int64_t ov = batch_offset(b, j->nb, j->bs, j->sv), om = batch_offset(b, j->nb, j->bs, j->sm), oo = b * L * Ev;
    if (j->f64)
      attention_f64((const double *)dt_tensor_data(j->q) + oq, (const double *)dt_tensor_data(j->k) + ok,
                    (const double *)dt_tensor_data(j->v) + ov, scores, (double *)dt_tensor_data(j->y) + oo, L, S, E, Ev,
                    j->scale, j->mv ? (const double *)dt_tensor_data(j->mv) + om : NULL, j->m_rs, j->m_cs, j->causal,
                    block);
    else
      attention_f32((const float *)dt_tensor_data(j->q) + oq, (const float *)dt_tensor_data(j->k) + ok,
                    (const float *)dt_tensor_data(j->v) + ov, scores, (float *)dt_tensor_data(j->y) + oo, L, S, E, Ev,
                    (float)j->scale, j->mv ? (const float *)dt_tensor_data(j->mv) + om : NULL, j->m_rs, j->m_cs,
                    j->causal, block);
  }
  free(scores);
}

int dt_cpu_scaled_dot_product_attention(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *q = a->in[0], *k = a->in[1], *v = a->in[2];
  dt_dtype cd = dt_dtype_compute(q->dtype);
  int nb = out[0]->ndim - 2, causal = a->flags & 1;
  const int64_t *bs = out[0]->shape;
  int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1], S = k->shape[k->ndim - 2], Ev = v->shape[v->ndim - 1];
  double scale = a->nscalar > 0 ? a->scalar[0] : 1.0 / sqrt((double)(E ? E : 1));
  inputs in;
  if (inputs_get(&in, a, 3, cd) != DT_OK) return DT_ERR;
  dt_tensor *m = a->nin > 3 && a->in[3] ? additive_mask(a->in[3], cd, a->name) : NULL;
  dt_tensor *y = out_buffer(out[0], cd, a->name);
  size_t es = dt_dtype_size(cd);
  int64_t block = query_block(L, S, E, Ev);
  if ((a->nin > 3 && a->in[3] && !m) || !y) {
    if (m) dt_tensor_release(m);
    if (y) dt_tensor_release(y);
    inputs_release(&in);
    return DT_ERR;
  }
  int64_t sq[DT_MAX_DIMS], sk[DT_MAX_DIMS], sv[DT_MAX_DIMS], sm[DT_MAX_DIMS] = {0};
  batch_strides(in.t[0], nb, bs, L * E, sq);
  batch_strides(in.t[1], nb, bs, S * E, sk);
  batch_strides(in.t[2], nb, bs, S * Ev, sv);
  int64_t m_rs = 0, m_cs = 0;
  dt_tensor *mv = NULL;
  if (m) { /* view the mask padded to nb + 2 dims so batch_strides applies */
    int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS];
    int pad = nb + 2 - m->ndim;
    for (int d = 0; d < nb + 2; d++) shape[d] = d < pad ? 1 : m->shape[d - pad];
    dt_contiguous_strides(nb + 2, shape, stride);
    mv = dt_tensor_view_of(m, nb + 2, shape, stride, m->offset);
    int64_t mL = shape[nb], mS = shape[nb + 1];
    m_rs = mL == 1 ? 0 : mS, m_cs = mS == 1 ? 0 : 1;
    batch_strides(mv, nb, bs, mL * mS, sm);
  }
  sdpa_job j = {.q = in.t[0], .k = in.t[1], .v = in.t[2], .mv = mv, .y = y, .nb = nb, .bs = bs, .sq = sq, .sk = sk,
               .sv = sv, .sm = sm, .L = L, .S = S, .E = E, .Ev = Ev, .m_rs = m_rs, .m_cs = m_cs, .scale = scale,
               .causal = causal, .block = block, .es = es, .f64 = cd == DT_FLOAT64};
  /* batches (batch x heads) over the intra-op threads, one piece of whole batches each */
  dt_parallel_for(dt_shape_numel(nb, bs), 1, sdpa_piece, &j);
  int oom = atomic_load(&j.oom);
  if (mv) dt_tensor_release(mv);
  if (m) dt_tensor_release(m);
  inputs_release(&in);
  if (oom) {
    dt_tensor_release(y);
    return dt_error("%s: out of memory", a->name);
  }
  return out_finish(out[0], y, a->name);
}

/* ---- sdpa_backward(grad, q, k, v, mask?) -> (dq, dk, dv): grad, q, k, v with the output's
 * batch dims (the shape rule checks), the mask broadcast as in the forward.  Batches over the
 * intra-op threads, like the forward (a piece's softmax and dS rows run inline in it). */
typedef struct {
  const void *g, *q, *k, *v;
  void *dq, *dk, *dv;
  const dt_tensor *mv;
  int nb;
  const int64_t *bs, *sm;
  int64_t L, S, E, Ev, m_rs, m_cs, block;
  double scale;
  int causal, f64;
  size_t es;
  atomic_int oom;
} sdpa_bw_job;

static void sdpa_bw_batch(const sdpa_bw_job *j, void *scores, void *dp, int64_t b) {
  int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev, om = batch_offset(b, j->nb, j->bs, j->sm);
  if (j->f64) {
    const double *m = j->mv ? (const double *)dt_tensor_data(j->mv) + om : NULL;
    attention_backward_f64((const double *)j->q + b * L * E, (const double *)j->k + b * S * E,
                           (const double *)j->v + b * S * Ev, (const double *)j->g + b * L * Ev, scores, dp,
                           (double *)j->dq + b * L * E, (double *)j->dk + b * S * E, (double *)j->dv + b * S * Ev, L,
                           S, E, Ev, j->scale, m, j->m_rs, j->m_cs, j->causal, j->block);
  } else {
    const float *m = j->mv ? (const float *)dt_tensor_data(j->mv) + om : NULL;
    attention_backward_f32((const float *)j->q + b * L * E, (const float *)j->k + b * S * E,
                           (const float *)j->v + b * S * Ev, (const float *)j->g + b * L * Ev, scores, dp,
                           (float *)j->dq + b * L * E, (float *)j->dk + b * S * E, (float *)j->dv + b * S * Ev, L, S,
                           E, Ev, (float)j->scale, m, j->m_rs, j->m_cs, j->causal, j->block);
  }
}

/* batches [b0, b1) with their own scores and dP rows (block x S each) */
static void sdpa_bw_piece(int64_t b0, int64_t b1, void *vj) {
  sdpa_bw_job *j = vj;
  size_t scratch = (size_t)(j->block * j->S > 0 ? j->block * j->S : 1) * j->es;
  void *scores = malloc(scratch), *dp = scores ? malloc(scratch) : NULL;
  if (!dp) atomic_store(&j->oom, 1);
  else
    for (int64_t b = b0; b < b1; b++) sdpa_bw_batch(j, scores, dp, b);
  free(scores);
  free(dp);
}

int dt_cpu_sdpa_backward(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *q = a->in[1], *k = a->in[2], *v = a->in[3];
  dt_dtype cd = dt_dtype_compute(q->dtype);
  int nb = q->ndim - 2;
  int64_t L = q->shape[nb], E = q->shape[nb + 1], S = k->shape[nb], Ev = v->shape[nb + 1];
  double scale = a->nscalar > 0 ? a->scalar[0] : 1.0 / sqrt((double)(E ? E : 1));
  size_t es = dt_dtype_size(cd);
  int64_t block = query_block(L, S, E, Ev); /* the forward's blocks */
  inputs in;
  if (inputs_get(&in, a, 4, cd) != DT_OK) return DT_ERR;
  dt_tensor *m = a->nin > 4 && a->in[4] ? additive_mask(a->in[4], cd, a->name) : NULL, *mv = NULL;
  dt_tensor *d[3] = {0};
  int rc = a->nin > 4 && a->in[4] && !m ? DT_ERR : DT_OK;
  for (int o = 0; o < 3 && rc == DT_OK; o++) {
    d[o] = out_buffer(out[o], cd, a->name);
    if (!d[o]) rc = DT_ERR;
    else memset(dt_tensor_data(d[o]), 0, (size_t)dt_tensor_numel(d[o]) * es);
  }
  int64_t sm[DT_MAX_DIMS] = {0}, m_rs = 0, m_cs = 0;
  if (rc == DT_OK && m) { /* the mask padded to nb + 2 dims, as the forward views it */
    int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS];
    int pad = nb + 2 - m->ndim;
    for (int i = 0; i < nb + 2; i++) shape[i] = i < pad ? 1 : m->shape[i - pad];
    dt_contiguous_strides(nb + 2, shape, stride);
    mv = dt_tensor_view_of(m, nb + 2, shape, stride, m->offset);
    if (!mv) rc = dt_error_prefix("%s", a->name);
    else {
      m_rs = shape[nb] == 1 ? 0 : shape[nb + 1], m_cs = shape[nb + 1] == 1 ? 0 : 1;
      batch_strides(mv, nb, q->shape, shape[nb] * shape[nb + 1], sm);
    }
  }
  if (rc == DT_OK) {
    sdpa_bw_job j = {.g = dt_tensor_data(in.t[0]), .q = dt_tensor_data(in.t[1]), .k = dt_tensor_data(in.t[2]),
                     .v = dt_tensor_data(in.t[3]), .dq = dt_tensor_data(d[0]), .dk = dt_tensor_data(d[1]),
                     .dv = dt_tensor_data(d[2]), .mv = mv, .nb = nb, .bs = q->shape, .sm = sm, .L = L, .S = S, .E = E,
                     .Ev = Ev, .m_rs = m_rs, .m_cs = m_cs, .block = block, .scale = scale, .causal = a->flags & 1,
                     .f64 = cd == DT_FLOAT64, .es = es};
    /* batches over the intra-op threads, as the forward: each writes its own dq, dk, dv */
    dt_parallel_for(dt_shape_numel(nb, q->shape), 1, sdpa_bw_piece, &j);
    if (atomic_load(&j.oom)) rc = dt_error("%s: out of memory", a->name);
  }
  if (mv) dt_tensor_release(mv);
  if (m) dt_tensor_release(m);
  inputs_release(&in);
  for (int o = 0; o < 3; o++)
    if (d[o]) {
      if (rc == DT_OK) rc = out_finish(out[o], d[o], a->name);
      else dt_tensor_release(d[o]);
    }
  return rc;
}
