#include "tensor/block_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define CACHE_MIN_BYTES ((size_t)1 << 20)   /* smaller blocks: malloc's own bins do well */
#define CACHE_MAX_BYTES ((size_t)512 << 20) /* idle memory one thread may hold */
#define CACHE_SLOTS 16
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

static void release_block(void *data, size_t capacity);

typedef struct {
  void *data;
  size_t capacity;
} cached_block;

static _Thread_local cached_block cache[CACHE_SLOTS];
static _Thread_local int cache_count;
static _Thread_local size_t cache_bytes;

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void trim_at_thread_exit(void *unused) {
  (void)unused;
  dt_block_cache_trim();
}
static void trim_at_process_exit(void) { dt_block_cache_trim(); }
static void register_exit_hooks(void) {
  pthread_key_create(&exit_key, trim_at_thread_exit);
  atexit(trim_at_process_exit);
}

void dt_block_cache_trim(void) {
  for (int i = 0; i < cache_count; i++) release_block(cache[i].data, cache[i].capacity);
  cache_count = 0;
  cache_bytes = 0;
}

/* A block of a huge page or more is mapped on its own, starts on a huge-page boundary and is
 * advised onto huge pages: with transparent huge pages in "madvise" mode (Debian's default) a
 * one-thread sum of 64 MiB then streams from DRAM at about 30 GB/s instead of 17-19 (a page
 * walk per 4 KiB is gone; doc/performance.md, "Huge pages for large tensors").  Its own mapping,
 * not malloc's: advice left on heap memory that malloc later hands out in small pieces would
 * fault 2 MiB in for each of them.  Only whole huge pages are advised, so a tail never holds
 * more than the tensor asked for. */
static size_t mapped_bytes(size_t padded) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (padded + page - 1) / page * page;
}

static void *new_block(size_t padded) {
  if (padded < HUGE_PAGE_BYTES) return aligned_alloc(64, padded);
  size_t len = mapped_bytes(padded), span = len + HUGE_PAGE_BYTES;
  char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *a = (char *)(((uintptr_t)p + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1));
  if (a > p) munmap(p, (size_t)(a - p));
  if (p + span > a + len) munmap(a + len, (size_t)(p + span - (a + len)));
#ifdef MADV_HUGEPAGE
  madvise(a, padded & ~(HUGE_PAGE_BYTES - 1), MADV_HUGEPAGE); /* advice only: refused, small pages serve */
#endif
  return a;
}

static void release_block(void *data, size_t capacity) {
  if (capacity < HUGE_PAGE_BYTES) free(data);
  else munmap(data, mapped_bytes(capacity));
}

void *dt_block_alloc(size_t nbytes, size_t *capacity) {
  size_t padded = (nbytes + 63) & ~(size_t)63;
  if (padded == 0) padded = 64;
  if (padded >= CACHE_MIN_BYTES) {
    /* best fit within 25% so a small tensor never pins a huge block */
    int best = -1;
    for (int i = 0; i < cache_count; i++)
      if (cache[i].capacity >= padded && cache[i].capacity - padded <= padded / 4 &&
          (best < 0 || cache[i].capacity < cache[best].capacity))
        best = i;
    if (best >= 0) {
      void *data = cache[best].data;
      *capacity = cache[best].capacity;
      cache_bytes -= cache[best].capacity;
      cache[best] = cache[--cache_count];
      return data;
    }
  }
  *capacity = padded;
  return new_block(padded);
}

void dt_block_free(void *data, size_t capacity) {
  if (!data) return;
  if (capacity < CACHE_MIN_BYTES || capacity > CACHE_MAX_BYTES) {
    release_block(data, capacity);
    return;
  }
  pthread_once(&exit_once, register_exit_hooks);
  pthread_setspecific(exit_key, &exit_key); /* non-NULL so the destructor runs */
  /* make room: evict the oldest blocks until this one fits */
  while (cache_count > 0 && (cache_count == CACHE_SLOTS || cache_bytes + capacity > CACHE_MAX_BYTES)) {
    release_block(cache[0].data, cache[0].capacity);
    cache_bytes -= cache[0].capacity;
    for (int i = 1; i < cache_count; i++) cache[i - 1] = cache[i];
    cache_count--;
  }
  cache[cache_count++] = (cached_block){data, capacity};
  cache_bytes += capacity;
}
