/* The CPU's thread count for one rank: the intra-op pool's (base/thread_pool.h) and the BLAS's,
 * kept equal.  OpenBLAS's count is one per process: under `dtlua -n N` the last rank to set it
 * wins, which is the same count on every rank unless a program sets them differently. */
#ifndef DT_KERNELS_CPU_CPU_THREADS_H
#define DT_KERNELS_CPU_CPU_THREADS_H

#include "base/export.h"

/* Sets the calling rank's threads (1..DT_MAX_THREADS) and the BLAS's; DT_ERR with a message
 * naming `who` otherwise. */
DT_API int dt_cpu_set_threads(int n, const char *who);
/* Gives the BLAS the calling rank's thread count (its default on first use); at rank start. */
DT_API void dt_cpu_sync_blas_threads(void);

#endif
