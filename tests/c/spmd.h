/* Runs a function on every rank of a threads world, as src/cli/launcher.c runs ranks: one
 * thread and one dt_context per rank, a 1-d mesh over all of them.  For the C tests that
 * drive the core on DTensors without Lua. */
#ifndef DT_TESTS_SPMD_H
#define DT_TESTS_SPMD_H

#include <pthread.h>
#include <stdio.h>

#include "base/error.h"
#include "distributed/context.h"
#include "distributed/mesh.h"

#define SPMD_MAX_RANKS 4

typedef int (*spmd_fn)(dt_context *ctx, dt_mesh *m, void *arg);

typedef struct spmd_job {
  dt_threads_world *w;
  int rank, n;
  spmd_fn fn;
  void *arg;
  int ok;
} spmd_job;

static void *spmd_rank(void *p) {
  spmd_job *j = p;
  dt_comm *c = dt_threads_world_comm(j->w, j->rank);
  dt_context *ctx = c ? dt_context_new(c, j->rank) : NULL;
  int ranks[SPMD_MAX_RANKS] = {0, 1, 2, 3}, shape[1] = {j->n};
  dt_mesh *m = NULL;
  if (ctx && dt_mesh_new(ctx, "cpu", 1, shape, ranks, NULL, &m) == DT_OK) j->ok = j->fn(ctx, m, j->arg);
  if (!j->ok) printf("  rank %d of %d failed (last error: %s)\n", j->rank, j->n, dt_error_message());
  dt_threads_world_rank_exited(j->w, j->rank);
  if (m) dt_mesh_release(m);
  dt_context_free(ctx);
  return NULL;
}

/* fn on n ranks (n <= SPMD_MAX_RANKS); 1 when it returned 1 on every rank. */
static int spmd_run(int n, spmd_fn fn, void *arg) {
  dt_threads_world *w = dt_threads_world_new(n, 30);
  spmd_job jobs[SPMD_MAX_RANKS];
  pthread_t t[SPMD_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    jobs[r] = (spmd_job){w, r, n, fn, arg, 0};
    pthread_create(&t[r], NULL, spmd_rank, &jobs[r]);
  }
  int ok = 1;
  for (int r = 0; r < n; r++) pthread_join(t[r], NULL), ok &= jobs[r].ok;
  dt_threads_world_free(w);
  return ok;
}

#endif
