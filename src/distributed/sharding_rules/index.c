/* Indexing ops.  index_select(x, index, dim): x keeps its sharding on every dim but the
 * indexed one, which is replicated first (each rank needs any row the index names); the
 * index is replicated; a Partial(sum) x stays Partial (selecting rows is linear). */
#include "distributed/sharding_rules/sharding_rules.h"

int dt_rule_index(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0];
  int d = (int)r->a->ints[0];
  dt_strategy st = dt_rule_strategy(r);
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement p = x->p[m];
    int keep = (p.kind == DT_SHARD && p.dim != d) || (p.kind == DT_PARTIAL && p.op == DT_REDUCE_SUM);
    st.in[0][m] = st.out[0][m] = keep ? p : dt_rule_R();
    st.in[1][m] = dt_rule_R();
  }
  dt_rule_push(s, n, &st);
  for (int m = 0; m < r->mesh_ndim; m++) st.in[0][m] = st.out[0][m] = dt_rule_R();
  return dt_rule_push(s, n, &st);
}
