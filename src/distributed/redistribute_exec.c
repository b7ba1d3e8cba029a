/* The redistribute executor: one plan step at a time on the local shard.  Collectives move
 * contiguous buffers; blocks are placed along the tensor dim with strided copies, so any
 * tensor dim can be gathered or exchanged without a transpose.  Uneven shards use the _v
 * collectives (all_gather_v, all_to_all_v); reduce_scatter pads every chunk to ceil(L/n). */
#include "distributed/redistribute.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* A view of t narrowed to [start, start + len) along d. */
static dt_tensor *narrow(const dt_tensor *t, int d, int64_t start, int64_t len) {
  int64_t shape[DT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[d] = len;
  return dt_tensor_view_of(t, t->ndim, shape, t->stride, t->offset + start * t->stride[d]);
}

/* A contiguous view of `flat` (a 1-d buffer) at element pos with t's shape but size len along d. */
static dt_tensor *block_view(const dt_tensor *flat, const dt_tensor *t, int d, int64_t len, int64_t pos) {
  int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[d] = len;
  dt_contiguous_strides(t->ndim, shape, stride);
  return dt_tensor_view_of(flat, t->ndim, shape, stride, flat->offset + pos);
}

/* dst.narrow(d, start, len) = src; releases nothing. */
static int copy_into(dt_tensor *dst, int d, int64_t start, int64_t len, const dt_tensor *src) {
  dt_tensor *v = narrow(dst, d, start, len);
  int st = v ? dt_tensor_copy_(v, src, "redistribute") : DT_ERR;
  dt_tensor_release(v);
  return st;
}

/* A 1-d buffer like x (its dtype, on its device) every element of which the caller writes. */
static dt_tensor *new_flat(const dt_tensor *x, int64_t n) { return dt_tensor_empty(x->dtype, 1, &n, dt_tensor_device(x)); }

static int64_t inner_of(const dt_tensor *t, int d) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    if (i != d) n *= t->shape[i];
  return n;
}

/* Where the slab [start, start + len) along d of a contiguous tensor of this shape lies: rows
 * over the dims before d, each len * (the dims after d) elements long. */
static dt_comm_block slab(int ndim, const int64_t *shape, int d, int64_t start, int64_t len) {
  int64_t rows = 1, inner = 1;
  for (int i = 0; i < d; i++) rows *= shape[i];
  for (int i = d + 1; i < ndim; i++) inner *= shape[i];
  return (dt_comm_block){(size_t)(start * inner), (size_t)rows, (size_t)(len * inner), (size_t)(shape[d] * inner)};
}

/* The block of the sub-box sh at off inside a contiguous tensor of shape os, when its
 * elements are evenly spaced rows (returns 1); 0 when the sub-box does not collapse to 2-d. */
static int sub_box(int ndim, const int64_t *os, const int64_t *sh, const int64_t *off, dt_comm_block *b) {
  int64_t stride[DT_MAX_DIMS], o = 0, rows = 1;
  if (dt_shape_numel(ndim, sh) == 0) return *b = (dt_comm_block){0, 0, 0, 0}, 1; /* (strides skip size-0 dims) */
  dt_contiguous_strides(ndim, os, stride);
  for (int k = 0; k < ndim; k++) o += off[k] * stride[k];
  int cut = ndim - 1; /* the last dim the box cuts: the rows run along it and the dims after */
  while (cut > 0 && sh[cut] == os[cut]) cut--;
  int first = 0;      /* the dims before cut repeat the rows: evenly only if full after the first > 1 */
  while (first < cut && sh[first] == 1) first++;
  for (int k = first + 1; k < cut; k++)
    if (sh[k] != os[k]) return 0;
  for (int k = 0; k < cut; k++) rows *= sh[k];
  int64_t cols = ndim ? sh[cut] * stride[cut] : 1;
  *b = (dt_comm_block){(size_t)o, (size_t)rows, (size_t)cols, (size_t)(cut > 0 ? stride[cut - 1] : cols)};
  return 1;
}

typedef struct step_ctx {
  dt_context *ctx;
  const dt_dspec *s;
  const dt_placement *p; /* the state before the step */
  int m, n, me;          /* mesh dim, its size, this rank's coordinate on it */
  dt_comm *comm;
} step_ctx;

static int group_rank(const step_ctx *c, int coord) { return dt_mesh_group_rank_of(c->s->mesh, c->m, coord); }

/* The blocks can land straight in out (no copy): the dims before d have size 1, so the
 * chunks along d are consecutive memory, and group ranks are in coordinate order. */
static int direct(const step_ctx *c, const dt_tensor *out, int d) {
  for (int i = 0; i < d; i++)
    if (out->shape[i] != 1) return 0;
  for (int cc = 0; cc < c->n; cc++)
    if (group_rank(c, cc) != cc) return 0;
  return 1;
}

/* The communicator that moves x: the group's host one, or its NCCL twin for x on "cuda". */
static dt_comm *comm_for(dt_comm *c, const dt_tensor *x) {
  return dt_comm_for_device(c, dt_tensor_device(x), "redistribute");
}

/* Shard(d) -> Replicate: every chunk lands straight in its slab of out (the threads backend
 * copies once from each peer; others gather into a buffer and place it). */
static dt_tensor *all_gather(const step_ctx *c, dt_tensor *x, int d) {
  int64_t L = dt_dspec_logical_size(c->s, c->p, c->s->mesh->coord, d, c->m), st, len;
  int64_t shape[DT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[d] = L;
  dt_comm_block *rb = calloc((size_t)c->n, sizeof *rb);
  dt_tensor *out = rb ? dt_tensor_empty(x->dtype, x->ndim, shape, dt_tensor_device(x)) : NULL;
  int ok = out != NULL;
  for (int cc = 0; ok && cc < c->n; cc++) {
    dt_chunk(L, c->n, cc, &st, &len);
    rb[group_rank(c, cc)] = slab(x->ndim, shape, d, st, len);
  }
  dt_comm *cm = ok ? comm_for(c->comm, x) : NULL;
  if (ok) ok = cm && dt_comm_all_gather_blocks(cm, dt_tensor_data(x), dt_tensor_data(out), rb, x->dtype) == DT_OK;
  free(rb);
  if (!ok) return dt_tensor_release(out), NULL;
  return out;
}

/* Shard(d) -> Shard(e): all_to_all without packing; the e-slab of each coordinate goes to
 * it, and the d-slab of out for each coordinate comes back from it. */
static dt_tensor *all_to_all(const step_ctx *c, dt_tensor *x, int d, int e) {
  int64_t Ld = dt_dspec_logical_size(c->s, c->p, c->s->mesh->coord, d, c->m), Le = x->shape[e];
  int64_t est, elen, st, len;
  dt_chunk(Le, c->n, c->me, &est, &elen);
  int64_t shape[DT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[d] = Ld, shape[e] = elen;
  dt_comm_block *b = calloc(2 * (size_t)c->n, sizeof *b); /* send blocks, then recv blocks, by group rank */
  dt_tensor *out = b ? dt_tensor_empty(x->dtype, x->ndim, shape, dt_tensor_device(x)) : NULL;
  int ok = out != NULL;
  for (int cc = 0; ok && cc < c->n; cc++) {
    int r = group_rank(c, cc);
    dt_chunk(Le, c->n, cc, &st, &len);
    b[r] = slab(x->ndim, x->shape, e, st, len);
    dt_chunk(Ld, c->n, cc, &st, &len);
    b[c->n + r] = slab(x->ndim, shape, d, st, len);
  }
  dt_comm *cm = ok ? comm_for(c->comm, x) : NULL;
  if (ok) ok = cm && dt_comm_all_to_all_blocks(cm, dt_tensor_data(x), b, dt_tensor_data(out), b + c->n, x->dtype) == DT_OK;
  free(b);
  if (!ok) return dt_tensor_release(out), NULL;
  return out;
}

/* Partial(op) -> Shard(d) of host memory: one reduce_scatter of x's slabs along d (any sizes)
 * straight into the output: no packed copy of x. */
static dt_tensor *reduce_scatter_slabs(const step_ctx *c, dt_tensor *x, int d, dt_reduce_op op, dt_comm *cm) {
  int64_t L = x->shape[d], st, len, shape[DT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  dt_chunk(L, c->n, c->me, &st, &shape[d]);
  dt_comm_block *b = calloc((size_t)c->n, sizeof *b);
  dt_tensor *out = b ? dt_tensor_empty(x->dtype, x->ndim, shape, dt_tensor_device(x)) : NULL;
  int ok = out != NULL;
  for (int cc = 0; ok && cc < c->n; cc++) {
    dt_chunk(L, c->n, cc, &st, &len);
    b[group_rank(c, cc)] = slab(x->ndim, x->shape, d, st, len);
  }
  ok = ok && dt_comm_reduce_scatter_blocks(cm, dt_tensor_data(x), b, dt_tensor_data(out), x->dtype, op) == DT_OK;
  free(b);
  if (!ok) return dt_tensor_release(out), NULL;
  return out;
}

/* Partial(op) -> Shard(d): host memory by slabs (above); device memory through reduce_scatter
 * over chunks padded to ceil(L/n). */
static dt_tensor *reduce_scatter(const step_ctx *c, dt_tensor *x, int d, dt_reduce_op op) {
  dt_comm *cm = comm_for(c->comm, x); /* the group's host communicator, or its device twin */
  if (!cm) return NULL;
  if (cm == c->comm) return reduce_scatter_slabs(c, x, d, op, cm);
  int64_t L = x->shape[d], chunk = (L + c->n - 1) / c->n, inner = inner_of(x, d), st, len;
  int64_t total = c->n * chunk * inner; /* zeros: the padding of short chunks is reduced too */
  int as_is = chunk * c->n == L && direct(c, x, d); /* x already holds the blocks in order */
  dt_tensor *send = as_is ? (dt_tensor_retain(x), x)
                  : chunk * c->n == L ? new_flat(x, total) : dt_tensor_zeros(x->dtype, 1, &total, dt_tensor_device(x));
  dt_tensor *recv = new_flat(x, chunk * inner);
  int ok = send && recv;
  for (int cc = 0; ok && !as_is && cc < c->n; cc++) {
    dt_chunk(L, c->n, cc, &st, &len);
    dt_tensor *src = narrow(x, d, st, len), *b = src ? block_view(send, src, d, len, group_rank(c, cc) * chunk * inner) : NULL;
    ok = b && dt_tensor_copy_(b, src, "redistribute") == DT_OK;
    dt_tensor_release(src), dt_tensor_release(b);
  }
  if (ok) ok = dt_comm_reduce_scatter(cm, dt_tensor_data(send), dt_tensor_data(recv), (size_t)(chunk * inner), x->dtype, op) == DT_OK;
  dt_tensor *out = NULL;
  if (ok) {
    dt_chunk(L, c->n, c->me, &st, &len);
    out = block_view(recv, x, d, len, 0); /* a contiguous view of the fresh buffer */
  }
  dt_tensor_release(send), dt_tensor_release(recv);
  return out;
}

/* Shard -> Replicate on every mesh dim of mask at once: one all_gather_v over the group of
 * those dims; each member's block (its shard under the placements before) lands at its
 * offset inside this rank's block under the placements after. */
static dt_tensor *all_gather_multi(const step_ctx *c, int mask, dt_tensor *x) {
  const dt_mesh *m = c->s->mesh;
  const dt_group_entry *g = m->groups[mask];
  dt_placement after[DT_MESH_MAX_DIMS];
  memcpy(after, c->p, sizeof after);
  for (int i = 0; i < m->ndim; i++)
    if ((mask >> i) & 1) after[i] = (dt_placement){DT_REPLICATE, 0, DT_REDUCE_SUM, 0};
  int64_t oshape[DT_MAX_DIMS], ooff[DT_MAX_DIMS];
  dt_dspec_local(c->s, after, m->coord, oshape, ooff);
  size_t *counts = calloc((size_t)g->n, sizeof *counts);
  int64_t *geo = calloc((size_t)g->n * 2 * DT_MAX_DIMS, sizeof *geo); /* shape, offset per member */
  dt_tensor *out = dt_tensor_empty(x->dtype, x->ndim, oshape, dt_tensor_device(x)), *recv = NULL;
  int ok = counts && geo && out;
  int64_t total = 0;
  for (int r = 0; ok && r < g->n; r++) {
    int coord[DT_MESH_MAX_DIMS];
    dt_mesh_coord_of_rank(m, g->ranks[r], coord);
    int64_t *sh = geo + r * 2 * DT_MAX_DIMS;
    dt_dspec_local(c->s, c->p, coord, sh, sh + DT_MAX_DIMS);
    counts[r] = (size_t)dt_shape_numel(x->ndim, sh);
    total += (int64_t)counts[r];
  }
  /* each member's block straight into its place in out, when every one is a 2-d block */
  dt_comm_block *rb = ok ? calloc((size_t)g->n, sizeof *rb) : NULL;
  int direct_ok = rb != NULL;
  for (int r = 0; direct_ok && r < g->n; r++) {
    int64_t *sh = geo + r * 2 * DT_MAX_DIMS, *off = sh + DT_MAX_DIMS, rel[DT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) rel[i] = off[i] - ooff[i];
    direct_ok = sub_box(x->ndim, oshape, sh, rel, &rb[r]);
  }
  if (ok && direct_ok) {
    dt_comm *cm = comm_for(g->comm, x);
    ok = cm && dt_comm_all_gather_blocks(cm, dt_tensor_data(x), dt_tensor_data(out), rb, x->dtype) == DT_OK;
    free(rb), free(counts), free(geo);
    if (!ok) return dt_tensor_release(out), NULL;
    return out;
  }
  free(rb);
  ok = ok && (recv = new_flat(x, total));
  dt_comm *cm = ok ? comm_for(g->comm, x) : NULL;
  if (ok) ok = cm && dt_comm_all_gather_v(cm, dt_tensor_data(x), dt_tensor_data(recv), counts, x->dtype) == DT_OK;
  for (int r = 0, pos = 0; ok && r < g->n; pos += (int)counts[r], r++) {
    int64_t *sh = geo + r * 2 * DT_MAX_DIMS, *off = sh + DT_MAX_DIMS, stride[DT_MAX_DIMS];
    dt_contiguous_strides(x->ndim, sh, stride);
    int64_t o = out->offset;
    for (int i = 0; i < x->ndim; i++) o += (off[i] - ooff[i]) * out->stride[i];
    dt_tensor *src = dt_tensor_view_of(recv, x->ndim, sh, stride, recv->offset + pos);
    dt_tensor *dst = src ? dt_tensor_view_of(out, x->ndim, sh, out->stride, o) : NULL;
    ok = dst && dt_tensor_copy_(dst, src, "redistribute") == DT_OK;
    dt_tensor_release(src), dt_tensor_release(dst);
  }
  free(counts), free(geo);
  dt_tensor_release(recv);
  if (!ok) return dt_tensor_release(out), NULL;
  return out;
}

/* Partial -> Replicate: x (contiguous) is reduced straight into a fresh buffer: no clone first. */
static dt_tensor *all_reduce(const step_ctx *c, dt_tensor *x, dt_reduce_op op) {
  dt_tensor *out = dt_tensor_empty(x->dtype, x->ndim, x->shape, dt_tensor_device(x));
  if (!out) return NULL;
  dt_comm *cm = comm_for(c->comm, x);
  if (!cm || dt_comm_all_reduce(cm, dt_tensor_data(x), dt_tensor_data(out), (size_t)dt_tensor_numel(out), out->dtype,
                                op) != DT_OK)
    return dt_tensor_release(out), NULL;
  return out;
}

static dt_tensor *chunk_local(const step_ctx *c, dt_tensor *x, int d) {
  int64_t st, len;
  dt_chunk(x->shape[d], c->n, c->me, &st, &len);
  dt_tensor *v = narrow(x, d, st, len), *out = v ? dt_tensor_clone(v) : NULL;
  dt_tensor_release(v);
  return out;
}

/* Ones of x's dtype and shape (the identity of a product). */
static dt_tensor *ones_like(const dt_tensor *x) {
  dt_tensor *t = dt_tensor_empty(x->dtype, x->ndim, x->shape, dt_tensor_device(x));
  if (!t) return NULL;
  char *p = dt_tensor_data(t);
  size_t es = dt_dtype_size(x->dtype);
  for (int64_t i = 0; i < dt_tensor_numel(t); i++) dt_store_f64(p + (size_t)i * es, x->dtype, 1.0);
  return t;
}

/* Replicate -> Partial: sum (product) keeps the value on coordinate 0 and zeros (ones)
 * elsewhere, so the sum (product) over the dim is the value; avg, max and min keep it
 * everywhere. */
static dt_tensor *partition(const step_ctx *c, dt_tensor *x, dt_reduce_op op) {
  if (op == DT_REDUCE_SUM && c->me != 0) return dt_tensor_zeros(x->dtype, x->ndim, x->shape, dt_tensor_device(x));
  if (op == DT_REDUCE_PRODUCT && c->me != 0) return ones_like(x);
  return dt_tensor_clone(x);
}

/* Fills t (contiguous, fresh) with the identity of op: 0 for sum, 1 for product, the lowest
 * value for max and the highest for min (infinities for floats), so that reducing it with
 * any value gives that value exactly. */
static void fill_identity(dt_tensor *t, dt_reduce_op op) {
  char *p = dt_tensor_data(t);
  int64_t n = dt_tensor_numel(t);
  size_t es = dt_dtype_size(t->dtype);
  int hi = op == DT_REDUCE_MIN;
  if (op == DT_REDUCE_SUM || op == DT_REDUCE_PRODUCT || dt_dtype_is_float(t->dtype)) {
    double v = op == DT_REDUCE_SUM ? 0 : op == DT_REDUCE_PRODUCT ? 1 : hi ? INFINITY : -INFINITY;
    for (int64_t i = 0; i < n; i++) dt_store_f64(p + (size_t)i * es, t->dtype, v);
    return;
  }
  int64_t i64 = hi ? INT64_MAX : INT64_MIN;
  int32_t i32 = hi ? INT32_MAX : INT32_MIN;
  uint8_t u8 = hi ? (t->dtype == DT_BOOL ? 1 : UINT8_MAX) : 0;
  const void *v = t->dtype == DT_INT64 ? (const void *)&i64 : t->dtype == DT_INT32 ? (const void *)&i32 : (const void *)&u8;
  for (int64_t i = 0; i < n; i++) memcpy(p + (size_t)i * es, v, es);
}

/* Shard(d) -> Partial(op): this rank's shard at its place in a block of the whole dim filled
 * with op's identity; reducing the blocks over the mesh dim gives the tensor. */
static dt_tensor *pad(const step_ctx *c, dt_tensor *x, int d, dt_reduce_op op) {
  int64_t L = dt_dspec_logical_size(c->s, c->p, c->s->mesh->coord, d, c->m), st, len;
  int64_t shape[DT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[d] = L;
  dt_tensor *out = dt_tensor_empty(x->dtype, x->ndim, shape, dt_tensor_device(x));
  if (!out) return NULL;
  fill_identity(out, op);
  dt_chunk(L, c->n, c->me, &st, &len);
  if (copy_into(out, d, st, len, x) != DT_OK) return dt_tensor_release(out), NULL;
  return out;
}

static dt_tensor *run_step(const step_ctx *c, const dt_redist_step *st, dt_tensor *x) {
  switch (st->kind) {
  case DT_STEP_ALL_GATHER: return all_gather(c, x, st->from.dim);
  case DT_STEP_ALL_TO_ALL: return all_to_all(c, x, st->from.dim, st->to.dim);
  case DT_STEP_REDUCE_SCATTER: return reduce_scatter(c, x, st->to.dim, st->from.op);
  case DT_STEP_ALL_REDUCE: return all_reduce(c, x, st->from.op);
  case DT_STEP_CHUNK: return chunk_local(c, x, st->to.dim);
  case DT_STEP_PARTITION: return partition(c, x, st->to.op);
  case DT_STEP_PAD: return pad(c, x, st->from.dim, st->to.op);
  }
  return NULL;
}

dt_tensor *dt_redistribute_run_steps(dt_context *ctx, const dt_dspec *s, const dt_redist_step *steps, int n,
                                     dt_tensor *x) {
  dt_placement p[DT_MESH_MAX_DIMS];
  memcpy(p, s->p, sizeof p);
  for (int i = 0; x && i < n; i++) {
    const dt_redist_step *st = &steps[i];
    step_ctx c = {ctx, s, p, st->mesh_dim, s->mesh->shape[st->mesh_dim], s->mesh->coord[st->mesh_dim],
                  dt_mesh_comm(s->mesh, st->mesh_dim)};
    dt_tensor *y = st->mask != 1 << st->mesh_dim ? all_gather_multi(&c, st->mask, x) : run_step(&c, st, x);
    dt_tensor_release(x);
    x = y;
    for (int d = 0; d < s->mesh->ndim; d++)
      if ((st->mask >> d) & 1) p[d] = st->to;
  }
  return x;
}

/* One phase of a strided plan: the local shard seen in the phase's split view, its steps,
 * then the result seen in the tensor's own dims again (contiguous buffers: views only). */
static dt_tensor *run_phase(dt_context *ctx, const dt_dspec *s, const dt_redist_plan *plan, const dt_redist_phase *ph,
                            dt_tensor *x) {
  dt_dspec u;
  dt_placement uto[DT_MESH_MAX_DIMS];
  if (!dt_strided_view(s, ph->from, ph->to, &u, u.p, uto)) {
    dt_tensor_release(x);
    return dt_error("redistribute: a strided plan's phase is not expressible (a planner bug)"), NULL;
  }
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS], stride[DT_MAX_DIMS];
  dt_dspec_local(&u, u.p, s->mesh->coord, shape, off);
  dt_contiguous_strides(u.ndim, shape, stride);
  dt_tensor *v = dt_tensor_view_of(x, u.ndim, shape, stride, x->offset);
  dt_tensor_release(x);
  dt_tensor *y = v ? dt_redistribute_run_steps(ctx, &u, plan->steps + ph->first, ph->count, v) : NULL;
  dt_tensor *z = y ? dt_tensor_contiguous(y) : NULL;
  dt_tensor_release(y);
  if (!z) return NULL;
  dt_dspec_local(s, ph->to, s->mesh->coord, shape, off);
  dt_contiguous_strides(s->ndim, shape, stride);
  dt_tensor *w = dt_tensor_view_of(z, s->ndim, shape, stride, z->offset);
  dt_tensor_release(z);
  return w;
}

int dt_redistribute_exec(dt_context *ctx, const dt_dspec *s, const dt_redist_plan *plan, dt_tensor *local,
                         dt_tensor **out) {
  dt_tensor_retain(local);
  if (s->mesh->me < 0) return *out = local, DT_OK;
  dt_tensor *x = dt_tensor_contiguous(local);
  dt_tensor_release(local);
  if (!plan->nphase) x = x ? dt_redistribute_run_steps(ctx, s, plan->steps, plan->n, x) : NULL;
  for (int i = 0; x && i < plan->nphase; i++) x = run_phase(ctx, s, plan, &plan->phase[i], x);
  if (!x) return dt_error_prefix("redistribute"), DT_ERR;
  *out = x;
  return DT_OK;
}
