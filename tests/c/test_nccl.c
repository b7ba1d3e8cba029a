/* Unit tests of the NCCL backend's parts that run without a GPU: the collective lowering
 * (displacements, grouped send/recv plans, checked by running every rank's plan against
 * its peers' and comparing with the collective's definition), the watchdog's decisions with
 * a fake query and clock, the unique-id exchange over a threads world with fake ids, and the
 * backend choice by device (a clear error where there is no NCCL or no GPU). */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/comm.h"
#include "comm/nccl_id.h"
#include "comm/nccl_plan.h"
#include "comm/nccl_watch.h"
#include "ctest.h"

#ifdef DT_HAVE_NCCL
#include <cuda_runtime.h>
#endif

#define MAXR 4
#define MAXC 7

static unsigned rnd_state = 12345;
static unsigned rnd(unsigned n) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return (rnd_state >> 16) % n;
}

/* ---- plans: simulated ---- */

/* Runs the plans of n ranks: every SEND must meet exactly one RECV of the same count at the
 * peer (and the reverse); copies data; applies the local copies.  0 on a plan that would hang
 * or truncate. */
static int simulate(int n, dt_p2p_plan *plans, int64_t **send, int64_t **recv) {
  for (int r = 0; r < n; r++) {
    dt_p2p_plan *p = &plans[r];
    for (size_t i = 0; i < p->self_count; i++) recv[r][p->self_recv + i] = send[r][p->self_send + i];
    for (int i = 0; i < p->n; i++) {
      dt_p2p_step *s = &p->steps[i];
      if (s->peer < 0 || s->peer >= n || s->peer == r || s->count == 0) return 0;
      int matches = 0;
      for (int j = 0; j < plans[s->peer].n; j++) {
        dt_p2p_step *t = &plans[s->peer].steps[j];
        if (t->peer != r || t->kind == s->kind) continue;
        matches++;
        if (t->count != s->count) return 0;
        if (s->kind == DT_P2P_SEND)
          for (size_t k = 0; k < s->count; k++) recv[s->peer][t->offset + k] = send[r][s->offset + k];
      }
      if (matches != 1) return 0;
    }
  }
  return 1;
}

static void test_displacements(void) {
  size_t counts[4] = {3, 0, 5, 2}, d[4], total = 0;
  CHECK(dt_nccl_displacements(counts, 4, d, &total, "x") == DT_OK);
  CHECK(d[0] == 0 && d[1] == 3 && d[2] == 3 && d[3] == 8 && total == 10);
  size_t big[2] = {SIZE_MAX, 1};
  CHECK(dt_nccl_displacements(big, 2, d, &total, "all_to_all") == DT_ERR);
  CHECK(strstr(dt_error_message(), "all_to_all: the counts overflow") != NULL);
}

static void test_plan_all_to_all_v(void) {
  for (int trial = 0; trial < 200; trial++) {
    int n = 1 + (int)rnd(MAXR);
    size_t c[MAXR][MAXR]; /* c[s][d]: elements s sends d (zero often) */
    for (int s = 0; s < n; s++)
      for (int d = 0; d < n; d++) c[s][d] = rnd(3) == 0 ? 0 : rnd(MAXC);
    dt_p2p_plan plans[MAXR];
    int64_t *send[MAXR], *recv[MAXR];
    int ok = 1;
    for (int r = 0; r < n; r++) {
      size_t sc[MAXR], rc[MAXR], st = 0, rt = 0;
      for (int p = 0; p < n; p++) sc[p] = c[r][p], rc[p] = c[p][r], st += sc[p], rt += rc[p];
      ok &= dt_nccl_plan_all_to_all_v(r, n, sc, rc, &plans[r]) == DT_OK;
      send[r] = malloc(sizeof(int64_t) * (st + 1)), recv[r] = calloc(rt + 1, sizeof(int64_t));
      size_t k = 0; /* element i of the block r sends p: r * 10000 + p * 100 + i */
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < sc[p]; i++) send[r][k++] = r * 10000 + p * 100 + (int64_t)i;
    }
    CHECK(ok);
    CHECK(simulate(n, plans, send, recv));
    for (int r = 0; r < n; r++) { /* recv[r] holds, by source p, p's block for r */
      size_t k = 0;
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < c[p][r]; i++) ok &= recv[r][k++] == p * 10000 + r * 100 + (int64_t)i;
      dt_nccl_plan_free(&plans[r]), free(send[r]), free(recv[r]);
    }
    CHECK(ok);
  }
  size_t sc[2] = {2, 1}, rc[2] = {3, 1};
  dt_p2p_plan p;
  CHECK(dt_nccl_plan_all_to_all_v(0, 2, sc, rc, &p) == DT_ERR);
  CHECK(strstr(dt_error_message(), "rank 0 sends itself 2 elements but expects 3") != NULL);
}

static void test_plan_all_gather_v(void) {
  for (int trial = 0; trial < 200; trial++) {
    int n = 1 + (int)rnd(MAXR);
    size_t counts[MAXR], total = 0;
    for (int r = 0; r < n; r++) counts[r] = rnd(3) == 0 ? 0 : rnd(MAXC), total += counts[r];
    dt_p2p_plan plans[MAXR];
    int64_t *send[MAXR], *recv[MAXR];
    int ok = 1;
    for (int r = 0; r < n; r++) {
      ok &= dt_nccl_plan_all_gather_v(r, n, counts, &plans[r]) == DT_OK;
      send[r] = malloc(sizeof(int64_t) * (counts[r] + 1)), recv[r] = calloc(total + 1, sizeof(int64_t));
      for (size_t i = 0; i < counts[r]; i++) send[r][i] = r * 100 + (int64_t)i;
    }
    CHECK(ok);
    CHECK(simulate(n, plans, send, recv));
    for (int r = 0; r < n; r++) {
      size_t k = 0;
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < counts[p]; i++) ok &= recv[r][k++] == p * 100 + (int64_t)i;
      dt_nccl_plan_free(&plans[r]), free(send[r]), free(recv[r]);
    }
    CHECK(ok);
  }
}

static void test_plan_scatter_gather(void) {
  for (int trial = 0; trial < 100; trial++) {
    int n = 1 + (int)rnd(MAXR), root = (int)rnd((unsigned)n);
    size_t count = rnd(MAXC);
    for (int gather = 0; gather < 2; gather++) {
      dt_p2p_plan plans[MAXR];
      int64_t *send[MAXR], *recv[MAXR];
      int ok = 1;
      for (int r = 0; r < n; r++) {
        ok &= (gather ? dt_nccl_plan_gather : dt_nccl_plan_scatter)(r, n, count, root, &plans[r]) == DT_OK;
        size_t sn = gather || r != root ? count : count * (size_t)n, rn = gather && r == root ? count * (size_t)n : count;
        send[r] = malloc(sizeof(int64_t) * (sn + 1)), recv[r] = calloc(rn + 1, sizeof(int64_t));
        for (size_t i = 0; i < sn; i++) send[r][i] = r * 1000 + (int64_t)i;
      }
      CHECK(ok);
      CHECK(simulate(n, plans, send, recv));
      for (int r = 0; r < n; r++) {
        if (!gather) /* rank r got block r of the root's buffer */
          for (size_t i = 0; i < count; i++) ok &= recv[r][i] == root * 1000 + (int64_t)(r * count + i);
        if (gather && r == root)
          for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++) ok &= recv[r][p * count + i] == p * 1000 + (int64_t)i;
        dt_nccl_plan_free(&plans[r]), free(send[r]), free(recv[r]);
      }
      CHECK(ok);
    }
  }
  dt_p2p_plan p;
  CHECK(dt_nccl_plan_scatter(0, 2, 1, 2, &p) == DT_ERR);
  CHECK(strstr(dt_error_message(), "scatter: root 2 out of range for a group of 2 ranks") != NULL);
}

static void test_split_args(void) {
  int ranks[2] = {1, 3}, color, key;
  dt_nccl_split_args(ranks, 2, 3, &color, &key);
  CHECK(color == 0 && key == 3);
  dt_nccl_split_args(ranks, 2, 2, &color, &key);
  CHECK(color == -1 && key == 2);
}

/* ---- the watchdog ---- */

typedef struct fake {
  double t, step;   /* the clock advances step per reading */
  int pending;      /* queries that answer PENDING before the final state */
  dt_watch_state final;
  int queries;
} fake;

static dt_watch_state fake_query(void *ud, char *why, size_t len) {
  fake *f = ud;
  f->queries++;
  if (f->pending-- > 0) return DT_WATCH_PENDING;
  if (f->final == DT_WATCH_FAILED) snprintf(why, len, "asynchronous NCCL error: unhandled cuda error");
  return f->final;
}
static double fake_clock(void *ud) {
  fake *f = ud;
  return f->t += f->step;
}

static void test_watchdog_decide(void) {
  CHECK(dt_watchdog_decide(DT_WATCH_DONE, 100, 1) == DT_WATCH_RETURN_OK); /* done wins over late */
  CHECK(dt_watchdog_decide(DT_WATCH_FAILED, 0, 1) == DT_WATCH_RETURN_ERROR);
  CHECK(dt_watchdog_decide(DT_WATCH_PENDING, 0.5, 1) == DT_WATCH_KEEP_WAITING);
  CHECK(dt_watchdog_decide(DT_WATCH_PENDING, 1.5, 1) == DT_WATCH_TIMED_OUT);
  CHECK(dt_watchdog_decide(DT_WATCH_PENDING, 1e9, 0) == DT_WATCH_KEEP_WAITING); /* no timeout */
}

static void test_watchdog_wait(void) {
  int timed_out = -1;
  fake done = {.step = 0.001, .pending = 50, .final = DT_WATCH_DONE};
  dt_watchdog w = {.timeout = 5, .query = fake_query, .clock = fake_clock, .ud = &done};
  CHECK(dt_watchdog_wait(&w, 2, "all_reduce", "{0,1,2}", &timed_out) == DT_OK && !timed_out);
  CHECK(done.queries == 51);

  fake stuck = {.step = 1, .pending = 1 << 30, .final = DT_WATCH_DONE};
  w.ud = &stuck;
  CHECK(dt_watchdog_wait(&w, 2, "all_reduce", "{0,1,2}", &timed_out) == DT_ERR && timed_out == 1);
  CHECK(strstr(dt_error_message(), "all_reduce: NCCL watchdog: rank 2 found the collective still running after 5 s "
                                   "in group {0,1,2} (DTLUA_TIMEOUT)") != NULL);
  CHECK(stuck.queries >= 5 && stuck.queries <= 7); /* a reading per query: it gave up just past 5 s */

  fake failed = {.step = 0.1, .pending = 3, .final = DT_WATCH_FAILED};
  w.ud = &failed;
  CHECK(dt_watchdog_wait(&w, 1, "broadcast", "{0,1}", &timed_out) == DT_ERR && timed_out == 0);
  CHECK(strstr(dt_error_message(), "broadcast: NCCL error on rank 1 in group {0,1}: asynchronous NCCL error") != NULL);

  fake slow = {.step = 10, .pending = 100, .final = DT_WATCH_DONE};
  w.ud = &slow, w.timeout = 0; /* DTLUA_TIMEOUT=0: waits as long as it takes */
  CHECK(dt_watchdog_wait(&w, 0, "gather", "{0}", &timed_out) == DT_OK && !timed_out);
}

/* ---- the id exchange and the backend choice, on a threads world ---- */
#define N 3
typedef struct job {
  dt_threads_world *w;
  int rank, fail_make, ok;
  unsigned char id[DT_NCCL_ID_BYTES];
  char err[512];
} job;

static int fake_make(void *ud, unsigned char id[DT_NCCL_ID_BYTES]) {
  job *j = ud;
  if (j->fail_make) return dt_error("ncclGetUniqueId failed: fake");
  for (int i = 0; i < DT_NCCL_ID_BYTES; i++) id[i] = (unsigned char)(j->rank * 50 + i * 7 + 1);
  return DT_OK;
}

static void *id_rank(void *arg) {
  job *j = arg;
  dt_comm *c = dt_threads_world_comm(j->w, j->rank);
  memset(j->id, 0xee, sizeof j->id);
  j->ok = c && dt_nccl_id_exchange(c, fake_make, j, j->id) == DT_OK;
  if (!j->ok) snprintf(j->err, sizeof j->err, "%s", dt_error_message());
  dt_threads_world_rank_exited(j->w, j->rank);
  dt_comm_destroy(c);
  return NULL;
}

static int run_ids(job *jobs, int fail_make) {
  dt_threads_world *w = dt_threads_world_new(N, 10);
  pthread_t t[N];
  for (int r = 0; r < N; r++) {
    jobs[r] = (job){.w = w, .rank = r, .fail_make = fail_make};
    pthread_create(&t[r], NULL, id_rank, &jobs[r]);
  }
  int ok = 0;
  for (int r = 0; r < N; r++) pthread_join(t[r], NULL), ok += jobs[r].ok;
  dt_threads_world_free(w);
  return ok;
}

static void test_id_exchange(void) {
  job jobs[N];
  CHECK(run_ids(jobs, 0) == N);
  for (int r = 0; r < N; r++) /* every rank holds rank 0's id, not one of its own */
    for (int i = 0; i < DT_NCCL_ID_BYTES; i++) CHECK(jobs[r].id[i] == (unsigned char)(i * 7 + 1));
  CHECK(run_ids(jobs, 1) == 0);
  for (int r = 0; r < N; r++)
    CHECK(strstr(jobs[r].err, "NCCL unique id exchange: rank 0 could not make the id: ncclGetUniqueId failed: fake"));
}

static void *device_rank(void *arg) {
  job *j = arg;
  dt_comm *c = dt_threads_world_comm(j->w, j->rank);
  j->ok = c && dt_comm_for_device(c, DT_CPU, "all_reduce") == c;
  dt_comm *d = c ? dt_comm_for_device(c, DT_CUDA, "all_reduce") : NULL;
  snprintf(j->err, sizeof j->err, "%s", d ? "" : dt_error_message());
  dt_threads_world_rank_exited(j->w, j->rank);
  dt_comm_destroy(c);
  return NULL;
}

static void test_device_choice(void) {
  int gpus = 0;
#ifdef DT_HAVE_NCCL
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
#endif
  if (gpus > 0) {
    printf("  skipped: a GPU is present (tests/gpu/nccl_spec.lua covers the choice there)\n");
    return;
  }
  dt_threads_world *w = dt_threads_world_new(N, 10);
  job jobs[N];
  pthread_t t[N];
  for (int r = 0; r < N; r++) {
    jobs[r] = (job){.w = w, .rank = r};
    pthread_create(&t[r], NULL, device_rank, &jobs[r]);
  }
  for (int r = 0; r < N; r++) pthread_join(t[r], NULL);
  dt_threads_world_free(w);
  for (int r = 0; r < N; r++) {
    CHECK(jobs[r].ok);
    if (dt_nccl_available()) /* every rank, naming the ranks without a GPU */
      CHECK(strstr(jobs[r].err, "all_reduce: NCCL: no GPU on rank(s) {0,1,2}") != NULL);
    else
      CHECK(strstr(jobs[r].err, "all_reduce: the tensor is on cuda, and collectives on cuda need the NCCL backend, "
                                "which this build lacks (configure --with-nccl)") != NULL);
    if (!strstr(jobs[r].err, "all_reduce")) printf("  rank %d: %s\n", r, jobs[r].err);
  }
}

int main(void) {
  TEST_CASE(test_displacements);
  TEST_CASE(test_plan_all_to_all_v);
  TEST_CASE(test_plan_all_gather_v);
  TEST_CASE(test_plan_scatter_gather);
  TEST_CASE(test_split_args);
  TEST_CASE(test_watchdog_decide);
  TEST_CASE(test_watchdog_wait);
  TEST_CASE(test_id_exchange);
  TEST_CASE(test_device_choice);
  return CTEST_END();
}
