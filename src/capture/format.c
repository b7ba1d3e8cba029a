/* The graph as text (like a captured FX graph: one line per node) and as Graphviz. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "capture/graph_impl.h"

typedef struct sbuf {
  char *s;
  size_t n, cap;
  int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char line[2048];
  int k = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (k < 0 || b->oom) return;
  size_t len = strlen(line);
  if (b->n + len + 1 > b->cap) {
    size_t cap = (b->cap ? 2 * b->cap : 1024) + len;
    char *s = realloc(b->s, cap);
    if (!s) {
      b->oom = 1;
      return;
    }
    b->s = s, b->cap = cap;
  }
  memcpy(b->s + b->n, line, len + 1);
  b->n += len;
}

static const char *conv_name(dt_conv_kind k) {
  static const char *names[] = {"from_local", "to_local", "redistribute", "full_tensor", "redistribute_any", "full", "clone"};
  return names[k];
}

static const char *node_name(const gnode *n) {
  if (n->kind == NODE_GET_GRAD) return "get_grad";
  if (n->kind == NODE_SET_GRAD) return "set_grad";
  return n->kind == NODE_CONV ? conv_name(n->conv) : dt_op_get(n->op)->name;
}

/* The static args worth reading: the numbers, the ints (a random op's are its generator slots). */
static void static_args(sbuf *b, const gnode *n, int sep) {
  const dt_op_args *a = &n->args;
  int ns = a->nscalar ? a->nscalar : (a->flags & DT_ARG_SCALAR) ? 1 : 0;
  char e[96];
  for (int i = 0; i < ns && i < 4; i++, sep = 1) {
    if (dt_dyn_scalar_text(n, i, e, sizeof e)) put(b, "%s%s", sep ? ", " : "", e);
    else put(b, "%s%.17g", sep ? ", " : "", a->scalar[i]);
  }
  if (n->kind == NODE_OP && a->nints && !n->random) {
    put(b, "%s[", sep ? ", " : "");
    for (int i = 0; i < a->nints; i++) {
      if (dt_dyn_int_text(n, i, e, sizeof e)) put(b, "%s%s", i ? ", " : "", e);
      else put(b, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
    }
    put(b, "]");
  }
}

static void text(sbuf *b, const dt_graph *g) {
  if (dt_dyn_header(g)) put(b, "%s\n", dt_dyn_header(g));
  put(b, "graph(");
  for (int i = 0; i < g->nargs; i++) put(b, "%s%%%d", i ? ", " : "", i);
  put(b, ")%s", g->next ? "  externals" : "");
  for (int e = 0; e < g->next; e++) put(b, " %%%d", g->nargs + e);
  put(b, "\n");
  for (int k = 0; k < g->nnodes; k++) {
    const gnode *n = &g->nodes[k];
    put(b, "  ");
    for (int o = 0; o < n->nout; o++) put(b, "%s%%%d", o ? ", " : "", n->out[o]);
    put(b, "%s%s(", n->nout ? " = " : "", node_name(n));
    for (int i = 0; i < n->nin; i++) {
      if (n->in[i] >= 0) put(b, "%s%%%d", i ? ", " : "", n->in[i]);
      else put(b, "%sNone", i ? ", " : "");
    }
    static_args(b, n, n->nin > 0);
    put(b, ")  %s%s", n->desc ? n->desc : "", n->inplace ? " (in place)" : "");
    if (n->has_dec && n->moves) put(b, " (redistributes)");
    for (int w = 0; w < n->nwait; w++) put(b, " (waits for %s #%d)", dt_bucket_name(&g->buckets[n->wait[w]]), n->wait[w] + 1);
    if (n->bucket >= 0) {
      const gbucket *q = &g->buckets[n->bucket];
      put(b, " (%s #%d%s)", dt_bucket_name(q), n->bucket + 1, &g->nodes[q->last] == n ? q->nmembers > 1 ? ": starts, packed" : ": starts" : ", packed");
    }
    if (n->random && g->dyn) put(b, " (rng, words by its size)");
    else if (n->random) put(b, " (rng +%llu, %llu words)", (unsigned long long)n->rng_rel, (unsigned long long)n->rng_words);
    put(b, "%s  -- %s\n", n->dead ? "  [dead]" : "", n->where ? n->where : "?");
  }
  put(b, "  return");
  for (int i = 0; i < g->nret; i++) {
    if (g->ret_slot[i] >= 0) put(b, "%s %%%d", i ? "," : "", g->ret_slot[i]);
    else put(b, "%s (a Lua value)", i ? "," : "");
  }
  put(b, "\n");
}

static void dot(sbuf *b, const dt_graph *g) {
  put(b, "digraph compiled {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
  for (int i = 0; i < g->nargs; i++) put(b, "  s%d [label=\"arg %%%d\", shape=ellipse];\n", i, i);
  for (int e = 0; e < g->next; e++) put(b, "  s%d [label=\"external %%%d\", shape=ellipse];\n", g->nargs + e, g->nargs + e);
  int *prod = malloc(sizeof *prod * ((size_t)g->nslots + 1));
  if (!prod) {
    b->oom = 1;
    return;
  }
  for (int s = 0; s < g->nslots; s++) prod[s] = s < g->nargs + g->next ? -2 - s : -1;
  for (int k = 0; k < g->nnodes; k++) {
    const gnode *n = &g->nodes[k];
    put(b, "  n%d [label=\"%s\\n%s\\n%s\"%s];\n", k, node_name(n), n->desc ? n->desc : "", n->where ? n->where : "",
        n->dead ? ", style=dashed" : n->moves ? ", color=blue" : "");
    for (int i = 0; i < n->nin; i++) {
      int s = n->in[i];
      if (s < 0) continue;
      if (prod[s] >= 0) put(b, "  n%d -> n%d;\n", prod[s], k);
      else put(b, "  s%d -> n%d;\n", s, k);
    }
    for (int o = 0; o < n->nout; o++) prod[n->out[o]] = k;
    if (n->inplace && n->nin && n->in[0] >= 0) prod[n->in[0]] = k; /* later readers see the write */
  }
  for (int i = 0; i < g->nret; i++) {
    int s = g->ret_slot[i];
    if (s < 0) continue;
    put(b, "  r%d [label=\"return %d\", shape=ellipse];\n", i, i + 1);
    if (prod[s] >= 0) put(b, "  n%d -> r%d;\n", prod[s], i);
    else put(b, "  s%d -> r%d;\n", s, i);
  }
  put(b, "}\n");
  free(prod);
}

char *dt_graph_format(const dt_graph *g, int as_dot) {
  sbuf b = {0};
  if (as_dot) dot(&b, g);
  else text(&b, g);
  if (b.oom || !b.s) return free(b.s), dt_error("compile: out of memory"), NULL;
  return b.s;
}
