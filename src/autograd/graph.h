/* The autograd graph: nodes (one per recorded op call, plus one per leaf that accumulates
 * into .grad), their edges to the nodes of their inputs, and the metadata a value carries.
 * Everything here belongs to one rank (one thread): counts are plain ints.
 *
 * Ownership: a value's metadata holds its grad_fn; a node holds the nodes its edges point
 * to and its saved values; a leaf's accumulate node holds the leaf's metadata.  Weak
 * pointers (cleared by the side that dies first): a leaf's metadata -> its accumulate node,
 * a node -> the metadata of its outputs that retain their grad. */
#ifndef DT_AUTOGRAD_GRAPH_H
#define DT_AUTOGRAD_GRAPH_H

#include <stdint.h>

#include "autograd/grad_kind.h"
#include "distributed/context.h"
#include "distributed/value.h"

struct dt_node;
struct dt_bw;

/* A gradient hook: sees the gradient g of a value when it is complete (before it flows on or
 * accumulates into .grad) and may replace it by filling *replace (left empty: g stays). */
typedef int (*dt_grad_hook_fn)(dt_context *ctx, void *ud, const dt_value *g, dt_value *replace);
typedef struct dt_hook {
  int id, output_nr; /* output_nr: which output of a node it watches (0 for a leaf) */
  dt_grad_hook_fn fn;
  void *ud;
  void (*free_ud)(void *ud);
  struct dt_hook *next;
} dt_hook;

typedef struct dt_grad_meta {
  dt_autograd_link link; /* first: value.h releases through it */
  int refs;
  int requires_grad;         /* a leaf's flag; 1 for a value computed by a recorded op */
  struct dt_node *grad_fn;   /* owned; NULL for a leaf */
  int output_nr;
  struct dt_node *accumulate; /* weak: a leaf's accumulate node, while some graph holds it */
  dt_value grad;             /* .grad (local NULL: none) */
  int retains_grad;
  dt_hook *hooks;            /* a leaf's hooks (a non-leaf's live on its grad_fn) */
} dt_grad_meta;

/* What the engine knows of a forward input or output: the gradient it takes must have this
 * dtype and (global) shape, and for a DTensor these placements (spec; Partial placements
 * already turned into Replicate, the gradient's placement). */
typedef struct dt_slot_meta {
  int present;
  dt_dtype dtype;
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  dt_dspec *spec; /* owned; NULL for a plain tensor */
} dt_slot_meta;

typedef struct dt_edge {
  struct dt_node *node; /* owned; NULL: the input needs no gradient */
  int nr;               /* which output of node the input was */
} dt_edge;

typedef struct dt_saved {
  dt_value v; /* local retained, spec copied, no autograd metadata (no cycles) */
  unsigned version;
} dt_saved;

/* A custom node's backward (the DTensor API's conversions, Lua autograd.Functions,
 * checkpoints): from the gradients of its outputs (NULL: none flowed) fills grad_in[i] for the
 * inputs with needs[i].  kind: on entry the kind of the outputs' plain gradients, on return
 * that of the inputs' (left as it is: the same; grad_kind.h). */
typedef int (*dt_custom_backward_fn)(dt_context *ctx, void *ud, const dt_value *const *grad_out, int nout,
                                     dt_value *grad_in, int nin, const unsigned char *needs, dt_grad_kind *kind);

typedef enum dt_node_kind { DT_NODE_OP, DT_NODE_ACCUMULATE, DT_NODE_CUSTOM } dt_node_kind;

typedef struct dt_node {
  int refs;
  dt_node_kind kind;
  const char *name; /* the op's name ("add"), "accumulate_grad", or the custom node's */
  uint64_t seq;     /* recording order: later nodes run first */
  int nin, nout;
  dt_edge *edges;        /* [nin] */
  dt_slot_meta *in_meta; /* [nin]: what each input's gradient must be */
  dt_slot_meta *out_meta; /* [nout]: what each output's gradient must be */
  dt_saved *saved;       /* [nsaved]: forward inputs then outputs the rule asked for */
  int nsaved, saved_cap;  /* filled, allocated (dt_node_alloc_saved) */
  int *saved_in;         /* [nin]: index into saved, or -1 */
  int *saved_out;        /* [nout] */
  int saved_freed;       /* an earlier backward without retain_graph released saved */
  /* DT_NODE_OP */
  dt_op_id op;
  dt_op_args args; /* the forward call's (in = NULL, region = NULL) */
  /* DT_NODE_ACCUMULATE */
  dt_grad_meta *leaf; /* owned */
  /* DT_NODE_CUSTOM */
  dt_custom_backward_fn custom;
  void *ud;
  void (*free_ud)(void *ud);
  int keeps_partial; /* takes its outputs' gradients Partial (dt_autograd_keep_partial) */
  /* hooks on the outputs, and outputs whose value retains its grad (weak, [nout] or NULL) */
  dt_hook *hooks;
  dt_grad_meta **retain;
  size_t size; /* bytes of the node's block (pool.h) */
} dt_node;

/* ---- metadata ---- */
/* NULL when autograd never saw v (the link is the metadata's first member) */
static inline dt_grad_meta *dt_grad_meta_of(const dt_value *v) { return (dt_grad_meta *)v->autograd; }
/* v's metadata, attached on first use (NULL + dt_error on out of memory). */
dt_grad_meta *dt_grad_meta_get(dt_value *v);
static inline int dt_value_requires_grad(const dt_value *v) {
  const dt_grad_meta *m = dt_grad_meta_of(v);
  return m && m->requires_grad;
}
/* The edge a gradient for v flows along: its grad_fn, or its (new) accumulate node. */
int dt_grad_meta_edge(dt_grad_meta *m, dt_edge *e);

/* ---- nodes ---- */
/* A node with room for nin edges and nout outputs, refs 1, the next seq of ctx. */
dt_node *dt_node_new(dt_context *ctx, dt_node_kind kind, const char *name, int nin, int nout);
static inline void dt_node_retain(dt_node *n) { n->refs++; }
void dt_node_release(dt_node *n); /* frees chains of nodes without recursion */
/* Fills m from v (spec copied with Partial -> Replicate). */
int dt_slot_meta_set(dt_slot_meta *m, const dt_value *v);
void dt_slot_meta_clear(dt_slot_meta *m);
/* Saves a copy of v (retaining its data) with its current version. */
void dt_saved_set(dt_saved *s, const dt_value *v);
void dt_node_free_saved(dt_node *n);
/* Room for n saved values (zeroed); DT_ERR + dt_error when out of memory. */
int dt_node_alloc_saved(dt_node *node, int n);

/* The metadata of an output of n (output nr), holding n. */
int dt_grad_meta_set_history(dt_value *v, dt_node *n, int nr);

#endif
