/* Refcounted memory on a device (allocated through its interface, tensor/device.h).  A
 * tensor is a view (shape, strides, offset) of one storage. */
#ifndef DT_TENSOR_STORAGE_H
#define DT_TENSOR_STORAGE_H

#include "base/export.h"

#include <stdatomic.h>
#include <stddef.h>

#include "tensor/device.h"

typedef struct dt_storage {
  void *data;
  size_t nbytes;
  size_t capacity; /* bytes actually allocated (>= nbytes) */
  atomic_int refcount;
  dt_device_type device;
  int device_index;
  /* Autograd's version counter: bumped by every in-place op through the front door (views
   * share it with their base), with the op's name, so a value saved for backward and
   * written afterwards is detected (src/autograd). */
  unsigned version;
  const char *last_write;
  /* Frees data (capacity bytes); NULL means the storage does not own it (a borrowed buffer). */
  void (*free_data)(void *data, size_t capacity);
} dt_storage;

/* New storage of nbytes on device, uninitialised (64-byte aligned on the CPU); NULL +
 * dt_error on failure. */
DT_API dt_storage *dt_storage_new(size_t nbytes, dt_device_type device);
DT_API void dt_storage_retain(dt_storage *s);
DT_API void dt_storage_release(dt_storage *s);

/* Frees s's bytes while the storage itself (its views, size and version counter) lives on:
 * data becomes NULL until dt_storage_restore_data, and the front door refuses to read it.
 * What fully_shard does to a block's gathered parameters between forward and backward
 * (PyTorch resizes the storage to 0 and back).  A borrowed buffer cannot be released. */
DT_API int dt_storage_release_data(dt_storage *s);
/* Allocates a released storage's bytes again (uninitialised); nothing when it holds them. */
DT_API int dt_storage_restore_data(dt_storage *s);
static inline int dt_storage_is_released(const dt_storage *s) { return s->data == NULL && s->nbytes > 0; }

#endif
