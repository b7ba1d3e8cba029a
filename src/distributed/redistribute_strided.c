/* Plans from and to _StridedShard placements.  _StridedShard(d, k) of a dim of size L is a
 * plain Shard of the inner dim of the same tensor seen as (..., k, L / k, ...), and a plain
 * Shard of d beside it (FSDP + TP's [_StridedShard(d, k), Shard(d)]) a Shard of the outer dim:
 * the local shard is exactly that view's local shard.  So a plan runs in that split view with
 * the ordinary planner, and the executor only re-views the (contiguous) local buffer before
 * and after.  A plain Shard of d on a side with no _StridedShard of d is a Shard of the outer
 * dim too when its chunks are whole blocks (k divisible by its shard count): then
 * Shard(d) <-> _StridedShard(d, k) is one all_to_all.  Other pairs go in two phases, through
 * Replicate on the mesh dims that shard the strided dims. */
#include "distributed/redistribute.h"

#include <string.h>

#include "base/error.h"

/* The split factor of tensor dim d in from/to (0: not strided), or -1 when it cannot be seen
 * split: two different factors, or a side without a _StridedShard of d whose Shards of d cut
 * the blocks. */
static int split_of(const dt_dspec *s, const dt_placement *from, const dt_placement *to, int d) {
  int nm = s->mesh->ndim, k = 0;
  const dt_placement *lists[2] = {from, to};
  for (int l = 0; l < 2; l++) {
    int kl = dt_dspec_split_of(lists[l], nm, d);
    if (kl && k && kl != k) return -1;
    if (kl) k = kl;
  }
  for (int l = 0; k && l < 2; l++) {
    if (dt_dspec_split_of(lists[l], nm, d)) continue;
    int64_t parts = 1;
    for (int m = 0; m < nm; m++)
      if (lists[l][m].kind == DT_SHARD && lists[l][m].dim == d) parts *= s->mesh->shape[m];
    if (k % parts != 0) return -1;
  }
  return k;
}

/* p in the split view: a _StridedShard shards its dim's inner part, a Shard of a split dim the
 * outer one (map: a dim's inner, or only, dim in the view; split: whether it was split). */
static dt_placement split_placement(dt_placement p, const int *map, const int *split) {
  if (p.kind != DT_SHARD && p.kind != DT_STRIDED_SHARD) return p;
  int d = map[p.dim];
  return (dt_placement){DT_SHARD, p.kind == DT_SHARD && split[p.dim] ? d - 1 : d, 0, 0};
}

int dt_strided_view(const dt_dspec *s, const dt_placement *from, const dt_placement *to, dt_dspec *u,
                    dt_placement *ufrom, dt_placement *uto) {
  int map[DT_MAX_DIMS], split[DT_MAX_DIMS], nd = 0;
  int64_t shape[DT_MAX_DIMS];
  for (int d = 0; d < s->ndim; d++) {
    int k = split_of(s, from, to, d);
    if (k < 0 || nd + (k > 0 ? 2 : 1) > DT_MAX_DIMS) return 0;
    if (k > 0) shape[nd++] = k, shape[nd] = s->shape[d] / k;
    else shape[nd] = s->shape[d];
    split[d] = k > 0;
    map[d] = nd++;
  }
  dt_placement pf[DT_MESH_MAX_DIMS], pt[DT_MESH_MAX_DIMS];
  for (int m = 0; m < s->mesh->ndim; m++)
    pf[m] = split_placement(from[m], map, split), pt[m] = split_placement(to[m], map, split);
  *u = *s; /* the mesh borrowed: u is never freed */
  u->ndim = nd;
  memcpy(u->shape, shape, sizeof(int64_t) * (size_t)nd);
  memcpy(ufrom, pf, sizeof pf);
  memcpy(uto, pt, sizeof pt);
  memcpy(u->p, pf, sizeof pf);
  return 1;
}

/* Appends the phase from -> to (expressible in one split view) to plan. */
static int add_phase(const dt_dspec *s, const dt_placement *from, const dt_placement *to, int allow_partial,
                     dt_redist_plan *plan) {
  dt_dspec u;
  dt_placement uf[DT_MESH_MAX_DIMS], ut[DT_MESH_MAX_DIMS];
  if (!dt_strided_view(s, from, to, &u, uf, ut)) return dt_error("redistribute: no split view (a planner bug)");
  dt_redist_phase *ph = &plan->phase[plan->nphase++];
  ph->first = plan->n;
  memcpy(ph->from, from, sizeof ph->from);
  memcpy(ph->to, to, sizeof ph->to);
  if (dt_redistribute_search(&u, ut, allow_partial, plan) != DT_OK) return DT_ERR;
  ph->count = plan->n - ph->first;
  return DT_OK;
}

int dt_strided_plan(const dt_dspec *s, const dt_placement *to, int allow_partial, dt_redist_plan *plan) {
  dt_dspec u;
  dt_placement uf[DT_MESH_MAX_DIMS], ut[DT_MESH_MAX_DIMS];
  if (dt_strided_view(s, s->p, to, &u, uf, ut)) return add_phase(s, s->p, to, allow_partial, plan);
  /* through mid: the source's strided shards and its shards of the target's strided dims
   * replicated; mid shares a split view with each side */
  int nm = s->mesh->ndim;
  dt_placement mid[DT_MESH_MAX_DIMS];
  for (int m = 0; m < nm; m++) {
    mid[m] = s->p[m];
    int strided = mid[m].kind == DT_SHARD && (dt_dspec_split_of(to, nm, mid[m].dim) || dt_dspec_split_of(s->p, nm, mid[m].dim));
    if (mid[m].kind == DT_STRIDED_SHARD || strided)
      mid[m] = (dt_placement){DT_REPLICATE, 0, 0, 0};
  }
  if (add_phase(s, s->p, mid, allow_partial, plan) != DT_OK) return DT_ERR;
  return add_phase(s, mid, to, allow_partial, plan);
}
