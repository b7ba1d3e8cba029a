/* The operator table: one row per op (op_list.h) with its schema, shape rule and flags.
 * Running an op is the kernels layer's: dt_op_call in kernels/local_op.h. */
#ifndef DT_OPS_OPS_H
#define DT_OPS_OPS_H

#include "ops/op_args.h"

#define DT_OPF_VIEW 1
#define DT_OPF_INPLACE 2
#define DT_OPF_FACTORY 4
#define DT_OPF_RANDOM 8 /* draws from the generator: on DTensors, the RNG tracker region (dist/rng.c) */

typedef struct dt_op_def {
  const char *name;
  const char *schema;
  int nout;
  int flags;
  dt_shape_fn shape;
  void *backward; /* autograd issue */
  void *sharding; /* sharding-dispatcher issue */
} dt_op_def;

const dt_op_def *dt_op_get(dt_op_id id);
/* Looks an op up by its Lua name; DT_ERR when unknown. */
int dt_op_find(const char *name, dt_op_id *id);

/* Declarations of every shape rule named by the table. */
#define DT_RULE(name) int dt_shape_##name(const dt_op_args *a, dt_meta *out);
#include "ops/rule_list.h"
#undef DT_RULE

#endif
