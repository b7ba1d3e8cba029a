/* Recording a graph: the capture hooks the front door calls, the slots of the values. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "base/error.h"
#include "capture/graph_impl.h"
#include "distributed/mesh.h"
#include "distributed/redistribute.h"
#include "distributed/sharding_rules/sharding_rules.h"

void dt_guard_of_value(const dt_value *v, dt_guard *g) {
  const dt_tensor *t = v->local;
  g->kind = DT_GUARD_TENSOR;
  g->dtype = t->dtype, g->ndim = t->ndim;
  memcpy(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  memcpy(g->stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
  g->spec = v->spec;
  g->requires_grad = dt_autograd_requires_grad(v);
  g->alias = 0;
}

void dt_capture_set_trace(dt_graph *g) { g->trace = 1; }

int dt_capture_tracing(const dt_context *ctx) { return ctx && ctx->capture && ((const dt_graph *)ctx->capture)->trace; }

int dt_capture_refuse(dt_context *ctx, const char *what) {
  dt_graph *g = ctx->capture;
  char w[256] = "?";
  if (g && g->host.where) g->host.where(g->host.ud, w, sizeof w);
  if (g && g->trace) { /* an analysis records what ran; the first refusal says why it could not replay */
    size_t len = strlen(what) + strlen(w) + 8;
    if (!g->refusal && (g->refusal = malloc(len))) snprintf(g->refusal, len, "%s at %s", what, w);
    return DT_OK;
  }
  return dt_error("compile: %s at %s cannot be captured in a graph; run it outside the compiled function", what, w);
}

static gnode *new_node(dt_graph *g);
static int new_slot(dt_graph *g, dt_value *v, int *slot);
static int finish_node(dt_graph *g, gnode *n, dt_value *const *shown, int nshown);

/* A gradient the graph did not make: the .grad of an argument or external -> a GET_GRAD node. */
static int grad_slot(dt_graph *g, dt_value *v, int *slot) {
  for (int i = 0; i < g->nargs + g->next; i++) {
    dt_value *x = i < g->nargs ? g->args[i] : g->ext[i - g->nargs];
    const dt_value *gr = x->local ? dt_autograd_grad_of(x) : NULL;
    if (!gr || (gr != v && gr->local != v->local)) continue;
    gnode *n = new_node(g);
    if (!n) return DT_ERR;
    n->kind = NODE_GET_GRAD, n->nin = 1, n->nout = 1;
    if (!(n->in = malloc(sizeof *n->in))) return dt_error("compile: out of memory");
    n->in[0] = i < g->nargs ? -1000000 - i : -2 - (i - g->nargs);
    if (new_slot(g, v, &n->out[0]) != DT_OK) return DT_ERR;
    *slot = n->out[0];
    return finish_node(g, n, &v, 1);
  }
  return 0;
}

/* The slot of v; a tensor the graph has not seen is a gradient it reads (GET_GRAD) or an
 * external, pinned by the host. */
static int slot_of(dt_graph *g, dt_value *v, int *slot) {
  if ((*slot = dt_slotmap_find(g, v)) != MISSING) return DT_OK;
  int got = grad_slot(g, v, slot);
  if (got != 0) return got == DT_OK ? DT_OK : DT_ERR;
  dt_value **ext = realloc(g->ext, sizeof *ext * (size_t)(g->next + 1));
  if (!ext) return dt_error("compile: out of memory");
  g->ext = ext;
  dt_guard *eg = realloc(g->ext_guard, sizeof *eg * (size_t)(g->next + 1));
  if (!eg) return dt_error("compile: out of memory");
  g->ext_guard = eg;
  if (g->host.pin(g->host.ud, v) != DT_OK) {
    char w[256] = "?";
    if (g->host.where) g->host.where(g->host.ud, w, sizeof w);
    return dt_error("compile: a call at %s reads a tensor that the compiled function neither received nor made "
                    "through the front door (e.g. made by the runtime outside it during the capture); pass it as "
                    "an argument, or run this outside the compiled function", w);
  }
  g->ext[g->next] = v;
  dt_guard_of_value(v, &g->ext_guard[g->next]);
  if (v->spec && !(g->ext_guard[g->next].spec = dt_dspec_copy(v->spec))) return dt_error("compile: out of memory");
  *slot = -2 - g->next++; /* externals are numbered after the arguments once recording ends */
  return dt_slotmap_put(g, v, *slot);
}

static gnode *new_node(dt_graph *g) {
  if (g->nnodes == g->capnodes) {
    int cap = g->capnodes ? 2 * g->capnodes : 16;
    gnode *n = realloc(g->nodes, sizeof *n * (size_t)cap);
    if (!n) return dt_error("compile: out of memory"), NULL;
    g->nodes = n, g->capnodes = cap;
  }
  gnode *n = &g->nodes[g->nnodes++];
  memset(n, 0, sizeof *n);
  n->out[0] = n->out[1] = -1;
  return n;
}

/* Output slots are numbered from 0 among the node outputs while recording (offset later). */
static int new_slot(dt_graph *g, dt_value *v, int *slot) {
  *slot = g->nslots++;
  return dt_slotmap_put(g, v, *slot);
}

static int64_t value_bytes(const dt_value *v) {
  return dt_tensor_numel(v->local) * (int64_t)dt_dtype_size(v->local->dtype);
}

/* "f32[4, 3] (Shard(0), Replicate())" for each value, joined by ", ". */
static char *describe(dt_value *const *v, int n) {
  char buf[1024] = "", sh[160], pl[256];
  size_t at = 0;
  for (int i = 0; i < n && at < sizeof buf; i++) {
    const dt_value *x = v[i];
    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s%s", i ? ", " : "", dt_dtype_name(dt_value_dtype(x)),
                           dt_format_shape(sh, sizeof sh, dt_value_ndim(x), dt_value_shape(x)));
    if (x->spec && at < sizeof buf)
      at += (size_t)snprintf(buf + at, sizeof buf - at, " %s", dt_placements_format(x->spec->p, x->spec->mesh->ndim, pl, sizeof pl));
  }
  char *s = malloc(strlen(buf) + 1);
  if (s) strcpy(s, buf);
  return s;
}

static int finish_node(dt_graph *g, gnode *n, dt_value *const *shown, int nshown) {
  char w[256] = "?";
  if (g->host.where) g->host.where(g->host.ud, w, sizeof w);
  if (!(n->where = malloc(strlen(w) + 1)) || !(n->desc = describe(shown, nshown))) return dt_error("compile: out of memory");
  strcpy(n->where, w);
  return DT_OK;
}

/* The generator moved only inside ops since the capture started (else manual_seed ran). */
static int rng_step(dt_context *ctx, dt_graph *g, gnode *n) {
  if (ctx->rng.seed != g->rng_seed || ctx->rng.offset < g->rng_last)
    return dt_capture_refuse(ctx, "dt.manual_seed (the generator was reset)");
  n->rng_rel = g->rng_last - g->rng_start;
  n->rng_words = ctx->rng.offset - g->rng_last;
  g->rng_last = ctx->rng.offset;
  return DT_OK;
}

/* The args n's local kernel takes, as the dispatcher's execution computes them from the
 * decision (dispatch.c's run_local): 1 when its family has none or they were computed into
 * n->largs, 0 when they cannot be (a plain operand beside DTensors: replay executes the
 * decision), -1 on error. */
static int local_args_of(gnode *n, dt_value *const *in, const dt_mesh *mesh) {
  dt_local_args_fn local_args = dt_local_args_for(n->op);
  if (!local_args) return 1;
  enum { MAX_IN = 16 }; /* cat/stack of more keep the decision's execution */
  const dt_dspec *sp[MAX_IN];
  if (n->nin > MAX_IN) return 0;
  for (int i = 0; i < n->nin; i++) {
    if (in[i] && !in[i]->spec) return 0;
    sp[i] = in[i] ? in[i]->spec : NULL;
  }
  const dt_op_def *def = dt_op_get(n->op);
  dt_dspec outs[DT_OP_MAX_OUT];
  const dt_dspec *op_[DT_OP_MAX_OUT];
  for (int o = 0; o < def->nout; o++) {
    outs[o] = (dt_dspec){.mesh = (dt_mesh *)mesh, .ndim = n->dec.meta[o].ndim, .dtype = n->dec.meta[o].dtype};
    memcpy(outs[o].p, n->dec.out[o], sizeof outs[o].p);
    memcpy(outs[o].shape, n->dec.meta[o].shape, sizeof outs[o].shape);
    op_[o] = &outs[o];
  }
  dt_strategy choice = {.nin = n->dec.nin, .in = n->dec.in};
  memcpy(choice.out, n->dec.out, sizeof choice.out);
  n->largs = n->args;
  if (local_args(n->op, sp, &choice, op_, &n->largs) != DT_OK) return -1;
  n->has_largs = 1;
  return 1;
}

static int hook_op(dt_context *ctx, dt_op_id op, const dt_op_args *args, dt_value *const *in, int nin,
                   dt_value *const *out) {
  dt_graph *g = ctx->capture;
  const dt_op_def *def = dt_op_get(op);
  gnode *n = new_node(g);
  if (!n) return DT_ERR;
  n->kind = NODE_OP, n->op = op;
  n->args = *args;
  n->args.in = NULL, n->args.nin = nin, n->args.name = def->name, n->args.region = NULL;
  n->inplace = (def->flags & DT_OPF_INPLACE) != 0;
  n->random = (def->flags & DT_OPF_RANDOM) != 0;
  n->grad = dt_autograd_wants(ctx, in, nin);
  if (rng_step(ctx, g, n) != DT_OK) return DT_ERR;
  if (nin && !(n->in = malloc(sizeof *n->in * (size_t)nin))) return dt_error("compile: out of memory");
  n->nin = nin;
  dt_device_type dev = DT_HOST;
  for (int i = 0; i < nin; i++) {
    n->in[i] = -1;
    if (!in[i]) continue;
    if (slot_of(g, in[i], &n->in[i]) != DT_OK) return DT_ERR;
    if (in[i]->spec) n->distributed = 1;
    else if (i == 0 || dev == DT_HOST) dev = dt_tensor_device(in[i]->local);
  }
  if (n->distributed) {
    int got = dt_dispatch_last_decision(ctx, &n->dec);
    if (got < 0) return dt_error("compile: out of memory");
    n->has_dec = got;
    n->moves = !got; /* random and write ops may redistribute */
    for (int i = 0; got && i < nin; i++)
      if (in[i] && in[i]->spec && !dt_placements_equal(in[i]->spec->p, n->dec.in[i], in[i]->spec->mesh->ndim)) n->moves = 1;
  } else if (!(n->kernel = dt_kernel_get(dev, op))) {
    return dt_error("compile: %s has no kernel on %s", def->name, dt_device_name(dev));
  }
  if (n->distributed && n->has_dec && !n->moves && !n->random) {
    const dt_mesh *m = NULL;
    dt_device_type ldev = DT_HOST;
    for (int i = 0; i < nin; i++)
      if (in[i] && in[i]->spec && !m) m = in[i]->spec->mesh, ldev = dt_tensor_device(in[i]->local);
    int st = m && m->me >= 0 ? local_args_of(n, in, m) : 0;
    if (st < 0) return DT_ERR;
    if (st && (n->kernel = dt_kernel_get(ldev, op))) n->local_fast = 1;
  }
  if (n->inplace) return finish_node(g, n, in, 1);
  n->nout = def->nout;
  for (int o = 0; n->local_fast && o < def->nout; o++)
    if (!(n->ospec[o] = dt_dspec_copy(out[o]->spec))) return dt_error("compile: out of memory");
  for (int o = 0; o < def->nout; o++) {
    const dt_tensor *t = out[o]->local;
    n->meta[o] = (dt_meta){.dtype = t->dtype, .ndim = t->ndim};
    memcpy(n->meta[o].shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (!(def->flags & DT_OPF_VIEW)) n->out_bytes += value_bytes(out[o]);
    if (new_slot(g, out[o], &n->out[o]) != DT_OK) return DT_ERR;
  }
  return finish_node(g, n, out, def->nout);
}

static int hook_conv(dt_context *ctx, const dt_conv_call *c) {
  dt_graph *g = ctx->capture;
  gnode *n = new_node(g);
  if (!n) return DT_ERR;
  n->kind = NODE_CONV, n->conv = c->kind;
  n->grad = c->in && dt_autograd_wants(ctx, &c->in, 1);
  if (rng_step(ctx, g, n) != DT_OK) return DT_ERR;
  if (!(n->in = malloc(sizeof *n->in))) return dt_error("compile: out of memory");
  n->nin = c->in != NULL;
  if (c->in && slot_of(g, c->in, &n->in[0]) != DT_OK) return DT_ERR;
  n->distributed = 1;
  n->moves = c->kind == DT_CONV_REDISTRIBUTE || c->kind == DT_CONV_REDISTRIBUTE_ANY || c->kind == DT_CONV_FULL_TENSOR ||
             (c->kind == DT_CONV_FROM_LOCAL && c->run_check);
  if (c->spec && !(n->fspec = dt_dspec_copy(c->spec))) return dt_error("compile: out of memory");
  n->value = c->value;
  const dt_mesh *pm = c->mesh ? c->mesh : c->in && c->in->spec ? c->in->spec->mesh : NULL;
  if ((n->mesh = c->mesh)) dt_mesh_retain(n->mesh);
  if (c->p && pm) memcpy(n->p, c->p, sizeof(dt_placement) * (size_t)pm->ndim);
  if ((n->has_gp = c->grad_p != NULL) && pm) memcpy(n->gp, c->grad_p, sizeof(dt_placement) * (size_t)pm->ndim);
  n->run_check = c->run_check, n->ndim = c->ndim;
  if ((n->has_shape = c->shape != NULL)) memcpy(n->shape, c->shape, sizeof(int64_t) * (size_t)c->ndim);
  n->nout = 1;
  if (dt_graph_mark_collective(ctx, n, c) != DT_OK) return DT_ERR;
  n->out_bytes = c->kind == DT_CONV_TO_LOCAL ? 0 : value_bytes(c->out);
  if (new_slot(g, c->out, &n->out[0]) != DT_OK) return DT_ERR;
  return finish_node(g, n, &c->out, 1);
}

/* t.grad = gr (NULL: nil) as a node; t must be an argument or an external (a leaf). */
static int record_set_grad(dt_context *ctx, dt_value *t, const dt_value *gr) {
  dt_graph *g = ctx->capture;
  gnode *n = new_node(g);
  if (!n) return DT_ERR;
  n->kind = NODE_SET_GRAD, n->nin = 2;
  if (!(n->in = malloc(sizeof *n->in * 2))) return dt_error("compile: out of memory");
  n->in[1] = -1;
  if (slot_of(g, t, &n->in[0]) != DT_OK || (gr && slot_of(g, (dt_value *)gr, &n->in[1]) != DT_OK)) return DT_ERR;
  if (n->in[0] >= 0 && dt_capture_refuse(ctx, "setting .grad of a tensor made inside the compiled function") != DT_OK)
    return DT_ERR;
  return finish_node(g, n, gr ? (dt_value *const *)&gr : &t, 1);
}

int dt_capture_set_grad(dt_context *ctx, dt_value *t, dt_value *gr) {
  return ctx->capture ? record_set_grad(ctx, t, gr) : DT_OK;
}

/* backward set a leaf's .grad: the leaf is the argument or external with that metadata */
static int hook_leaf_grad(dt_context *ctx, const void *leaf, const dt_value *gr) {
  dt_graph *g = ctx->capture;
  g->has_backward = 1;
  for (int i = 0; i < g->nargs + g->next; i++) {
    dt_value *x = i < g->nargs ? g->args[i] : g->ext[i - g->nargs];
    if (x->local && x->autograd == leaf) return record_set_grad(ctx, x, gr);
  }
  return dt_capture_refuse(ctx, "backward into a leaf the compiled function neither received nor read");
}

int dt_capture_note_size(dt_context *ctx, const dt_value *v, int dim, const int64_t *vals, int n) {
  dt_graph *g = ctx ? ctx->capture : NULL;
  if (!g || g->trace) return DT_OK;
  if (g->nreads == g->capreads) {
    int cap = g->capreads ? 2 * g->capreads : 16;
    size_read *r = realloc(g->reads, sizeof *r * (size_t)cap);
    if (!r) return dt_error("compile: out of memory");
    g->reads = r, g->capreads = cap;
  }
  uint64_t h = 1469598103934665603ull ^ (uint64_t)(dim + 1);
  for (int i = 0; i < n; i++) h = (h ^ (uint64_t)vals[i]) * 1099511628211ull;
  size_read *r = &g->reads[g->nreads];
  char w[256] = "?";
  if (g->host.where) g->host.where(g->host.ud, w, sizeof w);
  if (!(r->where = malloc(strlen(w) + 1))) return dt_error("compile: out of memory");
  strcpy(r->where, w);
  r->slot = dt_slotmap_find(g, v), r->dim = dim, r->hash = h;
  g->nreads++;
  return DT_OK;
}

static int hook_held(dt_context *ctx, const dt_tensor *t) {
  const dt_graph *g = ctx->capture;
  return (dt_slotmap_get(g, PLAIN_KEY, t) != MISSING) + (dt_slotmap_get(g, SPEC_KEY, t) != MISSING);
}

static const dt_capture_hooks hooks = {hook_op, hook_conv, hook_leaf_grad, hook_held};

dt_graph *dt_capture_begin(dt_context *ctx, const dt_capture_host *host, dt_value *const *args, int nargs,
                           const dt_guard *guards, int nguards) {
  if (ctx->capture) return dt_error("compile: a graph is already being recorded on this rank"), NULL;
  dt_graph *g = calloc(1, sizeof *g);
  if (!g || (nguards && !(g->guards = calloc((size_t)nguards, sizeof *g->guards)))) goto oom;
  g->ctx = ctx, g->host = *host, g->nargs = nargs, g->modes = ctx->modes;
  g->bucket_cap = DT_GRAPH_BUCKET_CAP_BYTES, g->overlap = 1;
  if (nargs && !(g->args = malloc(sizeof *g->args * (size_t)nargs))) goto oom;
  for (int i = 0; i < nargs; i++) g->args[i] = args[i];
  g->rng_seed = ctx->rng.seed, g->rng_start = g->rng_last = ctx->rng.offset;
  g->nguards = nguards;
  for (int i = 0; i < nguards; i++) {
    dt_guard *d = &g->guards[i];
    *d = guards[i];
    d->s = NULL, d->spec = NULL;
    if (guards[i].kind == DT_GUARD_STRING) {
      char *s = malloc((size_t)guards[i].i + 1);
      if (!s) goto oom;
      memcpy(s, guards[i].s, (size_t)guards[i].i + 1);
      d->s = s;
    }
    if (guards[i].spec && !(d->spec = dt_dspec_copy(guards[i].spec))) goto oom;
  }
  for (int i = 0; i < nargs; i++) /* an argument given twice keeps its first slot */
    if (dt_slotmap_find(g, args[i]) == MISSING && dt_slotmap_put(g, args[i], -1000000 - i) != DT_OK) goto fail;
  ctx->capture = g, ctx->capture_hooks = &hooks;
  return g;
oom:
  dt_error("compile: out of memory");
fail:
  dt_graph_free(g);
  return NULL;
}

/* While recording, slots are: -1000000 - i argument i, -2 - e external e, k >= 0 output k;
 * the final numbering is arguments, externals, outputs. */
static int final_slot(const dt_graph *g, int s) {
  if (s == -1) return -1;
  if (s <= -1000000) return -1000000 - s; /* arguments: -1000000 - i */
  if (s <= -2) return g->nargs + (-2 - s);
  return g->nargs + g->next + s;
}

static void stop(dt_context *ctx, dt_graph *g) {
  if (ctx->capture == g) ctx->capture = NULL, ctx->capture_hooks = NULL;
}

int dt_capture_end(dt_context *ctx, dt_graph *g, dt_value *const *ret, int nret) {
  int st = DT_OK;
  if (!g->trace && (ctx->rng.seed != g->rng_seed || ctx->rng.offset != g->rng_last))
    st = dt_error("compile: the generator was reset or advanced outside the recorded ops (dt.manual_seed in the compiled function?)");
  if (st == DT_OK && nret && !(g->ret_slot = malloc(sizeof *g->ret_slot * (size_t)nret))) st = dt_error("compile: out of memory");
  g->nret = nret;
  for (int i = 0; st == DT_OK && i < nret; i++) {
    g->ret_slot[i] = -1;
    if (ret[i]) st = slot_of(g, ret[i], &g->ret_slot[i]);
  }
  stop(ctx, g);
  if (st == DT_OK && !g->trace) st = dt_graph_check_escapes(g, ret, nret);
  dt_slotmap_free(g);
  free(g->args); /* the capture's arguments: not kept past it */
  g->args = NULL;
  if (st != DT_OK) return dt_graph_free(g), DT_ERR;
  int nout = g->nslots;
  g->nslots = g->nargs + g->next + nout;
  for (int k = 0; k < g->nnodes; k++) {
    gnode *n = &g->nodes[k];
    for (int i = 0; i < n->nin; i++) n->in[i] = final_slot(g, n->in[i]);
    for (int o = 0; o < n->nout; o++) n->out[o] = final_slot(g, n->out[o]);
  }
  for (int i = 0; i < nret; i++) g->ret_slot[i] = final_slot(g, g->ret_slot[i]);
  for (int r = 0; r < g->nreads; r++)
    if (g->reads[r].slot != MISSING) g->reads[r].slot = final_slot(g, g->reads[r].slot);
  if (!(g->val = calloc((size_t)g->nslots + 1, sizeof *g->val)) || !(g->own = calloc((size_t)nout + 1, sizeof *g->own)) ||
      !(g->prod = calloc((size_t)g->nslots + 1, sizeof *g->prod)))
    return dt_graph_free(g), dt_error("compile: out of memory");
  for (int k = 0; k < nout; k++) g->val[g->nargs + g->next + k] = &g->own[k];
  if (dt_graph_passes(g) != DT_OK) return dt_graph_free(g), DT_ERR;
  return DT_OK;
}

void dt_capture_abort(dt_context *ctx, dt_graph *g) {
  if (!g) return;
  stop(ctx, g);
  dt_graph_free(g);
}

void dt_graph_free(dt_graph *g) {
  if (!g) return;
  if (g->ctx && g->ctx->capture == g) stop(g->ctx, g);
  dt_slotmap_free(g);
  dt_buckets_free(g);
  for (int k = 0; k < g->nnodes; k++) {
    gnode *n = &g->nodes[k];
    free(n->in), free(n->dec.in), free(n->where), free(n->desc), free(n->release), free(n->wait);
    dt_dyn_free_node(n);
    if (n->mesh) dt_mesh_release(n->mesh);
    dt_dspec_free(n->fspec);
    for (int o = 0; o < DT_OP_MAX_OUT; o++) {
      if (n->spare[o]) dt_tensor_release(n->spare[o]);
      dt_dspec_free(n->ospec[o]), dt_dspec_free(n->spare_spec[o]);
    }
  }
  for (int i = 0; i < g->nguards; i++) free((char *)g->guards[i].s), dt_dspec_free((dt_dspec *)g->guards[i].spec);
  for (int e = 0; e < g->next; e++) dt_dspec_free((dt_dspec *)g->ext_guard[e].spec);
  if (g->own) dt_graph_clear_slots(g);
  for (int r = 0; r < g->nreads; r++) free(g->reads[r].where);
  free(g->reads);
  dt_dyn_free(g);
  free(g->refusal);
  free(g->nodes), free(g->guards), free(g->args), free(g->ext), free(g->ext_guard), free(g->ret_slot), free(g->val), free(g->own), free(g->prod);
  free(g);
}
