/* The caching allocator's bookkeeping, without CUDA: blocks come from a backing allocator
 * (cudaMalloc on a GPU, a fake one in tests/c/test_cuda.c), are rounded up to a size
 * class, and a freed block is kept for the next request of the same class on the same stream
 * (work queued on one stream runs in order, so the block is free for it without a sync; another
 * stream could still be reading it).  No managed memory.  Thread-safe: ranks are threads. */
#ifndef DT_TENSOR_CUDA_CACHE_H
#define DT_TENSOR_CUDA_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_cache_backing {
  void *(*alloc)(size_t nbytes, void *ud); /* NULL when out of memory */
  void (*free)(void *p, size_t nbytes, void *ud);
  void *ud;
} dt_cache_backing;

typedef struct dt_cache_stats {
  int64_t allocated_bytes;      /* in use by tensors (their blocks' class sizes) */
  int64_t reserved_bytes;       /* held from the backing allocator: in use + cached */
  int64_t peak_allocated_bytes; /* the highest allocated_bytes seen */
  int64_t cached_blocks;        /* free blocks kept for reuse */
  int64_t num_allocs;           /* requests served */
  int64_t num_cache_hits;       /* ... of which by a cached block */
  int64_t num_backing_allocs;   /* blocks taken from the backing allocator */
  int64_t num_backing_frees;    /* blocks given back (empty_cache, or retrying after OOM) */
} dt_cache_stats;

typedef struct dt_cuda_cache dt_cuda_cache;

/* The size class of a request: small ones (< 1 MiB) round up to 512 bytes, large ones to 1 MiB,
 * so freed blocks match later requests of about the same size.  0 bytes take one small block. */
size_t dt_cuda_cache_class(size_t nbytes);

dt_cuda_cache *dt_cuda_cache_new(dt_cache_backing backing);
/* Gives every cached block back, then frees the cache (blocks still in use are the caller's). */
void dt_cuda_cache_destroy(dt_cuda_cache *c);
/* A block of at least nbytes for use on stream (an opaque key); *capacity: its class size.  On
 * backing OOM the cached blocks are given back and the request retried once; NULL after that. */
void *dt_cuda_cache_alloc(dt_cuda_cache *c, size_t nbytes, const void *stream, size_t *capacity);
/* Returns a block from dt_cuda_cache_alloc to the cache of the stream it was allocated on.
 * 0 on success, -1 for a pointer this cache did not hand out (nothing changes). */
int dt_cuda_cache_free(dt_cuda_cache *c, void *p);
/* Gives all cached (free) blocks back to the backing allocator; the caller first waits for the
 * streams that may still use them.  Returns the bytes released. */
size_t dt_cuda_cache_empty(dt_cuda_cache *c);
dt_cache_stats dt_cuda_cache_stats(dt_cuda_cache *c);

#endif
