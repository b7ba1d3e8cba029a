/* Shape rules of the indexing ops: index_select, index_add, index_put_. */
#include <string.h>

#include "base/error.h"
#include "ops/index_key.h"
#include "ops/ops.h"

/* index_select(x, index, dim): x's shape with dim replaced by the index's length. */
int dt_shape_index_select(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 2 || !a->in[0] || !a->in[1]) return dt_error("index_select: expected a tensor and an index tensor");
  const dt_tensor *x = a->in[0], *ix = a->in[1];
  if (ix->dtype != DT_INT64 && ix->dtype != DT_INT32)
    return dt_error("index_select: index must be an int64 or int32 tensor, got %s", dt_dtype_name(ix->dtype));
  if (ix->ndim > 1) return dt_error("index_select: index must be 0-d or 1-d, got a %d-d tensor", ix->ndim);
  int64_t d = a->nints ? a->ints[0] : -1, nd = x->ndim ? x->ndim : 1;
  if (d < 0 || d >= nd) return dt_error("index_select: dim %lld out of range for a %d-d tensor", (long long)d + 1, x->ndim);
  *out = (dt_meta){.dtype = x->dtype, .ndim = x->ndim};
  for (int i = 0; i < x->ndim; i++) out->shape[i] = i == d ? dt_tensor_numel(ix) : x->shape[i];
  return DT_OK;
}

/* index_add(x, index, src, dim): x's metadata; src has x's dtype and x's shape but for dim,
 * whose size is the index's length (a 0-d x: a 0-d src and one index). */
int dt_shape_index_add(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 3 || !a->in[0] || !a->in[1] || !a->in[2]) return dt_error("index_add: expected a tensor, an index and a source");
  const dt_tensor *x = a->in[0], *ix = a->in[1], *src = a->in[2];
  if (ix->dtype != DT_INT64 && ix->dtype != DT_INT32)
    return dt_error("index_add: index must be an int64 or int32 tensor, got %s", dt_dtype_name(ix->dtype));
  if (ix->ndim > 1) return dt_error("index_add: index must be 0-d or 1-d, got a %d-d tensor", ix->ndim);
  int64_t d = a->nints ? a->ints[0] : -1, nd = x->ndim ? x->ndim : 1;
  if (d < 0 || d >= nd) return dt_error("index_add: dim %lld out of range for a %d-d tensor", (long long)d + 1, x->ndim);
  if (src->dtype != x->dtype)
    return dt_error("index_add: source dtype %s differs from the tensor's %s", dt_dtype_name(src->dtype),
                    dt_dtype_name(x->dtype));
  int64_t n = dt_tensor_numel(ix);
  int ok = src->ndim == x->ndim && (x->ndim > 0 || n == 1);
  for (int k = 0; ok && k < x->ndim; k++) ok = src->shape[k] == (k == d ? n : x->shape[k]);
  if (!ok) {
    char b1[160], b2[160];
    return dt_error("index_add: source shape %s does not match %s with dim %lld of size %lld (the index's length)",
                    dt_format_shape(b1, sizeof b1, src->ndim, src->shape), dt_format_shape(b2, sizeof b2, x->ndim, x->shape),
                    (long long)d + 1, (long long)n);
  }
  *out = (dt_meta){.dtype = x->dtype, .ndim = x->ndim};
  memcpy(out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  return DT_OK;
}

int dt_index_check_value(const char *op, int vnd, const int64_t *vshape, int rnd, const int64_t *region) {
  int ok = vnd <= rnd;
  for (int e = 0; ok && e < vnd; e++) ok = vshape[e] == region[rnd - vnd + e] || vshape[e] == 1;
  if (ok) return DT_OK;
  char s1[160], s2[160];
  return dt_error("%s: shape %s does not broadcast to %s", op, dt_format_shape(s1, sizeof s1, vnd, vshape),
                  dt_format_shape(s2, sizeof s2, rnd, region));
}

/* One dim of an index_put_ key against a size; errors name the dim 1-based. */
static int check_key_dim(const dt_op_args *a, const dt_index_key *k, int d, int64_t size) {
  int64_t s = k->start[d], e = k->stop[d];
  int ok = k->kind[d] == DT_INDEX_ALL ||
           (k->kind[d] == DT_INDEX_SELECT && s >= 0 && s < size) ||
           (k->kind[d] == DT_INDEX_RANGE && k->step[d] > 0 && s >= 0 && s <= size && e >= s && e <= size);
  return ok ? DT_OK : dt_error("%s: the key of dim %d is out of range for size %lld", a->name, d + 1, (long long)size);
}

/* index_put_(self, src, key): self's metadata; src broadcasts to the region self[key]. */
int dt_shape_index_put(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 2 || !a->in[0] || !a->in[1]) return dt_error("%s: expected a tensor and a value tensor", a->name);
  const dt_tensor *t = a->in[0], *v = a->in[1];
  dt_index_key k;
  dt_index_key_from_args(a, &k);
  if (a->nints % 4 || k.ndim > t->ndim)
    return dt_error("%s: a key of %d entries for a %d-d tensor", a->name, a->nints / 4, t->ndim);
  int64_t region[DT_MAX_DIMS];
  int rnd = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (d >= k.ndim) k.kind[d] = DT_INDEX_ALL;
    if (check_key_dim(a, &k, d, t->shape[d]) != DT_OK) return DT_ERR;
    if (k.kind[d] == DT_INDEX_SELECT) continue;
    region[rnd++] = k.kind[d] == DT_INDEX_ALL ? t->shape[d] : dt_index_key_count(&k, d);
    if (t->stride[d] == 0 && region[rnd - 1] > 1)
      return dt_error("%s: cannot write in place into a tensor whose elements overlap (an expanded view); "
                      "clone() it first", a->name);
  }
  if (dt_index_check_value(a->name, v->ndim, v->shape, rnd, region) != DT_OK) return DT_ERR;
  *out = (dt_meta){.dtype = t->dtype, .ndim = t->ndim};
  memcpy(out->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  return DT_OK;
}
