/* The operator table: one row per op (op_list.h) with its schema, shape rule and flags.
 * Running an op is the kernels layer's: dt_op_call in kernels/local_op.h. */
#ifndef DT_OPS_OPS_H
#define DT_OPS_OPS_H

#include "base/export.h"

#include "ops/op_args.h"

#define DT_OPF_VIEW 1
#define DT_OPF_INPLACE 2
#define DT_OPF_FACTORY 4
#define DT_OPF_RANDOM 8 /* draws from the generator: on DTensors, the RNG tracker region (dist/rng.c) */
#define DT_OPF_CHECK 16 /* validates its input's values (an error on bad ones): a graph keeps it though nothing reads it */

/* Which sharding rule the dispatcher asks for an op's strategies on DTensors: the rule
 * functions are the distributed layer's, in a table indexed by this enum. */
typedef enum dt_sharding_family {
#define DT_SHARDING(F, name) DT_SHARDING_##F,
#include "ops/sharding_families.h"
#undef DT_SHARDING
  DT_SHARDING_COUNT
} dt_sharding_family;

typedef struct dt_op_def {
  const char *name;
  const char *schema;
  int nout;
  int flags;
  dt_shape_fn shape;
  dt_sharding_family sharding;
  int differentiable; /* the row names a backward rule (src/autograd/backward_table.c holds them) */
} dt_op_def;

DT_API const dt_op_def *dt_op_get(dt_op_id id);
/* Runs op's shape rule on a (a->name set) and checks each output shape (sizes
 * non-negative, element count within DT_MAX_NUMEL): the one place every op's output shapes
 * pass, on local tensors and on DTensors' global metadata.  Call it, not op->shape. */
DT_API int dt_op_shape(const dt_op_def *op, const dt_op_args *a, dt_meta *out);
/* Looks an op up by its Lua name; DT_ERR when unknown. */
DT_API int dt_op_find(const char *name, dt_op_id *id);
/* "pointwise", "local_only", ... */
DT_API const char *dt_sharding_family_name(dt_sharding_family f);

/* Declarations of every shape rule named by the table. */
#define DT_RULE(name) int dt_shape_##name(const dt_op_args *a, dt_meta *out);
#include "ops/rule_list.h"
#undef DT_RULE

#endif
