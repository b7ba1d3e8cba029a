/* The compute dtype and the operand-converting loop runner of the pointwise kernels. */
#include "kernels/cpu/pointwise.h"
#include "base/error.h"
#include "base/stream_copy.h"

dt_dtype pw_compute(dt_dtype t) {
  if (t == DT_FLOAT64) return DT_FLOAT64;
  return dt_dtype_is_float(t) ? DT_FLOAT32 : DT_INT64;
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

/* pw_ctx.stream: flat operands (no broadcast) past half the last-level cache, out none of them.
 * Measured on a 32 MiB cache (doc/performance.md): an add of 6 MiB or more (18 MiB of operands)
 * streams faster, one of 4 MiB or less runs faster with plain stores. */
static int stream_pays(const dt_iter *it, dt_tensor *const *ops) {
  size_t elsizes[DT_ITER_MAX_OPERANDS], bytes = 0;
  for (int k = 0; k < it->nops; k++) {
    if (k > 0 && ops[k]->storage == ops[0]->storage) return 0;
    elsizes[k] = dt_tensor_elsize(ops[k]);
    bytes += elsizes[k] * (size_t)dt_iter_numel(it);
  }
  return dt_iter_is_flat(it, elsizes) && bytes > dt_llc_bytes() / 2;
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
  ctx->stream = stream_pays(&it, ops);
  dt_iter_run_parallel(&it, fn, ctx);
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
