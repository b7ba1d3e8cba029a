/* The threads backend: the world shared by N rank threads of one process, its groups
 * (one shared state per rank list, found in a registry), and the entry/exit barriers with
 * abort, timeout and exited-peer checks.  The collectives themselves: threads_ops.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/threads_impl.h"

static tc_group *group_new(dt_threads_world *w, const int *ranks, int n) {
  tc_group *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->world = w;
  g->size = n;
  g->world_ranks = malloc(sizeof(int) * (size_t)n);
  g->members = aligned_alloc(64, sizeof(tc_member) * (size_t)n);
  g->boxes = aligned_alloc(64, sizeof(tc_mailbox) * (size_t)n * (size_t)n);
  if (!g->world_ranks || !g->members || !g->boxes) {
    free(g->world_ranks), free(g->members), free(g->boxes), free(g);
    return NULL;
  }
  memcpy(g->world_ranks, ranks, sizeof(int) * (size_t)n);
  memset(g->members, 0, sizeof(tc_member) * (size_t)n);
  memset(g->boxes, 0, sizeof(tc_mailbox) * (size_t)n * (size_t)n);
  dt_comm_format_ranks(g->label, sizeof g->label, ranks, n);
  return g;
}

static void group_free(tc_group *g) {
  free(g->world_ranks);
  free(g->members);
  free(g->boxes);
  free(g);
}

tc_group *tc_group_lookup(dt_threads_world *w, const int *ranks, int n, int repl) {
  pthread_mutex_lock(&w->mu);
  tc_group *g;
  for (g = w->groups; g; g = g->next)
    if (g->size == n && g->repl == repl && memcmp(g->world_ranks, ranks, sizeof(int) * (size_t)n) == 0) break;
  if (!g && (g = group_new(w, ranks, n))) {
    g->repl = repl;
    g->next = w->groups;
    w->groups = g;
  }
  pthread_mutex_unlock(&w->mu);
  return g;
}

dt_threads_world *dt_threads_world_new(int size, double timeout_s) {
  if (size < 1) return dt_error("threads world: size must be >= 1, got %d", size), NULL;
  dt_threads_world *w = calloc(1, sizeof *w);
  if (!w) return dt_error("threads world: out of memory"), NULL;
  w->size = size;
  w->timeout = timeout_s;
  pthread_mutex_init(&w->mu, NULL);
  w->exited = calloc((size_t)size, sizeof *w->exited);
  w->line_done = calloc((size_t)size, sizeof *w->line_done);
  w->failed_out = calloc((size_t)size, sizeof *w->failed_out);
  w->waiting_in = calloc((size_t)size, sizeof *w->waiting_in);
  w->waiting_seq = calloc((size_t)size, sizeof *w->waiting_seq);
  int *all = malloc(sizeof(int) * (size_t)size);
  if (!w->exited || !w->line_done || !w->failed_out || !w->waiting_in || !w->waiting_seq || !all) {
    free(all), dt_threads_world_free(w);
    return dt_error("threads world: out of memory"), NULL;
  }
  for (int i = 0; i < size; i++) all[i] = i;
  tc_group *g = tc_group_lookup(w, all, size, 0);
  free(all);
  if (!g) return dt_threads_world_free(w), dt_error("threads world: out of memory"), NULL;
  return w;
}

void dt_threads_world_free(dt_threads_world *w) {
  if (!w) return;
  for (tc_group *g = w->groups, *next; g; g = next) {
    next = g->next;
    group_free(g);
  }
  free(w->exited);
  free(w->line_done);
  free(w->failed_out);
  free(w->waiting_in);
  free(w->waiting_seq);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

void tc_wake_everyone(dt_threads_world *w) {
  pthread_mutex_lock(&w->mu);
  for (tc_group *g = w->groups; g; g = g->next) {
    dt_spin_wake_all(&g->gen);
    for (int i = 0; i < g->size * g->size; i++) {
      dt_spin_wake_all(&g->boxes[i].posted);
      dt_spin_wake_all(&g->boxes[i].done);
    }
  }
  pthread_mutex_unlock(&w->mu);
}

void dt_threads_world_abort(dt_threads_world *w, const char *reason) {
  pthread_mutex_lock(&w->mu);
  if (!atomic_load(&w->aborted)) snprintf(w->reason, sizeof w->reason, "%s", reason);
  atomic_store(&w->aborted, 1);
  pthread_mutex_unlock(&w->mu);
  tc_wake_everyone(w);
}

void dt_threads_world_rank_exited(dt_threads_world *w, int rank) {
  if (rank >= 0 && rank < w->size) atomic_store(&w->exited[rank], 1);
  tc_wake_everyone(w);
}

tc_comm *tc_comm_new(tc_group *g, int rank) {
  tc_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->base.ops = &dt_threads_ops;
  c->base.backend = "threads";
  c->base.rank = rank;
  c->base.size = g->size;
  c->base.timeout = g->world->timeout;
  c->base.world_ranks = malloc(sizeof(int) * (size_t)g->size);
  c->send_seq = calloc((size_t)g->size, sizeof(unsigned));
  c->recv_seq = calloc((size_t)g->size, sizeof(unsigned));
  if (!c->base.world_ranks || !c->send_seq || !c->recv_seq) {
    free(c->base.world_ranks), free(c->send_seq), free(c->recv_seq), free(c);
    return NULL;
  }
  memcpy(c->base.world_ranks, g->world_ranks, sizeof(int) * (size_t)g->size);
  c->g = g;
  c->epoch = atomic_load(&g->epoch);
  c->seq = atomic_load(&g->members[rank].entered);
  return c;
}

dt_comm *dt_threads_world_comm(dt_threads_world *w, int rank) {
  if (rank < 0 || rank >= w->size) return dt_error("threads world: rank %d out of range", rank), NULL;
  tc_group *g = w->groups;
  while (g->next) g = g->next; /* the world group was registered first */
  tc_comm *c = tc_comm_new(g, rank);
  return c ? &c->base : (dt_error("threads world: out of memory"), NULL);
}

int tc_new_group_impl(dt_comm *base, const int *ranks, int n, dt_comm **out) {
  tc_comm *c = (tc_comm *)base;
  int me = c->g->world_ranks[base->rank], r = -1;
  for (int i = 0; i < n; i++)
    if (ranks[i] == me) r = i;
  if (r < 0) return DT_OK; /* not a member: no communicator */
  tc_group *g = tc_group_lookup(c->g->world, ranks, n, 0);
  tc_comm *nc = g ? tc_comm_new(g, r) : NULL;
  if (!nc) return dt_error("new_group: out of memory");
  *out = &nc->base;
  return DT_OK;
}

void tc_destroy_impl(dt_comm *base) {
  tc_comm *c = (tc_comm *)base;
  free(c->base.world_ranks);
  free(c->send_seq);
  free(c->recv_seq);
  free(c);
}

void tc_resync(tc_comm *c) {
  c->epoch = atomic_load(&c->g->epoch);
  c->seq = 0;
  memset(c->send_seq, 0, sizeof(unsigned) * (size_t)c->g->size);
  memset(c->recv_seq, 0, sizeof(unsigned) * (size_t)c->g->size);
}

/* ---- waiting with failure checks ---- */
typedef struct stop_ctx {
  tc_comm *c;
  const char *name;
  int peer;
  double start;
} stop_ctx;

void tc_break_group(tc_group *g) {
  pthread_mutex_lock(&g->world->mu);
  if (!atomic_load(&g->broken)) snprintf(g->why, sizeof g->why, "%s", dt_error_message());
  atomic_store(&g->broken, 1);
  pthread_mutex_unlock(&g->world->mu);
}

/* Missing member p (a world rank) waits in the entry of a collective on another group that
 * has this rank as a member and that this rank has not entered: neither call can complete
 * (collectives on different groups).  Sets the error, breaks both groups and returns 1. */
static int crossed_groups(stop_ctx *s, int p) {
  tc_group *g = s->c->g, *g2 = atomic_load(&g->world->waiting_in[p]);
  if (!g2 || g2 == g || g2->repl) return 0;
  unsigned seq = atomic_load(&g->world->waiting_seq[p]);
  if (atomic_load(&g->world->waiting_in[p]) != g2) return 0; /* it moved on meanwhile */
  int me = g->world_ranks[s->c->base.rank], mine = -1, theirs = -1;
  for (int r = 0; r < g2->size; r++) {
    if (g2->world_ranks[r] == me) mine = r;
    if (g2->world_ranks[r] == p) theirs = r;
  }
  if (mine < 0 || theirs < 0 || atomic_load(&g2->members[mine].entered) >= seq) return 0;
  char call[160];
  tc_describe(call, sizeof call, &g2->members[theirs].d[seq & 1]);
  dt_error("%s: in group %s, rank %d waits in %s on group %s instead, which waits for rank %d: collectives "
           "called on different groups", s->name, g->label, p, call, g2->label, me);
  tc_break_group(g);
  tc_break_group(g2);
  return 1;
}

static int stop_check(void *arg) {
  stop_ctx *s = arg;
  tc_group *g = s->c->g;
  dt_threads_world *w = g->world;
  if (atomic_load(&w->aborted)) {
    pthread_mutex_lock(&w->mu);
    dt_error("%s: aborted: %s", s->name, w->reason);
    pthread_mutex_unlock(&w->mu);
    return 1;
  }
  if (atomic_load(&g->broken)) {
    pthread_mutex_lock(&w->mu);
    dt_error("%s: group %s is broken by an earlier failure: %s", s->name, g->label, g->why);
    pthread_mutex_unlock(&w->mu);
    return 2;
  }
  if (!g->repl && atomic_load(&w->interrupted)) {
    dt_error("%s: interrupted!", s->name);
    return 5;
  }
  /* who are we waiting for? p2p: the peer; collectives: members that have not entered.
   * Named: those that ended (program or line) on their own; a rank still running is only
   * late, and one that failed out of a wait failed because of a peer (it is no early end). */
  char ended[256];
  int nmiss = 0, nend = 0, nfailed = 0, list[64] = {0}, ends[64] = {0}, fails[64] = {0};
  for (int r = 0; r < g->size && nmiss < 64; r++) {
    int waiting = s->peer >= 0 ? r == s->peer : atomic_load(&g->members[r].entered) < s->c->seq;
    if (!waiting) continue;
    int p = g->world_ranks[r];
    list[nmiss++] = p;
    if (!atomic_load(&w->exited[p]) && (g->repl || !atomic_load(&w->line_done[p]))) continue;
    if (atomic_load(&w->failed_out[p])) fails[nfailed++] = p;
    else ends[nend++] = p;
  }
  for (int i = 0; s->peer < 0 && !g->repl && i < nmiss; i++)
    if (crossed_groups(s, list[i])) return 6;
  dt_comm_format_ranks(ended, sizeof ended, nend ? ends : fails, nend ? nend : nfailed);
  if (nend) {
    int program = 0; /* the program's end wins over the line's: the REPL is not running then */
    for (int i = 0; i < nend; i++) program |= atomic_load(&w->exited[ends[i]]);
    dt_error("%s: in group %s, rank(s) %s finished %s without joining it", s->name, g->label, ended,
             program ? "their program" : "the line");
    tc_break_group(g);
    return 3;
  }
  if (nfailed) { /* their failure broke a group or the world: that cause, once it is visible */
    if (atomic_load(&w->aborted) || atomic_load(&g->broken)) return 0;
    dt_error("%s: in group %s, rank(s) %s failed in another collective without joining it", s->name,
             g->label, ended);
    tc_break_group(g);
    return 3;
  }
  double now = dt_now();
  if (s->start == 0) s->start = now;
  double limit = s->c->base.timeout;
  if (limit > 0 && now - s->start > limit) {
    char missing[256];
    dt_comm_format_ranks(missing, sizeof missing, list, nmiss);
    if (nmiss)
      dt_error("%s: timed out after %g s in group %s: rank(s) %s did not arrive (DTLUA_TIMEOUT)", s->name, limit,
               g->label, missing);
    else
      dt_error("%s: timed out after %g s in group %s (DTLUA_TIMEOUT)", s->name, limit, g->label);
    tc_break_group(g);
    return 4;
  }
  return 0;
}

/* This rank fails because of a peer (or the world): its end is not an early end. */
static void mark_failed_out(tc_comm *c) {
  atomic_store(&c->g->world->failed_out[c->g->world_ranks[c->base.rank]], 1);
}

int tc_wait(tc_comm *c, dt_spin_word *w, unsigned target, const char *name, int peer) {
  stop_ctx s = {c, name, peer, 0};
  if (!dt_spin_wait_eq(w, target, stop_check, &s)) return DT_OK;
  mark_failed_out(c);
  return DT_ERR;
}

static int group_barrier(tc_comm *c, const char *name) {
  tc_group *g = c->g;
  unsigned gen = atomic_load(&g->gen.v);
  if (atomic_fetch_add(&g->arrived, 1) + 1 == (unsigned)g->size) {
    atomic_store(&g->arrived, 0);
    dt_spin_increment(&g->gen);
    return DT_OK;
  }
  return tc_wait(c, &g->gen, gen + 1, name, -1);
}

int tc_enter(tc_comm *c, const tc_desc *d, const char *name) {
  tc_group *g = c->g;
  tc_sync(c);
  if (atomic_load(&g->world->aborted) || atomic_load(&g->broken)) {
    stop_ctx s = {c, name, -1, 0};
    stop_check(&s);
    mark_failed_out(c);
    return DT_ERR;
  }
  c->seq++;
  g->members[c->base.rank].d[c->seq & 1] = *d;
  atomic_store(&g->members[c->base.rank].entered, c->seq);
  int me = g->world_ranks[c->base.rank]; /* published for crossed_groups() of the peers */
  atomic_store(&g->world->waiting_seq[me], c->seq);
  atomic_store(&g->world->waiting_in[me], g);
  int st = group_barrier(c, name);
  atomic_store(&g->world->waiting_in[me], NULL);
  if (st != DT_OK) return DT_ERR;
  if (tc_check_match(c) == DT_OK) return DT_OK;
  /* every rank reaches the same verdict; none may return (and free the size tables its
   * descriptor points to) while a peer is still reading them */
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", dt_error_message());
  if (group_barrier(c, name) == DT_OK) dt_error("%s", msg);
  return DT_ERR;
}

int tc_leave(tc_comm *c, const char *name) { return group_barrier(c, name); }
