/* Shape rules of cat and stack: in[0..nin-1] are the inputs, ints[0] the dim (0-based;
 * for stack in 0..ndim).  The dtype is the promotion of every input's. */
#include "base/error.h"
#include "ops/join.h"
#include "ops/ops.h"

#include <stdio.h>
#include <string.h>

static int is_empty_1d(const dt_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

const dt_tensor *dt_join_ref(const dt_op_args *a) {
  for (int i = 0; i < a->nin; i++)
    if (!is_empty_1d(a->in[i])) return a->in[i];
  return a->in[0];
}

int dt_join_skips(const dt_tensor *t, const dt_tensor *ref) { return t != ref && is_empty_1d(t); }

static int check_inputs(const dt_op_args *a, int extra, dt_meta *out) {
  if (a->nin < 1) return dt_error("%s: expected a non-empty list of tensors", a->name);
  const dt_tensor *ref = dt_join_ref(a);
  int64_t d = a->ints[0];
  if (d < 0 || d >= ref->ndim + extra)
    return dt_error("%s: dim %lld out of range for %d-d tensors", a->name, (long long)d + 1, ref->ndim);
  out->dtype = a->in[0]->dtype;
  for (int i = 1; i < a->nin; i++) out->dtype = dt_dtype_promote(out->dtype, a->in[i]->dtype);
  return DT_OK;
}

static int mismatch(const dt_op_args *a, int i, const dt_tensor *ref, const char *rule) {
  char b1[160], b2[160];
  int r = 0;
  while (a->in[r] != ref) r++;
  return dt_error("%s: tensor %d has shape %s but tensor %d has shape %s (%s)", a->name, i + 1,
                  dt_format_shape(b1, sizeof b1, a->in[i]->ndim, a->in[i]->shape), r + 1,
                  dt_format_shape(b2, sizeof b2, ref->ndim, ref->shape), rule);
}

int dt_shape_cat(const dt_op_args *a, dt_meta *out) {
  if (a->nin > 0 && dt_join_ref(a)->ndim == 0)
    return dt_error("%s: zero-dimensional tensors cannot be concatenated (use stack)", a->name);
  if (check_inputs(a, 0, out) != DT_OK) return DT_ERR;
  const dt_tensor *ref = dt_join_ref(a);
  int d = (int)a->ints[0];
  out->ndim = ref->ndim;
  memcpy(out->shape, ref->shape, sizeof(int64_t) * ref->ndim);
  out->shape[d] = 0;
  for (int i = 0; i < a->nin; i++) {
    const dt_tensor *t = a->in[i];
    if (dt_join_skips(t, ref)) continue;
    int ok = t->ndim == ref->ndim;
    for (int k = 0; ok && k < t->ndim; k++) ok = k == d || t->shape[k] == ref->shape[k];
    if (!ok) {
      char rule[64];
      snprintf(rule, sizeof rule, "sizes must match except in dim %d", d + 1);
      return mismatch(a, i, ref, rule);
    }
    out->shape[d] += t->shape[d];
  }
  return DT_OK;
}

int dt_shape_stack(const dt_op_args *a, dt_meta *out) {
  if (check_inputs(a, 1, out) != DT_OK) return DT_ERR;
  const dt_tensor *ref = a->in[0];
  int d = (int)a->ints[0];
  for (int i = 1; i < a->nin; i++)
    if (!dt_same_shape(a->in[i], ref)) return mismatch(a, i, ref, "all shapes must be equal");
  if (ref->ndim == DT_MAX_DIMS) return dt_error("%s: a tensor has at most %d dims", a->name, DT_MAX_DIMS);
  out->ndim = ref->ndim + 1;
  memcpy(out->shape, ref->shape, sizeof(int64_t) * d);
  out->shape[d] = a->nin;
  memcpy(out->shape + d + 1, ref->shape + d, sizeof(int64_t) * (ref->ndim - d));
  return DT_OK;
}
