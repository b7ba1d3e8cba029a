/* The operator table and the front door every op call goes through. */
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
  dt_kernel_fn kernel[DT_NDEVICES];
  void *backward; /* autograd issue */
  void *sharding; /* sharding-dispatcher issue */
} dt_op_def;

const dt_op_def *dt_op_get(dt_op_id id);
/* Looks an op up by its Lua name; DT_ERR when unknown. */
int dt_op_find(const char *name, dt_op_id *id);

/* Runs op on CPU/CUDA by the device of its inputs: shape rule, allocation, kernel.
 * Sets a->name.  On success out[0..nout-1] hold new references. */
int dt_op_call(dt_op_id id, dt_op_args *a, dt_tensor **out);

/* Declarations of every kernel and shape rule named by the table. */
#define DT_OP(E, name, rule, nout, flags, schema) int dt_cpu_##name(const dt_op_args *a, dt_tensor **out);
#include "ops/op_list.h"
#undef DT_OP
#define DT_RULE(name) int dt_shape_##name(const dt_op_args *a, dt_meta *out);
#include "ops/rule_list.h"
#undef DT_RULE

#endif
