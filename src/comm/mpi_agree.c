/* The fingerprint agreement's exchange: the minimum of two int64 over a communicator's ranks,
 * on every rank, by dissemination (round k: send to rank + 2^k, receive from rank - 2^k,
 * keep the minimum; after ceil(log2 n) rounds every rank has heard from every rank, directly
 * or not).  Point-to-point and polled, because Open MPI's non-blocking collectives
 * (MPI_Iallreduce) cost several times its point-to-point messages at this size; since every
 * rank hears from every other, the exchange is also a barrier. */
#include "comm/mpi_impl.h"

#define TAG_ROUND0 100 /* round k uses tag TAG_ROUND0 + k on the agreement's communicator */

int dt_mpi_agree_min(MPI_Comm comm, int64_t v[2], int64_t send_buf[2], dt_mpi_watch *w, double deadline,
                     int *timed_out) {
  int n, me;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  *timed_out = 0;
  for (int d = 1, k = 0; d < n; d <<= 1, k++) {
    int64_t in[2];
    send_buf[0] = v[0], send_buf[1] = v[1];
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_Irecv(in, 2, MPI_INT64_T, (me - d + n) % n, TAG_ROUND0 + k, comm, &r[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(send_buf, 2, MPI_INT64_T, (me + d) % n, TAG_ROUND0 + k, comm, &r[1]);
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
