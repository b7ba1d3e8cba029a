/* Plans from and to _StridedShard placements.  _StridedShard(d, k) of a dim of size L is a
 * plain Shard of the inner dim of the same tensor seen as (..., k, L / k, ...): the local
 * shard, k blocks of the rank's chunk, is exactly that view's local shard.  So a plan runs
 * in that split view with the ordinary planner, and the executor only re-views the
 * (contiguous) local buffer before and after.  A plain Shard of a strided dim is not a
 * shard of the split view (its chunks cut across blocks): such a pair goes in two phases,
 * through Replicate on the mesh dims that hold those dims. */
#include "distributed/redistribute.h"

#include <string.h>

#include "base/error.h"

/* The split factor of tensor dim d in from/to (0: not strided), or -1 when it cannot be seen
 * split: two different factors, or a plain Shard of it on either side. */
static int split_of(const dt_dspec *s, const dt_placement *from, const dt_placement *to, int d) {
  int k = 0, plain = 0;
  const dt_placement *lists[2] = {from, to};
  for (int l = 0; l < 2; l++)
    for (int m = 0; m < s->mesh->ndim; m++) {
      dt_placement p = lists[l][m];
      if (p.dim != d) continue;
      if (p.kind == DT_SHARD) plain = 1;
      if (p.kind != DT_STRIDED_SHARD) continue;
      if (k && k != p.split) return -1;
      k = p.split;
    }
  return k && plain ? -1 : k;
}

int dt_strided_view(const dt_dspec *s, const dt_placement *from, const dt_placement *to, dt_dspec *u,
                    dt_placement *ufrom, dt_placement *uto) {
  int map[DT_MAX_DIMS], nd = 0;
  int64_t shape[DT_MAX_DIMS];
  for (int d = 0; d < s->ndim; d++) {
    int k = split_of(s, from, to, d);
    if (k < 0 || nd + (k > 0 ? 2 : 1) > DT_MAX_DIMS) return 0;
    if (k > 0) shape[nd++] = k, shape[nd] = s->shape[d] / k;
    else shape[nd] = s->shape[d];
    map[d] = nd++;
  }
  dt_placement pf[DT_MESH_MAX_DIMS], pt[DT_MESH_MAX_DIMS];
  for (int m = 0; m < s->mesh->ndim; m++) {
    pf[m] = from[m], pt[m] = to[m];
    if (pf[m].kind == DT_SHARD || pf[m].kind == DT_STRIDED_SHARD) pf[m] = (dt_placement){DT_SHARD, map[from[m].dim], 0, 0};
    if (pt[m].kind == DT_SHARD || pt[m].kind == DT_STRIDED_SHARD) pt[m] = (dt_placement){DT_SHARD, map[to[m].dim], 0, 0};
  }
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
    int strided_in_to = 0;
    for (int q = 0; q < nm; q++) strided_in_to |= to[q].kind == DT_STRIDED_SHARD && to[q].dim == s->p[m].dim;
    if (mid[m].kind == DT_STRIDED_SHARD || (mid[m].kind == DT_SHARD && strided_in_to))
      mid[m] = (dt_placement){DT_REPLICATE, 0, 0, 0};
  }
  if (add_phase(s, s->p, mid, allow_partial, plan) != DT_OK) return DT_ERR;
  return add_phase(s, mid, to, allow_partial, plan);
}
