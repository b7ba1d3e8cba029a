/* The MPI backend: each collective is the matching MPI call (no emulation over
 * point-to-point).  Safe by default: before each collective the ranks agree on a
 * fingerprint of the call (one small MPI_Allreduce of a hash pair, on a communicator of its
 * own; on a difference, the full descriptions are gathered to name both calls; from
 * FP_OVERLAP_BYTES it runs beside the data call instead of before it, so a large call does
 * not pay its latency), and the calls run in their non-blocking
 * form, polled against DTLUA_TIMEOUT (default 600 s; 0 = blocking calls, no timeout), so
 * that a stuck collective becomes an error naming what every rank waits in (mpi_watch.c).
 * DTLUA_DEBUG=collectives gathers the full descriptions on every call instead. */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/call_desc.h"
#include "comm/mpi_impl.h"
#include "comm/spin_wait.h"
#include "kernels/cpu/reduce_ops.h"

typedef struct mpi_comm {
  dt_comm base;
  MPI_Comm comm;
  int debug;      /* DTLUA_DEBUG=collectives */
  int unlimited;  /* the end of the program: waits for the others without a deadline */
  dt_mpi_watch *watch; /* the world's, shared by its groups (owned by the world) */
  int owns_watch;
  char label[64];
  MPI_Comm check;     /* the fingerprint and the full checks: apart from the data calls */
  /* the fingerprint agreement posted beside a large data call (agree_call -> wait_req) */
  int fp_pending;
  MPI_Request fp_req;
  int64_t fp_mine[2], fp_min[2];
  tc_desc fp_desc;
  char broken[512]; /* non-empty: a mismatch left a data call unmatched on this communicator */
} mpi_comm;

#define DEFAULT_TIMEOUT 600.0 /* as the threads backend */
/* From this size of a rank's data the fingerprint agreement overlaps the data call (its
 * latency is hidden; a mismatch then breaks the group).  Smaller calls agree first, so a
 * mismatch there leaves the group usable. */
#define FP_OVERLAP_BYTES (64 * 1024)

static const dt_comm_ops mpi_ops;

static int mpi_fail(int rc, const char *name) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, s, &len);
  return dt_error("%s: MPI error: %s", name, s);
}

static int check_rc(int rc, const char *name) { return rc == MPI_SUCCESS ? DT_OK : mpi_fail(rc, name); }

/* Polls req until done (filling status, or MPI_STATUS_IGNORE) or the timeout; *mpi_rc
 * (when given) gets the failing MPI code. */
static int fp_settle(mpi_comm *c, int wait);
static int wait_req_status(mpi_comm *c, int rc, MPI_Request *req, const char *name, MPI_Status *status, int *mpi_rc) {
  if (mpi_rc) *mpi_rc = rc;
  if (c->fp_pending && rc != MPI_SUCCESS && fp_settle(c, 1) != DT_OK) return DT_ERR; /* the better message */
  if (rc != MPI_SUCCESS) return mpi_fail(rc, name);
  double t0 = dt_now();
  for (unsigned i = 0;; i++) {
    int done = 0;
    /* the fingerprint beside this call: on a difference, its message, without waiting for a
     * data call that may never complete */
    if (c->fp_pending && fp_settle(c, 0) != DT_OK) return DT_ERR;
    rc = MPI_Test(req, &done, status);
    if (mpi_rc) *mpi_rc = rc;
    if (rc != MPI_SUCCESS) return c->fp_pending && fp_settle(c, 1) != DT_OK ? DT_ERR : mpi_fail(rc, name);
    if (done) return c->fp_pending ? fp_settle(c, 1) : DT_OK;
    if (i % 64 == 63) {
      sched_yield();
      dt_mpi_watch_serve(c->watch);
      if (!c->unlimited && dt_now() - t0 > c->base.timeout) {
        char who[1536] = "";
        dt_mpi_watch_ask_all(c->watch, who, sizeof who);
        return dt_error("%s: timed out after %g s in group %s (DTLUA_TIMEOUT); what each rank waits in:%s", name,
                        c->base.timeout, c->label, who);
      }
    }
  }
}

static int wait_req(mpi_comm *c, int rc, MPI_Request *req, const char *name) {
  return wait_req_status(c, rc, req, name, MPI_STATUS_IGNORE, NULL);
}

/* Blocking form, or the non-blocking one polled against the timeout. */
#define RUN(name, BLOCKING, NONBLOCKING)                  \
  do {                                                    \
    if (c->base.timeout > 0) {                                 \
      MPI_Request req;                                    \
      return wait_req(c, (NONBLOCKING), &req, name);      \
    }                                                     \
    return check_rc((BLOCKING), name);                    \
  } while (0)

static int too_big(size_t n, const char *name) {
  if (n > INT_MAX) return dt_error("%s: %zu elements exceed MPI's int counts", name, n);
  return DT_OK;
}

/* MPI_Allgather of k int64 per rank for the checks below, under DTLUA_TIMEOUT like the
 * collective it checks (name). */
static int check_allgather(mpi_comm *c, const int64_t *mine, int k, int64_t *all, const char *name) {
  if (c->base.timeout > 0) {
    MPI_Request req;
    return wait_req(c, MPI_Iallgather(mine, k, MPI_INT64_T, all, k, MPI_INT64_T, c->check, &req), &req, name);
  }
  return check_rc(MPI_Allgather(mine, k, MPI_INT64_T, all, k, MPI_INT64_T, c->check), name);
}

/* Rooted at root: the message of the rank whose arguments failed, raised by every rank. */
static int raise_arg_error(mpi_comm *c, const tc_desc *d, int root, int all_same) {
  char why[512] = "";
  if (c->base.rank == root) snprintf(why, sizeof why, "%s", d->why ? d->why : "?");
  MPI_Request req;
  int st = c->base.timeout > 0
               ? wait_req(c, MPI_Ibcast(why, sizeof why, MPI_CHAR, root, c->check, &req), &req, "collective")
               : check_rc(MPI_Bcast(why, sizeof why, MPI_CHAR, root, c->check), "collective");
  if (st != DT_OK) return st;
  why[sizeof why - 1] = 0;
  return tc_arg_error(c->label, c->base.world_ranks[root], why, all_same);
}

static int overlaps(const tc_desc *d);

/* Every rank's (kind, dtype, op, root, count), compared: the ranks that finished their
 * program, a rank whose arguments failed, then calls that differ.  *any_overlap (when
 * given): some rank posted its data call beside the fingerprint (overlaps()). */
static int full_check(mpi_comm *c, const tc_desc *d, int *any_overlap) {
  int n = c->base.size;
  int64_t mine[5] = {d->kind, d->dtype, d->op, d->root, (int64_t)d->count};
  int64_t *all = malloc(sizeof(int64_t) * 5 * (size_t)n);
  if (!all) return dt_error("collective check: out of memory");
  if (check_allgather(c, mine, 5, all, tc_kind_name(d->kind)) != DT_OK) return free(all), DT_ERR;
  for (int r = 0; any_overlap && r < n; r++) {
    tc_desc dr = {.kind = (tc_kind)all[5 * r], .dtype = (dt_dtype)all[5 * r + 1], .count = (size_t)all[5 * r + 4]};
    *any_overlap |= dr.kind != TC_ARG_ERROR && dr.kind != TC_FINISH && (int)dr.dtype >= 0 &&
                    (int)dr.dtype < DT_NDTYPES && overlaps(&dr);
  }
  /* ranks at the end of their program (dt_mpi_finish) against ranks in a collective:
   * the threads backend's message */
  int *fin = malloc(sizeof(int) * (size_t)n), nfin = 0;
  for (int r = 0; fin && r < n; r++)
    if (all[5 * r] == TC_FINISH) fin[nfin++] = c->base.world_ranks[r];
  if (fin && nfin > 0 && nfin < n) {
    char buf[128];
    dt_comm_format_ranks(buf, sizeof buf, fin, nfin);
    free(fin), free(all);
    if (d->kind == TC_FINISH) return dt_error("the program ended while other ranks of group %s wait in a collective", c->label);
    return dt_error("%s: in group %s, rank(s) %s finished their program without joining it", tc_kind_name(d->kind),
                    c->label, buf);
  }
  free(fin);
  for (int r = 0; r < n; r++)
    if (all[5 * r] == TC_ARG_ERROR) { /* count: the hash of its message */
      int all_same = 1;
      for (int q = 0; q < n && all_same; q++) all_same = all[5 * q] == TC_ARG_ERROR && all[5 * q + 4] == all[5 * r + 4];
      return free(all), raise_arg_error(c, d, r, all_same);
    }
  tc_desc d0 = {.kind = (tc_kind)all[0], .dtype = (dt_dtype)all[1], .op = (dt_reduce_op)all[2], .root = (int)all[3],
                .count = (size_t)all[4]};
  int st = DT_OK;
  for (int r = 1; r < n && st == DT_OK; r++) {
    int64_t *m = all + 5 * r;
    tc_desc dr = {.kind = (tc_kind)m[0], .dtype = (dt_dtype)m[1], .op = (dt_reduce_op)m[2], .root = (int)m[3],
                  .count = (size_t)m[4]};
    if (!tc_same_call(&d0, &dr)) st = tc_mismatch_error(c->label, c->base.world_ranks[0], &d0, c->base.world_ranks[r], &dr, "");
  }
  free(all);
  return st;
}

/* A data call whose fingerprint agreement runs beside it (the caller passes its size). */
static int overlaps(const tc_desc *d) {
  switch (d->kind) {
  case TC_ALL_REDUCE: case TC_REDUCE_SCATTER: case TC_ALL_GATHER: case TC_ALL_TO_ALL: case TC_BROADCAST:
  case TC_SCATTER: case TC_GATHER:
    return d->count * dt_dtype_size(d->dtype) >= FP_OVERLAP_BYTES;
  default:
    return 0;
  }
}

/* The fingerprint's verdict: equal on every rank when min == max (the max is ~min of the
 * complements); all ranks reach the same one.  On a difference the full check names it, and
 * when a data call went out beside the fingerprint (on this rank or another) the group is
 * broken: that call may stay unmatched. */
static int fp_verdict(mpi_comm *c, const tc_desc *d, const int64_t *min) {
  if (min[0] == ~min[1] && d->kind != TC_ARG_ERROR) return DT_OK;
  int any_overlap = 0;
  int st = full_check(c, d, &any_overlap);
  if (st == DT_OK) /* equal descriptions but different fingerprints: the same group label differs */
    st = dt_error("%s: collective mismatch in group %s (different fingerprints, equal calls)", tc_kind_name(d->kind),
                  c->label);
  if (any_overlap) snprintf(c->broken, sizeof c->broken, "%s", dt_error_message());
  return st;
}

/* The fingerprint posted beside a data call: its verdict once it arrived (wait: wait for it).
 * DT_OK while it has not arrived. */
static int fp_settle(mpi_comm *c, int wait) {
  int done = 0;
  if (wait) {
    c->fp_pending = 0; /* wait_req below must not come back here */
    if (wait_req(c, MPI_SUCCESS, &c->fp_req, tc_kind_name(c->fp_desc.kind)) != DT_OK) return DT_ERR;
  } else {
    int rc = MPI_Test(&c->fp_req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return c->fp_pending = 0, mpi_fail(rc, tc_kind_name(c->fp_desc.kind));
    if (!done) return DT_OK;
    c->fp_pending = 0;
  }
  tc_desc d = c->fp_desc;
  return fp_verdict(c, &d, c->fp_min);
}

/* Before each collective: the ranks agree on tc_fingerprint(d) (min and max of the hash in one
 * MPI_Allreduce on c->check; equal on every rank or the full check names the difference).
 * Every rank reaches the same verdict, so all go to the full check together.  A large data
 * call (overlaps(), polled calls) only posts the agreement here: wait_req settles it beside
 * the data call that follows at once. */
static int agree_call(mpi_comm *c, const tc_desc *d) {
  char call[160];
  tc_describe(call, sizeof call, d);
  dt_mpi_watch_doing(c->watch, call, c->label);
  if (c->broken[0])
    return dt_error("%s: group %s is broken by an earlier failure: %s", tc_kind_name(d->kind), c->label, c->broken);
  if (c->debug) return full_check(c, d, NULL);
  int64_t h = (int64_t)tc_fingerprint(d, c->label), mine[2] = {h, ~h}, min[2];
  const char *name = tc_kind_name(d->kind);
  int st;
  if (c->base.timeout > 0 && overlaps(d)) {
    c->fp_mine[0] = mine[0], c->fp_mine[1] = mine[1];
    c->fp_desc = *d;
    c->fp_desc.why = NULL, c->fp_desc.counts = c->fp_desc.counts2 = NULL, c->fp_desc.blocks = NULL;
    st = check_rc(MPI_Iallreduce(c->fp_mine, c->fp_min, 2, MPI_INT64_T, MPI_MIN, c->check, &c->fp_req), name);
    c->fp_pending = st == DT_OK;
    return st;
  }
  if (c->base.timeout > 0) {
    MPI_Request req;
    st = wait_req(c, MPI_Iallreduce(mine, min, 2, MPI_INT64_T, MPI_MIN, c->check, &req), &req, name);
  } else {
    st = check_rc(MPI_Allreduce(mine, min, 2, MPI_INT64_T, MPI_MIN, c->check), name);
  }
  if (st != DT_OK) return st;
  return fp_verdict(c, d, min);
}

/* A collective that returns between agree_call and its data call settles the fingerprint
 * first (its peers wait in theirs). */
static int agreed_return(mpi_comm *c, int st) {
  if (c->fp_pending && fp_settle(c, 1) != DT_OK) return DT_ERR;
  return st;
}

/* all_reduce and reduce_scatter: the same steps around two different MPI calls (avg is
 * a sum divided afterwards). */
static int m_reduction(dt_comm *b, tc_kind kind, const void *send, void *recv, size_t count, dt_dtype dt,
                       dt_reduce_op op) {
  mpi_comm *c = (mpi_comm *)b;
  int all = kind == TC_ALL_REDUCE, nb = c->base.timeout > 0, k = (int)count;
  const char *name = all ? "all_reduce" : "reduce_scatter";
  tc_desc d = {.kind = kind, .dtype = dt, .op = op, .count = count};
  if (too_big(all ? count : count * (size_t)b->size, name) || agree_call(c, &d)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  MPI_Op o = dt_mpi_op(op, dt);
  MPI_Request req;
  int rc;
  if (all) {
    const void *s = send == recv ? MPI_IN_PLACE : send;
    rc = nb ? MPI_Iallreduce(s, recv, k, t, o, c->comm, &req) : MPI_Allreduce(s, recv, k, t, o, c->comm);
  } else {
    rc = nb ? MPI_Ireduce_scatter_block(send, recv, k, t, o, c->comm, &req)
            : MPI_Reduce_scatter_block(send, recv, k, t, o, c->comm);
  }
  int st = nb ? wait_req(c, rc, &req, name) : check_rc(rc, name);
  if (st == DT_OK && op == DT_REDUCE_AVG) dt_reduce_ops_divide(dt, recv, count, b->size);
  return st;
}

static int m_all_reduce(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op) {
  return m_reduction(b, TC_ALL_REDUCE, send, recv, count, dt, op);
}

static int m_reduce_scatter(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, dt_reduce_op op) {
  return m_reduction(b, TC_REDUCE_SCATTER, send, recv, count, dt, op);
}

/* int counts and displacements for the v-forms; NULL + error when they do not fit. */
static int *int_layout(const size_t *counts, int n, const char *name) {
  int *v = malloc(sizeof(int) * 2 * (size_t)n);
  if (!v) return dt_error("%s: out of memory", name), NULL;
  size_t off = 0;
  for (int r = 0; r < n; r++) {
    if (counts[r] > INT_MAX || off > INT_MAX) return free(v), dt_error("%s: counts exceed MPI's int range", name), NULL;
    v[r] = (int)counts[r];
    v[n + r] = (int)off;
    off += counts[r];
  }
  return v;
}

static int all_equal(const size_t *counts, int n) {
  for (int r = 1; r < n; r++)
    if (counts[r] != counts[0]) return 0;
  return 1;
}

static int m_all_gather_v(dt_comm *b, const void *send, void *recv, const size_t *counts, dt_dtype dt) {
  mpi_comm *c = (mpi_comm *)b;
  int n = b->size;
  tc_desc d = {.kind = TC_ALL_GATHER, .dtype = dt, .count = counts[b->rank]};
  if (agree_call(c, &d)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  if (all_equal(counts, n)) {
    if (too_big(counts[0] * (size_t)n, "all_gather")) return agreed_return(c, DT_ERR);
    int k = (int)counts[0];
    RUN("all_gather", MPI_Allgather(send, k, t, recv, k, t, c->comm),
        MPI_Iallgather(send, k, t, recv, k, t, c->comm, &req));
  }
  int *v = int_layout(counts, n, "all_gather");
  if (!v) return agreed_return(c, DT_ERR);
  int st;
  int k = v[b->rank];
  if (c->base.timeout > 0) {
    MPI_Request req;
    st = wait_req(c, MPI_Iallgatherv(send, k, t, recv, v, v + n, t, c->comm, &req), &req, "all_gather");
  } else {
    st = check_rc(MPI_Allgatherv(send, k, t, recv, v, v + n, t, c->comm), "all_gather");
  }
  free(v);
  return st;
}

/* DTLUA_DEBUG=collectives, all_to_all_v: does every rank expect what its peers send it?
 * (a wrong recv_splits would otherwise hang or truncate inside MPI).  Every rank gets
 * every rank's verdict, so all raise the same message, the threads backend's. */
static int debug_check_splits(mpi_comm *c, const size_t *sendcounts, const size_t *recvcounts, dt_dtype dt) {
  if (!c->debug) return DT_OK;
  int n = c->base.size;
  int64_t *in = malloc(sizeof(int64_t) * 6 * (size_t)n); /* in[n], out[n], all[4n] */
  if (!in) return dt_error("collective check: out of memory");
  int64_t *out = in + n, mine[4] = {-1, 0, 0, 0}, *all = out + n; /* {bad sender, sent, expected, my total} */
  for (int q = 0; q < n; q++) out[q] = (int64_t)sendcounts[q], mine[3] += out[q];
  MPI_Request req;
  int st = c->base.timeout > 0
               ? wait_req(c, MPI_Ialltoall(out, 1, MPI_INT64_T, in, 1, MPI_INT64_T, c->comm, &req), &req, "all_to_all")
               : check_rc(MPI_Alltoall(out, 1, MPI_INT64_T, in, 1, MPI_INT64_T, c->comm), "all_to_all");
  for (int p = 0; st == DT_OK && p < n && mine[0] < 0; p++)
    if (in[p] != (int64_t)recvcounts[p]) mine[0] = p, mine[1] = in[p], mine[2] = (int64_t)recvcounts[p];
  if (st == DT_OK) st = check_allgather(c, mine, 4, all, "all_to_all");
  if (st != DT_OK) return free(in), DT_ERR;
  for (int q = 0; q < n && st == DT_OK; q++) {
    int64_t *m = all + 4 * q;
    if (m[0] < 0) continue;
    int p = (int)m[0];
    const int *w = c->base.world_ranks;
    tc_desc dp = {.kind = TC_ALL_TO_ALL, .dtype = dt, .count = (size_t)all[4 * p + 3]};
    tc_desc dq = {.kind = TC_ALL_TO_ALL, .dtype = dt, .count = (size_t)m[3]};
    char why[128];
    snprintf(why, sizeof why, " (rank %d sends %lld elements to rank %d, which expects %lld)", w[p], (long long)m[1],
             w[q], (long long)m[2]);
    st = tc_mismatch_error(c->label, w[p], &dp, w[q], &dq, why);
  }
  free(in);
  return st;
}

static int m_all_to_all_v(dt_comm *b, const void *send, const size_t *sendcounts, void *recv,
                          const size_t *recvcounts, dt_dtype dt) {
  mpi_comm *c = (mpi_comm *)b;
  int n = b->size;
  tc_desc d = {.kind = TC_ALL_TO_ALL, .dtype = dt}; /* count: the total sent (not in the fingerprint) */
  for (int r = 0; r < n; r++) d.count += sendcounts[r];
  if (agree_call(c, &d) || debug_check_splits(c, sendcounts, recvcounts, dt)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  /* The MPI_Alltoall fast path only for the equal-count form (dt_comm_all_to_all passes one
   * array for both), which every rank calls alike: a rank whose v-counts merely happen to be
   * equal (all zero, say) must not leave for MPI_Alltoall while its peers are in Alltoallv. */
  if (sendcounts == recvcounts && all_equal(sendcounts, n)) {
    if (too_big(sendcounts[0] * (size_t)n, "all_to_all")) return agreed_return(c, DT_ERR);
    int k = (int)sendcounts[0];
    RUN("all_to_all", MPI_Alltoall(send, k, t, recv, k, t, c->comm), MPI_Ialltoall(send, k, t, recv, k, t, c->comm, &req));
  }
  int *sv = int_layout(sendcounts, n, "all_to_all"), *rv = sv ? int_layout(recvcounts, n, "all_to_all") : NULL;
  if (!rv) return free(sv), agreed_return(c, DT_ERR);
  int st;
  if (c->base.timeout > 0) {
    MPI_Request req;
    st = wait_req(c, MPI_Ialltoallv(send, sv, sv + n, t, recv, rv, rv + n, t, c->comm, &req), &req, "all_to_all");
  } else {
    st = check_rc(MPI_Alltoallv(send, sv, sv + n, t, recv, rv, rv + n, t, c->comm), "all_to_all");
  }
  free(sv), free(rv);
  return st;
}

static int m_broadcast(dt_comm *b, void *buf, size_t count, dt_dtype dt, int root) {
  mpi_comm *c = (mpi_comm *)b;
  tc_desc d = {.kind = TC_BROADCAST, .dtype = dt, .root = root, .count = count};
  if (too_big(count, "broadcast") || agree_call(c, &d)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  RUN("broadcast", MPI_Bcast(buf, (int)count, t, root, c->comm), MPI_Ibcast(buf, (int)count, t, root, c->comm, &req));
}

static int m_scatter(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  mpi_comm *c = (mpi_comm *)b;
  tc_desc d = {.kind = TC_SCATTER, .dtype = dt, .root = root, .count = count};
  if (too_big(count * (size_t)b->size, "scatter") || agree_call(c, &d)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  int k = (int)count;
  RUN("scatter", MPI_Scatter(send, k, t, recv, k, t, root, c->comm),
      MPI_Iscatter(send, k, t, recv, k, t, root, c->comm, &req));
}

static int m_gather(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  mpi_comm *c = (mpi_comm *)b;
  tc_desc d = {.kind = TC_GATHER, .dtype = dt, .root = root, .count = count};
  if (too_big(count * (size_t)b->size, "gather") || agree_call(c, &d)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  int k = (int)count;
  RUN("gather", MPI_Gather(send, k, t, recv, k, t, root, c->comm),
      MPI_Igather(send, k, t, recv, k, t, root, c->comm, &req));
}

/* What a rank in send/recv answers when a stuck rank asks (mpi_watch.c). */
static void watch_p2p(mpi_comm *c, const char *what, size_t count, dt_dtype dt, int peer) {
  char call[96];
  snprintf(call, sizeof call, "%s(%s, %zu elements, %s %d)", what, dt_dtype_name(dt), count,
           what[0] == 's' ? "dst" : "src", c->base.world_ranks[peer]);
  dt_mpi_watch_doing(c->watch, call, c->label);
}

static int m_send(dt_comm *b, const void *buf, size_t count, dt_dtype dt, int dst) {
  mpi_comm *c = (mpi_comm *)b;
  if (too_big(count, "send")) return DT_ERR;
  watch_p2p(c, "send", count, dt, dst);
  MPI_Datatype t = dt_mpi_datatype(dt);
  int tag = (int)dt; /* the dtype travels as the tag: recv checks it */
  RUN("send", MPI_Send(buf, (int)count, t, dst, tag, c->comm), MPI_Isend(buf, (int)count, t, dst, tag, c->comm, &req));
}

static int m_recv(dt_comm *b, void *buf, size_t count, dt_dtype dt, int src) {
  mpi_comm *c = (mpi_comm *)b;
  if (too_big(count, "recv")) return DT_ERR;
  watch_p2p(c, "recv", count, dt, src);
  MPI_Datatype t = dt_mpi_datatype(dt);
  MPI_Status s;
  MPI_Request req;
  int rc, cls = 0, st;
  if (c->base.timeout > 0) {
    st = wait_req_status(c, MPI_Irecv(buf, (int)count, t, src, MPI_ANY_TAG, c->comm, &req), &req, "recv", &s, &rc);
  } else {
    rc = MPI_Recv(buf, (int)count, t, src, MPI_ANY_TAG, c->comm, &s);
    st = check_rc(rc, "recv");
  }
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  if (cls == MPI_ERR_TRUNCATE)
    return dt_error("send/recv mismatch: rank %d sent more than the %zu %s elements rank %d expected",
                    b->world_ranks[src], count, dt_dtype_name(dt), b->world_ranks[b->rank]);
  if (st != DT_OK) return st;
  /* a shorter message or another dtype would leave t partly or wrongly filled */
  int bytes = 0;
  MPI_Get_count(&s, MPI_BYTE, &bytes);
  dt_dtype sent = s.MPI_TAG >= 0 && s.MPI_TAG < DT_NDTYPES ? (dt_dtype)s.MPI_TAG : dt;
  if (sent != dt || (size_t)bytes != count * dt_dtype_size(dt))
    return dt_error("send/recv mismatch: rank %d sent %zu %s elements, rank %d expected %zu %s", b->world_ranks[src],
                    (size_t)bytes / dt_dtype_size(sent), dt_dtype_name(sent), b->world_ranks[b->rank], count,
                    dt_dtype_name(dt));
  return DT_OK;
}

static int m_barrier(dt_comm *b) {
  mpi_comm *c = (mpi_comm *)b;
  tc_desc d = {.kind = TC_BARRIER};
  if (agree_call(c, &d)) return DT_ERR;
  RUN("barrier", MPI_Barrier(c->comm), MPI_Ibarrier(c->comm, &req));
}

static int m_fail(dt_comm *b, const char *why) {
  tc_desc d = {.kind = TC_ARG_ERROR, .why = why, .count = (size_t)tc_message_hash(why)};
  return agree_call((mpi_comm *)b, &d);
}

static mpi_comm *comm_wrap(MPI_Comm comm, const int *world_ranks, int debug, double timeout) {
  mpi_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  MPI_Comm_rank(comm, &c->base.rank);
  MPI_Comm_size(comm, &c->base.size);
  c->base.ops = &mpi_ops;
  c->base.backend = "mpi";
  c->base.world_ranks = malloc(sizeof(int) * (size_t)c->base.size);
  if (!c->base.world_ranks) return free(c), NULL;
  for (int r = 0; r < c->base.size; r++) c->base.world_ranks[r] = world_ranks ? world_ranks[r] : r;
  c->comm = comm;
  if (MPI_Comm_dup(comm, &c->check) != MPI_SUCCESS) return free(c->base.world_ranks), free(c), NULL;
  MPI_Comm_set_errhandler(c->check, MPI_ERRORS_RETURN);
  c->debug = debug;
  c->base.timeout = timeout; /* > 0: poll the non-blocking calls with this deadline */
  dt_comm_format_ranks(c->label, sizeof c->label, c->base.world_ranks, c->base.size);
  return c;
}

/* MPI_Comm_split of the parent: collective over it, so every rank of the parent calls
 * this with the same list (the context caches the result). */
static int m_new_group(dt_comm *b, const int *ranks, int n, dt_comm **out) {
  mpi_comm *c = (mpi_comm *)b;
  int me = b->world_ranks[b->rank], member = 0;
  for (int i = 0; i < n; i++) member |= ranks[i] == me;
  /* Ranks passing different lists would split the parent into a communicator that
   * matches nobody's list (silently wrong results): compare a checksum of the lists. */
  uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
  for (int i = 0; i < n; i++) h = (h ^ (uint64_t)ranks[i]) * 1099511628211ull;
  int64_t *all = malloc(sizeof(int64_t) * (size_t)b->size), mine = (int64_t)h;
  if (!all) return dt_error("new_group: out of memory");
  /* through the collective path: DTLUA_TIMEOUT applies (a rank that never calls
   * new_group fails the others instead of leaving them in MPI_Comm_split) */
  if (dt_comm_all_gather(b, &mine, all, 1, DT_INT64) != DT_OK) return free(all), dt_error_prefix("new_group");
  for (int r = 1; r < b->size; r++)
    if (all[r] != all[0]) {
      char buf[128];
      free(all);
      return dt_error("new_group: rank %d and rank %d passed different rank lists (this rank: %s); every rank "
                      "must call new_group with the same list", b->world_ranks[0], b->world_ranks[r],
                      dt_comm_format_ranks(buf, sizeof buf, ranks, n));
    }
  free(all);
  MPI_Comm nc;
  int rc = MPI_Comm_split(c->comm, member ? 0 : MPI_UNDEFINED, me, &nc);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "new_group");
  if (!member) return DT_OK;
  MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
  mpi_comm *g = comm_wrap(nc, ranks, c->debug, c->base.timeout);
  if (g) g->watch = c->watch;
  if (!g) return MPI_Comm_free(&nc), dt_error("new_group: out of memory");
  *out = &g->base;
  return DT_OK;
}

static void m_destroy(dt_comm *b) {
  mpi_comm *c = (mpi_comm *)b;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Comm_free(&c->comm), MPI_Comm_free(&c->check);
  if (c->owns_watch) dt_mpi_watch_free(c->watch);
  free(c->base.world_ranks);
  free(c);
}

static const dt_comm_ops mpi_ops = {
    .all_reduce = m_all_reduce,
    .all_gather_v = m_all_gather_v,
    .reduce_scatter = m_reduce_scatter,
    .all_to_all_v = m_all_to_all_v,
    .broadcast = m_broadcast,
    .scatter = m_scatter,
    .gather = m_gather,
    .send = m_send,
    .recv = m_recv,
    .barrier = m_barrier,
    .fail = m_fail,
    .new_group = m_new_group,
    .destroy = m_destroy,
};

int dt_mpi_available(void) { return 1; }

/* The rank among the processes of this host: the rank in the world's shared-memory split
 * (MPI-3), whatever launched the job (Open MPI's mpirun, MPICH's Hydra, Slurm's srun), where
 * each launcher's own variable would need knowing.  Collective over the world. */
int dt_mpi_local_rank(dt_comm *world) {
  mpi_comm *c = (mpi_comm *)world;
  MPI_Comm local;
  if (MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, world->rank, MPI_INFO_NULL, &local) != MPI_SUCCESS) return -1;
  int r = -1;
  if (MPI_Comm_rank(local, &r) != MPI_SUCCESS) r = -1;
  MPI_Comm_free(&local);
  return r;
}

/* Settings that change how collectives run must be the same on every rank, but mpirun
 * forwards the environment only to the ranks of its own host: every rank takes rank 0's
 * value (or its absence) at start-up, before anything reads them. */
static const char *const agreed_settings[] = {"DTLUA_DEBUG", "DTLUA_TIMEOUT", "DTLUA_LOG"};

static int agree_setting(MPI_Comm comm, const char *name) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  const char *v = rank == 0 ? getenv(name) : NULL;
  int len = v ? (int)strnlen(v, 4096) : -1;
  if (MPI_Bcast(&len, 1, MPI_INT, 0, comm) != MPI_SUCCESS) return dt_error("MPI: agreeing on %s failed", name);
  if (len < 0) return unsetenv(name), DT_OK;
  char buf[4097];
  if (rank == 0) memcpy(buf, v, (size_t)len);
  if (MPI_Bcast(buf, len, MPI_CHAR, 0, comm) != MPI_SUCCESS) return dt_error("MPI: agreeing on %s failed", name);
  buf[len] = 0;
  if (setenv(name, buf, 1) != 0) return dt_error("MPI: cannot set %s", name);
  return DT_OK;
}

dt_comm *dt_mpi_world_comm(int *argc, char ***argv) {
  int init = 0, threads = MPI_THREAD_SINGLE;
  MPI_Initialized(&init);
  /* serialized: the rank's async calls run on its communication thread (comm_async.c), never
   * two MPI calls of a rank at once */
  if (!init && MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &threads) != MPI_SUCCESS)
    return dt_error("MPI_Init failed"), NULL;
  if (init) MPI_Query_thread(&threads);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm comm; /* our own communicator: user MPI code cannot collide with ours */
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) return dt_error("MPI_Comm_dup failed"), NULL;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  for (size_t i = 0; i < sizeof agreed_settings / sizeof agreed_settings[0]; i++)
    if (agree_setting(comm, agreed_settings[i]) != DT_OK) return NULL;
  const char *dbg = getenv("DTLUA_DEBUG"), *to = getenv("DTLUA_TIMEOUT");
  char *end = NULL;
  double timeout = to && *to ? strtod(to, &end) : DEFAULT_TIMEOUT;
  if (to && *to && (*end || timeout != timeout)) timeout = DEFAULT_TIMEOUT; /* the launcher warns */
  mpi_comm *c = comm_wrap(comm, NULL, dbg && strstr(dbg, "collectives") != NULL, timeout);
  if (!c) return dt_error("MPI: out of memory"), NULL;
  c->base.async_inline = threads < MPI_THREAD_SERIALIZED;
  c->watch = dt_mpi_watch_new(comm);
  c->owns_watch = 1;
  if (!c->watch) return m_destroy(&c->base), dt_error("MPI: cannot create the status communicator"), NULL;
  return &c->base;
}

/* The end of a rank's program is agreed like a world collective: ranks still waiting in a
 * world collective for this one fail at once instead of hanging, and this rank waits for
 * the others to end theirs (without a deadline: they may have long to go). */
int dt_mpi_finish(dt_comm *world) {
  mpi_comm *c = (mpi_comm *)world;
  tc_desc d = {.kind = TC_FINISH};
  c->unlimited = 1;
  int st = agree_call(c, &d);
  c->unlimited = 0;
  return st;
}

void dt_mpi_finalize(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

void dt_mpi_abort(int code) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}

/* The non-blocking form of a bench collective (dt_mpi_bench_raw's "+overlapped"). */
static int bench_post(const char *coll, float *a, float *b, int count, int part, MPI_Request *req) {
  if (strcmp(coll, "all_reduce") == 0) return MPI_Iallreduce(MPI_IN_PLACE, a, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
  if (strcmp(coll, "all_gather") == 0) return MPI_Iallgather(a, part, MPI_FLOAT, b, part, MPI_FLOAT, MPI_COMM_WORLD, req);
  if (strcmp(coll, "reduce_scatter") == 0)
    return MPI_Ireduce_scatter_block(a, b, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
  if (strcmp(coll, "all_to_all") == 0) return MPI_Ialltoall(a, part, MPI_FLOAT, b, part, MPI_FLOAT, MPI_COMM_WORLD, req);
  dt_error("bench: unknown collective '%s'", coll);
  return MPI_ERR_OTHER;
}

int dt_mpi_bench_raw(const char *coll, size_t bytes, int iters, double *seconds) {
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int count = (int)(bytes / sizeof(float)), part = count / n;
  float *a = calloc((size_t)count + 1, sizeof(float)), *b = calloc((size_t)count + 1, sizeof(float));
  if (!a || !b) return free(a), free(b), dt_error("bench: out of memory");
  int rc = MPI_SUCCESS;
  /* "<coll>+fingerprint": each call preceded by the backend's fingerprint agreement (an
   * MPI_Allreduce of two int64), to price it against the bare call in the same run;
   * "<coll>+overlapped": the agreement posted beside the call (on a communicator of its own),
   * both waited together, as the backend does from FP_OVERLAP_BYTES */
  size_t base_len = strcspn(coll, "+");
  int fingerprint = strcmp(coll + base_len, "+fingerprint") == 0;
  int overlapped = strcmp(coll + base_len, "+overlapped") == 0;
  if (coll[base_len] && !fingerprint && !overlapped)
    return free(a), free(b), dt_error("bench: unknown variant '%s'", coll);
  MPI_Comm check = MPI_COMM_NULL;
  if (overlapped && MPI_Comm_dup(MPI_COMM_WORLD, &check) != MPI_SUCCESS)
    return free(a), free(b), dt_error("bench: MPI_Comm_dup failed");
  char name[32];
  snprintf(name, sizeof name, "%.*s", (int)(base_len < 31 ? base_len : 31), coll);
  coll = name;
  for (int i = -1; i < iters && rc == MPI_SUCCESS; i++) { /* i = -1: warm-up */
    if (i == 0) {
      MPI_Barrier(MPI_COMM_WORLD);
      *seconds = dt_now();
    }
    if (fingerprint) {
      int64_t fp[2] = {i, ~(int64_t)i}, min[2];
      rc = MPI_Allreduce(fp, min, 2, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    }
    if (overlapped) {
      int64_t fp[2] = {i, ~(int64_t)i}, min[2];
      MPI_Request req[2];
      rc = MPI_Iallreduce(fp, min, 2, MPI_INT64_T, MPI_MIN, check, &req[0]);
      if (rc == MPI_SUCCESS) rc = bench_post(coll, a, b, count, part, &req[1]);
      if (rc == MPI_SUCCESS) rc = MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
      continue;
    }
    if (strcmp(coll, "all_reduce") == 0) rc = MPI_Allreduce(MPI_IN_PLACE, a, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (strcmp(coll, "all_gather") == 0) rc = MPI_Allgather(a, part, MPI_FLOAT, b, part, MPI_FLOAT, MPI_COMM_WORLD);
    else if (strcmp(coll, "reduce_scatter") == 0)
      rc = MPI_Reduce_scatter_block(a, b, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (strcmp(coll, "all_to_all") == 0) rc = MPI_Alltoall(a, part, MPI_FLOAT, b, part, MPI_FLOAT, MPI_COMM_WORLD);
    else rc = dt_error("bench: unknown collective '%s'", coll) ? MPI_ERR_OTHER : MPI_ERR_OTHER;
  }
  *seconds = (dt_now() - *seconds) / iters;
  if (check != MPI_COMM_NULL) MPI_Comm_free(&check);
  free(a), free(b);
  return rc == MPI_SUCCESS ? DT_OK : mpi_fail(rc, coll);
}
