/* The REPL on a threads world: its own group over the world's ranks, so that its exchanges
 * never meet a collective of the line being run; the end of a line on each rank, so that
 * peers waiting for it in a collective fail at once; and the reset after every line, so that
 * a line that only some ranks ran leaves the program's groups usable for the next one. */
#include <string.h>

#include "base/error.h"
#include "comm/threads_impl.h"

static tc_comm *as_threads(dt_comm *c) { return c && c->ops == &dt_threads_ops ? (tc_comm *)c : NULL; }

dt_comm *dt_threads_repl_comm(dt_comm *world) {
  tc_comm *w = as_threads(world);
  if (!w) return NULL;
  tc_group *g = tc_group_lookup(w->g->world, w->g->world_ranks, w->g->size, 1);
  tc_comm *c = g ? tc_comm_new(g, world->rank) : NULL;
  if (!c) return dt_error("the REPL's communicator: out of memory"), NULL;
  c->base.timeout = 0; /* it waits for the user's typing and for the line to end, however long */
  return &c->base;
}

void dt_threads_line_done(dt_comm *world) {
  tc_comm *c = as_threads(world);
  if (!c) return;
  atomic_store(&c->g->world->line_done[c->g->world_ranks[world->rank]], 1);
  tc_wake_everyone(c->g->world); /* peers asleep in a collective notice now */
}

/* Only while no rank runs program code: every rank has entered the REPL's gather. */
static void reset_group(tc_group *g) {
  atomic_store(&g->broken, 0);
  g->why[0] = 0;
  atomic_store(&g->arrived, 0);
  for (int r = 0; r < g->size; r++) atomic_store(&g->members[r].entered, 0);
  for (int i = 0; i < g->size * g->size; i++) {
    atomic_store(&g->boxes[i].posted.v, 0);
    atomic_store(&g->boxes[i].done.v, 0);
    g->boxes[i].mismatch = 0;
  }
  atomic_fetch_add_explicit(&g->epoch, 1, memory_order_release);
}

void dt_threads_line_over(dt_comm *world) {
  tc_comm *c = as_threads(world);
  if (!c) return;
  dt_threads_world *w = c->g->world;
  pthread_mutex_lock(&w->mu);
  for (tc_group *g = w->groups; g; g = g->next)
    if (!g->repl) reset_group(g);
  for (int r = 0; r < w->size; r++) atomic_store(&w->line_done[r], 0), atomic_store(&w->failed_out[r], 0);
  atomic_store(&w->interrupted, 0);
  pthread_mutex_unlock(&w->mu);
}

void dt_threads_interrupt(dt_comm *world) {
  tc_comm *c = as_threads(world);
  if (c) atomic_store(&c->g->world->interrupted, 1); /* no lock, no wake: waiters look every few ms */
}
