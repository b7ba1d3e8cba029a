/* Shared by the CPU pointwise kernels: the compute dtypes and the runner that converts
 * operands to the compute dtype and loops over them with dt_iter.  Result types and the
 * pointwise ops' argument flags are device-neutral: ops/result_type.h, ops/op_args.h. */
#ifndef DT_KERNELS_CPU_POINTWISE_H
#define DT_KERNELS_CPU_POINTWISE_H

#include "ops/result_type.h"
#include "tensor/iter.h"

/* ---- compute dtypes --------------------------------------------------------------------- */
/* The dtype loops run in: float32 for f32/bf16/f16, float64, int64 for integers and bool. */
dt_dtype pw_compute(dt_dtype t);

/* ---- the loop runner ---------------------------------------------------------------------- */
typedef struct pw_ctx {
  double s, alpha; /* scalar operand, alpha / clamp bounds (float compute) */
  int64_t si, alphai;
  double lo, hi;
  int64_t loi, hii;
  int has_lo, has_hi;
  int err; /* set by loops: PW_ERR_* */
  /* set by pw_run: the operands are flat and together outgrow half the last-level cache, and
   * out is no input; loops that honour it write out with non-temporal stores (no read of
   * each output line first, and the inputs stay cached) */
  int stream;
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
