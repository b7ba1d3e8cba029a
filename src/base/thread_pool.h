/* Intra-op threads: each rank splits a large kernel over a few threads of its own.
 *
 * Design.  Every thread that submits work (a rank: under `dtlua -n N` the ranks are threads
 * of one process) owns its workers, created on its first parallel call and joined when it
 * exits.  A shared pool with one queue could deadlock or starve when several ranks submit at
 * once (a rank waiting in a collective while its chunks sit behind another rank's); with
 * private workers no submitter ever waits for another's work, and fairness is the thread
 * counts: N ranks on C cores default to max(1, C/N) threads each, the process's C cores in
 * all.  A parallel call made from inside a chunk runs inline (no nested fan-out).
 *
 * Results do not depend on the thread count when the kernels split work on output elements
 * (each chunk writes its own outputs with the same arithmetic): dt_parallel_for hands out
 * contiguous ranges of [0, n), and reductions that use it must combine partial results over
 * a partition that does not depend on the thread count (dt_parallel_fixed_chunks). */
#ifndef DT_BASE_THREAD_POOL_H
#define DT_BASE_THREAD_POOL_H

#include <stdint.h>

#include "base/export.h"

#define DT_MAX_THREADS 256
/* elements below which splitting a memory-bound loop costs more than it saves */
#define DT_PARALLEL_GRAIN 32768

/* fn(begin, end, ctx) over a contiguous piece of [0, n); pieces cover [0, n) exactly once. */
typedef void (*dt_parallel_fn)(int64_t begin, int64_t end, void *ctx);

/* Runs fn over [0, n) on up to the calling thread's thread count, each piece at least `grain`
 * long (so work under 2 * grain runs inline on the caller).  Returns once every piece ran. */
void dt_parallel_for(int64_t n, int64_t grain, dt_parallel_fn fn, void *ctx);

/* The calling rank's thread count (its default on first use: DTLUA_NUM_THREADS, else
 * max(1, cores / ranks in this process)), and setting it (1..DT_MAX_THREADS; DT_ERR and a
 * message otherwise).  Workers beyond a lowered count stay idle until raised again. */
DT_API int dt_get_num_threads(void);
DT_API int dt_set_num_threads(int n);
/* The default before any set: DTLUA_NUM_THREADS when valid, else max(1, cores / ranks). */
DT_API int dt_default_num_threads(void);
/* DTLUA_NUM_THREADS as given when it is set but not an integer in 1..DT_MAX_THREADS, else NULL. */
DT_API const char *dt_num_threads_env_invalid(void);
/* How many ranks share this process (the launcher's -n, or the ranks of this host under MPI),
 * which the default divides the cores by; call before the ranks start. */
DT_API void dt_set_ranks_per_process(int n);
/* The cores this process may run on (sched_getaffinity). */
int dt_cpu_cores(void);

#endif
