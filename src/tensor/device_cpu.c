/* The CPU device: host memory from the per-thread block cache, copies by memcpy.  Work is
 * synchronous, so there is nothing to wait for. */
#include "tensor/block_cache.h"
#include "tensor/device.h"

#include "base/error.h"

#include <string.h>

static int cpu_copy(void *dst, const void *src, size_t n) {
  if (n) memcpy(dst, src, n);
  return DT_OK;
}

static int cpu_memset(void *dst, int byte, size_t n) {
  if (n) memset(dst, byte, n);
  return DT_OK;
}

static int cpu_synchronize(void) { return DT_OK; }

extern const dt_device dt_cpu_device;
const dt_device dt_cpu_device = {
    .name = "cpu",
    .is_host = 1,
    .alloc = dt_block_alloc,
    .free = dt_block_free,
    .copy_from_host = cpu_copy,
    .copy_to_host = cpu_copy,
    .copy_within = cpu_copy,
    .memset = cpu_memset,
    .synchronize = cpu_synchronize,
};
