/* Neural-network functions.  layer_norm/rms_norm: the normalised (last k) dims of x are
 * replicated first, other dims stay sharded; weight and bias are replicated.  sdpa: a batch
 * or heads dim (any but the last two) sharded in q follows into k, v and the mask (where the
 * mask has that dim at full size) and the output; the sequence and embedding dims are
 * replicated (a causal mask needs absolute positions). */
#include "distributed/sharding_rules/sharding_rules.h"

#include "base/error.h"

static int norm_rule(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0];
  int k = (int)r->a->ints[0], first = x->ndim - k;
  dt_strategy st = dt_rule_strategy(r);
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement p = x->p[m];
    dt_placement keep = p.kind == DT_SHARD && p.dim < first ? p : dt_rule_R();
    st.in[0][m] = st.out[0][m] = keep;
    for (int i = 1; i < r->a->nin; i++) st.in[i][m] = dt_rule_R();
  }
  dt_rule_push(s, n, &st);
  for (int m = 0; m < r->mesh_ndim; m++) st.in[0][m] = st.out[0][m] = dt_rule_R();
  return dt_rule_push(s, n, &st);
}

/* The strategy where mesh dim m follows a batch-dim sharding of operand j (or replicates). */
static void sdpa_follow(const dt_rule_args *r, int j, dt_strategy *st) {
  const dt_dspec *q = r->spec[0];
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement p = r->spec[j]->p[m];
    int d = -1; /* the dim in q's numbering */
    if (p.kind == DT_SHARD) {
      int qd = p.dim + (q->ndim - r->spec[j]->ndim);
      if (qd >= 0 && qd < q->ndim - 2 && q->shape[qd] > 1) d = qd;
    }
    for (int i = 0; i < r->a->nin; i++) {
      if (!r->spec[i]) continue;
      const dt_dspec *t = r->spec[i];
      int td = d - (q->ndim - t->ndim);
      st->in[i][m] = d >= 0 && td >= 0 && td < t->ndim - 2 && t->shape[td] == q->shape[d] ? dt_rule_S(td) : dt_rule_R();
      if (d >= 0 && i < 3 && st->in[i][m].kind != DT_SHARD) d = -1; /* q, k, v must all shard it */
    }
    if (d < 0)
      for (int i = 0; i < r->a->nin; i++) st->in[i][m] = dt_rule_R();
    st->out[0][m] = d >= 0 ? dt_rule_S(d + (r->out[0].ndim - q->ndim)) : dt_rule_R();
  }
}

static int sdpa_rule(const dt_rule_args *r, dt_strategy *s, int *n) {
  dt_strategy st = dt_rule_strategy(r);
  for (int j = 0; j < 3; j++) {
    sdpa_follow(r, j, &st);
    dt_rule_push(s, n, &st);
  }
  for (int m = 0; m < r->mesh_ndim; m++) {
    for (int i = 0; i < r->a->nin; i++) st.in[i][m] = dt_rule_R();
    st.out[0][m] = dt_rule_R();
  }
  return dt_rule_push(s, n, &st);
}

int dt_rule_nn(const dt_rule_args *r, dt_strategy *s, int *n) {
  if (r->op == DT_OP_SDPA) return sdpa_rule(r, s, n);
  return norm_rule(r, s, n);
}
