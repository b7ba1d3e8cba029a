/* The redistribute planner.  A step changes one mesh dim's placement; it is valid only if
 * no later (inner) mesh dim shards a tensor dim the step shards or unshards, because a
 * tensor dim sharded over several mesh dims is chunked outer mesh dim first: the inner
 * shards must be undone before the outer one changes (PyTorch unshards nested dims from
 * the innermost out for the same reason).  Each mesh dim's placement is one of {source,
 * target, Replicate}, so the states number at most 3^ndim; Dijkstra over them finds the
 * cheapest valid order, including temporary unsharding when nesting requires it. */
#include "distributed/redistribute.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

const char *dt_step_name(dt_step_kind k) {
  static const char *const names[] = {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "chunk", "partition", "pad"};
  return names[k];
}

/* ---- cost model ---- */
/* The local bytes under placements p at coordinate c on mesh dim m, 0 on the others (coordinates
 * 0 hold the largest chunks: every rank prices the same plan). */
static double local_bytes_at(const dt_dspec *s, const dt_placement *p, int m, int c) {
  int coord[DT_MESH_MAX_DIMS] = {0};
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
  coord[m] = c;
  dt_dspec_local(s, p, coord, shape, off);
  return (double)dt_shape_numel(s->ndim, shape) * (double)dt_dtype_size(s->dtype);
}

static double local_bytes(const dt_dspec *s, const dt_placement *p) { return local_bytes_at(s, p, 0, 0); }

/* A gather of shards (or a scatter into them) on mesh dim m under sharded placements q: the
 * rank with the smallest chunk (the last) receives (sends) the most, the whole less its own --
 * (n - 1) chunks when they are even, less when they are not (no padding is sent). */
static double whole_less_smallest(const dt_dspec *s, const dt_placement *q, int m, int n) {
  double whole = 0;
  for (int c = 0; c < n; c++) whole += local_bytes_at(s, q, m, c);
  return whole - local_bytes_at(s, q, m, n - 1);
}

static void price(const dt_dspec *s, const dt_placement *p, dt_redist_step *st) {
  int n = s->mesh->shape[st->mesh_dim], m = st->mesh_dim;
  double B = local_bytes(s, p), moved = 0;
  dt_placement q[DT_MESH_MAX_DIMS];
  memcpy(q, p, sizeof q);
  q[m] = st->to;
  switch (st->kind) {
  case DT_STEP_ALL_GATHER: moved = whole_less_smallest(s, p, m, n); break;
  case DT_STEP_ALL_REDUCE: moved = 2.0 * (n - 1) / n * B; break;
  case DT_STEP_REDUCE_SCATTER: moved = whole_less_smallest(s, q, m, n); break;
  case DT_STEP_ALL_TO_ALL: moved = (double)(n - 1) / n * B; break;
  default: break;
  }
  st->bytes = moved;
  int local = st->kind == DT_STEP_CHUNK || st->kind == DT_STEP_PARTITION || st->kind == DT_STEP_PAD;
  /* a chunk, and a partition into avg/max/min (every rank keeps its replica), are free */
  int free_local = st->kind == DT_STEP_CHUNK || (st->kind == DT_STEP_PARTITION && st->to.op != DT_REDUCE_SUM &&
                                                 st->to.op != DT_REDUCE_PRODUCT);
  st->cost = !local ? DT_COST_ALPHA + DT_COST_BETA * moved : free_local ? 0 : DT_COST_LOCAL_PARTIAL;
}

/* ---- validity ---- */
static int inner_shards(const dt_mesh *mesh, const dt_placement *p, int m, int d) {
  for (int j = m + 1; j < mesh->ndim; j++) /* a Shard over a size-1 mesh dim chunks nothing */
    if (p[j].kind == DT_SHARD && p[j].dim == d && mesh->shape[j] > 1) return 1;
  return 0;
}

/* The step kind for a -> b on mesh dim m in state p, or -1 if not allowed now. */
static int step_kind(const dt_mesh *mesh, const dt_placement *p, int m, dt_placement a, dt_placement b,
                     int allow_partial) {
  if ((a.kind == DT_SHARD && inner_shards(mesh, p, m, a.dim)) || (b.kind == DT_SHARD && inner_shards(mesh, p, m, b.dim)))
    return -1;
  if (a.kind == DT_SHARD && b.kind == DT_REPLICATE) return DT_STEP_ALL_GATHER;
  if (a.kind == DT_SHARD && b.kind == DT_SHARD) return DT_STEP_ALL_TO_ALL;
  if (a.kind == DT_PARTIAL && b.kind == DT_REPLICATE) return DT_STEP_ALL_REDUCE;
  if (a.kind == DT_PARTIAL && b.kind == DT_SHARD) return DT_STEP_REDUCE_SCATTER;
  if (a.kind == DT_REPLICATE && b.kind == DT_SHARD) return DT_STEP_CHUNK;
  if (a.kind == DT_REPLICATE && b.kind == DT_PARTIAL && allow_partial) return DT_STEP_PARTITION;
  /* avg has no identity to pad with (n x / n is not x): it goes through Replicate */
  if (a.kind == DT_SHARD && b.kind == DT_PARTIAL && allow_partial && b.op != DT_REDUCE_AVG) return DT_STEP_PAD;
  return -1;
}

/* Folds all_gather b into the all_gather a just before it (other mesh dims) when one
 * all_gather over the group of both costs less: the bytes are the same ((N-1) blocks either
 * way), the latency terms fewer. */
static int merge_gathers(dt_redist_step *a, const dt_redist_step *b) {
  if (a->kind != DT_STEP_ALL_GATHER || b->kind != DT_STEP_ALL_GATHER || (a->mask & b->mask)) return 0;
  double bytes = a->bytes + b->bytes, cost = DT_COST_ALPHA + DT_COST_BETA * bytes;
  if (cost >= a->cost + b->cost) return 0;
  a->mask |= b->mask;
  a->mesh_dim = a->mesh_dim < b->mesh_dim ? a->mesh_dim : b->mesh_dim;
  a->bytes = bytes, a->cost = cost;
  return 1;
}

/* ---- search ---- */
#define MAX_STATES 81 /* 3^DT_MESH_MAX_DIMS */

static void decode(int code, int ndim, const dt_placement *src, const dt_placement *to, dt_placement *p) {
  for (int i = 0; i < ndim; i++, code /= 3) {
    int c = code % 3;
    p[i] = c == 0 ? src[i] : c == 1 ? to[i] : (dt_placement){DT_REPLICATE, 0, DT_REDUCE_SUM, 0};
  }
}

int dt_redistribute_search(const dt_dspec *s, const dt_placement *to, int allow_partial, dt_redist_plan *plan) {
  int ndim = s->mesh->ndim, nstates = 1;
  for (int i = 0; i < ndim; i++) nstates *= 3;
  double dist[MAX_STATES];
  int prev[MAX_STATES], done[MAX_STATES] = {0};
  dt_redist_step via[MAX_STATES];
  for (int i = 0; i < nstates; i++) dist[i] = INFINITY, prev[i] = -1;
  dist[0] = 0;
  int goal = -1;
  for (;;) {
    int u = -1;
    for (int i = 0; i < nstates; i++)
      if (!done[i] && dist[i] < INFINITY && (u < 0 || dist[i] < dist[u])) u = i;
    if (u < 0) break;
    done[u] = 1;
    dt_placement p[DT_MESH_MAX_DIMS];
    decode(u, ndim, s->p, to, p);
    int at_goal = 1;
    for (int i = 0; i < ndim; i++) at_goal &= s->mesh->shape[i] == 1 || dt_placement_equal(p[i], to[i]);
    if (at_goal) {
      goal = u;
      break;
    }
    for (int m = 0, pow = 1; m < ndim; m++, pow *= 3) {
      if (s->mesh->shape[m] == 1) continue; /* size-1 mesh dims: every placement is the same data */
      int cur = (u / pow) % 3;
      for (int c = 0; c < 3; c++) {
        dt_placement b = c == 0 ? s->p[m] : c == 1 ? to[m] : (dt_placement){DT_REPLICATE, 0, DT_REDUCE_SUM, 0};
        if (c == cur || dt_placement_equal(p[m], b)) continue;
        int k = step_kind(s->mesh, p, m, p[m], b, allow_partial);
        if (k < 0) continue;
        dt_redist_step st = {(dt_step_kind)k, m, 1 << m, p[m], b, 0, 0};
        price(s, p, &st);
        int v = u + (c - cur) * pow;
        /* ties: fewer steps win through the tiny per-step term */
        double d = dist[u] + st.cost + 1e-12;
        if (!done[v] && d < dist[v]) dist[v] = d, prev[v] = u, via[v] = st;
      }
    }
  }
  if (goal < 0) {
    char a[256], b[256];
    return dt_error("redistribute: no plan from %s to %s", dt_placements_format(s->p, ndim, a, sizeof a),
                    dt_placements_format(to, ndim, b, sizeof b));
  }
  int chain[MAX_STATES], n = 0, first = plan->n;
  for (int v = goal; v != 0; v = prev[v]) chain[n++] = v;
  for (int i = n - 1; i >= 0 && plan->n < DT_PLAN_MAX_STEPS; i--) {
    dt_redist_step st = via[chain[i]], *last = plan->n > first ? &plan->steps[plan->n - 1] : NULL;
    if (last && merge_gathers(last, &st)) continue;
    plan->steps[plan->n++] = st;
  }
  for (int i = first; i < plan->n; i++) plan->cost += plan->steps[i].cost, plan->bytes += plan->steps[i].bytes;
  return DT_OK;
}

/* ---- cache ---- */
typedef struct plan_key {
  int mesh_ndim, ndim, elsize, allow_partial;
  int mesh_shape[DT_MESH_MAX_DIMS];
  int64_t shape[DT_MAX_DIMS];
  dt_placement from[DT_MESH_MAX_DIMS], to[DT_MESH_MAX_DIMS];
} plan_key;

typedef struct plan_entry {
  plan_key key;
  dt_redist_plan plan;
} plan_entry;

#define PLAN_CACHE_SIZE 256 /* small, round-robin replacement: plans are cheap to rebuild */

struct dt_plan_cache {
  plan_entry e[PLAN_CACHE_SIZE];
  int n, next;
};

void dt_plan_cache_free(dt_plan_cache *c) { free(c); }

/* The fields of p its kind uses, the others zero: keys compare with memcmp. */
static dt_placement canonical(dt_placement p) {
  int sharded = p.kind == DT_SHARD || p.kind == DT_STRIDED_SHARD;
  return (dt_placement){p.kind, sharded ? p.dim : 0, p.kind == DT_PARTIAL ? p.op : 0,
                        p.kind == DT_STRIDED_SHARD ? p.split : 0};
}

static void make_key(const dt_dspec *s, const dt_placement *to, int allow_partial, plan_key *k) {
  memset(k, 0, sizeof *k); /* padding too: keys compare with memcmp */
  k->mesh_ndim = s->mesh->ndim, k->ndim = s->ndim, k->elsize = (int)dt_dtype_size(s->dtype);
  k->allow_partial = allow_partial;
  for (int i = 0; i < s->mesh->ndim; i++) {
    k->mesh_shape[i] = s->mesh->shape[i];
    k->from[i] = canonical(s->p[i]), k->to[i] = canonical(to[i]);
  }
  memcpy(k->shape, s->shape, sizeof(int64_t) * (size_t)s->ndim);
}

int dt_redistribute_plan(dt_context *ctx, const dt_dspec *s, const dt_placement *to, int allow_partial,
                         const dt_redist_plan **out) {
  if (!ctx->plans && !(ctx->plans = calloc(1, sizeof *ctx->plans))) return dt_error("redistribute: out of memory");
  dt_plan_cache *c = ctx->plans;
  plan_key k;
  make_key(s, to, allow_partial, &k);
  for (int i = 0; i < c->n; i++)
    if (memcmp(&c->e[i].key, &k, sizeof k) == 0) {
      *out = &c->e[i].plan;
      return DT_OK;
    }
  dt_redist_plan plan = {0};
  int strided = dt_dspec_has_strided(s->p, s->mesh->ndim) || dt_dspec_has_strided(to, s->mesh->ndim);
  if ((strided ? dt_strided_plan(s, to, allow_partial, &plan) : dt_redistribute_search(s, to, allow_partial, &plan)) != DT_OK)
    return DT_ERR;
  int slot = c->n < PLAN_CACHE_SIZE ? c->n++ : (c->next++ % PLAN_CACHE_SIZE);
  c->e[slot].key = k;
  c->e[slot].plan = plan;
  *out = &c->e[slot].plan;
  return DT_OK;
}
