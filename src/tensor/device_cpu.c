/* The CPU device: host memory from the per-thread block cache, copies by memcpy.  Work is
 * synchronous, so there is nothing to wait for. */
#include "tensor/block_cache.h"
#include "tensor/device.h"

#include "base/error.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* More bytes than the machine has is refused here, so the caller reports "out of memory"
 * instead of the allocator (or an overcommitting kernel, or a sanitizer) ending the process. */
static void *cpu_alloc(size_t nbytes, size_t *capacity) {
  static _Atomic size_t cached; /* 0: not read yet (ranks may be threads) */
  size_t physical = atomic_load_explicit(&cached, memory_order_relaxed);
  if (!physical) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    physical = SIZE_MAX; /* unknown: no limit */
    if (pages > 0 && page > 0 && (size_t)pages <= SIZE_MAX / (size_t)page) physical = (size_t)pages * (size_t)page;
    atomic_store_explicit(&cached, physical, memory_order_relaxed);
  }
  if (nbytes > physical) return NULL;
  return dt_block_alloc(nbytes, capacity);
}

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
    .alloc = cpu_alloc,
    .free = dt_block_free,
    .copy_from_host = cpu_copy,
    .copy_to_host = cpu_copy,
    .copy_within = cpu_copy,
    .memset = cpu_memset,
    .synchronize = cpu_synchronize,
};
