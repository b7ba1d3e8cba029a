/* The collectives of the threads backend.  After the entry barrier every rank reads its
 * peers' buffers directly (one copy per byte, no staging; Shard(i) -> Shard(j)'s all_to_all
 * writes into them instead, a2a_pushes); reductions are split so that
 * rank r reduces slice r of every input and writes it to every output (a fused
 * reduce-scatter + all-gather), spreading the arithmetic and the traffic over all ranks. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/thread_pool.h"
#include "comm/blocks.h"
#include "base/stream_copy.h"
#include "comm/threads_impl.h"
#include "kernels/cpu/reduce_ops.h"

#define BLOCK_BYTES (64 * 1024) /* reduce block: inputs and output stay in L2 */
#define MAX_STACK_RANKS 64

static int too_many(tc_comm *c, const char *name) {
  if (c->g->size > MAX_STACK_RANKS) return dt_error("%s: groups larger than %d ranks are not supported", name, MAX_STACK_RANKS);
  return DT_OK;
}

/* Element range [lo, hi) of slice r of count, boundaries on 64-byte lines. */
static void slice(size_t count, size_t esz, int r, int n, size_t *lo, size_t *hi) {
  size_t per_line = esz < 64 ? 64 / esz : 1;
  size_t lines = (count + per_line - 1) / per_line;
  size_t a = lines * (size_t)r / (size_t)n, b = lines * (size_t)(r + 1) / (size_t)n;
  *lo = a * per_line < count ? a * per_line : count;
  *hi = b * per_line < count ? b * per_line : count;
}

static int tc_all_reduce(dt_comm *base, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op) {
  tc_comm *c = (tc_comm *)base;
  if (too_many(c, "all_reduce")) return DT_ERR;
  tc_desc d = {.kind = TC_ALL_REDUCE, .dtype = dt, .op = op, .count = count, .send = send, .recv = recv};
  if (tc_enter(c, &d, "all_reduce")) return DT_ERR;
  int n = c->g->size, me = base->rank;
  size_t esz = dt_dtype_size(dt), lo, hi;
  slice(count, esz, me, n, &lo, &hi);
  size_t block = BLOCK_BYTES / esz;
  const void *in[MAX_STACK_RANKS];
  /* the inputs in rank order, whichever rank reduces an element: every element is folded
   * alike, so its bits do not depend on where it lies in the buffer (dt.compile packs several
   * all_reduces into one and must give their bits).  The fold may write over any one of its
   * inputs, so in place needs no scratch; the reduced block, still in cache, is then copied
   * to every peer's output. */
  for (size_t off = lo; off < hi; off += block) {
    size_t cnt = hi - off < block ? hi - off : block;
    for (int r = 0; r < n; r++) in[r] = (const char *)(r == me ? send : tc_peer(c, r)->send) + off * esz;
    void *out = (char *)recv + off * esz;
    dt_reduce_ops_apply(op, dt, out, in, n, cnt);
    for (int r = 0; r < n; r++)
      if (r != me) memcpy((char *)tc_peer(c, r)->recv + off * esz, out, cnt * esz);
  }
  return tc_leave(c, "all_reduce");
}

static int tc_reduce_scatter(dt_comm *base, const void *send, void *recv, size_t count, dt_dtype dt,
                             dt_reduce_op op) {
  tc_comm *c = (tc_comm *)base;
  if (too_many(c, "reduce_scatter")) return DT_ERR;
  tc_desc d = {.kind = TC_REDUCE_SCATTER, .dtype = dt, .op = op, .count = count, .send = send, .recv = recv};
  if (tc_enter(c, &d, "reduce_scatter")) return DT_ERR;
  int n = c->g->size, me = base->rank;
  size_t esz = dt_dtype_size(dt), block = BLOCK_BYTES / esz;
  const void *in[MAX_STACK_RANKS];
  for (size_t off = 0; off < count; off += block) {
    size_t cnt = count - off < block ? count - off : block;
    for (int r = 0; r < n; r++) in[r] = (const char *)tc_peer(c, r)->send + ((size_t)me * count + off) * esz;
    dt_reduce_ops_apply(op, dt, (char *)recv + off * esz, in, n, cnt);
  }
  return tc_leave(c, "reduce_scatter");
}

/* reduce_scatter of strided blocks: rank me folds its block of every peer's send (each peer's
 * own sendblocks[me]: the same rows and cols everywhere, tc_check_match) into its contiguous
 * recv, row by row in pieces of BLOCK_BYTES, the inputs in rank order as tc_reduce_scatter. */
static int tc_reduce_scatter_blocks(dt_comm *base, const void *send, const dt_comm_block *sendblocks, void *recv,
                                    dt_dtype dt, dt_reduce_op op) {
  tc_comm *c = (tc_comm *)base;
  if (too_many(c, "reduce_scatter")) return DT_ERR;
  int n = c->g->size, me = base->rank;
  size_t total = 0;
  for (int r = 0; r < n; r++) total += dt_comm_block_numel(&sendblocks[r]);
  tc_desc d = {.kind = TC_REDUCE_SCATTER, .dtype = dt, .op = op, .count = total, .send = send, .recv = recv,
               .blocks = sendblocks};
  if (tc_enter(c, &d, "reduce_scatter")) return DT_ERR;
  size_t esz = dt_dtype_size(dt), block = BLOCK_BYTES / esz, rows = sendblocks[me].rows, cols = sendblocks[me].cols;
  const void *in[MAX_STACK_RANKS];
  for (size_t row = 0; row < rows; row++)
    for (size_t off = 0; off < cols; off += block) {
      size_t cnt = cols - off < block ? cols - off : block;
      for (int r = 0; r < n; r++) {
        const tc_desc *dp = tc_peer(c, r);
        const dt_comm_block *b = &((const dt_comm_block *)dp->blocks)[me];
        in[r] = (const char *)dp->send + (b->offset + row * b->stride + off) * esz;
      }
      dt_reduce_ops_apply(op, dt, (char *)recv + (row * cols + off) * esz, in, n, cnt);
    }
  return tc_leave(c, "reduce_scatter");
}

/* Peer dp's block for rank me: its strided send block, or its contiguous one (all_to_all_v). */
static dt_comm_block a2a_source(const tc_desc *dp, int me) {
  if (dp->blocks) return ((const dt_comm_block *)dp->blocks)[me];
  size_t off = 0;
  for (int q = 0; q < me; q++) off += dp->counts[q];
  return (dt_comm_block){off, 1, dp->counts[me], dp->counts[me]};
}

/* Contiguous blocks of counts, one after another. */
static void contiguous_blocks(const size_t *counts, int n, dt_comm_block *out) {
  size_t off = 0;
  for (int r = 0; r < n; off += counts[r], r++) out[r] = (dt_comm_block){off, 1, counts[r], counts[r]};
}

/* The distance between the rows of send block s in its recv block d (the same elements), or 0
 * when the rows do not land row for row: d has s's rows and row length, or is one contiguous run. */
static size_t push_dest_stride(const dt_comm_block *d, const dt_comm_block *s) {
  if (d->rows == s->rows && d->cols == s->cols) return d->rows > 1 ? d->stride : s->cols;
  return d->rows == 1 || d->stride == d->cols ? s->cols : 0;
}

/* Whether the ranks push (tc_all_to_all_blocks): every rank's send blocks are slabs of the same
 * rows (one row count and stride: the column slabs of Shard(i) -> Shard(j)), at least one strided,
 * and each lands row for row in its peer's recv block.  Pulling, every rank walks its peers'
 * strided slabs, which they last wrote or read; pushing, it walks its own send buffer and writes
 * one sequential run into each peer's output (push_rows).  Every rank reads every descriptor, so
 * all reach the same verdict and each block is copied exactly once. */
static int a2a_pushes(const tc_comm *c, size_t *rows_out) {
  int n = c->g->size, strided = 0;
  for (int p = 0; p < n; p++) {
    const dt_comm_block *sb = tc_peer(c, p)->blocks;
    size_t rows = 0, stride = 0;
    if (!sb) return 0;
    for (int q = 0; q < n; q++) {
      const dt_comm_block *rb = tc_peer(c, q)->blocks2;
      if (!dt_comm_block_numel(&sb[q])) continue; /* (its peer expects none: tc_check_match) */
      if (!rb || !push_dest_stride(&rb[p], &sb[q])) return 0;
      if (!rows) rows = sb[q].rows, stride = sb[q].stride;
      else if (sb[q].rows != rows || sb[q].stride != stride) return 0;
      strided |= rows > 1 && stride != sb[q].cols;
    }
    if (p == c->base.rank) *rows_out = rows;
  }
  return strided;
}

typedef struct push_job {
  const tc_comm *c;
  const char *send;
  const dt_comm_block *sb;
  size_t esz;
  int stream;
} push_job;

/* Rows [r0, r1) of this rank's send blocks, each into its place in its peer's output: peer by
 * peer (from the next rank on), so each write is one sequential run and each read one strided
 * walk, with the row PREFETCH_BYTES ahead asked into L2 (the hardware prefetcher stops at every
 * 4 KiB page, and each short row starts a new one).  Against a contiguous all_to_all of the same
 * bytes, in one process, alternating (doc/performance.md): rows by rows into every peer 1.6-1.8x,
 * peer by peer 1.6-1.7x, with the prefetch into L1 1.3-1.4x, into L2 1.2-1.3x. */
#define PREFETCH_BYTES 16384
static void push_rows(int64_t r0, int64_t r1, void *arg) {
  const push_job *j = arg;
  int n = j->c->g->size, me = j->c->base.rank;
  void *(*copy)(void *, const void *, size_t) = j->stream ? dt_stream_memcpy : dt_row_copy;
  for (int k = 0; k < n; k++) {
    int q = (me + 1 + k) % n;
    const dt_comm_block *s = &j->sb[q], *d = &((const dt_comm_block *)tc_peer(j->c, q)->blocks2)[me];
    if (!dt_comm_block_numel(s)) continue; /* (the others' rows: a2a_pushes) */
    size_t row_bytes = s->cols * j->esz, dstride = push_dest_stride(d, s);
    size_t ahead = (PREFETCH_BYTES + row_bytes - 1) / row_bytes;
    size_t fetch = row_bytes < PREFETCH_BYTES ? row_bytes : PREFETCH_BYTES; /* a long row's start */
    char *out = (char *)tc_peer(j->c, q)->recv + d->offset * j->esz;
    const char *in = j->send + s->offset * j->esz;
    for (size_t r = (size_t)r0; r < (size_t)r1; r++) {
      if (r + ahead < (size_t)r1) dt_prefetch_l2(in + (r + ahead) * s->stride * j->esz, fetch);
      copy(out + r * dstride * j->esz, in + r * s->stride * j->esz, row_bytes);
    }
  }
  if (j->stream) dt_stream_fence();
}

/* all_gather and all_to_all, either form: every rank copies each peer's block for it once,
 * straight from the peer's buffer into its place (strided or not); the peers are visited
 * from the next rank on, so the ranks do not all read the same one at once. */
static int gather_blocks(tc_comm *c, tc_desc *d, const dt_comm_block *recvblocks, void *recv, const char *name) {
  if (tc_enter(c, d, name)) return DT_ERR;
  int n = c->g->size, me = c->base.rank;
  size_t esz = dt_dtype_size(d->dtype), out_bytes = 0;
  for (int r = 0; r < n; r++) out_bytes += dt_comm_block_numel(&recvblocks[r]) * esz;
  int stream = dt_stream_pays(out_bytes, n); /* a large output: write around the caches */
  size_t rows = 0;
  if (d->kind == TC_ALL_TO_ALL && a2a_pushes(c, &rows)) {
    push_job j = {c, d->send, d->blocks, esz, stream};
    size_t row_elems = rows ? d->count / rows : 1; /* d->count: the elements this rank sends */
    dt_parallel_for((int64_t)rows, DT_PARALLEL_GRAIN / (int64_t)(row_elems ? row_elems : 1) + 1, push_rows, &j);
    return tc_leave(c, name);
  }
  for (int k = 0; k < n; k++) {
    int p = (me + 1 + k) % n;
    const tc_desc *dp = tc_peer(c, p);
    dt_comm_block src = d->kind == TC_ALL_GATHER ? (dt_comm_block){0, 1, d->counts[p], d->counts[p]} : a2a_source(dp, me);
    if (dt_comm_block_numel(&src)) dt_comm_block_copy_as(recv, &recvblocks[p], dp->send, &src, esz,
                                                         stream ? DT_BLOCK_COPY_STREAM : DT_BLOCK_COPY_ROWS);
  }
  return tc_leave(c, name);
}

static int tc_all_gather_v(dt_comm *base, const void *send, void *recv, const size_t *counts, dt_dtype dt) {
  tc_comm *c = (tc_comm *)base;
  if (too_many(c, "all_gather")) return DT_ERR;
  dt_comm_block rb[MAX_STACK_RANKS];
  contiguous_blocks(counts, c->g->size, rb);
  tc_desc d = {.kind = TC_ALL_GATHER, .dtype = dt, .count = counts[base->rank], .send = send, .recv = recv,
               .counts = counts};
  return gather_blocks(c, &d, rb, recv, "all_gather");
}

static int tc_all_gather_blocks(dt_comm *base, const void *send, void *recv, const dt_comm_block *recvblocks,
                                dt_dtype dt) {
  tc_comm *c = (tc_comm *)base;
  if (too_many(c, "all_gather")) return DT_ERR;
  size_t counts[MAX_STACK_RANKS];
  for (int r = 0; r < c->g->size; r++) counts[r] = dt_comm_block_numel(&recvblocks[r]);
  tc_desc d = {.kind = TC_ALL_GATHER, .dtype = dt, .count = counts[base->rank], .send = send, .recv = recv,
               .counts = counts};
  return gather_blocks(c, &d, recvblocks, recv, "all_gather");
}

static int tc_all_to_all_v(dt_comm *base, const void *send, const size_t *sendcounts, void *recv,
                           const size_t *recvcounts, dt_dtype dt) {
  tc_comm *c = (tc_comm *)base;
  if (too_many(c, "all_to_all")) return DT_ERR;
  int n = c->g->size;
  size_t total = 0;
  for (int r = 0; r < n; r++) total += sendcounts[r];
  dt_comm_block rb[MAX_STACK_RANKS];
  contiguous_blocks(recvcounts, n, rb);
  tc_desc d = {.kind = TC_ALL_TO_ALL, .dtype = dt, .count = total, .send = send, .recv = recv,
               .counts = sendcounts, .counts2 = recvcounts};
  return gather_blocks(c, &d, rb, recv, "all_to_all");
}

static int tc_all_to_all_blocks(dt_comm *base, const void *send, const dt_comm_block *sendblocks, void *recv,
                                const dt_comm_block *recvblocks, dt_dtype dt) {
  tc_comm *c = (tc_comm *)base;
  if (too_many(c, "all_to_all")) return DT_ERR;
  int n = c->g->size;
  size_t counts[2 * MAX_STACK_RANKS], total = 0; /* send counts, then recv counts: the mismatch check's */
  for (int r = 0; r < n; r++) {
    counts[r] = dt_comm_block_numel(&sendblocks[r]), counts[MAX_STACK_RANKS + r] = dt_comm_block_numel(&recvblocks[r]);
    total += counts[r];
  }
  tc_desc d = {.kind = TC_ALL_TO_ALL, .dtype = dt, .count = total, .send = send, .recv = recv, .counts = counts,
               .counts2 = counts + MAX_STACK_RANKS, .blocks = sendblocks, .blocks2 = recvblocks};
  return gather_blocks(c, &d, recvblocks, recv, "all_to_all");
}

static int tc_broadcast(dt_comm *base, void *buf, size_t count, dt_dtype dt, int root) {
  tc_comm *c = (tc_comm *)base;
  tc_desc d = {.kind = TC_BROADCAST, .dtype = dt, .root = root, .count = count, .send = buf, .recv = buf};
  if (tc_enter(c, &d, "broadcast")) return DT_ERR;
  if (base->rank != root && count) memcpy(buf, tc_peer(c, root)->send, count * dt_dtype_size(dt));
  return tc_leave(c, "broadcast");
}

static int tc_scatter(dt_comm *base, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  tc_comm *c = (tc_comm *)base;
  tc_desc d = {.kind = TC_SCATTER, .dtype = dt, .root = root, .count = count, .send = send, .recv = recv};
  if (tc_enter(c, &d, "scatter")) return DT_ERR;
  size_t bytes = count * dt_dtype_size(dt);
  if (bytes) memcpy(recv, (const char *)tc_peer(c, root)->send + (size_t)base->rank * bytes, bytes);
  return tc_leave(c, "scatter");
}

static int tc_gather(dt_comm *base, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  tc_comm *c = (tc_comm *)base;
  tc_desc d = {.kind = TC_GATHER, .dtype = dt, .root = root, .count = count, .send = send, .recv = recv};
  if (tc_enter(c, &d, "gather")) return DT_ERR;
  size_t bytes = count * dt_dtype_size(dt);
  if (base->rank == root && bytes)
    for (int r = 0; r < c->g->size; r++) memcpy((char *)recv + (size_t)r * bytes, tc_peer(c, r)->send, bytes);
  return tc_leave(c, "gather");
}

static int tc_barrier(dt_comm *base) {
  tc_desc d = {.kind = TC_BARRIER};
  return tc_enter((tc_comm *)base, &d, "barrier");
}

static int tc_fail(dt_comm *base, const char *why) {
  tc_desc d = {.kind = TC_ARG_ERROR, .why = why};
  return tc_enter((tc_comm *)base, &d, "collective");
}

/* send/recv: a rendezvous in the (src, dst) mailbox; the receiver copies from the
 * sender's buffer, then releases the sender. */
static int tc_send(dt_comm *base, const void *buf, size_t count, dt_dtype dt, int dst) {
  tc_comm *c = (tc_comm *)base;
  tc_sync(c);
  tc_mailbox *box = &c->g->boxes[base->rank * c->g->size + dst];
  unsigned s = ++c->send_seq[dst];
  box->buf = buf;
  box->count = count;
  box->dtype = dt;
  box->mismatch = 0;
  dt_spin_store(&box->posted, s);
  if (tc_wait(c, &box->done, s, "send", dst)) return tc_break_group(c->g), DT_ERR;
  if (box->mismatch)
    return dt_error("send/recv mismatch: rank %d sent %zu %s elements, rank %d expected %zu %s",
                    c->g->world_ranks[base->rank], count, dt_dtype_name(dt), c->g->world_ranks[dst],
                    box->expect_count, dt_dtype_name(box->expect_dtype));
  return DT_OK;
}

static int tc_recv(dt_comm *base, void *buf, size_t count, dt_dtype dt, int src) {
  tc_comm *c = (tc_comm *)base;
  tc_sync(c);
  tc_mailbox *box = &c->g->boxes[src * c->g->size + base->rank];
  unsigned r = ++c->recv_seq[src];
  if (tc_wait(c, &box->posted, r, "recv", src)) return tc_break_group(c->g), DT_ERR;
  int bad = box->count != count || box->dtype != dt;
  if (bad) {
    dt_error("send/recv mismatch: rank %d sent %zu %s elements, rank %d expected %zu %s", c->g->world_ranks[src],
             box->count, dt_dtype_name(box->dtype), c->g->world_ranks[base->rank], count, dt_dtype_name(dt));
    box->expect_count = count;
    box->expect_dtype = dt;
    box->mismatch = 1;
  } else if (count) {
    memcpy(buf, box->buf, count * dt_dtype_size(dt));
  }
  dt_spin_store(&box->done, r);
  return bad ? DT_ERR : DT_OK;
}

const dt_comm_ops dt_threads_ops = {
    .all_reduce = tc_all_reduce,
    .all_gather_v = tc_all_gather_v,
    .reduce_scatter = tc_reduce_scatter,
    .all_to_all_v = tc_all_to_all_v,
    .all_to_all_blocks = tc_all_to_all_blocks,
    .all_gather_blocks = tc_all_gather_blocks,
    .reduce_scatter_blocks = tc_reduce_scatter_blocks,
    .broadcast = tc_broadcast,
    .scatter = tc_scatter,
    .gather = tc_gather,
    .send = tc_send,
    .recv = tc_recv,
    .barrier = tc_barrier,
    .fail = tc_fail,
    .new_group = tc_new_group_impl,
    .destroy = tc_destroy_impl,
};
