/* The graph's layout, shared by recording (record.c), passes (passes.c), replay (replay.c)
 * and printing (format.c); nothing outside src/capture sees it. */
#ifndef DT_CAPTURE_GRAPH_IMPL_H
#define DT_CAPTURE_GRAPH_IMPL_H

#include "capture/capture.h"
#include "comm/comm.h"
#include "distributed/dispatch.h"

enum {
  NODE_OP,
  NODE_CONV,
  NODE_GET_GRAD, /* out[0] = in[0].grad, a gradient the graph did not make (shared) */
  NODE_SET_GRAD  /* in[0].grad = in[1] (-1: nil): backward's assignment, t.grad = g */
};

typedef struct gnode {
  int kind;
  dt_op_id op;
  dt_op_args args;          /* static args (in = NULL, name = the op's) */
  int nin, *in;             /* slots, -1: an absent operand */
  int nout, out[DT_OP_MAX_OUT]; /* slots; in-place ops write in[0] and have none */
  int inplace, distributed, random, dead;
  int grad;                 /* autograd recorded a node for it at capture */
  int has_dec;              /* a priced decision to execute (else dt_dispatch: random, write) */
  dt_dispatch_decision dec;
  dt_kernel_fn kernel;      /* plain ops: the device's kernel, run without the shape rule */
  dt_meta meta[DT_OP_MAX_OUT];
  uint64_t rng_rel, rng_words; /* random ops: the generator offset from the call's start, words drawn */
  /* conversions (kind NODE_CONV) */
  dt_conv_kind conv;
  dt_mesh *mesh; /* retained */
  dt_dspec *fspec;          /* DT_CONV_FULL: the spec to fill (owned), with value */
  double value;
  dt_placement p[DT_MESH_MAX_DIMS], gp[DT_MESH_MAX_DIMS];
  int has_gp, run_check, ndim, has_shape;
  int64_t shape[DT_MAX_DIMS];
  int moves;                /* collectives may run: a redistributing decision, a conversion */
  int64_t out_bytes;        /* new storage its outputs hold (views, in-place: 0) */
  char *where, *desc;       /* the Lua line; the outputs' dtype, shape, placements */
  int *release, nrelease;   /* slots whose last use is this node */
  dt_tensor *spare[DT_OP_MAX_OUT]; /* buffer reuse: an output released by the last replay, owned */
  /* DTensor ops whose decision moves nothing, on this rank's mesh (not random): replay runs the
   * local kernel directly (meta: the local outputs') and gives the outputs these specs
   * (copies; spare_spec: one released by the last replay) */
  int local_fast;
  dt_dspec *ospec[DT_OP_MAX_OUT], *spare_spec[DT_OP_MAX_OUT];
  /* a local_fast op whose family calls its local kernel with args of its own (views' local
   * shapes, nn's and index's shard offsets): those args, computed once at record from the
   * decision (the specs are guarded, so they do not change between replays) */
  int has_largs;
  dt_op_args largs;
  /* a redistribution that is one collective on one mesh dim of this rank's mesh (coll: an
   * all_reduce Partial -> Replicate, an all_gather Shard(coll_dim) -> Replicate, a reduce_scatter
   * Partial -> Shard(coll_dim); coll_comm its group, meta[0] its local output, ospec[0] its spec,
   * coll_shape the local tensor before the scatter or after the gather): comm_plan.c puts it in a
   * bucket (-1: none) at element bucket_off (all_reduce) or, per group rank, coll_off[r] inside
   * that rank's block (all_gather, reduce_scatter), replayed through the async collectives */
  int coll;
  dt_comm *coll_comm;
  dt_reduce_op coll_op;
  int coll_dim, coll_mdim, coll_member; /* tensor dim, mesh dim; the member's index in its bucket */
  int64_t coll_shape[DT_MAX_DIMS];
  int64_t *coll_off;
  int bucket;
  int64_t bucket_off;
  int *wait, nwait;         /* buckets whose all_reduce this node waits for before it runs */
  /* a dynamic graph (dynamic.c): the static args that are sizes, as expressions of the
   * symbols (NULL: all constant), evaluated before the node runs */
  struct sym_expr *int_expr, *scalar_expr, *shape_expr; /* args.ints / args.scalar / conversion shape (fspec's or from_local's) */
} gnode;

enum { GCOLL_NONE, GCOLL_ALL_REDUCE, GCOLL_ALL_GATHER, GCOLL_REDUCE_SCATTER };

/* Consecutive collectives of one kind on one group, reduce op and dtype, none of whose outputs
 * a node between them reads, packed into one buffer: each member copies its input into `send`
 * (an all_reduce's at its offset; a reduce_scatter's chunk for each rank into that rank's
 * block; an all_gather's shard into this rank's block) and makes its output (a view of `recv`;
 * an all_gather's is filled from `recv` at the wait); the last member starts the collective;
 * the first node that reads an output (or the end of the replay) waits for it. */
typedef struct gbucket {
  int coll;                 /* GCOLL_* */
  dt_comm *comm;
  dt_dtype dtype;
  dt_reduce_op op;
  int first, last, nmembers;
  int64_t count;            /* elements (all_reduce); the members' whole tensors (the cap) */
  size_t *counts;           /* all_gather, reduce_scatter: elements of each group rank's block */
  int64_t block;            /* reduce_scatter: every block padded to the largest */
  int *members;             /* node indices, in order */
  dt_tensor **outs;         /* replay, all_gather: the members' outputs, filled at the wait */
  dt_tensor *send, *recv;   /* replay: the packed buffers (owned; recv reused when nothing else holds it) */
  dt_comm_work *work;       /* replay: started, not yet waited */
} gbucket;

typedef struct tmap_entry { /* a known value (v, its local t) -> slot; and (NULL, t) -> the last slot holding t */
  const dt_value *v;
  dt_tensor *t; /* retained by its (NULL, t) entry */
  int slot;
} tmap_entry;

/* A size Lua read while the graph recorded (t:size(), t:numel(), t:stride(), ...): the slot
 * read (recording numbering; MISSING: a tensor outside the graph) and the values read. */
typedef struct size_read {
  int slot, dim;  /* dim -1: every dim (size(), numel(), strides) */
  uint64_t hash;
  char *where;    /* the Lua line */
} size_read;

struct dt_graph {
  dt_context *ctx;
  dt_capture_host host;
  int nargs, next, nslots;
  dt_value **args;         /* the arguments of the capture (their .grad: GET_GRAD) */
  dt_value **ext;          /* externals, pinned by the host */
  dt_guard *ext_guard;     /* what each was at capture (replay checks it) */
  gnode *nodes;
  int nnodes, capnodes;
  dt_guard *guards;
  int nguards;
  dt_modes modes;          /* grad mode, autocast, implicit replication at capture */
  uint64_t rng_seed, rng_start, rng_last;
  tmap_entry *map;         /* while recording: open addressing */
  int mapcap, mapn;
  int *ret_slot, nret;
  dt_value **val;          /* replay: slot -> value */
  dt_value *own;           /* node output values (slot - nargs - next) */
  int *prod;               /* slot -> producing node * DT_OP_MAX_OUT + output, -1 for arguments, externals */
  int busy;
  int has_backward;        /* a backward ran inside: replay records no autograd (its backward is in the graph) */
  gbucket *buckets;        /* comm_plan.c */
  int nbuckets;
  int64_t bucket_cap;      /* bytes; 0: one all_reduce per bucket */
  int overlap;             /* 0: a bucket's all_reduce runs blocking */
  int trace;               /* recorded for analysis only (dt_capture_set_trace): never replayed */
  size_read *reads;        /* sizes Lua read while recording (dynamic.c unifies them) */
  int nreads, capreads;
  struct dyn_info *dyn;    /* non-NULL: a shape-polymorphic graph (dynamic.c) */
  char *refusal;           /* a trace: the first thing a capture would have refused, with its line */
  dt_graph_stats stats;
};

#define MISSING (-2000000000) /* not a slot of any numbering (see final_slot) */
/* The tensor-alone keys: a plain value and a DTensor sharing one local tensor stay apart. */
#define PLAIN_KEY ((const dt_value *)NULL)
#define SPEC_KEY ((const dt_value *)(uintptr_t)1)
#define TENSOR_KEY(v) ((v)->spec ? SPEC_KEY : PLAIN_KEY)
#define IS_TENSOR_KEY(k) ((k) == PLAIN_KEY || (k) == SPEC_KEY)

/* slot_map.c: while recording, a value is known by (value, local tensor) -> slot, and a tensor
 * alone (its plain or DTensor key) -> the last slot that held it; the map retains each tensor
 * it holds under a tensor key.  get/find return MISSING when absent. */
int dt_slotmap_get(const dt_graph *g, const dt_value *v, const dt_tensor *t);
int dt_slotmap_find(const dt_graph *g, const dt_value *v);
int dt_slotmap_set(dt_graph *g, const dt_value *v, dt_tensor *t, int slot);
int dt_slotmap_put(dt_graph *g, const dt_value *v, int slot);
void dt_slotmap_free(dt_graph *g);

/* escapes.c: DT_ERR + dt_error when a tensor the graph made is still held in Lua state after
 * the call (the host collected its garbage first), other than the returns and the .grad it set */
int dt_graph_check_escapes(dt_graph *g, dt_value *const *ret, int nret);

/* replay.c: two guards alike */
int dt_guard_equal(const dt_guard *a, const dt_guard *b);

/* passes.c: dead nodes, each slot's last use, the peak bytes; then comm_plan */
int dt_graph_passes(dt_graph *g);

/* comm_plan.c: the collective buckets and where each is waited for (after the last uses);
 * replay: a member node's step, the waits before node k, and every outstanding wait. */
int dt_graph_plan_comm(dt_graph *g);
/* recording: marks conversion node n (its call c) as a collective the planner may bucket */
int dt_graph_mark_collective(dt_context *ctx, gnode *n, const dt_conv_call *c);
const char *dt_bucket_name(const gbucket *b);
int dt_bucket_run_member(dt_graph *g, gnode *n, const dt_value *x, dt_value *out);
int dt_bucket_wait(dt_graph *g, int b);
int dt_bucket_wait_all(dt_graph *g);
void dt_buckets_free(dt_graph *g);

/* dynamic.c: a dynamic graph's per-node steps at replay -- its size args evaluated for the
 * bound symbols, a DTensor decision's global output metadata recomputed by the shape rule --
 * and what it owns. */
int dt_dyn_match(const dt_graph *g, const dt_guard *guards, int n);
int dt_dyn_prepare_node(dt_graph *g, gnode *n, dt_value *const *in);
void dt_dyn_count_replay(dt_graph *g);
void dt_dyn_free(dt_graph *g);
void dt_dyn_free_node(gnode *n);
/* format.c's symbolic text: the expression of int i / scalar i of n (NULL: a constant) */
const char *dt_dyn_int_text(const gnode *n, int i, char *buf, size_t len);
const char *dt_dyn_scalar_text(const gnode *n, int i, char *buf, size_t len);
const char *dt_dyn_header(const dt_graph *g);

#endif
