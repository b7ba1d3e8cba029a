/* Per-submitter worker threads for intra-op parallelism (design: thread_pool.h).
 *
 * A job is cut into more chunks than threads, and whoever is running claims the next chunk
 * from an atomic counter: on a machine whose cores are busy with other work a worker may not
 * get a core for a while, and then the submitter simply runs the chunks itself instead of
 * waiting for it.  Workers take part in a job by entering it through a "door" (an atomic word:
 * an open bit and the count of workers inside); the submitter closes the door once every chunk
 * is claimed and waits only for the workers that entered, so a job's fields are never rewritten
 * while a worker may read them and a late worker never delays the submitter.  Workers spin on
 * the job counter for a while (a kernel is often followed by another within microseconds, and
 * waking a sleeping thread costs tens of microseconds), yielding the core between looks, then
 * sleep on a condition variable. */
#include "base/thread_pool.h"
#include "base/error.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPIN_ROUNDS 2000          /* pause-spins before yielding */
#define WORKER_SPIN_NS 300000     /* a worker waits this long for the next job before it sleeps */
#define CHUNKS_PER_THREAD 4       /* chunks per thread of a job: the slack that balances load */
#define DOOR_OPEN (1 << 30)

typedef struct pool pool;
typedef struct {
  pool *p;
  pthread_t tid;
} worker;

struct pool {
  int nworkers;
  worker *w;
  pthread_mutex_t mu;
  pthread_cond_t go;
  atomic_uint_fast64_t gen; /* bumped for every job */
  atomic_int door;          /* DOOR_OPEN | workers that entered the current job */
  atomic_int left;          /* workers that entered and are done */
  atomic_int_fast64_t next; /* the next chunk to claim */
  atomic_int stop;
  dt_parallel_fn fn; /* the job: written only while the door is closed and nobody is inside */
  void *ctx;
  int64_t n, chunks;
};

static _Thread_local pool *tl_pool;
static _Thread_local int tl_threads; /* 0: the default, not read yet */
static _Thread_local int tl_inside;  /* this thread is running a chunk */
static atomic_int ranks_per_process = 1;
static pthread_key_t pool_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Claims and runs chunks until none is left. */
static void run_chunks(pool *p) {
  int64_t q = p->n / p->chunks, r = p->n % p->chunks;
  for (;;) {
    int64_t k = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    if (k >= p->chunks) return;
    int64_t b = q * k + (k < r ? k : r), e = b + q + (k < r);
    p->fn(b, e, p->ctx);
  }
}

/* Waits up to WORKER_SPIN_NS for gen to move past seen: pause-spins, then yields the core to
 * anything runnable (other ranks, BLAS threads) between looks. */
static uint_fast64_t spin_for_job(pool *p, uint_fast64_t seen) {
  uint_fast64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
  for (int i = 0; g == seen && i < SPIN_ROUNDS; i++) {
    cpu_relax();
    g = atomic_load_explicit(&p->gen, memory_order_acquire);
  }
  int64_t until = now_ns() + WORKER_SPIN_NS;
  while (g == seen && !atomic_load(&p->stop) && now_ns() < until) {
    sched_yield();
    g = atomic_load_explicit(&p->gen, memory_order_acquire);
  }
  return g;
}

static void *worker_main(void *arg) {
  pool *p = ((worker *)arg)->p;
  tl_inside = 1;
  uint_fast64_t seen = 0;
  for (;;) {
    uint_fast64_t g = spin_for_job(p, seen);
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->go, &p->mu);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->stop)) return NULL;
    seen = g;
    int d = atomic_load_explicit(&p->door, memory_order_acquire);
    while (d & DOOR_OPEN) {
      if (atomic_compare_exchange_weak_explicit(&p->door, &d, d + 1, memory_order_acq_rel, memory_order_acquire)) {
        run_chunks(p);
        atomic_fetch_add_explicit(&p->left, 1, memory_order_release);
        break;
      }
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
  for (int i = 0; i < want; i++) {
    p->w[i].p = p;
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
  int64_t chunks = n / grain;
  if (chunks > (int64_t)threads * CHUNKS_PER_THREAD) chunks = (int64_t)threads * CHUNKS_PER_THREAD;
  pool *p = chunks >= 2 && threads >= 2 ? my_pool(threads) : NULL;
  if (!p) {
    fn(0, n, ctx);
    return;
  }
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->chunks = chunks;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->left, 0, memory_order_relaxed);
  atomic_store_explicit(&p->door, DOOR_OPEN, memory_order_release);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_mutex_lock(&p->mu);
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  tl_inside = 1;
  run_chunks(p);
  tl_inside = 0;
  int inside = atomic_fetch_and_explicit(&p->door, ~DOOR_OPEN, memory_order_acq_rel) & ~DOOR_OPEN;
  for (int i = 0; atomic_load_explicit(&p->left, memory_order_acquire) < inside; i++) {
    if (i < SPIN_ROUNDS) cpu_relax();
    else sched_yield(); /* a worker inside was preempted: give it the core */
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
