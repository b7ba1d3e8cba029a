/* The NCCL backend: collectives on buffers in GPU memory, one NCCL communicator per host
 * communicator (its twin, comm_device.c), one CUDA device and one communication stream per
 * rank.  Each call: the ranks agree on the call through the host twin (the mismatch checks and
 * dt_comm_fail_agreed of the other backends), the stream waits for the work queued before it on
 * the default stream, NCCL enqueues, and the watchdog (nccl_watch.c) polls the completion
 * against DTLUA_TIMEOUT -- a stuck collective aborts the communicator and ends the world with
 * the rank and the op named.  Collectives NCCL has no call for run as grouped send/recv
 * (nccl_plan.c).  Every CUDA and NCCL return code is checked and raised naming the call.
 *
 * Built and linked where the toolkit is, but run only on a GPU: doc/status.md lists what is
 * left to verify there. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/blocks.h"
#include "comm/call_desc.h"
#include "comm/nccl_backend.h"
#include "comm/nccl_id.h"
#include "comm/nccl_plan.h"
#include "comm/nccl_watch.h"
#include "comm/spin_wait.h"
#include "comm/threads_impl.h"

_Static_assert(NCCL_UNIQUE_ID_BYTES == DT_NCCL_ID_BYTES, "the id nccl_id.c exchanges");

typedef struct nccl_comm {
  dt_comm base;
  ncclComm_t comm;
  cudaStream_t stream;
  cudaEvent_t ready, done; /* the default stream's work before the call; the call's end */
  int device;
  int broken; /* aborted by the watchdog or failed: unusable, as the interface says */
  char label[64];
} nccl_comm;

static const dt_comm_ops nccl_ops;

static int cuda_error(cudaError_t e, const char *call, const char *who) {
  return dt_error("%s: %s failed: %s (%s)", who, call, cudaGetErrorString(e), cudaGetErrorName(e));
}

static int nccl_error(ncclResult_t r, ncclComm_t comm, const char *call, const char *who) {
  const char *last = ncclGetLastError(comm);
  return dt_error("%s: %s failed: %s%s%s", who, call, ncclGetErrorString(r), last && *last ? ": " : "",
                  last ? last : "");
}

/* fn(args) checked; the error names fn and the collective (who). */
#define CUDA(who, fn, args)                                           \
  do {                                                                \
    cudaError_t e_ = fn args;                                         \
    if (e_ != cudaSuccess) return cuda_error(e_, #fn, who);           \
  } while (0)
#define NCCL(c, who, fn, args)                                        \
  do {                                                                \
    ncclResult_t r_ = fn args;                                        \
    if (r_ != ncclSuccess) return nccl_error(r_, (c)->comm, #fn, who); \
  } while (0)

int dt_nccl_available(void) { return 1; }

static ncclDataType_t nccl_type(dt_dtype dt) {
  switch (dt) {
  case DT_FLOAT32: return ncclFloat32;
  case DT_FLOAT64: return ncclFloat64;
  case DT_BFLOAT16: return ncclBfloat16;
  case DT_FLOAT16: return ncclFloat16;
  case DT_INT64: return ncclInt64;
  case DT_INT32: return ncclInt32;
  case DT_UINT8:
  case DT_BOOL: return ncclUint8; /* one byte of 0/1 (nccl_op makes its reductions logical) */
  default: return ncclUint8;
  }
}

/* bool reduces logically, as on the host backends: sum/max = or (max of 0/1 bytes),
 * product/min = and (min), never a byte sum of 2. */
static ncclRedOp_t nccl_op(dt_reduce_op op, dt_dtype dt) {
  if (dt == DT_BOOL) return op == DT_REDUCE_SUM || op == DT_REDUCE_MAX ? ncclMax : ncclMin;
  switch (op) {
  case DT_REDUCE_SUM: return ncclSum;
  case DT_REDUCE_AVG: return ncclAvg;
  case DT_REDUCE_MAX: return ncclMax;
  case DT_REDUCE_MIN: return ncclMin;
  case DT_REDUCE_PRODUCT: return ncclProd;
  case DT_NREDUCE_OPS: break; /* refused by the front's dt_reduce_op_check */
  }
  return ncclSum;
}

/* ---- the watchdog's query and the end of the world ---- */

static dt_watch_state query(void *ud, char *why, size_t len) {
  nccl_comm *c = ud;
  cudaError_t e = cudaEventQuery(c->done);
  if (e == cudaSuccess) return DT_WATCH_DONE;
  if (e != cudaErrorNotReady) {
    snprintf(why, len, "cudaEventQuery failed: %s", cudaGetErrorString(e));
    return DT_WATCH_FAILED;
  }
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(c->comm, &async);
  if (r != ncclSuccess) {
    snprintf(why, len, "ncclCommGetAsyncError failed: %s", ncclGetErrorString(r));
    return DT_WATCH_FAILED;
  }
  if (async != ncclSuccess && async != ncclInProgress) {
    snprintf(why, len, "asynchronous NCCL error: %s", ncclGetErrorString(async));
    return DT_WATCH_FAILED;
  }
  return DT_WATCH_PENDING;
}

static double clock_now(void *ud) {
  (void)ud;
  return dt_now();
}

static void pause_poll(void *ud) {
  (void)ud;
  sched_yield();
}

/* The watchdog's last step, as PyTorch's: the stuck rank's communicator is aborted and the
 * whole world ends, so no rank hangs in it.  Threads: every rank's waits fail with the
 * reason; MPI: the reason on stderr and MPI_Abort. */
static void end_world(nccl_comm *c, const char *reason) {
  ncclCommAbort(c->comm);
  c->comm = NULL;
  c->broken = 1;
  dt_comm *host = c->base.host_twin->root ? c->base.host_twin->root : c->base.host_twin;
  if (strcmp(host->backend, "threads") == 0) {
    dt_threads_world_abort(((tc_comm *)host)->g->world, reason);
    return;
  }
  fprintf(stderr, "%s\n", reason);
  fflush(stderr);
  dt_mpi_abort(1);
}

/* ---- one call ---- */

/* Every rank's (kind, dtype, op, root, count) through the host twin: a mismatch, or a peer's
 * failed arguments (dt_comm_fail_agreed), is an error on every rank before NCCL is entered. */
static int agree(nccl_comm *c, const tc_desc *d) {
  dt_comm *h = c->base.host_twin;
  int n = h->size;
  int64_t mine[5] = {d->kind, d->dtype, d->op, d->root, (int64_t)d->count};
  int64_t *all = malloc(sizeof(int64_t) * 5 * (size_t)n);
  size_t *counts = malloc(sizeof(size_t) * (size_t)n);
  if (!all || !counts) return free(all), free(counts), dt_error("%s: out of memory", tc_kind_name(d->kind));
  for (int r = 0; r < n; r++) counts[r] = 5;
  int st = h->ops->all_gather_v(h, mine, all, counts, DT_INT64);
  free(counts);
  for (int r = 1; st == DT_OK && r < n; r++) {
    tc_desc a = {.kind = (tc_kind)all[0], .dtype = (dt_dtype)all[1], .op = (dt_reduce_op)all[2], .root = (int)all[3],
                 .count = (size_t)all[4]};
    tc_desc b = {.kind = (tc_kind)all[5 * r], .dtype = (dt_dtype)all[5 * r + 1], .op = (dt_reduce_op)all[5 * r + 2],
                 .root = (int)all[5 * r + 3], .count = (size_t)all[5 * r + 4]};
    if (!tc_same_call(&a, &b)) st = tc_mismatch_error(c->label, h->world_ranks[0], &a, h->world_ranks[r], &b, "");
  }
  free(all);
  return st;
}

/* Before the enqueue: usable, on the rank's device, after the default stream's work; a
 * collective (d) is first agreed on, point-to-point (d NULL) is not. */
static int begin_call(nccl_comm *c, const tc_desc *d, const char *who) {
  if (c->broken) return dt_error("%s: the NCCL communicator of group %s failed earlier and is unusable", who, c->label);
  if (d && agree(c, d) != DT_OK) return DT_ERR;
  CUDA(who, cudaSetDevice, (c->device)); /* the async collectives run on the comm thread */
  CUDA(who, cudaEventRecord, (c->ready, 0));
  CUDA(who, cudaStreamWaitEvent, (c->stream, c->ready, 0));
  return DT_OK;
}
static int begin(nccl_comm *c, const tc_desc *d) { return begin_call(c, d, tc_kind_name(d->kind)); }

/* After the enqueue: the watchdog waits for the stream's completion. */
static int finish(nccl_comm *c, const char *who) {
  CUDA(who, cudaEventRecord, (c->done, c->stream));
  dt_watchdog w = {.timeout = c->base.timeout, .query = query, .clock = clock_now, .pause = pause_poll, .ud = c};
  int timed_out = 0;
  if (dt_watchdog_wait(&w, c->base.world_ranks[c->base.rank], who, c->label, &timed_out) == DT_OK) return DT_OK;
  c->broken = 1;
  if (timed_out) end_world(c, dt_error_message());
  return DT_ERR;
}

static int p2p_run(nccl_comm *c, const dt_p2p_plan *p, const void *send, void *recv, dt_dtype dt, const char *who) {
  size_t esz = dt_dtype_size(dt);
  ncclDataType_t t = nccl_type(dt);
  if (p->self_count)
    CUDA(who, cudaMemcpyAsync, ((char *)recv + p->self_recv * esz, (const char *)send + p->self_send * esz,
                                p->self_count * esz, cudaMemcpyDeviceToDevice, c->stream));
  NCCL(c, who, ncclGroupStart, ());
  for (int i = 0; i < p->n; i++) {
    const dt_p2p_step *s = &p->steps[i];
    ncclResult_t r = s->kind == DT_P2P_SEND
                         ? ncclSend((const char *)send + s->offset * esz, s->count, t, s->peer, c->comm, c->stream)
                         : ncclRecv((char *)recv + s->offset * esz, s->count, t, s->peer, c->comm, c->stream);
    if (r != ncclSuccess) {
      ncclGroupEnd();
      return nccl_error(r, c->comm, s->kind == DT_P2P_SEND ? "ncclSend" : "ncclRecv", who);
    }
  }
  NCCL(c, who, ncclGroupEnd, ());
  return DT_OK;
}

/* A plan made (st), run and waited for. */
static int p2p_call(nccl_comm *c, int st, dt_p2p_plan *p, const void *send, void *recv, dt_dtype dt, const char *who) {
  if (st == DT_OK) st = p2p_run(c, p, send, recv, dt, who);
  dt_nccl_plan_free(p);
  return st == DT_OK ? finish(c, who) : st;
}

/* ---- the operations ---- */

/* all_reduce and reduce_scatter (count: the elements of recv): the same steps around two calls. */
static int reduction(dt_comm *b, tc_kind kind, const void *send, void *recv, size_t count, dt_dtype dt,
                     dt_reduce_op op) {
  nccl_comm *c = (nccl_comm *)b;
  tc_desc d = {.kind = kind, .dtype = dt, .op = op, .count = count};
  const char *who = tc_kind_name(kind);
  if (begin(c, &d)) return DT_ERR;
  if (kind == TC_ALL_REDUCE)
    NCCL(c, who, ncclAllReduce, (send, recv, count, nccl_type(dt), nccl_op(op, dt), c->comm, c->stream));
  else
    NCCL(c, who, ncclReduceScatter, (send, recv, count, nccl_type(dt), nccl_op(op, dt), c->comm, c->stream));
  return finish(c, who);
}

static int n_all_reduce(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op) {
  return reduction(b, TC_ALL_REDUCE, send, recv, count, dt, op);
}

static int n_reduce_scatter(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op) {
  return reduction(b, TC_REDUCE_SCATTER, send, recv, count, dt, op);
}

static int all_equal(const size_t *counts, int n) {
  for (int r = 1; r < n; r++)
    if (counts[r] != counts[0]) return 0;
  return 1;
}

static int n_all_gather_v(dt_comm *b, const void *send, void *recv, const size_t *counts, dt_dtype dt) {
  nccl_comm *c = (nccl_comm *)b;
  tc_desc d = {.kind = TC_ALL_GATHER, .dtype = dt, .count = counts[b->rank]};
  if (begin(c, &d)) return DT_ERR;
  if (all_equal(counts, b->size)) { /* every rank sees the same counts, so all take this path */
    NCCL(c, "all_gather", ncclAllGather, (send, recv, counts[0], nccl_type(dt), c->comm, c->stream));
    return finish(c, "all_gather");
  }
  dt_p2p_plan p;
  return p2p_call(c, dt_nccl_plan_all_gather_v(b->rank, b->size, counts, &p), &p, send, recv, dt, "all_gather");
}

static int n_all_to_all_v(dt_comm *b, const void *send, const size_t *sendcounts, void *recv,
                          const size_t *recvcounts, dt_dtype dt) {
  nccl_comm *c = (nccl_comm *)b;
  tc_desc d = {.kind = TC_ALL_TO_ALL, .dtype = dt};
  if (begin(c, &d)) return DT_ERR;
  dt_p2p_plan p;
  return p2p_call(c, dt_nccl_plan_all_to_all_v(b->rank, b->size, sendcounts, recvcounts, &p), &p, send, recv, dt,
                  "all_to_all");
}

static int n_broadcast(dt_comm *b, void *buf, size_t count, dt_dtype dt, int root) {
  nccl_comm *c = (nccl_comm *)b;
  tc_desc d = {.kind = TC_BROADCAST, .dtype = dt, .root = root, .count = count};
  if (begin(c, &d)) return DT_ERR;
  NCCL(c, "broadcast", ncclBroadcast, (buf, buf, count, nccl_type(dt), root, c->comm, c->stream));
  return finish(c, "broadcast");
}

static int n_scatter(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  nccl_comm *c = (nccl_comm *)b;
  tc_desc d = {.kind = TC_SCATTER, .dtype = dt, .root = root, .count = count};
  if (begin(c, &d)) return DT_ERR;
  dt_p2p_plan p;
  return p2p_call(c, dt_nccl_plan_scatter(b->rank, b->size, count, root, &p), &p, send, recv, dt, "scatter");
}

static int n_gather(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  nccl_comm *c = (nccl_comm *)b;
  tc_desc d = {.kind = TC_GATHER, .dtype = dt, .root = root, .count = count};
  if (begin(c, &d)) return DT_ERR;
  dt_p2p_plan p;
  return p2p_call(c, dt_nccl_plan_gather(b->rank, b->size, count, root, &p), &p, send, recv, dt, "gather");
}

/* ---- the strided forms: packed and unpacked on the device (2-d copies on the stream) ---- */

/* Copies block b of buf to or from the contiguous p (to_p: into p). */
static int block_copy(nccl_comm *c, void *buf, const dt_comm_block *b, void *p, size_t esz, int to_p, const char *who) {
  if (dt_comm_block_numel(b) == 0) return DT_OK;
  char *strided = (char *)buf + b->offset * esz;
  size_t w = b->cols * esz, pitch = b->stride * esz;
  if (to_p) CUDA(who, cudaMemcpy2DAsync, (p, w, strided, pitch, w, b->rows, cudaMemcpyDeviceToDevice, c->stream));
  else CUDA(who, cudaMemcpy2DAsync, (strided, pitch, p, w, w, b->rows, cudaMemcpyDeviceToDevice, c->stream));
  return DT_OK;
}

/* n blocks of buf <-> one contiguous device buffer *p (allocated on the stream when to_p or
 * NULL); counts[r] = block r's elements. */
static int blocks_move(nccl_comm *c, void *buf, const dt_comm_block *b, int n, size_t esz, void **p, size_t *counts,
                       int to_p, const char *who) {
  size_t total = 0;
  for (int r = 0; r < n; r++) counts[r] = dt_comm_block_numel(&b[r]), total += counts[r];
  if (!*p) CUDA(who, cudaMallocAsync, (p, total * esz + 1, c->stream));
  size_t off = 0;
  for (int r = 0; r < n; r++) {
    if (block_copy(c, buf, &b[r], (char *)*p + off * esz, esz, to_p, who) != DT_OK) return DT_ERR;
    off += counts[r];
  }
  return DT_OK;
}

static int n_all_to_all_blocks(dt_comm *b, const void *send, const dt_comm_block *sendblocks, void *recv,
                               const dt_comm_block *recvblocks, dt_dtype dt) {
  nccl_comm *c = (nccl_comm *)b;
  int n = b->size;
  size_t esz = dt_dtype_size(dt), *counts = malloc(sizeof(size_t) * 2 * (size_t)n);
  if (!counts) return dt_error("all_to_all: out of memory");
  tc_desc d = {.kind = TC_ALL_TO_ALL, .dtype = dt};
  void *s = NULL, *r = NULL;
  dt_p2p_plan p = {0};
  int st = begin(c, &d);
  if (st == DT_OK) st = blocks_move(c, (void *)send, sendblocks, n, esz, &s, counts, 1, "all_to_all");
  if (st == DT_OK) { /* the receive buffer, filled by the plan */
    size_t total = 0;
    for (int q = 0; q < n; q++) counts[n + q] = dt_comm_block_numel(&recvblocks[q]), total += counts[n + q];
    cudaError_t e = cudaMallocAsync(&r, total * esz + 1, c->stream);
    if (e != cudaSuccess) st = cuda_error(e, "cudaMallocAsync", "all_to_all");
  }
  if (st == DT_OK) st = dt_nccl_plan_all_to_all_v(b->rank, n, counts, counts + n, &p);
  if (st == DT_OK) st = p2p_run(c, &p, s, r, dt, "all_to_all");
  if (st == DT_OK) st = blocks_move(c, recv, recvblocks, n, esz, &r, counts + n, 0, "all_to_all");
  dt_nccl_plan_free(&p);
  if (s) cudaFreeAsync(s, c->stream);
  if (r) cudaFreeAsync(r, c->stream);
  free(counts);
  return st == DT_OK ? finish(c, "all_to_all") : st;
}

static int n_all_gather_blocks(dt_comm *b, const void *send, void *recv, const dt_comm_block *recvblocks, dt_dtype dt) {
  nccl_comm *c = (nccl_comm *)b;
  int n = b->size;
  size_t esz = dt_dtype_size(dt), *counts = malloc(sizeof(size_t) * (size_t)n), total = 0;
  if (!counts) return dt_error("all_gather: out of memory");
  for (int q = 0; q < n; q++) counts[q] = dt_comm_block_numel(&recvblocks[q]), total += counts[q];
  tc_desc d = {.kind = TC_ALL_GATHER, .dtype = dt, .count = counts[b->rank]};
  void *r = NULL;
  dt_p2p_plan p = {0};
  int st = begin(c, &d);
  if (st == DT_OK) {
    cudaError_t e = cudaMallocAsync(&r, total * esz + 1, c->stream);
    if (e != cudaSuccess) st = cuda_error(e, "cudaMallocAsync", "all_gather");
  }
  if (st == DT_OK && all_equal(counts, n)) {
    ncclResult_t rc = ncclAllGather(send, r, counts[0], nccl_type(dt), c->comm, c->stream);
    if (rc != ncclSuccess) st = nccl_error(rc, c->comm, "ncclAllGather", "all_gather");
  } else if (st == DT_OK) {
    st = dt_nccl_plan_all_gather_v(b->rank, n, counts, &p);
    if (st == DT_OK) st = p2p_run(c, &p, send, r, dt, "all_gather");
  }
  if (st == DT_OK) st = blocks_move(c, recv, recvblocks, n, esz, &r, counts, 0, "all_gather");
  dt_nccl_plan_free(&p);
  if (r) cudaFreeAsync(r, c->stream);
  free(counts);
  return st == DT_OK ? finish(c, "all_gather") : st;
}

/* send/recv: no agreement (point-to-point); the watchdog still bounds the wait. */

static int n_send(dt_comm *b, const void *buf, size_t count, dt_dtype dt, int dst) {
  nccl_comm *c = (nccl_comm *)b;
  if (begin_call(c, NULL, "send")) return DT_ERR;
  NCCL(c, "send", ncclSend, (buf, count, nccl_type(dt), dst, c->comm, c->stream));
  return finish(c, "send");
}

static int n_recv(dt_comm *b, void *buf, size_t count, dt_dtype dt, int src) {
  nccl_comm *c = (nccl_comm *)b;
  if (begin_call(c, NULL, "recv")) return DT_ERR;
  NCCL(c, "recv", ncclRecv, (buf, count, nccl_type(dt), src, c->comm, c->stream));
  return finish(c, "recv");
}

/* The host twin's barrier: no device memory needed, and the default stream's work is done. */
static int n_barrier(dt_comm *b) {
  nccl_comm *c = (nccl_comm *)b;
  CUDA("barrier", cudaSetDevice, (c->device));
  CUDA("barrier", cudaStreamSynchronize, (c->stream));
  return c->base.host_twin->ops->barrier(c->base.host_twin);
}

static int n_fail(dt_comm *b, const char *why) { return b->host_twin->ops->fail(b->host_twin, why); }

static int n_new_group(dt_comm *b, const int *ranks, int n, dt_comm **out) {
  (void)b, (void)ranks, (void)n;
  *out = NULL; /* groups come from the host communicator (dt_comm_new_group splits the twin) */
  return dt_error("new_group: make groups from the host communicator; their NCCL twins follow");
}

static void n_destroy(dt_comm *b) {
  nccl_comm *c = (nccl_comm *)b;
  cudaSetDevice(c->device);
  if (c->comm) ncclCommDestroy(c->comm);
  if (c->ready) cudaEventDestroy(c->ready);
  if (c->done) cudaEventDestroy(c->done);
  if (c->stream) cudaStreamDestroy(c->stream);
  free(c->base.world_ranks);
  free(c);
}

static const dt_comm_ops nccl_ops = {
    .all_reduce = n_all_reduce,
    .all_gather_v = n_all_gather_v,
    .reduce_scatter = n_reduce_scatter,
    .all_to_all_v = n_all_to_all_v,
    .broadcast = n_broadcast,
    .scatter = n_scatter,
    .gather = n_gather,
    .send = n_send,
    .recv = n_recv,
    .barrier = n_barrier,
    .fail = n_fail,
    .new_group = n_new_group,
    .destroy = n_destroy,
    .all_to_all_blocks = n_all_to_all_blocks,
    .all_gather_blocks = n_all_gather_blocks,
};

/* ---- creation ---- */

/* The communicator's fields and CUDA objects, around an NCCL comm made by make_comm. */
static int wrap(dt_comm *host, nccl_comm **out) {
  nccl_comm *c = calloc(1, sizeof *c);
  int *wr = malloc(sizeof(int) * (size_t)host->size);
  if (!c || !wr) return free(c), free(wr), dt_error("NCCL: out of memory");
  memcpy(wr, host->world_ranks, sizeof(int) * (size_t)host->size);
  c->base = (dt_comm){.ops = &nccl_ops, .backend = "nccl", .rank = host->rank, .size = host->size,
                      .world_ranks = wr, .timeout = host->timeout, .host_twin = host,
                      .root = host->root ? host->root : host};
  dt_comm_format_ranks(c->label, sizeof c->label, wr, host->size);
  *out = c;
  cudaError_t e = cudaGetDevice(&c->device); /* the rank's device (dt.cuda.set_device) */
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming);
  if (e != cudaSuccess) return n_destroy(&c->base), *out = NULL, cuda_error(e, "creating the stream", "NCCL");
  return DT_OK;
}

static int make_id(void *ud, unsigned char id[DT_NCCL_ID_BYTES]) {
  (void)ud;
  ncclUniqueId u;
  ncclResult_t r = ncclGetUniqueId(&u);
  if (r != ncclSuccess) return dt_error("ncclGetUniqueId failed: %s", ncclGetErrorString(r));
  memcpy(id, u.internal, DT_NCCL_ID_BYTES);
  return DT_OK;
}

/* Every rank has a GPU, or every rank fails naming those without (agreed over host). */
static int agree_gpus(dt_comm *host) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  int64_t mine = e == cudaSuccess && count > 0, *all = malloc(sizeof(int64_t) * (size_t)host->size);
  size_t *counts = malloc(sizeof(size_t) * (size_t)host->size);
  if (!all || !counts) return free(all), free(counts), dt_error("NCCL: out of memory");
  for (int r = 0; r < host->size; r++) counts[r] = 1;
  int st = host->ops->all_gather_v(host, &mine, all, counts, DT_INT64);
  char without[256] = "";
  size_t used = 0;
  for (int r = 0; st == DT_OK && r < host->size; r++)
    if (!all[r] && used < sizeof without)
      used += (size_t)snprintf(without + used, sizeof without - used, "%s%d", used ? "," : "", host->world_ranks[r]);
  free(all), free(counts);
  if (st != DT_OK) return st;
  if (used && e != cudaSuccess)
    return dt_error("NCCL: no GPU on rank(s) {%s} (this rank: %s)", without, cudaGetErrorString(e));
  if (used) return dt_error("NCCL: no GPU on rank(s) {%s}", without);
  return DT_OK;
}

int dt_nccl_comm_new(dt_comm *host, dt_comm **out) {
  *out = NULL;
  if (agree_gpus(host) != DT_OK) return DT_ERR;
  unsigned char id[DT_NCCL_ID_BYTES];
  if (dt_nccl_id_exchange(host, make_id, NULL, id) != DT_OK) return DT_ERR;
  nccl_comm *c;
  if (wrap(host, &c) != DT_OK) return DT_ERR;
  ncclUniqueId u;
  memcpy(u.internal, id, sizeof u.internal);
  ncclResult_t r = ncclCommInitRank(&c->comm, host->size, u, host->rank);
  if (r != ncclSuccess) {
    int st = nccl_error(r, NULL, "ncclCommInitRank", "NCCL");
    c->comm = NULL;
    return n_destroy(&c->base), st;
  }
  *out = &c->base;
  return DT_OK;
}

int dt_nccl_split(dt_comm *parent_twin, const int *ranks, int n, dt_comm *group) {
  nccl_comm *p = (nccl_comm *)parent_twin;
  int color, key;
  dt_nccl_split_args(ranks, n, p->base.world_ranks[p->base.rank], &color, &key);
  nccl_comm *c = NULL;
  if (group && wrap(group, &c) != DT_OK) return DT_ERR;
  ncclComm_t nc = NULL;
  CUDA("new_group", cudaSetDevice, (p->device));
  ncclResult_t r = ncclCommSplit(p->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &nc, NULL);
  if (r != ncclSuccess) {
    if (c) n_destroy(&c->base);
    return nccl_error(r, p->comm, "ncclCommSplit", "new_group");
  }
  if (c) c->comm = nc, group->device_twin = &c->base;
  return DT_OK;
}
