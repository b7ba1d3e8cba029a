/* The MPI backend: each collective is the matching MPI call (no emulation over
 * point-to-point).  Safe by default: before each collective the ranks agree on a
 * fingerprint of the call (through shared memory where the group's ranks share a host, else
 * by point-to-point messages on a communicator of its own; mpi_agree.c), polled against
 * DTLUA_TIMEOUT, default 600 s; on a difference the
 * full descriptions are gathered to name both calls), so that a stuck collective becomes an
 * error naming what every rank waits in (mpi_watch.c).  Once agreed, every rank of the group
 * is in the same call with the same arguments, so the data call cannot hang and runs in MPI's
 * blocking form (its non-blocking form, polled, runs 1.5-10x slower in Open MPI;
 * doc/performance.md).  DTLUA_TIMEOUT=0: no deadline (across hosts the agreement is then a
 * blocking MPI_Allreduce).  DTLUA_DEBUG=collectives gathers the full descriptions on every call instead.
 * On one host, calls from dt_mpi_shm_worth's size publish their buffers with the fingerprint
 * and move the data through process_vm_readv (mpi_shm_coll.c), without an MPI data call. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/blocks.h"
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
  dt_mpi_agree *agree; /* the fingerprint's exchange: shared memory on one host, else messages on check */
  dt_mpi_shm_coll *shm; /* the data path through process_vm_readv (one host, DTLUA_MPI_SHM), or NULL */
  char broken[512]; /* non-empty: a timeout left this group's messages unmatched */
} mpi_comm;

#define DEFAULT_TIMEOUT 600.0 /* as the threads backend */


static const dt_comm_ops mpi_ops;

static int mpi_fail(int rc, const char *name) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, s, &len);
  return dt_error("%s: MPI error: %s", name, s);
}

static int check_rc(int rc, const char *name) { return rc == MPI_SUCCESS ? DT_OK : mpi_fail(rc, name); }

static double deadline_of(const mpi_comm *c) { return c->unlimited ? 0 : dt_now() + c->base.timeout; }

/* The error of a wait past DTLUA_TIMEOUT, naming what each rank waits in; the group is
 * broken, since its pending messages would match later calls' ones. */
static int timed_out(mpi_comm *c, const char *name) {
  char who[1536] = "";
  dt_mpi_watch_ask_all(c->watch, who, sizeof who);
  dt_error("%s: timed out after %g s in group %s (DTLUA_TIMEOUT); what each rank waits in:%s", name, c->base.timeout,
           c->label, who);
  snprintf(c->broken, sizeof c->broken, "%s", dt_error_message());
  return DT_ERR;
}

/* Polls req (rc: the code of the call that posted it) until done (filling status, or
 * NULL) or the timeout; *mpi_rc (when given) gets the failing MPI code. */
static int wait_req_status(mpi_comm *c, int rc, MPI_Request *req, const char *name, MPI_Status *status, int *mpi_rc) {
  int late = 0;
  if (rc == MPI_SUCCESS) rc = dt_mpi_poll(1, req, status, c->watch, deadline_of(c), &late);
  if (mpi_rc) *mpi_rc = rc;
  if (rc != MPI_SUCCESS) return mpi_fail(rc, name);
  return late ? timed_out(c, name) : DT_OK;
}

static int wait_req(mpi_comm *c, int rc, MPI_Request *req, const char *name) {
  return wait_req_status(c, rc, req, name, NULL, NULL);
}

/* st = an MPI call that may wait on its peers (the checks' own calls, all_to_all_v's data,
 * send): polled in its non-blocking form against DTLUA_TIMEOUT, or blocking with
 * DTLUA_TIMEOUT=0. */
#define CHECKED(st, name, BLOCKING, NONBLOCKING)                                  \
  do {                                                                            \
    MPI_Request req;                                                              \
    st = c->base.timeout > 0 ? wait_req(c, (NONBLOCKING), &req, name) : check_rc((BLOCKING), name); \
  } while (0)

static int too_big(size_t n, const char *name) {
  if (n > INT_MAX) return dt_error("%s: %zu elements exceed MPI's int counts", name, n);
  return DT_OK;
}

/* MPI_Allgather of k int64 per rank for the checks below, under DTLUA_TIMEOUT like the
 * collective it checks (name). */
static int check_allgather(mpi_comm *c, const int64_t *mine, int k, int64_t *all, const char *name) {
  int st;
  CHECKED(st, name, MPI_Allgather(mine, k, MPI_INT64_T, all, k, MPI_INT64_T, c->check),
          MPI_Iallgather(mine, k, MPI_INT64_T, all, k, MPI_INT64_T, c->check, &req));
  return st;
}

/* Rooted at root: the message of the rank whose arguments failed, raised by every rank. */
static int raise_arg_error(mpi_comm *c, const tc_desc *d, int root, int all_same) {
  char why[512] = "";
  if (c->base.rank == root) snprintf(why, sizeof why, "%s", d->why ? d->why : "?");
  int st;
  CHECKED(st, "collective", MPI_Bcast(why, sizeof why, MPI_CHAR, root, c->check),
          MPI_Ibcast(why, sizeof why, MPI_CHAR, root, c->check, &req));
  if (st != DT_OK) return st;
  why[sizeof why - 1] = 0;
  return tc_arg_error(c->label, c->base.world_ranks[root], why, all_same);
}

/* Why two calls with equal descriptions differ in their size tables (agree_call's table). */
static const char *table_mismatch(const tc_desc *d, int64_t a, int64_t b) {
  if (d->kind != TC_ALL_TO_ALL) return " (different size tables)";
  if (a >= 0 && b >= 0) return " (different split sizes)";
  return " (all_to_all on one rank, all_to_all_v on the other: under MPI every rank calls the same form)";
}

#define NF 6 /* the fields of a call gathered by the full check */

/* Every rank's (kind, dtype, op, root, count, table), compared: the ranks that finished their
 * program, a rank whose arguments failed, then calls that differ. */
static int full_check(mpi_comm *c, const tc_desc *d, int64_t table) {
  int n = c->base.size;
  int64_t mine[NF] = {d->kind, d->dtype, d->op, d->root, (int64_t)d->count, table};
  int64_t *all = malloc(sizeof(int64_t) * NF * (size_t)n);
  if (!all) return dt_error("collective check: out of memory");
  if (check_allgather(c, mine, NF, all, tc_kind_name(d->kind)) != DT_OK) return free(all), DT_ERR;
  /* ranks at the end of their program (dt_mpi_finish) against ranks in a collective:
   * the threads backend's message */
  int *fin = malloc(sizeof(int) * (size_t)n), nfin = 0;
  for (int r = 0; fin && r < n; r++)
    if (all[NF * r] == TC_FINISH) fin[nfin++] = c->base.world_ranks[r];
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
    if (all[NF * r] == TC_ARG_ERROR) { /* count: the hash of its message */
      int all_same = 1;
      for (int q = 0; q < n && all_same; q++) all_same = all[NF * q] == TC_ARG_ERROR && all[NF * q + 4] == all[NF * r + 4];
      return free(all), raise_arg_error(c, d, r, all_same);
    }
  tc_desc d0 = {.kind = (tc_kind)all[0], .dtype = (dt_dtype)all[1], .op = (dt_reduce_op)all[2], .root = (int)all[3],
                .count = (size_t)all[4]};
  int st = DT_OK;
  for (int r = 1; r < n && st == DT_OK; r++) {
    int64_t *m = all + NF * r;
    tc_desc dr = {.kind = (tc_kind)m[0], .dtype = (dt_dtype)m[1], .op = (dt_reduce_op)m[2], .root = (int)m[3],
                  .count = (size_t)m[4]};
    if (!tc_same_call(&d0, &dr)) st = tc_mismatch_error(c->label, c->base.world_ranks[0], &d0, c->base.world_ranks[r], &dr, "");
    else if (m[5] != all[5])
      st = tc_mismatch_error(c->label, c->base.world_ranks[0], &d0, c->base.world_ranks[r], &dr, table_mismatch(d, all[5], m[5]));
  }
  free(all);
  return st;
}

/* Before each collective: the ranks agree on tc_fingerprint(d) and table (what the ranks' size
 * tables must agree on, beyond d: 0 where there are none): whether every rank of the group
 * has the same hash (dt_mpi_agree_same; without a deadline and across hosts, the minimum of the
 * hash and of its complement by MPI_Allreduce, equal to (h, ~h) exactly when every rank has
 * h).  Every rank reaches the same verdict, so on a difference all go to the full check
 * together, which names the calls; the group stays usable (no data call went out).  On DT_OK
 * every rank of the group is in this very call: its data call cannot be left unmatched.
 * shm: the call runs on the shared-memory data path, publishing a and b with the hash (the
 * agreement then is that path's first synchronisation); the same choice on every rank of
 * calls with equal fingerprints, and either way both read the same slots. */
static int agree_pub(mpi_comm *c, const tc_desc *d, int64_t table, int shm, const void *a, const void *b) {
  dt_mpi_watch_doing(c->watch, d, c->label);
  const char *name = tc_kind_name(d->kind);
  if (c->broken[0]) return dt_error("%s: group %s is broken by an earlier failure: %s", name, c->label, c->broken);
  if (c->debug) { /* the full check; the shared-memory path still publishes its buffers after it */
    int st = full_check(c, d, table);
    if (st != DT_OK || !shm) return st;
  }
  int64_t h = (int64_t)(tc_fingerprint(d, c->label) ^ ((uint64_t)table * 0x9E3779B97F4A7C15ull)), v[2],
          mine[2] = {h, ~h};
  int same = 0;
  if (c->base.timeout > 0 || dt_mpi_agree_shared(c->agree)) {
    double deadline = c->base.timeout > 0 ? deadline_of(c) : 0;
    int late = 0, rc = shm ? dt_mpi_shm_agree_publish(dt_mpi_agree_shm(c->agree), h, a, b, &same, c->watch, deadline, &late)
                           : dt_mpi_agree_same(c->agree, h, &same, c->watch, deadline, &late);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, name);
    if (late) return timed_out(c, name);
  } else {
    if (check_rc(MPI_Allreduce(mine, v, 2, MPI_INT64_T, MPI_MIN, c->check), name) != DT_OK) return DT_ERR;
    same = v[0] == h && v[1] == ~h;
  }
  if (same && d->kind != TC_ARG_ERROR) return DT_OK;
  int st = full_check(c, d, table);
  if (st == DT_OK) /* equal descriptions but different fingerprints: the same group label differs */
    st = dt_error("%s: collective mismatch in group %s (different fingerprints, equal calls)", name, c->label);
  return st;
}

static int agree_call(mpi_comm *c, const tc_desc *d, int64_t table) { return agree_pub(c, d, table, 0, NULL, NULL); }

/* Whether this call takes the shared-memory path: a function of the call's fingerprinted
 * arguments only, so ranks that agree take the same path. */
static int use_shm(const mpi_comm *c, tc_kind kind, size_t bytes) {
  return dt_mpi_shm_worth(c->shm, kind, bytes);
}

static dt_mpi_shm_run shm_run(mpi_comm *c) {
  return (dt_mpi_shm_run){.w = c->watch, .deadline = c->base.timeout > 0 ? deadline_of(c) : 0, .failed_rank = -1};
}

/* The outcome of a shared-memory data phase (failed: its return) as the backend's errors. */
static int shm_outcome(mpi_comm *c, const char *name, int failed, const dt_mpi_shm_run *run) {
  if (!failed) return DT_OK;
  if (run->mpi_rc != MPI_SUCCESS) return mpi_fail(run->mpi_rc, name);
  if (run->timed_out) return timed_out(c, name);
  int r = c->base.world_ranks[run->failed_rank];
  if (run->err > 0)
    return dt_error("%s: reading rank %d's buffer in group %s failed (%s: %s); the output is incomplete", name, r,
                    c->label, run->err == ENOMEM ? "scratch" : "process_vm_readv", strerror(run->err));
  return dt_error("%s: rank %d of group %s could not read its peers' buffers (process_vm_readv); the output is "
                  "incomplete", name, r, c->label);
}

/* all_reduce and reduce_scatter: the same steps around two different MPI calls (avg is
 * a sum divided afterwards). */
static int m_reduction(dt_comm *b, tc_kind kind, const void *send, void *recv, size_t count, dt_dtype dt,
                       dt_reduce_op op) {
  mpi_comm *c = (mpi_comm *)b;
  int all = kind == TC_ALL_REDUCE, k = (int)count;
  const char *name = all ? "all_reduce" : "reduce_scatter";
  tc_desc d = {.kind = kind, .dtype = dt, .op = op, .count = count};
  if (too_big(all ? count : count * (size_t)b->size, name)) return DT_ERR;
  if (use_shm(c, kind, count * dt_dtype_size(dt) * (all ? 1 : (size_t)b->size))) {
    if (agree_pub(c, &d, 0, 1, send, recv)) return DT_ERR;
    dt_mpi_shm_run run = shm_run(c);
    return shm_outcome(c, name, all ? dt_mpi_shm_all_reduce(c->shm, recv, count, dt, op, &run)
                                    : dt_mpi_shm_reduce_scatter(c->shm, recv, count, dt, op, &run), &run);
  }
  if (agree_call(c, &d, 0)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  MPI_Op o = dt_mpi_op(op, dt);
  int rc = all ? MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, k, t, o, c->comm)
               : MPI_Reduce_scatter_block(send, recv, k, t, o, c->comm);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, name);
  if (op == DT_REDUCE_AVG) dt_reduce_ops_divide(dt, recv, count, b->size);
  return DT_OK;
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

/* A hash of a size table (agree_call's table). */
static int64_t table_hash(const size_t *counts, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int r = 0; r < n; r++) h = (h ^ (uint64_t)counts[r]) * 1099511628211ull;
  return (int64_t)(h >> 1); /* >= 0 */
}

/* Every rank passes the same table (in the fingerprint), so every rank takes the same branch. */
static int m_all_gather_v(dt_comm *b, const void *send, void *recv, const size_t *counts, dt_dtype dt) {
  mpi_comm *c = (mpi_comm *)b;
  int n = b->size;
  tc_desc d = {.kind = TC_ALL_GATHER, .dtype = dt, .count = counts[b->rank]};
  MPI_Datatype t = dt_mpi_datatype(dt);
  size_t total = 0;
  for (int r = 0; r < n; r++) total += counts[r];
  if (use_shm(c, TC_ALL_GATHER, total * dt_dtype_size(dt))) {
    if (agree_pub(c, &d, table_hash(counts, n), 1, send, recv)) return DT_ERR;
    dt_mpi_shm_run run = shm_run(c);
    return shm_outcome(c, "all_gather", dt_mpi_shm_all_gather(c->shm, recv, counts, dt_dtype_size(dt), &run), &run);
  }
  if (all_equal(counts, n)) {
    int k = (int)counts[0];
    if (too_big(counts[0] * (size_t)n, "all_gather") || agree_call(c, &d, table_hash(counts, n))) return DT_ERR;
    return check_rc(MPI_Allgather(send, k, t, recv, k, t, c->comm), "all_gather");
  }
  int *v = int_layout(counts, n, "all_gather");
  if (!v) return DT_ERR;
  int st = agree_call(c, &d, table_hash(counts, n));
  if (st == DT_OK) st = check_rc(MPI_Allgatherv(send, v[b->rank], t, recv, v, v + n, t, c->comm), "all_gather");
  free(v);
  return st;
}

/* all_gather into strided blocks: on one host's shared-memory path each peer's elements are
 * read straight into their rows; elsewhere through all_gather_v as the front does for backends
 * without the form.  The fingerprint is all_gather_v's (the same table), so every rank takes
 * the same branch. */
static int m_all_gather_blocks(dt_comm *b, const void *send, void *recv, const dt_comm_block *blocks, dt_dtype dt) {
  mpi_comm *c = (mpi_comm *)b;
  int n = b->size;
  size_t esz = dt_dtype_size(dt), total = 0;
  for (int r = 0; r < n; r++) total += dt_comm_block_numel(&blocks[r]);
  if (!use_shm(c, TC_ALL_GATHER, total * esz)) return dt_comm_all_gather_through_v(b, send, recv, blocks, dt, m_all_gather_v);
  size_t *counts = malloc(sizeof(size_t) * (size_t)n);
  if (!counts) return dt_error("all_gather: out of memory");
  dt_comm_blocks_counts(blocks, n, counts);
  tc_desc d = {.kind = TC_ALL_GATHER, .dtype = dt, .count = counts[b->rank]};
  int st = agree_pub(c, &d, table_hash(counts, n), 1, send, recv);
  free(counts);
  if (st != DT_OK) return st;
  dt_mpi_shm_run run = shm_run(c);
  return shm_outcome(c, "all_gather", dt_mpi_shm_all_gather_blocks(c->shm, recv, blocks, esz, &run), &run);
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
  int st;
  CHECKED(st, "all_to_all", MPI_Alltoall(out, 1, MPI_INT64_T, in, 1, MPI_INT64_T, c->comm),
          MPI_Ialltoall(out, 1, MPI_INT64_T, in, 1, MPI_INT64_T, c->comm, &req));
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

/* The equal form (dt_comm_all_to_all passes one table for both directions) agrees on its split
 * size and runs MPI_Alltoall, blocking.  The v-form agrees only on being the v-form: the ranks'
 * tables must match across ranks (what p sends q, q expects from p), which a fingerprint cannot
 * see, so MPI_Ialltoallv runs polled against the timeout (a mismatch may hang in MPI; the
 * timeout, or DTLUA_DEBUG=collectives beforehand, names it).  A rank whose v-tables merely
 * happen to be equal stays in the v-form with its peers. */
static int m_all_to_all_v(dt_comm *b, const void *send, const size_t *sendcounts, void *recv,
                          const size_t *recvcounts, dt_dtype dt) {
  mpi_comm *c = (mpi_comm *)b;
  int n = b->size;
  tc_desc d = {.kind = TC_ALL_TO_ALL, .dtype = dt}; /* count: the total sent (not in the fingerprint) */
  for (int r = 0; r < n; r++) d.count += sendcounts[r];
  MPI_Datatype t = dt_mpi_datatype(dt);
  if (sendcounts == recvcounts && all_equal(sendcounts, n)) {
    int k = (int)sendcounts[0];
    if (use_shm(c, TC_ALL_TO_ALL, d.count * dt_dtype_size(dt))) {
      if (agree_pub(c, &d, (int64_t)sendcounts[0], 1, send, recv) || debug_check_splits(c, sendcounts, recvcounts, dt))
        return DT_ERR;
      dt_mpi_shm_run run = shm_run(c);
      return shm_outcome(c, "all_to_all", dt_mpi_shm_all_to_all(c->shm, recv, sendcounts[0], dt_dtype_size(dt), &run),
                         &run);
    }
    if (too_big(sendcounts[0] * (size_t)n, "all_to_all") || agree_call(c, &d, (int64_t)sendcounts[0]) ||
        debug_check_splits(c, sendcounts, recvcounts, dt))
      return DT_ERR;
    return check_rc(MPI_Alltoall(send, k, t, recv, k, t, c->comm), "all_to_all");
  }
  int *sv = int_layout(sendcounts, n, "all_to_all"), *rv = sv ? int_layout(recvcounts, n, "all_to_all") : NULL;
  if (!rv) return free(sv), DT_ERR;
  int st = agree_call(c, &d, -1);
  if (st == DT_OK) st = debug_check_splits(c, sendcounts, recvcounts, dt);
  if (st == DT_OK)
    CHECKED(st, "all_to_all", MPI_Alltoallv(send, sv, sv + n, t, recv, rv, rv + n, t, c->comm),
            MPI_Ialltoallv(send, sv, sv + n, t, recv, rv, rv + n, t, c->comm, &req));
  free(sv), free(rv);
  return st;
}

static int m_broadcast(dt_comm *b, void *buf, size_t count, dt_dtype dt, int root) {
  mpi_comm *c = (mpi_comm *)b;
  tc_desc d = {.kind = TC_BROADCAST, .dtype = dt, .root = root, .count = count};
  if (use_shm(c, TC_BROADCAST, count * dt_dtype_size(dt))) {
    if (agree_pub(c, &d, 0, 1, buf, NULL)) return DT_ERR;
    dt_mpi_shm_run run = shm_run(c);
    return shm_outcome(c, "broadcast", dt_mpi_shm_broadcast(c->shm, buf, count * dt_dtype_size(dt), root, &run), &run);
  }
  if (too_big(count, "broadcast") || agree_call(c, &d, 0)) return DT_ERR;
  return check_rc(MPI_Bcast(buf, (int)count, dt_mpi_datatype(dt), root, c->comm), "broadcast");
}

static int m_scatter(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  mpi_comm *c = (mpi_comm *)b;
  tc_desc d = {.kind = TC_SCATTER, .dtype = dt, .root = root, .count = count};
  if (too_big(count * (size_t)b->size, "scatter") || agree_call(c, &d, 0)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  int k = (int)count;
  return check_rc(MPI_Scatter(send, k, t, recv, k, t, root, c->comm), "scatter");
}

static int m_gather(dt_comm *b, const void *send, void *recv, size_t count, dt_dtype dt, int root) {
  mpi_comm *c = (mpi_comm *)b;
  tc_desc d = {.kind = TC_GATHER, .dtype = dt, .root = root, .count = count};
  if (too_big(count * (size_t)b->size, "gather") || agree_call(c, &d, 0)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  int k = (int)count;
  return check_rc(MPI_Gather(send, k, t, recv, k, t, root, c->comm), "gather");
}

/* Before send/recv: what this rank answers when a stuck rank asks (mpi_watch.c), and the
 * group's state. */
static int p2p_start(mpi_comm *c, const char *what, size_t count, dt_dtype dt, int peer) {
  dt_mpi_watch_doing_p2p(c->watch, what[0] == 's', count, dt, c->base.world_ranks[peer], c->label);
  if (too_big(count, what)) return DT_ERR;
  if (c->broken[0]) return dt_error("%s: group %s is broken by an earlier failure: %s", what, c->label, c->broken);
  return DT_OK;
}

/* send/recv have no fingerprint: their non-blocking form, polled against the timeout (which
 * costs nothing beside the blocking one for point-to-point messages). */
static int m_send(dt_comm *b, const void *buf, size_t count, dt_dtype dt, int dst) {
  mpi_comm *c = (mpi_comm *)b;
  if (p2p_start(c, "send", count, dt, dst)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  int tag = (int)dt; /* the dtype travels as the tag: recv checks it */
  int st;
  CHECKED(st, "send", MPI_Send(buf, (int)count, t, dst, tag, c->comm), MPI_Isend(buf, (int)count, t, dst, tag, c->comm, &req));
  return st;
}

static int m_recv(dt_comm *b, void *buf, size_t count, dt_dtype dt, int src) {
  mpi_comm *c = (mpi_comm *)b;
  if (p2p_start(c, "recv", count, dt, src)) return DT_ERR;
  MPI_Datatype t = dt_mpi_datatype(dt);
  MPI_Status s;
  MPI_Request req;
  int rc, cls = 0, st;
  if (c->base.timeout > 0) {
    st = wait_req_status(c, MPI_Irecv(buf, (int)count, t, src, MPI_ANY_TAG, c->comm, &req), &req, "recv", &s, &rc);
    /* timed out: the receive must not land in buf later (unmatched, it cancels at once) */
    if (st != DT_OK && rc == MPI_SUCCESS && req != MPI_REQUEST_NULL && MPI_Cancel(&req) == MPI_SUCCESS)
      MPI_Wait(&req, MPI_STATUS_IGNORE);
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
  return agree_call(c, &d, 0); /* the agreement is a barrier: every rank hears from every rank */
}

static int m_fail(dt_comm *b, const char *why) {
  tc_desc d = {.kind = TC_ARG_ERROR, .why = why, .count = (size_t)tc_message_hash(why)};
  return agree_call((mpi_comm *)b, &d, 0);
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
  c->agree = dt_mpi_agree_new(c->check, 1);
  if (!c->agree) return MPI_Comm_free(&c->check), free(c->base.world_ranks), free(c), NULL;
  dt_mpi_shm_agree *sa = dt_mpi_agree_shm(c->agree); /* one host: the shared-memory data path */
  if (sa) c->shm = dt_mpi_shm_coll_new(sa, c->check);
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
  dt_mpi_shm_coll_free(c->shm);
  dt_mpi_agree_free(c->agree, 0);
  if (c->owns_watch) dt_mpi_watch_free(c->watch);
  free(c->base.world_ranks);
  free(c);
}

static const dt_comm_ops mpi_ops = {
    .all_reduce = m_all_reduce,
    .all_gather_v = m_all_gather_v,
    .all_gather_blocks = m_all_gather_blocks,
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
static const char *const agreed_settings[] = {"DTLUA_DEBUG", "DTLUA_TIMEOUT", "DTLUA_LOG", "DTLUA_MPI_SHM"};

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
  int st = agree_call(c, &d, 0);
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
