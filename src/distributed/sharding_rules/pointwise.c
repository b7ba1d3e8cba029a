/* Pointwise ops (unary, binary with broadcasting, where, casts and copies, in-place ops):
 * the output follows a sharded input, dims aligned from the right; an input dim that is
 * broadcast (size 1, or missing) cannot be sharded; Partial(sum) passes through the linear
 * ops only (lerp, addcmul, addcdiv in the operands they are linear in), and is replicated
 * first otherwise (floor, round, sign, nan_to_num, ...: never a wrong number). */
#include "distributed/sharding_rules/sharding_rules.h"

#include "base/error.h"

static int is_sum(dt_placement p) { return p.kind == DT_PARTIAL && p.op == DT_REDUCE_SUM; }
static int is_rep(dt_placement p) { return p.kind == DT_REPLICATE; }

/* May the output stay Partial(sum) on mesh dim m, given the inputs' placements there? */
static int partial_ok(const dt_rule_args *r, int m) {
  const dt_op_args *a = r->a;
  const dt_dspec *const *sp = r->spec;
  switch (r->op) {
  case DT_OP_NEG: case DT_OP_CLONE: case DT_OP_CONTIGUOUS: case DT_OP_ZERO_:
    return is_sum(sp[0]->p[m]);
  case DT_OP_TO: /* a cast between floating dtypes is linear; to an integer it truncates */
    return is_sum(sp[0]->p[m]) && dt_dtype_is_float(sp[0]->dtype) && dt_dtype_is_float(r->out[0].dtype);
  case DT_OP_ADD: case DT_OP_SUB: case DT_OP_ADD_:
    return a->nin == 2 && sp[1] && is_sum(sp[0]->p[m]) && is_sum(sp[1]->p[m]);
  case DT_OP_MUL: case DT_OP_MUL_:
    if (a->nin == 1) return is_sum(sp[0]->p[m]);
    return sp[1] && ((is_sum(sp[0]->p[m]) && is_rep(sp[1]->p[m])) || (is_rep(sp[0]->p[m]) && is_sum(sp[1]->p[m])));
  case DT_OP_DROPOUT_BACKWARD: /* grad * keep / (1 - p): linear in grad */
    return is_sum(sp[0]->p[m]) && sp[1] && is_rep(sp[1]->p[m]);
  case DT_OP_LERP: /* (1 - w) a + w b: linear in a and b together, w a number or replicated */
    return sp[1] && is_sum(sp[0]->p[m]) && is_sum(sp[1]->p[m]) && (a->nin == 2 || (sp[2] && is_rep(sp[2]->p[m])));
  case DT_OP_ADDCMUL: /* s + v t1 t2: linear in s with one of t1, t2 (the other replicated) */
  case DT_OP_ADDCDIV: /* s + v t1 / t2: linear in s and t1 (t2 replicated) */
    return sp[1] && sp[2] && is_sum(sp[0]->p[m]) &&
           ((is_sum(sp[1]->p[m]) && is_rep(sp[2]->p[m])) ||
            (r->op == DT_OP_ADDCMUL && is_rep(sp[1]->p[m]) && is_sum(sp[2]->p[m])));
  case DT_OP_DIV:
    if (a->nin == 1) return is_sum(sp[0]->p[m]) && !(a->flags & DT_ARG_SCALAR_LEFT);
    return sp[1] && is_sum(sp[0]->p[m]) && is_rep(sp[1]->p[m]);
  default:
    return 0;
  }
}

/* The placement input i needs on mesh dim m for output placement o. */
static dt_placement input_for(const dt_rule_args *r, int i, int m, dt_placement o) {
  const dt_dspec *s = r->spec[i];
  if (o.kind == DT_PARTIAL) return s->p[m]; /* partial_ok checked them: P(sum) or R as they are */
  if (o.kind == DT_SHARD) {
    int d = o.dim - (r->out[0].ndim - s->ndim);
    if (d >= 0 && s->shape[d] == r->out[0].shape[o.dim]) return dt_rule_S(d);
  }
  return dt_rule_R();
}

/* The output placement on mesh dim m that follows input i's placement there. */
static dt_placement follow(const dt_rule_args *r, int i, int m) {
  const dt_dspec *s = r->spec[i];
  dt_placement p = s->p[m];
  if (p.kind == DT_SHARD) {
    int od = p.dim + (r->out[0].ndim - s->ndim);
    if (s->shape[p.dim] == r->out[0].shape[od] && r->out[0].shape[od] > 1) return dt_rule_S(od);
  }
  if (p.kind == DT_PARTIAL && partial_ok(r, m)) return p;
  return dt_rule_R();
}

static void complete(const dt_rule_args *r, dt_strategy *st) {
  for (int i = 0; i < r->a->nin; i++)
    if (r->spec[i])
      for (int m = 0; m < r->mesh_ndim; m++) st->in[i][m] = input_for(r, i, m, st->out[0][m]);
}

int dt_rule_pointwise(const dt_rule_args *r, dt_strategy *s, int *n) {
  int m, i, nin = r->a->nin;
  dt_strategy st = dt_rule_strategy(r);
  if (dt_op_get(r->op)->flags & DT_OPF_INPLACE) { /* the output keeps self's placements */
    for (m = 0; m < r->mesh_ndim; m++) {
      dt_placement p = r->spec[0]->p[m];
      if (p.kind == DT_PARTIAL && !partial_ok(r, m)) return DT_OK; /* none: the caller explains */
      st.out[0][m] = p;
    }
    complete(r, &st);
    return dt_rule_push(s, n, &st);
  }
  /* follow each input, then a merge (per mesh dim the first input that is not replicated) */
  for (i = 0; i < nin; i++) {
    if (!r->spec[i]) continue;
    for (m = 0; m < r->mesh_ndim; m++) st.out[0][m] = follow(r, i, m);
    complete(r, &st);
    dt_rule_push(s, n, &st);
  }
  for (m = 0; m < r->mesh_ndim; m++) {
    st.out[0][m] = dt_rule_R();
    for (i = 0; i < nin; i++)
      if (r->spec[i] && !is_rep(follow(r, i, m))) {
        st.out[0][m] = follow(r, i, m);
        break;
      }
  }
  complete(r, &st);
  dt_rule_push(s, n, &st);
  for (m = 0; m < r->mesh_ndim; m++) st.out[0][m] = dt_rule_R();
  complete(r, &st);
  return dt_rule_push(s, n, &st);
}
