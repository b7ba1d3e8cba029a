/* The CPU's thread count for one rank: the intra-op pool's (base/thread_pool.h), which also runs
 * the GEMMs (kernels/cpu/gemm.c splits them into single-threaded BLAS calls).  The BLAS itself is
 * kept at one thread: its own workers would share the cores with the pool's and spin between
 * calls, and OpenBLAS's count is one per process where the pool's is per rank. */
#ifndef DT_KERNELS_CPU_CPU_THREADS_H
#define DT_KERNELS_CPU_CPU_THREADS_H

#include "base/export.h"

/* Sets the calling rank's threads (1..DT_MAX_THREADS); DT_ERR with a message naming `who`
 * otherwise. */
DT_API int dt_cpu_set_threads(int n, const char *who);
/* Keeps the BLAS at one thread of its own; at rank start. */
DT_API void dt_cpu_sync_blas_threads(void);

#endif
