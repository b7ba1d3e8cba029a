/* Waiting for a word to reach a value: spin first (pause + sched_yield, since ranks may
 * outnumber cores), then sleep on a futex.  Waking a sleeping thread costs ~70 us on the
 * target VMs against < 1 us for a spinning one, so short waits must never sleep. */
#ifndef DT_COMM_SPIN_WAIT_H
#define DT_COMM_SPIN_WAIT_H

#include <stdatomic.h>

typedef struct dt_spin_word {
  atomic_uint v;
  atomic_int sleepers; /* threads in futex_wait on v: wakers skip the syscall when 0 */
} dt_spin_word;

/* Checked between sleeps (every few ms): non-zero stops the wait with that value. */
typedef int (*dt_spin_stop_fn)(void *arg);

/* Waits until w->v == target.  Returns 0, or what stop() returned. */
int dt_spin_wait_eq(dt_spin_word *w, unsigned target, dt_spin_stop_fn stop, void *arg);
/* w->v = v, waking sleepers. */
void dt_spin_store(dt_spin_word *w, unsigned v);
/* w->v += 1, waking sleepers; returns the new value. */
unsigned dt_spin_increment(dt_spin_word *w);
/* Wakes every sleeper on w (after an abort, so they run their stop check). */
void dt_spin_wake_all(dt_spin_word *w);

/* Monotonic clock in seconds. */
double dt_now(void);

#endif
