/* The collective passes (doc/compile.md, "Collectives: packing and overlap"): redistributions
 * that are one collective on one mesh dim -- an all_reduce (Partial -> Replicate), an
 * all_gather (Shard -> Replicate) or a reduce_scatter (Partial -> Shard) -- are bucketed:
 * consecutive ones of one kind on one group, reduce op and dtype, none of whose outputs a node
 * between them reads, packed into one buffer up to the bucket cap, and replayed through the
 * async collectives: the bucket's last member starts one collective, the first node that reads
 * one of its outputs waits for it, so the compute between overlaps the communication.
 * Packing keeps the bits: an all_gather moves bytes; an all_reduce or reduce_scatter folds
 * every element alike wherever it lies (threads: rank order), except MPI's float sums over more
 * than two ranks, whose algorithm may depend on the buffer's size: there a bucket holds one
 * such collective (still overlapped).  Uneven shards: an all_gather bucket is one all_gather_v
 * (each rank's block: its shards of every member); a reduce_scatter packs only members whose
 * chunks are even (every rank's block the same size, as dt_comm_ireduce_scatter wants: no
 * padding), an uneven one runs as recorded. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "capture/graph_impl.h"
#include "distributed/dtensor.h"
#include "distributed/mesh.h"
#include "distributed/redistribute.h"

const char *dt_bucket_name(const gbucket *b) {
  return b->coll == GCOLL_ALL_GATHER ? "all_gather" : b->coll == GCOLL_REDUCE_SCATTER ? "reduce_scatter" : "all_reduce";
}

int dt_graph_mark_collective(dt_context *ctx, gnode *n, const dt_conv_call *c) {
  if ((c->kind != DT_CONV_REDISTRIBUTE && c->kind != DT_CONV_REDISTRIBUTE_ANY) || !c->in || !c->in->spec ||
      !c->in->local || !c->out->spec || !c->out->local || c->in->spec->mesh->me < 0 ||
      dt_tensor_device(c->out->local) != DT_HOST)
    return DT_OK;
  const dt_dspec *s = c->in->spec;
  const dt_redist_plan *plan;
  if (dt_redistribute_plan(ctx, s, c->out->spec->p, 1, &plan) != DT_OK) return DT_ERR;
  if (plan->n != 1 || plan->steps[0].mask != 1 << plan->steps[0].mesh_dim) return DT_OK;
  const dt_redist_step *st = &plan->steps[0];
  int kind = st->kind == DT_STEP_ALL_REDUCE ? GCOLL_ALL_REDUCE
           : plan->nphase ? GCOLL_NONE /* the strided plans run in a view of their own */
           : st->kind == DT_STEP_ALL_GATHER && st->from.kind == DT_SHARD ? GCOLL_ALL_GATHER
           : st->kind == DT_STEP_REDUCE_SCATTER && st->to.kind == DT_SHARD ? GCOLL_REDUCE_SCATTER
           : GCOLL_NONE;
  if (kind == GCOLL_NONE) return DT_OK;
  const dt_tensor *t = c->out->local, *x = c->in->local;
  if (!(n->ospec[0] = dt_dspec_copy(c->out->spec))) return dt_error("compile: out of memory");
  n->meta[0] = (dt_meta){.dtype = t->dtype, .ndim = t->ndim};
  memcpy(n->meta[0].shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  memcpy(n->coll_shape, kind == GCOLL_REDUCE_SCATTER ? x->shape : t->shape, sizeof(int64_t) * (size_t)t->ndim);
  n->coll = kind;
  n->coll_comm = dt_mesh_comm(s->mesh, st->mesh_dim);
  n->coll_op = st->from.op;
  n->coll_mdim = st->mesh_dim;
  n->coll_dim = kind == GCOLL_ALL_GATHER ? st->from.dim : kind == GCOLL_REDUCE_SCATTER ? st->to.dim : -1;
  return DT_OK;
}

static int packs_exactly(const gbucket *b) {
  return b->coll == GCOLL_ALL_GATHER || strcmp(b->comm->backend, "threads") == 0 || b->comm->size <= 2 ||
         b->op == DT_REDUCE_MAX || b->op == DT_REDUCE_MIN || !dt_dtype_is_float(b->dtype);
}

/* elements of the whole tensor the member moves (an all_reduce's output; the others' coll_shape) */
static int64_t member_numel(const gnode *n) {
  return n->coll == GCOLL_ALL_REDUCE ? dt_shape_numel(n->meta[0].ndim, n->meta[0].shape)
                                     : dt_shape_numel(n->meta[0].ndim, n->coll_shape);
}

/* coordinate cc's chunk of n's gathered or scattered dim, its group rank and its elements */
static int64_t chunk_of(const gnode *n, int cc, int64_t *start, int64_t *len, int *rank) {
  int64_t L = n->coll_shape[n->coll_dim], whole = member_numel(n);
  dt_chunk(L, n->coll_comm->size, cc, start, len);
  *rank = dt_mesh_group_rank_of(n->ospec[0]->mesh, n->coll_mdim, cc);
  return L ? whole / L * *len : 0;
}

/* n replays as a bucket member: a collective whose autograd is not recorded at replay.  A
 * reduce_scatter of uneven chunks is left to run as recorded: packed, each rank's block would be
 * padded to the largest (dt_comm_ireduce_scatter's blocks are equal), more bytes than eager's
 * reduce_scatter of unpadded blocks. */
static int eligible(const dt_graph *g, const gnode *n) {
  if (n->dead || n->kind != NODE_CONV || !n->coll || (n->grad && !g->has_backward)) return 0;
  return n->coll != GCOLL_REDUCE_SCATTER || n->coll_shape[n->coll_dim] % n->coll_comm->size == 0;
}

static int add_wait(gnode *n, int b) {
  int *w = realloc(n->wait, sizeof *w * (size_t)(n->nwait + 1));
  if (!w) return dt_error("compile: out of memory");
  n->wait = w, n->wait[n->nwait++] = b;
  return DT_OK;
}

/* Marks bucket b waited for before node k (done[b]). */
static int wait_before(dt_graph *g, int k, int b, unsigned char *done) {
  if (done[b]) return DT_OK;
  done[b] = 1;
  return add_wait(&g->nodes[k], b);
}

/* The members of each bucket, and for all_gathers and reduce_scatters where each member's
 * chunk lies in each rank's block. */
static int layout(dt_graph *g) {
  for (int b = 0; b < g->nbuckets; b++) {
    gbucket *o = &g->buckets[b];
    if (!(o->members = malloc(sizeof *o->members * (size_t)o->nmembers))) return dt_error("compile: out of memory");
    o->nmembers = 0;
    if (o->coll != GCOLL_ALL_REDUCE && !(o->counts = calloc((size_t)o->comm->size, sizeof *o->counts)))
      return dt_error("compile: out of memory");
  }
  for (int k = 0; k < g->nnodes; k++) {
    gnode *n = &g->nodes[k];
    if (n->bucket < 0) continue;
    gbucket *o = &g->buckets[n->bucket];
    n->coll_member = o->nmembers;
    o->members[o->nmembers++] = k;
    if (o->coll == GCOLL_ALL_REDUCE) continue;
    if (!(n->coll_off = malloc(sizeof *n->coll_off * (size_t)o->comm->size))) return dt_error("compile: out of memory");
    for (int cc = 0; cc < o->comm->size; cc++) {
      int64_t st, len;
      int r;
      int64_t e = chunk_of(n, cc, &st, &len, &r);
      n->coll_off[r] = (int64_t)o->counts[r];
      o->counts[r] += (size_t)e;
    }
  }
  for (int b = 0; b < g->nbuckets; b++) {
    gbucket *o = &g->buckets[b];
    if (o->coll == GCOLL_REDUCE_SCATTER) o->block = (int64_t)o->counts[0]; /* even members: every rank's alike */
    if (o->coll == GCOLL_ALL_GATHER && !(o->outs = calloc((size_t)o->nmembers, sizeof *o->outs)))
      return dt_error("compile: out of memory");
  }
  return DT_OK;
}

int dt_graph_plan_comm(dt_graph *g) {
  dt_buckets_free(g);
  for (int k = 0; k < g->nnodes; k++) {
    gnode *n = &g->nodes[k];
    free(n->wait);
    n->wait = NULL, n->nwait = 0, n->bucket = -1;
  }
  int cand = 0;
  g->stats.async_all_reduces = g->stats.async_all_gathers = g->stats.async_reduce_scatters = 0;
  for (int k = 0; k < g->nnodes; k++) {
    const gnode *n = &g->nodes[k];
    if (!eligible(g, n)) continue;
    cand++;
    if (n->coll == GCOLL_ALL_REDUCE) g->stats.async_all_reduces++;
    else if (n->coll == GCOLL_ALL_GATHER) g->stats.async_all_gathers++;
    else g->stats.async_reduce_scatters++;
  }
  g->stats.buckets = 0;
  if (!cand) return DT_OK;
  unsigned char *done = calloc((size_t)cand, 1);
  if (!(g->buckets = calloc((size_t)cand, sizeof *g->buckets)) || !done) return free(done), dt_error("compile: out of memory");
  int open = -1, st = DT_OK;
  for (int k = 0; k < g->nnodes && st == DT_OK; k++) {
    gnode *n = &g->nodes[k];
    if (n->dead) continue;
    if (n->kind == NODE_GET_GRAD) { /* reads a .grad, which may be a member's output */
      for (int b = 0; b < g->nbuckets && st == DT_OK; b++) st = wait_before(g, k, b, done);
      open = -1;
    }
    for (int i = 0; i < n->nin && st == DT_OK; i++) {
      if (n->in[i] < 0 || (n->kind == NODE_SET_GRAD && i == 1)) continue; /* .grad = v shares v: no read */
      int p = g->prod[n->in[i]], b = p >= 0 ? g->nodes[p / DT_OP_MAX_OUT].bucket : -1;
      if (b < 0) continue;
      if (b == open) open = -1;
      st = wait_before(g, k, b, done);
    }
    if (st != DT_OK || !eligible(g, n)) continue;
    int64_t numel = member_numel(n), esz = (int64_t)dt_dtype_size(n->meta[0].dtype);
    gbucket *o = open >= 0 ? &g->buckets[open] : NULL;
    if (!o || o->coll != n->coll || o->comm != n->coll_comm || o->dtype != n->meta[0].dtype ||
        (n->coll != GCOLL_ALL_GATHER && o->op != n->coll_op) || !packs_exactly(o) ||
        (o->count + numel) * esz > g->bucket_cap) {
      open = g->nbuckets++;
      o = &g->buckets[open];
      *o = (gbucket){.coll = n->coll, .comm = n->coll_comm, .dtype = n->meta[0].dtype, .op = n->coll_op, .first = k};
    }
    n->bucket = open, n->bucket_off = o->count;
    o->count += numel, o->last = k, o->nmembers++;
  }
  g->stats.buckets = g->nbuckets;
  free(done);
  return st == DT_OK ? layout(g) : st;
}

/* A contiguous view of the 1-d buffer t at element off with this shape. */
static dt_tensor *flat_view(const dt_tensor *t, int ndim, const int64_t *shape, int64_t off) {
  int64_t stride[DT_MAX_DIMS];
  dt_contiguous_strides(ndim, shape, stride);
  return dt_tensor_view_of(t, ndim, shape, stride, t->offset + off);
}

/* t narrowed to [start, start + len) along d (a view) */
static dt_tensor *narrow(const dt_tensor *t, int d, int64_t start, int64_t len) {
  int64_t shape[DT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  shape[d] = len;
  return dt_tensor_view_of(t, t->ndim, shape, t->stride, t->offset + start * t->stride[d]);
}

/* t with a reference of its own, for copy_views to release */
static dt_tensor *held(const dt_tensor *t) {
  dt_tensor_retain((dt_tensor *)t);
  return (dt_tensor *)t;
}

/* dst = src, both views made here and released */
static int copy_views(dt_tensor *dst, dt_tensor *src) {
  int st = dst && src ? dt_tensor_copy_(dst, src, "redistribute") : dt_error("redistribute: out of memory");
  dt_tensor_release(dst), dt_tensor_release(src);
  return st;
}

static int64_t sum_counts(const gbucket *b) {
  int64_t s = 0;
  for (int r = 0; r < b->comm->size; r++) s += (int64_t)b->counts[r];
  return s;
}

/* this replay's buffers: send and recv (last replay's when nothing else holds it: an
 * all_reduce's and reduce_scatter's outputs are views of it) */
static int buffers(gbucket *b) {
  int64_t ns = b->coll == GCOLL_ALL_REDUCE ? b->count
             : b->coll == GCOLL_ALL_GATHER ? (int64_t)b->counts[b->comm->rank] : b->block * b->comm->size;
  int64_t nr = b->coll == GCOLL_ALL_REDUCE ? b->count : b->coll == GCOLL_ALL_GATHER ? sum_counts(b) : b->block;
  if (b->recv && (atomic_load(&b->recv->refcount) != 1 || atomic_load(&b->recv->storage->refcount) != 1))
    dt_tensor_release(b->recv), b->recv = NULL;
  if (!b->send && !(b->send = dt_tensor_empty(b->dtype, 1, &ns, DT_HOST))) return DT_ERR;
  if (!b->recv && !(b->recv = dt_tensor_empty(b->dtype, 1, &nr, DT_HOST))) return DT_ERR;
  return DT_OK;
}

/* whether the input t has the shape the member was recorded with */
static int input_ok(const gnode *n, const dt_tensor *t, const gbucket *b) {
  int64_t want[DT_MAX_DIMS];
  if (!t || t->dtype != b->dtype || t->ndim != n->meta[0].ndim) return 0;
  if (n->coll == GCOLL_ALL_REDUCE) return memcmp(t->shape, n->meta[0].shape, sizeof(int64_t) * (size_t)t->ndim) == 0;
  memcpy(want, n->coll_shape, sizeof want);
  if (n->coll == GCOLL_ALL_GATHER) {
    int64_t st, len;
    int r;
    for (int cc = 0; cc < b->comm->size; cc++)
      if (chunk_of(n, cc, &st, &len, &r), r == b->comm->rank) want[n->coll_dim] = len;
  }
  return memcmp(t->shape, want, sizeof(int64_t) * (size_t)t->ndim) == 0;
}

/* the member's input into send */
static int pack(const gnode *n, gbucket *b, const dt_tensor *t) {
  if (n->coll == GCOLL_ALL_REDUCE) return copy_views(flat_view(b->send, t->ndim, t->shape, n->bucket_off), held(t));
  if (n->coll == GCOLL_ALL_GATHER)
    return copy_views(flat_view(b->send, t->ndim, t->shape, n->coll_off[b->comm->rank]), held(t));
  for (int cc = 0; cc < b->comm->size; cc++) { /* reduce_scatter: each rank's chunk into its block */
    int64_t st, len;
    int r;
    chunk_of(n, cc, &st, &len, &r);
    dt_tensor *src = narrow(t, n->coll_dim, st, len);
    dt_tensor *dst = src ? flat_view(b->send, t->ndim, src->shape, r * b->block + n->coll_off[r]) : NULL;
    if (copy_views(dst, src) != DT_OK) return DT_ERR;
  }
  return DT_OK;
}

/* an all_gather bucket's members' outputs from recv (after the collective completed) */
static int unpack_gather(gbucket *b, const dt_graph *g) {
  int st = DT_OK;
  for (int i = 0; i < b->nmembers; i++) {
    const gnode *n = &g->nodes[b->members[i]];
    dt_tensor *out = b->outs[i];
    b->outs[i] = NULL;
    if (!out) continue;
    for (int cc = 0; cc < b->comm->size && st == DT_OK; cc++) {
      int64_t s, len, displ = 0, shape[DT_MAX_DIMS];
      int r;
      chunk_of(n, cc, &s, &len, &r);
      for (int q = 0; q < r; q++) displ += (int64_t)b->counts[q];
      memcpy(shape, n->coll_shape, sizeof shape);
      shape[n->coll_dim] = len;
      st = copy_views(narrow(out, n->coll_dim, s, len), flat_view(b->recv, out->ndim, shape, displ + n->coll_off[r]));
    }
    dt_tensor_release(out);
  }
  return st;
}

static int start(dt_graph *g, gbucket *b) {
  void *send = dt_tensor_data(b->send), *recv = dt_tensor_data(b->recv);
  dt_comm_work **w = g->overlap ? &b->work : NULL; /* NULL: the blocking call */
  int st = b->coll == GCOLL_ALL_REDUCE ? dt_comm_iall_reduce(b->comm, send, recv, (size_t)b->count, b->dtype, b->op, w)
         : b->coll == GCOLL_ALL_GATHER ? dt_comm_iall_gather_v(b->comm, send, recv, b->counts, b->dtype, w)
         : dt_comm_ireduce_scatter(b->comm, send, recv, (size_t)b->block, b->dtype, b->op, w);
  if (st == DT_OK && !g->overlap && b->coll == GCOLL_ALL_GATHER) st = unpack_gather(b, g);
  return st;
}

int dt_bucket_run_member(dt_graph *g, gnode *n, const dt_value *x, dt_value *out) {
  gbucket *b = &g->buckets[n->bucket];
  const char *name = "redistribute";
  const dt_tensor *t = x->local;
  if (!input_ok(n, t, b))
    return dt_error("compile: at %s the %s's input is not the tensor of the capture", n->where ? n->where : "?",
                    dt_bucket_name(b));
  if (&g->nodes[b->first] == n && buffers(b) != DT_OK) return dt_error_prefix("%s", name);
  if (pack(n, b, t) != DT_OK) return DT_ERR;
  dt_tensor *res = n->coll == GCOLL_ALL_GATHER ? dt_tensor_empty(b->dtype, n->meta[0].ndim, n->meta[0].shape, DT_HOST)
                 : flat_view(b->recv, n->meta[0].ndim, n->meta[0].shape,
                             n->coll == GCOLL_ALL_REDUCE ? n->bucket_off : n->coll_off[b->comm->rank]);
  dt_dspec *spec = res ? dt_dspec_copy(n->ospec[0]) : NULL;
  if (!spec) {
    if (res) dt_tensor_release(res);
    return dt_error("%s: out of memory", name);
  }
  if (n->coll == GCOLL_ALL_GATHER) { /* filled at the wait (a failed replay left the last one) */
    if (b->outs[n->coll_member]) dt_tensor_release(b->outs[n->coll_member]);
    dt_tensor_retain(res), b->outs[n->coll_member] = res;
  }
  dt_value_init(out, res, spec);
  return &g->nodes[b->last] == n ? start(g, b) : DT_OK;
}

void dt_graph_set_comm_options(dt_graph *g, int64_t bucket_cap, int overlap) {
  g->bucket_cap = bucket_cap, g->overlap = overlap;
}

int dt_bucket_wait(dt_graph *g, int b) {
  gbucket *k = &g->buckets[b];
  if (!k->work) return DT_OK;
  int st = dt_comm_work_wait(k->work);
  dt_comm_work_free(k->work);
  k->work = NULL;
  if (k->coll == GCOLL_ALL_GATHER && unpack_gather(k, g) != DT_OK) st = DT_ERR;
  return st;
}

int dt_bucket_wait_all(dt_graph *g) {
  int st = DT_OK;
  for (int b = 0; b < g->nbuckets; b++)
    if (dt_bucket_wait(g, b) != DT_OK && st == DT_OK) st = DT_ERR;
  return st;
}

void dt_buckets_free(dt_graph *g) {
  dt_bucket_wait_all(g);
  for (int b = 0; b < g->nbuckets; b++) {
    gbucket *o = &g->buckets[b];
    if (o->send) dt_tensor_release(o->send);
    if (o->recv) dt_tensor_release(o->recv);
    for (int i = 0; o->outs && i < o->nmembers; i++)
      if (o->outs[i]) dt_tensor_release(o->outs[i]);
    free(o->counts), free(o->members), free(o->outs);
  }
  for (int k = 0; k < g->nnodes; k++) free(g->nodes[k].coll_off), g->nodes[k].coll_off = NULL;
  free(g->buckets);
  g->buckets = NULL, g->nbuckets = 0;
}
