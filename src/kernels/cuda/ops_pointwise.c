/* The CUDA backend's elementwise rows: the arguments the CPU kernels read (promotion, scalar
 * operands, alpha, in-place overlap), turned into one launch of pointwise_kernel.cu's kernel. */
#include "kernels/cuda/desc.h"
#include "kernels/cuda/kernel_table.h"

#include "base/error.h"
#include "ops/result_type.h"

/* dtype the arithmetic runs in, as the CPU's pw_compute */
static int compute_of(dt_dtype t) { return t == DT_FLOAT64 ? DT_FLOAT64 : dt_dtype_is_float(t) ? DT_FLOAT32 : DT_INT64; }

static int64_t sat_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

/* the compute dtype is out's, or x's for a bool result (isnan isinf isfinite) */
static int unary(const dt_op_args *a, dt_tensor **out) {
  dt_dtype ct = out[0]->dtype == DT_BOOL ? a->in[0]->dtype : out[0]->dtype;
  dtc_pointwise p = {.op = a->op, .compute = compute_of(ct), .mode = DTC_TT, .flags = a->flags};
  dtc_tensor o = dtc_of(out[0]), x = dtc_broadcast(a->in[0], out[0]);
  return dtc_launch_pointwise(&p, &o, &x, NULL);
}

#define UNARY(name) \
  int dt_cuda_##name(const dt_op_args *a, dt_tensor **out) { return unary(a, out); }
UNARY(neg)
UNARY(abs)
UNARY(exp)
UNARY(log)
UNARY(sqrt)
UNARY(rsqrt)
UNARY(tanh)
UNARY(sigmoid)
UNARY(relu)
UNARY(gelu)
UNARY(silu)
UNARY(sin)
UNARY(cos)
UNARY(floor)
UNARY(ceil)
UNARY(trunc)
UNARY(sign)
UNARY(erf)
UNARY(isnan)
UNARY(isinf)
UNARY(isfinite)

static int binary(const dt_op_args *a, dt_tensor *out) {
  int op = a->op, compare = op >= DT_OP_EQ && op <= DT_OP_GE;
  dt_dtype rt = dt_result_type_binary(a);
  if (op == DT_OP_DIV && !dt_dtype_is_float(rt)) rt = DT_DEFAULT_FLOAT;
  int scalar = a->flags & DT_ARG_SCALAR, left = scalar && (a->flags & DT_ARG_SCALAR_LEFT);
  dtc_pointwise p = {.op = op, .compute = compute_of(rt), .mode = scalar ? (left ? DTC_ST : DTC_TS) : DTC_TT};
  p.s = a->scalar[0];
  p.si = (a->flags & DT_ARG_SCALAR_INT) ? a->ints[0] : sat_i64(a->scalar[0]);
  p.alpha = 1, p.alphai = 1;
  if (compare && scalar && dt_dtype_is_float(rt)) { /* the number rounds to the common dtype, as in torch */
    char buf[8];
    dt_store_f64(buf, rt, p.s);
    p.s = dt_load_f64(buf, rt);
  }
  if (op == DT_OP_ADD || op == DT_OP_SUB || op == DT_OP_ADD_) { /* sub is add with -alpha */
    p.alpha = a->nscalar >= 2 ? a->scalar[1] : 1;
    p.alphai = a->nscalar < 2 ? 1 : (a->flags & DT_ARG_ALPHA_INT) ? a->ints[1] : sat_i64(p.alpha);
    if (op == DT_OP_SUB) p.alpha = -p.alpha, p.alphai = (int64_t)(0 - (uint64_t)p.alphai);
    if (scalar && !left) { /* a scalar right operand absorbs alpha */
      p.s *= p.alpha, p.si = (int64_t)((uint64_t)p.si * (uint64_t)p.alphai);
      p.alpha = 1, p.alphai = 1;
    }
    p.op = DT_OP_ADD;
  }
  dt_tensor *b = scalar ? NULL : a->in[1], *copy = NULL;
  if (b && b->storage == out->storage && b != out) { /* in place, b overlapping self: read b's old values */
    copy = dt_tensor_clone(b);
    if (!copy) return dt_error_prefix("%s", a->name);
    b = copy;
  }
  dtc_tensor o = dtc_of(out), x = dtc_broadcast(a->in[0], out), y = b ? dtc_broadcast(b, out) : x;
  int rc = dtc_launch_pointwise(&p, &o, &x, b ? &y : NULL);
  dt_tensor_release(copy);
  return rc;
}

#define BINARY(name) \
  int dt_cuda_##name(const dt_op_args *a, dt_tensor **out) { return binary(a, out[0]); }
BINARY(add)
BINARY(sub)
BINARY(mul)
BINARY(div)
BINARY(eq)
BINARY(ne)
BINARY(lt)
BINARY(le)
BINARY(gt)
BINARY(ge)
BINARY(add_)
BINARY(mul_)

int dt_cuda_fill_(const dt_op_args *a, dt_tensor **out) {
  dtc_tensor o = dtc_of(out[0]);
  return dtc_launch_fill(&o, a->scalar[0], a->ints[0], (a->flags & DT_ARG_SCALAR_INT) != 0);
}

int dt_cuda_zero_(const dt_op_args *a, dt_tensor **out) {
  (void)a;
  dtc_tensor o = dtc_of(out[0]);
  return dtc_launch_fill(&o, 0, 0, 1);
}
