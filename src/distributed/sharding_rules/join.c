/* Joins (cat, stack) of any number of inputs.  A dim other than the join dim stays sharded
 * when every input is brought to one sharding of it: the strategies follow each input in
 * turn, then per mesh dim the first input that is not replicated, then all replicated, and
 * the planner's prices choose.  A sharded join dim is replicated first (a rank would hold a
 * slice of every input, not a slice of the result).  A Partial passes when no joined input
 * has another Partial and those with it have the output's dtype: a join only moves
 * elements, so any reduction across ranks commutes with it (a dtype promotion might not);
 * the other inputs are brought to that Partial locally (a replicated one partitioned: rank 0
 * keeps it for sum; a sharded one padded with the op's identity).  cat's skipped
 * inputs (1-d empty, src/ops/shape_join.c) keep their placements: every shard is empty.
 * When the join dim must be gathered on one mesh dim, a mesh dim on which every input is
 * replicated may chunk another dim first (locally), so the gather moves that part alone: as
 * PyTorch, `cat((S(d), R), (R, R))` -> `(R, S(e))`. */
#include "distributed/sharding_rules/sharding_rules.h"

#include <string.h>

#include "base/error.h"
#include "ops/join.h"

static int skipped(const dt_rule_args *r, const dt_tensor *ref, int i) {
  return r->op == DT_OP_CAT && dt_join_skips(r->a->in[i], ref);
}

static int partial_ok(const dt_rule_args *r, const dt_tensor *ref, int m, dt_placement p) {
  for (int i = 0; i < r->a->nin; i++) {
    if (skipped(r, ref, i)) continue;
    dt_placement q = r->spec[i]->p[m];
    if (q.kind == DT_PARTIAL && (!dt_placement_equal(q, p) || r->spec[i]->dtype != r->out[0].dtype)) return 0;
  }
  return 1;
}

/* The output placement on mesh dim m that follows input i's placement there. */
static dt_placement follow(const dt_rule_args *r, const dt_tensor *ref, int i, int m) {
  dt_placement p = r->spec[i]->p[m];
  int d = (int)r->a->ints[0], stack = r->op == DT_OP_STACK;
  if (p.kind == DT_SHARD && (stack || p.dim != d)) return dt_rule_S(p.dim + (stack && p.dim >= d));
  if (p.kind == DT_PARTIAL && partial_ok(r, ref, m, p)) return p;
  return dt_rule_R();
}

/* Every input's placements for the output placements st->out[0]. */
static void complete(const dt_rule_args *r, const dt_tensor *ref, dt_strategy *st) {
  int d = (int)r->a->ints[0], stack = r->op == DT_OP_STACK;
  for (int i = 0; i < r->a->nin; i++)
    for (int m = 0; m < r->mesh_ndim; m++) {
      dt_placement o = st->out[0][m];
      if (skipped(r, ref, i)) st->in[i][m] = r->spec[i]->p[m];
      else if (o.kind == DT_SHARD) st->in[i][m] = dt_rule_S(o.dim - (stack && o.dim > d));
      else st->in[i][m] = o;
    }
}

/* Is some input's join dim sharded on a mesh dim (so it is gathered whatever the plan)? */
static int join_dim_sharded(const dt_rule_args *r, const dt_tensor *ref) {
  int d = (int)r->a->ints[0];
  if (r->op == DT_OP_STACK) return 0;
  for (int i = 0; i < r->a->nin; i++)
    for (int m = 0; m < r->mesh_ndim && !skipped(r, ref, i); m++)
      if (r->spec[i]->p[m].kind == DT_SHARD && r->spec[i]->p[m].dim == d) return 1;
  return 0;
}

/* chunking mesh dim m: the output placement o, the inputs following it */
static void fill_join(const dt_rule_args *r, dt_strategy *st, int m, dt_placement o) {
  st->out[0][m] = o;
  complete(r, dt_join_ref(r->a), st);
}

/* The mesh dims on which every input is replicated (and so the output of st). */
static void chunk_replicated(const dt_rule_args *r, const dt_tensor *ref, dt_strategy *st, dt_strategy *s, int *n) {
  int free[DT_MESH_MAX_DIMS];
  for (int m = 0; m < r->mesh_ndim; m++) {
    free[m] = st->out[0][m].kind == DT_REPLICATE;
    for (int i = 0; i < r->a->nin && free[m]; i++)
      free[m] = skipped(r, ref, i) || r->spec[i]->p[m].kind == DT_REPLICATE;
  }
  dt_rule_push_chunked(r, st, free, (int)r->a->ints[0], fill_join, s, n);
}

int dt_rule_join(const dt_rule_args *r, dt_strategy *s, int *n) {
  const dt_tensor *ref = dt_join_ref(r->a);
  dt_strategy st = dt_rule_strategy(r);
  int nm = r->mesh_ndim, first = *n;
  size_t row = sizeof(dt_placement) * (size_t)nm;
  for (int i = 0; i < r->a->nin; i++) {
    if (skipped(r, ref, i)) continue;
    for (int m = 0; m < nm; m++) st.out[0][m] = follow(r, ref, i, m);
    int seen = 0; /* many inputs, few distinct placements: skip a repeat before completing it */
    for (int k = first; k < *n && !seen; k++) seen = memcmp(s[k].out[0], st.out[0], row) == 0;
    if (seen) continue;
    complete(r, ref, &st);
    dt_rule_push(s, n, &st);
  }
  for (int m = 0; m < nm; m++) {
    st.out[0][m] = dt_rule_R();
    for (int i = 0; i < r->a->nin && st.out[0][m].kind == DT_REPLICATE; i++)
      if (!skipped(r, ref, i)) st.out[0][m] = follow(r, ref, i, m);
  }
  complete(r, ref, &st);
  dt_rule_push(s, n, &st);
  if (join_dim_sharded(r, ref)) chunk_replicated(r, ref, &st, s, n);
  for (int m = 0; m < nm; m++) st.out[0][m] = dt_rule_R();
  complete(r, ref, &st);
  return dt_rule_push(s, n, &st);
}
