/* Asynchronous collectives: each rank has one communication thread (started on its first
 * async call, shared by all the rank's communicators through their root) that runs queued
 * collectives in issue order.  A blocking call first drains the queue, so a rank's
 * collectives always run in the order it issued them, one at a time, exactly as in a
 * program of blocking calls: the backends' ordering, mismatch, timeout and exited-peer
 * checks apply unchanged, and only the rank's own computation overlaps the communication.
 * The thread also makes progress for MPI (no MPI_Test calls needed from the rank). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/comm_async.h"

typedef struct dt_comm_async dt_comm_async;
struct dt_comm_async {
  pthread_mutex_t mu;
  pthread_cond_t wake, done; /* wake: a job or stop for the thread; done: a job completed */
  pthread_t tid;
  int started, stop, refs;   /* refs: the root's, plus one per live work */
  dt_comm_work *head, *tail; /* queued, not yet run */
  unsigned long issued, completed;
  unsigned long unwaited;    /* works issued and not yet waited */
  unsigned long unwaited_by_kind[5]; /* the same by cj_kind, for the end-of-program error */
  char failure[512];         /* the first async call that failed, for that error too */
};

struct dt_comm_work {
  dt_comm_async *a;
  comm_job job;
  size_t *tables;   /* owned copies of the size tables */
  int completed, status, waited, refs; /* refs: the queue's and the user's */
  char *msg;        /* the collective's error */
  struct dt_comm_work *next;
};

static const char *const job_names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};

static int run_job(const comm_job *j) {
  dt_comm *c = j->c;
  switch (j->kind) {
  case CJ_ALL_REDUCE: return c->ops->all_reduce(c, j->send, j->recv, j->count, j->dt, j->op);
  case CJ_ALL_GATHER_V: return c->ops->all_gather_v(c, j->send, j->recv, j->counts, j->dt);
  case CJ_REDUCE_SCATTER: return c->ops->reduce_scatter(c, j->send, j->recv, j->count, j->dt, j->op);
  case CJ_ALL_TO_ALL_V: return c->ops->all_to_all_v(c, j->send, j->counts, j->recv, j->counts2, j->dt);
  case CJ_BROADCAST: return c->ops->broadcast(c, j->recv, j->count, j->dt, j->root);
  }
  return dt_error("async: unknown job %d", (int)j->kind);
}

static dt_comm *root_of(dt_comm *c) { return c->root ? c->root : c; }

/* Drops one reference of a (mu held); returns 1 when a must be freed. */
static int unref_locked(dt_comm_async *a) { return --a->refs == 0; }

static void async_free(dt_comm_async *a) {
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->wake);
  pthread_cond_destroy(&a->done);
  free(a);
}

static void work_free_now(dt_comm_work *w) {
  free(w->tables);
  free(w->msg);
  free(w);
}

static void *comm_thread(void *arg) {
  dt_comm_async *a = arg;
  pthread_mutex_lock(&a->mu);
  for (;;) {
    while (!a->head && !a->stop) pthread_cond_wait(&a->wake, &a->mu);
    if (!a->head) break;
    dt_comm_work *w = a->head;
    pthread_mutex_unlock(&a->mu);
    int st = run_job(&w->job);
    char *msg = st == DT_OK ? NULL : strdup(dt_error_message());
    pthread_mutex_lock(&a->mu);
    a->head = w->next;
    if (!a->head) a->tail = NULL;
    w->status = st, w->msg = msg, w->completed = 1;
    a->completed++;
    if (msg && !a->failure[0]) snprintf(a->failure, sizeof a->failure, "%s", msg);
    if (--w->refs == 0) work_free_now(w); /* its user freed it already */
    pthread_cond_broadcast(&a->done);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

/* The rank's queue, created (with its thread) on first use; NULL + dt_error on failure. */
static dt_comm_async *async_of(dt_comm *c, int no_thread) {
  dt_comm *r = root_of(c);
  if (r->async) return r->async;
  dt_comm_async *a = calloc(1, sizeof *a);
  if (!a) return dt_error("async: out of memory"), NULL;
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->wake, NULL);
  pthread_cond_init(&a->done, NULL);
  a->refs = 1;
  if (!no_thread && pthread_create(&a->tid, NULL, comm_thread, a) != 0) {
    async_free(a);
    return dt_error("async: cannot start the communication thread"), NULL;
  }
  a->started = !no_thread;
  return r->async = a;
}

void dt_comm_async_drain(dt_comm *c) {
  dt_comm_async *a = root_of(c)->async;
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  while (a->completed != a->issued) pthread_cond_wait(&a->done, &a->mu);
  pthread_mutex_unlock(&a->mu);
}

static size_t *copy_tables(const comm_job *j, int n) {
  int k = (j->counts ? 1 : 0) + (j->counts2 ? 1 : 0);
  size_t *t = malloc(sizeof(size_t) * (size_t)(k ? k * n : 1));
  if (!t) return NULL;
  if (j->counts) memcpy(t, j->counts, sizeof(size_t) * (size_t)n);
  if (j->counts2) memcpy(t + (j->counts ? n : 0), j->counts2, sizeof(size_t) * (size_t)n);
  return t;
}

int dt_comm_job_submit(const comm_job *j, dt_comm_work **work) {
  if (!work) {
    dt_comm_async_drain(j->c);
    return run_job(j);
  }
  dt_comm *root = root_of(j->c);
  int now = root->async_inline; /* runs here, yet returns a work like the others */
  *work = NULL;
  dt_comm_async *a = async_of(j->c, now);
  dt_comm_work *w = a ? calloc(1, sizeof *w) : NULL;
  size_t *tables = w ? copy_tables(j, j->c->size) : NULL;
  if (!tables) {
    free(w);
    return a ? dt_error("%s: out of memory", job_names[j->kind]) : DT_ERR;
  }
  w->a = a, w->job = *j, w->tables = tables, w->refs = 2;
  if (j->counts) w->job.counts = tables;
  if (j->counts2) w->job.counts2 = tables + (j->counts ? j->c->size : 0);
  if (j->counts2 == j->counts) w->job.counts2 = w->job.counts; /* all_to_all's one table (the equal form) */
  pthread_mutex_lock(&a->mu);
  a->refs++;
  a->unwaited++;
  a->unwaited_by_kind[j->kind]++;
  a->issued++;
  if (now) {
    pthread_mutex_unlock(&a->mu);
    int st = run_job(&w->job);
    pthread_mutex_lock(&a->mu);
    w->status = st, w->msg = st == DT_OK ? NULL : strdup(dt_error_message()), w->completed = 1, w->refs = 1;
    a->completed++;
  } else {
    if (a->tail) a->tail->next = w;
    else a->head = w;
    a->tail = w;
    pthread_cond_signal(&a->wake);
  }
  pthread_mutex_unlock(&a->mu);
  *work = w;
  return DT_OK;
}

int dt_comm_work_wait(dt_comm_work *w) {
  dt_comm_async *a = w->a;
  pthread_mutex_lock(&a->mu);
  if (w->waited) {
    pthread_mutex_unlock(&a->mu);
    return dt_error("wait: this %s work was already waited (a work is waited once)", job_names[w->job.kind]);
  }
  while (!w->completed) pthread_cond_wait(&a->done, &a->mu);
  w->waited = 1;
  a->unwaited--;
  a->unwaited_by_kind[w->job.kind]--;
  int st = w->status;
  if (st != DT_OK) dt_error("%s", w->msg ? w->msg : "async collective failed");
  pthread_mutex_unlock(&a->mu);
  return st;
}

void dt_comm_work_test(dt_comm_work *w, int *done) {
  pthread_mutex_lock(&w->a->mu);
  *done = w->completed;
  pthread_mutex_unlock(&w->a->mu);
}

void dt_comm_work_free(dt_comm_work *w) {
  if (!w) return;
  dt_comm_async *a = w->a;
  pthread_mutex_lock(&a->mu);
  while (!w->completed) pthread_cond_wait(&a->done, &a->mu); /* its buffers are in use until then */
  int last = --w->refs == 0, gone = unref_locked(a);
  pthread_mutex_unlock(&a->mu);
  if (last) work_free_now(w);
  if (gone) async_free(a);
}

int dt_comm_async_finish(dt_comm *c) {
  dt_comm_async *a = root_of(c)->async;
  if (!a) return DT_OK;
  dt_comm_async_drain(c);
  pthread_mutex_lock(&a->mu);
  unsigned long n = a->unwaited;
  char kinds[256] = "";
  for (size_t k = 0, used = 0; k < 5 && used < sizeof kinds; k++)
    if (a->unwaited_by_kind[k])
      used += (size_t)snprintf(kinds + used, sizeof kinds - used, "%s%s x%lu", used ? ", " : "", job_names[k],
                               a->unwaited_by_kind[k]);
  int st = n ? dt_error("the program ended with %lu async collective(s) never waited (%s): call work:wait() on "
                        "every work an async_op=true call returns%s%s", n, kinds, a->failure[0] ? "; failed: " : "",
                        a->failure)
             : DT_OK;
  pthread_mutex_unlock(&a->mu);
  return st;
}

/* Stops the rank's thread when root (its owner) is destroyed; live works keep the queue's
 * memory until they are freed. */
void dt_comm_async_shutdown(dt_comm *root) {
  dt_comm_async *a = root->async;
  if (!a) return;
  root->async = NULL;
  pthread_mutex_lock(&a->mu);
  a->stop = 1;
  pthread_cond_signal(&a->wake);
  pthread_mutex_unlock(&a->mu);
  if (a->started) pthread_join(a->tid, NULL);
  pthread_mutex_lock(&a->mu);
  int gone = unref_locked(a);
  pthread_mutex_unlock(&a->mu);
  if (gone) async_free(a);
}
