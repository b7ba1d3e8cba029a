/* The sharding dispatcher (see dispatch.h): schema key, decision cache, strategy pricing,
 * then redistribute -> local kernel -> wrap. */
#include "distributed/dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "distributed/dtensor_api.h"
#include "distributed/redistribute.h"
#include "distributed/rng.h"
#include "distributed/sharding_rules/sharding_rules.h"

/* The schema key: int64 words, as many as the call needs -- a header (op, counts, the static
 * args' flags, the mesh shape: the mesh enters by shape only, since the decision and its
 * costs do not depend on which ranks form it), the static ints, then one record per input
 * (kind, ndim, dtype; its shape; a word per mesh dim for its placement).  Hashed and compared
 * by length, so a small call hashes a few words and cat of many tensors has room. */
#define KEY_SMALL 160 /* words on the stack: 8 inputs of 8 dims on a 4-d mesh */

static size_t key_max(int nin) {
  return 3 + DT_MESH_MAX_DIMS + DT_OP_MAX_INTS + (size_t)nin * (1 + DT_MAX_DIMS + DT_MESH_MAX_DIMS);
}

static int64_t pack_placement(dt_placement p) { /* split <= DT_STRIDED_MAX_SPLIT: 24 bits */
  return (int64_t)p.kind | (int64_t)p.op << 4 | (int64_t)(p.kind == DT_STRIDED_SHARD ? p.split : 0) << 8 |
         (int64_t)(uint32_t)p.dim << 32;
}

/* Fills k (key_max(a->nin) words); returns the word count. */
static int make_key(dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp, const dt_dspec *const *specs,
                    const dt_mesh *mesh, int64_t *k) {
  int n = 0;
  k[n++] = (int64_t)id | (int64_t)a->nin << 32;
  k[n++] = (int64_t)a->nints | (int64_t)(a->keepdim != 0) << 8 | (int64_t)(a->has_dtype != 0) << 9 |
           (int64_t)(a->has_dtype ? a->dtype : 0) << 16 | (int64_t)(uint32_t)a->flags << 32;
  k[n++] = (int64_t)a->nscalar | (int64_t)mesh->ndim << 8;
  for (int m = 0; m < mesh->ndim; m++) k[n++] = mesh->shape[m];
  for (int i = 0; i < a->nints; i++) k[n++] = a->ints[i];
  for (int i = 0; i < a->nin; i++) {
    const dt_dspec *s = sp[i];
    if (!s) { /* absent */
      k[n++] = 0;
      continue;
    }
    k[n++] = (specs[i] ? 1 : 2) | (int64_t)s->ndim << 8 | (int64_t)s->dtype << 16; /* 2: plain taken as replicated */
    for (int d = 0; d < s->ndim; d++) k[n++] = s->shape[d];
    for (int m = 0; m < mesh->ndim; m++) k[n++] = pack_placement(s->p[m]);
  }
  return n;
}

/* A decision: the chosen strategy (its rows after the key), the outputs' global metadata,
 * its cost; a named decision also keeps its caller's blob. */
typedef struct entry {
  uint64_t hash;
  int nwords, nout;
  dt_strategy choice;
  dt_meta out[DT_OP_MAX_OUT];
  double cost;
  char *blob;
  size_t nblob;
  int64_t key[]; /* nwords, then choice.nin rows */
} entry;

static entry *entry_new(const int64_t *k, int nwords, uint64_t h, int nin) {
  entry *e = calloc(1, sizeof *e + sizeof(int64_t) * (size_t)nwords + sizeof(dt_placement_row) * (size_t)nin);
  if (!e) return NULL;
  e->hash = h, e->nwords = nwords;
  memcpy(e->key, k, sizeof(int64_t) * (size_t)nwords);
  e->choice.nin = nin;
  e->choice.in = (dt_placement_row *)(e->key + nwords);
  return e;
}

static void entry_free(entry *e) {
  if (e) free(e->blob);
  free(e);
}

struct dt_dispatch_state {
  entry **slots; /* open addressing, power-of-2 capacity */
  int cap, n;
  dt_dispatch_stats stats;
  int warned_1d;
  int log; /* DTLUA_LOG names "dispatch" */
  char *explain; /* the last dt.explain text */
  const entry *last; /* the decision the last call executed (graph capture copies it) */
};

static dt_dispatch_state *state(dt_context *ctx) {
  if (!ctx->dispatch && (ctx->dispatch = calloc(1, sizeof(dt_dispatch_state)))) {
    const char *log = getenv("DTLUA_LOG");
    ctx->dispatch->log = log && strstr(log, "dispatch");
  }
  return ctx->dispatch;
}

void dt_dispatch_state_free(dt_dispatch_state *s) {
  if (!s) return;
  for (int i = 0; i < s->cap; i++) entry_free(s->slots[i]);
  free(s->slots);
  free(s->explain);
  free(s);
}

const char *dt_dispatch_explain_text(dt_context *ctx) {
  return ctx->dispatch && ctx->dispatch->explain ? ctx->dispatch->explain : "";
}

void dt_dispatch_cache_clear(dt_context *ctx) {
  dt_dispatch_state *s = ctx->dispatch;
  if (!s) return;
  for (int i = 0; i < s->cap; i++) entry_free(s->slots[i]), s->slots[i] = NULL;
  s->n = 0;
}

dt_dispatch_stats dt_dispatch_get_stats(dt_context *ctx) {
  dt_dispatch_state *s = state(ctx);
  return s ? s->stats : (dt_dispatch_stats){0};
}

/* FNV-1a over the key's words, with a shift to mix the high bits down. */
static uint64_t hash(const int64_t *k, int nwords) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < nwords; i++) {
    h = (h ^ (uint64_t)k[i]) * 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

static entry *lookup(dt_dispatch_state *s, const int64_t *k, int nwords, uint64_t h) {
  if (!s->cap) return NULL;
  for (int i = (int)(h & (uint64_t)(s->cap - 1));; i = (i + 1) & (s->cap - 1)) {
    entry *e = s->slots[i];
    if (!e) return NULL;
    if (e->hash == h && e->nwords == nwords && memcmp(e->key, k, sizeof(int64_t) * (size_t)nwords) == 0) return e;
  }
}

static int insert(dt_dispatch_state *s, entry *e) {
  if (2 * (s->n + 1) > s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    entry **slots = calloc((size_t)cap, sizeof *slots);
    if (!slots) return dt_error("dispatch: out of memory");
    for (int i = 0; i < s->cap; i++) {
      if (!s->slots[i]) continue;
      int j = (int)(s->slots[i]->hash & (uint64_t)(cap - 1));
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots, s->cap = cap;
  }
  int j = (int)(e->hash & (uint64_t)(s->cap - 1));
  while (s->slots[j]) j = (j + 1) & (s->cap - 1);
  s->slots[j] = e;
  s->n++;
  return DT_OK;
}

/* Redistribution cost of every input to the strategy's placements; < 0 when impossible.
 * *moved counts the inputs that change (the first tie-break). */
/* The bytes the collectives of plan take as input on a rank (PyTorch's count: an all_gather's
 * shard, a reduce_scatter's whole tensor), from the model's bytes moved. */
static double input_bytes(const dt_mesh *mesh, const dt_redist_plan *plan) {
  double in = 0;
  for (int i = 0; i < plan->n; i++) {
    const dt_redist_step *st = &plan->steps[i];
    double g = 1;
    for (int m = 0; m < mesh->ndim; m++)
      if (st->mask >> m & 1) g *= mesh->shape[m];
    if (g < 2) continue;
    if (st->kind == DT_STEP_ALL_GATHER) in += st->bytes / (g - 1);
    else if (st->kind == DT_STEP_ALL_REDUCE) in += st->bytes * g / (2 * (g - 1));
    else if (st->kind == DT_STEP_REDUCE_SCATTER || st->kind == DT_STEP_ALL_TO_ALL) in += st->bytes * g / (g - 1);
  }
  return in;
}

static double price(dt_context *ctx, const dt_op_args *a, const dt_dspec *const *sp, const dt_strategy *st, int *moved,
                    double *in_bytes) {
  double cost = 0;
  *moved = 0, *in_bytes = 0;
  for (int i = 0; i < a->nin; i++) {
    if (!sp[i] || dt_placements_equal(sp[i]->p, st->in[i], sp[i]->mesh->ndim)) continue;
    const dt_redist_plan *plan;
    if (dt_redistribute_plan(ctx, sp[i], st->in[i], 1, &plan) != DT_OK) return -1;
    cost += plan->cost;
    *in_bytes += input_bytes(sp[i]->mesh, plan);
    ++*moved;
  }
  return cost;
}

/* A Partial that a matmul creates on a mesh dim by moving a shard there (an all_to_all to
 * shard the contracted dim) defers a reduction of the output, it does not avoid it: priced as
 * the reduce_scatter that would end it, so a plan that gathers the smaller operand and keeps
 * the output sharded (PyTorch's) is not outbid by one that leaves the whole output to reduce.
 * A Partial an input already had on that mesh dim, or one made with no shard moved there
 * (row-parallel, or a replicated operand chunked locally), costs nothing here. */
static double deferred_reduction(const dt_op_def *op, const dt_meta *out, const dt_dspec *const *sp, int nin,
                                 const dt_strategy *st, double moves_cost) {
  if (op->sharding != DT_SHARDING_LINALG || moves_cost <= 0 || !sp[0]) return 0;
  const dt_mesh *mesh = sp[0]->mesh;
  double bytes = (double)dt_dtype_size(out->dtype), cost = 0;
  for (int d = 0; d < out->ndim; d++) bytes *= (double)out->shape[d];
  for (int m = 0; m < mesh->ndim; m++)
    if (st->out[0][m].kind == DT_SHARD || st->out[0][m].kind == DT_STRIDED_SHARD) bytes /= mesh->shape[m];
  for (int m = 0; m < mesh->ndim; m++) {
    if (st->out[0][m].kind != DT_PARTIAL || mesh->shape[m] < 2) continue;
    int had = 0, moved = 0;
    for (int i = 0; i < nin; i++) {
      if (!sp[i]) continue;
      dt_placement p = sp[i]->p[m];
      had |= p.kind == DT_PARTIAL;
      moved |= (p.kind == DT_SHARD || p.kind == DT_STRIDED_SHARD) && !dt_placement_equal(p, st->in[i][m]);
    }
    if (!had && moved) cost += DT_COST_ALPHA + DT_COST_BETA * bytes * (mesh->shape[m] - 1) / mesh->shape[m];
  }
  return cost;
}

static void fmt_strategy(char *buf, size_t len, const dt_strategy *st, int nin, const dt_dspec *const *sp, int nout,
                         int mesh_ndim) {
  size_t at = 0;
  char p[128];
  for (int i = 0; i < nin && at < len; i++) {
    if (!sp[i]) continue;
    at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", dt_placements_format(st->in[i], mesh_ndim, p, sizeof p));
  }
  for (int o = 0; o < nout && at < len; o++)
    at += (size_t)snprintf(buf + at, len - at, "%s%s", o ? ", " : " -> ", dt_placements_format(st->out[o], mesh_ndim, p, sizeof p));
}

/* Appends one line to the explain text (out of memory: the line is dropped). */
static void explain_line(dt_dispatch_state *st, const char *line) {
  size_t old = st->explain ? strlen(st->explain) : 0, n = strlen(line);
  char *t = realloc(st->explain, old + n + 2);
  if (!t) return;
  memcpy(t + old, line, n);
  t[old + n] = '\n', t[old + n + 1] = 0;
  st->explain = t;
}

/* The strategy list of a miss, in one block: the strategies, their rows (nin each), the
 * rule's work rows, and the inputs' global headers.  Not zeroed (a miss would pay for
 * ~50 KB): rules start from dt_rule_strategy and push copies. */
typedef struct miss_block {
  dt_strategy *s;
  dt_placement_row *work;
  dt_tensor *g, **gin;
} miss_block;

static void *miss_alloc(int nin, miss_block *b) {
  size_t n = (size_t)nin;
  char *p = malloc(sizeof(dt_strategy) * DT_RULE_MAX_STRATEGIES + (sizeof(dt_tensor) + sizeof(dt_tensor *)) * n +
                          sizeof(dt_placement_row) * n * (DT_RULE_MAX_STRATEGIES + 1));
  if (!p) return NULL;
  b->s = (dt_strategy *)p;
  b->g = (dt_tensor *)(b->s + DT_RULE_MAX_STRATEGIES);
  b->gin = (dt_tensor **)(b->g + n);
  b->work = (dt_placement_row *)(b->gin + n);
  for (int k = 0; k < DT_RULE_MAX_STRATEGIES; k++) b->s[k].nin = nin, b->s[k].in = b->work + n * (size_t)(k + 1);
  return p;
}

/* The cheapest reachable strategy of s[0..n) (ties: fewer inputs moved, then fewer bytes into
 * collectives -- PyTorch's choice where the model cannot tell an all_gather of a shard from a
 * reduce_scatter of the whole --, then the rule's order), described line by line in explain
 * mode; -1 when none is reachable. */
static int cheapest(dt_context *ctx, const dt_op_def *op, const dt_meta *out, const dt_op_args *ga,
                    const dt_dspec *const *sp, const dt_strategy *s, int n, int nout, int nm, double *best_cost) {
  int best = -1, best_moved = 0, explain = ctx->modes.explain;
  double best_in = 0;
  char line[1024];
  for (int i = 0; i < n; i++) {
    int moved;
    double in;
    double cost = price(ctx, ga, sp, &s[i], &moved, &in);
    if (cost > 0) cost += deferred_reduction(op, out, sp, ga->nin, &s[i], cost);
    if (explain) {
      fmt_strategy(line, sizeof line - 64, &s[i], ga->nin, sp, nout, nm);
      size_t at = strlen(line);
      if (cost < 0) snprintf(line + at, sizeof line - at, "  (not reachable)");
      else snprintf(line + at, sizeof line - at, "  cost %.3g s, %d input(s) moved", cost, moved);
      explain_line(ctx->dispatch, line);
    }
    if (cost < 0) continue;
    if (best < 0 || cost < *best_cost || (cost == *best_cost && (moved < best_moved || (moved == best_moved && in < best_in))))
      best = i, *best_cost = cost, best_moved = moved, best_in = in;
  }
  if (explain && best >= 0) {
    fmt_strategy(line, sizeof line - 16, &s[best], ga->nin, sp, nout, nm);
    char chosen[1100];
    snprintf(chosen, sizeof chosen, "chosen: %s", line);
    explain_line(ctx->dispatch, chosen);
  }
  return best;
}

/* The families that know _StridedShard (pointwise, views) see it; for the others *out is a
 * copy of the specs with Replicate in its place, so that their strategies gather it first
 * (pricing and moving use the real specs).  *out stays NULL when nothing is hidden; one
 * block, freed by the caller. */
static int strided_hidden(const dt_op_def *op, int nin, const dt_dspec *const *sp, int nm, const dt_dspec ***out) {
  int any = 0;
  for (int i = 0; i < nin; i++) any |= sp[i] && dt_dspec_has_strided(sp[i]->p, nm);
  if (!any || op->sharding == DT_SHARDING_POINTWISE || op->sharding == DT_SHARDING_VIEW) return DT_OK;
  const dt_dspec **ptrs = malloc((sizeof *ptrs + sizeof(dt_dspec)) * (size_t)nin);
  if (!ptrs) return dt_error("%s: out of memory", op->name);
  dt_dspec *copies = (dt_dspec *)(ptrs + nin);
  for (int i = 0; i < nin; i++) {
    ptrs[i] = sp[i];
    if (!sp[i]) continue;
    copies[i] = *sp[i];
    for (int m = 0; m < nm; m++) /* a Shard beside a _StridedShard of its dim chunks its blocks: hidden too */
      if (copies[i].p[m].kind == DT_STRIDED_SHARD ||
          (copies[i].p[m].kind == DT_SHARD && dt_dspec_split_of(sp[i]->p, nm, copies[i].p[m].dim)))
        copies[i].p[m] = dt_rule_R();
    ptrs[i] = &copies[i];
  }
  *out = ptrs;
  return DT_OK;
}

/* A miss: the shape rule on global metadata, the family rule, the cheapest strategy. */
static int decide(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp, int nm, entry *e) {
  const dt_op_def *op = dt_op_get(id);
  miss_block b;
  void *blk = miss_alloc(a->nin, &b);
  if (!blk) return dt_error("%s: out of memory", op->name);
  for (int i = 0; i < a->nin; i++) {
    b.gin[i] = NULL;
    if (!sp[i]) continue;
    dt_dspec_global_header(sp[i], &b.g[i]);
    b.gin[i] = &b.g[i];
  }
  dt_op_args ga = *a;
  ga.in = b.gin;
  ga.op = id, ga.name = op->name;
  if (dt_op_shape(op, &ga, e->out) != DT_OK) return free(blk), DT_ERR;
  e->nout = op->nout;
  const dt_dspec **rsp = NULL;
  if (strided_hidden(op, a->nin, sp, nm, &rsp) != DT_OK) return free(blk), DT_ERR;
  dt_rule_args r = {.op = id, .a = &ga, .spec = rsp ? rsp : sp, .mesh_ndim = nm, .out = e->out, .nout = op->nout,
                    .work = b.work};
  int n = 0;
  const dt_rule_override *ov = &ctx->rule_overrides[id];
  int st = ov->fn ? ov->fn(ctx, ov->ud, &r, b.s, &n) : dt_rule_for(id)(&r, b.s, &n);
  free(rsp);
  if (st != DT_OK) return free(blk), DT_ERR;
  double cost = 0;
  int best = cheapest(ctx, op, e->out, &ga, sp, b.s, n, op->nout, nm, &cost);
  if (best >= 0) dt_strategy_copy(&e->choice, &b.s[best]);
  free(blk);
  if (best < 0) {
    char p[128];
    dt_placements_format(sp[0]->p, nm, p, sizeof p);
    if (op->flags & DT_OPF_INPLACE)
      return dt_error("%s: an in-place op keeps its input's placements %s, and no strategy can; redistribute it first",
                      op->name, p);
    return dt_error("%s: no sharding strategy fits these DTensor arguments", op->name);
  }
  e->cost = cost;
  if ((op->flags & DT_OPF_INPLACE) && !dt_placements_equal(sp[0]->p, e->choice.out[0], nm))
    return dt_error("%s: an in-place op would change its input's placements", op->name);
  return DT_OK;
}

int dt_dispatch_check_plain(dt_context *ctx, const char *name, const char *what, const dt_tensor *t, int implicit) {
  if (dt_tensor_numel(t) != 1 && !implicit)
    return dt_error("%s: %s is a plain tensor of %lld elements mixed with DTensors; convert it with "
                    "dt.from_local or dt.distribute_tensor (or run inside dt.implicit_replication)",
                    name, what, (long long)dt_tensor_numel(t));
  if (t->ndim == 1 && dt_tensor_numel(t) == 1 && !implicit && !state(ctx)->warned_1d) {
    state(ctx)->warned_1d = 1;
    fprintf(stderr, "warning: %s: a 1-element 1-d plain tensor mixed with DTensors is taken as replicated "
                    "(use a 0-d tensor or a number to silence this)\n", name);
  }
  return DT_OK;
}

/* Plain tensors beside DTensors: one element (or under implicit replication) -> a
 * replicated spec in tmp; anything else is an error (naming a list element for the ops
 * that take a list). */
static int plain_specs(dt_context *ctx, const dt_op_def *op, const dt_op_args *a, const dt_dspec *const *specs,
                       dt_mesh *mesh, dt_dspec *tmp, const dt_dspec **sp) {
  for (int i = 0; i < a->nin; i++) {
    sp[i] = specs[i];
    if (sp[i] || !a->in[i]) continue;
    const dt_tensor *t = a->in[i];
    char what[48];
    int list = strstr(op->schema, "Tensor...") != NULL; /* not on the hit path of DTensor-only calls */
    snprintf(what, sizeof what, list ? "element %d of the list" : "argument %d", i + 1);
    if (dt_dispatch_check_plain(ctx, op->name, what, t, ctx->modes.implicit_replication > 0) != DT_OK) return DT_ERR;
    memset(&tmp[i], 0, sizeof tmp[i]);
    tmp[i].mesh = mesh;
    tmp[i].ndim = t->ndim;
    tmp[i].dtype = t->dtype;
    memcpy(tmp[i].shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    sp[i] = &tmp[i];
  }
  return DT_OK;
}

/* One line per decision (doc/dispatch.md "Logging"); moves "" when nothing moves, cost < 0
 * when not priced. */
static void log_line(dt_context *ctx, const char *name, const char *in, const char *choice, const char *moves, int hit,
                     double cost) {
  char c[64] = "";
  if (cost >= 0) snprintf(c, sizeof c, " | cost %.3g s", cost);
  fprintf(stderr, "[dispatch rank %d] %s(%s): chose %s | cache %s | %s%s\n", ctx->rank, name, in, choice,
          hit ? "hit" : "miss", *moves ? moves : "no redistribution", c);
}

static void log_decision(dt_context *ctx, const char *name, int nin, const dt_dspec *const *sp, const entry *e, int hit,
                         int nm) {
  char in[1024] = "", ch[512], mv[1024] = "", p[128], q[128], sh[160];
  size_t at = 0, am = 0;
  for (int i = 0; i < nin && at < sizeof in && am < sizeof mv; i++) {
    if (!sp[i]) continue;
    at += (size_t)snprintf(in + at, sizeof in - at, "%s%s%s %s", at ? ", " : "", dt_dtype_name(sp[i]->dtype),
                           dt_format_shape(sh, sizeof sh, sp[i]->ndim, sp[i]->shape), dt_placements_format(sp[i]->p, nm, p, sizeof p));
    if (!dt_placements_equal(sp[i]->p, e->choice.in[i], nm))
      am += (size_t)snprintf(mv + am, sizeof mv - am, "%sinput %d %s -> %s", am ? ", " : "redistribute ", i + 1,
                             dt_placements_format(sp[i]->p, nm, p, sizeof p), dt_placements_format(e->choice.in[i], nm, q, sizeof q));
  }
  fmt_strategy(ch, sizeof ch, &e->choice, nin, sp, e->nout, nm);
  log_line(ctx, name, in, ch, mv, hit, e->cost);
}

/* Explain mode: the strategies of this call, decided without the cache; runs nothing. */
static int explain(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp, const dt_mesh *mesh,
                   const int64_t *k, int nw) {
  dt_dispatch_state *s = ctx->dispatch;
  entry *ex = entry_new(k, nw, 0, a->nin);
  if (!ex) return dt_error("%s: out of memory", dt_op_get(id)->name);
  free(s->explain);
  s->explain = NULL;
  char in[512] = "", p[128];
  size_t at = 0;
  for (int i = 0; i < a->nin && at < sizeof in; i++)
    if (sp[i]) at += (size_t)snprintf(in + at, sizeof in - at, "%s%s", at ? ", " : "", dt_placements_format(sp[i]->p, mesh->ndim, p, sizeof p));
  char head[700];
  snprintf(head, sizeof head, "%s(%s): strategies (input placements -> output placements):", dt_op_get(id)->name, in);
  explain_line(s, head);
  int st = decide(ctx, id, a, sp, mesh->ndim, ex);
  entry_free(ex);
  return st != DT_OK ? DT_ERR : dt_error("explained");
}

/* Redistributes the inputs to the decision's placements, runs the local op on them and
 * checks the local results' shapes against the output specs. */
static int run_local(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp,
                     const dt_strategy *choice, int nm, dt_dspec **out_spec, dt_tensor **loc, dt_tensor **out) {
  const dt_op_def *op = dt_op_get(id);
  int st = DT_OK;
  for (int i = 0; i < a->nin; i++) loc[i] = NULL;
  for (int i = 0; i < a->nin && st == DT_OK; i++) {
    if (!a->in[i]) continue;
    if (dt_placements_equal(sp[i]->p, choice->in[i], nm)) {
      dt_tensor_retain(loc[i] = a->in[i]);
      continue;
    }
    const dt_redist_plan *plan;
    st = dt_redistribute_plan(ctx, sp[i], choice->in[i], 1, &plan);
    if (st == DT_OK) st = dt_redistribute_exec(ctx, sp[i], plan, a->in[i], &loc[i]);
  }
  if (st == DT_OK) {
    dt_op_args la = *a;
    la.in = loc;
    dt_local_args_fn local_args = dt_local_args_for(id);
    if (local_args) st = local_args(id, sp, choice, (const dt_dspec *const *)out_spec, &la);
    if (st == DT_OK) st = dt_op_call(id, &la, out);
  }
  for (int i = 0; i < a->nin; i++)
    if (loc[i]) dt_tensor_release(loc[i]);
  if (st != DT_OK) return DT_ERR;
  for (int o = 0; o < op->nout; o++) { /* a rule that would give wrong shapes must not pass silently */
    int nd;
    int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
    dt_dspec_my_local(out_spec[o], &nd, shape, off);
    if (nd != out[o]->ndim || memcmp(shape, out[o]->shape, sizeof(int64_t) * (size_t)nd) != 0)
      return dt_error("%s: the local result's shape does not match the chosen output placements (a wrong sharding rule?)", op->name);
  }
  return DT_OK;
}

/* The execution steps of a decision: the output specs, then (on the mesh) the inputs
 * redistributed to the choice's placements and the local op.  sp: every input's spec, plain
 * ones taken as replicated. */
static int execute(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp, dt_mesh *mesh,
                   const dt_strategy *choice, const dt_meta *meta, dt_tensor **loc, dt_tensor **out,
                   dt_dspec **out_spec) {
  const dt_op_def *op = dt_op_get(id);
  /* the output specs first: nothing to undo if they fail */
  int nout = op->nout;
  for (int o = 0; o < nout; o++) out_spec[o] = NULL, out[o] = NULL;
  for (int o = 0; o < nout; o++) {
    dt_dspec t = {.mesh = mesh, .ndim = meta[o].ndim, .dtype = meta[o].dtype};
    memcpy(t.p, choice->out[o], sizeof t.p);
    memcpy(t.shape, meta[o].shape, sizeof t.shape);
    if (!(out_spec[o] = dt_dspec_copy(&t))) goto fail;
  }
  if (mesh->me < 0) { /* off-mesh: global metadata, empty locals */
    for (int o = 0; o < nout; o++) {
      int64_t zero = 0;
      out[o] = (op->flags & DT_OPF_INPLACE) ? (dt_tensor_retain(a->in[0]), a->in[0])
                                             : dt_tensor_empty(meta[o].dtype, 1, &zero, DT_HOST);
      if (!out[o]) goto fail;
    }
    return DT_OK;
  }
  if (run_local(ctx, id, a, sp, choice, mesh->ndim, out_spec, loc, out) == DT_OK) return DT_OK;
fail:
  for (int o = 0; o < nout; o++) {
    if (out[o]) dt_tensor_release(out[o]);
    dt_dspec_free(out_spec[o]);
    out[o] = NULL, out_spec[o] = NULL;
  }
  return DT_ERR;
}

/* Per-call scratch: on the stack for a few inputs, allocated for cat/stack of many. */
#define SMALL_IN 8
typedef struct scratch {
  dt_dspec *tmp;
  const dt_dspec **sp;
  dt_tensor **loc;
  int64_t *key;
} scratch;

static int dispatch_with(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *specs, dt_mesh *mesh,
                         scratch *sc, dt_tensor **out, dt_dspec **out_spec) {
  const dt_op_def *op = dt_op_get(id);
  dt_dispatch_state *s = ctx->dispatch;
  const dt_dspec *const *sp = sc->sp;
  if (plain_specs(ctx, op, a, specs, mesh, sc->tmp, sc->sp) != DT_OK) return DT_ERR;
  s->last = NULL;
  if (op->flags & DT_OPF_RANDOM) { /* fixed placements, no priced choice: dist/rng.c */
    if (!ctx->modes.explain) return dt_rng_dispatch(ctx, id, a, sp, out, out_spec);
    char line[700];
    free(s->explain);
    s->explain = NULL;
    dt_rng_explain(id, a, sp[0], line, sizeof line);
    explain_line(s, line);
    return dt_error("explained");
  }
  int nw = make_key(id, a, sp, specs, mesh, sc->key);
  if (ctx->modes.explain) return explain(ctx, id, a, sp, mesh, sc->key, nw);
  uint64_t h = hash(sc->key, nw);
  entry *e = lookup(s, sc->key, nw, h);
  int hit = e != NULL;
  if (hit) s->stats.hits++;
  else {
    s->stats.misses++;
    if (!(e = entry_new(sc->key, nw, h, a->nin))) return dt_error("%s: out of memory", op->name);
    if (decide(ctx, id, a, sp, mesh->ndim, e) != DT_OK || insert(s, e) != DT_OK) return entry_free(e), DT_ERR;
  }
  if (s->log) log_decision(ctx, op->name, a->nin, sp, e, hit, mesh->ndim);
  s->last = e;
  return execute(ctx, id, a, sp, mesh, &e->choice, e->out, sc->loc, out, out_spec);
}

/* The mesh of the DTensor operands, or an error when they are on different meshes. */
static int common_mesh(const dt_op_def *op, const dt_op_args *a, const dt_dspec *const *specs, dt_mesh **mesh) {
  *mesh = NULL;
  for (int i = 0; i < a->nin; i++) {
    const dt_dspec *si = specs[i];
    if (!si) continue;
    if (!*mesh) *mesh = si->mesh;
    else if (si->mesh != *mesh && !dt_mesh_equal(si->mesh, *mesh)) {
      char b1[256], b2[256];
      return dt_error("%s: DTensor operands on different meshes: %s and %s", op->name,
                      dt_mesh_format(*mesh, b1, sizeof b1), dt_mesh_format(si->mesh, b2, sizeof b2));
    }
  }
  return DT_OK;
}

/* t[k] = v on DTensors (the WRITE family): each rank writes its own block of dst, in place,
 * through dt_dtensor_write; no strategy is priced.  The values borrow the operands. */
static int dispatch_write(dt_context *ctx, const dt_op_def *op, const dt_op_args *a, const dt_dspec *const *specs,
                          dt_tensor **out, dt_dspec **out_spec) {
  if (ctx->modes.explain) return dt_error("%s: writes into DTensors are not explained (nothing is chosen)", op->name);
  dt_value dst, src;
  dt_value_init(&dst, a->in[0], (dt_dspec *)specs[0]);
  dt_value_init(&src, a->in[1], (dt_dspec *)specs[1]);
  dt_index_key k;
  dt_index_key_from_args(a, &k);
  if (dt_dtensor_write(ctx, &dst, &k, &src) != DT_OK) return DT_ERR;
  if (!(out_spec[0] = dt_dspec_copy(specs[0]))) return dt_error("%s: out of memory", a->name);
  dt_tensor_retain(out[0] = a->in[0]);
  return DT_OK;
}

int dt_dispatch(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *specs, dt_tensor **out,
                dt_dspec **out_spec) {
  const dt_op_def *op = dt_op_get(id);
  if (op->sharding == DT_SHARDING_WRITE) {
    if (ctx->dispatch) ctx->dispatch->last = NULL;
    return dispatch_write(ctx, op, a, specs, out, out_spec);
  }
  if (!ctx->rule_overrides[id].fn && !dt_rule_for(id) && !(op->flags & DT_OPF_RANDOM))
    return dt_error("%s: no sharding rule for DTensor arguments yet; use to_local()/full_tensor()", op->name);
  if (!state(ctx)) return dt_error("%s: out of memory", op->name);
  dt_mesh *mesh;
  if (common_mesh(op, a, specs, &mesh) != DT_OK) return DT_ERR;
  dt_dspec tmp[SMALL_IN];
  const dt_dspec *sp[SMALL_IN];
  dt_tensor *loc[SMALL_IN];
  int64_t key[KEY_SMALL];
  scratch sc = {tmp, sp, loc, key};
  if (a->nin <= SMALL_IN) return dispatch_with(ctx, id, a, specs, mesh, &sc, out, out_spec);
  size_t n = (size_t)a->nin;
  char *big = malloc(sizeof(dt_dspec) * n + (sizeof(dt_dspec *) + sizeof(dt_tensor *)) * n + sizeof(int64_t) * key_max(a->nin));
  if (!big) return dt_error("%s: out of memory for %d operands", op->name, a->nin);
  sc.tmp = (dt_dspec *)big;
  sc.key = (int64_t *)(sc.tmp + n);
  sc.sp = (const dt_dspec **)(sc.key + key_max(a->nin));
  sc.loc = (dt_tensor **)(sc.sp + n);
  int st = dispatch_with(ctx, id, a, specs, mesh, &sc, out, out_spec);
  free(big);
  return st;
}

/* ---- decisions taken, for graph capture and replay ---- */

int dt_dispatch_last_decision(dt_context *ctx, dt_dispatch_decision *d) {
  const entry *e = ctx->dispatch ? ctx->dispatch->last : NULL;
  d->in = NULL, d->nin = 0, d->nout = 0;
  if (!e) return 0;
  if (e->choice.nin && !(d->in = malloc(sizeof *d->in * (size_t)e->choice.nin))) return -1;
  d->nin = e->choice.nin, d->nout = e->nout;
  if (d->nin) memcpy(d->in, e->choice.in, sizeof *d->in * (size_t)d->nin);
  memcpy(d->out, e->choice.out, sizeof d->out);
  memcpy(d->meta, e->out, sizeof d->meta);
  return 1;
}

int dt_dispatch_run_decision(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *specs,
                             const dt_dispatch_decision *d, dt_tensor **out, dt_dspec **out_spec) {
  const dt_op_def *op = dt_op_get(id);
  dt_mesh *mesh;
  if (common_mesh(op, a, specs, &mesh) != DT_OK) return DT_ERR;
  if (!mesh || a->nin != d->nin) return dt_error("%s: replayed with operands that do not fit its decision", op->name);
  dt_strategy choice = {.nin = d->nin, .in = d->in};
  memcpy(choice.out, d->out, sizeof choice.out);
  dt_dspec tmp_small[SMALL_IN], *tmp = tmp_small;
  const dt_dspec *sp_small[SMALL_IN], **sp = sp_small;
  dt_tensor *loc_small[SMALL_IN], **loc = loc_small;
  char *big = NULL;
  if (a->nin > SMALL_IN) {
    size_t n = (size_t)a->nin;
    if (!(big = malloc((sizeof(dt_dspec) + sizeof(dt_dspec *) + sizeof(dt_tensor *)) * n)))
      return dt_error("%s: out of memory for %d operands", op->name, a->nin);
    tmp = (dt_dspec *)big, sp = (const dt_dspec **)(tmp + n), loc = (dt_tensor **)(sp + n);
  }
  int st = plain_specs(ctx, op, a, specs, mesh, tmp, sp);
  if (st == DT_OK) st = execute(ctx, id, a, sp, mesh, &choice, d->meta, loc, out, out_spec);
  free(big);
  return st;
}

/* ---- named decisions (the ops composed from other ops): the same cache, stats and log ---- */

/* The key: a marker word (op keys start with an op id >= 0), the name and the static key as
 * length + bytes, then per value its ndim, dtype, shape, mesh shape and placements. */
static size_t named_max(size_t nname, size_t nstat, int n) {
  return 3 + (nname + 7) / 8 + (nstat + 7) / 8 + (size_t)n * (1 + DT_MAX_DIMS + 2 * DT_MESH_MAX_DIMS);
}

static int put_bytes(int64_t *k, int at, const char *b, size_t len) {
  size_t w = (len + 7) / 8;
  k[at++] = (int64_t)len;
  if (w) k[at + (int)w - 1] = 0, memcpy(k + at, b, len);
  return at + (int)w;
}

static int named_key(const char *name, const char *stat, size_t nstat, const dt_value *const *v, int n, int64_t *k) {
  int at = 0;
  k[at++] = -1;
  at = put_bytes(k, at, name, strlen(name));
  at = put_bytes(k, at, stat, nstat);
  for (int i = 0; i < n; i++) {
    const dt_dspec *s = v[i]->spec;
    k[at++] = s->ndim | (int64_t)s->dtype << 8 | (int64_t)s->mesh->ndim << 16;
    for (int d = 0; d < s->ndim; d++) k[at++] = s->shape[d];
    for (int m = 0; m < s->mesh->ndim; m++) k[at++] = s->mesh->shape[m], k[at++] = pack_placement(s->p[m]);
  }
  return at;
}

/* Finds the entry of a named key (*e NULL when absent) and its hash; scratch in k. */
static int named_find(dt_context *ctx, const char *name, const char *stat, size_t nstat, const dt_value *const *v,
                      int n, int64_t **k, int *nw, uint64_t *h, entry **e) {
  for (int i = 0; i < n; i++)
    if (!v[i]->spec) return dt_error("%s: named decisions take DTensors (value %d is a plain tensor)", name, i + 1);
  if (!state(ctx) || !(*k = malloc(sizeof(int64_t) * named_max(strlen(name), nstat, n))))
    return dt_error("%s: out of memory", name);
  *nw = named_key(name, stat, nstat, v, n, *k);
  *h = hash(*k, *nw);
  *e = lookup(ctx->dispatch, *k, *nw, *h);
  return DT_OK;
}

static void log_named(dt_context *ctx, const char *name, const dt_value *const *v, int n, const entry *e, int hit) {
  const dt_dspec *small[SMALL_IN] = {0}, **sp = n <= SMALL_IN ? small : malloc(sizeof *sp * (size_t)n);
  if (!sp || n == 0) return;
  for (int i = 0; i < n; i++) sp[i] = v[i]->spec;
  log_decision(ctx, name, n, sp, e, hit, sp[0]->mesh->ndim);
  if (sp != small) free(sp);
}

int dt_dispatch_named_lookup(dt_context *ctx, const char *name, const char *stat, size_t nstat,
                             const dt_value *const *v, int n, int quiet, const char **blob, size_t *nblob, int *hit) {
  int64_t *k;
  int nw;
  uint64_t h;
  entry *e;
  if (named_find(ctx, name, stat, nstat, v, n, &k, &nw, &h, &e) != DT_OK) return DT_ERR;
  free(k);
  *hit = e != NULL;
  if (!e) return DT_OK;
  *blob = e->blob, *nblob = e->nblob;
  if (quiet) return DT_OK;
  ctx->dispatch->stats.hits++;
  if (ctx->dispatch->log) log_named(ctx, name, v, n, e, 1);
  return DT_OK;
}

/* Fills a named entry from d (rows for n values). */
static int named_fill(entry *e, const char *name, const dt_value *const *v, int n, const dt_named_decision *d) {
  char *blob = malloc(d->nblob ? d->nblob : 1);
  if (!blob) return dt_error("%s: out of memory", name);
  memcpy(blob, d->blob, d->nblob);
  free(e->blob);
  e->blob = blob, e->nblob = d->nblob;
  for (int i = 0; i < n; i++) memcpy(e->choice.in[i], d->in ? d->in[i] : v[i]->spec->p, sizeof e->choice.in[i]);
  memset(e->choice.out, 0, sizeof e->choice.out);
  if (d->nout) memcpy(e->choice.out, d->out, sizeof *d->out * (size_t)d->nout);
  e->nout = d->nout, e->cost = d->cost;
  return DT_OK;
}

int dt_dispatch_named_store(dt_context *ctx, const char *name, const char *stat, size_t nstat,
                            const dt_value *const *v, int n, int quiet, const dt_named_decision *d) {
  if (d->nout < 0 || d->nout > DT_OP_MAX_OUT)
    return dt_error("%s: a decision has at most %d output placement lists, got %d", name, DT_OP_MAX_OUT, d->nout);
  int64_t *k;
  int nw;
  uint64_t h;
  entry *e;
  if (named_find(ctx, name, stat, nstat, v, n, &k, &nw, &h, &e) != DT_OK) return DT_ERR;
  int fresh = !e;
  if (fresh && !(e = entry_new(k, nw, h, n))) return free(k), dt_error("%s: out of memory", name);
  free(k);
  if (named_fill(e, name, v, n, d) != DT_OK || (fresh && insert(ctx->dispatch, e) != DT_OK)) {
    if (fresh) entry_free(e);
    return DT_ERR;
  }
  if (quiet) return DT_OK;
  ctx->dispatch->stats.misses++;
  if (ctx->dispatch->log) log_named(ctx, name, v, n, e, 0);
  return DT_OK;
}
