/* C baselines for bench/ops.lua, timed in the same process as the dtlua figures:
 * the CBLAS sgemm dtlua's matmul calls, memcpy/memset (also on several threads), and a
 * monotonic clock.
 * Built by `make` (not installed); loaded with package.cpath = "bench/.libs/?.so;..". */
#include "config.h"
#include "base/export.h"
#include "base/stream_copy.h" /* dt_prefetch_l2 (inline: the bench links none of dtlua) */

#include <lauxlib.h>
#include <lua.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef DT_HAVE_CBLAS
#include <cblas.h>
#endif

/* The copy yardsticks' buffers: from 2 MiB on huge pages in a mapping of their own, as dtlua's
 * tensor blocks (src/tensor/block_cache.c: the bench links none of dtlua's code), so a ratio
 * compares kernels, not page sizes; not malloc's heap, where the advice would outlive them. */
#define HUGE_BYTES ((size_t)2 << 20)
static size_t page_rounded(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) / page * page;
}

static void *big_alloc(size_t bytes) {
  if (bytes < HUGE_BYTES) return malloc(bytes);
  size_t len = page_rounded(bytes), span = len + HUGE_BYTES;
  char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *a = (char *)(((uintptr_t)p + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
  if (a > p) munmap(p, (size_t)(a - p));
  if (p + span > a + len) munmap(a + len, (size_t)(p + span - (a + len)));
#ifdef MADV_HUGEPAGE
  madvise(a, bytes & ~(HUGE_BYTES - 1), MADV_HUGEPAGE);
#endif
  return a;
}

static void big_free(void *p, size_t bytes) {
  if (!p) return;
  if (bytes < HUGE_BYTES) free(p);
  else munmap(p, page_rounded(bytes));
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int l_now(lua_State *L) {
  lua_pushnumber(L, now());
  return 1;
}

/* The calling thread's CPU time (a rank of dtlua -n N is a thread): with now(), what a rank
 * spends on the CPU against the wall time it waits for a core on a shared machine. */
static int l_thread_cpu(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  lua_pushnumber(L, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
  return 1;
}

#ifdef DT_HAVE_CBLAS
/* Matrices kept between calls (like the dtlua operands), so that both sides of a round
 * use warm memory. */
static float *ga, *gb, *gc;
static lua_Integer gn;

static int ensure_matrices(lua_Integer n) {
  if (n == gn) return 1;
  free(ga), free(gb), free(gc);
  ga = malloc(sizeof(float) * n * n), gb = malloc(sizeof(float) * n * n), gc = malloc(sizeof(float) * n * n);
  if (!ga || !gb || !gc) {
    free(ga), free(gb), free(gc);
    ga = gb = gc = NULL, gn = 0;
    return 0;
  }
  for (lua_Integer i = 0; i < n * n; i++) ga[i] = (float)(i % 7) * 0.25f, gb[i] = (float)(i % 5) * 0.5f, gc[i] = 0;
  gn = n;
  return 1;
}
#endif

/* Best GFLOP/s of reps calls of cblas_sgemm on n x n float32 matrices, on `threads` of the
 * library's own threads (OpenBLAS: dtlua keeps it at one and runs GEMM blocks on its pool, so
 * the yardstick sets the count for its calls and puts back one); nil without CBLAS. */
static int l_sgemm_gflops(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 3), threads = luaL_optinteger(L, 3, 1);
#ifdef DT_HAVE_CBLAS
  if (n < 1 || !ensure_matrices(n)) return luaL_error(L, "sgemm_gflops: bad size or out of memory");
  if (threads < 1 || threads > 64) return luaL_error(L, "sgemm_gflops: threads must be in 1..64, got %d", (int)threads);
#ifdef DT_HAVE_OPENBLAS
  openblas_set_num_threads((int)threads);
#endif
  double best = 1e300;
  for (lua_Integer r = 0; r < reps; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, ga, (int)n, gb, (int)n, 0.0f,
                gc, (int)n);
    double t = now() - t0;
    if (t < best) best = t;
  }
#ifdef DT_HAVE_OPENBLAS
  openblas_set_num_threads(1);
#endif
  lua_pushnumber(L, 2.0 * (double)n * (double)n * (double)n / best / 1e9);
#else
  (void)n, (void)reps, (void)threads;
  lua_pushnil(L);
#endif
  return 1;
}

/* Best memcpy bandwidth in GB/s over reps copies of `bytes`, counting bytes read + written. */
static int l_memcpy_gbps(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 5);
  char *src = big_alloc((size_t)bytes), *dst = big_alloc((size_t)bytes);
  if (!src || !dst) {
    big_free(src, (size_t)bytes), big_free(dst, (size_t)bytes);
    return luaL_error(L, "memcpy_gbps: out of memory");
  }
  memset(src, 1, (size_t)bytes);
  memset(dst, 0, (size_t)bytes); /* fault the pages in before timing */
  double best = 1e300;
  for (lua_Integer r = 0; r < reps; r++) {
    double t0 = now();
    memcpy(dst, src, (size_t)bytes);
    double t = now() - t0;
    if (t < best) best = t;
  }
  volatile char sink = dst[bytes / 2];
  (void)sink;
  big_free(src, (size_t)bytes), big_free(dst, (size_t)bytes);
  lua_pushnumber(L, 2.0 * (double)bytes / best / 1e9);
  return 1;
}

/* memcpy on `threads` threads, each a contiguous slice: the yardstick of a threaded kernel.
 * The helper threads are started once and wait spinning between copies, so a timed copy does
 * not include thread start-up. */
typedef struct {
  char *dst;
  const char *src;
  size_t bytes;
  int threads;
  atomic_int gen, done, stop;
} mt_copy;
typedef struct {
  mt_copy *c;
  int index;
} mt_arg;

static void mt_slice(mt_copy *c, int k) {
  size_t per = c->bytes / (size_t)c->threads, b = per * (size_t)k, e = k == c->threads - 1 ? c->bytes : b + per;
  memcpy(c->dst + b, c->src + b, e - b);
}

static void *mt_main(void *vp) {
  mt_arg *a = vp;
  int seen = 0;
  for (;;) {
    int g;
    while ((g = atomic_load(&a->c->gen)) == seen && !atomic_load(&a->c->stop)) sched_yield();
    if (atomic_load(&a->c->stop)) return NULL;
    seen = g;
    mt_slice(a->c, a->index);
    atomic_fetch_add(&a->c->done, 1);
  }
}

static int l_memcpy_gbps_threads(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 5), threads = luaL_optinteger(L, 3, 1);
  if (bytes <= 0 || reps <= 0 || threads < 1 || threads > 64)
    return luaL_error(L, "memcpy_gbps_threads: bytes and reps must be positive, threads in 1..64");
  mt_copy c = {.bytes = (size_t)bytes, .threads = (int)threads};
  c.src = big_alloc((size_t)bytes), c.dst = big_alloc((size_t)bytes);
  if (!c.src || !c.dst) {
    big_free((void *)c.src, c.bytes), big_free(c.dst, c.bytes);
    return luaL_error(L, "memcpy_gbps_threads: out of memory");
  }
  memset((void *)c.src, 1, (size_t)bytes);
  memset(c.dst, 0, (size_t)bytes);
  pthread_t tid[64];
  mt_arg args[64];
  int started = 1;
  for (int k = 1; k < threads; k++, started++) {
    args[k] = (mt_arg){&c, k};
    if (pthread_create(&tid[k], NULL, mt_main, &args[k]) != 0) break;
  }
  if (started < threads) c.threads = started;
  double best = 1e300;
  for (lua_Integer r = 0; r <= reps; r++) { /* round 0 warms the threads up, untimed */
    atomic_store(&c.done, 0);
    double t0 = now();
    atomic_fetch_add(&c.gen, 1);
    mt_slice(&c, 0);
    while (atomic_load(&c.done) < c.threads - 1) sched_yield();
    double t = now() - t0;
    if (r > 0 && t < best) best = t;
  }
  atomic_store(&c.stop, 1);
  for (int k = 1; k < started; k++) pthread_join(tid[k], NULL);
  big_free((void *)c.src, c.bytes), big_free(c.dst, c.bytes);
  lua_pushnumber(L, 2.0 * (double)bytes / best / 1e9);
  return 1;
}

/* memory_seconds(nbytes, reps) -> best seconds of memset(nbytes), best seconds of memcpy(nbytes):
 * the yardsticks bench/rng.lua reports next to rand. */
static int l_memory_seconds(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1), reps = luaL_optinteger(L, 2, 3);
  if (n <= 0 || reps <= 0) return luaL_error(L, "memory_seconds: nbytes and reps must be positive");
  char *a = malloc((size_t)n), *b = malloc((size_t)n);
  if (!a || !b) {
    free(a), free(b);
    return luaL_error(L, "memory_seconds: out of memory for %I bytes", n);
  }
  /* through volatile pointers: the compiler may not fold or drop the timed calls */
  void *(*volatile set)(void *, int, size_t) = memset;
  void *(*volatile cpy)(void *, const void *, size_t) = memcpy;
  set(a, 1, (size_t)n), set(b, 2, (size_t)n); /* fault the pages in first */
  double best_set = 1e300, best_cpy = 1e300;
  for (lua_Integer r = 0; r < reps; r++) {
    double t0 = now();
    set(a, (int)r + 3, (size_t)n);
    double t1 = now();
    cpy(b, a, (size_t)n);
    double t2 = now();
    if (t1 - t0 < best_set) best_set = t1 - t0;
    if (t2 - t1 < best_cpy) best_cpy = t2 - t1;
  }
  volatile char sink = b[n - 1]; /* keep the copy observable */
  (void)sink;
  free(a), free(b);
  lua_pushnumber(L, best_set);
  lua_pushnumber(L, best_cpy);
  return 2;
}

/* gather_copy_seconds(nbytes, threads, reps[, calls]) -> seconds per call, the best of `reps`
 * loops of `calls` calls (default 1), each call: `threads` threads each copying every thread's
 * nbytes/threads input into its own nbytes output between two barriers: the copies of an
 * all_gather on the threads backend (an all_reduce moves as many bytes), without its checks or
 * arithmetic; timed until the last thread ends.  On C cores with threads > C the threads
 * time-share the cores as the ranks do: the ceiling a collective of that many ranks can reach on
 * this machine.  A loop of calls is timed as bench/collectives.lua times the collective (the
 * mean of a loop, not the best single call, which a time-shared machine flatters); the barriers
 * inside a loop spin with sched_yield, the quickest wait measured in C for 4 threads on 2 cores
 * (pthread barriers 0.26, spin with a yield every 4 rounds 0.30, a yield every round 0.34 of
 * memcpy at 4 MiB). */
typedef struct gather_copy {
  int threads;
  size_t block;
  char **in, **out;
  pthread_barrier_t start, end;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go;
  lua_Integer reps; /* -1: a thread could not start, the others end at once */
  lua_Integer calls;
  atomic_uint arrived, gen; /* the barrier between calls */
  int exchange;     /* 0: an all_gather's copies; 1: an all_to_all's (each thread's block to every peer) */
  size_t row_bytes; /* exchange: 0, contiguous blocks; else column slabs of this many bytes a row */
} gather_copy;

typedef struct gather_arg {
  gather_copy *g;
  int me;
} gather_arg;

static void yield_barrier(gather_copy *g) {
  unsigned gen = atomic_load(&g->gen);
  if (atomic_fetch_add(&g->arrived, 1) + 1 == (unsigned)g->threads) {
    atomic_store(&g->arrived, 0);
    atomic_fetch_add(&g->gen, 1);
    return;
  }
  while (atomic_load(&g->gen) == gen) sched_yield();
}

/* One row of a column slab: `rep movsb` where x86 has it, as dtlua's dt_row_copy. */
static void row_copy(void *d, const void *s, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
#else
  memcpy(d, s, n);
#endif
}

/* Thread me's part of an all_to_all: its block's piece q into peer q's output at piece me.
 * Contiguous pieces, or column slabs of row_bytes (each thread's block is rows of n slabs),
 * walked as dtlua's push walks them: peer by peer, the rows 16 KiB ahead prefetched into L2. */
static void exchange_once(gather_copy *g, int me) {
  void *(*volatile cpy)(void *, const void *, size_t) = memcpy;
  int n = g->threads;
  size_t piece = g->block / (size_t)n;
  for (int k = 0; k < n; k++) {
    int q = (me + 1 + k) % n;
    char *out = g->out[q] + (size_t)me * piece;
    if (!g->row_bytes) {
      cpy(out, g->in[me] + (size_t)q * piece, piece);
      continue;
    }
    size_t rb = g->row_bytes, stride = rb * (size_t)n, rows = piece / rb, ahead = (16384 + rb - 1) / rb;
    const char *in = g->in[me] + (size_t)q * rb;
    for (size_t r = 0; r < rows; r++) {
      if (r + ahead < rows) dt_prefetch_l2(in + (r + ahead) * stride, rb);
      row_copy(out + r * rb, in + r * stride, rb);
    }
  }
}

static void gather_once(gather_copy *g, int me) {
  void *(*volatile cpy)(void *, const void *, size_t) = memcpy;
  yield_barrier(g); /* the collective's entry */
  if (g->exchange)
    exchange_once(g, me);
  else
    for (int k = 0; k < g->threads; k++) {
      int p = (me + 1 + k) % g->threads; /* the threads backend's order */
      cpy(g->out[me] + (size_t)p * g->block, g->in[p], g->block);
    }
  yield_barrier(g); /* and its exit */
}

static void *gather_main(void *arg) {
  gather_arg *a = arg;
  pthread_mutex_lock(&a->g->mu); /* until every thread started (or one could not) */
  while (!a->g->go) pthread_cond_wait(&a->g->cv, &a->g->mu);
  pthread_mutex_unlock(&a->g->mu);
  for (lua_Integer r = 0; r <= a->g->reps; r++) {
    pthread_barrier_wait(&a->g->start);
    for (lua_Integer c = 0; c < a->g->calls; c++) gather_once(a->g, a->me);
    pthread_barrier_wait(&a->g->end);
  }
  return NULL;
}

/* The threads, loops and timing shared by gather_copy_seconds and exchange_copy_seconds. */
static int copy_threads_seconds(lua_State *L, const char *name, gather_copy g) {
  char *bufs[128] = {0};
  size_t out_bytes = g.exchange ? g.block : g.block * (size_t)g.threads;
  g.in = bufs, g.out = bufs + 64;
  int ok = 1;
  for (int t = 0; t < g.threads; t++) {
    g.in[t] = big_alloc(g.block + 1), g.out[t] = big_alloc(out_bytes + 1); /* pages as tensors' */
    if (!g.in[t] || !g.out[t]) ok = 0;
    else memset(g.in[t], 1, g.block), memset(g.out[t], 0, out_bytes); /* fault the pages in */
  }
  pthread_t tid[64];
  gather_arg args[64];
  int started = 1;
  pthread_mutex_init(&g.mu, NULL);
  pthread_cond_init(&g.cv, NULL);
  pthread_barrier_init(&g.start, NULL, (unsigned)g.threads);
  pthread_barrier_init(&g.end, NULL, (unsigned)g.threads);
  for (int k = 1; k < g.threads && ok; k++, started++) {
    args[k] = (gather_arg){&g, k};
    if (pthread_create(&tid[k], NULL, gather_main, &args[k]) != 0) ok = 0, started--;
  }
  pthread_mutex_lock(&g.mu);
  if (!ok) g.reps = -1;
  g.go = 1;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  double best = 1e300;
  for (lua_Integer r = 0; r <= g.reps; r++) { /* round 0 warms the threads up, untimed */
    pthread_barrier_wait(&g.start);
    double t0 = now();
    for (lua_Integer c = 0; c < g.calls; c++) gather_once(&g, 0);
    pthread_barrier_wait(&g.end);
    double t = (now() - t0) / (double)g.calls;
    if (r > 0 && t < best) best = t;
  }
  for (int k = 1; k < started; k++) pthread_join(tid[k], NULL);
  pthread_barrier_destroy(&g.start), pthread_barrier_destroy(&g.end);
  pthread_mutex_destroy(&g.mu), pthread_cond_destroy(&g.cv);
  for (int t = 0; t < g.threads; t++) big_free(g.in[t], g.block + 1), big_free(g.out[t], out_bytes + 1);
  if (!ok) return luaL_error(L, "%s: out of memory or no threads", name);
  lua_pushnumber(L, best);
  return 1;
}

static int l_gather_copy_seconds(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 1), threads = luaL_checkinteger(L, 2), reps = luaL_optinteger(L, 3, 5);
  lua_Integer calls = luaL_optinteger(L, 4, 1);
  if (bytes <= 0 || reps <= 0 || calls <= 0 || threads < 1 || threads > 64)
    return luaL_error(L, "gather_copy_seconds: nbytes, reps and calls must be positive, threads in 1..64");
  gather_copy g = {.threads = (int)threads, .block = (size_t)bytes / (size_t)threads, .reps = reps, .calls = calls};
  return copy_threads_seconds(L, "gather_copy_seconds", g);
}

/* exchange_copy_seconds(nbytes, threads, row_bytes, reps, calls) -> seconds per call of `threads`
 * threads making an all_to_all's copies of nbytes in all (each thread's nbytes/threads block to
 * every peer) between two barriers, timed as gather_copy_seconds: contiguous pieces with
 * row_bytes 0 (a bare all_to_all), else column slabs of row_bytes a row (Shard(i) ->
 * Shard(j)'s, walked as dtlua walks them).  Their ratio is what the strided read itself costs on
 * this machine. */
static int l_exchange_copy_seconds(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 1), threads = luaL_checkinteger(L, 2), row = luaL_checkinteger(L, 3);
  lua_Integer reps = luaL_optinteger(L, 4, 5), calls = luaL_optinteger(L, 5, 1);
  if (bytes <= 0 || reps <= 0 || calls <= 0 || row < 0 || threads < 1 || threads > 64 ||
      (row && ((size_t)bytes / (size_t)threads / (size_t)threads) % (size_t)row))
    return luaL_error(L, "exchange_copy_seconds: nbytes, reps and calls must be positive, threads in 1..64, and "
                         "row_bytes must divide each piece (%d bytes)", (int)(bytes / (threads > 0 ? threads : 1)));
  gather_copy g = {.threads = (int)threads, .block = (size_t)bytes / (size_t)threads, .reps = reps, .calls = calls,
                   .exchange = 1, .row_bytes = (size_t)row};
  return copy_threads_seconds(L, "exchange_copy_seconds", g);
}

DT_API int luaopen_baseline(lua_State *L);
DT_API int luaopen_baseline(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"now", l_now}, {"thread_cpu", l_thread_cpu}, {"sgemm_gflops", l_sgemm_gflops}, {"memcpy_gbps", l_memcpy_gbps},
      {"memcpy_gbps_threads", l_memcpy_gbps_threads},
      {"memory_seconds", l_memory_seconds}, {"gather_copy_seconds", l_gather_copy_seconds},
      {"exchange_copy_seconds", l_exchange_copy_seconds}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
