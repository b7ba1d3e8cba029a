/* Shape-polymorphic graphs (dt.compile(fn, {dynamic = true}), doc/compile.md "Dynamic shapes").
 *
 * A graph is made general over sizes by unifying two recordings of the same function that
 * differ only in the sizes of their tensor arguments (dt_graph_generalize): every argument dim
 * whose size differs is a symbol (equal pairs of sizes share one, as PyTorch's duck sizing),
 * every static arg that differs is fitted as c * (a product of up to three symbols) -- a size,
 * a numel, a reshape target, the n of a mean's backward -- and must fit one way only; every
 * other difference (an op, a slot, a placement, a Lua read of a size that changed, a size read
 * on an intermediate tensor) leaves the graph static.  Two points, not one, because the
 * values the autograd rules and the library compute from sizes in C are not tracked: a
 * second recording tells a size-derived arg from a constant that happens to equal it.
 * Sizes 0 and 1 are specialised (a guard on the size itself), as PyTorch does.
 *
 * Replay binds the symbols from the arguments (the guards), evaluates each node's size args,
 * recomputes a plain node's output metadata with the op's shape rule and a random op's
 * generator words from its numel; DTensor ops go to the dispatcher, whose cache gives the
 * decision for the current sizes (the cheapest strategy can change with them: even or uneven
 * shards), so a replay runs what eager runs.  All_reduce packing and the direct local
 * kernels of DTensor ops are planned for fixed sizes and are off in a dynamic graph; buffer
 * reuse keeps a released buffer only for a replay of the same sizes (re-planned per shape). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "capture/graph_impl.h"
#include "distributed/mesh.h"
#include "ops/ops.h"
#include "distributed/rng.h"
#include "ops/random.h"

#define DYN_MAX_SYMS 8
#define DYN_MAX_DEG 3
#define DYN_MAX_SHAPES 32
#define SMALL_IN 16

typedef struct sym_expr {
  int on;    /* 0: the recorded constant */
  double c;  /* value = c * prod(s[sym[i]]) */
  int nsym;
  int sym[DYN_MAX_DEG];
} sym_expr;

typedef struct dyn_info {
  int nsyms;
  int64_t v1[DYN_MAX_SYMS], v2[DYN_MAX_SYMS]; /* each symbol's size in the two recordings */
  int64_t val[DYN_MAX_SYMS];                  /* bound by the last match */
  int (*dim_sym)[DT_MAX_DIMS];                /* per guard, per dim: -1 a constant, else the symbol */
  int *contig;                                /* per guard: must be contiguous (its strides follow its shape) */
  int64_t mesh_lcm;                           /* DTensor arguments: the lcm of their meshes' sizes (0: none) */
  int even[DYN_MAX_SYMS];                     /* each symbol divisible by mesh_lcm (even shards) or not */
  struct {
    int64_t v[DYN_MAX_SYMS];
    long long replays;
  } shapes[DYN_MAX_SHAPES];
  int nshapes;
  long long other_replays; /* replays of shapes beyond DYN_MAX_SHAPES */
  char *header;
} dyn_info;

/* ---- expressions ---- */
static double expr_value(const sym_expr *e, const int64_t *s) {
  double v = e->c;
  for (int i = 0; i < e->nsym; i++) v *= (double)s[e->sym[i]];
  return v;
}

static void expr_text(const sym_expr *e, char *buf, size_t len) {
  size_t at = 0;
  if (e->c != 1) at += (size_t)snprintf(buf, len, "%.17g*", e->c);
  for (int i = 0; i < e->nsym && at < len; i++) at += (size_t)snprintf(buf + at, len - at, "%ss%d", i ? "*" : "", e->sym[i]);
}

/* Tries every monomial of degree dg over the symbols from `from` on (a multiset). */
static int try_monomials(const dyn_info *d, double v1, double v2, int integer, int dg, int from, sym_expr *cur,
                         sym_expr *found) {
  if (cur->nsym == dg) {
    double m1 = 1, m2 = 1;
    for (int i = 0; i < dg; i++) m1 *= (double)d->v1[cur->sym[i]], m2 *= (double)d->v2[cur->sym[i]];
    double c = v1 / m1;
    if (c == 0 || (integer && (fmod(v1, m1) != 0 || fabs(c) > 1e15)) || c * m2 != v2 || c * m1 != v1) return 0;
    if (found->on) return 2; /* two readings: ambiguous */
    *found = *cur;
    found->on = 1, found->c = c;
    return 1;
  }
  int n = 0;
  for (int s = from; s < d->nsyms; s++) {
    cur->sym[cur->nsym++] = s;
    int r = try_monomials(d, v1, v2, integer, dg, s, cur, found);
    cur->nsym--;
    if (r == 2) return 2;
    n |= r;
  }
  return n;
}

/* The one expression c * monomial that gives v1 and v2 at the two recordings' sizes; 0 when
 * none or more than one does (the arg then keeps the graph static). */
static int fit(const dyn_info *d, double v1, double v2, int integer, sym_expr *e) {
  memset(e, 0, sizeof *e);
  for (int dg = 1; dg <= DYN_MAX_DEG; dg++) {
    sym_expr cur = {0};
    if (try_monomials(d, v1, v2, integer, dg, 0, &cur, e) == 2) return 0;
  }
  return e->on;
}

/* ---- unification of two recordings ---- */
static int contiguous(const dt_guard *g) {
  int64_t st = 1;
  for (int d = g->ndim - 1; d >= 0; d--) {
    if (g->shape[d] != 1 && g->stride[d] != st) return 0;
    st *= g->shape[d];
  }
  return 1;
}

static const int64_t *guard_sizes(const dt_guard *g) { return g->spec ? g->spec->shape : g->shape; }

/* The guard of tensor argument i (the guards cover every Lua argument, tensors in order). */
static int guard_of_arg(const dt_graph *g, int i) {
  for (int k = 0; k < g->nguards; k++)
    if (g->guards[k].kind == DT_GUARD_TENSOR && i-- == 0) return k;
  return 0;
}

static int64_t lcm(int64_t a, int64_t b) {
  int64_t x = a, y = b;
  while (y) {
    int64_t t = x % y;
    x = y, y = t;
  }
  return a / x * b;
}

static int symbol_of(dyn_info *d, int64_t a, int64_t b) {
  for (int s = 0; s < d->nsyms; s++)
    if (d->v1[s] == a && d->v2[s] == b) return s;
  if (d->nsyms == DYN_MAX_SYMS) return -1;
  d->v1[d->nsyms] = a, d->v2[d->nsyms] = b;
  return d->nsyms++;
}

#define WHY(...) (snprintf(why, len, __VA_ARGS__), 0)

static int unify_guards(const dt_graph *a, const dt_graph *b, dyn_info *d, char *why, size_t len) {
  if (a->nguards != b->nguards || a->nargs != b->nargs) return WHY("the arguments differ");
  for (int k = 0; k < a->nguards; k++) {
    const dt_guard *x = &a->guards[k], *y = &b->guards[k];
    for (int i = 0; i < DT_MAX_DIMS; i++) d->dim_sym[k][i] = -1;
    if (x->kind != y->kind) return WHY("argument %d changed kind", k + 1);
    if (x->kind != DT_GUARD_TENSOR) {
      if (!dt_guard_equal(x, y)) return WHY("argument %d (a Lua value, a constant of the graph) changed", k + 1);
      continue;
    }
    if (x->dtype != y->dtype || x->ndim != y->ndim || x->requires_grad != y->requires_grad || x->alias != y->alias ||
        !x->spec != !y->spec)
      return WHY("argument %d changed more than its sizes", k + 1);
    if (x->spec && (!dt_mesh_equal(x->spec->mesh, y->spec->mesh) || x->spec->ndim != y->spec->ndim ||
                    !dt_placements_equal(x->spec->p, y->spec->p, x->spec->mesh->ndim)))
      return WHY("argument %d changed its mesh or placements", k + 1);
    const int64_t *sa = guard_sizes(x), *sb = guard_sizes(y);
    int any = 0;
    for (int i = 0; i < x->ndim; i++) {
      if (sa[i] == sb[i]) continue;
      if (sa[i] < 2 || sb[i] < 2) return WHY("argument %d dim %d has size %lld then %lld (sizes 0 and 1 are specialised)", k + 1, i + 1, (long long)sa[i], (long long)sb[i]);
      if ((d->dim_sym[k][i] = symbol_of(d, sa[i], sb[i])) < 0) return WHY("more than %d symbolic sizes", DYN_MAX_SYMS);
      any = 1;
    }
    d->contig[k] = contiguous(x) && contiguous(y);
    if (!d->contig[k] && (any || memcmp(x->stride, y->stride, sizeof(int64_t) * (size_t)x->ndim) != 0 ||
                          (x->spec && memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim) != 0)))
      return WHY("argument %d is not contiguous and changed its sizes", k + 1);
  }
  if (!d->nsyms) return WHY("no size changed");
  /* the node list may depend on whether shards are even (autograd's conformance of uneven
   * gradients): a symbol keeps the evenness both recordings had */
  for (int k = 0; k < a->nguards; k++) {
    const dt_dspec *sp = a->guards[k].kind == DT_GUARD_TENSOR ? a->guards[k].spec : NULL;
    if (sp) d->mesh_lcm = lcm(d->mesh_lcm ? d->mesh_lcm : 1, sp->mesh->size);
  }
  for (int s = 0; d->mesh_lcm && s < d->nsyms; s++) {
    d->even[s] = d->v1[s] % d->mesh_lcm == 0;
    if (d->even[s] != (d->v2[s] % d->mesh_lcm == 0))
      return WHY("symbol s%d is %lld then %lld: one divides over the meshes' %lld ranks, the other not", s,
                 (long long)d->v1[s], (long long)d->v2[s], (long long)d->mesh_lcm);
  }
  return 1;
}

/* Lua reads of sizes: the same reads with the same values, none of an intermediate tensor and
 * none of a symbolic size (a Lua number derived from a size is a guard: it keeps it static). */
static int unify_reads(const dt_graph *a, const dt_graph *b, const dyn_info *d, char *why, size_t len) {
  if (a->nreads != b->nreads) return WHY("Lua read a different number of sizes");
  for (int r = 0; r < a->nreads; r++) {
    const size_read *x = &a->reads[r], *y = &b->reads[r];
    if (x->slot != MISSING && x->slot == y->slot && x->slot >= a->nargs + a->next)
      return WHY("Lua read the size of a tensor the graph made at %s (its sizes stay static)", y->where ? y->where : "?");
    if (x->slot != y->slot || x->dim != y->dim || x->hash != y->hash)
      return WHY("Lua read a size that changed at %s (a Lua number made from a size is a guard)", y->where ? y->where : "?");
    if (x->slot == MISSING) continue;
    if (x->slot < a->nargs) {
      int k = guard_of_arg(a, x->slot);
      for (int i = 0; i < a->guards[k].ndim; i++)
        if ((x->dim < 0 || x->dim == i) && d->dim_sym[k][i] >= 0)
          return WHY("Lua read symbolic size s%d at %s", d->dim_sym[k][i], y->where ? y->where : "?");
    }
  }
  return 1;
}

static int unify_ints(const dyn_info *d, const int64_t *x, const int64_t *y, int n, int skip0, int skip1, sym_expr **out) {
  for (int i = 0; i < n; i++) {
    if (x[i] == y[i] || i == skip0 || i == skip1) continue;
    if (!*out && !(*out = calloc((size_t)n, sizeof **out))) return -1;
    if (!fit(d, (double)x[i], (double)y[i], 1, &(*out)[i])) return 0;
  }
  return 1;
}

static int unify_node(const gnode *a, gnode *b, const dyn_info *d, char *why, size_t len) {
  /* a DTensor op's decision may differ (even or uneven shards): replay asks the dispatcher */
  if (a->kind != b->kind || a->op != b->op || a->nin != b->nin || a->nout != b->nout || a->inplace != b->inplace ||
      a->distributed != b->distributed || a->random != b->random || a->grad != b->grad || a->has_dec != b->has_dec ||
      (!a->distributed && a->kernel != b->kernel) || a->conv != b->conv || (a->kind == NODE_CONV && a->moves != b->moves))
    return WHY("the node at %s differs", b->where);
  b->moves |= a->moves;
  for (int i = 0; i < a->nin; i++)
    if (a->in[i] != b->in[i]) return WHY("the node at %s reads other values", b->where);
  for (int o = 0; o < a->nout; o++)
    if (a->out[o] != b->out[o]) return WHY("the node at %s differs", b->where);
  if (a->kind == NODE_CONV && a->conv == DT_CONV_TO_LOCAL) /* plain ops on a shard would see its local sizes */
    return WHY("to_local at %s: a shard's local sizes differ by rank and are not symbols", b->where);
  if (a->kind == NODE_CONV) {
    if (a->run_check != b->run_check || a->ndim != b->ndim || a->has_shape != b->has_shape || a->has_gp != b->has_gp ||
        !a->mesh != !b->mesh || (a->mesh && !dt_mesh_equal(a->mesh, b->mesh)) || !a->fspec != !b->fspec ||
        memcmp(&a->value, &b->value, sizeof a->value) != 0 || memcmp(a->p, b->p, sizeof a->p) != 0 ||
        memcmp(a->gp, b->gp, sizeof a->gp) != 0)
      return WHY("the conversion at %s differs", b->where);
    const int64_t *xs = a->fspec ? a->fspec->shape : a->shape, *ys = b->fspec ? b->fspec->shape : b->shape;
    int nd = a->fspec ? a->fspec->ndim : a->has_shape ? a->ndim : 0;
    if (a->fspec && (a->fspec->ndim != b->fspec->ndim || a->fspec->dtype != b->fspec->dtype ||
                     !dt_placements_equal(a->fspec->p, b->fspec->p, a->fspec->mesh->ndim)))
      return WHY("the conversion at %s differs", b->where);
    int r = unify_ints(d, xs, ys, nd, -1, -1, &b->shape_expr);
    if (r < 0) return -1;
    if (!r) return WHY("a size of the conversion at %s fits no expression of the symbols", b->where);
    return 1;
  }
  if (a->kind != NODE_OP) return 1;
  const dt_op_args *x = &a->args, *y = &b->args;
  if (x->nints != y->nints || x->nscalar != y->nscalar || x->keepdim != y->keepdim || x->flags != y->flags ||
      x->dtype != y->dtype || x->has_dtype != y->has_dtype)
    return WHY("the static args of %s at %s differ", x->name, b->where);
  int r = unify_ints(d, x->ints, y->ints, DT_OP_MAX_INTS, a->random ? DT_RNG_SLOT_SEED : -1,
                     a->random ? DT_RNG_SLOT_OFFSET : -1, &b->int_expr);
  if (r < 0) return -1;
  if (!r) return WHY("an int arg of %s at %s fits no single expression of the symbols", x->name, b->where);
  for (int i = 0; i < 4; i++) {
    if (memcmp(&x->scalar[i], &y->scalar[i], sizeof(double)) == 0) continue;
    if (!b->scalar_expr && !(b->scalar_expr = calloc(4, sizeof *b->scalar_expr))) return -1;
    if (!fit(d, x->scalar[i], y->scalar[i], 0, &b->scalar_expr[i]))
      return WHY("a number arg of %s at %s (%.17g then %.17g) fits no single expression of the symbols", x->name, b->where,
                 x->scalar[i], y->scalar[i]);
  }
  return 1;
}

/* The node's text with each number that differs between the recordings replaced by its
 * expression ("float32{s0,3}"); NULL when the texts do not line up. */
static char *symbolic_text(const dyn_info *d, const char *x, const char *y) {
  size_t cap = 2 * strlen(y) + 64, at = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  while (*x || *y) {
    if (at + 80 > cap) {
      char *t = realloc(s, cap *= 2);
      if (!t) return free(s), NULL;
      s = t;
    }
    if (*x >= '0' && *x <= '9' && *y >= '0' && *y <= '9') {
      char *ex, *ey;
      long long vx = strtoll(x, &ex, 10), vy = strtoll(y, &ey, 10);
      sym_expr e;
      if (vx == vy) at += (size_t)snprintf(s + at, cap - at, "%lld", vy);
      else if (fit(d, (double)vx, (double)vy, 1, &e)) expr_text(&e, s + at, cap - at), at += strlen(s + at);
      else at += (size_t)snprintf(s + at, cap - at, "?");
      x = ex, y = ey;
      continue;
    }
    if (*x != *y) return free(s), NULL;
    s[at++] = *y, x++, y++;
  }
  s[at] = 0;
  return s;
}

static void dyn_info_free(dyn_info *d) {
  if (!d) return;
  free(d->dim_sym), free(d->contig), free(d->header);
  free(d);
}

void dt_dyn_free_node(gnode *n) {
  free(n->int_expr), free(n->scalar_expr), free(n->shape_expr);
  n->int_expr = n->scalar_expr = n->shape_expr = NULL;
}

void dt_dyn_free(dt_graph *g) {
  dyn_info_free(g->dyn);
  g->dyn = NULL;
}

static char *make_header(const dt_graph *g, const dyn_info *d) {
  char buf[1024];
  size_t at = (size_t)snprintf(buf, sizeof buf, "dynamic: ");
  for (int s = 0; s < d->nsyms && at < sizeof buf; s++) {
    int k = -1, i = -1;
    for (int q = 0; q < g->nguards && k < 0; q++)
      for (int j = 0; j < g->guards[q].ndim && k < 0; j++)
        if (d->dim_sym[q][j] == s) k = q, i = j;
    at += (size_t)snprintf(buf + at, sizeof buf - at, "%ss%d = argument %d dim %d", s ? ", " : "", s, k + 1, i + 1);
  }
  if (at < sizeof buf) snprintf(buf + at, sizeof buf - at, " (each >= 2; other sizes static)");
  for (int s = 0; d->mesh_lcm && s < d->nsyms && at < sizeof buf; s++)
    at += (size_t)snprintf(buf + at, sizeof buf - at, "; s%d %sa multiple of %lld", s, d->even[s] ? "" : "not ", (long long)d->mesh_lcm);
  char *h = malloc(strlen(buf) + 1);
  if (h) strcpy(h, buf);
  return h;
}

int dt_graph_generalize(const dt_graph *a, dt_graph *b, char *why, size_t len) {
  if (a->dyn || b->dyn || a->trace || b->trace) return WHY("a graph is already dynamic");
  if (a->nnodes != b->nnodes || a->next != b->next || a->nret != b->nret || a->has_backward != b->has_backward ||
      a->modes.grad_enabled != b->modes.grad_enabled || a->modes.autocast_dtype != b->modes.autocast_dtype ||
      (a->modes.implicit_replication > 0) != (b->modes.implicit_replication > 0))
    return WHY("the two recordings differ in more than sizes (%d and %d nodes)", a->nnodes, b->nnodes);
  for (int e = 0; e < a->next; e++)
    if (!dt_guard_equal(&a->ext_guard[e], &b->ext_guard[e])) return WHY("an external tensor changed");
  for (int i = 0; i < a->nret; i++)
    if (a->ret_slot[i] != b->ret_slot[i]) return WHY("the returns differ");
  dyn_info *d = calloc(1, sizeof *d);
  if (!d || !(d->dim_sym = calloc((size_t)a->nguards + 1, sizeof *d->dim_sym)) ||
      !(d->contig = calloc((size_t)a->nguards + 1, sizeof *d->contig)))
    return dyn_info_free(d), dt_error("compile: out of memory"), -1;
  int r = unify_guards(a, b, d, why, len);
  if (r == 1) r = unify_reads(a, b, d, why, len);
  for (int k = 0; r == 1 && k < a->nnodes; k++) r = unify_node(&a->nodes[k], &b->nodes[k], d, why, len);
  if (r != 1) {
    for (int k = 0; k < b->nnodes; k++) dt_dyn_free_node(&b->nodes[k]);
    dyn_info_free(d);
    if (r < 0) dt_error("compile: out of memory");
    return r;
  }
  for (int k = 0; k < b->nnodes; k++) { /* the texts with their symbols */
    gnode *n = &b->nodes[k];
    char *t = n->desc && a->nodes[k].desc ? symbolic_text(d, a->nodes[k].desc, n->desc) : NULL;
    if (t) free(n->desc), n->desc = t;
  }
  d->header = make_header(b, d);
  b->dyn = d;
  /* what was planned for fixed sizes goes: the collective buckets (offsets by size), the
   * direct local kernels of DTensor ops (their output specs hold global sizes); random ops
   * stay live (their words come from their run) */
  for (int k = 0; k < b->nnodes; k++) b->nodes[k].coll = GCOLL_NONE, b->nodes[k].coll_comm = NULL, b->nodes[k].local_fast = 0;
  return dt_graph_passes(b) == DT_OK ? 1 : -1;
}

/* ---- replay ---- */
int dt_dyn_match(const dt_graph *g, const dt_guard *guards, int n) {
  dyn_info *d = g->dyn;
  int64_t val[DYN_MAX_SYMS];
  int bound = 0;
  if (n != g->nguards) return 0;
  for (int k = 0; k < n; k++) {
    const dt_guard *x = &guards[k], *y = &g->guards[k];
    if (x->kind != y->kind) return 0;
    if (x->kind != DT_GUARD_TENSOR) {
      if (!dt_guard_equal(x, y)) return 0;
      continue;
    }
    if (x->dtype != y->dtype || x->ndim != y->ndim || x->requires_grad != y->requires_grad || x->alias != y->alias ||
        !x->spec != !y->spec)
      return 0;
    if (x->spec && (x->spec->dtype != y->spec->dtype || x->spec->ndim != y->spec->ndim ||
                    (x->spec->mesh != y->spec->mesh && !dt_mesh_equal(x->spec->mesh, y->spec->mesh)) ||
                    !dt_placements_equal(x->spec->p, y->spec->p, y->spec->mesh->ndim)))
      return 0;
    const int64_t *sx = guard_sizes(x), *sy = guard_sizes(y);
    for (int i = 0; i < x->ndim; i++) {
      int s = d->dim_sym[k][i];
      if (s < 0) {
        if (sx[i] != sy[i]) return 0;
      } else if (bound & (1 << s)) {
        if (val[s] != sx[i]) return 0;
      } else {
        if (sx[i] < 2) return 0; /* 0 and 1 are specialised */
        if (d->mesh_lcm && (sx[i] % d->mesh_lcm == 0) != d->even[s]) return 0; /* even shards or not, as recorded */
        val[s] = sx[i], bound |= 1 << s;
      }
    }
    if (d->contig[k] ? !contiguous(x)
                     : memcmp(x->stride, y->stride, sizeof(int64_t) * (size_t)x->ndim) != 0 ||
                           memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim) != 0)
      return 0;
  }
  memcpy(d->val, val, sizeof val);
  return 1;
}

void dt_dyn_count_replay(dt_graph *g) {
  dyn_info *d = g->dyn;
  for (int i = 0; i < d->nshapes; i++)
    if (memcmp(d->shapes[i].v, d->val, sizeof(int64_t) * (size_t)d->nsyms) == 0) return (void)d->shapes[i].replays++;
  if (d->nshapes == DYN_MAX_SHAPES) return (void)d->other_replays++;
  memcpy(d->shapes[d->nshapes].v, d->val, sizeof d->val);
  d->shapes[d->nshapes++].replays = 1;
}

int dt_dyn_shapes(const dt_graph *g, int i, int64_t *vals, int *nsyms, long long *replays) {
  const dyn_info *d = g->dyn;
  if (!d || i >= d->nshapes) return 0;
  memcpy(vals, d->shapes[i].v, sizeof(int64_t) * (size_t)d->nsyms);
  *nsyms = d->nsyms, *replays = d->shapes[i].replays;
  return 1;
}

static int eval_int(const sym_expr *e, const int64_t *s, int64_t *out, const char *what) {
  double v = expr_value(e, s);
  if (!(fabs(v) < 9e15)) return dt_error("%s: a size expression overflows (%g)", what, v);
  *out = (int64_t)v;
  return DT_OK;
}

int dt_dyn_prepare_node(dt_graph *g, gnode *n, dt_value *const *in) {
  const int64_t *s = g->dyn->val;
  const char *name = n->kind == NODE_OP ? dt_op_get(n->op)->name : "compile";
  for (int i = 0; n->int_expr && i < DT_OP_MAX_INTS; i++)
    if (n->int_expr[i].on && eval_int(&n->int_expr[i], s, &n->args.ints[i], name) != DT_OK) return DT_ERR;
  for (int i = 0; n->scalar_expr && i < 4; i++)
    if (n->scalar_expr[i].on) n->args.scalar[i] = expr_value(&n->scalar_expr[i], s);
  if (n->kind == NODE_CONV) {
    int64_t *shape = n->fspec ? n->fspec->shape : n->shape;
    int nd = n->fspec ? n->fspec->ndim : n->ndim;
    for (int i = 0; n->shape_expr && i < nd; i++)
      if (n->shape_expr[i].on && eval_int(&n->shape_expr[i], s, &shape[i], name) != DT_OK) return DT_ERR;
    return DT_OK;
  }
  if (n->kind != NODE_OP || n->dead || (n->grad && !g->has_backward)) return DT_OK; /* the front door runs the shape rules itself */
  const dt_op_def *def = dt_op_get(n->op);
  if (n->distributed) return DT_OK; /* the dispatcher runs the shape rule (its cache: the decision for these sizes) */
  if (def->flags & DT_OPF_VIEW) return DT_OK; /* the view kernel makes its geometry */
  dt_meta m[DT_OP_MAX_OUT];
  dt_tensor *small[SMALL_IN], **loc = small;
  if (n->nin > SMALL_IN && !(loc = malloc(sizeof *loc * (size_t)n->nin))) return dt_error("%s: out of memory", def->name);
  for (int i = 0; i < n->nin; i++) loc[i] = in[i] ? in[i]->local : NULL;
  dt_op_args a = n->args;
  a.in = loc, a.op = n->op, a.name = def->name;
  if (n->inplace) {
    m[0] = (dt_meta){.dtype = loc[0]->dtype, .ndim = loc[0]->ndim};
    memcpy(m[0].shape, loc[0]->shape, sizeof(int64_t) * (size_t)loc[0]->ndim);
  } else if (def->shape(&a, m) != DT_OK) {
    if (loc != small) free(loc);
    return DT_ERR;
  } else {
    memcpy(n->meta, m, sizeof(dt_meta) * (size_t)n->nout);
  }
  if (n->random) n->rng_words = dt_rng_op_words(n->op, &a, &m[0]);
  if (loc != small) free(loc);
  return DT_OK;
}

const char *dt_dyn_int_text(const gnode *n, int i, char *buf, size_t len) {
  if (!n->int_expr || !n->int_expr[i].on) return NULL;
  expr_text(&n->int_expr[i], buf, len);
  return buf;
}

const char *dt_dyn_scalar_text(const gnode *n, int i, char *buf, size_t len) {
  if (!n->scalar_expr || !n->scalar_expr[i].on) return NULL;
  expr_text(&n->scalar_expr[i], buf, len);
  return buf;
}

const char *dt_dyn_header(const dt_graph *g) { return g->dyn ? g->dyn->header : NULL; }

int dt_graph_is_dynamic(const dt_graph *g) { return g->dyn != NULL; }
