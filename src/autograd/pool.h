/* Per-thread recycling of the graph's small blocks (pool.c). */
#ifndef DT_AUTOGRAD_POOL_H
#define DT_AUTOGRAD_POOL_H

#include <stddef.h>

/* A zeroed block of size bytes, or NULL; give it back with the same size. */
void *dt_pool_alloc(size_t size);
void dt_pool_free(void *p, size_t size);

#endif
