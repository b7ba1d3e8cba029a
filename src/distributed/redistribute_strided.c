/* Plans from and to _StridedShard placements.  _StridedShard(d, k) of a dim of size L is a
 * plain Shard of the inner dim of the same tensor seen as (..., k, L / k, ...), and a plain
 * Shard of d beside it (FSDP + TP's [_StridedShard(d, k), Shard(d)]) a Shard of the outer dim;
 * with two factors k1 | k2 the dim is seen as (k1, k2 / k1, L / k2), each placement a Shard of
 * its level's part: the local shard is exactly that view's local shard.  So a plan runs in that split view with
 * the ordinary planner, and the executor only re-views the (contiguous) local buffer before
 * and after.  A plain Shard of d on a side with no _StridedShard of d is a Shard of the outer
 * dim too when its chunks are whole blocks (k divisible by its shard count): then
 * Shard(d) <-> _StridedShard(d, k) is one all_to_all.  Other pairs go in two phases, through
 * Replicate on the mesh dims that shard the strided dims. */
#include "distributed/redistribute.h"

#include <string.h>

#include "base/error.h"

/* The levels of tensor dim d over from and to (lv, returns their count, 1: not strided), or -1
 * when it cannot be seen split in them: factors that do not divide one another, or a side
 * whose placements of a part of its own would cut the finer parts of the joint levels
 * unevenly (a Shard beside no _StridedShard chunks whole blocks only when k is a multiple of
 * its shard count). */
static int levels_of(const dt_dspec *s, const dt_placement *from, const dt_placement *to, int d, int64_t *lv) {
  int nm = s->mesh->ndim, n = 1;
  const dt_placement *lists[2] = {from, to};
  lv[0] = 1;
  for (int l = 0; l < 2; l++) n = dt_dspec_levels(lists[l], nm, d, lv, n);
  for (int i = 1; i < n; i++)
    if (lv[i] % lv[i - 1] != 0) return -1;
  for (int l = 0; n > 1 && l < 2; l++) {
    int64_t own[DT_STRIDED_MAX_LEVELS] = {1};
    int no = dt_dspec_levels(lists[l], nm, d, own, 1);
    for (int i = 0; i < no; i++) {
      int j = dt_dspec_level_of(lv, n, (dt_placement){DT_STRIDED_SHARD, d, 0, (int)own[i]});
      if (j + 1 == n || (i + 1 < no && lv[j + 1] == own[i + 1])) continue; /* the same part in both */
      int64_t parts = 1;
      for (int m = 0; m < nm; m++)
        if ((lists[l][m].kind == DT_SHARD || lists[l][m].kind == DT_STRIDED_SHARD) && lists[l][m].dim == d &&
            dt_dspec_level_of(own, no, lists[l][m]) == i)
          parts *= s->mesh->shape[m];
      if ((lv[j + 1] / lv[j]) % parts != 0) return -1;
    }
  }
  return n;
}

/* p in the split view: a Shard or _StridedShard shards its level's part of its dim (first: a
 * dim's first part in the view; lv, nl: its levels). */
static dt_placement split_placement(dt_placement p, const int *first, int64_t (*lv)[DT_STRIDED_MAX_LEVELS],
                                    const int *nl) {
  if (p.kind != DT_SHARD && p.kind != DT_STRIDED_SHARD) return p;
  return (dt_placement){DT_SHARD, first[p.dim] + dt_dspec_level_of(lv[p.dim], nl[p.dim], p), 0, 0};
}

int dt_strided_view(const dt_dspec *s, const dt_placement *from, const dt_placement *to, dt_dspec *u,
                    dt_placement *ufrom, dt_placement *uto) {
  int first[DT_MAX_DIMS], nl[DT_MAX_DIMS], nd = 0;
  int64_t shape[DT_MAX_DIMS], lv[DT_MAX_DIMS][DT_STRIDED_MAX_LEVELS];
  for (int d = 0; d < s->ndim; d++) {
    nl[d] = levels_of(s, from, to, d, lv[d]);
    if (nl[d] < 0 || nd + nl[d] > DT_MAX_DIMS) return 0;
    first[d] = nd;
    for (int i = 0; i < nl[d]; i++) shape[nd++] = (i + 1 < nl[d] ? lv[d][i + 1] : s->shape[d]) / lv[d][i];
  }
  dt_placement pf[DT_MESH_MAX_DIMS], pt[DT_MESH_MAX_DIMS];
  for (int m = 0; m < s->mesh->ndim; m++)
    pf[m] = split_placement(from[m], first, lv, nl), pt[m] = split_placement(to[m], first, lv, nl);
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
