/* The op ids: one per row of the operator table (ops/op_list.h), in row order. */
#ifndef DT_OPS_OP_ID_H
#define DT_OPS_OP_ID_H

typedef enum dt_op_id {
#define DT_OP(E, name, rule, nout, flags, sharding, backward, schema) DT_OP_##E,
#include "ops/op_list.h"
#undef DT_OP
  DT_OP_COUNT
} dt_op_id;

#endif
