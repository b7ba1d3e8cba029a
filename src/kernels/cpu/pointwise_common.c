/* Result types and the operand-converting loop runner of the pointwise kernels. */
#include "kernels/cpu/pointwise.h"
#include "base/error.h"

void pw_rtype_init(pw_rtype *r) { r->dim = r->zero = r->wrapped = -1; }

static int promote_opt(int a, int b) { return a < 0 ? b : b < 0 ? a : (int)dt_dtype_promote(a, b); }

void pw_rtype_tensor(pw_rtype *r, const dt_tensor *t) {
  if (t->ndim > 0) r->dim = promote_opt(r->dim, t->dtype);
  else r->zero = promote_opt(r->zero, t->dtype);
}

void pw_rtype_number(pw_rtype *r, int is_int) {
  r->wrapped = promote_opt(r->wrapped, is_int ? DT_INT64 : DT_DEFAULT_FLOAT);
}

/* c10's combine_categories: the higher tier wins unless the lower one is of a higher category. */
static int combine(int hi, int lo) {
  if (hi < 0) return lo;
  if (lo < 0 || dt_dtype_is_float(hi)) return hi;
  if (hi == DT_BOOL || dt_dtype_is_float(lo)) return dt_dtype_promote(hi, lo);
  return hi;
}

dt_dtype pw_rtype_result(const pw_rtype *r) {
  int t = combine(r->dim, combine(r->zero, r->wrapped));
  return t < 0 ? DT_DEFAULT_FLOAT : (dt_dtype)t;
}

dt_dtype pw_binary_type(const dt_op_args *a) {
  pw_rtype r;
  pw_rtype_init(&r);
  pw_rtype_tensor(&r, a->in[0]);
  if (a->flags & DT_ARG_SCALAR) pw_rtype_number(&r, a->flags & DT_ARG_SCALAR_INT);
  else pw_rtype_tensor(&r, a->in[1]);
  return pw_rtype_result(&r);
}

dt_dtype pw_clamp_type(const dt_op_args *a) {
  pw_rtype r;
  pw_rtype_init(&r);
  pw_rtype_tensor(&r, a->in[0]);
  if (a->flags & (DT_ARG_HAS_MIN | DT_ARG_HAS_MAX)) pw_rtype_number(&r, a->flags & DT_ARG_SCALAR_INT);
  return pw_rtype_result(&r);
}

dt_dtype pw_where_type(const dt_op_args *a) {
  pw_rtype r;
  pw_rtype_init(&r);
  if (a->in[1]) pw_rtype_tensor(&r, a->in[1]);
  else pw_rtype_number(&r, a->flags & DT_ARG_WHERE_A_INT);
  if (a->in[2]) pw_rtype_tensor(&r, a->in[2]);
  else pw_rtype_number(&r, a->flags & DT_ARG_WHERE_B_INT);
  return pw_rtype_result(&r);
}

dt_dtype pw_compute(dt_dtype t) {
  if (t == DT_FLOAT64) return DT_FLOAT64;
  return dt_dtype_is_float(t) ? DT_FLOAT32 : DT_INT64;
}

int pw_can_cast(dt_dtype from, dt_dtype to) {
  if (dt_dtype_is_float(from) && !dt_dtype_is_float(to)) return 0;
  if (from != DT_BOOL && to == DT_BOOL) return 0;
  return 1;
}

int pw_partial_overlap(const dt_tensor *out, const dt_tensor *t) {
  if (t->storage != out->storage) return 0;
  if (t->offset != out->offset || t->ndim != out->ndim) return 1;
  for (int i = 0; i < t->ndim; i++)
    if (t->stride[i] != out->stride[i] || t->shape[i] != out->shape[i]) return 1;
  return 0;
}

/* An operand of another dtype than a bf16/f16 common dtype (a float32 0-d tensor) takes
 * the value it has in that dtype first, as torch casts operands to the common dtype. */
static int round_first(const dt_tensor *t, dt_dtype common, dt_dtype d) {
  return (common == DT_BFLOAT16 || common == DT_FLOAT16) && t->dtype != common && d != DT_BOOL;
}

/* t in dtype d (see round_first). */
static dt_tensor *convert(dt_tensor *t, dt_dtype common, dt_dtype d) {
  if (!round_first(t, common, d)) return dt_tensor_to_dtype(t, d);
  dt_tensor *r = dt_tensor_to_dtype(t, common);
  if (!r) return NULL;
  dt_tensor *c = dt_tensor_to_dtype(r, d);
  dt_tensor_release(r);
  return c;
}

int pw_run(dt_tensor *out, dt_dtype out_dt, dt_dtype common, int nin, dt_tensor *const *in, const dt_dtype *in_dt,
           dt_iter_inner_fn fn, pw_ctx *ctx, const char *op) {
  dt_tensor *ops[DT_ITER_MAX_OPERANDS] = {0};
  int rc = DT_ERR, owned[DT_ITER_MAX_OPERANDS] = {0}, via_tmp = out->dtype != out_dt;
  for (int k = 0; k < nin; k++) {
    ops[k + 1] = in[k];
    if (in[k]->dtype != in_dt[k] || round_first(in[k], common, in_dt[k])) {
      ops[k + 1] = convert(in[k], common, in_dt[k]);
      if (!ops[k + 1]) {
        dt_error_prefix("%s", op);
        goto done;
      }
      owned[k + 1] = 1;
    } else if (pw_partial_overlap(out, in[k])) {
      via_tmp = 1; /* writing out directly would clobber inputs not yet read */
    }
  }
  ops[0] = out;
  if (via_tmp) {
    ops[0] = dt_tensor_empty(out_dt, out->ndim, out->shape, dt_tensor_device(out));
    if (!ops[0]) {
      dt_error_prefix("%s", op);
      goto done;
    }
    owned[0] = 1;
  }
  dt_iter it;
  if (dt_iter_init(&it, nin + 1, ops, out->ndim, out->shape, op) != DT_OK) goto done;
  ctx->err = 0;
  dt_iter_run(&it, fn, ctx);
  if (ctx->err == PW_ERR_ZERO_DIV) {
    dt_error("%s: integer division by zero", op);
    goto done;
  }
  if (ctx->err == PW_ERR_NEG_POW) {
    dt_error("%s: Integers to negative integer powers are not allowed", op);
    goto done;
  }
  if (owned[0] && dt_tensor_copy_(out, ops[0], op) != DT_OK) goto done;
  rc = DT_OK;
done:
  for (int k = 0; k <= nin; k++)
    if (owned[k]) dt_tensor_release(ops[k]);
  return rc;
}
