/* The per-rank context and its group cache (MPI communicators are costly to create and
 * collective to create, so each rank list gets one, once). */
#include "distributed/context.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "distributed/comm_debug.h"
#include "distributed/dispatch.h"
#include "distributed/mesh.h"
#include "distributed/redistribute.h"

dt_context *dt_context_new(dt_comm *world, int local_rank) {
  dt_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return dt_error("context: out of memory"), NULL;
  ctx->world = world;
  dt_comm_set_observer(world, dt_comm_debug_observe, ctx);
  ctx->rank = world->rank;
  ctx->world_size = world->size;
  ctx->local_rank = local_rank;
  ctx->backend = world->backend;
  ctx->rng.seed = DT_RNG_DEFAULT_SEED;
  ctx->rng.offset = 0;
  ctx->modes.grad_enabled = 1;
  return ctx;
}

void dt_context_free(dt_context *ctx) {
  if (!ctx) return;
  for (int i = 0; i < ctx->ngroups; i++) {
    if (ctx->groups[i]->comm != ctx->world) dt_comm_destroy(ctx->groups[i]->comm);
    free(ctx->groups[i]->ranks);
    free(ctx->groups[i]);
  }
  free(ctx->groups);
  dt_comm_debug_free(ctx->comm_debug);
  dt_plan_cache_free(ctx->plans);
  dt_dispatch_state_free(ctx->dispatch);
  dt_context_pop_mesh_to(ctx, 0);
  free(ctx->mesh_stack);
  dt_comm_destroy(ctx->world);
  free(ctx);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int dt_context_group(dt_context *ctx, const int *ranks, int n, const dt_group_entry **out) {
  if (n < 1) return dt_error("new_group: a group needs at least one rank");
  int *sorted = malloc(sizeof(int) * (size_t)n);
  if (!sorted) return dt_error("new_group: out of memory");
  memcpy(sorted, ranks, sizeof(int) * (size_t)n);
  qsort(sorted, (size_t)n, sizeof(int), cmp_int);
  for (int i = 0; i < n; i++) {
    int r = sorted[i];
    if (r < 0 || r >= ctx->world_size) {
      free(sorted);
      return dt_error("new_group: rank %d out of range for a world of %d ranks", r, ctx->world_size);
    }
    if (i && r == sorted[i - 1]) {
      free(sorted);
      return dt_error("new_group: rank %d listed twice", r);
    }
  }
  for (int i = 0; i < ctx->ngroups; i++)
    if (ctx->groups[i]->n == n && memcmp(ctx->groups[i]->ranks, sorted, sizeof(int) * (size_t)n) == 0) {
      free(sorted);
      *out = ctx->groups[i];
      return DT_OK;
    }
  if (ctx->ngroups == ctx->capgroups) {
    int cap = ctx->capgroups ? 2 * ctx->capgroups : 8;
    dt_group_entry **g = realloc(ctx->groups, sizeof *g * (size_t)cap);
    if (!g) return free(sorted), dt_error("new_group: out of memory");
    ctx->groups = g;
    ctx->capgroups = cap;
  }
  dt_comm *comm = NULL;
  dt_group_entry *e = malloc(sizeof *e);
  if (!e) return free(sorted), dt_error("new_group: out of memory");
  /* The whole world is the world communicator itself: the threads backend keeps one state
   * per rank set, so a second communicator over the same ranks would interleave its calls
   * with the world's (a rank leaving a world barrier early would meet its peers' next
   * collective).  Every rank takes this branch alike, so MPI stays collective-consistent. */
  if (n == ctx->world_size) comm = ctx->world;
  else if (dt_comm_new_group(ctx->world, sorted, n, &comm) != DT_OK) return free(e), free(sorted), DT_ERR;
  if (comm) dt_comm_set_observer(comm, dt_comm_debug_observe, ctx);
  ctx->groups[ctx->ngroups++] = e;
  e->n = n;
  e->ranks = sorted;
  e->comm = comm;
  *out = e;
  return DT_OK;
}

int dt_context_push_mesh(dt_context *ctx, dt_mesh *m) {
  if (ctx->mesh_depth == ctx->mesh_cap) {
    int cap = ctx->mesh_cap ? 2 * ctx->mesh_cap : 4;
    dt_mesh **st = realloc(ctx->mesh_stack, sizeof *st * (size_t)cap);
    if (!st) return dt_error("mesh:use: out of memory");
    ctx->mesh_stack = st, ctx->mesh_cap = cap;
  }
  dt_mesh_retain(m);
  ctx->mesh_stack[ctx->mesh_depth++] = m;
  return DT_OK;
}

void dt_context_pop_mesh_to(dt_context *ctx, int depth) {
  while (ctx->mesh_depth > depth) dt_mesh_release(ctx->mesh_stack[--ctx->mesh_depth]);
}

dt_mesh *dt_context_current_mesh(const dt_context *ctx) {
  return ctx->mesh_depth ? ctx->mesh_stack[ctx->mesh_depth - 1] : NULL;
}
