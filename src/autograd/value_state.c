/* A value's autograd state as the user sees it: requires_grad, is_leaf, .grad, grad_fn,
 * retain_grad, hooks, detach_. */
#include "autograd/autograd.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/values.h"
#include "base/error.h"

int dt_autograd_requires_grad(const dt_value *v) { return v->autograd && dt_value_requires_grad(v); }

int dt_autograd_is_leaf(const dt_value *v) {
  const dt_grad_meta *m = dt_grad_meta_of(v);
  return !m || !m->grad_fn;
}

int dt_autograd_set_requires_grad(dt_value *v, int flag) {
  dt_grad_meta *m = dt_grad_meta_of(v);
  if (m && m->grad_fn) {
    if (!flag)
      return dt_error("requires_grad_: a tensor computed by a recorded op (grad_fn %s) cannot stop requiring "
                      "grad; use t:detach()", m->grad_fn->name);
    return DT_OK;
  }
  if (flag && !dt_dtype_is_float(dt_value_dtype(v)))
    return dt_error("requires_grad_: only floating-point tensors can require gradients (this one is %s)",
                    dt_dtype_name(dt_value_dtype(v)));
  if (!m && !flag) return DT_OK;
  if (!m && !(m = dt_grad_meta_get(v))) return DT_ERR;
  m->requires_grad = flag != 0;
  return DT_OK;
}

const dt_value *dt_autograd_grad_of(const dt_value *v) {
  const dt_grad_meta *m = dt_grad_meta_of(v);
  return m && m->grad.local ? &m->grad : NULL;
}

int dt_autograd_set_grad(dt_value *v, const dt_value *g) {
  if (!g) {
    dt_grad_meta *m = dt_grad_meta_of(v);
    if (m) dt_value_clear(&m->grad);
    return DT_OK;
  }
  dt_slot_meta want = {0};
  if (dt_slot_meta_set(&want, v) != DT_OK) return DT_ERR;
  int st = DT_OK;
  if (dt_value_dtype(g) != want.dtype)
    st = dt_error("t.grad = g: g's dtype %s differs from the tensor's %s", dt_dtype_name(dt_value_dtype(g)),
                  dt_dtype_name(want.dtype));
  else if (!g->spec != !v->spec)
    st = dt_error("t.grad = g: %s", v->spec ? "the tensor is a DTensor and g a plain tensor"
                                            : "the tensor is a plain tensor and g a DTensor");
  else if (dt_value_ndim(g) != want.ndim ||
           memcmp(dt_value_shape(g), want.shape, sizeof(int64_t) * (size_t)want.ndim) != 0)
    st = dt_error("t.grad = g: g's shape differs from the tensor's");
  else if (v->spec && !dt_mesh_equal(v->spec->mesh, g->spec->mesh))
    st = dt_error("t.grad = g: g lives on another mesh than the tensor");
  dt_slot_meta_clear(&want);
  if (st != DT_OK) return st;
  dt_grad_meta *m = dt_grad_meta_get(v);
  if (!m) return DT_ERR;
  dt_value c;
  if (dt_autograd_share(g, &c) != DT_OK) return DT_ERR;
  dt_value_clear(&m->grad);
  m->grad = c;
  return DT_OK;
}

const char *dt_autograd_grad_fn_name(const dt_value *v) {
  const dt_grad_meta *m = dt_grad_meta_of(v);
  return m && m->grad_fn ? m->grad_fn->name : NULL;
}

int dt_autograd_retains_grad(const dt_value *v) {
  const dt_grad_meta *m = dt_grad_meta_of(v);
  return m && m->retains_grad;
}

int dt_autograd_retain_grad(dt_value *v) {
  dt_grad_meta *m = dt_grad_meta_of(v);
  if (!m || !m->requires_grad) return dt_error("retain_grad: the tensor does not require grad");
  if (!m->grad_fn) return DT_OK; /* a leaf keeps its grad anyway */
  dt_node *n = m->grad_fn;
  if (!n->retain && !(n->retain = calloc((size_t)n->nout, sizeof *n->retain)))
    return dt_error("retain_grad: out of memory");
  n->retain[m->output_nr] = m; /* weak: m clears it when it dies */
  m->retains_grad = 1;
  return DT_OK;
}

int dt_autograd_register_hook(dt_value *v, dt_grad_hook_fn fn, void *ud, void (*free_ud)(void *), int *id) {
  static _Thread_local int next_id;
  dt_grad_meta *m = dt_grad_meta_of(v);
  if (!m || !m->requires_grad) {
    if (free_ud) free_ud(ud);
    return dt_error("register_hook: cannot register a hook on a tensor that does not require grad");
  }
  dt_hook *h = calloc(1, sizeof *h);
  if (!h) {
    if (free_ud) free_ud(ud);
    return dt_error("register_hook: out of memory");
  }
  h->id = ++next_id, h->fn = fn, h->ud = ud, h->free_ud = free_ud;
  dt_hook **list = m->grad_fn ? &m->grad_fn->hooks : &m->hooks;
  h->output_nr = m->grad_fn ? m->output_nr : 0;
  while (*list) list = &(*list)->next; /* hooks run in registration order */
  *list = h;
  *id = h->id;
  return DT_OK;
}

static void remove_from(dt_hook **list, int id) {
  for (; *list; list = &(*list)->next)
    if ((*list)->id == id) {
      dt_hook *h = *list;
      *list = h->next;
      if (h->free_ud) h->free_ud(h->ud);
      free(h);
      return;
    }
}

void dt_autograd_remove_hook(dt_value *v, int id) {
  dt_grad_meta *m = dt_grad_meta_of(v);
  if (!m) return;
  remove_from(&m->hooks, id);
  if (m->grad_fn) remove_from(&m->grad_fn->hooks, id);
}

void dt_autograd_detach_(dt_value *v) {
  dt_grad_meta *m = dt_grad_meta_of(v);
  if (!m) return;
  if (m->grad_fn) {
    if (m->grad_fn->retain && m->grad_fn->retain[m->output_nr] == m) m->grad_fn->retain[m->output_nr] = NULL;
    dt_node_release(m->grad_fn);
    m->grad_fn = NULL;
  }
  m->requires_grad = 0, m->retains_grad = 0;
}
