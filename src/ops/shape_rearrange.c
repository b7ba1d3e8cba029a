/* Shape rules of the shape and index family: gather, scatter/scatter_add, sort, topk, flip,
 * roll, repeat, tril/triu, diag.  Dims arrive 0-based and normalised (the bindings convert);
 * messages show them 1-based, as Lua users wrote them.  A 0-d tensor counts as one element
 * along its one dim, as torch's dim 0 / -1 of a scalar. */
#include <string.h>

#include "base/error.h"
#include "base/size.h"
#include "ops/ops.h"

static int check_dim(const dt_op_args *a, int64_t d, int ndim) {
  int nd = ndim ? ndim : 1;
  if (d < 0 || d >= nd) return dt_error("%s: dim %lld out of range for a %d-d tensor", a->name, (long long)d + 1, ndim);
  return DT_OK;
}

static int check_index(const dt_op_args *a, const dt_tensor *x, const dt_tensor *ix, int64_t d) {
  if (ix->dtype != DT_INT64 && ix->dtype != DT_INT32)
    return dt_error("%s: index must be an int64 or int32 tensor, got %s", a->name, dt_dtype_name(ix->dtype));
  if (check_dim(a, d, x->ndim) != DT_OK) return DT_ERR;
  int ok = ix->ndim == x->ndim;
  for (int k = 0; ok && k < x->ndim; k++) ok = k == d || ix->shape[k] <= x->shape[k];
  if (ok) return DT_OK;
  char b1[160], b2[160];
  return dt_error("%s: index shape %s does not fit %s (same number of dims, each size at most the tensor's but dim %lld's)",
                  a->name, dt_format_shape(b1, sizeof b1, ix->ndim, ix->shape),
                  dt_format_shape(b2, sizeof b2, x->ndim, x->shape), (long long)d + 1);
}

static void meta_of(dt_meta *out, dt_dtype dtype, int ndim, const int64_t *shape) {
  *out = (dt_meta){.dtype = dtype, .ndim = ndim};
  if (ndim) memcpy(out->shape, shape, sizeof(int64_t) * (size_t)ndim);
}

/* gather(x, index, dim): index's shape, x's dtype */
int dt_shape_gather(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 2 || !a->in[0] || !a->in[1]) return dt_error("%s: expected a tensor and an index tensor", a->name);
  if (check_index(a, a->in[0], a->in[1], a->nints ? a->ints[0] : -1) != DT_OK) return DT_ERR;
  meta_of(out, a->in[0]->dtype, a->in[1]->ndim, a->in[1]->shape);
  return DT_OK;
}

/* scatter/scatter_add(x, index, src, dim): x's metadata; src has x's dtype and index's shape */
int dt_shape_scatter(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 3 || !a->in[0] || !a->in[1] || !a->in[2]) return dt_error("%s: expected a tensor, an index and a source", a->name);
  const dt_tensor *x = a->in[0], *ix = a->in[1], *src = a->in[2];
  if (check_index(a, x, ix, a->nints ? a->ints[0] : -1) != DT_OK) return DT_ERR;
  if (src->dtype != x->dtype)
    return dt_error("%s: source dtype %s differs from the tensor's %s", a->name, dt_dtype_name(src->dtype), dt_dtype_name(x->dtype));
  int ok = src->ndim == ix->ndim;
  for (int k = 0; ok && k < ix->ndim; k++) ok = src->shape[k] == ix->shape[k];
  if (!ok) {
    char b1[160], b2[160];
    return dt_error("%s: source shape %s differs from the index's %s", a->name,
                    dt_format_shape(b1, sizeof b1, src->ndim, src->shape), dt_format_shape(b2, sizeof b2, ix->ndim, ix->shape));
  }
  meta_of(out, x->dtype, x->ndim, x->shape);
  return DT_OK;
}

/* sort(x, dim, descending): values like x, indices int64 */
int dt_shape_sort(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor", a->name);
  const dt_tensor *x = a->in[0];
  if (check_dim(a, a->nints ? a->ints[0] : -1, x->ndim) != DT_OK) return DT_ERR;
  if (x->dtype == DT_BOOL) return dt_error("%s: bool tensors are not supported (cast to an integer dtype)", a->name);
  meta_of(&out[0], x->dtype, x->ndim, x->shape);
  meta_of(&out[1], DT_INT64, x->ndim, x->shape);
  return DT_OK;
}

/* topk(x, dim, k, largest): dim's size k */
int dt_shape_topk(const dt_op_args *a, dt_meta *out) {
  if (dt_shape_sort(a, out) != DT_OK) return DT_ERR;
  const dt_tensor *x = a->in[0];
  int64_t d = a->ints[0], k = a->nints > 1 ? a->ints[1] : -1, size = x->ndim ? x->shape[d] : 1;
  if (k < 0 || k > size)
    return dt_error("%s: k %lld out of range for dim %lld of size %lld (0..%lld)", a->name, (long long)k, (long long)d + 1,
                    (long long)size, (long long)size);
  if (x->ndim) out[0].shape[d] = out[1].shape[d] = k;
  else if (k != 1) return dt_error("%s: k %lld for a 0-d tensor (its one element: k must be 1)", a->name, (long long)k);
  return DT_OK;
}

/* flip(x, dims): x's metadata; each dim once */
int dt_shape_flip(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor", a->name);
  const dt_tensor *x = a->in[0];
  for (int i = 0; i < a->nints; i++) {
    if (check_dim(a, a->ints[i], x->ndim) != DT_OK) return DT_ERR;
    for (int j = 0; j < i; j++)
      if (a->ints[j] == a->ints[i]) return dt_error("%s: dim %lld appears twice", a->name, (long long)a->ints[i] + 1);
  }
  meta_of(out, x->dtype, x->ndim, x->shape);
  return DT_OK;
}

/* roll(x, shifts, dims): x's metadata */
int dt_shape_roll(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor", a->name);
  const dt_tensor *x = a->in[0];
  if (a->nints % 2 || a->nints == 0) return dt_error("%s: expected as many shifts as dims", a->name);
  for (int i = a->nints / 2; i < a->nints; i++)
    if (check_dim(a, a->ints[i], x->ndim) != DT_OK) return DT_ERR;
  meta_of(out, x->dtype, x->ndim, x->shape);
  return DT_OK;
}

/* repeat(x, repeats): repeats has at least x's ndim entries; the output's dim e is
 * repeats[e] times the input's dim e - lead (lead = #repeats - ndim; leading dims are 1) */
int dt_shape_repeat(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor", a->name);
  const dt_tensor *x = a->in[0];
  int n = a->nints, lead = n - x->ndim;
  if (lead < 0)
    return dt_error("%s: %d repeats for a %d-d tensor (at least one per dim)", a->name, n, x->ndim);
  if (n > DT_MAX_DIMS) return dt_error("%s: %d repeats (at most %d dims supported)", a->name, n, DT_MAX_DIMS);
  *out = (dt_meta){.dtype = x->dtype, .ndim = n};
  for (int e = 0; e < n; e++) {
    int64_t r = a->ints[e], s = e < lead ? 1 : x->shape[e - lead];
    if (r < 0) return dt_error("%s: repeat %lld of dim %d is negative", a->name, (long long)r, e + 1);
    if (dt_mul_size(s, r, &out->shape[e]) != DT_OK) return dt_error("%s: the repeated size overflows", a->name);
  }
  return DT_OK;
}

/* tril/triu(x, diagonal): x's metadata, at least 2-d */
int dt_shape_tril(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor", a->name);
  const dt_tensor *x = a->in[0];
  if (x->ndim < 2) return dt_error("%s: expected a tensor of at least 2 dims, got %d", a->name, x->ndim);
  meta_of(out, x->dtype, x->ndim, x->shape);
  return DT_OK;
}

/* diag(x, diagonal): 1-d of n -> the (n + |k|) square matrix (or rows x cols, ints[1..2]);
 * 2-d -> its k-th diagonal */
int dt_shape_diag(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor", a->name);
  const dt_tensor *x = a->in[0];
  int64_t k = a->nints ? a->ints[0] : 0;
  if (k < -DT_MAX_NUMEL || k > DT_MAX_NUMEL) return dt_error("%s: diagonal %lld out of range", a->name, (long long)k);
  int64_t ak = k < 0 ? -k : k;
  if (x->ndim == 1) {
    int64_t n = x->shape[0];
    *out = (dt_meta){.dtype = x->dtype, .ndim = 2};
    if (a->nints >= 3) {
      out->shape[0] = a->ints[1], out->shape[1] = a->ints[2];
      if (out->shape[0] < 0 || out->shape[1] < 0 ||
          n != (k >= 0 ? (out->shape[1] - k < out->shape[0] ? out->shape[1] - k : out->shape[0])
                       : (out->shape[0] + k < out->shape[1] ? out->shape[0] + k : out->shape[1])))
        return dt_error("%s: %lld elements are not diagonal %lld of a %lld x %lld matrix", a->name, (long long)n,
                        (long long)k, (long long)a->ints[1], (long long)a->ints[2]);
      return DT_OK;
    }
    if (dt_add_size(n, ak, &out->shape[0]) != DT_OK) return dt_error("%s: diagonal %lld overflows", a->name, (long long)k);
    out->shape[1] = out->shape[0];
    return DT_OK;
  }
  if (x->ndim != 2) return dt_error("%s: expected a 1-d or 2-d tensor, got %d-d", a->name, x->ndim);
  int64_t r = x->shape[0], c = x->shape[1];
  int64_t n = k >= 0 ? (c - k < r ? c - k : r) : (r + k < c ? r + k : c);
  *out = (dt_meta){.dtype = x->dtype, .ndim = 1};
  out->shape[0] = n < 0 ? 0 : n;
  return DT_OK;
}
