#include "ops/ops.h"
#include "base/error.h"

#include <string.h>

static const dt_op_def op_table[DT_OP_COUNT] = {
#define DT_OP(E, n, rule, nout_, flags_, schema_) \
  [DT_OP_##E] = {.name = #n, .schema = schema_, .nout = nout_, .flags = flags_, .shape = dt_shape_##rule},
#include "ops/op_list.h"
#undef DT_OP
};

const dt_op_def *dt_op_get(dt_op_id id) { return &op_table[id]; }

int dt_op_find(const char *name, dt_op_id *id) {
  for (int i = 0; i < DT_OP_COUNT; i++)
    if (strcmp(op_table[i].name, name) == 0) return *id = (dt_op_id)i, DT_OK;
  return dt_error("unknown op '%s'", name);
}
