#include "tensor/block_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Two classes.  Below MID_MIN_BYTES malloc's bins do well.  From it, glibc gave the pages of a
 * freed block back to the system and the next block faulted them in again: a loop of `a + b`
 * on 64-512 KiB made 5-190 page faults a call and ran at 7-17 GB/s, against 80-160 GB/s from
 * this cache (doc/performance.md, "Mid-sized temporaries").
 * - Mid-sized blocks (to LARGE_MIN_BYTES) go to exact-size bins, each a stack threaded through
 *   the free blocks themselves (a cached block's first word points at the next): the results
 *   of a loop that wait for a full collection (up to 32 MiB of them, l_tensor.c) come back in
 *   one burst and are all kept, at no cost per block (16 slots overflowed with 1-2 MiB
 *   results, and their pages were faulted in again).  When the budget is full, the bin used
 *   longest ago goes.
 * - Large blocks go to a few slots, best fit within 25%, so a small tensor never pins a much
 *   larger block; the oldest goes first. */
#define MID_MIN_BYTES ((size_t)16 << 10)
#define LARGE_MIN_BYTES ((size_t)4 << 20)
#define MID_BINS 32
#define MID_BUDGET ((size_t)64 << 20)        /* idle mid-sized bytes one thread may hold */
#define LARGE_SLOTS 16
#define LARGE_BUDGET ((size_t)512 << 20)     /* idle large bytes one thread may hold */
#define CACHE_MAX_BYTES ((size_t)512 << 20) /* largest block cached: bigger ones are unmapped */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

static void release_block(void *data, size_t capacity);

typedef struct {
  size_t size; /* the blocks' capacity; a bin without blocks may take another size */
  void *head;  /* the first free block; each holds the next in its first word */
  unsigned count;
  unsigned long long used; /* mid_clock at the last push or pop */
} mid_bin;

static _Thread_local mid_bin mid[MID_BINS];
static _Thread_local size_t mid_bytes;
static _Thread_local unsigned long long mid_clock;

typedef struct {
  void *data;
  size_t capacity;
} cached_block;

static _Thread_local cached_block large[LARGE_SLOTS];
static _Thread_local int large_count;
static _Thread_local size_t large_bytes;

static void mid_release_bin(mid_bin *b) {
  while (b->head) {
    void *next = *(void **)b->head;
    release_block(b->head, b->size);
    b->head = next;
  }
  mid_bytes -= (size_t)b->count * b->size;
  b->count = 0;
}

/* The bin of blocks of this size, or NULL. */
static mid_bin *mid_bin_of(size_t size) {
  for (int i = 0; i < MID_BINS; i++)
    if (mid[i].size == size && mid[i].count) return &mid[i];
  return NULL;
}

/* The least recently used bin holding blocks, or NULL. */
static mid_bin *mid_stalest(void) {
  mid_bin *s = NULL;
  for (int i = 0; i < MID_BINS; i++)
    if (mid[i].count && (!s || mid[i].used < s->used)) s = &mid[i];
  return s;
}

static void *mid_pop(size_t size) {
  mid_bin *b = mid_bin_of(size);
  if (!b) return NULL;
  void *data = b->head;
  b->head = *(void **)data;
  b->count--;
  b->used = ++mid_clock;
  mid_bytes -= size;
  return data;
}

static void mid_push(void *data, size_t size) {
  while (mid_bytes + size > MID_BUDGET) {
    mid_bin *s = mid_stalest();
    if (!s) break;
    mid_release_bin(s);
  }
  mid_bin *b = mid_bin_of(size);
  for (int i = 0; !b && i < MID_BINS; i++)
    if (!mid[i].count) b = &mid[i], b->size = size;
  if (!b) { /* every bin holds another size: the stalest makes room */
    b = mid_stalest();
    mid_release_bin(b);
    b->size = size;
  }
  if (mid_bytes + size > MID_BUDGET) {
    release_block(data, size);
    return;
  }
  *(void **)data = b->head;
  b->head = data;
  b->count++;
  b->used = ++mid_clock;
  mid_bytes += size;
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
  for (int i = 0; i < MID_BINS; i++) mid_release_bin(&mid[i]);
  for (int i = 0; i < large_count; i++) release_block(large[i].data, large[i].capacity);
  large_count = 0;
  large_bytes = 0;
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
  *capacity = padded;
  if (padded >= MID_MIN_BYTES && padded < LARGE_MIN_BYTES) {
    void *data = mid_pop(padded);
    if (data) return data;
  } else if (padded >= LARGE_MIN_BYTES && padded <= CACHE_MAX_BYTES) {
    int best = -1;
    for (int i = 0; i < large_count; i++)
      if (large[i].capacity >= padded && large[i].capacity - padded <= padded / 4 &&
          (best < 0 || large[i].capacity < large[best].capacity))
        best = i;
    if (best >= 0) {
      void *data = large[best].data;
      *capacity = large[best].capacity;
      large_bytes -= large[best].capacity;
      large[best] = large[--large_count];
      return data;
    }
  }
  return new_block(padded);
}

void dt_block_free(void *data, size_t capacity) {
  if (!data) return;
  if (capacity < MID_MIN_BYTES || capacity > CACHE_MAX_BYTES) {
    release_block(data, capacity);
    return;
  }
  pthread_once(&exit_once, register_exit_hooks);
  pthread_setspecific(exit_key, &exit_key); /* non-NULL so the destructor runs */
  if (capacity < LARGE_MIN_BYTES) {
    mid_push(data, capacity);
    return;
  }
  /* make room: evict the oldest blocks until this one fits */
  while (large_count > 0 && (large_count == LARGE_SLOTS || large_bytes + capacity > LARGE_BUDGET)) {
    release_block(large[0].data, large[0].capacity);
    large_bytes -= large[0].capacity;
    for (int i = 1; i < large_count; i++) large[i - 1] = large[i];
    large_count--;
  }
  large[large_count++] = (cached_block){data, capacity};
  large_bytes += capacity;
}
