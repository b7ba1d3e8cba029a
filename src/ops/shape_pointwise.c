/* Shape rules of the pointwise ops: broadcasting, PyTorch type promotion, and the
 * argument checks whose errors name the op (a->name). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "ops/ops.h"
#include "ops/result_type.h"

static void meta_of(dt_meta *out, dt_dtype dtype, const dt_tensor *t) {
  out->dtype = dtype;
  out->ndim = t->ndim;
  memcpy(out->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

static int need_inputs(const dt_op_args *a, int n) {
  for (int i = 0; i < n; i++)
    if (i >= a->nin || !a->in[i]) return dt_error("%s: expected %d tensor operand(s)", a->name, n);
  return DT_OK;
}

int dt_shape_same(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 1) != DT_OK) return DT_ERR;
  meta_of(out, a->in[0]->dtype, a->in[0]);
  return DT_OK;
}

int dt_shape_cast(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 1) != DT_OK) return DT_ERR;
  if (!a->has_dtype) return dt_error("%s: a dtype is required", a->name);
  meta_of(out, a->dtype, a->in[0]);
  return DT_OK;
}

/* ---- unary ---- */
int dt_shape_unary(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 1) != DT_OK) return DT_ERR;
  dt_dtype t = a->in[0]->dtype;
  if (a->op == DT_OP_CLAMP) {
    if (!(a->flags & (DT_ARG_HAS_MIN | DT_ARG_HAS_MAX)))
      return dt_error("clamp: at least one of min and max must be given");
    t = dt_result_type_clamp(a);
    int is_int = a->flags & DT_ARG_SCALAR_INT;
    for (int k = 0; k < 2; k++)
      if ((a->flags & (k ? DT_ARG_HAS_MAX : DT_ARG_HAS_MIN)) &&
          dt_check_value_fits(a->name, t, is_int, a->ints[k], a->scalar[k]) != DT_OK)
        return DT_ERR;
  }
  if (t == DT_BOOL) {
    if (a->op == DT_OP_NEG)
      return dt_error("neg: negation, the `-` operator, on a bool tensor is not supported (use logical_not)");
    return dt_error("%s: not supported for bool tensors", a->name);
  }
  meta_of(out, t, a->in[0]);
  return DT_OK;
}

/* Integers and bool give float32; an explicit dtype (softmax's option) wins. */
int dt_shape_unary_float(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 1) != DT_OK) return DT_ERR;
  dt_dtype t = a->has_dtype ? a->dtype : a->in[0]->dtype;
  meta_of(out, dt_dtype_is_float(t) ? t : DT_DEFAULT_FLOAT, a->in[0]);
  return DT_OK;
}

static int same_shape(int na, const int64_t *sa, int nb, const int64_t *sb);

/* An in-place op's self must not have elements that share memory (an expanded view). */
static int no_overlap(const dt_op_args *a, const dt_tensor *self) {
  for (int i = 0; i < self->ndim; i++)
    if (self->stride[i] == 0 && self->shape[i] > 1)
      return dt_error("%s: cannot write in place into a tensor whose elements overlap (an expanded view); "
                      "clone() it first", a->name);
  return DT_OK;
}

/* Floating dtypes only, kept (hardtanh, leaky_relu: torch has no integer kernels for them). */
int dt_shape_unary_float_only(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 1) != DT_OK) return DT_ERR;
  dt_dtype t = a->in[0]->dtype;
  if (!dt_dtype_is_float(t)) return dt_error("%s: expects a floating-point tensor, got %s", a->name, dt_dtype_name(t));
  if (a->op == DT_OP_HARDTANH && a->scalar[0] > a->scalar[1])
    return dt_error("hardtanh: min_val (%g) must not exceed max_val (%g)", a->scalar[0], a->scalar[1]);
  meta_of(out, t, a->in[0]);
  return DT_OK;
}

/* masked_fill(x, mask, v): x's shape and dtype; the mask broadcasts to x, v fits x's dtype.
 * masked_fill_ writes x (no overlapping elements). */
int dt_shape_masked_fill(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 2) != DT_OK) return DT_ERR;
  const dt_tensor *x = a->in[0], *m = a->in[1];
  if (a->op == DT_OP_MASKED_FILL_ && no_overlap(a, x) != DT_OK) return DT_ERR;
  if (m->dtype != DT_BOOL)
    return dt_error("%s: mask must be a bool tensor, got %s (compare it, e.g. t:gt(0))", a->name, dt_dtype_name(m->dtype));
  dt_meta b;
  char s1[160], s2[160];
  if (dt_broadcast_shapes(a->name, x->ndim, x->shape, m->ndim, m->shape, &b.ndim, b.shape) != DT_OK ||
      !same_shape(b.ndim, b.shape, x->ndim, x->shape))
    return dt_error("%s: mask of shape %s does not broadcast to the tensor's shape %s", a->name,
                    dt_format_shape(s1, sizeof s1, m->ndim, m->shape), dt_format_shape(s2, sizeof s2, x->ndim, x->shape));
  if (dt_check_value_fits(a->name, x->dtype, a->flags & DT_ARG_SCALAR_INT, a->ints[0], a->scalar[0]) != DT_OK)
    return DT_ERR;
  meta_of(out, x->dtype, x);
  return DT_OK;
}

/* equal/allclose: one answer, a 0-d bool (their DTensor forms are composed in Lua, agreed
 * over the world); allclose checks its tolerances and broadcasts (the kernel). */
int dt_shape_compare_all(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 2) != DT_OK) return DT_ERR;
  if (a->op == DT_OP_ALLCLOSE && (!(a->scalar[0] >= 0) || !(a->scalar[1] >= 0)))
    return dt_error("allclose: rtol and atol must be non-negative, got rtol=%g, atol=%g", a->scalar[0], a->scalar[1]);
  *out = (dt_meta){.dtype = DT_BOOL, .ndim = 0};
  return DT_OK;
}

/* ---- binary ---- */
/* Output shape and the checks every binary op shares; rt is the common dtype.  Comparisons
 * compute in int64, so any integer is fine there. */
static int binary_check(const dt_op_args *a, dt_dtype rt, int compare, dt_meta *out) {
  int scalar = a->flags & DT_ARG_SCALAR;
  if (need_inputs(a, scalar ? 1 : 2) != DT_OK) return DT_ERR;
  const dt_tensor *x = a->in[0];
  if (scalar) {
    meta_of(out, rt, x);
  } else {
    const dt_tensor *y = a->in[1];
    if (dt_broadcast_shapes(a->name, x->ndim, x->shape, y->ndim, y->shape, &out->ndim, out->shape) != DT_OK)
      return DT_ERR;
    out->dtype = rt;
  }
  if (rt == DT_BOOL && (a->op == DT_OP_SUB || a->op == DT_OP_POW || a->op == DT_OP_REMAINDER))
    return dt_error("%s: not supported for two bool operands", a->name);
  if ((a->flags & DT_ARG_ALPHA_FLOAT) && !dt_dtype_is_float(rt))
    return dt_error("%s: for integral input tensors, argument alpha must not be a floating point number", a->name);
  if (scalar && !(a->flags & DT_ARG_SCALAR_LEFT) && !dt_dtype_is_float(rt) && a->ints[0] < 0 && a->op == DT_OP_POW)
    return dt_error("pow: Integers to negative integer powers are not allowed");
  if (scalar && (a->flags & DT_ARG_SCALAR_INT) && !compare &&
      dt_check_value_fits(a->name, rt, 1, a->ints[0], a->scalar[0]) != DT_OK)
    return DT_ERR;
  if ((a->flags & DT_ARG_ALPHA_INT) && dt_check_value_fits(a->name, rt, 1, a->ints[1], a->scalar[1]) != DT_OK)
    return DT_ERR; /* alpha converts to the result's dtype, as in torch */
  return DT_OK;
}

int dt_shape_binary(const dt_op_args *a, dt_meta *out) { return binary_check(a, dt_result_type_binary(a), 0, out); }

/* True division: integer and bool results become float32. */
int dt_shape_binary_float(const dt_op_args *a, dt_meta *out) {
  dt_dtype rt = dt_result_type_binary(a);
  return binary_check(a, dt_dtype_is_float(rt) ? rt : DT_DEFAULT_FLOAT, 0, out);
}

int dt_shape_compare(const dt_op_args *a, dt_meta *out) {
  if (binary_check(a, dt_result_type_binary(a), 1, out) != DT_OK) return DT_ERR;
  out->dtype = DT_BOOL;
  return DT_OK;
}

/* ---- in place: copy_ fill_ zero_ add_ mul_ (the output is in[0]) ---- */
static int same_shape(int na, const int64_t *sa, int nb, const int64_t *sb) {
  return na == nb && memcmp(sa, sb, sizeof(int64_t) * (size_t)na) == 0;
}

int dt_shape_inplace(const dt_op_args *a, dt_meta *out) {
  if (need_inputs(a, 1) != DT_OK) return DT_ERR;
  const dt_tensor *self = a->in[0];
  char b1[160], b2[160];
  if (no_overlap(a, self) != DT_OK) return DT_ERR;
  meta_of(out, self->dtype, self);
  if (a->op == DT_OP_ZERO_) return DT_OK;
  if (a->op == DT_OP_FILL_) return dt_check_value_fits(a->name, self->dtype, a->flags & DT_ARG_SCALAR_INT, a->ints[0], a->scalar[0]);
  if (a->op == DT_OP_COPY_) {
    if (need_inputs(a, 2) != DT_OK) return DT_ERR;
    const dt_tensor *src = a->in[1];
    if (dt_broadcast_shapes(a->name, self->ndim, self->shape, src->ndim, src->shape, &out->ndim, out->shape) != DT_OK)
      return DT_ERR;
  } else { /* add_ mul_ */
    dt_dtype rt = dt_result_type_binary(a);
    if (binary_check(a, rt, 0, out) != DT_OK) return DT_ERR;
    if (!dt_dtype_can_cast(rt, self->dtype))
      return dt_error("%s: result type %s can't be cast to the desired output type %s", a->name, dt_dtype_name(rt),
                      dt_dtype_name(self->dtype));
  }
  if (!same_shape(out->ndim, out->shape, self->ndim, self->shape))
    return dt_error("%s: output with shape %s doesn't match the broadcast shape %s", a->name,
                    dt_format_shape(b1, sizeof b1, self->ndim, self->shape),
                    dt_format_shape(b2, sizeof b2, out->ndim, out->shape));
  meta_of(out, self->dtype, self);
  return DT_OK;
}

/* ---- where(cond, a, b): a / b may be numbers (NULL operands) ---- */
int dt_shape_where(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 3 || !a->in[0]) return dt_error("where: expected a condition tensor and two values");
  const dt_tensor *cond = a->in[0];
  if (cond->dtype != DT_BOOL)
    return dt_error("where: condition must be a bool tensor, got %s (compare it, e.g. t:ne(0))",
                    dt_dtype_name(cond->dtype));
  out->ndim = cond->ndim;
  memcpy(out->shape, cond->shape, sizeof(int64_t) * (size_t)cond->ndim);
  for (int k = 1; k <= 2; k++) {
    const dt_tensor *t = a->in[k];
    if (!t) continue;
    int64_t sh[DT_MAX_DIMS];
    int nd;
    if (dt_broadcast_shapes("where", out->ndim, out->shape, t->ndim, t->shape, &nd, sh) != DT_OK) return DT_ERR;
    out->ndim = nd;
    memcpy(out->shape, sh, sizeof(int64_t) * (size_t)nd);
  }
  out->dtype = dt_result_type_where(a);
  for (int k = 0; k < 2; k++)
    if (!a->in[k + 1] &&
        dt_check_value_fits(a->name, out->dtype, a->flags & (k ? DT_ARG_WHERE_B_INT : DT_ARG_WHERE_A_INT), a->ints[k], a->scalar[k]) != DT_OK)
      return DT_ERR;
  return DT_OK;
}
