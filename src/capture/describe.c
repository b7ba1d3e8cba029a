/* A recorded graph's nodes for analyses outside src/capture (data parallelism's batch-dim
 * analysis reads a trace through the bindings: doc/data_parallel.md). */
#include "capture/graph_impl.h"
#include "ops/ops.h"

static const char *kind_name(const gnode *n) {
  switch (n->kind) {
  case NODE_OP: return "op";
  case NODE_GET_GRAD: return "get_grad";
  case NODE_SET_GRAD: return "set_grad";
  default: return "conversion"; /* a DTensor conversion (f:graph() names which) */
  }
}

int dt_graph_nnodes(const dt_graph *g) { return g->nnodes; }

void dt_graph_node(const dt_graph *g, int k, dt_graph_node_info *out) {
  const gnode *n = &g->nodes[k];
  const dt_op_def *def = n->kind == NODE_OP ? dt_op_get(n->op) : NULL;
  *out = (dt_graph_node_info){
      .kind = kind_name(n),
      .name = def ? def->name : kind_name(n),
      .family = def ? dt_sharding_family_name(def->sharding) : NULL,
      .where = n->where ? n->where : "?",
      .nin = n->nin,
      .nout = n->nout,
      .inplace = n->inplace,
      .view = def && (def->flags & DT_OPF_VIEW) != 0,
      .dead = n->dead,
      .in = n->in,
      .out = n->out,
      .args = def ? &n->args : NULL,
      .meta = def ? n->meta : NULL,
  };
}

void dt_graph_counts(const dt_graph *g, int *nargs, int *nexternals) { *nargs = g->nargs, *nexternals = g->next; }

int dt_graph_return_slot(const dt_graph *g, int i) { return i >= 0 && i < g->nret ? g->ret_slot[i] : -1; }

const dt_guard *dt_graph_external_guard(const dt_graph *g, int e) { return &g->ext_guard[e]; }

const char *dt_graph_trace_refusal(const dt_graph *g) { return g->refusal; }
