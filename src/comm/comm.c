/* The front of the collectives interface: argument checks shared by every backend, the
 * observer report (one per call, so dt.comm_debug records every collective in one place),
 * the equal-size forms expressed through the _v forms, and rank-list helpers. */
#include "comm/comm.h"
#include "comm/nccl_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/blocks.h"
#include "comm/comm_async.h"
#include "tensor/block_cache.h"

static int check_rank(const dt_comm *c, int r, const char *who, const char *what) {
  if (r < 0 || r >= c->size)
    return dt_error("%s: %s %d out of range for a group of %d ranks", who, what, r, c->size);
  return DT_OK;
}

static int check_dtype(dt_dtype dt, const char *who) {
  if ((unsigned)dt >= DT_NDTYPES) return dt_error("%s: invalid dtype %d", who, (int)dt);
  return DT_OK;
}

/* Reports a call of count elements sent by this rank to c's observer. */
static void observe(dt_comm *c, const char *name, size_t count, dt_dtype dt) {
  if (c->host_twin) c = c->host_twin; /* an NCCL twin reports as its host communicator */
  c->entered++;
  if (c->observer && c->observer_paused == 0) c->observer(c->observer_ud, name, count * dt_dtype_size(dt), c->size);
}

static size_t *equal_counts(const dt_comm *c, size_t count) {
  size_t *counts = malloc(sizeof *counts * (size_t)c->size);
  for (int r = 0; counts && r < c->size; r++) counts[r] = count;
  return counts;
}

/* all_reduce and reduce_scatter (count: the elements of recv), blocking (work NULL) or async. */
static int reduction_call(dt_comm *c, cj_kind kind, const void *send, void *recv, size_t count, dt_dtype dt,
                          dt_reduce_op op, dt_comm_work **work) {
  const char *name = kind == CJ_ALL_REDUCE ? "all_reduce" : "reduce_scatter";
  if (check_dtype(dt, name) || dt_reduce_op_check(op, dt, name)) return DT_ERR;
  observe(c, name, kind == CJ_ALL_REDUCE ? count : count * (size_t)c->size, dt);
  comm_job j = {.kind = kind, .c = c, .send = send, .recv = recv, .count = count, .dt = dt, .op = op};
  return dt_comm_job_submit(&j, work);
}
int dt_comm_all_reduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op) {
  return reduction_call(c, CJ_ALL_REDUCE, send, recv, count, dt, op, NULL);
}
int dt_comm_iall_reduce(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op,
                        dt_comm_work **work) {
  return reduction_call(c, CJ_ALL_REDUCE, send, recv, count, dt, op, work);
}
int dt_comm_reduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op) {
  return reduction_call(c, CJ_REDUCE_SCATTER, send, recv, count, dt, op, NULL);
}
int dt_comm_ireduce_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op,
                            dt_comm_work **work) {
  return reduction_call(c, CJ_REDUCE_SCATTER, send, recv, count, dt, op, work);
}

static int all_gather_v_call(dt_comm *c, const void *send, void *recv, const size_t *counts, dt_dtype dt,
                             dt_comm_work **work) {
  if (check_dtype(dt, "all_gather")) return DT_ERR;
  observe(c, "all_gather", counts[c->rank], dt);
  comm_job j = {.kind = CJ_ALL_GATHER_V, .c = c, .send = send, .recv = recv, .counts = counts, .dt = dt};
  return dt_comm_job_submit(&j, work);
}
int dt_comm_all_gather_v(dt_comm *c, const void *send, void *recv, const size_t *counts, dt_dtype dt) {
  return all_gather_v_call(c, send, recv, counts, dt, NULL);
}
int dt_comm_iall_gather_v(dt_comm *c, const void *send, void *recv, const size_t *counts, dt_dtype dt,
                          dt_comm_work **work) {
  return all_gather_v_call(c, send, recv, counts, dt, work);
}

static int all_gather_call(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_comm_work **work) {
  size_t *counts = equal_counts(c, count);
  if (!counts) return dt_error("all_gather: out of memory");
  int st = all_gather_v_call(c, send, recv, counts, dt, work); /* an async job copies counts */
  free(counts);
  return st;
}
int dt_comm_all_gather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt) {
  return all_gather_call(c, send, recv, count, dt, NULL);
}
int dt_comm_iall_gather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_comm_work **work) {
  return all_gather_call(c, send, recv, count, dt, work);
}

static int all_to_all_v_call(dt_comm *c, const void *send, const size_t *sendcounts, void *recv,
                             const size_t *recvcounts, dt_dtype dt, dt_comm_work **work) {
  if (check_dtype(dt, "all_to_all")) return DT_ERR;
  size_t total = 0;
  for (int r = 0; r < c->size; r++) total += sendcounts[r];
  observe(c, "all_to_all", total, dt);
  comm_job j = {.kind = CJ_ALL_TO_ALL_V, .c = c, .send = send, .recv = recv, .counts = sendcounts,
                .counts2 = recvcounts, .dt = dt};
  return dt_comm_job_submit(&j, work);
}
int dt_comm_all_to_all_v(dt_comm *c, const void *send, const size_t *sendcounts, void *recv,
                         const size_t *recvcounts, dt_dtype dt) {
  return all_to_all_v_call(c, send, sendcounts, recv, recvcounts, dt, NULL);
}
int dt_comm_iall_to_all_v(dt_comm *c, const void *send, const size_t *sendcounts, void *recv,
                          const size_t *recvcounts, dt_dtype dt, dt_comm_work **work) {
  return all_to_all_v_call(c, send, sendcounts, recv, recvcounts, dt, work);
}

static int all_to_all_call(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_comm_work **work) {
  size_t *counts = equal_counts(c, count);
  if (!counts) return dt_error("all_to_all: out of memory");
  int st = all_to_all_v_call(c, send, counts, recv, counts, dt, work);
  free(counts);
  return st;
}
int dt_comm_all_to_all(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt) {
  return all_to_all_call(c, send, recv, count, dt, NULL);
}
int dt_comm_iall_to_all(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, dt_comm_work **work) {
  return all_to_all_call(c, send, recv, count, dt, work);
}

/* The strided forms: the backend's own, or packing around the _v forms (blocks.h). */
int dt_comm_all_to_all_blocks(dt_comm *c, const void *send, const dt_comm_block *sendblocks, void *recv,
                              const dt_comm_block *recvblocks, dt_dtype dt) {
  if (check_dtype(dt, "all_to_all")) return DT_ERR;
  if (dt_comm_blocks_check(sendblocks, c->size, "all_to_all", "send") || dt_comm_blocks_check(recvblocks, c->size, "all_to_all", "recv"))
    return DT_ERR;
  dt_comm_async_drain(c); /* blocking: after this rank's queued async calls, in issue order */
  if (c->ops->all_to_all_blocks) {
    size_t total = 0;
    for (int r = 0; r < c->size; r++) total += dt_comm_block_numel(&sendblocks[r]);
    observe(c, "all_to_all", total, dt);
    return c->ops->all_to_all_blocks(c, send, sendblocks, recv, recvblocks, dt);
  }
  size_t esz = dt_dtype_size(dt), *counts = malloc(2 * sizeof(size_t) * (size_t)c->size);
  if (!counts) return dt_error("all_to_all: out of memory");
  int send_as_is = dt_comm_blocks_consecutive(sendblocks, c->size), recv_as_is = dt_comm_blocks_consecutive(recvblocks, c->size);
  dt_comm_blocks_counts(sendblocks, c->size, counts), dt_comm_blocks_counts(recvblocks, c->size, counts + c->size);
  /* a buffer only for a side that is not one run already */
  size_t s_cap = 0, r_cap = 0;
  void *s = NULL, *r = NULL;
  int st = DT_ERR;
  if (!send_as_is && !(s = dt_comm_blocks_packed(send, sendblocks, c->size, esz, counts, "all_to_all", 1, &s_cap)))
    goto done;
  if (!recv_as_is && !(r = dt_comm_blocks_packed(recv, recvblocks, c->size, esz, counts + c->size, "all_to_all", 0, &r_cap)))
    goto done;
  /* Every count the same and not zero: the equal form, which MPI on one host moves through
   * shared memory (the _v tables are not agreed, so _v stays on MPI's own path).  Every rank
   * reaches the same verdict where the counts are products of a send and a receive length, as
   * Shard(i) -> Shard(j)'s are: a rank that sees k > 0 everywhere sees every length constant. */
  int equal = counts[0] > 0;
  for (int q = 1; q < 2 * c->size; q++) equal &= counts[q] == counts[0];
  const void *sb = s ? s : send;
  void *rb = r ? r : recv;
  st = equal ? dt_comm_all_to_all(c, sb, rb, counts[0], dt) : dt_comm_all_to_all_v(c, sb, counts, rb, counts + c->size, dt);
  if (st == DT_OK && r) dt_comm_blocks_unpack(recv, recvblocks, c->size, esz, r, counts + c->size);
done:
  dt_block_free(s, s_cap), dt_block_free(r, r_cap), free(counts);
  return st;
}

int dt_comm_all_gather_blocks(dt_comm *c, const void *send, void *recv, const dt_comm_block *recvblocks, dt_dtype dt) {
  if (check_dtype(dt, "all_gather")) return DT_ERR;
  if (dt_comm_blocks_check(recvblocks, c->size, "all_gather", "recv")) return DT_ERR;
  dt_comm_async_drain(c); /* blocking: after this rank's queued async calls, in issue order */
  if (c->ops->all_gather_blocks) {
    observe(c, "all_gather", dt_comm_block_numel(&recvblocks[c->rank]), dt);
    return c->ops->all_gather_blocks(c, send, recv, recvblocks, dt);
  }
  return dt_comm_all_gather_through_v(c, send, recv, recvblocks, dt, dt_comm_all_gather_v);
}

/* Backends without the form: the blocks packed at a common stride (the largest block's size;
 * the tails of short blocks are zeros that only meet zeros), one reduce_scatter, and this
 * rank's block copied out.  Host buffers only: an NCCL twin has its own packing. */
static int reduce_scatter_packed(dt_comm *c, const void *send, const dt_comm_block *sendblocks, void *recv, dt_dtype dt,
                                 dt_reduce_op op) {
  if (c->host_twin) return dt_error("reduce_scatter: strided blocks of device memory are not supported");
  size_t esz = dt_dtype_size(dt), per = 0, n = (size_t)c->size, mine = dt_comm_block_numel(&sendblocks[c->rank]);
  int equal = 1;
  for (size_t r = 0; r < n; r++) {
    if (dt_comm_block_numel(&sendblocks[r]) > per) per = dt_comm_block_numel(&sendblocks[r]);
    equal &= dt_comm_block_numel(&sendblocks[r]) == dt_comm_block_numel(&sendblocks[0]);
  }
  /* equal blocks in one run (Partial -> Shard of the first dim): the very reduce_scatter the
   * packed form would make, without the copies (on MPI 4-5x the bare call at 16 MiB) */
  if (equal && dt_comm_blocks_consecutive(sendblocks, c->size)) return dt_comm_reduce_scatter(c, send, recv, per, dt, op);
  size_t s_cap = 0, r_cap = 0; /* cached blocks: a fresh calloc faulted its pages in each call */
  char *s = dt_block_alloc(n * per * esz, &s_cap), *r = dt_block_alloc(per * esz, &r_cap);
  if (!s || !r)
    return dt_block_free(s, s_cap), dt_block_free(r, r_cap),
           dt_error("reduce_scatter: out of memory packing %zu elements", n * per);
  for (size_t q = 0; q < n; q++) {
    size_t k = dt_comm_block_numel(&sendblocks[q]);
    dt_comm_block flat = {q * per, 1, k, k};
    dt_comm_block_copy(s, &flat, send, &sendblocks[q], esz);
    memset(s + (q * per + k) * esz, 0, (per - k) * esz); /* the tail: zeros meet only zeros */
  }
  int st = dt_comm_reduce_scatter(c, s, r, per, dt, op);
  if (st == DT_OK) memcpy(recv, r, mine * esz);
  dt_block_free(s, s_cap), dt_block_free(r, r_cap);
  return st;
}

int dt_comm_reduce_scatter_blocks(dt_comm *c, const void *send, const dt_comm_block *sendblocks, void *recv,
                                  dt_dtype dt, dt_reduce_op op) {
  if (check_dtype(dt, "reduce_scatter") || dt_reduce_op_check(op, dt, "reduce_scatter")) return DT_ERR;
  if (dt_comm_blocks_check(sendblocks, c->size, "reduce_scatter", "send")) return DT_ERR;
  dt_comm_async_drain(c); /* blocking: after this rank's queued async calls, in issue order */
  if (!c->ops->reduce_scatter_blocks) return reduce_scatter_packed(c, send, sendblocks, recv, dt, op);
  size_t total = 0;
  for (int r = 0; r < c->size; r++) total += dt_comm_block_numel(&sendblocks[r]);
  observe(c, "reduce_scatter", total, dt);
  return c->ops->reduce_scatter_blocks(c, send, sendblocks, recv, dt, op);
}

static int broadcast_call(dt_comm *c, void *buf, size_t count, dt_dtype dt, int root, dt_comm_work **work) {
  if (check_dtype(dt, "broadcast") || check_rank(c, root, "broadcast", "src")) return DT_ERR;
  observe(c, "broadcast", count, dt);
  comm_job j = {.kind = CJ_BROADCAST, .c = c, .recv = buf, .count = count, .dt = dt, .root = root};
  return dt_comm_job_submit(&j, work);
}
int dt_comm_broadcast(dt_comm *c, void *buf, size_t count, dt_dtype dt, int root) {
  return broadcast_call(c, buf, count, dt, root, NULL);
}
int dt_comm_ibroadcast(dt_comm *c, void *buf, size_t count, dt_dtype dt, int root, dt_comm_work **work) {
  return broadcast_call(c, buf, count, dt, root, work);
}

int dt_comm_scatter(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  if (check_dtype(dt, "scatter") || check_rank(c, root, "scatter", "src")) return DT_ERR;
  dt_comm_async_drain(c);
  observe(c, "scatter", c->rank == root ? count * (size_t)c->size : 0, dt);
  return c->ops->scatter(c, send, recv, count, dt, root);
}

int dt_comm_gather(dt_comm *c, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  if (check_dtype(dt, "gather") || check_rank(c, root, "gather", "dst")) return DT_ERR;
  dt_comm_async_drain(c);
  observe(c, "gather", count, dt);
  return c->ops->gather(c, send, recv, count, dt, root);
}

int dt_comm_send(dt_comm *c, const void *buf, size_t count, dt_dtype dt, int dst) {
  if (check_dtype(dt, "send") || check_rank(c, dst, "send", "dst")) return DT_ERR;
  if (dst == c->rank) return dt_error("send: rank %d cannot send to itself", c->world_ranks[c->rank]);
  dt_comm_async_drain(c);
  observe(c, "send", count, dt);
  return c->ops->send(c, buf, count, dt, dst);
}

int dt_comm_recv(dt_comm *c, void *buf, size_t count, dt_dtype dt, int src) {
  if (check_dtype(dt, "recv") || check_rank(c, src, "recv", "src")) return DT_ERR;
  if (src == c->rank) return dt_error("recv: rank %d cannot receive from itself", c->world_ranks[c->rank]);
  dt_comm_async_drain(c);
  observe(c, "recv", count, dt);
  return c->ops->recv(c, buf, count, dt, src);
}

int dt_comm_barrier(dt_comm *c) {
  dt_comm_async_drain(c);
  observe(c, "barrier", 0, DT_UINT8);
  return c->ops->barrier(c);
}

int dt_comm_fail_agreed(dt_comm *c, const char *why) {
  dt_comm_async_drain(c);
  (c->host_twin ? c->host_twin : c)->entered++;
  return c->ops->fail(c, why);
}

int dt_comm_new_group(dt_comm *c, const int *ranks, int n, dt_comm **out) {
  *out = NULL;
  if (n < 1) return dt_error("new_group: a group needs at least one rank");
  for (int i = 0; i < n; i++) {
    if (dt_comm_group_rank(c, ranks[i]) < 0) return dt_error("new_group: rank %d is not in the parent group", ranks[i]);
    if (i > 0 && ranks[i] <= ranks[i - 1]) return dt_error("new_group: ranks must be distinct and sorted");
  }
  dt_comm_async_drain(c);
  dt_comm_pause_observer(c); /* a backend may agree on the list through c (MPI) */
  int st = c->ops->new_group(c, ranks, n, out);
  dt_comm_resume_observer(c);
  if (*out) (*out)->root = c->root ? c->root : c; /* shares the rank's async queue */
  /* a live NCCL twin splits too (collective over c, as the host group is under MPI) */
  if (st == DT_OK && c->device_twin) st = dt_nccl_split(c->device_twin, ranks, n, *out);
  return st;
}

void dt_comm_destroy(dt_comm *c) {
  if (!c) return;
  dt_comm_async_drain(c); /* no queued call may still use c */
  if (!c->root) dt_comm_async_shutdown(c);
  if (c->device_twin) c->device_twin->ops->destroy(c->device_twin);
  c->ops->destroy(c);
}

void dt_comm_set_observer(dt_comm *c, dt_comm_observer_fn fn, void *ud) {
  c->observer = fn;
  c->observer_ud = ud;
}

void dt_comm_pause_observer(dt_comm *c) { c->observer_paused++; }

void dt_comm_resume_observer(dt_comm *c) {
  if (c->observer_paused > 0) c->observer_paused--;
}

double dt_comm_set_timeout(dt_comm *c, double seconds) {
  double old = c->timeout;
  c->timeout = seconds;
  return old;
}

int dt_comm_group_rank(const dt_comm *c, int w) {
  for (int r = 0; r < c->size; r++)
    if (c->world_ranks[r] == w) return r;
  return -1;
}

char *dt_comm_format_ranks(char *buf, size_t len, const int *ranks, int n) {
  size_t used = 0;
  used += (size_t)snprintf(buf, len, "{");
  for (int i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, i ? ",%d" : "%d", ranks[i]);
  if (used < len) snprintf(buf + used, len - used, "}");
  return buf;
}
