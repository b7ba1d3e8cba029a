/* A per-thread cache of large freed CPU blocks.  Fresh large allocations come from mmap as
 * untouched pages, and the first write to each page faults: a 64 MiB temporary costs more in
 * faults than in arithmetic.  Reusing recently freed blocks of about the same size removes
 * that cost for loops that make same-sized temporaries.  Per thread, because ranks are
 * threads and a shared cache would need a lock on every large allocation. */
#ifndef DT_TENSOR_BLOCK_CACHE_H
#define DT_TENSOR_BLOCK_CACHE_H

#include <stddef.h>

/* A 64-byte aligned block of at least nbytes (*capacity receives its real size); NULL when
 * out of memory. */
void *dt_block_alloc(size_t nbytes, size_t *capacity);
/* Returns a block from dt_block_alloc: cached when large and there is room, else freed. */
void dt_block_free(void *data, size_t capacity);
/* Frees every block this thread has cached. */
void dt_block_cache_trim(void);

#endif
