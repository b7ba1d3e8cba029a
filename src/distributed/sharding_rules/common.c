/* Helpers the rule families share, and the op -> rule table. */
#include "distributed/sharding_rules/sharding_rules.h"

#include <string.h>

#include "base/error.h"

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

dt_rule_fn dt_rule_for(dt_op_id op) {
  switch (op) {
  case DT_OP_CLONE: case DT_OP_TO: case DT_OP_CONTIGUOUS:
  case DT_OP_COPY_: case DT_OP_FILL_: case DT_OP_ZERO_: case DT_OP_ADD_: case DT_OP_MUL_:
  case DT_OP_NEG: case DT_OP_ABS: case DT_OP_EXP: case DT_OP_LOG: case DT_OP_SQRT: case DT_OP_RSQRT:
  case DT_OP_TANH: case DT_OP_SIGMOID: case DT_OP_RELU: case DT_OP_GELU: case DT_OP_SILU: case DT_OP_SIN:
  case DT_OP_COS: case DT_OP_CLAMP:
  case DT_OP_ADD: case DT_OP_SUB: case DT_OP_MUL: case DT_OP_DIV: case DT_OP_POW: case DT_OP_REMAINDER:
  case DT_OP_EQ: case DT_OP_NE: case DT_OP_LT: case DT_OP_LE: case DT_OP_GT: case DT_OP_GE:
  case DT_OP_WHERE: case DT_OP_DROPOUT_BACKWARD:
    return dt_rule_pointwise;
  case DT_OP_MATMUL: case DT_OP_MM: case DT_OP_BMM: case DT_OP_ADDMM:
    return dt_rule_matmul;
  case DT_OP_SUM: case DT_OP_MEAN: case DT_OP_PROD: case DT_OP_AMAX: case DT_OP_AMIN: case DT_OP_MAX:
  case DT_OP_MIN: case DT_OP_ARGMAX: case DT_OP_ARGMIN: case DT_OP_VAR: case DT_OP_STD: case DT_OP_NORM:
  case DT_OP_SOFTMAX: case DT_OP_LOG_SOFTMAX:
    return dt_rule_reduce;
  case DT_OP_VIEW: case DT_OP_RESHAPE: case DT_OP_FLATTEN: case DT_OP_TRANSPOSE: case DT_OP_PERMUTE:
  case DT_OP_UNSQUEEZE: case DT_OP_SQUEEZE: case DT_OP_EXPAND: case DT_OP_NARROW: case DT_OP_SELECT: case DT_OP_SLICE:
    return dt_rule_view;
  case DT_OP_LAYER_NORM: case DT_OP_RMS_NORM: case DT_OP_SDPA:
    return dt_rule_nn;
  case DT_OP_CAT: case DT_OP_STACK: return dt_rule_join;
  default:
    return NULL;
  }
}
