/* The caching allocator's bookkeeping (cuda_cache.h): blocks in use in an open-addressing table
 * keyed by address (free needs the block's class and stream), free blocks in a list searched for
 * an exact (class, stream) match. */
#include "tensor/cuda_cache.h"

#include <pthread.h>
#include <stdlib.h>

#define SMALL_LIMIT ((size_t)1 << 20)
#define SMALL_ROUND ((size_t)512)
#define LARGE_ROUND ((size_t)1 << 20)

typedef struct block {
  void *ptr; /* NULL: empty slot (in the table) */
  size_t size;
  const void *stream;
} block;

struct dt_cuda_cache {
  pthread_mutex_t lock;
  dt_cache_backing backing;
  block *used; /* open addressing, capacity a power of two, never more than half full */
  size_t used_cap, used_n;
  block *free_list;
  size_t free_n, free_cap;
  dt_cache_stats stats;
};

size_t dt_cuda_cache_class(size_t nbytes) {
  if (nbytes == 0) return SMALL_ROUND;
  size_t r = nbytes < SMALL_LIMIT ? SMALL_ROUND : LARGE_ROUND;
  if (nbytes > SIZE_MAX - (r - 1)) return 0; /* no class: the caller reports out of memory */
  return (nbytes + r - 1) / r * r;
}

static size_t slot_of(const dt_cuda_cache *c, const void *p) {
  uintptr_t h = (uintptr_t)p >> 9; /* blocks are at least 512-byte aligned */
  h ^= h >> 17;
  h *= (uintptr_t)0x9e3779b97f4a7c15ull;
  return (size_t)(h ^ (h >> 31)) & (c->used_cap - 1);
}

static int table_grow(dt_cuda_cache *c) {
  size_t cap = c->used_cap ? c->used_cap * 2 : 64;
  block *old = c->used, *t = calloc(cap, sizeof *t);
  if (!t) return -1;
  size_t old_cap = c->used_cap;
  c->used = t, c->used_cap = cap;
  for (size_t i = 0; i < old_cap; i++) {
    if (!old[i].ptr) continue;
    size_t s = slot_of(c, old[i].ptr);
    while (t[s].ptr) s = (s + 1) & (cap - 1);
    t[s] = old[i];
  }
  free(old);
  return 0;
}

static int table_put(dt_cuda_cache *c, block b) {
  if (2 * (c->used_n + 1) > c->used_cap && table_grow(c) != 0) return -1;
  size_t s = slot_of(c, b.ptr);
  while (c->used[s].ptr) s = (s + 1) & (c->used_cap - 1);
  c->used[s] = b;
  c->used_n++;
  return 0;
}

/* Removes p from the table into *out; -1 when absent.  Backward-shift deletion keeps every
 * probe chain unbroken without tombstones. */
static int table_take(dt_cuda_cache *c, const void *p, block *out) {
  if (!c->used_cap) return -1;
  size_t mask = c->used_cap - 1, s = slot_of(c, p);
  while (c->used[s].ptr != p) {
    if (!c->used[s].ptr) return -1;
    s = (s + 1) & mask;
  }
  *out = c->used[s];
  size_t hole = s;
  for (size_t j = (s + 1) & mask; c->used[j].ptr; j = (j + 1) & mask) {
    size_t home = slot_of(c, c->used[j].ptr);
    /* j's entry may fill the hole when its home is not cyclically in (hole, j] */
    if (((j - home) & mask) >= ((j - hole) & mask)) c->used[hole] = c->used[j], hole = j;
  }
  c->used[hole].ptr = NULL;
  c->used_n--;
  return 0;
}

dt_cuda_cache *dt_cuda_cache_new(dt_cache_backing backing) {
  dt_cuda_cache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_init(&c->lock, NULL);
  c->backing = backing;
  return c;
}

static size_t release_cached(dt_cuda_cache *c) {
  size_t bytes = 0;
  for (size_t i = 0; i < c->free_n; i++) {
    c->backing.free(c->free_list[i].ptr, c->free_list[i].size, c->backing.ud);
    bytes += c->free_list[i].size;
    c->stats.reserved_bytes -= (int64_t)c->free_list[i].size;
    c->stats.num_backing_frees++;
  }
  c->free_n = 0;
  c->stats.cached_blocks = 0;
  return bytes;
}

void dt_cuda_cache_destroy(dt_cuda_cache *c) {
  if (!c) return;
  release_cached(c);
  free(c->free_list);
  free(c->used);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void *dt_cuda_cache_alloc(dt_cuda_cache *c, size_t nbytes, const void *stream, size_t *capacity) {
  size_t size = dt_cuda_cache_class(nbytes);
  if (!size) return NULL;
  pthread_mutex_lock(&c->lock);
  block b = {NULL, size, stream};
  for (size_t i = c->free_n; i-- > 0;) { /* newest first: its memory is the warmest */
    if (c->free_list[i].size == size && c->free_list[i].stream == stream) {
      b.ptr = c->free_list[i].ptr;
      c->free_list[i] = c->free_list[--c->free_n];
      c->stats.cached_blocks--;
      c->stats.num_cache_hits++;
      break;
    }
  }
  if (!b.ptr) {
    b.ptr = c->backing.alloc(size, c->backing.ud);
    if (!b.ptr && c->free_n) { /* out of memory: give the cache back and try once more */
      release_cached(c);
      b.ptr = c->backing.alloc(size, c->backing.ud);
    }
    if (b.ptr) c->stats.num_backing_allocs++, c->stats.reserved_bytes += (int64_t)size;
  }
  if (b.ptr && table_put(c, b) != 0) { /* no host memory for the bookkeeping */
    c->backing.free(b.ptr, size, c->backing.ud);
    c->stats.reserved_bytes -= (int64_t)size;
    c->stats.num_backing_frees++;
    b.ptr = NULL;
  }
  if (b.ptr) {
    c->stats.num_allocs++;
    c->stats.allocated_bytes += (int64_t)size;
    if (c->stats.allocated_bytes > c->stats.peak_allocated_bytes)
      c->stats.peak_allocated_bytes = c->stats.allocated_bytes;
    if (capacity) *capacity = size;
  }
  pthread_mutex_unlock(&c->lock);
  return b.ptr;
}

int dt_cuda_cache_free(dt_cuda_cache *c, void *p) {
  if (!p) return 0;
  pthread_mutex_lock(&c->lock);
  block b;
  int rc = table_take(c, p, &b);
  if (rc == 0) {
    c->stats.allocated_bytes -= (int64_t)b.size;
    if (c->free_n == c->free_cap) {
      size_t cap = c->free_cap ? c->free_cap * 2 : 64;
      block *l = realloc(c->free_list, cap * sizeof *l);
      if (l) c->free_list = l, c->free_cap = cap;
    }
    if (c->free_n < c->free_cap) {
      c->free_list[c->free_n++] = b;
      c->stats.cached_blocks++;
    } else { /* no room to cache it: give it back */
      c->backing.free(b.ptr, b.size, c->backing.ud);
      c->stats.reserved_bytes -= (int64_t)b.size;
      c->stats.num_backing_frees++;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

size_t dt_cuda_cache_empty(dt_cuda_cache *c) {
  pthread_mutex_lock(&c->lock);
  size_t bytes = release_cached(c);
  pthread_mutex_unlock(&c->lock);
  return bytes;
}

dt_cache_stats dt_cuda_cache_stats(dt_cuda_cache *c) {
  pthread_mutex_lock(&c->lock);
  dt_cache_stats s = c->stats;
  pthread_mutex_unlock(&c->lock);
  return s;
}
