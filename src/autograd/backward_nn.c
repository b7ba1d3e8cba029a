/* Backward rules of the neural-network rows, composed from ops (mean, softmax, matmul,
 * where, ...) so that they run on DTensors through the dispatcher like any op.  Each rule
 * keeps its temporaries in an array cleared once at the end. */
#include "autograd/backward.h"

#include <math.h>
#include <string.h>

#include "base/error.h"

static void init_all(dt_value *t, int n) {
  for (int i = 0; i < n; i++) dt_value_init(&t[i], NULL, NULL);
}
static void clear_all(dt_value *t, int n) {
  for (int i = 0; i < n; i++) dt_value_clear(&t[i]);
}

/* mean of x over dims, kept */
static int mean_kept(dt_bw *b, const dt_value *x, const int64_t *dims, int n, dt_value *out) {
  dt_op_args a = dt_bw_args();
  memcpy(a.ints, dims, sizeof(int64_t) * (size_t)n), a.nints = n;
  a.keepdim = 1;
  return dt_bw_call(b, DT_OP_MEAN, &a, x, NULL, out);
}

/* The gradient of input i from a value of the output's shape: summed to input i's shape. */
static int set_summed(dt_bw *b, int i, const dt_value *full) {
  dt_value r;
  if (dt_bw_sum_to_input(b, full, i, &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, i, &r);
  return DT_OK;
}

/* ---- layer_norm(x, w?, b?) and rms_norm(x, w?) over the last k dims (ints[0] = k, eps in
 * scalar[0]): xhat = (x - mean) * rstd with rstd = 1/sqrt(var + eps) (rms: no mean, var =
 * mean(x^2)), y = xhat * w + b.  dw = g * xhat and db = g summed over the leading dims;
 * dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)) with gy = g * w (rms: without the
 * mean(gy) term; the means over the normalised dims). */
static int norm_backward(dt_bw *b, int rms) {
  if (!b->grad[0]) return DT_OK;
  const dt_value *x = b->in[0], *w = b->nin > 1 ? b->in[1] : NULL, *g = b->grad[0];
  int nd = dt_value_ndim(x), k = (int)b->args->ints[0];
  int64_t dims[DT_MAX_DIMS];
  for (int i = 0; i < k; i++) dims[i] = nd - k + i;
  enum { MEAN, XC, SQ, VAR, VEPS, RSTD, XHAT, GW, GY, GYX, M1, M2, XM2, D, D2, DX, NT };
  dt_value t[NT];
  init_all(t, NT);
  int st = DT_ERR;
  if (rms) {
    if (dt_bw_share(x, &t[XC]) != DT_OK) goto done;
  } else if (mean_kept(b, x, dims, k, &t[MEAN]) != DT_OK || dt_bw_sub(b, x, &t[MEAN], &t[XC]) != DT_OK) {
    goto done;
  }
  if (dt_bw_mul(b, &t[XC], &t[XC], &t[SQ]) != DT_OK || mean_kept(b, &t[SQ], dims, k, &t[VAR]) != DT_OK ||
      dt_bw_add_scalar(b, &t[VAR], b->args->scalar[0], &t[VEPS]) != DT_OK ||
      dt_bw_unary(b, DT_OP_RSQRT, &t[VEPS], &t[RSTD]) != DT_OK || dt_bw_mul(b, &t[XC], &t[RSTD], &t[XHAT]) != DT_OK)
    goto done;
  if (w && b->needs[1] && (dt_bw_mul(b, g, &t[XHAT], &t[GW]) != DT_OK || set_summed(b, 1, &t[GW]) != DT_OK)) goto done;
  if (!rms && b->nin > 2 && b->needs[2] && set_summed(b, 2, g) != DT_OK) goto done;
  if (b->needs[0]) {
    if ((w ? dt_bw_mul(b, g, w, &t[GY]) : dt_bw_share(g, &t[GY])) != DT_OK) goto done;
    if (dt_bw_mul(b, &t[GY], &t[XHAT], &t[GYX]) != DT_OK || mean_kept(b, &t[GYX], dims, k, &t[M2]) != DT_OK ||
        dt_bw_mul(b, &t[XHAT], &t[M2], &t[XM2]) != DT_OK || dt_bw_sub(b, &t[GY], &t[XM2], &t[D]) != DT_OK)
      goto done;
    const dt_value *d = &t[D];
    if (!rms) {
      if (mean_kept(b, &t[GY], dims, k, &t[M1]) != DT_OK || dt_bw_sub(b, &t[D], &t[M1], &t[D2]) != DT_OK) goto done;
      d = &t[D2];
    }
    if (dt_bw_mul(b, d, &t[RSTD], &t[DX]) != DT_OK) goto done;
    dt_bw_set(b, 0, &t[DX]);
  }
  st = DT_OK;
done:
  clear_all(t, NT);
  return st;
}
static int layer_norm_backward(dt_bw *b) { return norm_backward(b, 0); }
static int rms_norm_backward(dt_bw *b) { return norm_backward(b, 1); }
DT_BACKWARD(layer_norm, layer_norm_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)
DT_BACKWARD(rms_norm, rms_norm_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)

/* ---- cross_entropy(logits [n, c, d...] or [c], target (0-based) [n, d...] or 0-d; ints[0]
 * ignore_index, ints[1] reduction 0 none, 1 mean, 2 sum): d logits = (softmax(logits) -
 * onehot(target)) * w along the class dim, w the sample's weight: g (none, sum) or g / the
 * count of targets not ignored (mean), 0 where ignored.  Plain tensors only (the row is
 * LOCAL_ONLY: on DTensors F.cross_entropy is composed in Lua). */
static int arange_int(dt_bw *b, int64_t n, dt_value *out) {
  dt_op_args a = dt_bw_args();
  a.flags = DT_ARG_SCALAR_INT;
  a.ints[0] = 0, a.ints[1] = n, a.ints[2] = 1, a.nints = 3;
  a.scalar[0] = 0, a.scalar[1] = (double)n, a.scalar[2] = 1, a.nscalar = 3;
  a.dtype = DT_INT64, a.has_dtype = 1;
  return dt_bw_calln(b, DT_OP_ARANGE, &a, NULL, 0, out);
}

/* op(x, integer v) */
static int with_int(dt_bw *b, dt_op_id op, const dt_value *x, int64_t v, dt_value *out) {
  dt_op_args a = dt_bw_args();
  a.flags = DT_ARG_SCALAR | DT_ARG_SCALAR_INT;
  a.scalar[0] = (double)v, a.nscalar = 1, a.ints[0] = v, a.nints = 1;
  return dt_bw_call(b, op, &a, x, NULL, out);
}

static int cross_entropy_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  const dt_value *x = b->in[0], *target = b->in[1], *g = b->grad[0];
  int nd = dt_value_ndim(x), cd = nd == 1 ? 0 : 1;
  dt_dtype dtype = dt_value_dtype(x);
  int64_t cdim = cd, classes_shape[DT_MAX_DIMS];
  for (int d = 0; d < nd; d++) classes_shape[d] = d == cd ? dt_value_shape(x)[cd] : 1;
  enum { P, AR, CLS, TU, HOT, HOTF, DIFF, VALID, VF, CNT, GS, W, WU, DX, NT };
  dt_value t[NT];
  init_all(t, NT);
  int st = DT_ERR;
  dt_op_args none = dt_bw_args();
  if (dt_bw_call_ints(b, DT_OP_SOFTMAX, x, 1, &cdim, &t[P]) != DT_OK ||
      arange_int(b, classes_shape[cd], &t[AR]) != DT_OK || dt_bw_reshape(b, &t[AR], nd, classes_shape, &t[CLS]) != DT_OK ||
      dt_bw_call_ints(b, DT_OP_UNSQUEEZE, target, 1, &cdim, &t[TU]) != DT_OK ||
      dt_bw_call(b, DT_OP_EQ, &none, &t[TU], &t[CLS], &t[HOT]) != DT_OK || dt_bw_to(b, &t[HOT], dtype, &t[HOTF]) != DT_OK ||
      dt_bw_sub(b, &t[P], &t[HOTF], &t[DIFF]) != DT_OK)
    goto done;
  if (with_int(b, DT_OP_NE, target, b->args->ints[0], &t[VALID]) != DT_OK || dt_bw_to(b, &t[VALID], dtype, &t[VF]) != DT_OK)
    goto done;
  if (b->args->ints[1] == 1) { /* mean: over the targets not ignored */
    if (dt_bw_sum(b, &t[VF], NULL, 0, 1, 0, &t[CNT]) != DT_OK || dt_bw_div(b, g, &t[CNT], &t[GS]) != DT_OK) goto done;
  } else if (dt_bw_share(g, &t[GS]) != DT_OK) {
    goto done;
  }
  if (dt_bw_mul(b, &t[VF], &t[GS], &t[W]) != DT_OK || dt_bw_call_ints(b, DT_OP_UNSQUEEZE, &t[W], 1, &cdim, &t[WU]) != DT_OK ||
      dt_bw_mul(b, &t[DIFF], &t[WU], &t[DX]) != DT_OK)
    goto done;
  dt_bw_set(b, 0, &t[DX]);
  st = DT_OK;
done:
  clear_all(t, NT);
  return st;
}
DT_BACKWARD(cross_entropy, cross_entropy_backward, DT_SAVE(0) | DT_SAVE(1), 0, 0)

/* ---- scaled_dot_product_attention(q [.., L, E], k [.., S, E], v [.., S, Ev], mask?; flags&1
 * causal, scale in scalar[0] if nscalar else 1/sqrt(E)).  The probabilities are recomputed
 * from the scores as the forward made them: P = softmax(scale q k^T + mask) (a bool mask and
 * the causal one, j > i masked, as -inf).  dv = P^T g, dP = g v^T, dS = P (dP - rowsum(dP P)),
 * dq = scale dS k, dk = scale dS^T q, and a float mask's gradient is dS; each summed over the
 * batch dims its operand was broadcast along. */
static int masked_out(dt_bw *b, const dt_value *keep, const dt_value *s, dt_value *out) {
  dt_op_args a = dt_bw_args();
  a.scalar[1] = -INFINITY, a.nscalar = 2;
  const dt_value *in[3] = {keep, s, NULL};
  return dt_bw_calln(b, DT_OP_WHERE, &a, in, 3, out);
}

/* The causal keep mask [L, S] (j <= i), Replicate beside a DTensor q. */
static int causal_keep(dt_bw *b, int64_t L, int64_t S, dt_value *out) {
  enum { AL, AS, ROW, COL, KEEP, NT };
  dt_value t[NT];
  init_all(t, NT);
  int64_t rs[2] = {L, 1}, cs[2] = {1, S};
  dt_op_args none = dt_bw_args();
  int st = arange_int(b, L, &t[AL]) == DT_OK && arange_int(b, S, &t[AS]) == DT_OK &&
                   dt_bw_reshape(b, &t[AL], 2, rs, &t[ROW]) == DT_OK && dt_bw_reshape(b, &t[AS], 2, cs, &t[COL]) == DT_OK &&
                   dt_bw_call(b, DT_OP_LE, &none, &t[COL], &t[ROW], &t[KEEP]) == DT_OK
               ? dt_bw_constant(b, &t[KEEP], b->in[0], out)
               : DT_ERR;
  clear_all(t, NT);
  return st;
}

/* x with its last two dims swapped; x @ y */
static int tr(dt_bw *b, const dt_value *x, dt_value *out) {
  int nd = dt_value_ndim(x);
  return dt_bw_transpose(b, x, nd - 2, nd - 1, out);
}
static int matmul(dt_bw *b, const dt_value *x, const dt_value *y, dt_value *out) {
  dt_op_args a = dt_bw_args();
  return dt_bw_call(b, DT_OP_MATMUL, &a, x, y, out);
}

static int sdpa_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  const dt_value *q = b->in[0], *k = b->in[1], *v = b->in[2], *mask = b->nin > 3 ? b->in[3] : NULL, *g = b->grad[0];
  int nd = dt_value_ndim(q);
  int64_t L = dt_value_shape(q)[nd - 2], E = dt_value_shape(q)[nd - 1], S = dt_value_shape(k)[dt_value_ndim(k) - 2];
  double scale = b->args->nscalar > 0 ? b->args->scalar[0] : 1.0 / sqrt((double)(E ? E : 1));
  int float_mask = mask && dt_value_dtype(mask) != DT_BOOL;
  enum { KT, QK, SC, SM, CK, SCC, P, PT, GV, VT, DP, DPP, RS, DPC, DS, DSK, DQ, DST, DSQ, DK, NT };
  dt_value t[NT];
  init_all(t, NT);
  int st = DT_ERR;
  /* the scores, masked as the forward masked them, and the probabilities */
  if (tr(b, k, &t[KT]) != DT_OK || matmul(b, q, &t[KT], &t[QK]) != DT_OK ||
      dt_bw_mul_scalar(b, &t[QK], scale, &t[SC]) != DT_OK)
    goto done;
  const dt_value *s = &t[SC];
  if (mask) {
    if ((float_mask ? dt_bw_add(b, s, mask, &t[SM]) : masked_out(b, mask, s, &t[SM])) != DT_OK) goto done;
    s = &t[SM];
  }
  if (b->args->flags & 1) {
    if (causal_keep(b, L, S, &t[CK]) != DT_OK || masked_out(b, &t[CK], s, &t[SCC]) != DT_OK) goto done;
    s = &t[SCC];
  }
  int64_t last = dt_value_ndim(s) - 1;
  if (dt_bw_call_ints(b, DT_OP_SOFTMAX, s, 1, &last, &t[P]) != DT_OK) goto done;
  if (b->needs[2] && (tr(b, &t[P], &t[PT]) != DT_OK || matmul(b, &t[PT], g, &t[GV]) != DT_OK || set_summed(b, 2, &t[GV]) != DT_OK))
    goto done;
  if (b->needs[0] || b->needs[1] || (float_mask && b->needs[3])) {
    if (tr(b, v, &t[VT]) != DT_OK || matmul(b, g, &t[VT], &t[DP]) != DT_OK || dt_bw_mul(b, &t[DP], &t[P], &t[DPP]) != DT_OK ||
        dt_bw_sum(b, &t[DPP], &last, 1, 0, 1, &t[RS]) != DT_OK || dt_bw_sub(b, &t[DP], &t[RS], &t[DPC]) != DT_OK ||
        dt_bw_mul(b, &t[P], &t[DPC], &t[DS]) != DT_OK)
      goto done;
    if (b->needs[0] && (matmul(b, &t[DS], k, &t[DSK]) != DT_OK || dt_bw_mul_scalar(b, &t[DSK], scale, &t[DQ]) != DT_OK ||
                        set_summed(b, 0, &t[DQ]) != DT_OK))
      goto done;
    if (b->needs[1] && (tr(b, &t[DS], &t[DST]) != DT_OK || matmul(b, &t[DST], q, &t[DSQ]) != DT_OK ||
                        dt_bw_mul_scalar(b, &t[DSQ], scale, &t[DK]) != DT_OK || set_summed(b, 1, &t[DK]) != DT_OK))
      goto done;
    if (float_mask && b->needs[3] && set_summed(b, 3, &t[DS]) != DT_OK) goto done;
  }
  st = DT_OK;
done:
  clear_all(t, NT);
  return st;
}
DT_BACKWARD(scaled_dot_product_attention, sdpa_backward, DT_SAVE_ALL, 0, 0)

/* ---- embedding(ids, weight [v, d]): each looked-up row's gradient added into the weight's
 * row of its id (ids repeat: they accumulate); the ids have none */
static int embedding_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[1]) return DT_OK;
  const dt_value *ids = b->in[0], *g = b->grad[0];
  int64_t n = dt_value_numel(ids), flat[1] = {n}, rows[2] = {n, b->in_meta[1].shape[1]};
  enum { IDS, ROWS, GW, NT };
  dt_value t[NT];
  init_all(t, NT);
  int st = dt_bw_reshape(b, ids, 1, flat, &t[IDS]) == DT_OK && dt_bw_reshape(b, g, 2, rows, &t[ROWS]) == DT_OK &&
                   dt_bw_index_add_into_zeros(b, 1, 0, &t[IDS], &t[ROWS], &t[GW]) == DT_OK
               ? DT_OK
               : DT_ERR;
  if (st == DT_OK) dt_bw_set(b, 1, &t[GW]);
  clear_all(t, NT);
  return st;
}
DT_BACKWARD(embedding, embedding_backward, DT_SAVE(0), 0, 0)
