/* Spin-then-futex waiting (Linux).  The sleepers counter makes the common case (nobody
 * asleep) cost the waker one atomic load; seq_cst ordering on both sides closes the race
 * between "sleeper registers" and "waker publishes". */
#include "comm/spin_wait.h"

#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SPIN_SECONDS 2e-3  /* spin (and yield) this long before sleeping */
#define SLEEP_NS 5000000L  /* sleep slices: the stop check runs between them */

double dt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void futex_wait(atomic_uint *addr, unsigned val, long ns) {
  struct timespec ts = {0, ns};
  syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void futex_wake(atomic_uint *addr) { syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }

int dt_spin_wait_eq(dt_spin_word *w, unsigned target, dt_spin_stop_fn stop, void *arg) {
  for (int i = 0; i < 64; i++) { /* the fast case: the peer is already there or nearly */
    if (atomic_load_explicit(&w->v, memory_order_acquire) == target) return 0;
    cpu_relax();
  }
  double t0 = dt_now();
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(&w->v, memory_order_acquire) == target) return 0;
    cpu_relax();
    if (i % 4 == 0) sched_yield(); /* the peer we wait for may need this core */
    if (i % 64 == 0 && dt_now() - t0 > SPIN_SECONDS) break;
  }
  for (;;) {
    int st = stop ? stop(arg) : 0;
    if (st) return st;
    atomic_fetch_add(&w->sleepers, 1);
    unsigned cur = atomic_load(&w->v);
    if (cur != target) futex_wait(&w->v, cur, SLEEP_NS);
    atomic_fetch_sub(&w->sleepers, 1);
    if (atomic_load_explicit(&w->v, memory_order_acquire) == target) return 0;
  }
}

void dt_spin_wake_all(dt_spin_word *w) {
  if (atomic_load(&w->sleepers) > 0) futex_wake(&w->v);
}

void dt_spin_store(dt_spin_word *w, unsigned v) {
  atomic_store(&w->v, v);
  dt_spin_wake_all(w);
}

unsigned dt_spin_increment(dt_spin_word *w) {
  unsigned v = atomic_fetch_add(&w->v, 1) + 1;
  dt_spin_wake_all(w);
  return v;
}
