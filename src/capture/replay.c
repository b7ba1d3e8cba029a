/* Replaying a graph: each node's execution step, run directly (see capture.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "base/error.h"
#include "call/call.h"
#include "call/call_dtensor.h"
#include "autograd/values.h"
#include "capture/graph_impl.h"
#include "distributed/dtensor_api.h"
#include "distributed/mesh.h"
#include "ops/random.h"
#include "tensor/storage.h"

#define SMALL_IN 8

static int spec_equal(const dt_dspec *a, const dt_dspec *b) {
  if (!a || !b) return a == b;
  if (a->mesh != b->mesh && !dt_mesh_equal(a->mesh, b->mesh)) return 0;
  return a->ndim == b->ndim && a->dtype == b->dtype &&
         memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0 &&
         dt_placements_equal(a->p, b->p, a->mesh->ndim);
}

int dt_guard_equal(const dt_guard *a, const dt_guard *b) {
  if (a->kind != b->kind) return 0;
  switch (a->kind) {
  case DT_GUARD_NIL: return 1;
  case DT_GUARD_BOOL:
  case DT_GUARD_INT:
  case DT_GUARD_OBJECT: return a->i == b->i;
  case DT_GUARD_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
  case DT_GUARD_STRING: return a->i == b->i && memcmp(a->s, b->s, (size_t)a->i) == 0;
  case DT_GUARD_TENSOR:
    return a->dtype == b->dtype && a->ndim == b->ndim && a->requires_grad == b->requires_grad && a->alias == b->alias &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0 &&
           memcmp(a->stride, b->stride, sizeof(int64_t) * (size_t)a->ndim) == 0 && spec_equal(a->spec, b->spec);
  }
  return 0;
}

int dt_graph_matches(const dt_graph *g, const dt_context *ctx, const dt_guard *guards, int n) {
  const dt_modes *m = &ctx->modes;
  if (n != g->nguards || m->grad_enabled != g->modes.grad_enabled || m->autocast_dtype != g->modes.autocast_dtype ||
      (m->implicit_replication > 0) != (g->modes.implicit_replication > 0))
    return 0;
  if (g->dyn) return dt_dyn_match(g, guards, n); /* binds the symbols */
  for (int i = 0; i < n; i++)
    if (!dt_guard_equal(&guards[i], &g->guards[i])) return 0;
  return 1;
}

/* A plain op (or a local_fast DTensor op): the kernel on the local tensors, outputs allocated
 * from the recorded metadata; a view op's kernel makes its view. */
static int run_plain(dt_context *ctx, gnode *n, dt_value *const *in, dt_value *const *out, dt_tensor **loc) {
  dt_op_args *a = n->has_largs ? &n->largs : &n->args;
  a->in = loc;
  if (n->random) a->ints[DT_RNG_SLOT_SEED] = (int64_t)ctx->rng.seed, a->ints[DT_RNG_SLOT_OFFSET] = (int64_t)ctx->rng.offset;
  dt_tensor *res[DT_OP_MAX_OUT] = {0};
  int st;
  if (n->inplace) {
    res[0] = loc[0];
    st = n->kernel(a, res);
  } else if (!n->nout || dt_op_get(n->op)->flags & DT_OPF_VIEW) {
    st = n->kernel(a, res);
  } else {
    dt_device_type dev = n->nin && loc[0] ? dt_tensor_device(loc[0]) : DT_HOST;
    st = DT_OK;
    for (int o = 0; o < n->nout && st == DT_OK; o++) {
      if ((res[o] = n->spare[o])) { /* the buffer of the last replay, if nobody else holds it now */
        n->spare[o] = NULL;
        if (res[o]->ndim == n->meta[o].ndim && /* a dynamic graph's sizes may have changed */
            memcmp(res[o]->shape, n->meta[o].shape, sizeof(int64_t) * (size_t)res[o]->ndim) == 0 &&
            atomic_load(&res[o]->storage->refcount) == 1) /* a view of it released since, or kept by the caller */
          continue;
        dt_tensor_release(res[o]);
      }
      if (!(res[o] = dt_tensor_empty(n->meta[o].dtype, n->meta[o].ndim, n->meta[o].shape, dev)))
        st = dt_error_prefix("%s", a->name);
    }
    if (st == DT_OK) st = n->kernel(a, res);
    if (st != DT_OK)
      for (int o = 0; o < n->nout; o++)
        if (res[o]) dt_tensor_release(res[o]);
  }
  a->in = NULL;
  if (st != DT_OK) return DT_ERR;
  if (n->random) ctx->rng.offset += n->rng_words;
  if (n->inplace) {
    dt_autograd_bump_version(in[0], a->name);
    return DT_OK;
  }
  for (int o = 0; o < n->nout; o++) {
    dt_dspec *spec = NULL;
    if (n->local_fast && !(spec = n->spare_spec[o]) && !(spec = dt_dspec_copy(n->ospec[o]))) {
      for (int j = o; j < n->nout; j++) dt_tensor_release(res[j]);
      return dt_error("%s: out of memory", a->name);
    }
    if (n->local_fast) n->spare_spec[o] = NULL;
    dt_value_init(out[o], res[o], spec);
  }
  return DT_OK;
}

/* A DTensor op: the recorded decision executed (random and write ops: their own steps). */
static int run_distributed(dt_context *ctx, gnode *n, dt_value *const *in, dt_value *const *out, dt_tensor **loc,
                           const dt_dspec **specs, int dynamic) {
  dt_op_args *a = &n->args;
  for (int i = 0; i < n->nin; i++) specs[i] = in[i] ? in[i]->spec : NULL;
  a->in = loc;
  dt_tensor *res[DT_OP_MAX_OUT] = {0};
  dt_dspec *rs[DT_OP_MAX_OUT] = {0};
  /* a dynamic graph asks the dispatcher (its cache) for the decision of the current sizes: the
   * cheapest strategy may change with them (even or uneven shards), and eager takes that one */
  int st = n->has_dec && !dynamic ? dt_dispatch_run_decision(ctx, n->op, a, specs, &n->dec, res, rs)
                      : dt_dispatch(ctx, n->op, a, specs, res, rs);
  a->in = NULL;
  if (st != DT_OK) return DT_ERR;
  if (n->inplace) {
    dt_tensor_release(res[0]);
    dt_dspec_free(rs[0]);
    dt_autograd_bump_version(in[0], a->name);
  } else {
    for (int o = 0; o < n->nout; o++) dt_value_init(out[o], res[o], rs[o]);
  }
  return DT_OK;
}

static int run_conv(dt_context *ctx, gnode *n, dt_value *x, dt_value *out) {
  const dt_placement *gp = n->has_gp ? n->gp : NULL;
  switch (n->conv) {
  case DT_CONV_FROM_LOCAL:
    return dt_call_from_local(ctx, x, n->mesh, n->p, n->run_check, n->ndim, n->has_shape ? n->shape : NULL, gp, out);
  case DT_CONV_TO_LOCAL: return dt_call_to_local(ctx, x, gp, out);
  case DT_CONV_REDISTRIBUTE: return dt_call_redistribute(ctx, x, n->mesh, n->p, gp, out);
  case DT_CONV_FULL_TENSOR: return dt_call_full_tensor(ctx, x, gp, out);
  case DT_CONV_REDISTRIBUTE_ANY: return dt_redistribute_to_any(ctx, x, n->mesh, n->p, out);
  case DT_CONV_CLONE: return dt_autograd_clone(ctx, x, out);
  case DT_CONV_FULL: {
    dt_slot_meta m = {.present = 1, .dtype = n->fspec->dtype, .ndim = n->fspec->ndim, .spec = n->fspec};
    memcpy(m.shape, n->fspec->shape, sizeof m.shape);
    return dt_autograd_full(ctx, &m, n->value, out);
  }
  }
  return dt_error("compile: unknown conversion");
}

/* .grad read and written as at the capture */
static int run_grad(gnode *n, dt_value *const *in, dt_value *out) {
  if (n->kind == NODE_SET_GRAD) return dt_autograd_set_grad(in[0], in[1]);
  const dt_value *gr = dt_autograd_grad_of(in[0]);
  if (!gr)
    return dt_error("compile: at %s a tensor's .grad was read; it was set at the capture and is nil at this replay "
                    "(the graph reads gradients made outside it)", n->where ? n->where : "?");
  return dt_autograd_share(gr, out);
}

static int run_node(dt_context *ctx, dt_graph *g, gnode *n) {
  if (n->dead) {
    ctx->rng.offset += n->rng_words; /* the generator advances as eagerly */
    return DT_OK;
  }
  dt_value *small[SMALL_IN], **in = small, *out[DT_OP_MAX_OUT];
  dt_tensor *small_loc[SMALL_IN], **loc = small_loc;
  const dt_dspec *small_sp[SMALL_IN], **specs = small_sp;
  if (n->nin > SMALL_IN) {
    size_t k = (size_t)n->nin;
    if (!(in = malloc((sizeof *in + sizeof *loc + sizeof *specs) * k))) return dt_error("compile: out of memory");
    loc = (dt_tensor **)(in + k), specs = (const dt_dspec **)(loc + k);
  }
  for (int i = 0; i < n->nin; i++) {
    in[i] = n->in[i] >= 0 ? g->val[n->in[i]] : NULL;
    loc[i] = in[i] ? in[i]->local : NULL;
  }
  for (int o = 0; o < n->nout; o++) out[o] = g->val[n->out[o]];
  if (g->dyn && dt_dyn_prepare_node(g, n, in) != DT_OK) { /* sizes for the bound symbols */
    if (in != small) free(in);
    return DT_ERR;
  }
  int st, grad = ctx->modes.grad_enabled;
  /* autograd records what it recorded at the capture, unless the graph holds its backward */
  ctx->modes.grad_enabled = n->grad && !g->has_backward;
  if (n->kind == NODE_CONV && n->bucket >= 0) st = dt_bucket_run_member(g, n, in[0], out[0]);
  else if (n->kind == NODE_CONV) st = run_conv(ctx, n, n->nin ? in[0] : NULL, out[0]);
  else if (n->kind == NODE_GET_GRAD || n->kind == NODE_SET_GRAD) st = run_grad(n, in, out[0]);
  else if (ctx->modes.grad_enabled) st = dt_call(ctx, n->op, &n->args, in, n->nin, out); /* the front door records it */
  else if (n->distributed && !n->local_fast) st = run_distributed(ctx, n, in, out, loc, specs, g->dyn != NULL);
  else st = run_plain(ctx, n, in, out, loc);
  ctx->modes.grad_enabled = grad;
  if (in != small) free(in);
  return st;
}

/* Releases slot s after its last use; a plain, contiguous output that no other value holds goes
 * back to its node for the next replay -- also when views of it are still alive (they are
 * released later in this replay, or kept by the caller): its storage stays allocated and warm
 * (a block freed and allocated again faults its pages in anew), and the next replay writes it
 * only if nothing holds it by then. */
static void release_slot(dt_graph *g, int s) {
  dt_value *v = g->val[s];
  int p = g->prod[s];
  if (p >= 0 && v->local && !v->autograd) {
    gnode *n = &g->nodes[p / DT_OP_MAX_OUT];
    dt_tensor *t = v->local;
    int o = p % DT_OP_MAX_OUT;
    if (n->kind == NODE_OP && (!n->distributed || n->local_fast) && !n->inplace &&
        !(dt_op_get(n->op)->flags & DT_OPF_VIEW) && !n->spare[o] && !n->spare_spec[o] &&
        atomic_load(&t->refcount) == 1 && t->offset == 0) {
      n->spare[o] = t, n->spare_spec[o] = v->spec;
      v->local = NULL, v->spec = NULL;
      return;
    }
  }
  dt_value_clear(v);
}

int dt_graph_replay(dt_context *ctx, dt_graph *g, dt_value *const *args, int nargs, int *miss) {
  *miss = 0;
  if (g->busy) return dt_error("compile: the compiled function was called again while it replays");
  if (nargs != g->nargs) return dt_error("compile: %d tensor arguments, the graph has %d", nargs, g->nargs);
  for (int e = 0; e < g->next; e++) { /* externals are read by reference: still what they were */
    dt_guard now;
    if (!g->ext[e]->local) return dt_error("compile: a tensor the compiled function uses from outside was released");
    dt_guard_of_value(g->ext[e], &now);
    if (!dt_guard_equal(&now, &g->ext_guard[e])) return *miss = 1, DT_OK;
  }
  for (int i = 0; i < nargs; i++) g->val[i] = args[i];
  for (int e = 0; e < g->next; e++) g->val[nargs + e] = g->ext[e];
  g->busy = 1;
  int autocast = ctx->modes.autocast_dtype; /* the casts are nodes of the graph */
  ctx->modes.autocast_dtype = 0;
  int st = DT_OK;
  for (int k = 0; k < g->nnodes && st == DT_OK; k++) {
    gnode *n = &g->nodes[k];
    for (int w = 0; w < n->nwait && st == DT_OK; w++) st = dt_bucket_wait(g, n->wait[w]);
    if (st == DT_OK) st = run_node(ctx, g, n);
    for (int r = 0; r < n->nrelease; r++) release_slot(g, n->release[r]);
  }
  if (dt_bucket_wait_all(g) != DT_OK && st == DT_OK) st = DT_ERR; /* the returns are complete */
  ctx->modes.autocast_dtype = autocast;
  g->busy = 0;
  if (st != DT_OK) return dt_graph_clear_slots(g), DT_ERR;
  g->stats.replays++;
  if (g->dyn) dt_dyn_count_replay(g);
  return DT_OK;
}

int dt_graph_nreturns(const dt_graph *g) { return g->nret; }

int dt_graph_return_kind(const dt_graph *g, int i, int *index) {
  int s = g->ret_slot[i];
  if (s < 0) return 0;
  if (s < g->nargs) return *index = s, 1;
  if (s < g->nargs + g->next) return *index = s - g->nargs, 2;
  return *index = s, 3;
}

void dt_graph_take_return(dt_graph *g, int i, dt_value *out) {
  dt_value *v = g->val[g->ret_slot[i]];
  *out = *v;
  dt_value_init(v, NULL, NULL);
}

void dt_graph_clear_slots(dt_graph *g) {
  for (int k = 0; k < g->nslots - g->nargs - g->next; k++) dt_value_clear(&g->own[k]);
}

dt_value *dt_graph_external(const dt_graph *g, int i) { return g->ext[i]; }

dt_graph_stats dt_graph_get_stats(const dt_graph *g) { return g->stats; }
