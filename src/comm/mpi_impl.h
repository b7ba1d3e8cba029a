/* MPI backend internals: datatype and reduce-op mapping (custom ops for bf16/f16). */
#ifndef DT_COMM_MPI_IMPL_H
#define DT_COMM_MPI_IMPL_H

#include <mpi.h>

#include "comm/call_desc.h"
#include "comm/comm.h"

MPI_Datatype dt_mpi_datatype(dt_dtype dt);
/* The MPI_Op for (op, dtype): a built-in one, or a custom op (created once) for bf16/f16,
 * which computes in f32 through the shared reduction kernels.  avg maps to sum; the
 * caller divides. */
MPI_Op dt_mpi_op(dt_reduce_op op, dt_dtype dt);

/* mpi_watch.c: the side channel that names the ranks of a stuck collective (one per process,
 * shared by the world and its groups). */
typedef struct dt_mpi_watch dt_mpi_watch;
dt_mpi_watch *dt_mpi_watch_new(MPI_Comm world);
void dt_mpi_watch_free(dt_mpi_watch *w);
/* Records this rank's current call on the group label (what it answers when asked:
 * "all_reduce(sum, float32, 4 elements) in group {0,1}"); a send/recv with its peer's world rank. */
void dt_mpi_watch_doing(dt_mpi_watch *w, const tc_desc *d, const char *label);
void dt_mpi_watch_doing_p2p(dt_mpi_watch *w, int is_send, size_t count, dt_dtype dt, int peer, const char *label);
/* Answers the questions of ranks that timed out (called while polling a call). */
void dt_mpi_watch_serve(dt_mpi_watch *w);
/* After a timeout: appends "; rank R <its call>" for every world rank to buf (a rank that
 * does not answer within 2 s is outside any polled call). */
void dt_mpi_watch_ask_all(dt_mpi_watch *w, char *buf, size_t len);

/* mpi_poll.c: waits for the n requests (statuses: n of them, or NULL), answering the watch (w may be NULL) between tests,
 * until deadline (dt_now() seconds; 0: none), then sets *timed_out.  MPI's return code. */
int dt_mpi_poll(int n, MPI_Request *reqs, MPI_Status *statuses, dt_mpi_watch *w, double deadline, int *timed_out);

/* mpi_agree.c: v = the minimum of each of v[0], v[1] over comm's ranks, on every rank, by
 * point-to-point messages polled as dt_mpi_poll (so also a barrier).  send_buf: two int64
 * that live as long as comm (a send may outlast a timeout).  MPI's return code. */
int dt_mpi_agree_min(MPI_Comm comm, int64_t v[2], int64_t send_buf[2], dt_mpi_watch *w, double deadline,
                     int *timed_out);

#endif
