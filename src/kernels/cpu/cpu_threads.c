#include "config.h"
#include "kernels/cpu/cpu_threads.h"
#include "base/error.h"
#include "base/thread_pool.h"

#ifdef DT_HAVE_OPENBLAS
#include <cblas.h> /* openblas_set_num_threads */
#elif defined(DT_HAVE_CBLAS)
#include <blis.h>
#endif

static void set_blas_threads(int n) {
#ifdef DT_HAVE_OPENBLAS
  openblas_set_num_threads(n);
#elif defined(DT_HAVE_CBLAS)
  bli_thread_set_num_threads(n);
#else
  (void)n;
#endif
}

int dt_cpu_set_threads(int n, const char *who) {
  if (n < 1 || n > DT_MAX_THREADS)
    return dt_error("%s: the thread count must be an integer in 1..%d, got %d", who, DT_MAX_THREADS, n);
  dt_set_num_threads(n);
  set_blas_threads(1);
  return DT_OK;
}

void dt_cpu_sync_blas_threads(void) { set_blas_threads(1); }
