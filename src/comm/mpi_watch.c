/* The MPI backend's side channel for naming the ranks of a stuck collective: a duplicate of
 * the world on which a rank waiting in a polled call answers "what are you waiting in?".
 * MPI itself cannot say which ranks are missing; on a timeout the stuck rank asks every
 * rank, and the answers (or their absence: a rank running Lua code) go into its message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/mpi_impl.h"
#include "comm/spin_wait.h"

enum { TAG_QUERY = 1, TAG_REPLY = 2 };
#define ANSWER_WAIT_S 2.0 /* how long a stuck rank collects answers */

/* This rank's current call, kept as fields and written out only when a rank asks: a
 * collective formats nothing on its fast path. */
struct dt_mpi_watch {
  MPI_Comm comm;
  tc_desc call;        /* its kind, dtype, op, root and count */
  int p2p;             /* 1: send/recv (call.root: the peer's world rank) */
  int busy;            /* 0: no call yet */
  char label[64];      /* its group */
};

dt_mpi_watch *dt_mpi_watch_new(MPI_Comm world) {
  dt_mpi_watch *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  if (MPI_Comm_dup(world, &w->comm) != MPI_SUCCESS) return free(w), NULL;
  MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
  return w;
}

void dt_mpi_watch_free(dt_mpi_watch *w) {
  if (!w) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Comm_free(&w->comm);
  free(w);
}

static void doing(dt_mpi_watch *w, const tc_desc *d, int p2p, const char *label) {
  if (!w) return;
  w->call = (tc_desc){.kind = d->kind, .dtype = d->dtype, .op = d->op, .root = d->root, .count = d->count};
  w->p2p = p2p, w->busy = 1;
  size_t len = strnlen(label, sizeof w->label - 1);
  memcpy(w->label, label, len);
  w->label[len] = 0;
}

void dt_mpi_watch_doing(dt_mpi_watch *w, const tc_desc *d, const char *label) { doing(w, d, 0, label); }

void dt_mpi_watch_doing_p2p(dt_mpi_watch *w, int is_send, size_t count, dt_dtype dt, int peer, const char *label) {
  tc_desc d = {.kind = is_send, .dtype = dt, .root = peer, .count = count};
  doing(w, &d, 1, label);
}

/* "all_reduce(sum, float32, 4 elements) in group {0,1}", "" before any call */
static void describe(const dt_mpi_watch *w, char *buf, size_t len) {
  char call[160];
  if (!w->busy) {
    buf[0] = 0;
    return;
  }
  const tc_desc *d = &w->call;
  if (w->p2p)
    snprintf(call, sizeof call, "%s(%s, %zu elements, %s %d)", d->kind ? "send" : "recv", dt_dtype_name(d->dtype),
             d->count, d->kind ? "dst" : "src", d->root);
  else
    tc_describe(call, sizeof call, d);
  snprintf(buf, len, "%s in group %s", call, w->label);
}

void dt_mpi_watch_serve(dt_mpi_watch *w) {
  if (!w) return;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, w->comm, &flag, &st) != MPI_SUCCESS || !flag) return;
    MPI_Recv(NULL, 0, MPI_CHAR, st.MPI_SOURCE, TAG_QUERY, w->comm, MPI_STATUS_IGNORE);
    /* small enough to go eagerly: the asker may be waiting for others' answers first */
    char answer[256];
    describe(w, answer, sizeof answer);
    MPI_Send(answer, (int)strlen(answer) + 1, MPI_CHAR, st.MPI_SOURCE, TAG_REPLY, w->comm);
  }
}

void dt_mpi_watch_ask_all(dt_mpi_watch *w, char *buf, size_t len) {
  int n, me;
  if (!w || len == 0) return;
  MPI_Comm_size(w->comm, &n);
  MPI_Comm_rank(w->comm, &me);
  char *answers = calloc((size_t)n, 256);
  MPI_Request *reqs = calloc((size_t)n, sizeof *reqs);
  if (!answers || !reqs) return free(answers), free(reqs);
  for (;;) { /* answers to an earlier timeout's questions, caught by pcall: stale */
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPLY, w->comm, &flag, &st) != MPI_SUCCESS || !flag) break;
    MPI_Recv(answers, 256, MPI_CHAR, st.MPI_SOURCE, TAG_REPLY, w->comm, MPI_STATUS_IGNORE);
  }
  memset(answers, 0, 256);
  for (int r = 0; r < n; r++)
    if (r != me) MPI_Isend(NULL, 0, MPI_CHAR, r, TAG_QUERY, w->comm, &reqs[r]);
  int got = 1;
  describe(w, answers + 256 * (size_t)me, 256);
  for (double t0 = dt_now(); got < n && dt_now() - t0 < ANSWER_WAIT_S;) {
    dt_mpi_watch_serve(w); /* the others may be asking too */
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPLY, w->comm, &flag, &st) != MPI_SUCCESS || !flag) continue;
    char *a = answers + 256 * (size_t)st.MPI_SOURCE;
    MPI_Recv(a, 256, MPI_CHAR, st.MPI_SOURCE, TAG_REPLY, w->comm, MPI_STATUS_IGNORE);
    a[255] = 0;
    if (!a[0]) snprintf(a, 256, "?");
    got++;
  }
  size_t used = strlen(buf);
  for (int r = 0; r < n && used < len; r++) {
    const char *a = answers + 256 * (size_t)r;
    used += (size_t)snprintf(buf + used, len - used, "%s rank %d %s", r ? ";" : "", r,
                             a[0] ? a : "did not answer (running outside collectives, or stuck in a blocking call)");
    if (r != me && reqs[r] != MPI_REQUEST_NULL) MPI_Request_free(&reqs[r]);
  }
  free(answers), free(reqs);
}
