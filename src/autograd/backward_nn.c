/* Backward rules of the neural-network rows, composed from ops (mean, softmax, matmul,
 * where, index_add...) in a dt_bx scope, so that they run on DTensors through the dispatcher
 * like any op. */
#include "autograd/backward.h"

#include <math.h>

#include "base/error.h"

/* ---- embedding(ids, weight [v, d]): each looked-up row's gradient added into the weight's
 * row of its id (repeated ids accumulate); the ids have none.  index_add into zeros with
 * DT_ARG_INDEX_NO_BASE: the kernel writes its rows' zeros itself instead of copying x's. */
static int embedding_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[1]) return DT_OK;
  int64_t n = dt_shape_numel(b->in_meta[0].ndim, b->in_meta[0].shape), rows[2] = {n, b->in_meta[1].shape[1]};
  dt_bx x;
  dt_bx_begin(&x, b);
  const dt_value *ids = dt_bx_ints(&x, DT_OP_RESHAPE, dt_bx_in(&x, 0), 1, &n);
  const dt_value *g = dt_bx_ints(&x, DT_OP_RESHAPE, dt_bx_grad(&x, 0), 2, rows);
  dt_op_args a = dt_bw_args();
  a.ints[0] = 0, a.nints = 1, a.flags = DT_ARG_INDEX_NO_BASE;
  const dt_value *in[3] = {dt_bx_full_input(&x, 1, 0.0), ids, g};
  dt_bx_set(&x, 1, in[0] && ids && g ? dt_bx_op(&x, DT_OP_INDEX_ADD, &a, in, 3) : NULL);
  return dt_bx_end(&x);
}
DT_BACKWARD(embedding, embedding_backward, DT_SAVE(0), 0, 0)

/* ---- layer_norm(x, w?, b?) and rms_norm(x, w?) over the last k dims (ints[0] = k, eps in
 * scalar[0]): xhat = (x - mean) * rstd with rstd = 1/sqrt(var + eps) (rms: no mean, var =
 * mean(x^2)), y = xhat * w + b.  dw = g * xhat and db = g summed over the leading dims;
 * dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)) with gy = g * w (rms: without the
 * mean(gy) term; the means over the normalised dims).  dx, dw and db come from one op,
 * layer_norm_backward (one pass per row instead of a dozen ops over the tensor). */
static int norm_backward(dt_bw *b, int rms) {
  if (!b->grad[0]) return DT_OK;
  int has_w = b->nin > 1 && b->in[1];
  int want_w = has_w && b->needs[1], want_b = !rms && b->nin > 2 && b->needs[2];
  if (!b->needs[0] && !want_w && !want_b) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  const dt_value *g = dt_bx_grad(&x, 0);
  dt_op_args a = *b->args; /* k, normalized_shape, eps as the forward had them */
  a.flags = rms ? 1 : 0;
  const dt_value *in[3] = {g, dt_bx_in(&x, 0), has_w ? dt_bx_in(&x, 1) : NULL}, *outs[3];
  dt_bx_opn(&x, DT_OP_LAYER_NORM_BACKWARD, &a, in, has_w ? 3 : 2, 3, outs);
  if (want_w) dt_bx_set(&x, 1, outs[1]);
  if (want_b) dt_bx_set(&x, 2, outs[2]);
  if (b->needs[0]) dt_bx_set(&x, 0, outs[0]);
  return dt_bx_end(&x);
}
static int layer_norm_backward(dt_bw *b) { return norm_backward(b, 0); }
static int rms_norm_backward(dt_bw *b) { return norm_backward(b, 1); }
DT_BACKWARD(layer_norm, layer_norm_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)
DT_BACKWARD(rms_norm, rms_norm_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)

/* ---- cross_entropy(logits [n, c, d...] or [c], target (0-based) [n, d...] or 0-d; ints[0]
 * ignore_index, ints[1] reduction 0 none, 1 mean, 2 sum): d logits = (softmax(logits) -
 * onehot(target)) * w along the class dim, w the sample's weight: g (none, sum) or g / the
 * count of targets not ignored (mean), 0 where ignored.  One op, cross_entropy_backward
 * (src/kernels/cpu/cross_entropy.c), where the rule made a dozen.  Plain tensors only (the
 * row is LOCAL_ONLY: on DTensors F.cross_entropy is composed in Lua). */
static int cross_entropy_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  const dt_value *in[3] = {dt_bx_grad(&x, 0), dt_bx_in(&x, 0), dt_bx_in(&x, 1)};
  dt_op_args a = *b->args; /* ignore_index, reduction as the forward had them */
  dt_bx_set(&x, 0, dt_bx_op(&x, DT_OP_CROSS_ENTROPY_BACKWARD, &a, in, 3));
  return dt_bx_end(&x);
}
DT_BACKWARD(cross_entropy, cross_entropy_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)

/* ---- scaled_dot_product_attention(q [.., L, E], k [.., S, E], v [.., S, Ev], mask?; flags&1
 * causal, scale in scalar[0] if nscalar else 1/sqrt(E)).  The probabilities are recomputed
 * from the scores as the forward made them: P = softmax(scale q k^T + mask) (a bool mask and
 * the causal one, j > i masked, as -inf).  dv = P^T g, dP = g v^T, dS = P (dP - rowsum(dP P)),
 * dq = scale dS k, dk = scale dS^T q, and a float mask's gradient is dS; each summed over the
 * batch dims its operand was broadcast along.  When q, k and v share the output's batch dims
 * (and no float mask wants a gradient) one op, sdpa_backward (src/kernels/cpu/nn.c), does it
 * all by blocks of query rows; the ops below are the general form. */

/* s where keep, -inf elsewhere */
static const dt_value *masked(dt_bx *x, const dt_value *keep, const dt_value *s) {
  dt_op_args a = dt_bw_args();
  a.scalar[1] = -INFINITY, a.nscalar = 2;
  const dt_value *in[3] = {keep, s, NULL};
  return keep && s ? dt_bx_op(x, DT_OP_WHERE, &a, in, 3) : NULL;
}

/* q, k and v of one batch shape (the output's): the fused op applies */
static int same_batches(const dt_bw *b) {
  const dt_slot_meta *m = b->in_meta;
  int nd = m[0].ndim;
  if (m[1].ndim != nd || m[2].ndim != nd) return 0;
  for (int d = 0; d < nd - 2; d++)
    if (m[1].shape[d] != m[0].shape[d] || m[2].shape[d] != m[0].shape[d]) return 0;
  return 1;
}

static int sdpa_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  int nq = b->in_meta[0].ndim, nk = b->in_meta[1].ndim, has_mask = b->nin > 3 && b->in[3];
  int float_mask = has_mask && b->in_meta[3].dtype != DT_BOOL;
  if (!(float_mask && b->needs[3]) && same_batches(b)) { /* one op: sdpa_backward (the mask's gradient is composed) */
    dt_bx x;
    dt_bx_begin(&x, b);
    const dt_value *in[5] = {dt_bx_grad(&x, 0), dt_bx_in(&x, 0), dt_bx_in(&x, 1), dt_bx_in(&x, 2),
                             has_mask ? dt_bx_in(&x, 3) : NULL}, *d[3];
    dt_op_args a = *b->args; /* causal, scale as the forward had them */
    if (dt_bx_opn(&x, DT_OP_SDPA_BACKWARD, &a, in, has_mask ? 5 : 4, 3, d) == DT_OK)
      for (int i = 0; i < 3; i++)
        if (b->needs[i]) dt_bx_set(&x, i, d[i]);
    return dt_bx_end(&x);
  }
  int64_t E = b->in_meta[0].shape[nq - 1];
  double scale = b->args->nscalar > 0 ? b->args->scalar[0] : 1.0 / sqrt((double)(E ? E : 1));
  dt_bx x;
  dt_bx_begin(&x, b);
  const dt_value *q = dt_bx_in(&x, 0), *k = dt_bx_in(&x, 1), *v = dt_bx_in(&x, 2), *g = dt_bx_grad(&x, 0);
  /* the scores, masked as the forward masked them, and the probabilities */
  const dt_value *s = dt_bx_mul_scalar(&x, dt_bx_matmul(&x, q, dt_bx_mT(&x, k)), scale);
  if (has_mask) s = float_mask ? dt_bx_add(&x, s, dt_bx_in(&x, 3)) : masked(&x, dt_bx_in(&x, 3), s);
  if (b->args->flags & 1) { /* key j <= query i: positions along L (q's) against along S (k's, as a row) */
    const dt_value *row = dt_bx_positions(&x, 0, nq - 2), *col = dt_bx_mT(&x, dt_bx_positions(&x, 1, nk - 2));
    s = masked(&x, dt_bx_binary(&x, DT_OP_LE, col, row), s);
  }
  int64_t last = s ? dt_value_ndim(s) - 1 : 0;
  const dt_value *p = dt_bx_ints(&x, DT_OP_SOFTMAX, s, 1, &last);
  if (b->needs[2]) dt_bx_set_summed(&x, 2, dt_bx_matmul(&x, dt_bx_mT(&x, p), g));
  if (b->needs[0] || b->needs[1] || (float_mask && b->needs[3])) {
    const dt_value *dp = dt_bx_matmul(&x, g, dt_bx_mT(&x, v));
    const dt_value *rowsum = dt_bx_reduce_dims(&x, DT_OP_SUM, dt_bx_mul(&x, dp, p), 1, &last, 1);
    const dt_value *ds = dt_bx_mul(&x, p, dt_bx_sub(&x, dp, rowsum));
    if (b->needs[0]) dt_bx_set_summed(&x, 0, dt_bx_mul_scalar(&x, dt_bx_matmul(&x, ds, k), scale));
    if (b->needs[1]) dt_bx_set_summed(&x, 1, dt_bx_mul_scalar(&x, dt_bx_matmul(&x, dt_bx_mT(&x, ds), q), scale));
    if (float_mask && b->needs[3]) dt_bx_set_summed(&x, 3, ds);
  }
  return dt_bx_end(&x);
}
DT_BACKWARD(scaled_dot_product_attention, sdpa_backward, DT_SAVE_ALL, 0, 0)
