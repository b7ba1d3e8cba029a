/* Per-submitter worker threads for intra-op parallelism (design: thread_pool.h).
 *
 * A job is published by bumping a generation counter; every worker of the pool acknowledges
 * every generation (pending counts all of them), so the job's fields are never rewritten
 * while a worker may still read them.  Workers spin briefly on the counter (a kernel is often
 * followed by another within microseconds), then sleep on a condition variable. */
#include "base/thread_pool.h"
#include "base/error.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPIN_ROUNDS 2000

typedef struct pool pool;
typedef struct {
  pool *p;
  int index; /* the piece it runs: 1..nworkers (the submitter runs piece 0) */
  pthread_t tid;
} worker;

struct pool {
  int nworkers;
  worker *w;
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  atomic_uint_fast64_t gen;
  atomic_int pending;
  atomic_int stop;
  dt_parallel_fn fn; /* the job, written only while no worker reads it */
  void *ctx;
  int64_t n;
  int pieces;
};

static _Thread_local pool *tl_pool;
static _Thread_local int tl_threads; /* 0: the default, not read yet */
static _Thread_local int tl_inside;  /* this thread is running a piece */
static atomic_int ranks_per_process = 1;
static pthread_key_t pool_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void run_piece(pool *p, int k) {
  int64_t q = p->n / p->pieces, r = p->n % p->pieces;
  int64_t b = q * k + (k < r ? k : r), e = b + q + (k < r);
  if (e > b) p->fn(b, e, p->ctx);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  pool *p = w->p;
  tl_inside = 1;
  uint_fast64_t seen = 0;
  for (;;) {
    uint_fast64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
    for (int i = 0; g == seen && i < SPIN_ROUNDS; i++) {
      cpu_relax();
      g = atomic_load_explicit(&p->gen, memory_order_acquire);
    }
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->go, &p->mu);
      pthread_mutex_unlock(&p->mu);
      if (g == seen) return NULL; /* stopped */
    }
    seen = g;
    if (w->index < p->pieces) run_piece(p, w->index);
    if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

static void pool_destroy(void *arg) {
  pool *p = arg;
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nworkers; i++) pthread_join(p->w[i].tid, NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->go);
  pthread_cond_destroy(&p->done);
  free(p->w);
  free(p);
}

static void make_key(void) { (void)pthread_key_create(&pool_key, pool_destroy); }

/* A pool of `want` workers (fewer when the system refuses threads; NULL when none start). */
static pool *pool_create(int want) {
  pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->w = calloc((size_t)want, sizeof *p->w);
  if (!p->w) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->go, NULL);
  pthread_cond_init(&p->done, NULL);
  for (int i = 0; i < want; i++) {
    p->w[i].p = p;
    p->w[i].index = i + 1;
    if (pthread_create(&p->w[i].tid, NULL, worker_main, &p->w[i]) != 0) break;
    p->nworkers++;
  }
  if (p->nworkers == 0) {
    pool_destroy(p);
    return NULL;
  }
  return p;
}

/* The calling thread's pool with threads - 1 workers, made or remade as the count changed. */
static pool *my_pool(int threads) {
  if (tl_pool && tl_pool->nworkers == threads - 1) return tl_pool;
  pthread_once(&key_once, make_key);
  if (tl_pool) pool_destroy(tl_pool);
  tl_pool = pool_create(threads - 1);
  pthread_setspecific(pool_key, tl_pool);
  return tl_pool;
}

void dt_parallel_for(int64_t n, int64_t grain, dt_parallel_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = tl_inside ? 1 : dt_get_num_threads();
  int64_t pieces = n / grain;
  if (pieces > threads) pieces = threads;
  pool *p = pieces >= 2 ? my_pool(threads) : NULL;
  if (!p) {
    fn(0, n, ctx);
    return;
  }
  if (pieces > p->nworkers + 1) pieces = p->nworkers + 1;
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->pieces = (int)pieces;
  atomic_store_explicit(&p->pending, p->nworkers, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_mutex_lock(&p->mu);
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  tl_inside = 1;
  run_piece(p, 0);
  tl_inside = 0;
  for (int i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0 && i < SPIN_ROUNDS; i++) cpu_relax();
  if (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
}

int dt_cpu_cores(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int c = CPU_COUNT(&set);
    if (c > 0) return c;
  }
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  return c > 0 ? (int)c : 1;
}

/* DTLUA_NUM_THREADS: 0 when unset or invalid, else its value. */
static int env_threads(void) {
  const char *s = getenv("DTLUA_NUM_THREADS");
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < 1 || v > DT_MAX_THREADS) return 0;
  return (int)v;
}

const char *dt_num_threads_env_invalid(void) {
  const char *s = getenv("DTLUA_NUM_THREADS");
  return s && *s && env_threads() == 0 ? s : NULL;
}

void dt_set_ranks_per_process(int n) { atomic_store(&ranks_per_process, n > 0 ? n : 1); }

int dt_default_num_threads(void) {
  int env = env_threads();
  if (env) return env;
  int t = dt_cpu_cores() / atomic_load(&ranks_per_process);
  if (t > DT_MAX_THREADS) t = DT_MAX_THREADS;
  return t > 1 ? t : 1;
}

int dt_get_num_threads(void) {
  if (tl_threads == 0) tl_threads = dt_default_num_threads();
  return tl_threads;
}

int dt_set_num_threads(int n) {
  if (n < 1 || n > DT_MAX_THREADS)
    return dt_error("set_num_threads: the thread count must be an integer in 1..%d, got %d", DT_MAX_THREADS, n);
  tl_threads = n;
  return DT_OK;
}
