/* Indexing kernels: index_select copies the selected slices one by one (strided copies);
 * index_put_ copies a value into the view t[key]. */
#include "base/error.h"
#include "kernels/cpu/kernel_table.h"
#include "ops/index_key.h"

/* The slice of t at position i of dim d (a view, d kept with size 1; 0-d tensors: t itself). */
static dt_tensor *slice_at(const dt_tensor *t, int d, int64_t i) {
  if (t->ndim == 0) return dt_tensor_view_of(t, 0, t->shape, t->stride, t->offset);
  int64_t shape[DT_MAX_DIMS];
  for (int k = 0; k < t->ndim; k++) shape[k] = k == d ? 1 : t->shape[k];
  return dt_tensor_view_of(t, t->ndim, shape, t->stride, t->offset + i * t->stride[d]);
}

int dt_cpu_index_select(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *x = a->in[0], *ix = a->in[1];
  int d = (int)a->ints[0];
  int64_t n = dt_tensor_numel(ix), size = x->ndim ? x->shape[d] : 1;
  const char *base = dt_tensor_data(ix);
  for (int64_t j = 0; j < n; j++) {
    int64_t off = 0, rem = j; /* ix may be strided: its element j */
    for (int k = ix->ndim - 1; k >= 0; k--) off += (rem % ix->shape[k]) * ix->stride[k], rem /= ix->shape[k];
    int64_t i = dt_load_i64(base + off * (int64_t)dt_dtype_size(ix->dtype), ix->dtype);
    if (i < 0 || i >= size) /* shown 1-based, as Lua users wrote it (unsigned: i may be INT64_MAX) */
      return dt_error("index_select: index %s%llu out of range for dim %d of size %lld (indices are 1-based: 1..%lld)",
                      i < -1 ? "-" : "", i < -1 ? 0ULL - ((unsigned long long)i + 1) : (unsigned long long)i + 1,
                      d + 1, (long long)size, (long long)size);
    dt_tensor *src = slice_at(x, d, i), *dst = slice_at(out[0], d, j);
    int rc = src && dst ? dt_tensor_copy_(dst, src, a->name) : dt_error("index_select: out of memory");
    if (src) dt_tensor_release(src);
    if (dst) dt_tensor_release(dst);
    if (rc != DT_OK) return rc;
  }
  return DT_OK;
}

/* The view t[key] (the shape rule validated the key). */
static dt_tensor *key_view(const dt_tensor *t, const dt_index_key *k) {
  int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS], off = t->offset;
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    dt_index_kind kind = d < k->ndim ? k->kind[d] : DT_INDEX_ALL;
    if (kind == DT_INDEX_SELECT) {
      off += k->start[d] * t->stride[d];
      continue;
    }
    if (kind == DT_INDEX_ALL) {
      shape[n] = t->shape[d], stride[n++] = t->stride[d];
      continue;
    }
    off += k->start[d] * t->stride[d];
    shape[n] = dt_index_key_count(k, d), stride[n++] = t->stride[d] * k->step[d];
  }
  return dt_tensor_view_of(t, n, shape, stride, off);
}

/* copy_ into the view t[key]: copy_ reads a value that overlaps it first (t[{2, 5}] = t[{1, 4}]). */
int dt_cpu_index_put_(const dt_op_args *a, dt_tensor **out) {
  dt_index_key k;
  dt_index_key_from_args(a, &k);
  dt_tensor *view = key_view(out[0], &k);
  if (!view) return dt_error("%s: out of memory", a->name);
  dt_tensor *in[2] = {view, a->in[1]};
  dt_op_args c = *a;
  c.in = in, c.nin = 2;
  int rc = dt_cpu_copy_(&c, &view);
  dt_tensor_release(view);
  return rc;
}
