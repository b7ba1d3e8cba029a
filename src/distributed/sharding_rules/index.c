/* Indexing ops.
 * index_select(x, index, dim): x keeps its sharding on every dim but the indexed one, which
 * is replicated first (each rank needs any row the index names); the index is replicated, or
 * where it is sharded (x replicated or sharded on dim there) the output is sharded on dim
 * alike; a Partial(sum)
 * or Partial(avg) x stays Partial (selecting rows is linear).  Where x's dim is sharded (so
 * gathered), a mesh dim on which x and the index are replicated may chunk another dim of x
 * first (locally), so the gather moves that part alone (PyTorch's plan).
 * index_add(x, index, src, dim), per mesh dim (strategies: the product over mesh dims):
 *   replicated;  x, src and the output sharded alike on a dim other than the indexed one;
 *   x and the output sharded on the indexed dim, index and src replicated (each rank adds the
 *   indices that fall in its block: local args);  src (and x) Partial(sum) -> Partial(sum);
 *   the index and src's indexed dim sharded alike -> Partial(sum) (each rank adds its part).
 *   In the last two x may be Partial(sum) or replicated: replicated, ranks off coordinate 0
 *   add no x (local args), so the Partial output counts it once. */
#include "distributed/sharding_rules/sharding_rules.h"

#include "base/error.h"

static void fill_select(const dt_rule_args *r, dt_strategy *st, int m, dt_placement o) {
  (void)r;
  st->in[0][m] = st->out[0][m] = o;
}

/* Pushes st, then where x's dim d is gathered: st with x (and the output) chunked on a
 * dim e != d over each mesh dim where x and the index are replicated. */
static void push_chunked(const dt_rule_args *r, dt_strategy *st, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0], *ix = r->spec[1];
  int d = (int)r->a->ints[0], gathered = 0, free[DT_MESH_MAX_DIMS];
  dt_rule_push(s, n, st);
  for (int m = 0; m < r->mesh_ndim; m++) {
    gathered |= x->p[m].kind == DT_SHARD && x->p[m].dim == d;
    free[m] = x->p[m].kind == DT_REPLICATE && (!ix || ix->p[m].kind == DT_REPLICATE) &&
              st->out[0][m].kind == DT_REPLICATE;
  }
  if (gathered) dt_rule_push_chunked(r, st, free, d, fill_select, s, n);
}

static int index_select_rule(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_dspec *x = r->spec[0];
  int d = (int)r->a->ints[0];
  dt_strategy st = dt_rule_strategy(r);
  for (int m = 0; m < r->mesh_ndim; m++) {
    dt_placement p = x->p[m];
    int keep = (p.kind == DT_SHARD && p.dim != d) ||
               (p.kind == DT_PARTIAL && (p.op == DT_REDUCE_SUM || p.op == DT_REDUCE_AVG));
    st.in[0][m] = st.out[0][m] = keep ? p : dt_rule_R();
    st.in[1][m] = dt_rule_R();
  }
  push_chunked(r, &st, s, n);
  /* where the index is sharded and x replicated, or sharded on dim (gathered anyway): each
   * rank selects its part of the index, the output sharded on dim as the index is (x's other
   * mesh dims as above) */
  const dt_dspec *ix = r->spec[1];
  int any = 0;
  dt_strategy sh = st;
  for (int m = 0; ix && m < r->mesh_ndim; m++)
    if (ix->p[m].kind == DT_SHARD && ix->p[m].dim == 0 &&
        (x->p[m].kind == DT_REPLICATE || (x->p[m].kind == DT_SHARD && x->p[m].dim == d))) {
      sh.in[0][m] = dt_rule_R();
      sh.out[0][m] = dt_rule_S(d);
      sh.in[1][m] = dt_rule_S(0);
      any = 1;
    }
  if (any) push_chunked(r, &sh, s, n);
  for (int m = 0; m < r->mesh_ndim; m++) st.in[0][m] = st.out[0][m] = dt_rule_R();
  return dt_rule_push(s, n, &st);
}

/* index_add's choices on one mesh dim: 0 replicated; 1 + e shard x's dim e (the indexed dim:
 * the block strategy); then nd + 1 + one of these: */
enum { SRC_PARTIAL, SRC_PARTIAL_XR, INDEX_SHARDED, INDEX_SHARDED_XR, NEXTRA };

static int is_partial_sum(const dt_dspec *s, int m) {
  return s && s->p[m].kind == DT_PARTIAL && s->p[m].op == DT_REDUCE_SUM;
}

static int index_add_choice(const dt_rule_args *r, int c, int m, dt_strategy *st) {
  const dt_tensor *x = r->a->in[0], *ix = r->a->in[1];
  int d = (int)r->a->ints[0], nd = x->ndim;
  dt_placement R = dt_rule_R(), P = dt_rule_P(DT_REDUCE_SUM);
  for (int i = 0; i < 3; i++) st->in[i][m] = R;
  st->out[0][m] = R;
  if (c == 0) return 1;
  if (c <= nd) {
    int e = c - 1;
    if (x->shape[e] < 2) return 0;
    st->in[0][m] = st->out[0][m] = dt_rule_S(e);
    if (e != d) st->in[2][m] = dt_rule_S(e); /* src's slices follow x's; on d: each rank its block */
    return 1;
  }
  /* a Partial operand only where it already is one (x and src are never partitioned here) */
  int extra = c - nd - 1, x_partial = extra == SRC_PARTIAL || extra == INDEX_SHARDED;
  if (x_partial && !is_partial_sum(r->spec[0], m)) return 0;
  if ((extra == SRC_PARTIAL || extra == SRC_PARTIAL_XR) && !is_partial_sum(r->spec[2], m)) return 0;
  st->in[0][m] = x_partial ? P : R;
  st->out[0][m] = P;
  if (extra == SRC_PARTIAL || extra == SRC_PARTIAL_XR) {
    st->in[2][m] = P;
    return 1;
  }
  if (nd == 0 || ix->ndim != 1 || ix->shape[0] < 2) return 0;
  st->in[1][m] = dt_rule_S(0), st->in[2][m] = dt_rule_S(d);
  return 1;
}

static int index_add_rule(const dt_rule_args *r, dt_strategy *s, int *n) {
  return dt_rule_product(r, 1 + r->a->in[0]->ndim + NEXTRA, index_add_choice, s, n);
}

int dt_rule_index(const dt_rule_args *r, dt_strategy *s, int *n) {
  return r->op == DT_OP_INDEX_ADD ? index_add_rule(r, s, n) : index_select_rule(r, s, n);
}

int dt_rule_index_local_args(dt_op_id op, const dt_dspec *const *in, const dt_strategy *choice,
                             const dt_dspec *const *out, dt_op_args *la) {
  (void)out;
  if (op != DT_OP_INDEX_ADD) return DT_OK;
  dt_dspec x = *in[0]; /* x's global spec with the chosen placements (a view: no reference taken) */
  int d = (int)la->ints[0], block = 0;
  for (int m = 0; m < x.mesh->ndim; m++) {
    x.p[m] = choice->in[0][m];
    if (choice->out[0][m].kind == DT_PARTIAL && x.p[m].kind == DT_REPLICATE && x.mesh->coord[m] != 0)
      la->flags |= DT_ARG_INDEX_NO_BASE;
    block |= x.p[m].kind == DT_SHARD && x.p[m].dim == d;
  }
  if (!block) return DT_OK;
  int nd;
  int64_t shape[DT_MAX_DIMS], off[DT_MAX_DIMS];
  dt_dspec_my_local(&x, &nd, shape, off);
  la->flags |= DT_ARG_INDEX_BLOCK;
  la->ints[1] = off[d], la->ints[2] = x.shape[d], la->nints = 3;
  return DT_OK;
}
