#include "tensor/block_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Two classes, each its own slots and budget, so that a loop of many mid-sized temporaries
 * does not push out the large blocks (whose mappings cost most to make again).  Below
 * MID_MIN_BYTES malloc's bins do well.  From it, glibc gave the pages of a freed block back to
 * the system and the next block faulted them in again: a loop of `a + b` on 64-512 KiB made
 * 5-190 page faults a call and ran at 7-17 GB/s, against 80-160 GB/s from this cache
 * (doc/performance.md, "Mid-sized temporaries"). */
#define MID_MIN_BYTES ((size_t)16 << 10)
#define LARGE_MIN_BYTES ((size_t)1 << 20)
#define CACHE_MAX_BYTES ((size_t)512 << 20) /* largest block cached: bigger ones are unmapped */
#define CACHE_SLOTS 64
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

static void release_block(void *data, size_t capacity);

typedef struct {
  void *data;
  size_t capacity;
} cached_block;

typedef struct {
  cached_block slot[CACHE_SLOTS];
  int count;
  size_t bytes;
} block_class;

static const size_t class_budget[2] = {(size_t)32 << 20, CACHE_MAX_BYTES}; /* idle bytes one thread may hold */
static _Thread_local block_class classes[2];

/* The class of a block (0: mid, 1: large), or -1 when it is not cached. */
static int class_of(size_t capacity) {
  if (capacity < MID_MIN_BYTES || capacity > CACHE_MAX_BYTES) return -1;
  return capacity >= LARGE_MIN_BYTES;
}

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
  for (int k = 0; k < 2; k++) {
    block_class *c = &classes[k];
    for (int i = 0; i < c->count; i++) release_block(c->slot[i].data, c->slot[i].capacity);
    c->count = 0;
    c->bytes = 0;
  }
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
  int k = class_of(padded);
  if (k >= 0) {
    /* best fit within 25% so a small tensor never pins a much larger block */
    block_class *c = &classes[k];
    int best = -1;
    for (int i = 0; i < c->count; i++)
      if (c->slot[i].capacity >= padded && c->slot[i].capacity - padded <= padded / 4 &&
          (best < 0 || c->slot[i].capacity < c->slot[best].capacity))
        best = i;
    if (best >= 0) {
      void *data = c->slot[best].data;
      *capacity = c->slot[best].capacity;
      c->bytes -= c->slot[best].capacity;
      c->slot[best] = c->slot[--c->count];
      return data;
    }
  }
  *capacity = padded;
  return new_block(padded);
}

void dt_block_free(void *data, size_t capacity) {
  if (!data) return;
  int k = class_of(capacity);
  if (k < 0 || capacity > class_budget[k]) {
    release_block(data, capacity);
    return;
  }
  pthread_once(&exit_once, register_exit_hooks);
  pthread_setspecific(exit_key, &exit_key); /* non-NULL so the destructor runs */
  /* make room: evict the oldest blocks until this one fits */
  block_class *c = &classes[k];
  while (c->count > 0 && (c->count == CACHE_SLOTS || c->bytes + capacity > class_budget[k])) {
    release_block(c->slot[0].data, c->slot[0].capacity);
    c->bytes -= c->slot[0].capacity;
    for (int i = 1; i < c->count; i++) c->slot[i - 1] = c->slot[i];
    c->count--;
  }
  c->slot[c->count++] = (cached_block){data, capacity};
  c->bytes += capacity;
}
