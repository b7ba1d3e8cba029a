#include "tensor/storage.h"
#include "base/error.h"

#include <stdlib.h>

dt_storage *dt_storage_new(size_t nbytes, dt_device_type device) {
  const dt_device *dev = dt_device_get(device);
  if (!dev) {
    dt_error("device '%s' is not available in this build", dt_device_name(device));
    return NULL;
  }
  dt_storage *s = malloc(sizeof *s);
  size_t capacity = 0;
  void *data = s ? dev->alloc(nbytes, &capacity) : NULL;
  if (!s || !data) {
    free(s);
    if (data) dev->free(data, capacity);
    if (s && !dev->is_host) dt_error_prefix("allocating %zu bytes on %s", nbytes, dev->name); /* the device says why */
    else dt_error("out of memory allocating %zu bytes", nbytes);
    return NULL;
  }
  s->data = data;
  s->nbytes = nbytes;
  s->capacity = capacity;
  atomic_init(&s->refcount, 1);
  s->device = device;
  s->device_index = 0;
  s->free_data = dev->free;
  s->version = 0;
  s->last_write = NULL;
  return s;
}

void dt_storage_retain(dt_storage *s) { atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed); }

void dt_storage_release(dt_storage *s) {
  if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1) return;
  if (s->free_data) s->free_data(s->data, s->capacity);
  free(s);
}

int dt_storage_release_data(dt_storage *s) {
  if (!s->free_data) return dt_error("release_storage: the storage borrows its buffer (it does not own the bytes)");
  if (dt_storage_is_released(s) || s->nbytes == 0) return DT_OK;
  s->free_data(s->data, s->capacity);
  s->data = NULL;
  s->capacity = 0;
  return DT_OK;
}

int dt_storage_restore_data(dt_storage *s) {
  if (!dt_storage_is_released(s)) return DT_OK;
  const dt_device *dev = dt_device_get(s->device);
  size_t capacity = 0;
  void *data = dev ? dev->alloc(s->nbytes, &capacity) : NULL;
  if (!data) return dt_error("out of memory restoring a released storage of %zu bytes", s->nbytes);
  s->data = data;
  s->capacity = capacity;
  return DT_OK;
}
