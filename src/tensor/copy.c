/* Strided copy with broadcasting and dtype conversion. */
#include "base/error.h"
#include "tensor/iter.h"
#include "tensor/tensor.h"

#include <string.h>

typedef struct {
  dt_dtype dst, src;
} copy_ctx;

static void copy_same(char **p, const int64_t *s, int64_t n, void *vctx) {
  size_t es = dt_dtype_size(((copy_ctx *)vctx)->dst);
  char *d = p[0], *x = p[1];
  if (s[0] == (int64_t)es && s[1] == (int64_t)es) {
    memcpy(d, x, (size_t)n * es);
    return;
  }
  switch (es) {
  case 1: for (int64_t i = 0; i < n; i++) *(uint8_t *)(d + i * s[0]) = *(uint8_t *)(x + i * s[1]); break;
  case 2: for (int64_t i = 0; i < n; i++) *(uint16_t *)(d + i * s[0]) = *(uint16_t *)(x + i * s[1]); break;
  case 4: for (int64_t i = 0; i < n; i++) *(uint32_t *)(d + i * s[0]) = *(uint32_t *)(x + i * s[1]); break;
  default: for (int64_t i = 0; i < n; i++) *(uint64_t *)(d + i * s[0]) = *(uint64_t *)(x + i * s[1]); break;
  }
}

static void copy_convert(char **p, const int64_t *s, int64_t n, void *vctx) {
  copy_ctx *c = vctx;
  int integral = !dt_dtype_is_float(c->dst) && !dt_dtype_is_float(c->src);
  if (c->dst == DT_FLOAT32 && c->src == DT_BFLOAT16) {
    for (int64_t i = 0; i < n; i++) *(float *)(p[0] + i * s[0]) = dt_bf16_to_f32(*(uint16_t *)(p[1] + i * s[1]));
  } else if (c->dst == DT_BFLOAT16 && c->src == DT_FLOAT32) {
    for (int64_t i = 0; i < n; i++) *(uint16_t *)(p[0] + i * s[0]) = dt_f32_to_bf16(*(float *)(p[1] + i * s[1]));
  } else if (integral) { /* exact for int64 beyond 2^53 */
    for (int64_t i = 0; i < n; i++) dt_store_i64(p[0] + i * s[0], c->dst, dt_load_i64(p[1] + i * s[1], c->src));
  } else {
    for (int64_t i = 0; i < n; i++) dt_store_f64(p[0] + i * s[0], c->dst, dt_load_f64(p[1] + i * s[1], c->src));
  }
}

void dt_convert_elements(void *dst, dt_dtype dst_dtype, const void *src, dt_dtype src_dtype, int64_t n) {
  copy_ctx ctx = {dst_dtype, src_dtype};
  char *p[2] = {dst, (char *)src};
  int64_t s[2] = {(int64_t)dt_dtype_size(dst_dtype), (int64_t)dt_dtype_size(src_dtype)};
  (dst_dtype == src_dtype ? copy_same : copy_convert)(p, s, n, &ctx);
}

/* A whole-buffer copy through the device interface: the only copy a device that is not the
 * host offers here (strided and converting copies there are its kernels' job). */
static int copy_across(dt_tensor *dst, const dt_tensor *src, const char *op) {
  dt_device_type dd = dt_tensor_device(dst), sd = dt_tensor_device(src);
  if (dst->dtype != src->dtype || !dt_same_shape(dst, src) || !dt_tensor_is_contiguous(dst) ||
      !dt_tensor_is_contiguous(src) || (!dt_device_is_host(dd) && !dt_device_is_host(sd) && dd != sd))
    return dt_error("%s: copy between devices %s and %s is not available", op, dt_device_name(dd), dt_device_name(sd));
  size_t n = (size_t)dt_tensor_numel(src) * dt_tensor_elsize(src);
  void *d = dt_tensor_data(dst);
  const void *s = dt_tensor_data(src);
  if (dt_device_is_host(sd)) return dt_device_get(dd)->copy_from_host(d, s, n);
  if (dt_device_is_host(dd)) return dt_device_get(sd)->copy_to_host(d, s, n);
  return dt_device_get(dd)->copy_within(d, s, n);
}

/* A copy within one device that is not the host: its strided copy, src broadcast to dst. */
static int copy_on_device(dt_tensor *dst, const dt_tensor *src, const char *op) {
  const dt_device *dev = dt_device_get(dt_tensor_device(dst));
  if (!dev->copy_strided) return copy_across(dst, src, op);
  int64_t sstride[DT_MAX_DIMS];
  int lead = dst->ndim - src->ndim;
  for (int i = 0; i < dst->ndim; i++) {
    int j = i - lead;
    if (j >= 0 && src->shape[j] != dst->shape[i] && src->shape[j] != 1) lead = -1;
    sstride[i] = j < 0 || src->shape[j] != dst->shape[i] ? 0 : src->stride[j];
  }
  if (lead < 0) {
    char a[128], b[128];
    return dt_error("%s: cannot broadcast %s to %s", op, dt_format_shape(a, sizeof a, src->ndim, src->shape),
                    dt_format_shape(b, sizeof b, dst->ndim, dst->shape));
  }
  dt_strided_copy c = {dt_tensor_data(dst), dt_tensor_data(src), dst->dtype, src->dtype,
                       dst->ndim, dst->shape, dst->stride, sstride};
  return dev->copy_strided(&c);
}

int dt_tensor_copy_(dt_tensor *dst, const dt_tensor *src, const char *op) {
  dt_device_type dd = dt_tensor_device(dst), sd = dt_tensor_device(src);
  if (dd == sd && !dt_device_is_host(dd)) return copy_on_device(dst, src, op);
  if (dd != sd) {
    if (dst->dtype == src->dtype && dt_same_shape(dst, src) && dt_tensor_is_contiguous(dst) &&
        dt_tensor_is_contiguous(src))
      return copy_across(dst, src, op);
    if (!dt_device_is_host(dd) && !dt_device_is_host(sd)) return copy_across(dst, src, op); /* its error */
    /* across host and device with a layout or dtype change: move src over, then copy there */
    dt_tensor *moved = dt_tensor_to_device((dt_tensor *)src, dd);
    if (!moved) return dt_error_prefix("%s", op);
    int rc = dt_tensor_copy_(dst, moved, op);
    dt_tensor_release(moved);
    return rc;
  }
  dt_iter it;
  dt_tensor *ops[2] = {dst, (dt_tensor *)src};
  if (dt_iter_init(&it, 2, ops, dst->ndim, dst->shape, op) != DT_OK) return DT_ERR;
  copy_ctx ctx = {dst->dtype, src->dtype};
  dt_iter_run_parallel(&it, dst->dtype == src->dtype ? copy_same : copy_convert, &ctx);
  return DT_OK;
}

dt_tensor *dt_tensor_clone(const dt_tensor *t) {
  dt_tensor *out = dt_tensor_empty_like(t);
  if (out && dt_tensor_copy_(out, t, "clone") != DT_OK) {
    dt_tensor_release(out);
    return NULL;
  }
  return out;
}

dt_tensor *dt_tensor_contiguous_as(dt_tensor *t, dt_dtype dtype) {
  if (t->dtype == dtype && dt_tensor_is_contiguous(t)) {
    dt_tensor_retain(t);
    return t;
  }
  dt_tensor *out = dt_tensor_empty(dtype, t->ndim, t->shape, dt_tensor_device(t));
  if (out && dt_tensor_copy_(out, t, "to") != DT_OK) {
    dt_tensor_release(out);
    return NULL;
  }
  return out;
}

dt_tensor *dt_tensor_contiguous(dt_tensor *t) { return dt_tensor_contiguous_as(t, t->dtype); }

dt_tensor *dt_tensor_to_dtype(dt_tensor *t, dt_dtype dtype) {
  if (t->dtype == dtype) {
    dt_tensor_retain(t);
    return t;
  }
  return dt_tensor_contiguous_as(t, dtype);
}

dt_tensor *dt_tensor_to_device(dt_tensor *t, dt_device_type device) {
  if (dt_tensor_device(t) == device) {
    dt_tensor_retain(t);
    return t;
  }
  dt_tensor *c = dt_tensor_contiguous(t);
  dt_tensor *out = c ? dt_tensor_empty(t->dtype, t->ndim, t->shape, device) : NULL;
  if (out && copy_across(out, c, "to") != DT_OK) dt_tensor_release(out), out = NULL;
  dt_tensor_release(c);
  return out;
}

int dt_tensor_refill_(dt_tensor *dst, const dt_tensor *src, const char *op) {
  if (dt_storage_is_released(src->storage)) return dt_error("%s: the source's storage is released", op);
  if (dt_storage_restore_data(dst->storage) != DT_OK) return DT_ERR;
  return dt_tensor_copy_(dst, src, op);
}

dt_tensor *dt_tensor_to_host(dt_tensor *t) {
  if (dt_storage_is_released(t->storage)) {
    dt_error("the tensor's storage is released (its values were freed; fully_shard refills them before use)");
    return NULL;
  }
  if (dt_device_is_host(dt_tensor_device(t))) {
    dt_tensor_retain(t);
    return t;
  }
  return dt_tensor_to_device(t, DT_HOST);
}

dt_tensor *dt_tensor_host_contiguous(dt_tensor *t) {
  dt_tensor *h = dt_tensor_to_host(t);
  dt_tensor *c = h ? dt_tensor_contiguous(h) : NULL;
  dt_tensor_release(h);
  return c;
}
