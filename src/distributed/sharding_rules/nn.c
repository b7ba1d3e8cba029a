/* Neural-network functions.  embedding: per mesh dim, a row-wise (vocab) sharded weight
 * stays sharded with the ids replicated and gives a Partial(sum) output (each rank looks up
 * its own rows, zeros for the others: dt_rule_nn_local_args), a column-wise one gives Shard on
 * the output's last dim; otherwise the weight is replicated and the ids' sharding passes
 * through.  layer_norm/rms_norm: the normalised (last k) dims of x are
 * replicated first, other dims stay sharded; weight and bias are replicated.  sdpa: a batch
 * or heads dim (any but the last two) sharded in q follows into k, v and the mask (where the
 * mask has that dim at full size) and the output; the sequence and embedding dims are
 * replicated (a causal mask needs absolute positions). */
#include "distributed/sharding_rules/sharding_rules.h"

#include "base/error.h"

/* embedding(ids, weight): the strategy that follows the weight (above), then all replicated.
 * A Partial weight is reduced (as the Lua composition did), and so are Partial ids (a
 * lookup is not linear in its ids). */
static int embedding_rule(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_dspec *ids = r->spec[0], *w = r->spec[1];
  int last = r->out[0].ndim - 1;
  dt_strategy st = dt_rule_strategy(r);
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement wp = w->p[m], ip = ids->p[m];
    if (wp.kind == DT_SHARD) {
      st.in[0][m] = dt_rule_R(), st.in[1][m] = wp;
      st.out[0][m] = wp.dim == 0 ? dt_rule_P(DT_REDUCE_SUM) : dt_rule_S(last);
    } else {
      st.in[1][m] = dt_rule_R();
      st.in[0][m] = st.out[0][m] = ip.kind == DT_SHARD ? ip : dt_rule_R();
    }
  }
  dt_rule_push(s, n, &st);
  for (int m = 0; m < r->mesh_ndim; m++) st.in[0][m] = st.in[1][m] = st.out[0][m] = dt_rule_R();
  return dt_rule_push(s, n, &st);
}

/* The first vocab row of this rank's weight shard when a mesh dim shards the vocab. */
int dt_rule_nn_local_args(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                          const dt_dspec *const *out, dt_op_args *la) {
  (void)out;
  if (op != DT_OP_EMBEDDING) return DT_OK;
  dt_dspec w = *in[1]; /* the weight's global spec with the chosen placements (a view: no reference taken) */
  int rowwise = 0;
  for (int m = 0; m < w.mesh->ndim; m++) {
    w.p[m] = choice->in[1][m];
    rowwise |= w.p[m].kind == DT_SHARD && w.p[m].dim == 0;
  }
  if (!rowwise) return DT_OK;
  int nd;
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
  dt_dspec_my_local(&w, &nd, shape, off);
  la->flags |= DT_ARG_VOCAB_SHARD;
  la->ints[0] = off[0], la->nints = 1;
  return DT_OK;
}

/* layer_norm/rms_norm: x's leading-dim sharding kept; layer_norm_backward: the same for grad
 * and x (its first two operands) and dx, while dw and db, sums over the leading dims, are
 * Partial(sum) where the rows are sharded */
static int norm_rule(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0];
  int k = (int)r->a->ints[0], first = x->ndim - k, follow = r->op == DT_OP_LAYER_NORM_BACKWARD ? 2 : 1;
  dt_strategy st = dt_rule_strategy(r);
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement p = x->p[m];
    dt_placement keep = p.kind == DT_SHARD && p.dim < first ? p : dt_rule_R();
    for (int i = 0; i < r->a->nin; i++) st.in[i][m] = i < follow ? keep : dt_rule_R();
    for (int o = 0; o < r->nout; o++) st.out[o][m] = o == 0 || keep.kind != DT_SHARD ? keep : dt_rule_P(DT_REDUCE_SUM);
  }
  dt_rule_push(s, n, &st);
  for (int m = 0; m < r->mesh_ndim; m++) {
    for (int i = 0; i < follow; i++) st.in[i][m] = dt_rule_R();
    for (int o = 0; o < r->nout; o++) st.out[o][m] = dt_rule_R();
  }
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

/* sdpa_backward(grad, q, k, v, mask?): grad, q, k, v share one batch shape, so a batch-dim
 * sharding of operand j is taken by all four and by dq, dk, dv; the mask follows where it
 * has that dim whole (else it is replicated). */
static int sdpa_backward_rule(const dt_rule_args *r, dt_strategy *s, int *n) {
  dt_strategy st = dt_rule_strategy(r);
  int nd = r->spec[1]->ndim;
  for (int j = 0; j <= 4; j++) {
    for (int m = 0; m < r->mesh_ndim; m++) {
      dt_placement p = j < 4 ? r->spec[j]->p[m] : dt_rule_R();
      int d = p.kind == DT_SHARD && p.dim < nd - 2 && r->spec[1]->shape[p.dim] > 1 ? p.dim : -1; /* j == 4: all R */
      for (int i = 0; i < r->a->nin; i++) {
        const dt_dspec *t = r->spec[i];
        if (!t) continue;
        int td = d - (nd - t->ndim);
        st.in[i][m] = d >= 0 && td >= 0 && t->shape[td] == r->spec[1]->shape[d] ? dt_rule_S(td) : dt_rule_R();
      }
      for (int o = 0; o < 3; o++) st.out[o][m] = d >= 0 ? dt_rule_S(d) : dt_rule_R();
    }
    dt_rule_push(s, n, &st);
  }
  return DT_OK;
}

int dt_rule_nn(const dt_rule_args *r, dt_strategy *s, int *n) {
  if (r->op == DT_OP_SDPA) return sdpa_rule(r, s, n);
  if (r->op == DT_OP_SDPA_BACKWARD) return sdpa_backward_rule(r, s, n);
  if (r->op == DT_OP_EMBEDDING) return embedding_rule(r, s, n);
  return norm_rule(r, s, n);
}
