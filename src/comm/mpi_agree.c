/* The fingerprint agreement's exchange: does every rank of a communicator hold the same int64,
 * on every rank?  Through shared memory where the ranks share a host (mpi_agree_shm.c), else by
 * point-to-point dissemination of the minimum of (h, ~h) (round k: send to rank + 2^k, receive
 * from rank - 2^k, keep the minimum; after ceil(log2 n) rounds every rank has heard from every
 * rank, directly or not; both minima equal (h, ~h) exactly when every rank has h).
 * Point-to-point and polled, because Open MPI's non-blocking collectives (MPI_Iallreduce) cost
 * several times its point-to-point messages at this size.  Either way every rank hears from
 * every other, so the exchange is also a barrier. */
#include <stdlib.h>

#include "comm/mpi_impl.h"

#define TAG_ROUND0 100 /* round k uses tag TAG_ROUND0 + k on the agreement's communicator */

struct dt_mpi_agree {
  MPI_Comm comm;
  dt_mpi_shm_agree *shm; /* NULL: point-to-point */
  int64_t send_buf[2];   /* a send may outlast a timeout: lives as long as the agreement */
};

dt_mpi_agree *dt_mpi_agree_new(MPI_Comm comm, int shared_memory) {
  dt_mpi_agree *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->comm = comm;
  if (shared_memory) a->shm = dt_mpi_shm_agree_new(comm);
  return a;
}

void dt_mpi_agree_free(dt_mpi_agree *a, int collective) {
  if (a) dt_mpi_shm_agree_free(a->shm, collective), free(a);
}

int dt_mpi_agree_shared(const dt_mpi_agree *a) { return a->shm != NULL; }

dt_mpi_shm_agree *dt_mpi_agree_shm(dt_mpi_agree *a) { return a->shm; }

static int agree_min(dt_mpi_agree *a, int64_t v[2], dt_mpi_watch *w, double deadline, int *timed_out) {
  int n, me;
  MPI_Comm_size(a->comm, &n);
  MPI_Comm_rank(a->comm, &me);
  *timed_out = 0;
  for (int d = 1, k = 0; d < n; d <<= 1, k++) {
    int64_t in[2];
    a->send_buf[0] = v[0], a->send_buf[1] = v[1];
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_Irecv(in, 2, MPI_INT64_T, (me - d + n) % n, TAG_ROUND0 + k, a->comm, &r[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(a->send_buf, 2, MPI_INT64_T, (me + d) % n, TAG_ROUND0 + k, a->comm, &r[1]);
    if (rc == MPI_SUCCESS) rc = dt_mpi_poll(2, r, NULL, w, deadline, timed_out);
    if (rc != MPI_SUCCESS || *timed_out) {
      /* in[] is about to go: withdraw the receive (unmatched, it cancels at once); the send
       * (16 bytes: sent eagerly) completes on its own from send_buf, which outlives us */
      if (r[0] != MPI_REQUEST_NULL && MPI_Cancel(&r[0]) == MPI_SUCCESS) MPI_Wait(&r[0], MPI_STATUS_IGNORE);
      if (r[1] != MPI_REQUEST_NULL) MPI_Request_free(&r[1]);
      return rc;
    }
    if (in[0] < v[0]) v[0] = in[0];
    if (in[1] < v[1]) v[1] = in[1];
  }
  return MPI_SUCCESS;
}

int dt_mpi_agree_same(dt_mpi_agree *a, int64_t h, int *same, dt_mpi_watch *w, double deadline, int *timed_out) {
  if (a->shm) return dt_mpi_shm_agree_same(a->shm, h, same, w, deadline, timed_out);
  int64_t v[2] = {h, ~h};
  int rc = agree_min(a, v, w, deadline, timed_out);
  *same = v[0] == h && v[1] == ~h;
  return rc;
}
