/* The matmul family as einsums: every dim of each operand and of the output carries a label
 * (batch, m, n, or the contracted k).  Per mesh dim a strategy shards one label everywhere
 * it appears with its full size (the output too, or Partial(sum) for k), passes one Partial
 * operand through (matmul is linear in each), or replicates; the strategies are the product
 * over mesh dims.  S(m)xR -> S(m), RxS(n) -> S(n), S(k)xS(k) -> Partial(sum), RxR -> R. */
#include "distributed/sharding_rules/sharding_rules.h"

#include "base/error.h"

#define NOLABEL (-1)
enum { MAXL = DT_MAX_DIMS + 3 };

typedef struct einsum {
  int nop;                         /* operands: a, b (addmm: c first) */
  int lab[3][DT_MAX_DIMS];         /* label of each operand dim */
  int nd[3];
  int olab[DT_MAX_DIMS], ond;      /* output labels */
  int64_t size[MAXL];              /* full size of each label */
  int nlab, k;                     /* label count, the contracted label */
  int opnd[3];                     /* operand -> index in a->in */
  int addmm;
} einsum;

static void build(const dt_rule_args *r, einsum *e) {
  const dt_op_args *a = r->a;
  const dt_tensor *A = a->in[r->op == DT_OP_ADDMM ? 1 : 0], *B = a->in[r->op == DT_OP_ADDMM ? 2 : 1];
  const dt_meta *o = &r->out[0];
  *e = (einsum){.nop = 2, .opnd = {0, 1}, .ond = o->ndim};
  if (r->op == DT_OP_ADDMM) e->opnd[0] = 1, e->opnd[1] = 2, e->addmm = 1;
  /* output labels: 0..ond-1; k = ond */
  for (int d = 0; d < o->ndim; d++) e->olab[d] = d, e->size[d] = o->shape[d];
  e->k = o->ndim;
  e->nlab = o->ndim + 1;
  int an = A->ndim, bn = B->ndim;
  e->size[e->k] = A->shape[an - 1];
  int nb = o->ndim - (an >= 2) - (bn >= 2); /* output batch dims */
  /* a: [batch..., m?, k] */
  e->nd[0] = an;
  for (int d = 0; d < an - 1; d++) {
    int od = (an >= 2 && d == an - 2) ? nb : nb - (an - 2) + d;
    e->lab[0][d] = A->shape[d] == o->shape[od] ? od : NOLABEL;
  }
  e->lab[0][an - 1] = e->k;
  /* b: [batch..., k, n?] */
  e->nd[1] = bn;
  if (bn == 1) e->lab[1][0] = e->k;
  else {
    for (int d = 0; d < bn - 2; d++) {
      int od = nb - (bn - 2) + d;
      e->lab[1][d] = B->shape[d] == o->shape[od] ? od : NOLABEL;
    }
    e->lab[1][bn - 2] = e->k;
    e->lab[1][bn - 1] = o->ndim - 1;
  }
}

/* Per mesh dim choices: label l sharded (l < nlab), or pass the Partial of operand j
 * (nlab + j), or all replicated (nlab + nop). */
static int apply(const dt_rule_args *r, const einsum *e, int choice, int m, dt_strategy *st) {
  const dt_op_args *a = r->a;
  for (int i = 0; i < a->nin; i++) st->in[i][m] = dt_rule_R();
  st->out[0][m] = dt_rule_R();
  int c = e->addmm ? 0 : -1; /* addmm's c: broadcast to the output */
  if (choice < e->nlab) {
    int l = choice, found = 0;
    for (int j = 0; j < e->nop; j++)
      for (int d = 0; d < e->nd[j]; d++)
        if (e->lab[j][d] == l) st->in[e->opnd[j]][m] = dt_rule_S(d), found = 1;
    if (!found || e->size[l] < 2) return 0;
    if (l == e->k) {
      for (int j = 0; j < e->nop; j++) /* k must be sharded in both */
        if (st->in[e->opnd[j]][m].kind != DT_SHARD) return 0;
      st->out[0][m] = dt_rule_P(DT_REDUCE_SUM);
      if (c == 0) st->in[0][m] = dt_rule_P(DT_REDUCE_SUM);
    } else {
      st->out[0][m] = dt_rule_S(l);
      if (c == 0) {
        const dt_tensor *C = a->in[0];
        int cd = l - (e->ond - C->ndim);
        if (cd >= 0 && C->shape[cd] == e->size[l]) st->in[0][m] = dt_rule_S(cd);
      }
    }
    return 1;
  }
  if (choice < e->nlab + e->nop) {
    int j = choice - e->nlab;
    dt_placement p = r->spec[e->opnd[j]]->p[m]; /* a product is linear in each operand: sum and avg pass */
    if (p.kind != DT_PARTIAL || (p.op != DT_REDUCE_SUM && p.op != DT_REDUCE_AVG)) return 0;
    st->in[e->opnd[j]][m] = st->out[0][m] = p;
    if (c == 0) st->in[0][m] = p;
    return 1;
  }
  return 1; /* replicated */
}

int dt_rule_linalg(const dt_rule_args *r, dt_strategy *s, int *n) {
  einsum e;
  build(r, &e);
  int nchoice = e.nlab + e.nop + 1, total = 1;
  for (int m = 0; m < r->mesh_ndim; m++) total *= nchoice;
  dt_strategy st = dt_rule_strategy(r);
  for (int t = 0; t < total; t++) {
    int ok = 1, rest = t;
    for (int m = 0; m < r->mesh_ndim && ok; m++, rest /= nchoice) ok = apply(r, &e, rest % nchoice, m, &st);
    if (ok) dt_rule_push(s, n, &st);
  }
  return DT_OK;
}
