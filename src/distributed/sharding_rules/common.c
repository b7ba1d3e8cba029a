/* Helpers the rule families share, and the family -> rule table. */
#include "distributed/sharding_rules/sharding_rules.h"

#include <string.h>

#include "base/error.h"

int dt_rule_product(const dt_rule_args *r, int nchoice, dt_rule_choice_fn choice, dt_strategy *s, int *n) {
  int total = 1;
  for (int m = 0; m < r->mesh_ndim; m++) total *= nchoice;
  dt_strategy st = dt_rule_strategy(r);
  for (int t = 0; t < total; t++) {
    int ok = 1, rest = t;
    for (int m = 0; m < r->mesh_ndim && ok; m++, rest /= nchoice) ok = choice(r, rest % nchoice, m, &st);
    if (ok) dt_rule_push(s, n, &st);
  }
  return DT_OK;
}

void dt_rule_push_chunked(const dt_rule_args *r, dt_strategy *st, const int *free, int skip, dt_rule_fill_fn fill,
                          dt_strategy *s, int *n) {
  const dt_mesh *mesh = r->spec[0]->mesh;
  for (int m = 0; m < r->mesh_ndim; m++) {
    if (!free[m]) continue;
    for (int e = 0; e < r->out[0].ndim; e++) {
      int used = e == skip || r->out[0].shape[e] < mesh->shape[m];
      for (int k = 0; k < r->mesh_ndim && !used; k++)
        used = st->out[0][k].kind == DT_SHARD && st->out[0][k].dim == e;
      if (used) continue;
      fill(r, st, m, dt_rule_S(e));
      dt_rule_push(s, n, st);
      fill(r, st, m, dt_rule_R());
    }
  }
}

dt_placement dt_rule_R(void) { return (dt_placement){.kind = DT_REPLICATE}; }
dt_placement dt_rule_S(int d) { return (dt_placement){.kind = DT_SHARD, .dim = d}; }
dt_placement dt_rule_P(dt_reduce_op op) { return (dt_placement){.kind = DT_PARTIAL, .op = op}; }

static int same(const dt_strategy *a, const dt_strategy *b) {
  return memcmp(a->out, b->out, sizeof a->out) == 0 && memcmp(a->in, b->in, sizeof *a->in * (size_t)a->nin) == 0;
}

int dt_rule_push(dt_strategy *s, int *n, const dt_strategy *st) {
  for (int i = 0; i < *n; i++)
    if (same(&s[i], st)) return DT_OK;
  if (*n >= DT_RULE_MAX_STRATEGIES) return DT_OK; /* enough to choose from */
  dt_strategy_copy(&s[(*n)++], st);
  return DT_OK;
}

void dt_strategy_copy(dt_strategy *dst, const dt_strategy *src) {
  dst->nin = src->nin;
  memcpy(dst->in, src->in, sizeof *src->in * (size_t)src->nin);
  memcpy(dst->out, src->out, sizeof src->out);
}

dt_strategy dt_rule_strategy(const dt_rule_args *r) {
  dt_strategy st = {.nin = r->a->nin, .in = r->work};
  memset(r->work, 0, sizeof *r->work * (size_t)r->a->nin);
  return st;
}

/* The rule of each family of the op rows' sharding column; NULL for LOCAL_ONLY (never
 * dispatched), RANDOM (the RNG tracker, distributed/rng.c, takes those rows) and WRITE (the
 * block writes of distributed/dtensor_write.c). */
static const dt_rule_fn family_rules[] = {
    [DT_SHARDING_LOCAL_ONLY] = NULL,
    [DT_SHARDING_POINTWISE] = dt_rule_pointwise,
    [DT_SHARDING_LINALG] = dt_rule_linalg,
    [DT_SHARDING_REDUCE] = dt_rule_reduce,
    [DT_SHARDING_VIEW] = dt_rule_view,
    [DT_SHARDING_NN] = dt_rule_nn,
    [DT_SHARDING_INDEX] = dt_rule_index,
    [DT_SHARDING_JOIN] = dt_rule_join,
    [DT_SHARDING_SHAPE] = dt_rule_shape,
    [DT_SHARDING_WRITE] = NULL,
    [DT_SHARDING_RANDOM] = NULL,
};
_Static_assert(sizeof family_rules / sizeof family_rules[0] == DT_SHARDING_COUNT,
               "every sharding family (ops/sharding_families.h) needs an entry here");

dt_rule_fn dt_rule_of_family(dt_sharding_family f) {
  return (unsigned)f < DT_SHARDING_COUNT ? family_rules[f] : NULL;
}

dt_rule_fn dt_rule_for(dt_op_id op) { return dt_rule_of_family(dt_op_get(op)->sharding); }

/* The families whose local calls need args of their own (sharding_rules.h); the others NULL. */
static const dt_local_args_fn family_local_args[DT_SHARDING_COUNT] = {
    [DT_SHARDING_VIEW] = dt_rule_view_local_args,
    [DT_SHARDING_NN] = dt_rule_nn_local_args,
    [DT_SHARDING_INDEX] = dt_rule_index_local_args,
    [DT_SHARDING_SHAPE] = dt_rule_shape_local_args,
};

dt_local_args_fn dt_local_args_for(dt_op_id op) {
  unsigned f = (unsigned)dt_op_get(op)->sharding;
  if (f == DT_SHARDING_POINTWISE) return dt_rule_pointwise_local_args_for(op); /* the fills alone */
  return f < DT_SHARDING_COUNT ? family_local_args[f] : NULL;
}
