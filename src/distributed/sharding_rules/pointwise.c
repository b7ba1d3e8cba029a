/* Pointwise ops (unary, binary with broadcasting, where, casts and copies, in-place ops):
 * the output follows a sharded input, or merges them (per mesh dim the first sharded input, or
 * the first Partial one), dims aligned from the right; an input dim that is
 * broadcast (size 1, or missing) cannot be sharded, a dim of size 1 or 0 in both can;
 * a _StridedShard is followed like a Shard (the other operands take the same one);
 * Partial(sum) and Partial(avg) pass through the linear ops (P + R stays Partial: R is
 * partitioned locally, rank 0 keeps it), Partial(max)/(min) through the monotone ones (relu,
 * tanh, ...; neg swaps them), and a Partial is replicated first otherwise (sign of a sum,
 * nan_to_num, ...: never a wrong number). */
#include "distributed/sharding_rules/sharding_rules.h"

#include "base/error.h"

static int is_rep(dt_placement p) { return p.kind == DT_REPLICATE; }
static int is_partial(dt_placement p, dt_reduce_op op) { return p.kind == DT_PARTIAL && p.op == op; }
/* sum and avg commute with every linear map */
static int is_linear_partial(dt_placement p) { return is_partial(p, DT_REDUCE_SUM) || is_partial(p, DT_REDUCE_AVG); }

/* Monotone non-decreasing unary ops: f(max x_r) = max f(x_r) exactly, so Partial(max) and
 * Partial(min) pass through them. */
static int monotone(const dt_rule_args *r) {
  switch (r->op) {
  case DT_OP_RELU: case DT_OP_TANH: case DT_OP_SIGMOID: case DT_OP_EXP: case DT_OP_ERF: case DT_OP_FLOOR:
  case DT_OP_CEIL: case DT_OP_TRUNC: case DT_OP_ROUND: case DT_OP_SIGN: case DT_OP_HARDTANH: case DT_OP_CLONE:
  case DT_OP_CONTIGUOUS:
    return 1;
  case DT_OP_CLAMP: return r->a->nin == 1; /* number bounds */
  case DT_OP_TO: return dt_dtype_is_float(r->spec[0]->dtype) && dt_dtype_is_float(r->out[0].dtype);
  default: return 0;
  }
}

/* The Partial the output keeps on mesh dim m when input i has Partial p there, or Replicate
 * when it cannot be kept exactly.  The linear ops in all their operands (add, sub, add_,
 * copy_, lerp's a and b) bring every other operand to the same Partial (a replicated one is
 * partitioned, a sharded one padded: local steps); the ones linear in one operand (mul, div,
 * dropout's backward, addcmul, addcdiv) need the others replicated. */
static dt_placement partial_out(const dt_rule_args *r, int i, int m, dt_placement p) {
  const dt_op_args *a = r->a;
  const dt_dspec *const *sp = r->spec;
  int lin = is_linear_partial(p), other = 1 - i;
  switch (r->op) {
  case DT_OP_NEG: /* -max x = min -x */
    if (is_partial(p, DT_REDUCE_MAX) || is_partial(p, DT_REDUCE_MIN))
      return dt_rule_P(p.op == DT_REDUCE_MAX ? DT_REDUCE_MIN : DT_REDUCE_MAX);
    return lin ? p : dt_rule_R();
  case DT_OP_CLONE: case DT_OP_CONTIGUOUS: case DT_OP_ZERO_:
    if (lin || r->op == DT_OP_ZERO_) return p;
    break;
  case DT_OP_COPY_: /* self's values are replaced: src takes self's Partial (any reduce op) */
    return i == 0 ? p : dt_rule_R();
  case DT_OP_FILL_: case DT_OP_MASKED_FILL_: /* written as the Partial's identity (fill_local_args) */
    return i == 0 ? p : dt_rule_R();
  case DT_OP_TO: /* a cast between floating dtypes is linear; to an integer it truncates */
    if (lin && dt_dtype_is_float(sp[0]->dtype) && dt_dtype_is_float(r->out[0].dtype)) return p;
    break;
  case DT_OP_ADD: case DT_OP_SUB: case DT_OP_ADD_:
    return a->nin == 2 && sp[1] && lin ? p : dt_rule_R();
  case DT_OP_MUL: case DT_OP_MUL_:
    if (a->nin == 1) return lin ? p : dt_rule_R();
    /* P * P: the other factor is reduced first (P * R is linear), as PyTorch does -- one
     * collective where reducing both took two; in place, self must be the one kept */
    if (r->op == DT_OP_MUL) return sp[1] && lin ? p : dt_rule_R();
    return sp[1] && lin && !is_linear_partial(sp[other]->p[m]) ? p : dt_rule_R();
  case DT_OP_DROPOUT_BACKWARD: /* grad * keep / (1 - p): linear in grad */
    return i == 0 && lin ? p : dt_rule_R();
  case DT_OP_LERP: /* (1 - w) a + w b: linear in a and b together, w a number or replicated */
    return i < 2 && lin ? p : dt_rule_R();
  case DT_OP_ADDCMUL: /* s + v t1 t2: linear in s with one of t1, t2 (the other replicated) */
  case DT_OP_ADDCDIV: /* s + v t1 / t2: linear in s and t1 (t2 replicated): taken as they are */
    if (!lin || !sp[1] || !sp[2] || !is_partial(sp[0]->p[m], p.op)) return dt_rule_R();
    if (is_partial(sp[1]->p[m], p.op) && is_rep(sp[2]->p[m])) return p;
    return r->op == DT_OP_ADDCMUL && is_rep(sp[1]->p[m]) && is_partial(sp[2]->p[m], p.op) ? p : dt_rule_R();
  case DT_OP_DIV:
    if (a->nin == 1) return lin && !(a->flags & DT_ARG_SCALAR_LEFT) ? p : dt_rule_R();
    return i == 0 && sp[1] && lin ? p : dt_rule_R();
  default:
    break;
  }
  if ((is_partial(p, DT_REDUCE_MAX) || is_partial(p, DT_REDUCE_MIN)) && monotone(r)) return p;
  return dt_rule_R();
}

/* The placement input i needs on mesh dim m for output placement o. */
static dt_placement input_for(const dt_rule_args *r, int i, int m, dt_placement o) {
  const dt_dspec *s = r->spec[i];
  if (o.kind == DT_PARTIAL) {
    switch (r->op) {
    case DT_OP_NEG: return s->p[m]; /* the one input, whose Partial gave o */
    case DT_OP_ADD: case DT_OP_SUB: case DT_OP_ADD_: case DT_OP_COPY_: return o;
    case DT_OP_LERP: return i < 2 ? o : dt_rule_R();
    case DT_OP_ADDCMUL: case DT_OP_ADDCDIV: return s->p[m]; /* partial_out took them as they are */
    case DT_OP_MUL: case DT_OP_MUL_: { /* the Partial factor (self for mul_), the other replicated */
      int k = r->op == DT_OP_MUL_ || r->a->nin == 1 || dt_placement_equal(r->spec[0]->p[m], o) ? 0 : 1;
      return i == k ? o : dt_rule_R();
    }
    default: return i == 0 ? o : dt_rule_R();
    }
  }
  if (o.kind == DT_SHARD || o.kind == DT_STRIDED_SHARD) { /* the same sharding of the aligned dim */
    int d = o.dim - (r->out[0].ndim - s->ndim);
    if (d >= 0 && s->shape[d] == r->out[0].shape[o.dim]) return o.dim = d, o;
  }
  return dt_rule_R();
}

/* The output placement on mesh dim m that follows input i's placement there. */
static dt_placement follow(const dt_rule_args *r, int i, int m) {
  const dt_dspec *s = r->spec[i];
  dt_placement p = s->p[m];
  if (p.kind == DT_SHARD || p.kind == DT_STRIDED_SHARD) {
    int od = p.dim + (r->out[0].ndim - s->ndim);
    if (s->shape[p.dim] == r->out[0].shape[od]) return p.dim = od, p; /* size 1 and 0 too: no broadcast */
  }
  if (p.kind == DT_PARTIAL) return partial_out(r, i, m, p);
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
      if (p.kind == DT_PARTIAL && !dt_placement_equal(partial_out(r, 0, m, p), p)) return DT_OK; /* none: the caller explains */
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
  /* a merge that keeps any input's Partial: the other operands are brought to it locally, so
   * a small Partial beside a big sharded operand moves neither (add_bcast's P beside S) */
  for (m = 0; m < r->mesh_ndim; m++)
    for (i = 0; i < nin; i++)
      if (r->spec[i] && follow(r, i, m).kind == DT_PARTIAL) {
        st.out[0][m] = follow(r, i, m);
        break;
      }
  complete(r, &st);
  dt_rule_push(s, n, &st);
  for (m = 0; m < r->mesh_ndim; m++) st.out[0][m] = dt_rule_R();
  complete(r, &st);
  return dt_rule_push(s, n, &st);
}

/* fill_ and masked_fill_ into a Partial: a rank that does not hold the value writes its
 * reduce op's identity (0 of a sum away from coordinate 0, 1 of a product), so the reduced
 * tensor reads v where v was written -- where PyTorch writes v on every rank (n * v after a
 * sum). */
static int fill_local_args(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                           const dt_dspec *const *out, dt_op_args *la) {
  (void)op, (void)in, (void)choice;
  int v = dt_dspec_write_identity(out[0]);
  if (v < 0) return DT_OK;
  la->scalar[0] = v;
  if (la->flags & DT_ARG_SCALAR_INT) la->ints[0] = v;
  return DT_OK;
}

dt_local_args_fn dt_rule_pointwise_local_args_for(dt_op_id op) {
  return op == DT_OP_FILL_ || op == DT_OP_MASKED_FILL_ ? fill_local_args : NULL;
}
