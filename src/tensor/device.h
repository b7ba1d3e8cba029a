/* Devices behind one interface: storage allocation and copies go through a device's
 * function table, so a backend (CUDA next) plugs in as one more entry of the registry
 * (device.c) plus its kernel table (src/kernels).  Only the registry and each device's
 * backend name a device. */
#ifndef DT_TENSOR_DEVICE_H
#define DT_TENSOR_DEVICE_H

#include "base/export.h"

#include <stddef.h>
#include <stdint.h>

typedef enum dt_device_type { DT_CPU = 0, DT_CUDA, DT_NDEVICES } dt_device_type;

/* The device whose memory the host reads and writes directly: where tensors made from
 * Lua values and files land, what factories make without inputs, what to_host gives. */
#define DT_HOST DT_CPU

/* A strided copy with broadcasting (stride 0) and dtype conversion within one device, for a
 * device whose memory the host cannot loop over.  Strides are in elements; dtypes are dt_dtype
 * values (int here: this header sits below the dtype table's users). */
typedef struct dt_strided_copy {
  void *dst;
  const void *src;
  int dst_dtype, src_dtype;
  int ndim;
  const int64_t *shape, *dst_stride, *src_stride;
} dt_strided_copy;

typedef struct dt_device {
  const char *name;
  int is_host; /* memory the CPU addresses: to_host is a no-op, host loops may run on it */
  /* A block of at least nbytes (*capacity: its real size); NULL when out of memory. */
  void *(*alloc)(size_t nbytes, size_t *capacity);
  void (*free)(void *data, size_t capacity);
  /* Copies of n bytes; DT_OK or DT_ERR with dt_error. */
  int (*copy_from_host)(void *dst, const void *src, size_t n);
  int (*copy_to_host)(void *dst, const void *src, size_t n);
  int (*copy_within)(void *dst, const void *src, size_t n);
  int (*memset)(void *dst, int byte, size_t n);
  /* Waits for the device's queued work (a no-op where work is synchronous). */
  int (*synchronize)(void);
  /* Strided, converting copies on the device (NULL on the host, where copy.c loops itself). */
  int (*copy_strided)(const dt_strided_copy *c);
} dt_device;

/* The device of type t, NULL when this build has none. */
DT_API const dt_device *dt_device_get(dt_device_type t);
/* "cpu", "cuda": known whether or not this build has the device. */
DT_API const char *dt_device_name(dt_device_type t);
static inline int dt_device_is_host(dt_device_type t) {
  const dt_device *d = dt_device_get(t);
  return d && d->is_host;
}

#endif
