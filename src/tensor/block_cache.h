/* A per-thread cache of freed CPU blocks from 16 KiB.  Fresh allocations of that size come
 * from the system as untouched pages, and the first write to each page faults: a 64 MiB
 * temporary costs more in faults than in arithmetic, a 256 KiB one four times its add.  Reusing
 * recently freed blocks of about the same size removes that cost for loops that make
 * same-sized temporaries.  Per thread, because ranks are threads and a shared cache would need
 * a lock on every allocation. */
#ifndef DT_TENSOR_BLOCK_CACHE_H
#define DT_TENSOR_BLOCK_CACHE_H

#include <stddef.h>

/* A 64-byte aligned block of at least nbytes (*capacity receives its real size); NULL when
 * out of memory. */
void *dt_block_alloc(size_t nbytes, size_t *capacity);
/* Returns a block from dt_block_alloc: cached from 16 KiB when there is room, else freed. */
void dt_block_free(void *data, size_t capacity);
/* Frees every block this thread has cached. */
void dt_block_cache_trim(void);

#endif
