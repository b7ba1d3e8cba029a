/* The graph's objects and their lifetimes (see graph.h). */
#include "autograd/graph.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/pool.h"
#include "base/error.h"

static void hooks_free(dt_hook *h) {
  while (h) {
    dt_hook *next = h->next;
    if (h->free_ud) h->free_ud(h->ud);
    free(h);
    h = next;
  }
}

/* ---- metadata ---- */
static void meta_unref(dt_grad_meta *m);

static void meta_link_release(dt_autograd_link *link) { meta_unref((dt_grad_meta *)link); }

static void meta_unref(dt_grad_meta *m) {
  if (!m || --m->refs > 0) return;
  if (m->grad_fn) {
    if (m->grad_fn->retain && m->grad_fn->retain[m->output_nr] == m) m->grad_fn->retain[m->output_nr] = NULL;
    dt_node_release(m->grad_fn);
  }
  if (m->accumulate) m->accumulate->leaf = NULL; /* cannot happen: the node holds m */
  dt_value_clear(&m->grad);
  hooks_free(m->hooks);
  dt_pool_free(m, sizeof *m);
}

dt_grad_meta *dt_grad_meta_get(dt_value *v) {
  if (v->autograd) return (dt_grad_meta *)v->autograd;
  dt_grad_meta *m = dt_pool_alloc(sizeof *m);
  if (!m) return dt_error("autograd: out of memory"), NULL;
  m->link.release = meta_link_release;
  m->refs = 1;
  v->autograd = &m->link;
  return m;
}

int dt_grad_meta_edge(dt_grad_meta *m, dt_edge *e) {
  if (m->grad_fn) {
    dt_node_retain(m->grad_fn);
    e->node = m->grad_fn, e->nr = m->output_nr;
    return DT_OK;
  }
  if (!m->accumulate) {
    dt_node *n = dt_node_new(NULL, DT_NODE_ACCUMULATE, "accumulate_grad", 0, 1);
    if (!n) return DT_ERR;
    n->leaf = m, m->refs++;
    m->accumulate = n; /* weak: the node is owned by the edges pointing at it */
    e->node = n;
  } else {
    dt_node_retain(m->accumulate);
    e->node = m->accumulate;
  }
  e->nr = 0;
  return DT_OK;
}

int dt_grad_meta_set_history(dt_value *v, dt_node *n, int nr) {
  dt_grad_meta *m = dt_grad_meta_get(v);
  if (!m) return DT_ERR;
  dt_node_retain(n);
  if (m->grad_fn) dt_node_release(m->grad_fn);
  m->grad_fn = n, m->output_nr = nr, m->requires_grad = 1;
  return DT_OK;
}

/* ---- nodes ---- */
void dt_slot_meta_clear(dt_slot_meta *m) {
  dt_dspec_free(m->spec);
  m->spec = NULL;
  m->present = 0;
}

int dt_slot_meta_set(dt_slot_meta *m, const dt_value *v) {
  m->present = 1;
  m->dtype = dt_value_dtype(v);
  m->ndim = dt_value_ndim(v);
  memcpy(m->shape, dt_value_shape(v), sizeof(int64_t) * (size_t)m->ndim);
  m->spec = NULL;
  if (!v->spec) return DT_OK;
  if (!(m->spec = dt_dspec_copy(v->spec))) return dt_error("autograd: out of memory");
  for (int d = 0; d < m->spec->mesh->ndim; d++)
    if (m->spec->p[d].kind == DT_PARTIAL) m->spec->p[d] = (dt_placement){.kind = DT_REPLICATE};
  return DT_OK;
}

void dt_saved_set(dt_saved *s, const dt_value *v) {
  dt_tensor_retain(v->local);
  dt_value_init(&s->v, v->local, v->spec ? dt_dspec_copy(v->spec) : NULL);
  s->version = v->local->storage ? v->local->storage->version : 0;
}

void dt_node_free_saved(dt_node *n) {
  for (int i = 0; i < n->nsaved; i++) dt_value_clear(&n->saved[i].v);
  if (n->nsaved) n->saved_freed = 1;
}

int dt_node_alloc_saved(dt_node *node, int n) {
  if (!(node->saved = dt_pool_alloc(sizeof *node->saved * (size_t)n))) return dt_error("autograd: out of memory");
  node->saved_cap = n;
  return DT_OK;
}

dt_node *dt_node_new(dt_context *ctx, dt_node_kind kind, const char *name, int nin, int nout) {
  /* one block: the node, then its per-input and per-output arrays */
  size_t sz = sizeof(dt_node) + (size_t)nin * (sizeof(dt_edge) + sizeof(dt_slot_meta) + sizeof(int)) +
              (size_t)nout * (sizeof(dt_slot_meta) + sizeof(int));
  dt_node *n = dt_pool_alloc(sz);
  if (!n) return dt_error("autograd: out of memory recording %s", name), NULL;
  n->size = sz, n->refs = 1, n->kind = kind, n->name = name, n->nin = nin, n->nout = nout;
  n->seq = ctx ? ++ctx->autograd_seq : 0;
  char *p = (char *)(n + 1);
  n->in_meta = (dt_slot_meta *)p, p += (size_t)nin * sizeof(dt_slot_meta);
  n->out_meta = (dt_slot_meta *)p, p += (size_t)nout * sizeof(dt_slot_meta);
  n->edges = (dt_edge *)p, p += (size_t)nin * sizeof(dt_edge);
  n->saved_in = (int *)p, p += (size_t)nin * sizeof(int);
  n->saved_out = (int *)p;
  for (int i = 0; i < nin; i++) n->saved_in[i] = -1;
  for (int o = 0; o < nout; o++) n->saved_out[o] = -1;
  return n;
}

/* Frees n, whose refs reached 0; the nodes its edges held are released through the
 * caller's worklist (a graph can be a chain of a million nodes). */
static void node_free(dt_node *n, dt_node ***work, int *nwork, int *capwork) {
  for (int i = 0; i < n->nin; i++) {
    dt_node *c = n->edges[i].node;
    if (c && --c->refs == 0) {
      if (*nwork == *capwork) {
        int cap = *capwork ? *capwork * 2 : 16;
        dt_node **w = realloc(*work, sizeof *w * (size_t)cap);
        if (!w) continue; /* out of memory: leak the rest rather than crash */
        *work = w, *capwork = cap;
      }
      (*work)[(*nwork)++] = c;
    }
    dt_slot_meta_clear(&n->in_meta[i]);
  }
  for (int o = 0; o < n->nout; o++) dt_slot_meta_clear(&n->out_meta[o]);
  for (int i = 0; i < n->nsaved; i++) dt_value_clear(&n->saved[i].v);
  dt_pool_free(n->saved, sizeof *n->saved * (size_t)n->saved_cap);
  if (n->leaf) {
    n->leaf->accumulate = NULL;
    meta_unref(n->leaf);
  }
  if (n->retain)
    for (int o = 0; o < n->nout; o++)
      if (n->retain[o]) n->retain[o] = NULL; /* weak */
  free(n->retain);
  hooks_free(n->hooks);
  if (n->free_ud) n->free_ud(n->ud);
  dt_pool_free(n, n->size);
}

void dt_node_release(dt_node *n) {
  if (!n || --n->refs > 0) return;
  dt_node **work = NULL;
  int nwork = 0, capwork = 0;
  node_free(n, &work, &nwork, &capwork);
  while (nwork > 0) node_free(work[--nwork], &work, &nwork, &capwork);
  free(work);
}
