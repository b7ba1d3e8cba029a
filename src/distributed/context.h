/* The per-rank runtime context: everything one rank owns (its rank, its world
 * communicator, its cache of sub-groups, its generator state, its caches).  Nothing
 * mutable is global, so N ranks can live as N threads of one process. */
#ifndef DT_DISTRIBUTED_CONTEXT_H
#define DT_DISTRIBUTED_CONTEXT_H

#include "base/export.h"

#include "comm/comm.h"
#include "ops/random.h"
#include "ops/ops.h"
#include "distributed/placement.h"

struct dt_context;
struct dt_mesh;
struct dt_rule_args;
struct dt_strategy;

/* Per-rank modes that the front door and the dispatcher read (the bindings set them). */
typedef struct dt_modes {
  int implicit_replication; /* open dt.implicit_replication regions: plain tensors join DTensors replicated */
  int explain;              /* dt.explain: decide and describe strategies, run nothing */
  int grad_enabled;         /* autograd records nodes (src/autograd); on by default */
  int autocast_dtype;       /* dt.amp.autocast: 0 off, else 1 + the low dtype (src/call/autocast.h) */
} dt_modes;

/* A sharding rule registered for one op (dt.register_sharding from Lua), replacing the built-in
 * rule: fills s[*n] like a built-in rule (src/distributed/sharding_rules).  ud belongs to the
 * registrant, which frees it when it replaces or removes the rule. */
typedef int (*dt_rule_override_fn)(struct dt_context *ctx, void *ud, const struct dt_rule_args *r,
                                   struct dt_strategy *s, int *n);
typedef struct dt_rule_override {
  dt_rule_override_fn fn; /* NULL: the built-in rule */
  void *ud;
} dt_rule_override;

/* The front door (src/call/call.h dt_call), which autograd's backward rules and graph replay
 * call through the context: they sit below it and may not include it.  dt_call sets it. */
struct dt_value;
typedef int (*dt_front_door_fn)(struct dt_context *ctx, dt_op_id op, dt_op_args *args, struct dt_value *const *in,
                                int nin, struct dt_value *const *out);

/* Graph capture (src/capture, above the front door): while ctx->capture is set, the front
 * door reports every op it ran (after it succeeded) and the DTensor conversions theirs, so
 * that one place records a compiled function's graph.  A hook's error fails the call. */
typedef enum dt_conv_kind {
  DT_CONV_FROM_LOCAL, DT_CONV_TO_LOCAL, DT_CONV_REDISTRIBUTE, DT_CONV_FULL_TENSOR,
  /* what autograd makes outside the front door while a backward runs (src/autograd/values.c) */
  DT_CONV_REDISTRIBUTE_ANY, /* dt_redistribute_to_any: Partial targets too */
  DT_CONV_FULL,             /* a DTensor of spec filled with value */
  DT_CONV_CLONE             /* a copy of a DTensor's local data under its spec */
} dt_conv_kind;
typedef struct dt_conv_call { /* a conversion's arguments, as dt_call_<kind> took them */
  dt_conv_kind kind;
  struct dt_value *in, *out;
  struct dt_mesh *mesh;                                 /* from_local, redistribute */
  const dt_placement *p, *grad_p;                       /* p: from_local's placements, redistribute's target */
  int run_check, ndim;                                  /* from_local */
  const int64_t *shape;                                 /* from_local (NULL: inferred) */
  const struct dt_dspec *spec;                          /* full */
  double value;                                         /* full */
} dt_conv_call;
typedef struct dt_capture_hooks {
  int (*op)(struct dt_context *ctx, dt_op_id op, const dt_op_args *args, struct dt_value *const *in, int nin,
            struct dt_value *const *out);
  int (*conv)(struct dt_context *ctx, const dt_conv_call *c);
  /* backward set the .grad of the leaf whose autograd metadata is leaf (src/autograd) to g */
  int (*leaf_grad)(struct dt_context *ctx, const void *leaf, const struct dt_value *g);
  /* references the recording holds on t (it retains what it has seen), which autograd's
   * "is this gradient shared?" test discounts so that the capture clones what eager clones */
  int (*held)(struct dt_context *ctx, const struct dt_tensor *t);
} dt_capture_hooks;

/* A conversion made outside dt_call_* (autograd's gradient values) reported to a recording graph. */
#define DT_CAPTURE_CONV(ctx, ...) \
  ((ctx) && (ctx)->capture ? (ctx)->capture_hooks->conv((ctx), &(dt_conv_call){__VA_ARGS__}) : 0)

typedef struct dt_group_entry {
  int n;
  int *ranks;    /* world ranks, sorted */
  dt_comm *comm; /* NULL on ranks outside the group */
} dt_group_entry;

typedef struct dt_context {
  int rank, world_size, local_rank;
  const char *backend; /* "threads", "mpi" */
  dt_comm *world;      /* owned */
  dt_group_entry **groups; /* entries never move: Lua group objects point at them */
  int ngroups, capgroups;
  struct dt_comm_debug *comm_debug; /* dist/comm_debug.h, created on first use */
  struct dt_plan_cache *plans;      /* dist/redistribute.h, created on first use */
  struct dt_dispatch_state *dispatch; /* dist/dispatch.h: decision cache, stats; on first use */
  dt_rng_state rng; /* the generator (seed, offset) of every random op (dist/rng.h, doc/random.md) */
  dt_modes modes;
  dt_front_door_fn call;  /* dt_call */
  uint64_t autograd_seq;  /* recorded nodes so far: their order, the same on every rank (src/autograd) */
  const struct dt_grad_kind *autograd_kind; /* while a custom node's backward runs: its gradients'
                                             * kind, which a backward nested in it gives its roots */
  dt_rule_override rule_overrides[DT_OP_COUNT];
  struct dt_mesh **mesh_stack; /* mesh:use() regions, innermost last; retained */
  int mesh_depth, mesh_cap;
  const dt_capture_hooks *capture_hooks; /* src/capture: set while a graph is recorded */
  void *capture;                         /* the recording (src/capture), NULL when off */
  void *host; /* the interpreter state of the op call running now (the bindings set it), for overrides */
} dt_context;

/* Takes ownership of world.  NULL + dt_error on out of memory. */
DT_API dt_context *dt_context_new(dt_comm *world, int local_rank);
DT_API void dt_context_free(dt_context *ctx);
/* The group over `ranks` (world ranks, any order, distinct), created on first use and
 * cached: later calls with the same set return the same entry. */
DT_API int dt_context_group(dt_context *ctx, const int *ranks, int n, const dt_group_entry **out);

/* The mesh context stack: push retains m; pop_to releases down to depth; current is the
 * innermost mesh or NULL. */
DT_API int dt_context_push_mesh(dt_context *ctx, struct dt_mesh *m);
DT_API void dt_context_pop_mesh_to(dt_context *ctx, int depth);
struct dt_mesh *dt_context_current_mesh(const dt_context *ctx);

#endif
