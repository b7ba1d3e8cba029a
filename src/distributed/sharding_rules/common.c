/* Helpers the rule families share, and the family -> rule table. */
#include "distributed/sharding_rules/sharding_rules.h"

#include <string.h>

#include "base/error.h"

dt_placement dt_rule_R(void) { return (dt_placement){.kind = DT_REPLICATE}; }
dt_placement dt_rule_S(int d) { return (dt_placement){.kind = DT_SHARD, .dim = d}; }
dt_placement dt_rule_P(dt_reduce_op op) { return (dt_placement){.kind = DT_PARTIAL, .op = op}; }

int dt_rule_push(dt_strategy *s, int *n, const dt_strategy *st) {
  for (int i = 0; i < *n; i++)
    if (memcmp(&s[i], st, sizeof *st) == 0) return DT_OK;
  if (*n >= DT_RULE_MAX_STRATEGIES) return DT_OK; /* enough to choose from */
  s[(*n)++] = *st;
  return DT_OK;
}

/* The rule of each family of the op rows' sharding column; NULL for LOCAL_ONLY (never
 * dispatched) and RANDOM (the RNG tracker, distributed/rng.c, takes those rows). */
static const dt_rule_fn family_rules[] = {
    [DT_SHARDING_LOCAL_ONLY] = NULL,
    [DT_SHARDING_POINTWISE] = dt_rule_pointwise,
    [DT_SHARDING_MATMUL] = dt_rule_matmul,
    [DT_SHARDING_REDUCE] = dt_rule_reduce,
    [DT_SHARDING_VIEW] = dt_rule_view,
    [DT_SHARDING_NN] = dt_rule_nn,
    [DT_SHARDING_INDEX] = dt_rule_index,
    [DT_SHARDING_RANDOM] = NULL,
};
_Static_assert(sizeof family_rules / sizeof family_rules[0] == DT_SHARDING_COUNT,
               "every sharding family (ops/sharding_families.h) needs an entry here");

dt_rule_fn dt_rule_of_family(dt_sharding_family f) {
  return (unsigned)f < DT_SHARDING_COUNT ? family_rules[f] : NULL;
}

dt_rule_fn dt_rule_for(dt_op_id op) { return dt_rule_of_family(dt_op_get(op)->sharding); }
