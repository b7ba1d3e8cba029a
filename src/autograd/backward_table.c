/* The backward rule of every op-table row, from the row's backward column: a row naming
 * `add` uses dt_backward_add (defined in backward_<family>.c); a missing definition fails the
 * link, so no named rule can be forgotten.  `none`: no gradient. */
#include "autograd/backward.h"

const dt_backward_def dt_backward_none = {0};

#define DT_OP(E, n, rule, nout, flags, sharding, backward, schema) extern const dt_backward_def dt_backward_##backward;
#include "ops/op_list.h"
#undef DT_OP

static const dt_backward_def *const table[DT_OP_COUNT] = {
#define DT_OP(E, n, rule, nout, flags, sharding, backward, schema) [DT_OP_##E] = &dt_backward_##backward,
#include "ops/op_list.h"
#undef DT_OP
};

const dt_backward_def *dt_backward_of(dt_op_id op) { return table[op]; }
