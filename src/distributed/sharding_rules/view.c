/* View ops: a dim map from input dims to output dims.  transpose/permute/unsqueeze move
 * shardings with their dims; squeeze and expand replicate a sharded size-1 dim first;
 * view/reshape/flatten group the input dims with the output dims whose sizes multiply alike,
 * and a sharded dim stays sharded when the view keeps it whole (the identity view, or a group
 * of it alone with size-1 dims: uneven shards too, no collective, the local view shares
 * storage), or when it is the group's first (non-1) dim and both it and the group's first
 * output dim divide evenly by its shard count -- then every rank's shard is the same
 * contiguous block before and after; narrow/select replicate the dim they
 * cut (its start/index are global; a whole-dim narrow/slice keeps it).  Otherwise (uneven shards, a dim in
 * the middle of a group) it is replicated first: never a silently wrong view. */
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

static int parts_of(const dt_dspec *s, int d) {
  int parts = 1;
  for (int m = 0; m < s->mesh->ndim; m++)
    if ((s->p[m].kind == DT_SHARD || s->p[m].kind == DT_STRIDED_SHARD) && s->p[m].dim == d) parts *= s->mesh->shape[m];
  return parts;
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
static dt_placement reshaped(const dt_rule_args *r, dt_placement p, int n) {
  const dt_dspec *x = r->spec[0];
  const dt_meta *o = &r->out[0];
  int d = p.dim;
  if (x->ndim == o->ndim && memcmp(x->shape, o->shape, sizeof(int64_t) * (size_t)x->ndim) == 0) return p; /* identity */
  if (dt_shape_numel(x->ndim, x->shape) == 0) return dt_rule_R();
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

int dt_rule_view(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0];
  dt_strategy st = dt_rule_strategy(r);
  int regroup = r->op == DT_OP_VIEW || r->op == DT_OP_RESHAPE || r->op == DT_OP_FLATTEN;
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement p = x->p[m], q;
    st.in[0][m] = st.out[0][m] = dt_rule_R();
    if (p.kind == DT_PARTIAL) st.in[0][m] = st.out[0][m] = p; /* views are linear */
    if (p.kind != DT_SHARD && p.kind != DT_STRIDED_SHARD) continue;
    if (regroup) {
      q = reshaped(r, p, parts_of(x, p.dim));
    } else { /* the dim moves whole: a _StridedShard keeps its split */
      int od = map_dim(r, p.dim);
      q = p, q.dim = od;
      if (od < 0 || od >= r->out[0].ndim) q = dt_rule_R();
    }
    if (q.kind == DT_REPLICATE) continue;
    /* one sharded input dim per output dim (another one is replicated first), and a
     * _StridedShard's dim sharded by no other mesh dim */
    int clash = 0;
    for (int k = 0; k < r->mesh_ndim; k++) {
      if (k == m || x->p[k].kind == DT_REPLICATE || x->p[k].kind == DT_PARTIAL) continue;
      if (k < m && st.out[0][k].kind != DT_REPLICATE && st.out[0][k].kind != DT_PARTIAL && st.out[0][k].dim == q.dim &&
          x->p[k].dim != p.dim)
        clash = 1;
      if (x->p[k].dim == p.dim && (q.kind == DT_STRIDED_SHARD || (k < m && st.out[0][k].kind == DT_STRIDED_SHARD)))
        clash = 1;
    }
    if (clash) continue;
    st.in[0][m] = p;
    st.out[0][m] = q;
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
