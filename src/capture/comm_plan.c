/* The collective passes (doc/compile.md, "Passes"): redistributions that are one all_reduce are
 * bucketed -- consecutive ones on one group, reduce op and dtype, none of whose outputs a node
 * between them reads, packed into one buffer up to the bucket cap -- and replayed through
 * the async collectives: the bucket's last member starts one all_reduce, the first node that
 * reads one of its outputs waits for it, so the compute between overlaps the communication.
 * Packing keeps the bits: an all_reduce folds every element alike wherever it lies (threads:
 * rank order), except MPI's float sums over more than two ranks, whose algorithm may depend
 * on the buffer's size: there a bucket holds one all_reduce (still overlapped). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "capture/graph_impl.h"

static int packs_exactly(const gbucket *b) {
  return strcmp(b->comm->backend, "threads") == 0 || b->comm->size <= 2 || b->op == DT_REDUCE_MAX ||
         b->op == DT_REDUCE_MIN || !dt_dtype_is_float(b->dtype);
}

static int64_t member_numel(const gnode *n) { return dt_shape_numel(n->meta[0].ndim, n->meta[0].shape); }

/* n replays as a bucket member: an all_reduce whose autograd is not recorded at replay. */
static int eligible(const dt_graph *g, const gnode *n) {
  return !n->dead && n->kind == NODE_CONV && n->ar_comm && !(n->grad && !g->has_backward);
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

int dt_graph_plan_comm(dt_graph *g) {
  dt_buckets_free(g);
  for (int k = 0; k < g->nnodes; k++) {
    gnode *n = &g->nodes[k];
    free(n->wait);
    n->wait = NULL, n->nwait = 0, n->bucket = -1;
  }
  int cand = 0;
  for (int k = 0; k < g->nnodes; k++) cand += eligible(g, &g->nodes[k]);
  g->stats.async_all_reduces = cand, g->stats.buckets = 0;
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
    if (!o || o->comm != n->ar_comm || o->dtype != n->meta[0].dtype || o->op != n->ar_op || !packs_exactly(o) ||
        (o->count + numel) * esz > g->bucket_cap) {
      open = g->nbuckets++;
      o = &g->buckets[open];
      *o = (gbucket){.comm = n->ar_comm, .dtype = n->meta[0].dtype, .op = n->ar_op, .first = k};
    }
    n->bucket = open, n->bucket_off = o->count;
    o->count += numel, o->last = k, o->nmembers++;
  }
  g->stats.buckets = g->nbuckets;
  free(done);
  return st;
}

/* A view of the packed buffer t at off with n's local output shape (contiguous). */
static dt_tensor *member_view(const dt_tensor *t, const gnode *n) {
  int64_t stride[DT_MAX_DIMS];
  dt_contiguous_strides(n->meta[0].ndim, n->meta[0].shape, stride);
  return dt_tensor_view_of(t, n->meta[0].ndim, n->meta[0].shape, stride, t->offset + n->bucket_off);
}

/* recv for this replay: last replay's when nothing else holds it (its outputs were released) */
static int buffers(gbucket *b) {
  int64_t c = b->count;
  if (b->recv && (atomic_load(&b->recv->refcount) != 1 || atomic_load(&b->recv->storage->refcount) != 1))
    dt_tensor_release(b->recv), b->recv = NULL;
  if (!b->send && !(b->send = dt_tensor_empty(b->dtype, 1, &c, DT_HOST))) return DT_ERR;
  if (!b->recv && !(b->recv = dt_tensor_empty(b->dtype, 1, &c, DT_HOST))) return DT_ERR;
  return DT_OK;
}

int dt_bucket_run_member(dt_graph *g, gnode *n, const dt_value *x, dt_value *out) {
  gbucket *b = &g->buckets[n->bucket];
  const char *name = "redistribute";
  const dt_tensor *t = x->local;
  if (!t || t->dtype != b->dtype || t->ndim != n->meta[0].ndim ||
      memcmp(t->shape, n->meta[0].shape, sizeof(int64_t) * (size_t)t->ndim) != 0)
    return dt_error("compile: at %s the all_reduce's input is not the tensor of the capture", n->where ? n->where : "?");
  if (&g->nodes[b->first] == n && buffers(b) != DT_OK) return dt_error_prefix("%s", name);
  dt_tensor *into = member_view(b->send, n), *res = NULL;
  int st = into ? dt_tensor_copy_(into, t, name) : DT_ERR;
  dt_tensor_release(into);
  dt_dspec *spec = st == DT_OK ? dt_dspec_copy(n->ospec[0]) : NULL;
  if (!spec || !(res = member_view(b->recv, n))) {
    dt_dspec_free(spec);
    return st == DT_OK ? dt_error("%s: out of memory", name) : DT_ERR;
  }
  dt_value_init(out, res, spec);
  if (&g->nodes[b->last] != n) return DT_OK;
  void *send = dt_tensor_data(b->send), *recv = dt_tensor_data(b->recv);
  if (!g->overlap) return dt_comm_all_reduce(b->comm, send, recv, (size_t)b->count, b->dtype, b->op); /* blocking */
  return dt_comm_iall_reduce(b->comm, send, recv, (size_t)b->count, b->dtype, b->op, &b->work);
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
    if (g->buckets[b].send) dt_tensor_release(g->buckets[b].send);
    if (g->buckets[b].recv) dt_tensor_release(g->buckets[b].recv);
  }
  free(g->buckets);
  g->buckets = NULL, g->nbuckets = 0;
}
