/* Recording: the front door asks for a node around each op call that needs one. */
#include "autograd/autograd.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/backward.h"
#include "autograd/values.h"
#include "base/error.h"

/* An in-place op that autograd records writes into self: refused on a leaf that requires
 * grad (its .grad would no longer be the gradient of what was used), and on a tensor whose
 * storage other tensors share (a view or its base: their histories would not see the
 * write; dtlua does not rebase views). */
static int check_inplace(const dt_op_def *def, dt_value *self) {
  const dt_grad_meta *m = dt_grad_meta_of(self);
  if (m && m->requires_grad && !m->grad_fn)
    return dt_error("%s: a leaf tensor that requires grad is used in an in-place op (do it inside dt.no_grad, "
                    "or on a clone)", def->name);
  if (atomic_load_explicit(&self->local->storage->refcount, memory_order_relaxed) > 1)
    return dt_error("%s: in-place op recorded by autograd on a tensor that shares its storage with another "
                    "(a view, the base of a view, or a value saved for backward); use the out-of-place op",
                    def->name);
  return DT_OK;
}

static int save_value(dt_node *n, const dt_value *v, int *slot) {
  dt_saved *s = &n->saved[n->nsaved];
  dt_saved_set(s, v);
  if (v->spec && !s->v.spec) return dt_error("autograd: out of memory saving for %s", n->name);
  *slot = n->nsaved++;
  return DT_OK;
}

int dt_autograd_before(dt_context *ctx, dt_op_id op, const dt_op_args *args, dt_value *const *in, int nin,
                       dt_autograd_pending *p) {
  const dt_op_def *def = dt_op_get(op);
  const dt_backward_def *bw = dt_backward_of(op);
  p->active = 0, p->node = NULL;
  if ((def->flags & DT_OPF_INPLACE) && check_inplace(def, in[0]) != DT_OK) return DT_ERR;
  if (!bw->fn && (def->flags & DT_OPF_INPLACE)) /* self would keep a history that no longer holds */
    return dt_error("%s: an in-place op without a gradient on a tensor that requires grad (or written from one); "
                    "do it inside dt.no_grad, or on a detached tensor", def->name);
  if (!bw->fn) return DT_OK; /* no gradient: the outputs do not require grad */
  dt_node *n = dt_node_new(ctx, DT_NODE_OP, def->name, nin, def->nout);
  if (!n) return DT_ERR;
  n->op = op;
  n->args = *args;
  n->args.in = NULL, n->args.nin = nin, n->args.region = NULL;
  int nsave = 0;
  for (int i = 0; i < nin && i < 32; i++) nsave += in[i] && (bw->save_in & DT_SAVE(i));
  for (int o = 0; o < def->nout; o++) nsave += (bw->save_out & DT_SAVE(o)) != 0;
  if (nsave && dt_node_alloc_saved(n, nsave) != DT_OK) goto fail;
  for (int i = 0; i < nin; i++) {
    if (!in[i]) continue;
    if (dt_slot_meta_set(&n->in_meta[i], in[i]) != DT_OK) goto fail;
    dt_grad_meta *m = dt_grad_meta_of(in[i]);
    if (m && m->requires_grad && dt_grad_meta_edge(m, &n->edges[i]) != DT_OK) goto fail;
    if (i < 32 && (bw->save_in & DT_SAVE(i))) {
      if (i == 0 && (bw->flags & DT_BW_SELF_BEFORE)) { /* the value before the write: a copy */
        dt_tensor *c = dt_tensor_clone(in[0]->local);
        if (!c) goto fail;
        dt_value tmp;
        dt_value_init(&tmp, c, in[0]->spec);
        int st = save_value(n, &tmp, &n->saved_in[0]);
        dt_tensor_release(c);
        if (st != DT_OK) goto fail;
      } else if (save_value(n, in[i], &n->saved_in[i]) != DT_OK)
        goto fail;
    }
  }
  p->active = 1, p->node = n;
  return DT_OK;
fail:
  dt_node_release(n);
  return DT_ERR;
}

void dt_autograd_cancel(dt_autograd_pending *p) {
  if (p->node) dt_node_release(p->node);
  p->node = NULL, p->active = 0;
}

int dt_autograd_after(dt_context *ctx, dt_autograd_pending *p, dt_value *const *in, int nin, dt_value *const *out) {
  (void)ctx, (void)nin;
  dt_node *n = p->node;
  p->node = NULL, p->active = 0;
  if (!n) return DT_OK;
  const dt_backward_def *bw = dt_backward_of(n->op);
  int st = DT_OK;
  for (int o = 0; o < n->nout && st == DT_OK; o++) {
    dt_value *v = out ? out[o] : in[0]; /* in place: the result is self */
    if (!v) continue;
    if (dt_slot_meta_set(&n->out_meta[o], v) != DT_OK) st = DT_ERR;
    else if ((bw->save_out & DT_SAVE(o)) && save_value(n, v, &n->saved_out[o]) != DT_OK) st = DT_ERR;
    else if (dt_dtype_is_float(dt_value_dtype(v))) st = dt_grad_meta_set_history(v, n, o);
  }
  dt_node_release(n); /* the outputs hold it now */
  return st;
}

/* ---- custom nodes ---- */
int dt_autograd_record_custom(dt_context *ctx, const char *name, dt_value *const *in, int nin, dt_value *const *out,
                              int nout, const dt_dspec *const *grad_spec, dt_custom_backward_fn fn, void *ud,
                              void (*free_ud)(void *)) {
  if (!dt_autograd_wants(ctx, in, nin)) {
    if (free_ud) free_ud(ud);
    return DT_OK;
  }
  dt_node *n = dt_node_new(ctx, DT_NODE_CUSTOM, name, nin, nout);
  if (!n) {
    if (free_ud) free_ud(ud);
    return DT_ERR;
  }
  n->custom = fn, n->ud = ud, n->free_ud = free_ud;
  int st = DT_OK;
  for (int i = 0; i < nin && st == DT_OK; i++) {
    if (!in[i]) continue;
    st = dt_slot_meta_set(&n->in_meta[i], in[i]);
    if (st == DT_OK && grad_spec && grad_spec[i]) { /* the caller's placements for this gradient */
      dt_dspec_free(n->in_meta[i].spec);
      if (!(n->in_meta[i].spec = dt_dspec_copy(grad_spec[i]))) st = dt_error("autograd: out of memory");
    }
    dt_grad_meta *m = dt_grad_meta_of(in[i]);
    if (st == DT_OK && m && m->requires_grad) st = dt_grad_meta_edge(m, &n->edges[i]);
  }
  for (int o = 0; o < nout && st == DT_OK; o++) {
    if (!out[o]) continue;
    st = dt_slot_meta_set(&n->out_meta[o], out[o]);
    if (st == DT_OK && dt_dtype_is_float(dt_value_dtype(out[o]))) st = dt_grad_meta_set_history(out[o], n, o);
  }
  dt_node_release(n);
  return st;
}

void dt_autograd_keep_partial(dt_value *out) {
  dt_grad_meta *m = out ? dt_grad_meta_of(out) : NULL;
  if (m && m->grad_fn && m->grad_fn->kind == DT_NODE_CUSTOM) m->grad_fn->keeps_partial = 1;
}

/* ---- custom nodes that keep values for their backward ---- */
int dt_autograd_record_custom_saving(dt_context *ctx, const char *name, dt_value *const *in, int nin,
                                     dt_value *const *out, int nout, dt_value *const *save, int nsave,
                                     dt_custom_backward_fn fn, void *ud, void (*free_ud)(void *), dt_node **node) {
  *node = NULL;
  if (!dt_autograd_wants(ctx, in, nin)) {
    if (free_ud) free_ud(ud);
    return DT_OK;
  }
  if (dt_autograd_record_custom(ctx, name, in, nin, out, nout, NULL, fn, ud, free_ud) != DT_OK) return DT_ERR;
  /* the node just recorded is the grad_fn of its floating-point outputs (none: it is gone) */
  dt_node *n = NULL;
  for (int o = 0; o < nout && !n; o++) {
    const dt_grad_meta *m = out[o] ? dt_grad_meta_of(out[o]) : NULL;
    if (m && m->grad_fn && m->grad_fn->kind == DT_NODE_CUSTOM && m->grad_fn->ud == ud) n = m->grad_fn;
  }
  *node = n; /* also on error: the outputs hold it */
  if (!n || nsave <= 0) return DT_OK;
  if (dt_node_alloc_saved(n, nsave) != DT_OK) return DT_ERR;
  for (int i = 0; i < nsave; i++) {
    dt_saved_set(&n->saved[i], save[i]);
    n->nsaved++;
    if (save[i]->spec && !n->saved[i].v.spec) return dt_error("%s: out of memory saving for backward", name);
  }
  return DT_OK;
}

int dt_autograd_node_zeros(dt_context *ctx, const dt_node *n, int o, dt_value *out) {
  dt_value_init(out, NULL, NULL);
  if (o < 0 || o >= n->nout || !n->out_meta[o].present) return DT_OK;
  return dt_autograd_full(ctx, &n->out_meta[o], 0.0, out);
}
