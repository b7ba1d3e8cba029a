/* Shape rules of the neural-network ops: embedding, layer_norm/rms_norm, cross_entropy, sdpa. */
#include "base/error.h"
#include "ops/ops.h"

#include <string.h>

static int need_float(const dt_op_args *a, const dt_tensor *t, const char *what) {
  if (!dt_dtype_is_float(t->dtype))
    return dt_error("%s: %s must be a floating-point tensor, got %s", a->name, what, dt_dtype_name(t->dtype));
  return DT_OK;
}

static void set_meta(dt_meta *m, dt_dtype dtype, int ndim, const int64_t *shape) {
  m->dtype = dtype;
  m->ndim = ndim;
  if (ndim) memcpy(m->shape, shape, sizeof(int64_t) * (size_t)ndim);
}

static int same_shape(int na, const int64_t *sa, int nb, const int64_t *sb) {
  return na == nb && (na == 0 || memcmp(sa, sb, sizeof(int64_t) * (size_t)na) == 0);
}

/* in: ids (int64/int32), weight [v, d] -> ids.shape + [d] in weight's dtype. */
int dt_shape_embedding(const dt_op_args *a, dt_meta *out) {
  const dt_tensor *ids = a->in[0], *w = a->in[1];
  char b[64];
  if (ids->dtype != DT_INT64 && ids->dtype != DT_INT32)
    return dt_error("%s: ids must be an int64 or int32 tensor, got %s", a->name, dt_dtype_name(ids->dtype));
  if (w->ndim != 2) return dt_error("%s: weight must be 2-d [vocab, dim], got shape %s", a->name, dt_format_shape(b, sizeof b, w->ndim, w->shape));
  if (ids->ndim + 1 > DT_MAX_DIMS) return dt_error("%s: ids have too many dims (%d)", a->name, ids->ndim);
  set_meta(out, w->dtype, ids->ndim, ids->shape);
  out->shape[out->ndim++] = w->shape[1];
  return DT_OK;
}

/* layer_norm: in x, weight?, bias?; rms_norm: in x, weight?.
 * ints[0] = k (normalised dims), ints[1..k] = normalized_shape, scalar[0] = eps. */
int dt_shape_layer_norm(const dt_op_args *a, dt_meta *out) {
  const dt_tensor *x = a->in[0];
  char b1[128], b2[128];
  if (need_float(a, x, "input") != DT_OK) return DT_ERR;
  int k = (int)a->ints[0];
  const int64_t *ns = a->ints + 1;
  if (a->nints < 1 || k < 1 || k > DT_MAX_DIMS || a->nints < k + 1)
    return dt_error("%s: normalized_shape must have 1 to %d dims", a->name, DT_MAX_DIMS);
  if (k > x->ndim || !same_shape(k, ns, k, x->shape + x->ndim - k))
    return dt_error("%s: normalized_shape %s does not match the last dims of input %s", a->name,
                    dt_format_shape(b1, sizeof b1, k, ns), dt_format_shape(b2, sizeof b2, x->ndim, x->shape));
  static const char *const names[] = {"input", "weight", "bias"};
  for (int i = 1; i < a->nin; i++) {
    const dt_tensor *p = a->in[i];
    if (!p) continue;
    if (need_float(a, p, names[i]) != DT_OK) return DT_ERR;
    if (!same_shape(p->ndim, p->shape, k, ns))
      return dt_error("%s: %s shape %s does not match normalized_shape %s", a->name, names[i],
                      dt_format_shape(b1, sizeof b1, p->ndim, p->shape), dt_format_shape(b2, sizeof b2, k, ns));
  }
  set_meta(out, x->dtype, x->ndim, x->shape);
  return DT_OK;
}

/* layer_norm_backward(grad, x, w?): x and w as layer_norm checks them, grad x's shape; dx
 * shaped like x, dw and db shaped like normalized_shape (x's dtype). */
int dt_shape_layer_norm_backward(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 2 || !a->in[0] || !a->in[1]) return dt_error("%s: expected grad and input tensors", a->name);
  const dt_tensor *g = a->in[0], *x = a->in[1];
  dt_op_args fwd = *a; /* the forward's operands: (x, w) */
  fwd.in = a->in + 1, fwd.nin = a->nin > 2 ? 2 : 1;
  if (dt_shape_layer_norm(&fwd, out) != DT_OK) return DT_ERR;
  if (need_float(a, g, "grad") != DT_OK) return DT_ERR;
  if (!same_shape(g->ndim, g->shape, x->ndim, x->shape)) {
    char b1[128], b2[128];
    return dt_error("%s: grad %s and input %s differ in shape", a->name, dt_format_shape(b1, sizeof b1, g->ndim, g->shape),
                    dt_format_shape(b2, sizeof b2, x->ndim, x->shape));
  }
  int k = (int)a->ints[0];
  set_meta(&out[1], x->dtype, k, a->ints + 1);
  out[2] = out[1];
  return DT_OK;
}

/* logits [n, c, d...] with target [n, d...], or logits [c] with a 0-d target.
 * ints[1] = reduction: 0 none (target's shape), 1 mean, 2 sum (0-d). */
int dt_shape_cross_entropy(const dt_op_args *a, dt_meta *out) {
  const dt_tensor *x = a->in[0], *t = a->in[1];
  char b1[128], b2[128];
  if (need_float(a, x, "logits") != DT_OK) return DT_ERR;
  if (t->dtype != DT_INT64 && t->dtype != DT_INT32)
    return dt_error("%s: target must hold class indices (int64 or int32), got %s", a->name, dt_dtype_name(t->dtype));
  int ok = x->ndim >= 1 && t->ndim == (x->ndim == 1 ? 0 : x->ndim - 1);
  if (ok && x->ndim >= 2) {
    ok = t->shape[0] == x->shape[0];
    for (int d = 2; d < x->ndim; d++) ok = ok && t->shape[d - 1] == x->shape[d];
  }
  if (!ok)
    return dt_error("%s: target shape %s does not match logits %s (expected logits [n, classes, ...] and target [n, ...])",
                    a->name, dt_format_shape(b1, sizeof b1, t->ndim, t->shape),
                    dt_format_shape(b2, sizeof b2, x->ndim, x->shape));
  if (a->ints[1] < 0 || a->ints[1] > 2) return dt_error("%s: invalid reduction code %d", a->name, (int)a->ints[1]);
  if (a->ints[1] == 0) set_meta(out, x->dtype, t->ndim, t->shape);
  else set_meta(out, x->dtype, 0, NULL);
  return DT_OK;
}

/* q [..., L, E], k [..., S, E], v [..., S, Ev], mask? broadcastable to [..., L, S]
 * -> [batch..., L, Ev], batch = broadcast of the three batch shapes. */
int dt_shape_sdpa(const dt_op_args *a, dt_meta *out) {
  const dt_tensor *q = a->in[0], *k = a->in[1], *v = a->in[2], *m = a->nin > 3 ? a->in[3] : NULL;
  char b1[128], b2[128];
  const char *names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) {
    if (a->in[i]->ndim < 2)
      return dt_error("%s: %s must have at least 2 dims [..., seq, dim], got %s", a->name, names[i],
                      dt_format_shape(b1, sizeof b1, a->in[i]->ndim, a->in[i]->shape));
    if (need_float(a, a->in[i], names[i]) != DT_OK) return DT_ERR;
  }
  if (q->dtype != k->dtype || q->dtype != v->dtype)
    return dt_error("%s: q, k and v must have the same dtype, got %s, %s and %s", a->name, dt_dtype_name(q->dtype),
                    dt_dtype_name(k->dtype), dt_dtype_name(v->dtype));
  if (q->shape[q->ndim - 1] != k->shape[k->ndim - 1])
    return dt_error("%s: q %s and k %s have different embedding sizes", a->name,
                    dt_format_shape(b1, sizeof b1, q->ndim, q->shape), dt_format_shape(b2, sizeof b2, k->ndim, k->shape));
  if (k->shape[k->ndim - 2] != v->shape[v->ndim - 2])
    return dt_error("%s: k %s and v %s have different sequence lengths", a->name,
                    dt_format_shape(b1, sizeof b1, k->ndim, k->shape), dt_format_shape(b2, sizeof b2, v->ndim, v->shape));
  int nb;
  int64_t bs[DT_MAX_DIMS];
  if (dt_broadcast_shapes(a->name, q->ndim - 2, q->shape, k->ndim - 2, k->shape, &nb, bs) != DT_OK ||
      dt_broadcast_shapes(a->name, nb, bs, v->ndim - 2, v->shape, &nb, bs) != DT_OK)
    return DT_ERR;
  if (nb + 2 > DT_MAX_DIMS) return dt_error("%s: too many batch dims", a->name);
  int64_t L = q->shape[q->ndim - 2], S = k->shape[k->ndim - 2];
  set_meta(out, q->dtype, nb, bs);
  out->shape[nb] = L, out->shape[nb + 1] = S; /* the scores' shape first, to check the mask */
  out->ndim = nb + 2;
  if (m) {
    if (a->flags & 1) return dt_error("%s: attn_mask and is_causal cannot both be set", a->name);
    if (m->dtype != DT_BOOL && m->dtype != q->dtype)
      return dt_error("%s: attn_mask must be bool or %s like q, got %s", a->name, dt_dtype_name(q->dtype),
                      dt_dtype_name(m->dtype));
    int nm;
    int64_t ms[DT_MAX_DIMS];
    if (dt_broadcast_shapes(a->name, m->ndim, m->shape, out->ndim, out->shape, &nm, ms) != DT_OK ||
        !same_shape(nm, ms, out->ndim, out->shape))
      return dt_error("%s: attn_mask %s cannot broadcast to the scores' shape %s", a->name,
                      dt_format_shape(b1, sizeof b1, m->ndim, m->shape), dt_format_shape(b2, sizeof b2, out->ndim, out->shape));
  }
  out->shape[nb + 1] = v->shape[v->ndim - 1];
  return DT_OK;
}
