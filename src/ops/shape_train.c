/* Shape rules of the fused training-step ops (op_list.h's last block): the optimizer update,
 * cross_entropy's and sdpa's backward. */
#include "base/error.h"
#include "ops/ops.h"

#include <string.h>

static int same_shape(const dt_tensor *a, const dt_tensor *b) {
  return a->ndim == b->ndim && (a->ndim == 0 || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0);
}

/* The tensors an in-place update writes may not have overlapping elements (expanded views). */
static int writable(const dt_op_args *a, const dt_tensor *t, const char *what) {
  for (int i = 0; i < t->ndim; i++)
    if (t->stride[i] == 0 && t->shape[i] > 1)
      return dt_error("%s: cannot write %s in place: its elements overlap (an expanded view); clone() it first", a->name,
                      what);
  return DT_OK;
}

/* adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq?, step?, lr?): one floating dtype
 * and one shape for the first five; the step count and the learning rate as tensors (a graph's:
 * the kernel computes the bias corrections from them) one element of float32 or float64; the
 * result is param. */
int dt_shape_adam_step(const dt_op_args *a, dt_meta *out) {
  static const char *const names[] = {"param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step", "lr"};
  if (a->nin < 4 || a->nin > 7) return dt_error("%s: expected 4 to 7 tensors, got %d", a->name, a->nin);
  const dt_tensor *p = a->in[0];
  char b1[160], b2[160];
  for (int i = 0; i < a->nin; i++) {
    const dt_tensor *t = a->in[i];
    if (!t) {
      if (i >= 4) continue;
      return dt_error("%s: %s is missing", a->name, names[i]);
    }
    if (i > 4) {
      if (dt_tensor_numel(t) != 1 || (t->dtype != DT_FLOAT32 && t->dtype != DT_FLOAT64))
        return dt_error("%s: %s must be a 1-element float32 or float64 tensor, got %s of %lld elements", a->name,
                        names[i], dt_dtype_name(t->dtype), (long long)dt_tensor_numel(t));
      continue;
    }
    if (!dt_dtype_is_float(t->dtype))
      return dt_error("%s: %s must be a floating-point tensor, got %s", a->name, names[i], dt_dtype_name(t->dtype));
    if (t->dtype != p->dtype)
      return dt_error("%s: %s has dtype %s, param %s (one dtype for all)", a->name, names[i], dt_dtype_name(t->dtype),
                      dt_dtype_name(p->dtype));
    if (!same_shape(t, p))
      return dt_error("%s: %s has shape %s, param %s (one shape for all)", a->name, names[i],
                      dt_format_shape(b1, sizeof b1, t->ndim, t->shape), dt_format_shape(b2, sizeof b2, p->ndim, p->shape));
    if (i != 1 && writable(a, t, names[i]) != DT_OK) return DT_ERR;
  }
  if (a->nscalar < 4 || a->nints < 2) return dt_error("%s: expected 4 numbers and 2 encoded numbers", a->name);
  int step = a->nin > 5 && a->in[5], lr = a->nin > 6 && a->in[6];
  if (lr && !step) return dt_error("%s: lr given as a tensor without the step tensor", a->name);
  if (step && !lr && a->nints < 3) return dt_error("%s: the step tensor without lr (a tensor or ints[2])", a->name);
  out->dtype = p->dtype;
  out->ndim = p->ndim;
  if (p->ndim) memcpy(out->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim);
  return DT_OK;
}

/* cross_entropy_backward(grad, logits, target): logits and target as cross_entropy checks
 * them, grad shaped like its result; d logits shaped like the logits. */
int dt_shape_cross_entropy_backward(const dt_op_args *a, dt_meta *out) {
  if (a->nin != 3 || !a->in[0] || !a->in[1] || !a->in[2])
    return dt_error("%s: expected grad, logits and target tensors", a->name);
  const dt_tensor *g = a->in[0], *x = a->in[1];
  dt_op_args fwd = *a;
  fwd.in = a->in + 1, fwd.nin = 2;
  dt_meta loss;
  char b1[160], b2[160];
  if (dt_shape_cross_entropy(&fwd, &loss) != DT_OK) return DT_ERR;
  if (g->dtype != x->dtype)
    return dt_error("%s: grad has dtype %s, logits %s", a->name, dt_dtype_name(g->dtype), dt_dtype_name(x->dtype));
  if (g->ndim != loss.ndim || (g->ndim && memcmp(g->shape, loss.shape, sizeof(int64_t) * (size_t)g->ndim) != 0))
    return dt_error("%s: grad has shape %s, the loss %s", a->name, dt_format_shape(b1, sizeof b1, g->ndim, g->shape),
                    dt_format_shape(b2, sizeof b2, loss.ndim, loss.shape));
  out->dtype = x->dtype;
  out->ndim = x->ndim;
  memcpy(out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  return DT_OK;
}

static void meta_like(dt_meta *m, const dt_tensor *t) {
  m->dtype = t->dtype;
  m->ndim = t->ndim;
  if (t->ndim) memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

/* sdpa_backward(grad, q, k, v, mask?): q, k, v and the mask as sdpa checks them, with q, k, v
 * of the output's batch dims (no broadcasting: the rule composes the other cases), grad of
 * the output's shape and dtype; (dq, dk, dv) shaped like (q, k, v). */
int dt_shape_sdpa_backward(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 4 || a->nin > 5 || !a->in[0] || !a->in[1] || !a->in[2] || !a->in[3])
    return dt_error("%s: expected grad, q, k and v tensors (and an optional mask)", a->name);
  const dt_tensor *g = a->in[0];
  dt_op_args fwd = *a;
  fwd.in = a->in + 1, fwd.nin = a->nin - 1;
  dt_meta y;
  char b1[160], b2[160];
  if (dt_shape_sdpa(&fwd, &y) != DT_OK) return DT_ERR;
  static const char *const names[] = {"q", "k", "v"};
  for (int i = 1; i <= 3; i++) {
    const dt_tensor *t = a->in[i];
    if (t->ndim != y.ndim || (y.ndim > 2 && memcmp(t->shape, y.shape, sizeof(int64_t) * (size_t)(y.ndim - 2)) != 0))
      return dt_error("%s: %s %s does not have the output's batch dims %s (broadcast batches are not fused)", a->name,
                      names[i - 1], dt_format_shape(b1, sizeof b1, t->ndim, t->shape),
                      dt_format_shape(b2, sizeof b2, y.ndim - 2, y.shape));
  }
  if (g->dtype != y.dtype || g->ndim != y.ndim || memcmp(g->shape, y.shape, sizeof(int64_t) * (size_t)y.ndim) != 0)
    return dt_error("%s: grad is %s %s, the output %s %s", a->name, dt_dtype_name(g->dtype),
                    dt_format_shape(b1, sizeof b1, g->ndim, g->shape), dt_dtype_name(y.dtype),
                    dt_format_shape(b2, sizeof b2, y.ndim, y.shape));
  for (int i = 0; i < 3; i++) meta_like(&out[i], a->in[i + 1]);
  return DT_OK;
}
