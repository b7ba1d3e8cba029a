/* Unit tests of the comm layer: the reduction kernels, and the threads backend driven by
 * plain pthreads (no Lua): results, mismatch detection, timeout and abort. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/blocks.h"
#include "comm/comm.h"
#include "base/stream_copy.h"
#include "comm/spin_wait.h"
#include "kernels/cpu/reduce_ops.h"
#include "ctest.h"

/* ---- kernels ---- */
static void test_reduce_ops_bf16_accumulates_in_f32(void) {
  uint16_t a[1] = {dt_f32_to_bf16(256)}, b[1] = {dt_f32_to_bf16(1)}, c[1] = {dt_f32_to_bf16(1)}, out[1];
  const void *in[3] = {a, b, c};
  dt_reduce_ops_apply(DT_REDUCE_SUM, DT_BFLOAT16, out, in, 3, 1);
  CHECK(dt_bf16_to_f32(out[0]) == 258.0f); /* pairwise rounding would give 256 */
}

static void test_reduce_ops_max_min_bool_avg(void) {
  float x[3] = {1, NAN, -2}, y[3] = {3, 0, -5}, o[3];
  const void *in[2] = {x, y};
  dt_reduce_ops_apply(DT_REDUCE_MAX, DT_FLOAT32, o, in, 2, 3);
  CHECK(o[0] == 3 && isnan(o[1]) && o[2] == -2);
  dt_reduce_ops_apply(DT_REDUCE_AVG, DT_FLOAT32, o, in, 2, 3);
  CHECK(o[0] == 2 && o[2] == -3.5f);
  uint8_t p[2] = {1, 0}, q[2] = {0, 0}, r[2];
  const void *bin[2] = {p, q};
  dt_reduce_ops_apply(DT_REDUCE_SUM, DT_BOOL, r, bin, 2, 2);
  CHECK(r[0] == 1 && r[1] == 0);
  dt_reduce_ops_apply(DT_REDUCE_PRODUCT, DT_BOOL, r, bin, 2, 2);
  CHECK(r[0] == 0 && r[1] == 0);
  dt_reduce_op op;
  CHECK(dt_reduce_op_from_name("mean", &op) == DT_OK && op == DT_REDUCE_AVG);
  CHECK(dt_reduce_op_from_name("median", &op) == DT_ERR);
  CHECK(dt_reduce_op_check(DT_REDUCE_AVG, DT_INT32, "t") == DT_ERR);
}

/* ---- the threads backend ---- */
#define N 3
typedef struct job {
  dt_threads_world *w;
  int rank;
  int (*fn)(dt_comm *c, int rank);
  int result;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  dt_comm *c = dt_threads_world_comm(j->w, j->rank);
  j->result = c ? j->fn(c, j->rank) : 0;
  dt_threads_world_rank_exited(j->w, j->rank);
  dt_comm_destroy(c);
  return NULL;
}

/* Runs fn on N ranks; returns how many returned 1. */
static int spmd(int (*fn)(dt_comm *, int), double timeout) {
  dt_threads_world *w = dt_threads_world_new(N, timeout);
  job jobs[N];
  pthread_t t[N];
  for (int r = 0; r < N; r++) {
    jobs[r] = (job){w, r, fn, 0};
    pthread_create(&t[r], NULL, run_job, &jobs[r]);
  }
  int ok = 0;
  for (int r = 0; r < N; r++) pthread_join(t[r], NULL), ok += jobs[r].result;
  dt_threads_world_free(w);
  return ok;
}

static int collectives(dt_comm *c, int rank) {
  int ok = 1;
  /* all_reduce, in place, an uneven size */
  double v[1001];
  for (int i = 0; i < 1001; i++) v[i] = rank + i;
  ok &= dt_comm_all_reduce(c, v, v, 1001, DT_FLOAT64, DT_REDUCE_SUM) == DT_OK;
  ok &= v[0] == 3 && v[1000] == 3 + 3000;
  /* all_gather_v: rank r sends r+1 ints */
  int32_t mine[3] = {rank, rank, rank}, all[6];
  size_t counts[N] = {1, 2, 3};
  ok &= dt_comm_all_gather_v(c, mine, all, counts, DT_INT32) == DT_OK;
  ok &= all[0] == 0 && all[1] == 1 && all[2] == 1 && all[5] == 2;
  /* reduce_scatter: block b of rank r holds r*10+b */
  int64_t blocks[N], got;
  for (int b = 0; b < N; b++) blocks[b] = rank * 10 + b;
  ok &= dt_comm_reduce_scatter(c, blocks, &got, 1, DT_INT64, DT_REDUCE_SUM) == DT_OK;
  ok &= got == 30 + 3 * rank;
  /* all_to_all_v: rank r sends p+1 elements to p, all valued r */
  uint8_t send[6], recv[9];
  size_t sc[N] = {1, 2, 3}, rc[N] = {(size_t)rank + 1, (size_t)rank + 1, (size_t)rank + 1};
  memset(send, rank, sizeof send);
  ok &= dt_comm_all_to_all_v(c, send, sc, recv, rc, DT_UINT8) == DT_OK;
  for (int p = 0; p < N; p++) ok &= recv[p * (rank + 1)] == p;
  /* broadcast, scatter, gather */
  float f[2] = {(float)rank, (float)rank};
  ok &= dt_comm_broadcast(c, f, 2, DT_FLOAT32, 2) == DT_OK && f[0] == 2 && f[1] == 2;
  float src[N] = {7, 8, 9}, part = 0;
  ok &= dt_comm_scatter(c, src, &part, 1, DT_FLOAT32, 1) == DT_OK && part == 7 + rank;
  float g[N] = {0};
  ok &= dt_comm_gather(c, &part, g, 1, DT_FLOAT32, 0) == DT_OK;
  if (rank == 0) ok &= g[0] == 7 && g[2] == 9;
  /* send/recv around a ring */
  int64_t token = rank, in = -1;
  if (rank == 0) {
    ok &= dt_comm_send(c, &token, 1, DT_INT64, 1) == DT_OK;
    ok &= dt_comm_recv(c, &in, 1, DT_INT64, N - 1) == DT_OK && in == N - 1;
  } else {
    ok &= dt_comm_recv(c, &in, 1, DT_INT64, rank - 1) == DT_OK && in == rank - 1;
    ok &= dt_comm_send(c, &token, 1, DT_INT64, (rank + 1) % N) == DT_OK;
  }
  /* a sub-group of ranks {0, 2} */
  int ranks[2] = {0, 2};
  dt_comm *sub = NULL;
  ok &= dt_comm_new_group(c, ranks, 2, &sub) == DT_OK;
  if (rank == 1) ok &= sub == NULL;
  else {
    int32_t x = rank;
    ok &= sub && dt_comm_all_reduce(sub, &x, &x, 1, DT_INT32, DT_REDUCE_MAX) == DT_OK && x == 2;
    dt_comm_destroy(sub);
  }
  ok &= dt_comm_barrier(c) == DT_OK;
  return ok;
}

static void test_threads_collectives(void) { CHECK(spmd(collectives, 10) == N); }

/* ---- strided blocks: Shard(0) -> Shard(1) of an R x C matrix (all_to_all) and Shard(1) ->
 * Replicate (all_gather), torch.chunk sizes (a zero-size chunk when C < N) ---- */
static void chunk(int64_t len, int r, int64_t *st, int64_t *n) {
  int64_t per = (len + N - 1) / N;
  *st = per * r < len ? per * r : len;
  *n = per * (r + 1) < len ? per : len - *st;
}
static double value_at(int64_t i, int64_t j) { return (double)(i * 1000 + j); }

static int blocks_exchange(dt_comm *c, int rank, int64_t R, int64_t C) {
  int ok = 1;
  int64_t rst, rn, cst, cn, st, n;
  chunk(R, rank, &rst, &rn);
  chunk(C, rank, &cst, &cn);
  double *rows = malloc(sizeof(double) * (size_t)(rn * C + 1)), *cols = malloc(sizeof(double) * (size_t)(R * cn + 1));
  double *full = malloc(sizeof(double) * (size_t)(R * C + 1));
  for (int64_t i = 0; i < rn; i++)
    for (int64_t j = 0; j < C; j++) rows[i * C + j] = value_at(rst + i, j);
  dt_comm_block sb[N], rb[N];
  for (int p = 0; p < N; p++) { /* to p: my rows, its columns; from p: its rows, my columns */
    chunk(C, p, &st, &n);
    sb[p] = (dt_comm_block){(size_t)st, (size_t)rn, (size_t)n, (size_t)C};
    chunk(R, p, &st, &n);
    rb[p] = (dt_comm_block){(size_t)(st * cn), 1, (size_t)(n * cn), (size_t)(n * cn)};
  }
  ok &= dt_comm_all_to_all_blocks(c, rows, sb, cols, rb, DT_FLOAT64) == DT_OK;
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < cn; j++) ok &= cols[i * cn + j] == value_at(i, cst + j);
  for (int p = 0; p < N; p++) { /* every rank's columns into their place in the full matrix */
    chunk(C, p, &st, &n);
    rb[p] = (dt_comm_block){(size_t)st, (size_t)R, (size_t)n, (size_t)C};
  }
  ok &= dt_comm_all_gather_blocks(c, cols, full, rb, DT_FLOAT64) == DT_OK;
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) ok &= full[i * C + j] == value_at(i, j);
  free(rows), free(cols), free(full);
  return ok;
}

/* reduce_scatter of column blocks of an R x C matrix (rank r's addend: value_at * (r + 1)):
 * rank r gets the sum of its columns, contiguous. */
static int blocks_reduce(dt_comm *c, int rank, int64_t R, int64_t C) {
  int ok = 1;
  int64_t st, n, cst, cn;
  chunk(C, rank, &cst, &cn);
  double *x = malloc(sizeof(double) * (size_t)(R * C + 1)), *out = malloc(sizeof(double) * (size_t)(R * cn + 1));
  for (int64_t i = 0; i < R * C; i++) x[i] = value_at(i / C, i % C) * (rank + 1);
  dt_comm_block sb[N];
  for (int p = 0; p < N; p++) {
    chunk(C, p, &st, &n);
    sb[p] = (dt_comm_block){(size_t)st, (size_t)R, (size_t)n, (size_t)C};
  }
  ok &= dt_comm_reduce_scatter_blocks(c, x, sb, out, DT_FLOAT64, DT_REDUCE_SUM) == DT_OK;
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < cn; j++) ok &= out[i * cn + j] == value_at(i, cst + j) * (N * (N + 1) / 2);
  free(x), free(out);
  return ok;
}

/* Odd sizes, a zero-size chunk, and a large one; the threads backend's own block copies, then
 * the front's packing around the _v forms (what backends without the block forms get). */
static int strided_blocks(dt_comm *c, int rank) {
  int ok = 1;
  const dt_comm_ops *own = c->ops;
  dt_comm_ops packing = *own;
  packing.all_to_all_blocks = NULL, packing.all_gather_blocks = NULL, packing.reduce_scatter_blocks = NULL;
  for (int pass = 0; pass < 2; pass++) {
    c->ops = pass ? &packing : own;
    ok &= blocks_exchange(c, rank, 7, 5);
    ok &= blocks_exchange(c, rank, 7, 2);  /* the last rank's column chunk is empty */
    ok &= blocks_exchange(c, rank, 0, 4);  /* nothing at all */
    ok &= blocks_exchange(c, rank, 301, 1037);
    ok &= blocks_exchange(c, rank, 1031, 4099); /* 34 MB of outputs: streamed where they exceed 3/4 of the last-level cache (dt_stream_pays) */
    ok &= blocks_reduce(c, rank, 7, 5) & blocks_reduce(c, rank, 7, 2) & blocks_reduce(c, rank, 0, 4);
    ok &= blocks_reduce(c, rank, 301, 1037);
  }
  c->ops = own;
  /* rows that overlap: an error naming the block, before any communication */
  dt_comm_block bad[N] = {{0, 2, 4, 3}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  double buf[8] = {0};
  ok &= dt_comm_all_gather_blocks(c, buf, buf, bad, DT_FLOAT64) == DT_ERR;
  ok &= strstr(dt_error_message(), "all_gather: recv block 0 has rows of 4 elements 3 apart") != NULL;
  /* reduce_scatter blocks of different shapes on two ranks: a mismatch on every rank */
  dt_comm_block rs[N] = {{0, 1, 2, 2}, {2, 1, 2, 2}, {4, 1, 2, 2}};
  if (rank == 1) rs[2] = (dt_comm_block){4, 2, 1, 1};
  ok &= dt_comm_reduce_scatter_blocks(c, buf, rs, buf + 6, DT_FLOAT64, DT_REDUCE_SUM) == DT_ERR;
  ok &= strstr(dt_error_message(), "(block 2: 1 rows of 2 on rank 0, 2 of 1 on rank 1)") != NULL;
  return ok;
}

static void test_threads_strided_blocks(void) { CHECK(spmd(strided_blocks, 10) == N); }

/* ---- non-temporal copies: every alignment of either end and every length around a line and
 * the unrolled body, then blocks of every row shape, against memcpy ---- */
static void test_stream_copy_matches_memcpy(void) {
  enum { CAP = 4096 + 256 };
  unsigned char *src = malloc(CAP), *a = malloc(CAP), *b = malloc(CAP);
  for (int i = 0; i < CAP; i++) src[i] = (unsigned char)(i * 131 + 7);
  int bad = 0;
  for (int so = 0; so < 64; so += 3)
    for (int d0 = 0; d0 < 64; d0 += 5)
      for (size_t n = 0; n < 4096; n = n < 300 ? n + 1 : n * 2 + 13) {
        memset(a, 0xAB, CAP), memset(b, 0xAB, CAP);
        memcpy(a + d0, src + so, n);
        dt_stream_copy(b + d0, src + so, n);
        dt_stream_fence();
        bad += memcmp(a, b, CAP) != 0;
      }
  CHECK(bad == 0);
  /* blocks: equal and different row lengths, a byte-sized element and a 2-byte one */
  dt_comm_block db[] = {{3, 7, 129, 300}, {1, 1, 903, 903}, {5, 9, 100, 101}, {0, 3, 301, 400}};
  dt_comm_block sb[] = {{0, 7, 129, 131}, {2, 7, 129, 140}, {0, 1, 900, 900}, {11, 7, 129, 200}};
  for (size_t esz = 1; esz <= 2; esz++)
    for (int k = 0; k < 4; k++) {
      memset(a, 0, CAP), memset(b, 0, CAP);
      dt_comm_block_copy_as(a, &db[k], src, &sb[k], esz, 0);
      dt_comm_block_copy_as(b, &db[k], src, &sb[k], esz, 1);
      CHECK(memcmp(a, b, CAP) == 0);
    }
  free(src), free(a), free(b);
}

static int mismatch(dt_comm *c, int rank) {
  float x[4] = {0};
  int st = rank == 1 ? dt_comm_broadcast(c, x, 4, DT_FLOAT32, 0) : dt_comm_all_reduce(c, x, x, 4, DT_FLOAT32, DT_REDUCE_SUM);
  int ok = st == DT_ERR && strstr(dt_error_message(), "collective mismatch in group {0,1,2}") &&
           strstr(dt_error_message(), "rank 1 called broadcast(float32, 4 elements, src 0)");
  return ok && dt_comm_barrier(c) == DT_OK; /* still usable */
}

static void test_threads_mismatch(void) { CHECK(spmd(mismatch, 10) == N); }

static int late_rank(dt_comm *c, int rank) {
  if (rank == 2) {
    double t0 = dt_now();
    while (dt_now() - t0 < 0.6) {
    }
    return 1;
  }
  int st = dt_comm_barrier(c);
  return st == DT_ERR && (strstr(dt_error_message(), "barrier: timed out after 0.2 s in group {0,1,2}: rank(s) {2}") ||
                          strstr(dt_error_message(), "broken"));
}

static void test_threads_timeout(void) { CHECK(spmd(late_rank, 0.2) == N); }

static int early_exit(dt_comm *c, int rank) {
  if (rank == 0) return 1;
  int st = dt_comm_barrier(c);
  return st == DT_ERR && (strstr(dt_error_message(), "finished their program without joining") ||
                          strstr(dt_error_message(), "broken"));
}

static void test_threads_exited_peer(void) { CHECK(spmd(early_exit, 0) == N); }

/* Async calls: two outstanding, a blocking call after them (it drains them), waited out of
 * order; a second wait is an error; a work freed unwaited completes first and is reported by
 * the end-of-program check. */
static int async_calls(dt_comm *c, int rank) {
  float a[8], b[8], x[2] = {1, 1}, mine = (float)rank, y[N] = {0};
  for (int i = 0; i < 8; i++) a[i] = (float)(rank + i), b[i] = (float)(10 * rank);
  dt_comm_work *wa = NULL, *wb = NULL, *wc = NULL;
  int ok = dt_comm_iall_reduce(c, a, a, 8, DT_FLOAT32, DT_REDUCE_SUM, &wa) == DT_OK &&
           dt_comm_iall_reduce(c, b, b, 8, DT_FLOAT32, DT_REDUCE_MAX, &wb) == DT_OK;
  ok = ok && dt_comm_all_reduce(c, x, x, 2, DT_FLOAT32, DT_REDUCE_SUM) == DT_OK && x[0] == N;
  int done = 0;
  if (ok) dt_comm_work_test(wa, &done);
  ok = ok && done && dt_comm_work_wait(wb) == DT_OK && dt_comm_work_wait(wa) == DT_OK;
  ok = ok && a[1] == (float)(N * 1 + N * (N - 1) / 2) && b[0] == (float)(10 * (N - 1));
  ok = ok && dt_comm_work_wait(wa) == DT_ERR && strstr(dt_error_message(), "already waited");
  dt_comm_work_free(wa);
  dt_comm_work_free(wb);
  ok = ok && dt_comm_iall_gather(c, &mine, y, 1, DT_FLOAT32, &wc) == DT_OK;
  dt_comm_work_free(wc); /* unwaited: completes first */
  ok = ok && y[N - 1] == (float)(N - 1);
  return ok && dt_comm_async_finish(c) == DT_ERR &&
         strstr(dt_error_message(), "1 async collective(s) never waited (all_gather x1)");
}

static void test_threads_async(void) { CHECK(spmd(async_calls, 10) == N); }

int main(void) {
  TEST_CASE(test_reduce_ops_bf16_accumulates_in_f32);
  TEST_CASE(test_reduce_ops_max_min_bool_avg);
  TEST_CASE(test_threads_collectives);
  TEST_CASE(test_threads_strided_blocks);
  TEST_CASE(test_stream_copy_matches_memcpy);
  TEST_CASE(test_threads_mismatch);
  TEST_CASE(test_threads_timeout);
  TEST_CASE(test_threads_exited_peer);
  TEST_CASE(test_threads_async);
  return CTEST_END();
}
