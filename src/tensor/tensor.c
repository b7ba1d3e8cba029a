#include "tensor/tensor.h"
#include "base/error.h"
#include "base/size.h"

#include <stdlib.h>
#include <string.h>

int dt_check_shape(const char *op, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > DT_MAX_DIMS) return dt_error("%s: %d dimensions (at most %d supported)", op, ndim, DT_MAX_DIMS);
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) return dt_error("%s: negative size %lld in dim %d", op, (long long)shape[i], i + 1);
  return dt_check_numel(op, ndim, shape);
}

void dt_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    stride[i] = s;
    s *= shape[i] > 1 ? shape[i] : 1;
  }
}

static dt_tensor *tensor_alloc(void) {
  dt_tensor *t = calloc(1, sizeof *t);
  if (!t) dt_error("out of memory");
  else atomic_init(&t->refcount, 1);
  return t;
}

dt_tensor *dt_tensor_empty(dt_dtype dtype, int ndim, const int64_t *shape, dt_device_type device) {
  if (dt_check_shape("empty", ndim, shape) != DT_OK) return NULL;
  int64_t n = dt_shape_numel(ndim, shape), nbytes; /* checked: n <= DT_MAX_NUMEL */
  if (dt_mul_size(n, (int64_t)dt_dtype_size(dtype), &nbytes) != DT_OK) {
    char buf[200];
    dt_error("empty: shape %s of %s has more bytes than fit in memory", dt_format_shape(buf, sizeof buf, ndim, shape),
             dt_dtype_name(dtype));
    return NULL;
  }
  dt_tensor *t = tensor_alloc();
  if (!t) return NULL;
  t->storage = dt_storage_new((size_t)nbytes, device);
  if (!t->storage) {
    char buf[200];
    dt_error_prefix("shape %s of %s", dt_format_shape(buf, sizeof buf, ndim, shape), dt_dtype_name(dtype));
    return free(t), NULL;
  }
  t->ndim = ndim;
  t->dtype = dtype;
  memcpy(t->shape, shape, sizeof(int64_t) * ndim);
  dt_contiguous_strides(ndim, shape, t->stride);
  return t;
}

dt_tensor *dt_tensor_zeros(dt_dtype dtype, int ndim, const int64_t *shape, dt_device_type device) {
  dt_tensor *t = dt_tensor_empty(dtype, ndim, shape, device);
  if (t && dt_device_get(device)->memset(t->storage->data, 0, t->storage->nbytes) != DT_OK)
    dt_tensor_release(t), t = NULL;
  return t;
}

dt_tensor *dt_tensor_full(dt_dtype dtype, int ndim, const int64_t *shape, double value, dt_device_type device) {
  if (!dt_device_is_host(device)) { /* filled on the host, then copied over */
    dt_tensor *h = dt_tensor_full(dtype, ndim, shape, value, DT_HOST);
    dt_tensor *t = h ? dt_tensor_to_device(h, device) : NULL;
    dt_tensor_release(h);
    return t;
  }
  dt_tensor *t = dt_tensor_empty(dtype, ndim, shape, device);
  if (!t) return NULL;
  int64_t n = dt_tensor_numel(t);
  if (n > 0) {
    dt_store_f64(t->storage->data, dtype, value);
    dt_fill_repeat(t->storage->data, dt_dtype_size(dtype), n);
  }
  return t;
}

void dt_fill_repeat(void *p, size_t elsize, int64_t n) {
  char *c = p;
  /* double the filled prefix each round: log2(n) memcpy calls */
  for (int64_t done = 1; done < n; done *= 2)
    memcpy(c + done * (int64_t)elsize, c, (size_t)((done < n - done ? done : n - done) * (int64_t)elsize));
}

dt_tensor *dt_tensor_empty_like(const dt_tensor *t) {
  return dt_tensor_empty(t->dtype, t->ndim, t->shape, dt_tensor_device(t));
}

dt_tensor *dt_tensor_view_of(const dt_tensor *base, int ndim, const int64_t *shape, const int64_t *stride,
                             int64_t offset) {
  /* The callers validated the view against base; this guards the invariant every tensor
   * keeps (its element count is checked), whatever a new view op forgets. */
  if (dt_check_shape("view", ndim, shape) != DT_OK) return NULL;
  dt_tensor *t = tensor_alloc();
  if (!t) return NULL;
  t->storage = base->storage;
  dt_storage_retain(t->storage);
  t->offset = offset;
  t->ndim = ndim;
  t->dtype = base->dtype;
  memcpy(t->shape, shape, sizeof(int64_t) * ndim);
  memcpy(t->stride, stride, sizeof(int64_t) * ndim);
  return t;
}

void dt_tensor_retain(dt_tensor *t) { atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed); }

void dt_tensor_release(dt_tensor *t) {
  if (!t || atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1) return;
  dt_storage_release(t->storage);
  free(t);
}

int dt_tensor_is_contiguous(const dt_tensor *t) {
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 1) continue;
    if (t->shape[i] == 0) return 1;
    if (t->stride[i] != expected) return 0;
    expected *= t->shape[i];
  }
  return 1;
}

int dt_same_shape(const dt_tensor *a, const dt_tensor *b) {
  return a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim) == 0;
}

int dt_broadcast_shapes(const char *op, int na, const int64_t *sa, int nb, const int64_t *sb, int *nout,
                        int64_t *out) {
  int n = na > nb ? na : nb;
  int64_t tmp[DT_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t a = ia >= 0 ? sa[ia] : 1, b = ib >= 0 ? sb[ib] : 1;
    if (a != b && a != 1 && b != 1) {
      char bufa[160], bufb[160];
      return dt_error("%s: shapes %s and %s cannot broadcast", op, dt_format_shape(bufa, sizeof bufa, na, sa),
                      dt_format_shape(bufb, sizeof bufb, nb, sb));
    }
    tmp[i] = a == 1 ? b : a;
  }
  memcpy(out, tmp, sizeof(int64_t) * n);
  *nout = n;
  return DT_OK;
}

dt_tensor *dt_tensor_expand(const dt_tensor *t, int ndim, const int64_t *shape, const char *op) {
  int64_t stride[DT_MAX_DIMS];
  if (ndim < t->ndim) goto bad;
  for (int i = 0; i < ndim; i++) {
    int j = t->ndim - ndim + i;
    if (j < 0) stride[i] = 0;
    else if (t->shape[j] == shape[i]) stride[i] = t->stride[j];
    else if (t->shape[j] == 1) stride[i] = 0;
    else goto bad;
  }
  if (dt_check_shape(op, ndim, shape) != DT_OK) return NULL;
  return dt_tensor_view_of(t, ndim, shape, stride, t->offset);
bad:;
  char bufa[160], bufb[160];
  dt_error("%s: shape %s cannot be expanded to %s", op, dt_format_shape(bufa, sizeof bufa, t->ndim, t->shape),
           dt_format_shape(bufb, sizeof bufb, ndim, shape));
  return NULL;
}
