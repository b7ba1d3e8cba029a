/* Shape rules of the math family (op_list.h's last block): rounding with decimals, the
 * floating-point tests, lerp and addcmul/addcdiv (three operands broadcast), and the
 * reductions and scans whose dtypes differ from the reductions' rules. */
#include <string.h>

#include "base/error.h"
#include "ops/ops.h"
#include "ops/result_type.h"

static int need_inputs(const dt_op_args *a, int n) {
  for (int i = 0; i < n; i++)
    if (i >= a->nin || !a->in[i]) return dt_error("%s: expected %d tensor operand(s)", a->name, n);
  return DT_OK;
}

/* round(x, decimals): unary's checks; decimals scale floating values only (as torch). */
int dt_shape_round(const dt_op_args *a, dt_meta *out) {
  if (dt_shape_unary(a, out) != DT_OK) return DT_ERR;
  if (a->nints > 0 && a->ints[0] != 0 && !dt_dtype_is_float(out->dtype))
    return dt_error("round: decimals (%lld) need a floating-point tensor, got %s", (long long)a->ints[0],
                    dt_dtype_name(out->dtype));
  return DT_OK;
}

/* isnan, isinf, isfinite: a bool of the input's shape, any dtype. */
int dt_shape_unary_bool(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 1) != DT_OK) return DT_ERR;
  out->dtype = DT_BOOL;
  out->ndim = a->in[0]->ndim;
  memcpy(out->shape, a->in[0]->shape, sizeof(int64_t) * (size_t)out->ndim);
  return DT_OK;
}

/* The broadcast shape of the tensor operands in[0..n-1] into out. */
static int broadcast_all(const dt_op_args *a, int n, dt_meta *out) {
  out->ndim = a->in[0]->ndim;
  memcpy(out->shape, a->in[0]->shape, sizeof(int64_t) * (size_t)out->ndim);
  for (int k = 1; k < n; k++) {
    int64_t sh[DT_MAX_DIMS];
    int nd;
    if (dt_broadcast_shapes(a->name, out->ndim, out->shape, a->in[k]->ndim, a->in[k]->shape, &nd, sh) != DT_OK)
      return DT_ERR;
    out->ndim = nd;
    memcpy(out->shape, sh, sizeof(int64_t) * (size_t)nd);
  }
  return DT_OK;
}

/* lerp(start, end, weight): floating operands of one dtype (torch's check), broadcast. */
int dt_shape_lerp(const dt_op_args *a, dt_meta *out) {
  int n = (a->flags & DT_ARG_SCALAR) ? 2 : 3;
  static const char *const names[] = {"start", "end", "weight"};
  if (need_inputs(a, n) != DT_OK) return DT_ERR;
  dt_dtype t = a->in[0]->dtype;
  if (!dt_dtype_is_float(t)) return dt_error("lerp: expects floating-point tensors, got %s for start", dt_dtype_name(t));
  for (int k = 1; k < n; k++)
    if (a->in[k]->dtype != t)
      return dt_error("lerp: expected dtype %s for %s but got dtype %s", dt_dtype_name(t), names[k],
                      dt_dtype_name(a->in[k]->dtype));
  if (broadcast_all(a, n, out) != DT_OK) return DT_ERR;
  out->dtype = t;
  return DT_OK;
}

/* addcmul/addcdiv(self, t1, t2, value): the three promote as torch.result_type; value fits the
 * result (no float value for integer tensors); addcdiv refuses integer division. */
int dt_shape_addcmul(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 3) != DT_OK) return DT_ERR;
  dt_result_type r;
  dt_result_type_init(&r);
  for (int k = 0; k < 3; k++) dt_result_type_tensor(&r, a->in[k]);
  dt_dtype t = dt_result_type_get(&r);
  if (t == DT_BOOL) return dt_error("%s: not supported for bool tensors", a->name);
  if (a->op == DT_OP_ADDCDIV && !dt_dtype_is_float(t))
    return dt_error("addcdiv: integer division is not supported (tensors of %s); use floating-point tensors",
                    dt_dtype_name(t));
  if (!dt_dtype_is_float(t) && !(a->flags & DT_ARG_SCALAR_INT))
    return dt_error("%s: for integral input tensors, value must not be a floating point number, got %g", a->name,
                    a->scalar[0]);
  if (dt_check_value_fits(a->name, t, a->flags & DT_ARG_SCALAR_INT, a->ints[0], a->scalar[0]) != DT_OK) return DT_ERR;
  if (broadcast_all(a, 3, out) != DT_OK) return DT_ERR;
  out->dtype = t;
  return DT_OK;
}

/* logsumexp: the reduction's shape; integers and bool give float32 (torch's promotion). */
int dt_shape_reduce_to_float(const dt_op_args *a, dt_meta *out) {
  dt_op_args b = *a;
  b.has_dtype = 0;
  if (dt_shape_reduce(&b, out) != DT_OK) return DT_ERR;
  out->dtype = dt_dtype_is_float(a->in[0]->dtype) ? a->in[0]->dtype : DT_DEFAULT_FLOAT;
  return DT_OK;
}

/* all, any: the reduction's shape, a bool. */
int dt_shape_reduce_bool(const dt_op_args *a, dt_meta *out) {
  dt_op_args b = *a;
  b.has_dtype = 0;
  if (dt_shape_reduce(&b, out) != DT_OK) return DT_ERR;
  out->dtype = DT_BOOL;
  return DT_OK;
}

/* cumsum, cumprod along ints[0]: the input's shape; integers and bool accumulate in int64
 * unless a dtype is given (torch's rule). */
int dt_shape_scan(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 1) != DT_OK) return DT_ERR;
  const dt_tensor *x = a->in[0];
  int64_t d = a->ints[0];
  if (a->nints != 1 || !(d >= 0 && (d < x->ndim || (x->ndim == 0 && d == 0))))
    return dt_error("%s: dim %lld out of range for a %d-d tensor", a->name, (long long)d + 1, x->ndim);
  out->dtype = a->has_dtype ? a->dtype : dt_dtype_is_float(x->dtype) ? x->dtype : DT_INT64;
  if (out->dtype == DT_BOOL) return dt_error("%s: a bool result is not supported (dtype)", a->name);
  out->ndim = x->ndim;
  memcpy(out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  return DT_OK;
}

/* var_mean: var's shape and dtype, twice. */
int dt_shape_var_mean(const dt_op_args *a, dt_meta *out) {
  if (dt_shape_reduce_float(a, out) != DT_OK) return DT_ERR;
  out[1] = out[0];
  return DT_OK;
}
