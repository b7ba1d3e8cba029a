/* Autocast: which ops run in the low dtype, which in float32, and the casts (autocast.h). */
#include "call/autocast.h"

#include "base/error.h"
#include "call/call.h"

/* The classification is a per-family rule with exceptions, after torch's autocast op lists
 * (aten/src/ATen/autocast_mode.cpp): the LINALG family (matmul, mm, bmm, addmm) runs in the low
 * dtype, as does sdpa (both on torch's CPU lower_precision_fp list); the rows below run in
 * float32 (torch's CPU fp32 list: prod, cross_entropy; its CUDA fp32 lists, which our kernels
 * stand in for too: the reductions and normalisations whose accuracy bf16/f16 would spoil);
 * every other row runs as it is, in its inputs' promoted dtype.  tests/spec/amp_spec.lua walks
 * every row of the op table and checks this answer. */
static const dt_autocast_class EXCEPTIONS[DT_OP_COUNT] = {
    [DT_OP_SDPA] = DT_AUTOCAST_LOWER,
    [DT_OP_SOFTMAX] = DT_AUTOCAST_FP32, [DT_OP_LOG_SOFTMAX] = DT_AUTOCAST_FP32,
    [DT_OP_LAYER_NORM] = DT_AUTOCAST_FP32, [DT_OP_RMS_NORM] = DT_AUTOCAST_FP32,
    [DT_OP_CROSS_ENTROPY] = DT_AUTOCAST_FP32, [DT_OP_SUM] = DT_AUTOCAST_FP32,
    [DT_OP_PROD] = DT_AUTOCAST_FP32, [DT_OP_NORM] = DT_AUTOCAST_FP32,
    [DT_OP_EXP] = DT_AUTOCAST_FP32, [DT_OP_LOG] = DT_AUTOCAST_FP32,
    [DT_OP_POW] = DT_AUTOCAST_FP32, [DT_OP_RSQRT] = DT_AUTOCAST_FP32,
    [DT_OP_CUMSUM] = DT_AUTOCAST_FP32, [DT_OP_CUMPROD] = DT_AUTOCAST_FP32, /* torch's fp32_set_opt_dtype */
};

dt_autocast_class dt_autocast_class_of(dt_op_id op) {
  if ((int)op < 0 || op >= DT_OP_COUNT) return DT_AUTOCAST_AS_IS;
  if (EXCEPTIONS[op] != DT_AUTOCAST_AS_IS) return EXCEPTIONS[op];
  return dt_op_get(op)->sharding == DT_SHARDING_LINALG ? DT_AUTOCAST_LOWER : DT_AUTOCAST_AS_IS;
}

const char *dt_autocast_class_name(dt_autocast_class c) {
  switch (c) {
  case DT_AUTOCAST_LOWER: return "lower";
  case DT_AUTOCAST_FP32: return "float32";
  default: return "as_is";
  }
}

/* the dtype input v is cast to, or v's own; float64 is never cast (torch: not eligible) */
static dt_dtype target(dt_autocast_class c, dt_dtype low, const dt_value *v) {
  dt_dtype t = dt_value_dtype(v);
  if (!dt_dtype_is_float(t) || t == DT_FLOAT64) return t;
  if (c == DT_AUTOCAST_LOWER) return low;
  return c == DT_AUTOCAST_FP32 && (t == DT_BFLOAT16 || t == DT_FLOAT16) ? DT_FLOAT32 : t;
}

void dt_autocast_release(dt_value *cast, int nin) {
  for (int i = 0; i < nin; i++)
    if (cast[i].local) dt_value_clear(&cast[i]);
}

int dt_autocast_inputs(dt_context *ctx, dt_op_id op, const dt_op_args *args, dt_value *const *in, int nin,
                       dt_value *cast, dt_value **use) {
  for (int i = 0; i < nin && i < DT_AUTOCAST_MAX_IN; i++) cast[i] = (dt_value){0}, use[i] = in[i];
  if (!ctx || !ctx->modes.autocast_dtype || nin > DT_AUTOCAST_MAX_IN) return DT_OK;
  dt_autocast_class c = dt_autocast_class_of(op);
  if (c == DT_AUTOCAST_AS_IS || (c == DT_AUTOCAST_FP32 && args->has_dtype)) return DT_OK; /* a dtype asked: kept */
  dt_dtype low = (dt_dtype)(ctx->modes.autocast_dtype - 1);
  for (int i = 0; i < nin; i++) {
    if (!in[i] || target(c, low, in[i]) == dt_value_dtype(in[i])) continue;
    dt_op_args a = {0};
    a.dtype = target(c, low, in[i]), a.has_dtype = 1;
    dt_value *out = &cast[i], *x = in[i];
    if (dt_call(ctx, DT_OP_TO, &a, &x, 1, &out) != DT_OK) {
      dt_autocast_release(cast, i);
      return DT_ERR;
    }
    use[i] = &cast[i];
  }
  return DT_OK;
}
