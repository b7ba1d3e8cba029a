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
/* The same, publishing two addresses with the hash (the buffers peers read, mpi_shm_coll.c). */
int dt_mpi_shm_agree_publish(dt_mpi_shm_agree *s, int64_t hash, const void *a, const void *b, int *same,
                             dt_mpi_watch *w, double deadline, int *timed_out);
/* After an agreement: rank r's published addresses, and its process id. */
void dt_mpi_shm_peer(dt_mpi_shm_agree *s, int r, uintptr_t addr[2], int *pid);
int dt_mpi_shm_size(const dt_mpi_shm_agree *s);
int dt_mpi_shm_rank(const dt_mpi_shm_agree *s);
/* Rank r's process id as this rank sees it, and (*remote) its address in rank r's own address
 * space (read through process_vm_readv by the probe). */
const int64_t *dt_mpi_shm_pid(dt_mpi_shm_agree *s, int r, uintptr_t *remote);
/* Steps within the current call: this rank marks step k (failed: its reads failed) and waits
 * until every rank has (polled as dt_mpi_poll_until); *peer_failed: the first rank whose reads
 * failed in this call, or -1.  MPI's return code. */
#define DT_MPI_SHM_NSTEPS 2 /* 0: reduced (all_reduce's middle), 1: done reading */
int dt_mpi_shm_step(dt_mpi_shm_agree *s, int k, int failed, int *peer_failed, dt_mpi_watch *w, double deadline,
                    int *timed_out);
/* The shared-memory form of the agreement, or NULL (mpi_agree.c) */
dt_mpi_shm_agree *dt_mpi_agree_shm(dt_mpi_agree *a);

/* mpi_shm_coll.c: the collectives through process_vm_readv, for a group with a shared-memory
 * agreement.  Collective to create: NULL on every rank where any rank cannot read its peers,
 * or where DTLUA_MPI_SHM=0. */
typedef struct dt_mpi_shm_coll dt_mpi_shm_coll;
dt_mpi_shm_coll *dt_mpi_shm_coll_new(dt_mpi_shm_agree *s, MPI_Comm comm);
void dt_mpi_shm_coll_free(dt_mpi_shm_coll *x);
/* Whether a call of kind moving bytes (its larger buffer) takes this path (x NULL: never;
 * DTLUA_MPI_SHM=always: at every size; else where it is quicker than MPI on this many ranks):
 * a function of the fingerprinted arguments and the group only, so agreeing ranks take the
 * same path. */
int dt_mpi_shm_worth(const dt_mpi_shm_coll *x, tc_kind kind, size_t bytes);
/* How a call's waits run, and how it ended: mpi_rc (MPI's code), timed_out, or err (an errno of
 * this rank's reads, -1 when another rank's failed) with failed_rank, the rank read or failing. */
typedef struct {
  dt_mpi_watch *w;
  double deadline;
  int mpi_rc, timed_out, err, failed_rank;
} dt_mpi_shm_run;
/* Each called by every rank once dt_mpi_shm_agree_publish agreed, with the addresses it
 * published (a: send, b: recv; broadcast: a = buf).  0, or non-zero with run saying why. */
int dt_mpi_shm_all_gather(dt_mpi_shm_coll *x, void *recv, const size_t *counts, size_t esize, dt_mpi_shm_run *run);
int dt_mpi_shm_all_to_all(dt_mpi_shm_coll *x, void *recv, size_t count, size_t esize, dt_mpi_shm_run *run);
/* all_gather into strided blocks of recv (rank r's contiguous send into the rows of blocks[r]),
 * each peer's rows read in one process_vm_readv per ROWS_PER_READ rows: no packed copy. */
int dt_mpi_shm_all_gather_blocks(dt_mpi_shm_coll *x, void *recv, const dt_comm_block *blocks, size_t esize,
                                 dt_mpi_shm_run *run);
int dt_mpi_shm_broadcast(dt_mpi_shm_coll *x, void *buf, size_t bytes, int root, dt_mpi_shm_run *run);
int dt_mpi_shm_reduce_scatter(dt_mpi_shm_coll *x, void *recv, size_t count, dt_dtype dt, dt_reduce_op op,
                              dt_mpi_shm_run *run);
int dt_mpi_shm_all_reduce(dt_mpi_shm_coll *x, void *recv, size_t count, dt_dtype dt, dt_reduce_op op,
                          dt_mpi_shm_run *run);

#endif
