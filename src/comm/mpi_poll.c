/* Waiting under a deadline: the MPI backend's only waits that can last (the fingerprint
 * agreement, where a rank waits for its peers to reach the call; send/recv; the checks after a
 * mismatch).  Tests tightly first (a peer that is nearly there costs no syscall), yields the
 * core every 64 tests (ranks may outnumber cores), and after POLL_BACKOFF_S sleeps between
 * tests, so that a rank waiting for a slow peer leaves the cores to those still computing.
 * Between tests it answers the watch's questions. */
#include <sched.h>
#include <time.h>

#include "comm/mpi_impl.h"
#include "comm/spin_wait.h"

#define POLL_BACKOFF_S 10e-3   /* waits longer than this are not latency-bound */
#define POLL_SLEEP_NS 50000L   /* then one test per sleep: <= 1% of such a wait */

int dt_mpi_poll_until(dt_mpi_test_fn test, void *arg, dt_mpi_watch *w, double deadline, int *timed_out) {
  double t0 = 0; /* read at the first check: a wait that ends within 63 tests reads no clock */
  *timed_out = 0;
  for (unsigned i = 0;; i++) {
    int done = 0, rc = test(arg, &done);
    if (rc != MPI_SUCCESS || done) return rc;
    if (i % 64 != 63) continue;
    sched_yield();
    dt_mpi_watch_serve(w);
    double t = dt_now();
    if (t0 == 0) t0 = t;
    if (deadline > 0 && t > deadline) return *timed_out = 1, MPI_SUCCESS;
    if (t - t0 > POLL_BACKOFF_S) {
      struct timespec ts = {0, POLL_SLEEP_NS};
      nanosleep(&ts, NULL);
      i = 62; /* from now on every test is followed by the checks above */
    }
  }
}

typedef struct {
  int n;
  MPI_Request *reqs;
  MPI_Status *statuses;
} requests;

static int test_requests(void *arg, int *done) {
  requests *r = arg;
  /* one request: MPI_Test, whose code is the request's own (MPI_Testall's would be
   * MPI_ERR_IN_STATUS) */
  return r->n == 1 ? MPI_Test(r->reqs, done, r->statuses ? r->statuses : MPI_STATUS_IGNORE)
                   : MPI_Testall(r->n, r->reqs, done, r->statuses ? r->statuses : MPI_STATUSES_IGNORE);
}

int dt_mpi_poll(int n, MPI_Request *reqs, MPI_Status *statuses, dt_mpi_watch *w, double deadline, int *timed_out) {
  requests r = {n, reqs, statuses};
  return dt_mpi_poll_until(test_requests, &r, w, deadline, timed_out);
}
