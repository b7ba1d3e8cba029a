/* The shape and index family (op_list.h's SHAPE rows).  Strategies are the product over mesh
 * dims of per-mesh-dim choices: everything replicated; Shard(e) of the input(s) and the
 * output on a dim the op leaves alone; Partial(sum) or Partial(avg) kept by the linear ops
 * where the input already is one (a linear op of the mean of the parts is the mean of its
 * parts; the dispatcher never makes a Partial).
 *   sort, topk: any dim but the sorted one (topk over a sharded dim: lua/dtensor/shape_ops.lua
 *     merges per-shard candidates; this rule alone replicates the dim);
 *   flip, roll: any dim not flipped / rolled (a flipped or rolled dim is replicated first);
 *   repeat: a dim repeated once (its output dim is e + the leading new dims);
 *   tril, triu: any dim, the last two included: each rank masks its block at the block's
 *     global offsets (local args: the diagonal moved by row offset - column offset);
 *   diag: replicated (or Partial);
 *   gather(x, index): x and index sharded alike on a dim other than dim where their sizes
 *     match; or x replicated and index sharded on dim (the output is index-shaped; on another
 *     dim a shard of the index would read x's leading rows, not those of its own block);
 *   scatter, scatter_add(x, index, src): x, index, src sharded alike on a dim other than dim
 *     where all three sizes match; x and src Partial of the same op (sum or avg) -> that Partial. */
#include "distributed/sharding_rules/sharding_rules.h"

#include <stdint.h>

#include "base/error.h"

/* the reduce op of a Partial(sum) or Partial(avg) on mesh dim m (those a linear op keeps), or -1 */
static int linear_partial(const dt_dspec *s, int m) {
  if (!s || s->p[m].kind != DT_PARTIAL) return -1;
  return s->p[m].op == DT_REDUCE_SUM || s->p[m].op == DT_REDUCE_AVG ? (int)s->p[m].op : -1;
}

static int in_ints(const dt_op_args *a, int from, int to, int64_t v) {
  for (int i = from; i < to; i++)
    if (a->ints[i] == v) return 1;
  return 0;
}

/* the output dim of input dim e when the op keeps it sharded, or -1 */
static int kept_dim(const dt_rule_args *r, int e) {
  const dt_op_args *a = r->a;
  switch (r->op) {
  case DT_OP_SORT: case DT_OP_TOPK: return e == a->ints[0] ? -1 : e;
  case DT_OP_FLIP: return in_ints(a, 0, a->nints, e) ? -1 : e;
  case DT_OP_ROLL: return in_ints(a, a->nints / 2, a->nints, e) ? -1 : e;
  case DT_OP_REPEAT: {
    int lead = a->nints - a->in[0]->ndim;
    return a->ints[e + lead] == 1 ? e + lead : -1;
  }
  case DT_OP_TRIL: case DT_OP_TRIU: return e;
  default: return -1;
  }
}

static int is_linear(dt_op_id op) { return op != DT_OP_SORT && op != DT_OP_TOPK; }

/* choice c of mesh dim m for the one-input ops: 0 R, 1 + e Shard(e), 1 + nd Partial */
static int unary_choice(const dt_rule_args *r, int c, int m, dt_strategy *st) {
  int nd = r->a->in[0]->ndim;
  dt_placement p = dt_rule_R();
  if (c >= 1 && c <= nd) {
    int o = kept_dim(r, c - 1);
    if (o < 0) return 0;
    st->in[0][m] = dt_rule_S(c - 1);
    p = dt_rule_S(o);
  } else if (c == nd + 1) {
    int op = linear_partial(r->spec[0], m);
    if (!is_linear(r->op) || op < 0) return 0;
    st->in[0][m] = p = dt_rule_P((dt_reduce_op)op);
  } else st->in[0][m] = p;
  for (int o = 0; o < r->nout; o++) st->out[o][m] = p;
  return 1;
}

/* gather: 0 R; 1 + e: x and index Shard(e); 1 + nd + d: index Shard(d), x R; 1 + 2nd: Partial */
static int gather_choice(const dt_rule_args *r, int c, int m, dt_strategy *st) {
  const dt_tensor *x = r->a->in[0], *ix = r->a->in[1];
  int nd = x->ndim, d = (int)r->a->ints[0];
  dt_placement R = dt_rule_R();
  st->in[0][m] = st->in[1][m] = st->out[0][m] = R;
  if (c == 0) return 1;
  if (c <= nd) {
    int e = c - 1;
    if (e == d || x->shape[e] != ix->shape[e]) return 0;
    st->in[0][m] = st->in[1][m] = st->out[0][m] = dt_rule_S(e);
    return 1;
  }
  if (c <= 2 * nd) {
    if (c - nd - 1 != d) return 0;
    st->in[1][m] = st->out[0][m] = dt_rule_S(d);
    return 1;
  }
  int op = linear_partial(r->spec[0], m);
  if (op < 0) return 0;
  st->in[0][m] = st->out[0][m] = dt_rule_P((dt_reduce_op)op);
  return 1;
}

/* scatter, scatter_add: 0 R; 1 + e: x, index, src Shard(e); 1 + nd: x and src Partial */
static int scatter_choice(const dt_rule_args *r, int c, int m, dt_strategy *st) {
  const dt_tensor *x = r->a->in[0], *ix = r->a->in[1], *src = r->a->in[2];
  int nd = x->ndim, d = (int)r->a->ints[0];
  dt_placement p = dt_rule_R();
  for (int i = 0; i < 3; i++) st->in[i][m] = p;
  st->out[0][m] = p;
  if (c == 0) return 1;
  if (c <= nd) {
    int e = c - 1;
    if (e == d || x->shape[e] != ix->shape[e] || src->shape[e] != ix->shape[e]) return 0;
    p = dt_rule_S(e);
    st->in[0][m] = st->in[1][m] = st->in[2][m] = st->out[0][m] = p;
    return 1;
  }
  int op = linear_partial(r->spec[0], m);
  if (op < 0 || linear_partial(r->spec[2], m) != op) return 0;
  p = dt_rule_P((dt_reduce_op)op);
  st->in[0][m] = st->in[2][m] = st->out[0][m] = p;
  return 1;
}

int dt_rule_shape(const dt_rule_args *r, dt_strategy *s, int *n) {
  int nd = r->a->in[0]->ndim;
  if (r->op == DT_OP_GATHER) return dt_rule_product(r, 2 + 2 * nd, gather_choice, s, n);
  if (r->op == DT_OP_SCATTER || r->op == DT_OP_SCATTER_ADD) return dt_rule_product(r, 2 + nd, scatter_choice, s, n);
  return dt_rule_product(r, 2 + nd, unary_choice, s, n);
}

/* tril/triu on a block of the last two dims: element (i, j) of the block is (i + r0, j + c0)
 * of the whole, so the block keeps j - i <= diagonal + r0 - c0 (tril; >= for triu) */
int dt_rule_shape_local_args(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                             const dt_dspec *const *out, dt_op_args *la) {
  (void)out;
  if (op != DT_OP_TRIL && op != DT_OP_TRIU) return DT_OK;
  dt_dspec x = *in[0]; /* x's global spec with the chosen placements (a view: no reference taken) */
  for (int m = 0; m < x.mesh->ndim; m++) x.p[m] = choice->in[0][m];
  int nd;
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
  dt_dspec_my_local(&x, &nd, shape, off);
  int64_t k;
  if (nd >= 2 && __builtin_add_overflow(la->ints[0], off[nd - 2] - off[nd - 1], &k))
    k = la->ints[0] < 0 ? INT64_MIN : INT64_MAX; /* beyond every block either way */
  if (nd >= 2) la->ints[0] = k;
  return DT_OK;
}
