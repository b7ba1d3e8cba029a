/* t[k] = v on a DTensor (doc/dispatch.md "Indexing"): written in place into the local shards,
 * the placements kept.  The key is resolved against the global shape; every rank writes the
 * part of the selected region that lies in its own block (steps and uneven shards included).
 * v: a number, boolean or one-element plain tensor (the same value everywhere); a DTensor,
 * brought to placements whose local blocks cover what this rank writes (kept sharded where
 * its shards line up with the target's, replicated otherwise); a plain tensor of several
 * elements only inside dt.implicit_replication.  Partial(sum) targets: ranks off coordinate 0
 * of a Partial(sum) mesh dim write 0, so the pending sum is v.  Every check reads global
 * metadata, so all ranks raise alike before any collective. */
#include <string.h>

#include "base/error.h"
#include "distributed/redistribute.h"
#include "bindings/l_dist.h"
#include "bindings/l_tensor.h"

#define OP "indexing assignment"

/* The region t[k] as a tensor shape: the kept dims of t with their counts; tdim[r] is the dim
 * of t behind region dim r. */
static int region_shape(const dt_lua_index *ix, int64_t *shape, int *tdim) {
  int n = 0;
  for (int d = 0; d < ix->ndim; d++)
    if (ix->kind[d] != DT_INDEX_SELECT) tdim[n] = d, shape[n++] = dt_lua_index_count(ix, d);
  return n;
}

/* v of this shape must broadcast to the region (the plain copy's rule and words). */
static void check_broadcast(lua_State *L, int vnd, const int64_t *vshape, int rnd, const int64_t *rshape) {
  int ok = vnd <= rnd;
  for (int e = 0; ok && e < vnd; e++) {
    int64_t r = rshape[rnd - vnd + e];
    ok = vshape[e] == r || vshape[e] == 1;
  }
  if (ok) return;
  char a[160], b[160];
  luaL_error(L, "%s: shape %s does not broadcast to %s", OP, dt_format_shape(a, sizeof a, vnd, vshape),
             dt_format_shape(b, sizeof b, rnd, rshape));
}

/* Does the key take the whole of dim d (start 0, step 1, every element)? */
static int whole(const dt_lua_index *ix, const int64_t *shape, int d) {
  return ix->kind[d] != DT_INDEX_SELECT && ix->start[d] == 0 && ix->step[d] == 1 && ix->stop[d] == shape[d];
}

/* Placements of the DTensor value vs that let each rank find what it writes in its own block:
 * v's dim e keeps its sharding where it lines up with a whole dim d of t sharded over exactly
 * the same mesh dims (then both are chunked alike); anything else is replicated. */
static void value_target(const dt_dspec *ts, const dt_lua_index *ix, const dt_dspec *vs, int rnd, const int *tdim,
                         const int64_t *rshape, dt_placement *to) {
  int nm = ts->mesh->ndim;
  for (int m = 0; m < nm; m++) {
    dt_placement p = vs->p[m];
    to[m] = (dt_placement){DT_REPLICATE, 0, 0};
    if (p.kind != DT_SHARD) continue;
    int r = p.dim + rnd - vs->ndim, d = tdim[r];
    if (vs->shape[p.dim] != rshape[r] || !whole(ix, ts->shape, d)) continue;
    int same = 1;
    for (int q = 0; q < nm; q++) {
      int t_shards = ts->p[q].kind == DT_SHARD && ts->p[q].dim == d;
      int v_shards = vs->p[q].kind == DT_SHARD && vs->p[q].dim == p.dim;
      same &= t_shards == v_shards;
    }
    if (same) to[m] = p;
  }
}

/* x := op(x, args) on plain tensors; raises on error. */
static dt_tensor *view_step(lua_State *L, dt_tensor *x, dt_op_id id, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  dt_tensor *in[1] = {x}, *out[1];
  dt_op_args a = {.in = in, .nin = 1, .nints = id == DT_OP_SELECT ? 2 : 4};
  a.ints[0] = i0, a.ints[1] = i1, a.ints[2] = i2, a.ints[3] = i3;
  int st = dt_op_call(id, &a, out);
  dt_tensor_release(x);
  if (st != DT_OK) dt_lua_raise(L);
  return out[0];
}

int dt_lua_dtensor_newindex(lua_State *L) {
  dt_value *u = dt_lua_check_value(L, 1);
  const dt_dspec *ts = u->spec;
  dt_lua_index ix;
  dt_lua_parse_index(L, 2, ts->ndim, ts->shape, &ix);
  int64_t rshape[DT_MAX_DIMS];
  int tdim[DT_MAX_DIMS];
  int rnd = region_shape(&ix, rshape, tdim);

  /* the value, as a local tensor src whose block starts at global offset voff (in v's dims) */
  dt_tensor *src = NULL;
  int vnd = 0;
  int64_t vshape[DT_MAX_DIMS], voff[DT_MAX_DIMS] = {0};
  dt_value *vu = dt_lua_test_value(L, 3);
  dt_context *ctx = dt_lua_context(L);
  if (vu && vu->spec) {
    const dt_dspec *vs = vu->spec;
    if (!dt_mesh_equal(vs->mesh, ts->mesh)) {
      char a[512], b[512];
      return luaL_error(L, "%s: DTensor operands on different meshes: %s and %s", OP,
                        dt_mesh_format(ts->mesh, a, sizeof a), dt_mesh_format(vs->mesh, b, sizeof b));
    }
    check_broadcast(L, vs->ndim, vs->shape, rnd, rshape);
    dt_placement to[DT_MESH_MAX_DIMS];
    value_target(ts, &ix, vs, rnd, tdim, rshape, to);
    const dt_redist_plan *plan;
    if (dt_redistribute_plan(ctx, vs, to, 0, &plan) != DT_OK || dt_redistribute_exec(ctx, vs, plan, vu->local, &src) != DT_OK)
      return dt_lua_raise(L);
    dt_lua_push_tensor(L, src); /* owned by Lua from here */
    dt_dspec moved = *vs;
    memcpy(moved.p, to, sizeof to);
    int nd;
    dt_dspec_my_local(&moved, &nd, vshape, voff);
    vnd = vs->ndim;
    memcpy(vshape, vs->shape, sizeof(int64_t) * (size_t)vnd); /* global sizes: which dims broadcast */
  } else if (vu) {
    if (dt_tensor_numel(vu->local) != 1 && !dt_lua_implicit_replication(L))
      return luaL_error(L, "%s: the value is a plain tensor of %I elements assigned into a DTensor; convert it with "
                           "dt.from_local or dt.distribute_tensor (or run inside dt.implicit_replication)",
                        OP, (lua_Integer)dt_tensor_numel(vu->local));
    src = vu->local;
    vnd = src->ndim;
    memcpy(vshape, src->shape, sizeof(int64_t) * (size_t)vnd);
    check_broadcast(L, vnd, vshape, rnd, rshape);
    dt_tensor_retain(src);
    dt_lua_push_tensor(L, src);
  } else {
    int is_int = lua_isinteger(L, 3);
    src = dt_lua_scalar_tensor(L, 3);
    dt_lua_push_tensor(L, src);
    if (dt_check_value_fits(OP, ts->dtype, is_int, lua_tointeger(L, 3), lua_tonumber(L, 3)) != DT_OK)
      return dt_lua_raise(L);
  }
  if (ts->mesh->me < 0) return 0; /* nothing of t lives here */

  /* this rank's part of the region: per dim of t, the selected positions j0..j1 in its block */
  int nd;
  int64_t lshape[DT_MAX_DIMS], loff[DT_MAX_DIMS], j0[DT_MAX_DIMS], j1[DT_MAX_DIMS];
  dt_dspec_my_local(ts, &nd, lshape, loff);
  for (int d = 0; d < ts->ndim; d++) {
    int64_t st = ix.start[d], step = ix.step[d], count = dt_lua_index_count(&ix, d);
    int64_t lo = loff[d] - st, hi = loff[d] + lshape[d] - 1 - st; /* block relative to the start */
    j0[d] = lo <= 0 ? 0 : (lo + step - 1) / step;
    j1[d] = hi < 0 ? -1 : hi / step;
    if (j1[d] > count - 1) j1[d] = count - 1;
    if (j0[d] > j1[d]) return 0; /* the region misses this block */
  }
  dt_tensor *dst = u->local;
  dt_tensor_retain(dst);
  for (int d = ts->ndim - 1; d >= 0; d--) { /* last dim first: selects do not shift the others */
    int64_t first = ix.start[d] + j0[d] * ix.step[d] - loff[d];
    if (ix.kind[d] == DT_INDEX_SELECT) dst = view_step(L, dst, DT_OP_SELECT, d, first, 0, 0);
    else dst = view_step(L, dst, DT_OP_SLICE, d, first, first + (j1[d] - j0[d]) * ix.step[d] + 1, ix.step[d]);
  }
  dt_lua_push_tensor(L, dst);
  if (!dt_dspec_holds_value(ts)) { /* the pending sum gets v once, from coordinate 0 */
    const int64_t no_dims[1] = {0};
    if (!(src = dt_tensor_full(DT_BOOL, 0, no_dims, 0, DT_HOST))) return dt_lua_raise(L);
    dt_lua_push_tensor(L, src);
    vnd = 0;
  }
  /* the value's part: along each of its dims that does not broadcast, this rank's positions */
  dt_tensor_retain(src);
  for (int e = 0; e < vnd; e++) {
    int d = tdim[e + rnd - vnd];
    if (vshape[e] == 1 && rshape[e + rnd - vnd] != 1) continue;
    src = view_step(L, src, DT_OP_SLICE, e, j0[d] - voff[e], j1[d] + 1 - voff[e], 1);
  }
  dt_lua_push_tensor(L, src);
  if (src->storage == dst->storage) { /* t[a] = t[b]: the value may overlap what is written */
    src = dt_tensor_clone(src);
    dt_lua_push_tensor(L, src);
  }
  if (dt_tensor_copy_(dst, src, OP) != DT_OK) return dt_lua_raise(L);
  return 0;
}
