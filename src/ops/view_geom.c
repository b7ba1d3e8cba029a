/* View geometry: the shape, strides and offset each view op gives its input.  Dims and
 * indices are 0-based here; error messages show them 1-based, as Lua users wrote them. */
#include "ops/view_geom.h"
#include "base/error.h"
#include "base/size.h"

#include <string.h>

static void geom_of(const dt_tensor *x, dt_view_geom *g) {
  g->ndim = x->ndim;
  memcpy(g->shape, x->shape, sizeof(int64_t) * x->ndim);
  memcpy(g->stride, x->stride, sizeof(int64_t) * x->ndim);
  g->offset = x->offset;
}

static int check_dim(const dt_op_args *a, int64_t d, int ndim) {
  if (d < 0 || d >= ndim) return dt_error("%s: dim %lld out of range for a %d-d tensor", a->name, (long long)d + 1, ndim);
  return DT_OK;
}

/* Drops dim d of g. */
static void geom_remove(dt_view_geom *g, int d) {
  memmove(g->shape + d, g->shape + d + 1, sizeof(int64_t) * (g->ndim - d - 1));
  memmove(g->stride + d, g->stride + d + 1, sizeof(int64_t) * (g->ndim - d - 1));
  g->ndim--;
}

int dt_view_transpose(const dt_op_args *a, dt_view_geom *g) {
  const dt_tensor *x = a->in[0];
  geom_of(x, g);
  if (x->ndim == 0 && a->ints[0] == 0 && a->ints[1] == 0) return DT_OK; /* torch allows 0-d */
  if (check_dim(a, a->ints[0], x->ndim) || check_dim(a, a->ints[1], x->ndim)) return DT_ERR;
  int d1 = (int)a->ints[0], d2 = (int)a->ints[1];
  g->shape[d1] = x->shape[d2], g->shape[d2] = x->shape[d1];
  g->stride[d1] = x->stride[d2], g->stride[d2] = x->stride[d1];
  return DT_OK;
}

int dt_view_permute(const dt_op_args *a, dt_view_geom *g) {
  const dt_tensor *x = a->in[0];
  if (a->nints != x->ndim)
    return dt_error("%s: %d dims given for a %d-d tensor (give every dim once)", a->name, a->nints, x->ndim);
  int seen[DT_MAX_DIMS] = {0};
  geom_of(x, g);
  for (int i = 0; i < a->nints; i++) {
    int64_t d = a->ints[i];
    if (check_dim(a, d, x->ndim)) return DT_ERR;
    if (seen[d]++) return dt_error("%s: dim %lld appears twice", a->name, (long long)d + 1);
    g->shape[i] = x->shape[d];
    g->stride[i] = x->stride[d];
  }
  return DT_OK;
}

int dt_view_narrow(const dt_op_args *a, dt_view_geom *g) {
  const dt_tensor *x = a->in[0];
  if (check_dim(a, a->ints[0], x->ndim)) return DT_ERR;
  int d = (int)a->ints[0];
  int64_t start = a->ints[1], len = a->ints[2], size = x->shape[d];
  if (start < 0 || start > size)
    return dt_error("%s: start %lld out of range for dim %d of size %lld", a->name, (long long)start + 1, d + 1,
                    (long long)size);
  if (len < 0) return dt_error("%s: length must be non-negative, got %lld", a->name, (long long)len);
  if (start + len > size)
    return dt_error("%s: start %lld + length %lld exceeds dim %d of size %lld", a->name, (long long)start + 1,
                    (long long)len, d + 1, (long long)size);
  geom_of(x, g);
  g->shape[d] = len;
  g->offset += start * x->stride[d];
  return DT_OK;
}

/* ints: dim, start, stop (exclusive), step > 0; 0 <= start <= stop <= size. */
int dt_view_slice(const dt_op_args *a, dt_view_geom *g) {
  const dt_tensor *x = a->in[0];
  if (check_dim(a, a->ints[0], x->ndim)) return DT_ERR;
  int d = (int)a->ints[0];
  int64_t start = a->ints[1], stop = a->ints[2], step = a->ints[3], size = x->shape[d];
  if (step <= 0) return dt_error("%s: step must be positive, got %lld", a->name, (long long)step);
  if (start < 0 || stop > size || start > stop)
    return dt_error("%s: range %lld..%lld out of bounds for dim %d of size %lld", a->name, (long long)start + 1,
                    (long long)stop, d + 1, (long long)size);
  geom_of(x, g);
  g->shape[d] = (stop - start) / step + ((stop - start) % step != 0);
  /* step > size leaves at most one element, whose stride does not matter: keep it in range */
  if (dt_mul_size(x->stride[d], step, &g->stride[d]) != DT_OK) g->stride[d] = x->stride[d];
  g->offset += start * x->stride[d];
  return DT_OK;
}

int dt_view_select(const dt_op_args *a, dt_view_geom *g) {
  const dt_tensor *x = a->in[0];
  if (x->ndim == 0) return dt_error("%s: a 0-d tensor has no dim to select from", a->name);
  if (check_dim(a, a->ints[0], x->ndim)) return DT_ERR;
  int d = (int)a->ints[0];
  int64_t i = a->ints[1];
  if (i < 0 || i >= x->shape[d])
    return dt_error("%s: index %lld out of range for dim %d of size %lld", a->name, (long long)i + 1, d + 1,
                    (long long)x->shape[d]);
  geom_of(x, g);
  g->offset += i * x->stride[d];
  geom_remove(g, d);
  return DT_OK;
}

int dt_view_unsqueeze(const dt_op_args *a, dt_view_geom *g) {
  const dt_tensor *x = a->in[0];
  if (x->ndim == DT_MAX_DIMS) return dt_error("%s: a tensor has at most %d dims", a->name, DT_MAX_DIMS);
  if (check_dim(a, a->ints[0], x->ndim + 1)) return DT_ERR;
  int d = (int)a->ints[0];
  geom_of(x, g);
  memmove(g->shape + d + 1, g->shape + d, sizeof(int64_t) * (x->ndim - d));
  memmove(g->stride + d + 1, g->stride + d, sizeof(int64_t) * (x->ndim - d));
  g->shape[d] = 1;
  g->stride[d] = d < x->ndim ? x->shape[d] * x->stride[d] : 1;
  g->ndim++;
  return DT_OK;
}

/* ints: dims to drop when of size 1 (others are kept, as torch does); DT_ARG_ALL_DIMS: all. */
int dt_view_squeeze(const dt_op_args *a, dt_view_geom *g) {
  const dt_tensor *x = a->in[0];
  int drop[DT_MAX_DIMS] = {0};
  for (int i = 0; i < a->nints; i++) {
    if (x->ndim == 0 && a->ints[i] == 0) continue; /* torch accepts dim 0 / -1 of a 0-d tensor */
    if (check_dim(a, a->ints[i], x->ndim)) return DT_ERR;
    drop[a->ints[i]] = 1;
  }
  geom_of(x, g);
  for (int d = x->ndim - 1; d >= 0; d--)
    if (x->shape[d] == 1 && ((a->flags & DT_ARG_ALL_DIMS) || drop[d])) geom_remove(g, d);
  return DT_OK;
}


int dt_view_target_shape(const dt_op_args *a, int *ndim, int64_t *shape) {
  const dt_tensor *x = a->in[0];
  int infer = -1;
  char b1[160], b2[160];
  if (a->nints > DT_MAX_DIMS) return dt_error("%s: %d dims (at most %d supported)", a->name, a->nints, DT_MAX_DIMS);
  for (int i = 0; i < a->nints; i++) {
    if (a->ints[i] == -1) {
      if (infer >= 0) return dt_error("%s: only one size can be -1 (inferred)", a->name);
      infer = i;
    } else if (a->ints[i] < 0) {
      return dt_error("%s: invalid size %lld in dim %d", a->name, (long long)a->ints[i], i + 1);
    }
  }
  memcpy(shape, a->ints, sizeof(int64_t) * a->nints);
  *ndim = a->nints;
  int64_t n = dt_tensor_numel(x), rest, m;
  if (infer >= 0) shape[infer] = 1;
  if (dt_shape_numel_checked(a->nints, shape, &rest) != DT_OK) goto bad; /* more elements than any tensor has */
  if (infer >= 0 && rest != 0 && n % rest == 0) shape[infer] = n / rest;
  else if (infer >= 0) goto bad; /* rest == 0: the -1 is ambiguous */
  if (dt_shape_numel_checked(*ndim, shape, &m) == DT_OK && m == n) return DT_OK;
bad:
  return dt_error("%s: shape %s is invalid for a tensor of shape %s (%lld elements)", a->name,
                  dt_format_shape(b1, sizeof b1, a->nints, a->ints), dt_format_shape(b2, sizeof b2, x->ndim, x->shape),
                  (long long)n);
}

/* ints: start, end (inclusive). */
int dt_view_flatten_shape(const dt_op_args *a, int *ndim, int64_t *shape) {
  const dt_tensor *x = a->in[0];
  if (x->ndim == 0) return shape[0] = 1, *ndim = 1, DT_OK;
  int64_t s = a->ints[0], e = a->ints[1];
  if (check_dim(a, s, x->ndim) || check_dim(a, e, x->ndim)) return DT_ERR;
  if (s > e) return dt_error("%s: start dim %lld comes after end dim %lld", a->name, (long long)s + 1, (long long)e + 1);
  int n = 0;
  for (int i = 0; i < s; i++) shape[n++] = x->shape[i];
  shape[n++] = dt_shape_numel((int)(e - s + 1), x->shape + s);
  for (int i = (int)e + 1; i < x->ndim; i++) shape[n++] = x->shape[i];
  *ndim = n;
  return DT_OK;
}

int dt_view_expand_shape(const dt_op_args *a, int *ndim, int64_t *shape) {
  const dt_tensor *x = a->in[0];
  char b1[160], b2[160];
  if (a->nints < x->ndim || a->nints > DT_MAX_DIMS)
    return dt_error("%s: %d sizes given for a %d-d tensor (need at least %d, at most %d)", a->name, a->nints, x->ndim,
                    x->ndim, DT_MAX_DIMS);
  int lead = a->nints - x->ndim;
  for (int i = 0; i < a->nints; i++) {
    int64_t s = a->ints[i];
    if (s == -1 && i >= lead) s = x->shape[i - lead];
    if (s < 0) return dt_error("%s: invalid size %lld in dim %d", a->name, (long long)a->ints[i], i + 1);
    if (i >= lead && x->shape[i - lead] != 1 && x->shape[i - lead] != s)
      return dt_error("%s: shape %s cannot be expanded to %s (dim %d: %lld vs %lld)", a->name,
                      dt_format_shape(b1, sizeof b1, x->ndim, x->shape), dt_format_shape(b2, sizeof b2, a->nints, a->ints),
                      i + 1, (long long)x->shape[i - lead], (long long)s);
    shape[i] = s;
  }
  *ndim = a->nints;
  return DT_OK;
}

/* Dims of x that are contiguous with each other form chunks; each chunk must map onto
 * whole dims of the new shape. */
int dt_view_strides(const dt_tensor *x, int ndim, const int64_t *shape, int64_t *stride) {
  if (x->ndim == 0 || dt_tensor_numel(x) == 0) {
    dt_contiguous_strides(ndim, shape, stride);
    return 1;
  }
  int view_d = ndim - 1;
  int64_t chunk_base = x->stride[x->ndim - 1], tensor_numel = 1, view_numel = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    tensor_numel *= x->shape[d];
    if (d == 0 || (x->shape[d - 1] != 1 && x->stride[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        stride[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (d > 0) chunk_base = x->stride[d - 1], tensor_numel = 1, view_numel = 1;
    }
  }
  return view_d == -1;
}

