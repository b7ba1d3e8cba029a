/* The sharding dispatcher (see dispatch.h): schema key, decision cache, strategy pricing,
 * then redistribute -> local kernel -> wrap. */
#include "distributed/dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "distributed/redistribute.h"
#include "distributed/rng.h"
#include "distributed/sharding_rules/sharding_rules.h"

/* Everything a decision depends on; zeroed before filling so that memcmp/hash see no
 * padding garbage.  The mesh enters by shape only: the decision and its costs do not
 * depend on which ranks form it. */
typedef struct key {
  int op, nin, nints, keepdim, flags, has_dtype, dtype, nscalar;
  int mesh_ndim, mesh_shape[DT_MESH_MAX_DIMS];
  int64_t ints[DT_OP_MAX_INTS];
  struct {
    int kind; /* 0 absent, 1 DTensor, 2 plain taken as replicated */
    int ndim, dtype;
    int64_t shape[DT_MAX_DIMS];
    dt_placement p[DT_MESH_MAX_DIMS];
  } in[DT_DISPATCH_MAX_IN];
} key;

typedef struct entry {
  key k;
  dt_strategy choice;
  dt_meta out[DT_OP_MAX_OUT];
  double cost;
} entry;

struct dt_dispatch_state {
  entry **slots; /* open addressing, power-of-2 capacity */
  int cap, n;
  dt_dispatch_stats stats;
  int warned_1d;
  int log; /* DTLUA_LOG names "dispatch" */
  char *explain; /* the last dt.explain text */
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
  for (int i = 0; i < s->cap; i++) free(s->slots[i]);
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
  for (int i = 0; i < s->cap; i++) free(s->slots[i]), s->slots[i] = NULL;
  s->n = 0;
}

dt_dispatch_stats dt_dispatch_get_stats(dt_context *ctx) {
  dt_dispatch_state *s = state(ctx);
  return s ? s->stats : (dt_dispatch_stats){0};
}

/* FNV-1a over 8-byte words (the key is ~700 bytes: byte-wise hashing was most of a hit). */
static uint64_t hash(const key *k) {
  const unsigned char *p = (const unsigned char *)k;
  uint64_t h = 1469598103934665603ull, w;
  size_t i = 0;
  for (; i + 8 <= sizeof *k; i += 8) {
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static entry *lookup(dt_dispatch_state *s, const key *k, uint64_t h) {
  if (!s->cap) return NULL;
  for (int i = (int)(h & (uint64_t)(s->cap - 1));; i = (i + 1) & (s->cap - 1)) {
    if (!s->slots[i]) return NULL;
    if (memcmp(&s->slots[i]->k, k, sizeof *k) == 0) return s->slots[i];
  }
}

static int insert(dt_dispatch_state *s, entry *e) {
  if (2 * (s->n + 1) > s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    entry **slots = calloc((size_t)cap, sizeof *slots);
    if (!slots) return dt_error("dispatch: out of memory");
    for (int i = 0; i < s->cap; i++) {
      if (!s->slots[i]) continue;
      int j = (int)(hash(&s->slots[i]->k) & (uint64_t)(cap - 1));
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots, s->cap = cap;
  }
  int j = (int)(hash(&e->k) & (uint64_t)(s->cap - 1));
  while (s->slots[j]) j = (j + 1) & (s->cap - 1);
  s->slots[j] = e;
  s->n++;
  return DT_OK;
}

/* Redistribution cost of every input to the strategy's placements; < 0 when impossible.
 * *moved counts the inputs that change (the first tie-break). */
static double price(dt_context *ctx, const dt_op_args *a, const dt_dspec *const *sp, const dt_strategy *st, int *moved) {
  double cost = 0;
  *moved = 0;
  for (int i = 0; i < a->nin; i++) {
    if (!sp[i] || dt_placements_equal(sp[i]->p, st->in[i], sp[i]->mesh->ndim)) continue;
    const dt_redist_plan *plan;
    if (dt_redistribute_plan(ctx, sp[i], st->in[i], 0, &plan) != DT_OK) return -1;
    cost += plan->cost;
    ++*moved;
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

/* A miss: the shape rule on global metadata, the family rule, the cheapest strategy. */
/* Appends one line to the explain text (out of memory: the line is dropped). */
static void explain_line(dt_dispatch_state *st, const char *line) {
  size_t old = st->explain ? strlen(st->explain) : 0, n = strlen(line);
  char *t = realloc(st->explain, old + n + 2);
  if (!t) return;
  memcpy(t + old, line, n);
  t[old + n] = '\n', t[old + n + 1] = 0;
  st->explain = t;
}

static int decide(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp,
                  entry *e) {
  const dt_op_def *op = dt_op_get(id);
  dt_tensor g[DT_DISPATCH_MAX_IN];
  dt_tensor *gin[DT_DISPATCH_MAX_IN] = {0};
  for (int i = 0; i < a->nin; i++) {
    if (!sp[i]) continue;
    dt_dspec_global_header(sp[i], &g[i]);
    gin[i] = &g[i];
  }
  dt_op_args ga = *a;
  ga.in = gin;
  ga.op = id, ga.name = op->name;
  if (op->shape(&ga, e->out) != DT_OK) return DT_ERR;
  dt_rule_args r = {.op = id, .a = &ga, .spec = sp, .mesh_ndim = e->k.mesh_ndim, .out = e->out, .nout = op->nout};
  dt_strategy *s = malloc(sizeof *s * DT_RULE_MAX_STRATEGIES);
  if (!s) return dt_error("%s: out of memory", op->name);
  int n = 0;
  const dt_rule_override *ov = &ctx->rule_overrides[id];
  int explain = ctx->modes.explain;
  int st = ov->fn ? ov->fn(ctx, ov->ud, &r, s, &n) : dt_rule_for(id)(&r, s, &n);
  if (st != DT_OK) return free(s), DT_ERR;
  int best = -1, best_moved = 0;
  double best_cost = 0;
  char line[1024];
  for (int i = 0; i < n; i++) {
    int moved;
    double cost = price(ctx, &ga, sp, &s[i], &moved);
    if (explain) {
      fmt_strategy(line, sizeof line - 64, &s[i], a->nin, sp, op->nout, e->k.mesh_ndim);
      size_t at = strlen(line);
      if (cost < 0) snprintf(line + at, sizeof line - at, "  (not reachable)");
      else snprintf(line + at, sizeof line - at, "  cost %.3g s, %d input(s) moved", cost, moved);
      explain_line(ctx->dispatch, line);
    }
    if (cost < 0) continue;
    if (best < 0 || cost < best_cost || (cost == best_cost && moved < best_moved)) best = i, best_cost = cost, best_moved = moved;
  }
  if (explain && best >= 0) {
    fmt_strategy(line, sizeof line - 16, &s[best], a->nin, sp, op->nout, e->k.mesh_ndim);
    char chosen[1100];
    snprintf(chosen, sizeof chosen, "chosen: %s", line);
    explain_line(ctx->dispatch, chosen);
  }
  if (best < 0) {
    free(s);
    char p[128];
    dt_placements_format(sp[0]->p, e->k.mesh_ndim, p, sizeof p);
    if (op->flags & DT_OPF_INPLACE)
      return dt_error("%s: an in-place op keeps its input's placements %s, and no strategy can; redistribute it first",
                      op->name, p);
    return dt_error("%s: no sharding strategy fits these DTensor arguments", op->name);
  }
  e->choice = s[best];
  e->cost = best_cost;
  free(s);
  if ((op->flags & DT_OPF_INPLACE) && !dt_placements_equal(sp[0]->p, e->choice.out[0], e->k.mesh_ndim))
    return dt_error("%s: an in-place op would change its input's placements", op->name);
  return DT_OK;
}

static void make_key(dt_op_id id, const dt_op_args *a, const dt_dspec *const *sp, const dt_dspec *const *specs,
                     const dt_mesh *mesh, key *k) {
  memset(k, 0, sizeof *k);
  k->op = id, k->nin = a->nin, k->nints = a->nints, k->keepdim = a->keepdim, k->flags = a->flags;
  k->has_dtype = a->has_dtype, k->dtype = a->has_dtype ? (int)a->dtype : 0, k->nscalar = a->nscalar;
  k->mesh_ndim = mesh->ndim;
  memcpy(k->mesh_shape, mesh->shape, sizeof(int) * (size_t)mesh->ndim);
  memcpy(k->ints, a->ints, sizeof(int64_t) * (size_t)a->nints);
  for (int i = 0; i < a->nin; i++) {
    if (!sp[i]) continue;
    k->in[i].kind = specs[i] ? 1 : 2;
    k->in[i].ndim = sp[i]->ndim;
    k->in[i].dtype = (int)sp[i]->dtype;
    memcpy(k->in[i].shape, sp[i]->shape, sizeof(int64_t) * (size_t)sp[i]->ndim);
    memcpy(k->in[i].p, sp[i]->p, sizeof(dt_placement) * (size_t)mesh->ndim);
  }
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
 * replicated spec in tmp; anything else is an error. */
static int plain_specs(dt_context *ctx, const char *name, const dt_op_args *a, const dt_dspec *const *specs,
                       dt_mesh *mesh, dt_dspec *tmp, const dt_dspec **sp) {
  for (int i = 0; i < a->nin; i++) {
    sp[i] = specs[i];
    if (sp[i] || !a->in[i]) continue;
    const dt_tensor *t = a->in[i];
    char what[32];
    snprintf(what, sizeof what, "argument %d", i + 1);
    if (dt_dispatch_check_plain(ctx, name, what, t, ctx->modes.implicit_replication > 0) != DT_OK) return DT_ERR;
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

static void log_decision(dt_context *ctx, const char *name, const dt_op_args *a, const dt_dspec *const *sp,
                         const entry *e, int hit, int nout) {
  char in[1024] = "", ch[512], mv[1024] = "", p[128], q[128], sh[160];
  size_t at = 0, am = 0;
  int nm = e->k.mesh_ndim;
  for (int i = 0; i < a->nin && at < sizeof in && am < sizeof mv; i++) {
    if (!sp[i]) continue;
    at += (size_t)snprintf(in + at, sizeof in - at, "%s%s%s %s", at ? ", " : "", dt_dtype_name(sp[i]->dtype),
                           dt_format_shape(sh, sizeof sh, sp[i]->ndim, sp[i]->shape), dt_placements_format(sp[i]->p, nm, p, sizeof p));
    if (!dt_placements_equal(sp[i]->p, e->choice.in[i], nm))
      am += (size_t)snprintf(mv + am, sizeof mv - am, "%sinput %d %s -> %s", am ? ", " : "redistribute ", i + 1,
                             dt_placements_format(sp[i]->p, nm, p, sizeof p), dt_placements_format(e->choice.in[i], nm, q, sizeof q));
  }
  fmt_strategy(ch, sizeof ch, &e->choice, a->nin, sp, nout, nm);
  log_line(ctx, name, in, ch, mv, hit, e->cost);
}

int dt_dispatch(dt_context *ctx, dt_op_id id, const dt_op_args *a, const dt_dspec *const *specs, dt_tensor **out,
                dt_dspec **out_spec) {
  const dt_op_def *op = dt_op_get(id);
  if (!ctx->rule_overrides[id].fn && !dt_rule_for(id) && !(op->flags & DT_OPF_RANDOM))
    return dt_error("%s: no sharding rule for DTensor arguments yet; use to_local()/full_tensor()", op->name);
  if (a->nin > DT_DISPATCH_MAX_IN) return dt_error("%s: too many DTensor operands", op->name);
  dt_dispatch_state *s = state(ctx);
  if (!s) return dt_error("%s: out of memory", op->name);
  dt_mesh *mesh = NULL;
  for (int i = 0; i < a->nin; i++) {
    const dt_dspec *si = specs[i];
    if (!si) continue;
    if (!mesh) mesh = si->mesh;
    else if (si->mesh != mesh && !dt_mesh_equal(si->mesh, mesh)) {
      char b1[256], b2[256];
      return dt_error("%s: DTensor operands on different meshes: %s and %s", op->name,
                      dt_mesh_format(mesh, b1, sizeof b1), dt_mesh_format(si->mesh, b2, sizeof b2));
    }
  }
  dt_dspec tmp[DT_DISPATCH_MAX_IN];
  const dt_dspec *sp[DT_DISPATCH_MAX_IN] = {0};
  if (plain_specs(ctx, op->name, a, specs, mesh, tmp, sp) != DT_OK) return DT_ERR;
  if (op->flags & DT_OPF_RANDOM) { /* fixed placements, no priced choice: dist/rng.c */
    if (!ctx->modes.explain) return dt_rng_dispatch(ctx, id, a, sp, out, out_spec);
    char line[700];
    free(s->explain);
    s->explain = NULL;
    dt_rng_explain(id, a, sp[0], line, sizeof line);
    explain_line(s, line);
    return dt_error("explained");
  }

  key k;
  make_key(id, a, sp, specs, mesh, &k);
  if (ctx->modes.explain) {
    entry ex = {.k = k};
    free(s->explain);
    s->explain = NULL;
    char in[512] = "", p[128];
    size_t at = 0;
    for (int i = 0; i < a->nin && at < sizeof in; i++)
      if (sp[i]) at += (size_t)snprintf(in + at, sizeof in - at, "%s%s", at ? ", " : "", dt_placements_format(sp[i]->p, mesh->ndim, p, sizeof p));
    char head[700];
    snprintf(head, sizeof head, "%s(%s): strategies (input placements -> output placements):", op->name, in);
    explain_line(s, head);
    if (decide(ctx, id, a, sp, &ex) != DT_OK) return DT_ERR;
    return dt_error("explained");
  }
  uint64_t h = hash(&k);
  entry *e = lookup(s, &k, h);
  int hit = e != NULL;
  if (hit) s->stats.hits++;
  else {
    s->stats.misses++;
    e = malloc(sizeof *e);
    if (!e) return dt_error("%s: out of memory", op->name);
    e->k = k;
    if (decide(ctx, id, a, sp, e) != DT_OK || insert(s, e) != DT_OK) return free(e), DT_ERR;
  }
  if (s->log) log_decision(ctx, op->name, a, sp, e, hit, op->nout);

  /* the output specs first: nothing to undo if they fail */
  int nout = op->nout;
  for (int o = 0; o < nout; o++) out_spec[o] = NULL, out[o] = NULL;
  for (int o = 0; o < nout; o++) {
    dt_dspec t = {.mesh = mesh, .ndim = e->out[o].ndim, .dtype = e->out[o].dtype};
    memcpy(t.p, e->choice.out[o], sizeof t.p);
    memcpy(t.shape, e->out[o].shape, sizeof t.shape);
    if (!(out_spec[o] = dt_dspec_copy(&t))) goto fail;
  }
  if (mesh->me < 0) { /* off-mesh: global metadata, empty locals */
    for (int o = 0; o < nout; o++) {
      int64_t zero = 0;
      out[o] = (op->flags & DT_OPF_INPLACE) ? (dt_tensor_retain(a->in[0]), a->in[0])
                                             : dt_tensor_empty(e->out[o].dtype, 1, &zero, DT_HOST);
      if (!out[o]) goto fail;
    }
    return DT_OK;
  }
  dt_tensor *loc[DT_DISPATCH_MAX_IN] = {0};
  int st = DT_OK;
  for (int i = 0; i < a->nin && st == DT_OK; i++) {
    if (!a->in[i]) continue;
    if (dt_placements_equal(sp[i]->p, e->choice.in[i], mesh->ndim)) {
      dt_tensor_retain(loc[i] = a->in[i]);
      continue;
    }
    const dt_redist_plan *plan;
    st = dt_redistribute_plan(ctx, sp[i], e->choice.in[i], 0, &plan);
    if (st == DT_OK) st = dt_redistribute_exec(ctx, sp[i], plan, a->in[i], &loc[i]);
  }
  if (st == DT_OK) {
    dt_op_args la = *a;
    la.in = loc;
    if (dt_rule_for(id) == dt_rule_view) st = dt_rule_view_local_args(id, sp[0], out_spec[0], &la);
    if (st == DT_OK) st = dt_op_call(id, &la, out);
  }
  for (int i = 0; i < a->nin; i++)
    if (loc[i]) dt_tensor_release(loc[i]);
  if (st != DT_OK) goto fail;
  for (int o = 0; o < nout; o++) { /* a rule that would give wrong shapes must not pass silently */
    int nd;
    int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
    dt_dspec_my_local(out_spec[o], &nd, shape, off);
    if (nd != out[o]->ndim || memcmp(shape, out[o]->shape, sizeof(int64_t) * (size_t)nd) != 0) {
      dt_error("%s: the local result's shape does not match the chosen output placements (a wrong sharding rule?)", op->name);
      goto fail;
    }
  }
  return DT_OK;
fail:
  for (int o = 0; o < nout; o++) {
    if (out[o]) dt_tensor_release(out[o]);
    dt_dspec_free(out_spec[o]);
    out[o] = NULL, out_spec[o] = NULL;
  }
  return DT_ERR;
}

/* ---- decisions taken in Lua (lua/dtensor/lua_decisions.lua): counted and logged here ---- */

int dt_dispatch_logging(dt_context *ctx) {
  dt_dispatch_state *s = state(ctx);
  return s && s->log;
}

void dt_dispatch_note_lua(dt_context *ctx, const char *name, const char *inputs, const char *choice, const char *moves,
                          int hit, double cost) {
  dt_dispatch_state *s = state(ctx);
  if (!s) return;
  if (hit) s->stats.hits++;
  else s->stats.misses++;
  if (s->log) log_line(ctx, name, inputs, choice, moves, hit, cost);
}
