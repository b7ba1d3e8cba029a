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

/* mpi_poll.c: calls test (which sets *done, returns MPI's code) until done or an error,
 * answering the watch (w may be NULL) between tests, until deadline (dt_now() seconds; 0:
 * none), then sets *timed_out.  MPI's return code. */
typedef int (*dt_mpi_test_fn)(void *arg, int *done);
int dt_mpi_poll_until(dt_mpi_test_fn test, void *arg, dt_mpi_watch *w, double deadline, int *timed_out);
/* The same for the n requests (statuses: n of them, or NULL). */
int dt_mpi_poll(int n, MPI_Request *reqs, MPI_Status *statuses, dt_mpi_watch *w, double deadline, int *timed_out);

/* mpi_agree.c: the fingerprint agreement of a communicator (collective to create).
 * shared_memory: through a shared-memory window where every rank is on this host, else (or 0)
 * point-to-point messages on comm, which must live as long as the agreement. */
typedef struct dt_mpi_agree dt_mpi_agree;
dt_mpi_agree *dt_mpi_agree_new(MPI_Comm comm, int shared_memory);
/* collective: every rank frees it now (the shared window too; else that stays to MPI_Finalize) */
void dt_mpi_agree_free(dt_mpi_agree *a, int collective);
int dt_mpi_agree_shared(const dt_mpi_agree *a);
/* *same = every rank of the communicator passed this h, on every rank (also a barrier);
 * polled as dt_mpi_poll_until.  MPI's return code. */
int dt_mpi_agree_same(dt_mpi_agree *a, int64_t h, int *same, dt_mpi_watch *w, double deadline, int *timed_out);

/* mpi_agree_shm.c: the shared-memory form (collective to create; NULL where the ranks span
 * hosts or the window cannot be made, the same on every rank). */
typedef struct dt_mpi_shm_agree dt_mpi_shm_agree;
dt_mpi_shm_agree *dt_mpi_shm_agree_new(MPI_Comm comm);
void dt_mpi_shm_agree_free(dt_mpi_shm_agree *s, int collective);
int dt_mpi_shm_agree_same(dt_mpi_shm_agree *s, int64_t hash, int *same, dt_mpi_watch *w, double deadline, int *timed_out);

#endif
