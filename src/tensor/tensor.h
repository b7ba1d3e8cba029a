/* A tensor: a strided view of a storage.  The struct is public because kernels read it
 * in hot loops; create and destroy tensors only through these functions. */
#ifndef DT_TENSOR_TENSOR_H
#define DT_TENSOR_TENSOR_H

#include "base/export.h"

#include <stdatomic.h>
#include <stdint.h>

#include "base/dtype.h"
#include "tensor/storage.h"

#define DT_MAX_DIMS 8

typedef struct dt_tensor {
  dt_storage *storage;
  int64_t offset; /* in elements */
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  int64_t stride[DT_MAX_DIMS]; /* in elements; 0 for broadcast (expanded) dims */
  dt_dtype dtype;
  atomic_int refcount;
} dt_tensor;

/* ---- lifetime ---------------------------------------------------------------------- */
/* Contiguous, uninitialised.  NULL + dt_error on bad shape or out of memory. */
DT_API dt_tensor *dt_tensor_empty(dt_dtype dtype, int ndim, const int64_t *shape, dt_device_type device);
DT_API dt_tensor *dt_tensor_zeros(dt_dtype dtype, int ndim, const int64_t *shape, dt_device_type device);
DT_API dt_tensor *dt_tensor_full(dt_dtype dtype, int ndim, const int64_t *shape, double value, dt_device_type device);
/* Copies the element at p (elsize bytes) over elements 1..n-1 that follow it. */
DT_API void dt_fill_repeat(void *p, size_t elsize, int64_t n);
/* Same dtype/shape as t, contiguous, uninitialised. */
DT_API dt_tensor *dt_tensor_empty_like(const dt_tensor *t);
/* A new tensor object sharing base's storage.  No bounds check: callers validate. */
DT_API dt_tensor *dt_tensor_view_of(const dt_tensor *base, int ndim, const int64_t *shape, const int64_t *stride,
                             int64_t offset);
DT_API void dt_tensor_retain(dt_tensor *t);
DT_API void dt_tensor_release(dt_tensor *t);

/* ---- properties -------------------------------------------------------------------- */
static inline int64_t dt_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}
static inline int64_t dt_tensor_numel(const dt_tensor *t) { return dt_shape_numel(t->ndim, t->shape); }
static inline size_t dt_tensor_elsize(const dt_tensor *t) { return dt_dtype_size(t->dtype); }
/* Pointer to element 0 of the view. */
static inline void *dt_tensor_data(const dt_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)dt_dtype_size(t->dtype);
}
static inline dt_device_type dt_tensor_device(const dt_tensor *t) { return t->storage->device; }
DT_API int dt_tensor_is_contiguous(const dt_tensor *t);
/* Row-major contiguous strides for shape. */
DT_API void dt_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
DT_API int dt_same_shape(const dt_tensor *a, const dt_tensor *b);

/* ---- copies and conversions ---------------------------------------------------------- */
/* dst[...] = src[...], broadcasting src to dst's shape and converting dtype.  Between
 * devices (or on a device that is not the host): contiguous tensors of one dtype and shape
 * only, through the device interface.  `op` names the caller in error messages. */
DT_API int dt_tensor_copy_(dt_tensor *dst, const dt_tensor *src, const char *op);
/* n elements of host memory converted as copy_ converts them (both contiguous, no overlap). */
DT_API void dt_convert_elements(void *dst, dt_dtype dst_dtype, const void *src, dt_dtype src_dtype, int64_t n);
/* dt_tensor_copy_ into a view of a released storage (dt_storage_release_data), allocating its
 * bytes first: the values saved for backward come back, so autograd's version counter (the
 * front door's) is left alone.  A storage that holds its bytes is copied into as it is. */
DT_API int dt_tensor_refill_(dt_tensor *dst, const dt_tensor *src, const char *op);
/* A contiguous tensor with t's values: t itself (retained) when already contiguous. */
DT_API dt_tensor *dt_tensor_contiguous(dt_tensor *t);
/* A new contiguous tensor (always a copy). */
DT_API dt_tensor *dt_tensor_clone(const dt_tensor *t);
/* t converted to dtype: t itself (retained) when the dtype already matches. */
DT_API dt_tensor *dt_tensor_to_dtype(dt_tensor *t, dt_dtype dtype);
/* A contiguous copy of t in dtype if t is not already contiguous in dtype, else t retained. */
DT_API dt_tensor *dt_tensor_contiguous_as(dt_tensor *t, dt_dtype dtype);
/* t on device (contiguous when copied): t itself (retained) when already there. */
DT_API dt_tensor *dt_tensor_to_device(dt_tensor *t, dt_device_type device);
/* t in memory the host can read (dt_tensor_data): t itself (retained) when it already is.
 * The path by which bindings, files and printing read tensor values. */
DT_API dt_tensor *dt_tensor_to_host(dt_tensor *t);
/* t's values contiguous in host memory (files, messages): t itself (retained) when it
 * already is. */
DT_API dt_tensor *dt_tensor_host_contiguous(dt_tensor *t);

/* ---- shapes -------------------------------------------------------------------------- */
/* Broadcast two shapes (numpy rules).  On failure: "<op>: shapes {2,3} and {4} cannot broadcast". */
DT_API int dt_broadcast_shapes(const char *op, int na, const int64_t *sa, int nb, const int64_t *sb, int *nout,
                        int64_t *out);
/* A view of t expanded (stride 0) to shape; t's shape must broadcast to it. */
DT_API dt_tensor *dt_tensor_expand(const dt_tensor *t, int ndim, const int64_t *shape, const char *op);
/* Validate a shape (0 <= ndim <= DT_MAX_DIMS, sizes >= 0).  op names the caller. */
DT_API int dt_check_shape(const char *op, int ndim, const int64_t *shape);

#endif
