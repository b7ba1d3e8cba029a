/* The backward engine: collects the graph reachable from the roots, counts each node's
 * dependencies, and runs nodes whose gradients are complete, latest-recorded first (the
 * order is the same on every rank, so the collectives inside backward rules match up).
 * Each run keeps its own bookkeeping (a map node -> state), so a backward may run inside
 * another's node (checkpoints recompute and backpropagate inside their backward). */
#include "autograd/autograd.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/backward.h"
#include "autograd/values.h"
#include "base/error.h"

typedef struct capture {
  int input; /* index into the caller's inputs */
  int nr;
  struct capture *next;
} capture;

typedef struct nstate {
  dt_node *node;
  int deps;
  int exec; /* run the node's backward (else: only its captures) */
  int want; /* a gradient flowing into it is used */
  int on_stack;
  dt_value *buf; /* [nout]: the gradients of its outputs gathered so far */
  dt_grad_kind *kind; /* [nout]: what those gradients are across ranks, when plain (grad_kind.h) */
  capture *caps;
} nstate;

typedef struct run {
  dt_context *ctx;
  nstate *st;
  int n, cap;
  int *slot; /* open-addressing map: node pointer -> index into st (-1 empty) */
  int nslot;
  int grad_mode; /* dt_autograd_grad: no .grad touched, only what the inputs need runs */
  int retain;
  int *heap, nheap;
  dt_value *captured; /* dt_autograd_grad's outputs, by input */
} run;

/* ---- node -> state map ---- */
static size_t hash_ptr(const void *p) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17, x *= 0xed5ad4bbU, x ^= x >> 11;
  return (size_t)x;
}

static int find(const run *r, const dt_node *n) {
  size_t mask = (size_t)r->nslot - 1;
  for (size_t i = hash_ptr(n) & mask;; i = (i + 1) & mask) {
    int k = r->slot[i];
    if (k < 0) return -1;
    if (r->st[k].node == n) return k;
  }
}

static int grow_map(run *r) {
  int nslot = r->nslot ? r->nslot * 2 : 64;
  int *slot = malloc(sizeof *slot * (size_t)nslot);
  if (!slot) return dt_error("backward: out of memory");
  for (int i = 0; i < nslot; i++) slot[i] = -1;
  for (int k = 0; k < r->n; k++) {
    size_t mask = (size_t)nslot - 1, i = hash_ptr(r->st[k].node) & mask;
    while (slot[i] >= 0) i = (i + 1) & mask;
    slot[i] = k;
  }
  free(r->slot);
  r->slot = slot, r->nslot = nslot;
  return DT_OK;
}

/* The state of n, added (with an empty buffer) when new. */
static int state_of(run *r, dt_node *n, int *k) {
  if (r->nslot && (*k = find(r, n)) >= 0) return DT_OK;
  if (2 * (r->n + 1) > r->nslot && grow_map(r) != DT_OK) return DT_ERR;
  if (r->n == r->cap) {
    int cap = r->cap ? r->cap * 2 : 32;
    nstate *st = realloc(r->st, sizeof *st * (size_t)cap);
    if (!st) return dt_error("backward: out of memory");
    r->st = st, r->cap = cap;
  }
  nstate *s = &r->st[r->n];
  memset(s, 0, sizeof *s);
  s->node = n;
  if (n->nout && (!(s->buf = calloc((size_t)n->nout, sizeof *s->buf)) ||
                  !(s->kind = calloc((size_t)n->nout, sizeof *s->kind))))
    return dt_error("backward: out of memory");
  size_t mask = (size_t)r->nslot - 1, i = hash_ptr(n) & mask;
  while (r->slot[i] >= 0) i = (i + 1) & mask;
  r->slot[i] = r->n;
  *k = r->n++;
  return DT_OK;
}

static void run_free(run *r) {
  for (int k = 0; k < r->n; k++) {
    nstate *s = &r->st[k];
    for (int o = 0; o < s->node->nout; o++) {
      dt_value_clear(&s->buf[o]);
      if (s->kind) dt_grad_kind_clear(&s->kind[o]);
    }
    free(s->buf);
    free(s->kind);
    while (s->caps) {
      capture *c = s->caps;
      s->caps = c->next;
      free(c);
    }
  }
  free(r->st);
  free(r->slot);
  free(r->heap);
}

/* ---- the ready queue: a max-heap on seq ---- */
static int heap_push(run *r, int k) {
  int *h = realloc(r->heap, sizeof *h * (size_t)(r->nheap + 1));
  if (!h) return dt_error("backward: out of memory");
  r->heap = h;
  int i = r->nheap++;
  h[i] = k;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (r->st[h[p]].node->seq >= r->st[h[i]].node->seq) break;
    int t = h[p];
    h[p] = h[i], h[i] = t, i = p;
  }
  return DT_OK;
}

static int heap_pop(run *r) {
  int *h = r->heap, top = h[0];
  h[0] = h[--r->nheap];
  for (int i = 0;;) {
    int l = 2 * i + 1, rr = l + 1, m = i;
    if (l < r->nheap && r->st[h[l]].node->seq > r->st[h[m]].node->seq) m = l;
    if (rr < r->nheap && r->st[h[rr]].node->seq > r->st[h[m]].node->seq) m = rr;
    if (m == i) break;
    int t = h[m];
    h[m] = h[i], h[i] = t, i = m;
  }
  return top;
}

/* ---- collecting the graph ---- */
/* Depth-first from every root node: states for all reachable nodes, then (post-order, an
 * explicit stack) which ones run and which gradients are wanted; then the dependency counts
 * over the edges that will carry a gradient. */
static int collect(run *r, int nroots) {
  int *stack = NULL, *edge_at = NULL, sp = 0, cap = 0;
  int st = DT_OK;
  for (int root = 0; root < nroots && st == DT_OK; root++) {
    if (r->st[root].on_stack == 2) continue;
    if (sp == cap) {
      cap = cap ? cap * 2 : 64;
      int *s2 = realloc(stack, sizeof *s2 * (size_t)cap), *e2 = s2 ? realloc(edge_at, sizeof *e2 * (size_t)cap) : NULL;
      if (!s2 || !e2) { if (s2) stack = s2; st = dt_error("backward: out of memory"); break; }
      stack = s2, edge_at = e2;
    }
    stack[sp] = root, edge_at[sp] = 0, sp++;
    r->st[root].on_stack = 1;
    while (sp > 0 && st == DT_OK) {
      int k = stack[sp - 1];
      dt_node *n = r->st[k].node;
      if (edge_at[sp - 1] < n->nin) {
        dt_node *c = n->edges[edge_at[sp - 1]++].node;
        if (!c) continue;
        int kc;
        if ((st = state_of(r, c, &kc)) != DT_OK) break;
        if (r->st[kc].on_stack) continue; /* seen (a graph has no cycles) */
        if (sp == cap) {
          cap *= 2;
          int *s2 = realloc(stack, sizeof *s2 * (size_t)cap), *e2 = s2 ? realloc(edge_at, sizeof *e2 * (size_t)cap) : NULL;
          if (!s2 || !e2) { if (s2) stack = s2; st = dt_error("backward: out of memory"); break; }
          stack = s2, edge_at = e2;
        }
        r->st[kc].on_stack = 1;
        stack[sp] = kc, edge_at[sp] = 0, sp++;
        continue;
      }
      /* post-order: every child is decided */
      nstate *s = &r->st[k];
      s->on_stack = 2;
      if (!r->grad_mode) {
        s->exec = s->want = 1;
      } else {
        s->exec = 0;
        if (n->kind != DT_NODE_ACCUMULATE)
          for (int i = 0; i < n->nin; i++) {
            dt_node *c = n->edges[i].node;
            if (c && r->st[find(r, c)].want) s->exec = 1;
          }
        s->want = s->exec || s->caps != NULL;
      }
      sp--;
    }
  }
  free(stack);
  free(edge_at);
  if (st != DT_OK) return st;
  for (int k = 0; k < r->n; k++) {
    nstate *s = &r->st[k];
    if (!s->exec) continue;
    for (int i = 0; i < s->node->nin; i++) {
      dt_node *c = s->node->edges[i].node;
      if (c) {
        nstate *sc = &r->st[find(r, c)];
        if (sc->want) sc->deps++;
      }
    }
  }
  return DT_OK;
}

/* ---- running one node ---- */
static int run_hooks(dt_context *ctx, dt_hook *h, int nr, dt_value *g) {
  for (; h; h = h->next) {
    if (h->output_nr != nr || !g->local) continue;
    dt_value rep;
    dt_value_init(&rep, NULL, NULL);
    if (h->fn(ctx, h->ud, g, &rep) != DT_OK) return dt_value_clear(&rep), DT_ERR;
    if (rep.local) {
      dt_value_clear(g);
      *g = rep;
    }
  }
  return DT_OK;
}

static int check_saved(const dt_node *n) {
  if (n->saved_freed)
    return dt_error("backward: %s's saved values were freed by an earlier backward through this graph; pass "
                    "{retain_graph = true} to the first backward, or run the forward again", n->name);
  for (int i = 0; i < n->nsaved; i++) {
    const dt_storage *s = n->saved[i].v.local->storage;
    if (s && s->version != n->saved[i].version)
      return dt_error("backward: a tensor that %s saved for backward was modified by an in-place op (%s) after "
                      "it was saved (its version is %u, %s saved version %u); clone it before the in-place op, "
                      "or use the out-of-place op",
                      n->name, s->last_write ? s->last_write : "?", s->version, n->name, n->saved[i].version);
  }
  return DT_OK;
}

static int accumulate_leaf_into(run *r, dt_grad_meta *leaf, dt_value *g);

/* A leaf's .grad; graph capture records the assignment (a side effect outside the front door). */
static int accumulate_leaf(run *r, dt_grad_meta *leaf, dt_value *g) {
  if (!g->local) return DT_OK;
  if (accumulate_leaf_into(r, leaf, g) != DT_OK) return DT_ERR;
  dt_context *ctx = r->ctx;
  return ctx->capture ? ctx->capture_hooks->leaf_grad(ctx, leaf, &leaf->grad) : DT_OK;
}

static int accumulate_leaf_into(run *r, dt_grad_meta *leaf, dt_value *g) {
  if (leaf->grad.local) return dt_autograd_accumulate(r->ctx, &leaf->grad, g);
  /* the first gradient becomes .grad: a contiguous copy when its storage is shared (it may
   * be the gradient of another leaf too, or a view of a buffer someone holds) or when it is a
   * view (an expanded one has stride 0: an in-place update of .grad would alias) */
  int held = r->ctx->capture ? r->ctx->capture_hooks->held(r->ctx, g->local) : 0;
  if (atomic_load_explicit(&g->local->storage->refcount, memory_order_relaxed) > 1 ||
      atomic_load_explicit(&g->local->refcount, memory_order_relaxed) - held > 1 || !dt_tensor_is_contiguous(g->local)) {
    dt_value c;
    if (dt_autograd_clone(r->ctx, g, &c) != DT_OK) return DT_ERR;
    dt_value_clear(g);
    *g = c;
  }
  leaf->grad = *g;
  dt_value_init(g, NULL, NULL);
  return DT_OK;
}

static int call_rule(run *r, dt_node *n, dt_value *buf, dt_value *grad_in, const unsigned char *needs) {
  const dt_backward_def *bw = dt_backward_of(n->op);
  const dt_value *small_in[8], *small_out[DT_OP_MAX_OUT], *grads[DT_OP_MAX_OUT];
  const dt_value **ins = n->nin <= 8 ? small_in : malloc(sizeof *ins * (size_t)n->nin);
  if (!ins) return dt_error("backward: out of memory");
  for (int i = 0; i < n->nin; i++) ins[i] = n->saved_in[i] >= 0 ? &n->saved[n->saved_in[i]].v : NULL;
  for (int o = 0; o < n->nout; o++) {
    small_out[o] = n->saved_out[o] >= 0 ? &n->saved[n->saved_out[o]].v : NULL;
    grads[o] = buf[o].local ? &buf[o] : NULL;
  }
  dt_bw b = {.ctx = r->ctx, .node = n, .args = &n->args, .nin = n->nin, .in = ins, .in_meta = n->in_meta,
             .out = small_out, .out_meta = n->out_meta, .grad = grads, .needs = needs, .grad_in = grad_in};
  int st = bw->fn(&b);
  if (ins != small_in) free(ins);
  return st;
}

/* Output nr of sc's node takes its gradient Partial: a custom node that asked for it
 * (dt_autograd_keep_partial), or a view op's node -- views are linear, so the Partial passes
 * through to whatever consumes the view's input gradient (fully_shard's reduce_scatter of a
 * Linear weight reached through weight:t() reduces once, not all_reduce then scatter).  Only
 * when nobody else sees that gradient as it is (no hook, no retained grad, not returned by
 * dt_autograd_grad). */
static int takes_partial(const nstate *sc, int nr) {
  const dt_node *p = sc->node;
  int passes = p->kind == DT_NODE_CUSTOM ? p->keeps_partial
             : p->kind == DT_NODE_OP && dt_op_get(p->op)->sharding == DT_SHARDING_VIEW;
  if (!passes || (p->retain && p->retain[nr])) return 0;
  for (const dt_hook *h = p->hooks; h; h = h->next)
    if (h->output_nr == nr) return 0;
  for (const capture *c = sc->caps; c; c = c->next)
    if (c->nr == nr) return 0;
  return 1;
}

static int run_node(run *r, int k) {
  dt_context *ctx = r->ctx;
  nstate *s = &r->st[k];
  dt_node *n = s->node;
  /* the gradients of its outputs are complete: hooks, retained grads, captures */
  if (n->kind == DT_NODE_ACCUMULATE) {
    if (n->leaf && run_hooks(ctx, n->leaf->hooks, 0, &s->buf[0]) != DT_OK) return DT_ERR;
  } else {
    for (int o = 0; o < n->nout; o++) {
      if (run_hooks(ctx, n->hooks, o, &s->buf[o]) != DT_OK) return DT_ERR;
      dt_grad_meta *m = n->retain ? n->retain[o] : NULL;
      if (m && s->buf[o].local && !r->grad_mode) {
        dt_value c;
        if (dt_autograd_clone(ctx, &s->buf[o], &c) != DT_OK || dt_autograd_accumulate(ctx, &m->grad, &c) != DT_OK)
          return DT_ERR;
      }
    }
  }
  for (capture *c = s->caps; c; c = c->next)
    if (s->buf[c->nr].local && !r->captured[c->input].local &&
        dt_autograd_share(&s->buf[c->nr], &r->captured[c->input]) != DT_OK)
      return DT_ERR;
  if (!s->exec) return DT_OK;
  if (n->kind == DT_NODE_ACCUMULATE) return n->leaf ? accumulate_leaf(r, n->leaf, &s->buf[0]) : DT_OK;

  unsigned char small_needs[16], *needs = n->nin <= 16 ? small_needs : malloc((size_t)n->nin);
  dt_value small_gi[16], *gi = n->nin <= 16 ? small_gi : malloc(sizeof *gi * (size_t)n->nin);
  if (!needs || !gi) {
    if (needs != small_needs) free(needs);
    if (gi != small_gi) free(gi);
    return dt_error("backward: out of memory");
  }
  dt_grad_kind kind = {0}; /* of the outputs' plain gradients; op nodes pass it to their inputs' */
  for (int o = 0; o < n->nout; o++) dt_grad_kind_merge(&kind, &s->kind[o]);
  int any = 0;
  for (int i = 0; i < n->nin; i++) {
    dt_node *c = n->edges[i].node;
    needs[i] = c && r->st[find(r, c)].want;
    any |= needs[i];
    dt_value_init(&gi[i], NULL, NULL);
  }
  int st = DT_OK;
  if (any) st = check_saved(n); /* an op's saved values, or what a custom node saved */
  if (any && st == DT_OK) {
    if (n->kind == DT_NODE_OP) {
      st = call_rule(r, n, s->buf, gi, needs);
    } else {
      const dt_value *small_go[8], **go = n->nout <= 8 ? small_go : malloc(sizeof *go * (size_t)n->nout);
      if (!go) st = dt_error("backward: out of memory");
      else {
        for (int o = 0; o < n->nout; o++) go[o] = s->buf[o].local ? &s->buf[o] : NULL;
        dt_grad_kind entry = {0}; /* a checkpoint's recomputed outputs take it in their own backward */
        dt_grad_kind_merge(&entry, &kind);
        const dt_grad_kind *outer = ctx->autograd_kind;
        ctx->autograd_kind = &entry;
        st = n->custom(ctx, n->ud, go, n->nout, gi, n->nin, needs, &kind);
        ctx->autograd_kind = outer;
        dt_grad_kind_clear(&entry);
        if (go != small_go) free(go);
      }
    }
  }
  for (int o = 0; o < n->nout; o++) dt_value_clear(&s->buf[o]); /* consumed */
  /* hand each gradient to its input's node */
  for (int i = 0; i < n->nin && st == DT_OK; i++) {
    if (!needs[i]) continue;
    dt_edge *e = &n->edges[i];
    nstate *sc = &r->st[find(r, e->node)];
    if (gi[i].local) {
      char what[96];
      snprintf(what, sizeof what, "input %d of %s", i + 1, n->name);
      dt_grad_kind gk = {0}; /* a DTensor gradient has none: its placements say it all */
      if (gi[i].spec && !n->in_meta[i].spec) dt_grad_kind_set_whole(&gk, gi[i].spec->mesh); /* gathered below */
      else if (!gi[i].spec) dt_grad_kind_merge(&gk, &kind);
      st = takes_partial(sc, e->nr) ? dt_autograd_conform_keep_partial(ctx, what, &gi[i], &n->in_meta[i])
                                     : dt_autograd_conform(ctx, what, &gi[i], &n->in_meta[i]);
      if (st == DT_OK) {
        dt_grad_kind_merge(&sc->kind[e->nr], &gk);
        st = dt_autograd_accumulate(ctx, &sc->buf[e->nr], &gi[i]);
      }
      dt_grad_kind_clear(&gk);
    }
    if (st == DT_OK && --sc->deps == 0) st = heap_push(r, (int)(sc - r->st));
  }
  for (int i = 0; i < n->nin; i++) dt_value_clear(&gi[i]);
  dt_grad_kind_clear(&kind);
  if (needs != small_needs) free(needs);
  if (gi != small_gi) free(gi);
  if (st == DT_OK && !r->retain) dt_node_free_saved(n);
  return st;
}

/* ---- entry points ---- */
/* Seeds the run with the roots: their nodes (states 0..) and gradients. */
static int seed(run *r, dt_value *const *roots, const dt_value *const *grads, int n, dt_edge *edges, const char *op) {
  for (int i = 0; i < n; i++) {
    dt_grad_meta *m = roots[i] ? dt_grad_meta_of(roots[i]) : NULL;
    if (!m || !m->requires_grad)
      return dt_error("%s: output %d does not require grad and has no grad_fn (nothing recorded it: is grad "
                      "mode off, or does no input require grad?)", op, i + 1);
    if (dt_grad_meta_edge(m, &edges[i]) != DT_OK) return DT_ERR;
  }
  for (int i = 0; i < n; i++) {
    int k;
    if (state_of(r, edges[i].node, &k) != DT_OK) return DT_ERR;
  }
  for (int i = 0; i < n; i++) {
    dt_slot_meta m = {0};
    if (dt_slot_meta_set(&m, roots[i]) != DT_OK) return DT_ERR;
    dt_value g;
    dt_value_init(&g, NULL, NULL);
    int st;
    if (grads && grads[i]) {
      st = dt_autograd_share(grads[i], &g);
      if (st == DT_OK) {
        char what[64];
        snprintf(what, sizeof what, "%s: the gradient of output %d", op, i + 1);
        st = dt_autograd_conform(r->ctx, what, &g, &m);
      }
    } else if (dt_value_numel(roots[i]) != 1) {
      char b[160];
      st = dt_error("%s: a gradient can be implicitly created only for an output of one element (output %d has "
                    "shape %s); pass its gradient", op, i + 1, dt_format_shape(b, sizeof b, dt_value_ndim(roots[i]), dt_value_shape(roots[i])));
    } else {
      st = dt_autograd_full(r->ctx, &m, 1.0, &g);
    }
    dt_slot_meta_clear(&m);
    if (st != DT_OK) return dt_value_clear(&g), DT_ERR; /* a given gradient that did not conform */
    nstate *s = &r->st[find(r, edges[i].node)];
    /* a plain loss is the same on every rank; inside a custom node's backward (a checkpoint
     * recomputing) the roots' gradients are the node's, of its kind */
    if (!roots[i]->spec && r->ctx->autograd_kind) dt_grad_kind_merge(&s->kind[edges[i].nr], r->ctx->autograd_kind);
    else if (!roots[i]->spec) s->kind[edges[i].nr].root = 1;
    if (dt_autograd_accumulate(r->ctx, &s->buf[edges[i].nr], &g) != DT_OK) return DT_ERR;
  }
  return DT_OK;
}

static int execute(run *r, dt_value *const *roots, const dt_value *const *grads, int n, const char *op) {
  dt_edge small[8], *edges = n <= 8 ? small : calloc((size_t)n, sizeof *edges);
  if (!edges) return dt_error("%s: out of memory", op);
  memset(edges, 0, sizeof *edges * (size_t)(n <= 8 ? 8 : n));
  int st = seed(r, roots, grads, n, edges, op);
  if (st == DT_OK) st = collect(r, r->n);
  /* roots (and nodes only other roots feed) with nothing left to wait for start */
  for (int k = 0; k < r->n && st == DT_OK; k++)
    if (r->st[k].want && r->st[k].deps == 0) st = heap_push(r, k);
  /* rules run without recording, and without autocast: a backward op runs in the dtypes its
   * forward op ran in (as torch), whatever region backward() is called in */
  dt_modes saved_modes = r->ctx->modes;
  r->ctx->modes.grad_enabled = 0, r->ctx->modes.autocast_dtype = 0;
  while (st == DT_OK && r->nheap > 0) st = run_node(r, heap_pop(r));
  r->ctx->modes.grad_enabled = saved_modes.grad_enabled, r->ctx->modes.autocast_dtype = saved_modes.autocast_dtype;
  for (int i = 0; i < n; i++) dt_node_release(edges[i].node);
  if (edges != small) free(edges);
  return st;
}

int dt_autograd_backward(dt_context *ctx, dt_value *const *roots, const dt_value *const *grads, int n,
                         int retain_graph) {
  if (!ctx->call) return dt_error("backward: no op has run through the front door on this context");
  run r = {.ctx = ctx, .retain = retain_graph};
  int st = execute(&r, roots, grads, n, "backward");
  run_free(&r);
  return st;
}

int dt_autograd_grad(dt_context *ctx, dt_value *const *roots, const dt_value *const *grads, int n,
                     dt_value *const *inputs, int ni, int retain_graph, int allow_unused, dt_value *out) {
  for (int j = 0; j < ni; j++) dt_value_init(&out[j], NULL, NULL);
  if (!ctx->call) return dt_error("autograd.grad: no op has run through the front door on this context");
  run r = {.ctx = ctx, .retain = retain_graph, .grad_mode = 1, .captured = out};
  /* the nodes whose gradients are the inputs' come first, with their captures, so that the
   * roots' seeding finds them */
  int st = DT_OK;
  for (int j = 0; j < ni && st == DT_OK; j++) {
    dt_grad_meta *m = inputs[j] ? dt_grad_meta_of(inputs[j]) : NULL;
    if (!m || !m->requires_grad) {
      st = dt_error("autograd.grad: input %d does not require grad", j + 1);
      break;
    }
    dt_node *node = m->grad_fn ? m->grad_fn : m->accumulate;
    if (!node) continue; /* a leaf no recorded op used: unreached */
    int k;
    capture *c = malloc(sizeof *c);
    if (!c || state_of(&r, node, &k) != DT_OK) {
      free(c);
      st = c ? DT_ERR : dt_error("autograd.grad: out of memory");
      break;
    }
    c->input = j, c->nr = m->grad_fn ? m->output_nr : 0, c->next = r.st[k].caps;
    r.st[k].caps = c;
  }
  if (st == DT_OK) st = execute(&r, roots, grads, n, "autograd.grad"); /* run_node fills out */
  run_free(&r);
  if (st == DT_OK) {
    for (int j = 0; j < ni; j++)
      if (!out[j].local && !allow_unused) {
        for (int i = 0; i < ni; i++) dt_value_clear(&out[i]);
        return dt_error("autograd.grad: input %d was not used to compute the outputs (pass {allow_unused = "
                        "true} to get nil for it)", j + 1);
      }
  } else {
    for (int j = 0; j < ni; j++) dt_value_clear(&out[j]);
  }
  return st;
}
