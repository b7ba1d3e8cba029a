/* Graph capture and replay (dt.compile, doc/compile.md).  While a graph records, the front
 * door (src/call) reports every op it ran and the DTensor conversions theirs, through the
 * context's capture hooks; each becomes a node that owns what replay needs: the op, its
 * static args, its input and output slots, and the execution step taken -- the local kernel
 * and the output metadata for plain tensors, the dispatcher's decision for DTensors, the
 * generator words of a random op.  Replay runs the nodes in order with no Lua, no shape rule
 * on plain tensors, no sharding propagation and no decision lookup; nodes on which autograd
 * records (an input requires grad) go through the front door, which records them.
 *
 * Slots: 0..nargs-1 the tensor arguments, then the externals (tensors the function used that
 * it neither received nor made: upvalues, parameters; read by reference), then one per node
 * output.  A tensor is known by its local dt_tensor (retained while the graph records, so an
 * address is never reused). */
#ifndef DT_CAPTURE_CAPTURE_H
#define DT_CAPTURE_CAPTURE_H

#include "base/export.h"

#include "distributed/context.h"
#include "distributed/value.h"

/* What the interpreter gives a recording: pin keeps an external value alive for as long as
 * the graph lives (DT_ERR + dt_error when it cannot be found); where writes the source line
 * the current call comes from ("file.lua:12"). */
typedef struct dt_capture_host {
  int (*pin)(void *ud, dt_value *v);
  void (*where)(void *ud, char *buf, size_t len);
  void *ud;
} dt_capture_host;

/* A guard: what one argument of a compiled call must be for a graph to replay. */
typedef enum dt_guard_kind { DT_GUARD_NIL, DT_GUARD_BOOL, DT_GUARD_INT, DT_GUARD_FLOAT, DT_GUARD_STRING, DT_GUARD_TENSOR, DT_GUARD_OBJECT } dt_guard_kind;
typedef struct dt_guard {
  dt_guard_kind kind;
  int64_t i;        /* bool, int; string: its length; object (a table, a function): its identity */
  double f;         /* float (compared bitwise) */
  const char *s;    /* string (the graph keeps a copy) */
  /* tensors: the local tensor's dtype, shape and strides; a DTensor's mesh and placements and global shape */
  dt_dtype dtype;
  int ndim, requires_grad;
  int alias;        /* 0, or 2 * (1 + j) + (same tensor) for the first earlier argument j sharing its storage */
  int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS];
  const dt_dspec *spec; /* NULL: plain; a copy in the graph */
} dt_guard;

/* The guard of a tensor value. */
DT_API void dt_guard_of_value(const dt_value *v, dt_guard *g);

typedef struct dt_graph dt_graph;

typedef struct dt_graph_stats {
  int nodes, dead, externals, args, returns;
  int collective_nodes; /* DTensor nodes that redistribute, and conversions */
  int64_t peak_bytes, peak_bytes_unreleased; /* bytes held by node outputs at most, with and without releasing each after its last use */
  long long replays;
  int async_all_reduces, buckets; /* all_reduce redistributions replayed async, and the collectives all packed ones become */
  int async_all_gathers, async_reduce_scatters; /* all_gather and reduce_scatter redistributions replayed async */
} dt_graph_stats;

/* Starts recording on ctx: the tensor arguments args[0..nargs) are slots 0..nargs-1 and
 * guards[0..nguards) the guards of every argument (copied).  NULL + dt_error when a graph
 * already records on ctx, or out of memory. */
DT_API dt_graph *dt_capture_begin(dt_context *ctx, const dt_capture_host *host, dt_value *const *args, int nargs,
                                  const dt_guard *guards, int nguards);
/* The collective passes' options (comm_plan.c): bucket_cap bytes packed into one collective
 * at most (0: none packed), overlap 0: replay runs each bucket's collective blocking. */
#define DT_GRAPH_BUCKET_CAP_BYTES ((int64_t)25 << 20) /* replicate's default bucket_cap_mb */
DT_API void dt_graph_set_comm_options(dt_graph *g, int64_t bucket_cap, int overlap);
/* Stops recording.  ret[0..nret): the function's returned tensors (NULL for a non-tensor
 * return), whose slots ret_slot receives; then dead-code elimination and each slot's last
 * use.  On error (a returned tensor that was not made by a recorded call: a capture error)
 * the graph is freed. */
DT_API int dt_capture_end(dt_context *ctx, dt_graph *g, dt_value *const *ret, int nret);
/* Stops recording and frees the graph (the function raised). */
DT_API void dt_capture_abort(dt_context *ctx, dt_graph *g);
/* Records t.grad = g (g NULL: nil) after the binding did it: a node of the graph. */
DT_API int dt_capture_set_grad(dt_context *ctx, dt_value *t, dt_value *g);
/* Whether a graph records on ctx (the bindings refuse what cannot be captured). */
static inline int dt_capture_active(const dt_context *ctx) { return ctx && ctx->capture != NULL; }
/* A capture error: "compile: <what> at <line>" naming the Lua line of the current call. */
DT_API int dt_capture_refuse(dt_context *ctx, const char *what);

/* Notes that Lua read sizes of v while a graph records (t:size(), t:numel(), t:stride()...;
 * dim -1: all of them): vals[0..n) the values read.  A dynamic graph keeps such a size static
 * (dynamic.c). */
DT_API int dt_capture_note_size(dt_context *ctx, const dt_value *v, int dim, const int64_t *vals, int n);

/* Shape-polymorphic graphs (dynamic.c): makes b, just recorded, general over the sizes in
 * which its arguments differ from a's (an earlier recording of the same function): 1 done,
 * 0 not possible (why: the reason, for f:graph()), -1 + dt_error out of memory. */
DT_API int dt_graph_generalize(const dt_graph *a, dt_graph *b, char *why, size_t len);
/* Shape i recorded for a dynamic graph: its symbols' values and the replays it had (0: none). */
DT_API int dt_dyn_shapes(const dt_graph *g, int i, int64_t *vals, int *nsyms, long long *replays);
DT_API int dt_graph_is_dynamic(const dt_graph *g);

/* Marks g, just begun, as a trace for analysis (data parallelism's batch-dim analysis,
 * describe.c): what a replay could not reproduce is recorded as it ran instead of refused
 * (values read into Lua, ids converted by the bindings, gradients into leaves made inside,
 * tensors kept in Lua state); such a graph never replays. */
DT_API void dt_capture_set_trace(dt_graph *g);
/* Whether the graph recording on ctx is such a trace (the bindings then refuse nothing). */
DT_API int dt_capture_tracing(const dt_context *ctx);

/* A recorded graph's nodes, read by analyses (describe.c).  Slots as above; in[i] -1: an
 * absent operand.  kind: "op", a DTensor conversion's name, "get_grad" or "set_grad". */
typedef struct dt_graph_node_info {
  const char *name, *kind, *family, *where; /* family: the op's sharding family (ops only) */
  int nin, nout, inplace, view, dead;
  const int *in, *out;
  const dt_op_args *args;                   /* static args (ops only, else NULL) */
  const dt_meta *meta;                      /* the outputs' dtype and shape (ops only) */
} dt_graph_node_info;
DT_API int dt_graph_nnodes(const dt_graph *g);
DT_API void dt_graph_node(const dt_graph *g, int k, dt_graph_node_info *out);
/* The slot counts: arguments, externals; the slot of return i (-1: a Lua value). */
DT_API void dt_graph_counts(const dt_graph *g, int *nargs, int *nexternals);
DT_API int dt_graph_return_slot(const dt_graph *g, int i);
/* External e's guard (shape, dtype, requires_grad at the capture). */
DT_API const dt_guard *dt_graph_external_guard(const dt_graph *g, int e);
/* A trace's first call that a capture would refuse ("t:item() (...) at file.lua:12"), or NULL. */
DT_API const char *dt_graph_trace_refusal(const dt_graph *g);

/* 1 when the call's arguments (guards) and ctx's modes are those g was recorded with; for a
 * dynamic graph, with its symbolic sizes bound from the arguments (dynamic.c). */
DT_API int dt_graph_matches(const dt_graph *g, const dt_context *ctx, const dt_guard *guards, int n);
/* Replays g on the tensor arguments args[0..nargs).  DT_OK: the returned values wait in the
 * graph (dt_graph_return); DT_ERR + dt_error. *miss = 1 (and DT_OK, nothing run) when an
 * external tensor changed shape, dtype or placements since the capture. */
DT_API int dt_graph_replay(dt_context *ctx, dt_graph *g, dt_value *const *args, int nargs, int *miss);
/* Return i of the last capture or replay: kind 0 not a tensor, 1 argument slot *index, 2
 * external *index, 3 a value made by the graph, moved into *out by dt_graph_take_return. */
DT_API int dt_graph_return_kind(const dt_graph *g, int i, int *index);
DT_API int dt_graph_nreturns(const dt_graph *g);
DT_API void dt_graph_take_return(dt_graph *g, int i, dt_value *out);
/* Releases what a replay left in the graph's slots (after the returns were taken). */
DT_API void dt_graph_clear_slots(dt_graph *g);
DT_API dt_value *dt_graph_external(const dt_graph *g, int i);

/* The graph as text (one line per node: slots, op, output shapes and placements, Lua line)
 * or as Graphviz (dot = 1); malloc'd, NULL + dt_error on out of memory. */
DT_API char *dt_graph_format(const dt_graph *g, int dot);
DT_API dt_graph_stats dt_graph_get_stats(const dt_graph *g);
DT_API void dt_graph_free(dt_graph *g);

#endif
