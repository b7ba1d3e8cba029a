/* dst[key] = src on a DTensor (doc/dispatch.md "Indexing"): written in place into the local
 * shards, the placements kept.  The key is resolved against the global shape; every rank
 * writes the part of the selected region that lies in its own block (steps and uneven shards
 * included).  A DTensor src is brought to placements whose local blocks cover what this rank
 * writes (kept sharded where its shards line up with the target's, replicated otherwise).
 * Every check reads global metadata, so all ranks fail alike before any collective. */
#include "distributed/dtensor_api.h"

#include <string.h>

#include "base/error.h"
#include "distributed/redistribute.h"
#include "kernels/local_op.h"

#define OP "indexing assignment"

/* The region dst[key] as a tensor shape: the kept dims of dst with their counts; tdim[r] is
 * the dim of dst behind region dim r. */
typedef struct region {
  int nd;
  int64_t shape[DT_MAX_DIMS];
  int tdim[DT_MAX_DIMS];
} region;

/* The value as a local tensor t whose block starts at global offset off (in the value's
 * dims); shape: the value's global sizes (which dims broadcast). */
typedef struct value_part {
  dt_tensor *t; /* owned */
  int nd;
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
} value_part;

static void region_of(const dt_index_key *ix, region *r) {
  r->nd = 0;
  for (int d = 0; d < ix->ndim; d++)
    if (ix->kind[d] != DT_INDEX_SELECT) r->tdim[r->nd] = d, r->shape[r->nd++] = dt_index_key_count(ix, d);
}

/* Does the key take the whole of dim d (start 0, step 1, every element)? */
static int whole(const dt_index_key *ix, const int64_t *shape, int d) {
  return ix->kind[d] != DT_INDEX_SELECT && ix->start[d] == 0 && ix->step[d] == 1 && ix->stop[d] == shape[d];
}

/* Placements of the DTensor value vs that let each rank find what it writes in its own block:
 * v's dim e keeps its sharding where it lines up with a whole dim d of t sharded over exactly
 * the same mesh dims (then both are chunked alike); anything else is replicated. */
static void value_target(const dt_dspec *ts, const dt_index_key *ix, const dt_dspec *vs, const region *r,
                         dt_placement *to) {
  int nm = ts->mesh->ndim;
  for (int m = 0; m < nm; m++) {
    dt_placement p = vs->p[m];
    to[m] = (dt_placement){DT_REPLICATE, 0, 0, 0};
    if (p.kind != DT_SHARD) continue;
    int e = p.dim + r->nd - vs->ndim, d = r->tdim[e];
    if (vs->shape[p.dim] != r->shape[e] || !whole(ix, ts->shape, d)) continue;
    int same = 1;
    for (int q = 0; q < nm; q++) {
      int t_shards = ts->p[q].kind == DT_SHARD && ts->p[q].dim == d;
      int v_shards = vs->p[q].kind == DT_SHARD && vs->p[q].dim == p.dim;
      same &= t_shards == v_shards;
    }
    if (same) to[m] = p;
  }
}

/* A DTensor value on dst's mesh, redistributed for the write. */
static int value_from_dtensor(dt_context *ctx, const dt_dspec *ts, const dt_index_key *ix, const region *r,
                              const dt_value *v, value_part *out) {
  const dt_dspec *vs = v->spec;
  if (!dt_mesh_equal(vs->mesh, ts->mesh)) {
    char a[512], b[512];
    return dt_error("%s: DTensor operands on different meshes: %s and %s", OP, dt_mesh_format(ts->mesh, a, sizeof a),
                    dt_mesh_format(vs->mesh, b, sizeof b));
  }
  if (dt_index_check_value(OP, vs->ndim, vs->shape, r->nd, r->shape) != DT_OK) return DT_ERR;
  dt_dspec moved = *vs;
  value_target(ts, ix, vs, r, moved.p);
  const dt_redist_plan *plan;
  if (dt_redistribute_plan(ctx, vs, moved.p, 0, &plan) != DT_OK ||
      dt_redistribute_exec(ctx, vs, plan, v->local, &out->t) != DT_OK)
    return DT_ERR;
  int nd;
  int64_t lshape[DT_MAX_DIMS];
  dt_dspec_my_local(&moved, &nd, lshape, out->off);
  out->nd = vs->ndim;
  memcpy(out->shape, vs->shape, sizeof(int64_t) * (size_t)vs->ndim);
  return DT_OK;
}

/* A plain value: one element (the same on every rank), or any inside implicit replication. */
static int value_from_plain(dt_context *ctx, const region *r, const dt_value *v, value_part *out) {
  dt_tensor *t = v->local;
  if (dt_tensor_numel(t) != 1 && !ctx->modes.implicit_replication)
    return dt_error("%s: the value is a plain tensor of %lld elements assigned into a DTensor; convert it with "
                    "dt.from_local or dt.distribute_tensor (or run inside dt.implicit_replication)",
                    OP, (long long)dt_tensor_numel(t));
  if (dt_index_check_value(OP, t->ndim, t->shape, r->nd, r->shape) != DT_OK) return DT_ERR;
  out->nd = t->ndim;
  memcpy(out->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  memset(out->off, 0, sizeof out->off);
  dt_tensor_retain(t);
  out->t = t;
  return DT_OK;
}

/* x := op(x, ints) on plain tensors (x released); NULL + dt_error on error. */
static dt_tensor *view_step(dt_tensor *x, dt_op_id id, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  if (!x) return NULL;
  dt_tensor *in[1] = {x}, *out[1];
  dt_op_args a = {.in = in, .nin = 1, .nints = id == DT_OP_SELECT ? 2 : 4};
  a.ints[0] = i0, a.ints[1] = i1, a.ints[2] = i2, a.ints[3] = i3;
  int st = dt_op_call(id, &a, out);
  dt_tensor_release(x);
  return st == DT_OK ? out[0] : NULL;
}

/* Copies this rank's part of the region from the value into its block of dst. */
static int write_block(const dt_dspec *ts, dt_tensor *local, const dt_index_key *ix, const region *r,
                       const value_part *v) {
  /* per dim of dst, the selected positions j0..j1 that lie in this rank's block */
  int nd;
  int64_t lshape[DT_MAX_DIMS], loff[DT_MAX_DIMS], j0[DT_MAX_DIMS], j1[DT_MAX_DIMS];
  dt_dspec_my_local(ts, &nd, lshape, loff);
  for (int d = 0; d < ts->ndim; d++) {
    int64_t st = ix->start[d], step = ix->step[d], count = dt_index_key_count(ix, d);
    int64_t lo = loff[d] - st, hi = loff[d] + lshape[d] - 1 - st; /* block relative to the start */
    j0[d] = lo <= 0 ? 0 : (lo + step - 1) / step;
    j1[d] = hi < 0 ? -1 : hi / step;
    if (j1[d] > count - 1) j1[d] = count - 1;
    if (j0[d] > j1[d]) return DT_OK; /* the region misses this block */
  }
  dt_tensor *dst = local;
  dt_tensor_retain(dst);
  for (int d = ts->ndim - 1; d >= 0; d--) { /* last dim first: selects do not shift the others */
    int64_t first = ix->start[d] + j0[d] * ix->step[d] - loff[d];
    if (ix->kind[d] == DT_INDEX_SELECT) dst = view_step(dst, DT_OP_SELECT, d, first, 0, 0);
    else dst = view_step(dst, DT_OP_SLICE, d, first, first + (j1[d] - j0[d]) * ix->step[d] + 1, ix->step[d]);
  }
  dt_tensor *src;
  int vnd = v->nd;
  if (!dt_dspec_holds_value(ts)) { /* the pending sum (product) gets the value once, from coordinate 0 */
    const int64_t no_dims[1] = {0};
    src = dt_tensor_full(DT_BOOL, 0, no_dims, dt_dspec_write_identity(ts), DT_HOST);
    vnd = 0;
  } else {
    dt_tensor_retain(v->t);
    src = v->t;
  }
  /* the value's part: along each of its dims that does not broadcast, this rank's positions */
  for (int e = 0; e < vnd; e++) {
    int d = r->tdim[e + r->nd - vnd];
    if (v->shape[e] == 1 && r->shape[e + r->nd - vnd] != 1) continue;
    src = view_step(src, DT_OP_SLICE, e, j0[d] - v->off[e], j1[d] + 1 - v->off[e], 1);
  }
  if (src && dst && src->storage == dst->storage) { /* t[a] = t[b]: the value may overlap what is written */
    dt_tensor *c = dt_tensor_clone(src);
    dt_tensor_release(src);
    src = c;
  }
  int st = src && dst ? dt_tensor_copy_(dst, src, OP) : DT_ERR;
  dt_tensor_release(src), dt_tensor_release(dst);
  return st;
}

int dt_dtensor_write(dt_context *ctx, dt_value *dst, const dt_index_key *key, const dt_value *src) {
  if (!dst->spec)
    return dt_error("%s: the value is a DTensor and the tensor is not; use v:full_tensor() or distribute the tensor", OP);
  const dt_dspec *ts = dst->spec;
  if (dt_dspec_has_strided(ts->p, ts->mesh->ndim)) { /* its blocks are no boxes to write into */
    char p[128];
    return dt_error("%s: writing into a _StridedShard DTensor %s: redistribute it first", OP,
                    dt_placements_format(ts->p, ts->mesh->ndim, p, sizeof p));
  }
  region r;
  region_of(key, &r);
  value_part v = {0};
  int st = src->spec ? value_from_dtensor(ctx, ts, key, &r, src, &v) : value_from_plain(ctx, &r, src, &v);
  if (st != DT_OK) return DT_ERR;
  if (ts->mesh->me >= 0) st = write_block(ts, dst->local, key, &r, &v); /* off the mesh nothing of dst lives here */
  dt_tensor_release(v.t);
  return st;
}
