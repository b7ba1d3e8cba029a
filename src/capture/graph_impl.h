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
  /* DTensor ops whose decision moves nothing, on this rank's mesh, with no local args (e.g.
   * pointwise): replay runs the local kernel directly (meta: the local outputs') and gives the
   * outputs these specs (copies; spare_spec: one released by the last replay) */
  int local_fast;
  dt_dspec *ospec[DT_OP_MAX_OUT], *spare_spec[DT_OP_MAX_OUT];
  /* a redistribution that is one all_reduce (Partial -> Replicate on one mesh dim of this
   * rank's mesh; ar_comm non-NULL, meta[0] its local output, ospec[0] its spec): comm_plan.c
   * puts it in a bucket (-1: none) at element bucket_off, replayed through the async collectives */
  dt_comm *ar_comm;
  dt_reduce_op ar_op;
  int bucket;
  int64_t bucket_off;
  int *wait, nwait;         /* buckets whose all_reduce this node waits for before it runs */
} gnode;

/* Consecutive all_reduces on one group, reduce op and dtype, none of whose outputs a node
 * between them reads, packed into one buffer: each member copies its input into `send` and
 * makes its output a view of `recv`; the last member starts the all_reduce; the first node
 * that reads an output (or the end of the replay) waits for it. */
typedef struct gbucket {
  dt_comm *comm;
  dt_dtype dtype;
  dt_reduce_op op;
  int first, last, nmembers;
  int64_t count;            /* elements */
  dt_tensor *send, *recv;   /* replay: the packed buffers (owned; recv reused when nothing else holds it) */
  dt_comm_work *work;       /* replay: started, not yet waited */
} gbucket;

typedef struct tmap_entry { /* a known value (v, its local t) -> slot; and (NULL, t) -> the last slot holding t */
  const dt_value *v;
  dt_tensor *t; /* retained by its (NULL, t) entry */
  int slot;
} tmap_entry;

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

/* passes.c: dead nodes, each slot's last use, the peak bytes; then comm_plan */
int dt_graph_passes(dt_graph *g);

/* comm_plan.c: the all_reduce buckets and where each is waited for (after the last uses);
 * replay: a member node's step, the waits before node k, and every outstanding wait. */
int dt_graph_plan_comm(dt_graph *g);
int dt_bucket_run_member(dt_graph *g, gnode *n, const dt_value *x, dt_value *out);
int dt_bucket_wait(dt_graph *g, int b);
int dt_bucket_wait_all(dt_graph *g);
void dt_buckets_free(dt_graph *g);

#endif
