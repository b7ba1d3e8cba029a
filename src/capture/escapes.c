/* Tensors a capture made that escaped into Lua state (see graph_impl.h). */
#include <stdatomic.h>

#include "autograd/autograd.h"
#include "base/error.h"
#include "capture/graph_impl.h"

/* A tensor the graph made that Lua still holds after the call (the host collected its garbage
 * first), other than the returned ones and the .grad the graph set, was stored in Lua state (a
 * table, an upvalue: optimizer state made on the first step); a replay would not update it.
 * Not checked while autograd's saved tensors of a returned result hold outputs too. */
int dt_graph_check_escapes(dt_graph *g, dt_value *const *ret, int nret) {
  for (int k = 0; k < g->nnodes; k++)
    if (g->nodes[k].grad && !g->has_backward) return DT_OK;
  for (int i = 0; i < g->mapcap; i++) {
    const tmap_entry *e = &g->map[i];
    if (!e->t || !IS_TENSOR_KEY(e->v) || e->slot < 0) continue;
    int expected = 1 + (dt_slotmap_get(g, e->v == SPEC_KEY ? PLAIN_KEY : SPEC_KEY, e->t) != MISSING); /* the map's */
    for (int r = 0; r < nret; r++) {
      int dup = 0;
      for (int q = 0; q < r && !dup; q++) dup = ret[q] == ret[r];
      expected += ret[r] && !dup && ret[r]->local == e->t;
    }
    int outside = 0; /* an argument's or external's own tensor (full_tensor of a replicated one): Lua may hold it anyway */
    for (int a = 0; a < g->nargs + g->next; a++) {
      const dt_value *x = a < g->nargs ? g->args[a] : g->ext[a - g->nargs];
      const dt_value *gr = x->local ? dt_autograd_grad_of(x) : NULL;
      expected += gr && gr->local == e->t;
      outside |= x->local == e->t;
    }
    if (outside) continue;
    if (atomic_load(&e->t->refcount) <= expected) continue;
    const gnode *n = NULL;
    for (int k = 0; k < g->nnodes && !n; k++)
      for (int o = 0; o < g->nodes[k].nout; o++)
        if (g->nodes[k].out[o] == e->slot) n = &g->nodes[k];
    return dt_error("compile: the tensor made by %s at %s is kept in Lua after the call (stored in a table or an "
                    "upvalue, e.g. optimizer state made on the first step); a replay would not update it: return it, "
                    "or make it before compiling (one eager step)",
                    n ? (n->kind == NODE_CONV ? "a conversion" : n->kind == NODE_OP ? dt_op_get(n->op)->name : "get_grad") : "an op",
                    n && n->where ? n->where : "?");
  }
  return DT_OK;
}
