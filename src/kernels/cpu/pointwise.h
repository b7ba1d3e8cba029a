/* Shared by the pointwise kernels, their shape rules and their bindings: the PyTorch
 * result-type rules, op-private argument flags, and the runner that converts operands
 * to the compute dtype and loops over them with dt_iter. */
#ifndef DT_KERNELS_CPU_POINTWISE_H
#define DT_KERNELS_CPU_POINTWISE_H

#include "ops/op_args.h"
#include "tensor/iter.h"

/* Flags private to the pointwise ops (high bits: the generic DT_ARG_* use the low ones). */
#define DT_ARG_ALPHA_FLOAT (1 << 20) /* add/sub: alpha (scalar[1]) is a non-integer Lua number */
#define DT_ARG_WHERE_A_INT (1 << 21) /* where: scalar a (in[1] == NULL) is an integer, in ints[0] */
#define DT_ARG_WHERE_B_INT (1 << 22) /* where: scalar b (in[2] == NULL) is an integer, in ints[1] */
#define DT_ARG_GELU_TANH 1           /* gelu: tanh approximation */

/* ---- result types (torch.result_type) --------------------------------------------------- */
/* Operands fall in three tiers: dimensioned tensors, 0-d tensors, Lua numbers ("wrapped
 * numbers": an integer counts as int64, a float as float32).  A lower tier only changes
 * the result when it is of a higher category (bool < integer < floating). */
typedef struct pw_rtype {
  int dim, zero, wrapped; /* dt_dtype, or -1 when no operand of that tier */
} pw_rtype;

void pw_rtype_init(pw_rtype *r);
void pw_rtype_tensor(pw_rtype *r, const dt_tensor *t);
void pw_rtype_number(pw_rtype *r, int is_int);
dt_dtype pw_rtype_result(const pw_rtype *r);

/* The common dtype of a binary op's operands (in[0], in[1] or the scalar). */
dt_dtype pw_binary_type(const dt_op_args *a);
/* clamp: the tensor with its given bounds. */
dt_dtype pw_clamp_type(const dt_op_args *a);
/* where: a and b (tensors or scalars). */
dt_dtype pw_where_type(const dt_op_args *a);
/* The dtype loops run in: float32 for f32/bf16/f16, float64, int64 for integers and bool. */
dt_dtype pw_compute(dt_dtype t);
/* torch.can_cast: no float into an integer, nothing but bool into bool. */
int pw_can_cast(dt_dtype from, dt_dtype to);

/* ---- the loop runner ---------------------------------------------------------------------- */
typedef struct pw_ctx {
  double s, alpha; /* scalar operand, alpha / clamp bounds (float compute) */
  int64_t si, alphai;
  double lo, hi;
  int64_t loi, hii;
  int has_lo, has_hi;
  int err; /* set by loops: PW_ERR_* */
} pw_ctx;

#define PW_ERR_ZERO_DIV 1
#define PW_ERR_NEG_POW 2

/* Runs fn over (out, in[0..nin-1]): each input whose dtype is not in_dt[k] is converted
 * first (rounded through the operands' common dtype when that is bf16/f16), and out is
 * written through a temporary of out_dt when its dtype differs (bf16 and f16 therefore
 * compute in f32 and round once).  Reports ctx->err as an error of op. */
int pw_run(dt_tensor *out, dt_dtype out_dt, dt_dtype common, int nin, dt_tensor *const *in, const dt_dtype *in_dt,
           dt_iter_inner_fn fn, pw_ctx *ctx, const char *op);

/* t reads the memory out writes, but not element for element (a:add_(a:t())): in-place
 * kernels must then read a copy. */
int pw_partial_overlap(const dt_tensor *out, const dt_tensor *t);

/* Binary arithmetic/comparison kernel shared with add_ / mul_ (op: DT_OP_ADD ...). */
int pw_binary(const dt_op_args *a, dt_tensor *out, int op);

#endif
