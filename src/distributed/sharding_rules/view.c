/* View ops: a dim map from input dims to output dims.  transpose/permute/unsqueeze move
 * shardings with their dims; squeeze and expand replicate a sharded size-1 dim first;
 * view/reshape/flatten group the input dims with the output dims whose sizes multiply alike,
 * and a sharded dim stays sharded when the view keeps it whole (the identity view, or a group
 * of it alone with size-1 dims: uneven shards too, no collective, the local view shares
 * storage), as a _StridedShard when dims before it merge into its output dim, or when it is
 * the group's first (non-1) dim and both it and the group's first output dim divide evenly by
 * its shard count -- then every rank's shard is the same contiguous block before and after.
 * Strided dims are seen split into (blocks, block) on both sides, so that dims sharded on two
 * mesh dims flatten to nested placements (a Shard of the blocks beside a _StridedShard), and
 * dims sharded on different mesh dims to _StridedShards of two factors (three levels).
 * narrow/select replicate the dim they cut (its start/index are global; a whole-dim
 * narrow/slice keeps it).  Otherwise (uneven shards, a dim in the middle of a group) it is
 * replicated first: never a silently wrong view. */
#include "distributed/sharding_rules/sharding_rules.h"

#include <string.h>

#include "base/error.h"

/* Does squeeze drop input dim i (global size 1, and asked for)? */
static int squeezed(const dt_op_args *a, const dt_dspec *x, int i) {
  if (x->shape[i] != 1) return 0;
  if (a->flags & DT_ARG_ALL_DIMS) return 1;
  for (int k = 0; k < a->nints; k++)
    if (a->ints[k] == i) return 1;
  return 0;
}

/* Output dim of input dim d, or -1 when it cannot stay sharded. */
static int map_dim(const dt_rule_args *r, int d) {
  const dt_op_args *a = r->a;
  const dt_dspec *x = r->spec[0];
  const dt_meta *o = &r->out[0];
  switch (r->op) {
  case DT_OP_TRANSPOSE:
    return d == a->ints[0] ? (int)a->ints[1] : d == a->ints[1] ? (int)a->ints[0] : d;
  case DT_OP_PERMUTE:
    for (int i = 0; i < a->nints; i++)
      if (a->ints[i] == d) return i;
    return -1;
  case DT_OP_UNSQUEEZE:
    return d + (d >= a->ints[0]);
  case DT_OP_NARROW: /* the narrowed dim is replicated first, unless nothing is cut */
    return d != a->ints[0] || (a->ints[1] == 0 && a->ints[2] == x->shape[d]) ? d : -1;
  case DT_OP_SLICE:
    return d != a->ints[0] || (a->ints[1] == 0 && a->ints[2] == x->shape[d] && a->ints[3] == 1) ? d : -1;
  case DT_OP_SELECT:
    return d == a->ints[0] ? -1 : d - (d > a->ints[0]);
  case DT_OP_SQUEEZE: {
    if (x->shape[d] == 1) return -1;
    int od = d;
    for (int i = 0; i < d; i++) od -= squeezed(a, x, i);
    return od;
  }
  case DT_OP_EXPAND: {
    int od = d + (o->ndim - x->ndim);
    return x->shape[d] == o->shape[od] ? od : -1;
  }
  default: /* VIEW, RESHAPE, FLATTEN: see reshaped() */
    return -1;
  }
}

/* A shape seen with its strided dims split at their levels (dt_dspec_levels): (k, L / k) for a
 * dim of split factor k, (k1, k2 / k1, L / k2) for one of factors k1 | k2. */
typedef struct dims {
  int ndim;
  int64_t shape[DT_MAX_DIMS * DT_STRIDED_MAX_LEVELS];
  int first[DT_MAX_DIMS], nl[DT_MAX_DIMS]; /* per original dim: its first part's index; its parts */
  int64_t lv[DT_MAX_DIMS][DT_STRIDED_MAX_LEVELS];
} dims;

/* view/reshape/flatten of a dim sharded over n ranks by placement p (a Shard or a
 * _StridedShard): within its group (the input dims and output dims whose sizes multiply
 * alike), the group's index is digits (outer, j, inner) where j runs over the chunked size M
 * (the dim, or a _StridedShard's block) and outer counts everything before it (the dims
 * before it in the group, times the split factor).  An output dim of size K * M * I' that
 * starts K outer steps before j and ends I' inner steps after it holds j whole: the shard
 * becomes a Shard of it (K = 1) or a _StridedShard(K) -- the same local elements in the same
 * order, no data moved -- when I' = 1 or M divides evenly (then the chunks of M * I' are
 * those of M times I'); an output dim that holds M's leading part Mh (M split as Mh * rest)
 * likewise when Mh divides evenly (the chunks of M are those of Mh times the rest).
 * Otherwise the dim is replicated first. */
static dt_placement reshaped(const dims *x, const dims *o, dt_placement p, int n) {
  int d = p.dim;
  int i = 0, j = 0;
  while (i < x->ndim && j < o->ndim) {
    int i0 = i, j0 = j;
    int64_t pi = x->shape[i++], po = o->shape[j++];
    while (pi != po) {
      if (pi < po) pi *= x->shape[i++];
      else po *= o->shape[j++];
    }
    if (d < i0 || d >= i) continue;
    int64_t k0 = p.kind == DT_STRIDED_SHARD ? p.split : 1, outer = k0, inner = 1, M = x->shape[d] / k0;
    for (int q = i0; q < d; q++) outer *= x->shape[q];
    for (int q = d + 1; q < i; q++) inner *= x->shape[q];
    int64_t before = 1, after = pi;
    for (int od = j0; od < j; od++) {
      int64_t S = o->shape[od];
      after /= S;
      if (outer % before == 0) {
        int64_t K = outer / before, I = inner % after == 0 ? inner / after : 0;
        if (I && S == K * M * I && (S > 1 || M == 1) && (I == 1 || M % n == 0))
          return K == 1 ? dt_rule_S(od) : (dt_placement){DT_STRIDED_SHARD, od, 0, (int)K};
        /* M split: od holds its leading part Mh (M = Mh * rest), whose even chunks are M's */
        int64_t Mh = S % K == 0 ? S / K : 0;
        if (Mh > 1 && M % Mh == 0 && after == (M / Mh) * inner && Mh % n == 0)
          return K == 1 ? dt_rule_S(od) : (dt_placement){DT_STRIDED_SHARD, od, 0, (int)K};
      }
      before *= S;
    }
    return dt_rule_R();
  }
  return dt_rule_R();
}

/* v: shape with every dim d split at its levels lv[d] (nl[d] of them). */
static void split_dims(int nd, const int64_t *shape, int64_t (*lv)[DT_STRIDED_MAX_LEVELS], const int *nl, dims *v) {
  v->ndim = 0;
  for (int d = 0; d < nd; d++) {
    v->first[d] = v->ndim, v->nl[d] = nl[d];
    memcpy(v->lv[d], lv[d], sizeof v->lv[d]);
    for (int i = 0; i < nl[d]; i++) v->shape[v->ndim++] = (i + 1 < nl[d] ? lv[d][i + 1] : shape[d]) / lv[d][i];
  }
}

/* The part of v that p (of the unsplit shape) shards: its level's (a zero-size dim's one
 * level stands for all its factors). */
static int part_of(const dims *v, dt_placement p) {
  int i = dt_dspec_level_of(v->lv[p.dim], v->nl[p.dim], p);
  return v->first[p.dim] + (i < 0 ? v->nl[p.dim] - 1 : i);
}

/* p of an unsplit shape in its split view v: a Shard of its level's part. */
static dt_placement to_split(const dims *v, dt_placement p) {
  if (p.kind != DT_SHARD && p.kind != DT_STRIDED_SHARD) return p;
  return dt_rule_S(part_of(v, p));
}

/* A Shard q of the split view v back in the unsplit shape (nd dims). */
static dt_placement from_split(const dims *v, int nd, dt_placement q) {
  if (q.kind != DT_SHARD) return q;
  for (int d = 0; d < nd; d++) {
    int i = q.dim - v->first[d];
    if (i < 0 || i >= v->nl[d]) continue;
    return i ? (dt_placement){DT_STRIDED_SHARD, d, 0, (int)v->lv[d][i]} : dt_rule_S(d);
  }
  return dt_rule_R();
}

/* Adds factor k to levels lv (nl of them) when it keeps them dividing one another. */
static void add_level(int64_t *lv, int *nl, int64_t k) {
  for (int i = 0; i < *nl; i++)
    if (lv[i] == k || (lv[i] % k != 0 && k % lv[i] != 0)) return;
  dt_placement p = {DT_STRIDED_SHARD, 0, 0, (int)k};
  *nl = dt_dspec_levels(&p, 1, 0, lv, *nl);
}

/* view/reshape/flatten: every mesh dim's output placement q (Replicate where its input
 * placement cannot stay).  Both shapes are seen split at their strided dims, where every
 * sharding is a plain Shard: the input's as it is, the output's where a first pass found
 * a _StridedShard(K) (so that a Shard of the dims before it, on another mesh dim, becomes
 * a Shard of its K blocks: FSDP + TP's nesting).  One sharded input dim per output dim. */
static void regroup(const dt_rule_args *r, dt_placement *q) {
  const dt_dspec *x = r->spec[0];
  const dt_meta *o = &r->out[0];
  int nm = r->mesh_ndim, xnl[DT_MAX_DIMS], onl[DT_MAX_DIMS];
  int64_t xlv[DT_MAX_DIMS][DT_STRIDED_MAX_LEVELS], olv[DT_MAX_DIMS][DT_STRIDED_MAX_LEVELS];
  for (int m = 0; m < nm; m++) q[m] = x->p[m].kind == DT_PARTIAL ? x->p[m] : dt_rule_R();
  if (x->ndim == o->ndim && memcmp(x->shape, o->shape, sizeof(int64_t) * (size_t)x->ndim) == 0) { /* identity */
    memcpy(q, x->p, sizeof(dt_placement) * (size_t)nm);
    return;
  }
  /* zero-size: every shard is empty whatever the placements, so the dims are grouped as if
   * their zeros were ones, when the two shapes then still hold as many elements */
  int64_t xs[DT_MAX_DIMS], os[DT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) xs[d] = x->shape[d] ? x->shape[d] : 1;
  for (int d = 0; d < o->ndim; d++) os[d] = o->shape[d] ? o->shape[d] : 1;
  if (dt_shape_numel(x->ndim, x->shape) == 0 && dt_shape_numel(x->ndim, xs) != dt_shape_numel(o->ndim, os)) {
    int z = 0; /* else the shards stay on the output's first zero-size dim: empty everywhere */
    while (o->shape[z] != 0) z++;
    for (int m = 0; m < nm; m++)
      if (x->p[m].kind == DT_SHARD || x->p[m].kind == DT_STRIDED_SHARD) q[m] = dt_rule_S(z);
    return;
  }
  for (int d = 0; d < x->ndim; d++) {
    xlv[d][0] = olv[d][0] = 1, onl[d] = 1;
    xnl[d] = dt_dspec_levels(x->p, nm, d, xlv[d], 1);
    if (xnl[d] > 1 && !x->shape[d]) xnl[d] = 2, xlv[d][1] = 1; /* a zero-size strided dim: seen as one block */
  }
  for (int d = x->ndim; d < o->ndim; d++) olv[d][0] = 1, onl[d] = 1;
  dims xv, ov;
  dt_placement xp[DT_MESH_MAX_DIMS], q2[DT_MESH_MAX_DIMS];
  int parts[DT_MAX_DIMS * DT_STRIDED_MAX_LEVELS] = {0};
  split_dims(x->ndim, xs, xlv, xnl, &xv);
  for (int m = 0; m < nm; m++) {
    xp[m] = to_split(&xv, x->p[m]);
    if (xp[m].kind == DT_SHARD) parts[xp[m].dim] = (parts[xp[m].dim] ? parts[xp[m].dim] : 1) * x->mesh->shape[m];
  }
  split_dims(o->ndim, os, olv, onl, &ov);
  for (int m = 0; m < nm; m++) { /* the first pass: where the output is strided, and by what */
    if (xp[m].kind != DT_SHARD) continue;
    dt_placement p1 = reshaped(&xv, &ov, xp[m], parts[xp[m].dim]);
    if (p1.kind == DT_STRIDED_SHARD) add_level(olv[p1.dim], &onl[p1.dim], p1.split);
  }
  split_dims(o->ndim, os, olv, onl, &ov);
  for (int m = 0; m < nm; m++) {
    q2[m] = dt_rule_R();
    if (xp[m].kind != DT_SHARD) continue;
    q2[m] = reshaped(&xv, &ov, xp[m], parts[xp[m].dim]);
    if (q2[m].kind != DT_SHARD) q2[m] = dt_rule_R(); /* strided by a factor the levels lack */
    for (int k = 0; k < m; k++) /* another sharded input dim already there */
      if (q2[k].kind == DT_SHARD && q2[k].dim == q2[m].dim && xp[k].dim != xp[m].dim) q2[m] = dt_rule_R();
  }
  /* an input placement replicated first takes those of the coarser levels of its dim with it
   * (they would chunk a larger part without it) */
  for (int m = 0; m < nm; m++)
    if (xp[m].kind == DT_SHARD && q2[m].kind == DT_REPLICATE)
      for (int k = 0; k < nm; k++)
        if (xp[k].kind == DT_SHARD && x->p[k].dim == x->p[m].dim && xp[k].dim < xp[m].dim) q2[k] = dt_rule_R();
  /* likewise an output part's sharding needs the next level's part sharded (the part would
   * else end at a coarser level): checked from the finest part up */
  for (int od = 0; od < o->ndim; od++)
    for (int i = onl[od] - 1; i >= 0; i--) {
      int e = ov.first[od] + i, next = i + 1 == onl[od];
      for (int k = 0; k < nm; k++) next |= q2[k].kind == DT_SHARD && q2[k].dim == e + 1;
      for (int k = 0; k < nm; k++)
        if (q2[k].kind == DT_SHARD && q2[k].dim == e && !next) q2[k] = dt_rule_R();
    }
  for (int m = 0; m < nm; m++) {
    dt_placement b = from_split(&ov, o->ndim, q2[m]);
    if (b.kind != DT_REPLICATE) q[m] = b;
  }
}

int dt_rule_view(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0];
  dt_strategy st = dt_rule_strategy(r);
  dt_placement q[DT_MESH_MAX_DIMS];
  if (r->op == DT_OP_VIEW || r->op == DT_OP_RESHAPE || r->op == DT_OP_FLATTEN) regroup(r, q);
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement p = x->p[m];
    st.in[0][m] = st.out[0][m] = dt_rule_R();
    if (p.kind == DT_PARTIAL) st.in[0][m] = st.out[0][m] = p; /* views are linear */
    if (p.kind != DT_SHARD && p.kind != DT_STRIDED_SHARD) continue;
    if (r->op != DT_OP_VIEW && r->op != DT_OP_RESHAPE && r->op != DT_OP_FLATTEN) {
      /* the dim moves whole, with its split factor and its other shardings */
      int od = map_dim(r, p.dim);
      q[m] = p, q[m].dim = od;
      if (od < 0 || od >= r->out[0].ndim) q[m] = dt_rule_R();
      /* one sharded input dim per output dim (another one is replicated first) */
      for (int k = 0; k < m; k++)
        if (st.out[0][k].kind != DT_REPLICATE && st.out[0][k].kind != DT_PARTIAL && st.out[0][k].dim == q[m].dim &&
            x->p[k].dim != p.dim)
          q[m] = dt_rule_R();
    }
    if (q[m].kind == DT_REPLICATE) continue;
    st.in[0][m] = p;
    st.out[0][m] = q[m];
  }
  dt_rule_push(s, n, &st);
  for (int m = 0; m < r->mesh_ndim; m++) st.in[0][m] = st.out[0][m] = dt_rule_R();
  return dt_rule_push(s, n, &st);
}

int dt_rule_view_local_args(dt_op_id op, const dt_dspec *const *ins, const dt_strategy *choice,
                            const dt_dspec *const *outs, dt_op_args *la) {
  (void)choice; /* the sizes follow from the output's spec */
  const dt_dspec *in = ins[0], *out = outs[0];
  if (op == DT_OP_VIEW || op == DT_OP_RESHAPE || op == DT_OP_EXPAND) {
    /* sizes: this rank's shard of the output */
    int nd;
    int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
    dt_dspec_my_local(out, &nd, shape, off);
    la->nints = nd;
    for (int i = 0; i < nd; i++) la->ints[i] = shape[i];
  } else if ((op == DT_OP_NARROW || op == DT_OP_SLICE) && out->shape[la->ints[0]] == in->shape[la->ints[0]]) {
    /* a whole-dim cut (the rule may keep the dim sharded): the whole local dim */
    int nd;
    int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
    dt_dspec_my_local(out, &nd, shape, off);
    la->ints[2] = shape[la->ints[0]];
  } else if (op == DT_OP_SQUEEZE) {
    /* the global size-1 dims asked for, not the local ones (a shard may have length 1) */
    dt_op_args g = *la;
    la->flags &= ~DT_ARG_ALL_DIMS;
    la->nints = 0;
    for (int d = 0; d < in->ndim; d++)
      if (squeezed(&g, in, d)) la->ints[la->nints++] = d;
  }
  return DT_OK;
}
