/* The collectives interface: one handle type (a communicator over a group of ranks) with a
 * vtable of operations, implemented by interchangeable backends (threads, mpi).
 *
 * Conventions: counts are in elements of `dtype`; buffers are contiguous host memory;
 * `root`, `dst` and `src` are ranks *in this communicator* (0..size-1); world_ranks maps
 * them to world ranks.  Every call is collective over the communicator (send/recv are
 * point-to-point) and returns DT_OK or DT_ERR with dt_error() set.  A failed collective
 * (mismatch, timeout, aborted world) leaves the communicator unusable. */
#ifndef DT_COMM_COMM_H
#define DT_COMM_COMM_H

#include "base/export.h"

#include <stddef.h>

#include "base/dtype.h"
#include "base/reduce_op.h"
#include "tensor/device.h"

typedef struct dt_comm dt_comm;

/* Sees every collective run on a communicator (dt.comm_debug records through it): each
 * dt_comm_* call reports once, after its argument checks, its name (a static string:
 * "all_gather" for both all_gather forms, "all_to_all" likewise), the bytes of this rank's
 * send buffer (scatter: the root's whole buffer, 0 elsewhere; barrier: 0) and the group size. */
typedef void (*dt_comm_observer_fn)(void *ud, const char *name, size_t bytes, int group_size);

/* Where one peer's part lies in a strided buffer: `rows` rows of `cols` contiguous elements,
 * `stride` elements apart, the first `offset` elements in.  The elements are the rows in
 * order: a sub-box of a contiguous tensor in row-major order, when it collapses to 2-d. */
typedef struct dt_comm_block {
  size_t offset, rows, cols, stride;
} dt_comm_block;

typedef struct dt_comm_ops {
  int (*all_reduce)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op);
  /* recv = concatenation of every rank's send; counts[r] = elements from rank r. */
  int (*all_gather_v)(dt_comm *c, const void *send, void *recv, const size_t *counts, dt_dtype dt);
  /* send holds size blocks of count; rank r gets block r reduced over ranks. */
  int (*reduce_scatter)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op);
  /* Block r of send (sendcounts[r]) goes to rank r; recv holds blocks by source. */
  int (*all_to_all_v)(dt_comm *c, const void *send, const size_t *sendcounts, void *recv,
                      const size_t *recvcounts, dt_dtype dt);
  int (*broadcast)(dt_comm *c, void *buf, size_t count, dt_dtype dt, int root);
  /* root's send holds size blocks of count; rank r receives block r. */
  int (*scatter)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root);
  /* root's recv gets size blocks of count, by rank (recv ignored elsewhere). */
  int (*gather)(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root);
  int (*send)(dt_comm *c, const void *buf, size_t count, dt_dtype dt, int dst);
  int (*recv)(dt_comm *c, void *buf, size_t count, dt_dtype dt, int src);
  int (*barrier)(dt_comm *c);
  /* This rank's arguments failed their checks (why): meets the peers' call on c, and every
   * rank returns DT_ERR with the message of the lowest such rank (tc_arg_error). */
  int (*fail)(dt_comm *c, const char *why);
  /* A communicator over the world ranks `ranks` (sorted, distinct, members of c).  *out is
   * NULL on ranks that are not members.  Backends where this is collective over c (MPI)
   * need every rank of c to call it with the same list. */
  int (*new_group)(dt_comm *c, const int *ranks, int n, dt_comm **out);
  void (*destroy)(dt_comm *c);
  /* Optional (NULL: the front packs and unpacks around all_to_all_v / all_gather_v):
   * all_to_all_v whose blocks are strided (send block r goes to rank r, which places it at its
   * recvblocks[source]); all_gather_v whose received blocks are strided (send is contiguous,
   * recvblocks[r] * rows * cols elements from rank r). */
  int (*all_to_all_blocks)(dt_comm *c, const void *send, const dt_comm_block *sendblocks, void *recv,
                           const dt_comm_block *recvblocks, dt_dtype dt);
  int (*all_gather_blocks)(dt_comm *c, const void *send, void *recv, const dt_comm_block *recvblocks, dt_dtype dt);
  /* Optional (NULL: the front packs around reduce_scatter, host buffers only): reduce_scatter
   * whose send blocks are strided and of any sizes (sendblocks[r]: what is reduced into rank
   * r's contiguous recv; every rank's block r has the same rows and cols). */
  int (*reduce_scatter_blocks)(dt_comm *c, const void *send, const dt_comm_block *sendblocks, void *recv, dt_dtype dt,
                               dt_reduce_op op);
} dt_comm_ops;

/* The fields every backend's communicator starts with. */
struct dt_comm {
  const dt_comm_ops *ops;
  const char *backend; /* "threads", "mpi" */
  int rank, size;
  int *world_ranks; /* size entries, owned */
  double timeout;   /* seconds before a stuck call fails (<= 0: never); this rank's own
                       setting, so that one rank may wait without limit (the REPL) */
  dt_comm_observer_fn observer; /* NULL: none (the front sets these, backends leave them zero) */
  void *observer_ud;
  int observer_paused; /* > 0: calls are not reported (dt_comm_pause_observer) */
  unsigned long entered; /* calls that passed the front's checks into the backend: a binding
                            compares it to know whether a failure came before any collective */
  int async_inline;      /* the backend cannot run calls on another thread (MPI without thread
                            support): async calls run at issue, their works complete at once */
  struct dt_comm *root;  /* the world communicator this one descends from (NULL: itself) */
  struct dt_comm_async *async; /* root only: this rank's async queue (comm_async.c), or NULL */
  struct dt_comm *device_twin; /* the NCCL communicator over the same ranks, for buffers on
                                  "cuda" (dt_comm_for_device); NULL until first needed, owned */
  struct dt_comm *host_twin;   /* on an NCCL communicator: the host one it belongs to */
};

/* ---- calls (argument checks, then the backend) ---- */
DT_API int dt_comm_all_reduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op);
DT_API int dt_comm_all_gather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt);
DT_API int dt_comm_all_gather_v(dt_comm *c, const void *send, void *recv, const size_t *counts, dt_dtype dt);
DT_API int dt_comm_reduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op);
DT_API int dt_comm_all_to_all(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt);
DT_API int dt_comm_all_to_all_v(dt_comm *c, const void *send, const size_t *sendcounts, void *recv,
                         const size_t *recvcounts, dt_dtype dt);
/* The strided forms (dt_comm_block): no packing where the backend reads peers' memory (threads). */
DT_API int dt_comm_all_to_all_blocks(dt_comm *c, const void *send, const dt_comm_block *sendblocks, void *recv,
                                     const dt_comm_block *recvblocks, dt_dtype dt);
DT_API int dt_comm_all_gather_blocks(dt_comm *c, const void *send, void *recv, const dt_comm_block *recvblocks,
                                     dt_dtype dt);
DT_API int dt_comm_reduce_scatter_blocks(dt_comm *c, const void *send, const dt_comm_block *sendblocks, void *recv,
                                         dt_dtype dt, dt_reduce_op op);
/* Copies the elements of block sb of src into block db of dst (the same number of elements). */
DT_API void dt_comm_block_copy(void *dst, const dt_comm_block *db, const void *src, const dt_comm_block *sb, size_t esz);
DT_API int dt_comm_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype dt, int root);
DT_API int dt_comm_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root);
DT_API int dt_comm_gather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root);
DT_API int dt_comm_send(dt_comm *c, const void *buf, size_t count, dt_dtype dt, int dst);
DT_API int dt_comm_recv(dt_comm *c, void *buf, size_t count, dt_dtype dt, int src);
DT_API int dt_comm_barrier(dt_comm *c);
/* This rank's arguments for its next collective on c failed (why): instead of leaving its
 * peers waiting in that collective, meets them there, and every rank of c returns DT_ERR
 * with the same message naming this rank (the lowest failed one).  Peers that entered a
 * metadata exchange first (all_gather_v, all_to_all_v, scatter) meet it there. */
DT_API int dt_comm_fail_agreed(dt_comm *c, const char *why);
DT_API int dt_comm_new_group(dt_comm *c, const int *ranks, int n, dt_comm **out);
DT_API void dt_comm_destroy(dt_comm *c);

/* ---- asynchronous calls (comm_async.c) ----
 * dt_comm_i* issue the collective and return at once with *work; the call runs on this rank's
 * communication thread (one per rank, shared by all its groups), in issue order, so the rank
 * computes meanwhile.  Every blocking call on any of the rank's communicators first waits
 * for the rank's outstanding async calls: a rank's collectives run in the order it issued
 * them, exactly as if all were blocking, so ordering, mismatch and timeout checks are the
 * backend's own.  Argument checks and the observer report happen at issue.  The buffers
 * must stay valid until the work completes (wait, or free); the size tables are copied.
 * work NULL: the blocking call (so that a binding calls one function for both forms). */
typedef struct dt_comm_work dt_comm_work;
DT_API int dt_comm_iall_reduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op,
                               dt_comm_work **work);
DT_API int dt_comm_iall_gather_v(dt_comm *c, const void *send, void *recv, const size_t *counts, dt_dtype dt,
                                 dt_comm_work **work);
DT_API int dt_comm_iall_gather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_comm_work **work);
DT_API int dt_comm_ireduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt,
                                   dt_reduce_op op, dt_comm_work **work);
DT_API int dt_comm_iall_to_all_v(dt_comm *c, const void *send, const size_t *sendcounts, void *recv,
                                 const size_t *recvcounts, dt_dtype dt, dt_comm_work **work);
DT_API int dt_comm_iall_to_all(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_comm_work **work);
DT_API int dt_comm_ibroadcast(dt_comm *c, void *buf, size_t count, dt_dtype dt, int root, dt_comm_work **work);
/* Blocks until w completed; DT_OK, or DT_ERR with the collective's error.  A second wait
 * is an error ("already waited"). */
DT_API int dt_comm_work_wait(dt_comm_work *w);
/* *done = 1 when w completed (never blocks). */
DT_API void dt_comm_work_test(dt_comm_work *w, int *done);
/* Releases w; one not yet completed is waited for first (its buffers are in use). */
DT_API void dt_comm_work_free(dt_comm_work *w);
/* Waits for every async call this rank issued (on any of its communicators) to complete. */
DT_API void dt_comm_async_drain(dt_comm *c);
/* The end of the rank's program: drains, then DT_ERR when some work was never waited
 * ("N async collective(s) ... never waited") or one that was never waited failed. */
DT_API int dt_comm_async_finish(dt_comm *c);

/* Installs c's observer (fn NULL: none). */
DT_API void dt_comm_set_observer(dt_comm *c, dt_comm_observer_fn fn, void *ud);
/* Suspends c's observer until the matching resume (nestable): the metadata exchanges inside
 * one user-visible call, and the runtime's own agreements, are not collectives of the user. */
DT_API void dt_comm_pause_observer(dt_comm *c);
DT_API void dt_comm_resume_observer(dt_comm *c);

/* Sets c's timeout (<= 0: none) and returns the previous one. */
DT_API double dt_comm_set_timeout(dt_comm *c, double seconds);
/* Rank of world rank w in c, or -1. */
DT_API int dt_comm_group_rank(const dt_comm *c, int w);
/* "{0,2,3}" into buf; returns buf. */
DT_API char *dt_comm_format_ranks(char *buf, size_t len, const int *ranks, int n);

/* ---- the threads backend: N ranks as N threads of one process ---- */
typedef struct dt_threads_world dt_threads_world;
/* timeout_s <= 0: no timeout. */
DT_API dt_threads_world *dt_threads_world_new(int size, double timeout_s);
DT_API void dt_threads_world_free(dt_threads_world *w);
/* The world communicator of one rank (each rank's thread calls it once). */
DT_API dt_comm *dt_threads_world_comm(dt_threads_world *w, int rank);
/* Tears the world down: every rank waiting now or later in a collective fails with
 * "aborted: <reason>".  Safe from any thread; the first reason wins. */
DT_API void dt_threads_world_abort(dt_threads_world *w, const char *reason);
/* Records that a rank's program ended, so peers waiting for it fail instead of hanging. */
DT_API void dt_threads_world_rank_exited(dt_threads_world *w, int rank);
/* The REPL on a threads world (threads_repl.c); NULL / no-ops for other backends.
 * repl_comm: this rank's communicator over the world's ranks whose state is apart from the
 * program's groups (each rank calls it once).  line_done: this rank finished the line, so
 * program collectives waiting for it fail at once ("finished the line without joining it").
 * line_over: called by one rank once every rank has finished the line (the REPL's gather)
 * and before the next starts: clears the program groups' failure and counters. */
DT_API dt_comm *dt_threads_repl_comm(dt_comm *world);
DT_API void dt_threads_line_done(dt_comm *world);
DT_API void dt_threads_line_over(dt_comm *world);
/* Ctrl-C (async-signal-safe): program collectives waiting now fail with "interrupted!" until
 * line_over. */
DT_API void dt_threads_interrupt(dt_comm *world);

/* ---- the MPI backend (when built with MPI) ---- */
/* Initialises MPI (once per process) and returns the world communicator. */
DT_API dt_comm *dt_mpi_world_comm(int *argc, char ***argv);
DT_API int dt_mpi_available(void);
/* The end of this rank's program (DTLUA_DEBUG=collectives: fails peers waiting for it). */
DT_API int dt_mpi_finish(dt_comm *world);
/* This process's rank among the world's processes on its host (a shared-memory split,
 * whatever the launcher), or -1 when MPI cannot say.  Collective over the world. */
DT_API int dt_mpi_local_rank(dt_comm *world);
DT_API void dt_mpi_finalize(void);
DT_API void dt_mpi_abort(int code);

/* ---- the NCCL backend: collectives on buffers on "cuda" (nccl.c; nccl_none.c without it) ----
 * A host communicator (threads, mpi) holds its NCCL twin over the same ranks, so a world holds
 * both and each collective goes where its tensors are (dt_comm_for_device). */
DT_API int dt_nccl_available(void); /* 1: this build has the NCCL backend */
/* The communicator for buffers on device dev: c itself on the host; on "cuda" c's NCCL twin,
 * created on first use (collective over c: the unique id goes through c).  NULL + dt_error
 * naming who when the build has no NCCL or the ranks have no GPU. */
DT_API dt_comm *dt_comm_for_device(dt_comm *c, dt_device_type dev, const char *who);

/* ---- benchmark references (bench/collectives.lua) ---- */
/* Seconds per call of the MPI collective `coll` ("all_reduce", "all_gather",
 * "reduce_scatter", "all_to_all") on MPI_COMM_WORLD with a float32 buffer of `bytes`
 * (the full tensor, as bench/collectives.lua counts it), called directly from C. */
DT_API int dt_mpi_bench_raw(const char *coll, size_t bytes, int iters, double *seconds);

#endif
