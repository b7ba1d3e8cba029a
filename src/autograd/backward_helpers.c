/* The ops backward rules are written with (backward.h): thin calls through the front door. */
#include "autograd/backward.h"

#include <string.h>

#include "autograd/values.h"
#include "base/error.h"

int dt_bw_calln(dt_bw *b, dt_op_id op, dt_op_args *a, const dt_value *const *in, int nin, dt_value *out) {
  dt_value *o = out;
  return b->ctx->call(b->ctx, op, a, (dt_value *const *)in, nin, &o);
}

int dt_bw_call(dt_bw *b, dt_op_id op, dt_op_args *a, const dt_value *x, const dt_value *y, dt_value *out) {
  const dt_value *in[2] = {x, y};
  return dt_bw_calln(b, op, a, in, y ? 2 : 1, out);
}

static int binary(dt_bw *b, dt_op_id op, const dt_value *x, const dt_value *y, dt_value *out) {
  dt_op_args a = dt_bw_args();
  return dt_bw_call(b, op, &a, x, y, out);
}
int dt_bw_add(dt_bw *b, const dt_value *x, const dt_value *y, dt_value *out) { return binary(b, DT_OP_ADD, x, y, out); }
int dt_bw_sub(dt_bw *b, const dt_value *x, const dt_value *y, dt_value *out) { return binary(b, DT_OP_SUB, x, y, out); }
int dt_bw_mul(dt_bw *b, const dt_value *x, const dt_value *y, dt_value *out) { return binary(b, DT_OP_MUL, x, y, out); }
int dt_bw_div(dt_bw *b, const dt_value *x, const dt_value *y, dt_value *out) { return binary(b, DT_OP_DIV, x, y, out); }

static int with_scalar(dt_bw *b, dt_op_id op, const dt_value *x, double s, dt_value *out) {
  dt_op_args a = dt_bw_args();
  a.flags = DT_ARG_SCALAR, a.scalar[0] = s, a.nscalar = 1;
  return dt_bw_call(b, op, &a, x, NULL, out);
}
int dt_bw_mul_scalar(dt_bw *b, const dt_value *x, double s, dt_value *out) { return with_scalar(b, DT_OP_MUL, x, s, out); }
int dt_bw_add_scalar(dt_bw *b, const dt_value *x, double s, dt_value *out) { return with_scalar(b, DT_OP_ADD, x, s, out); }

int dt_bw_unary(dt_bw *b, dt_op_id op, const dt_value *x, dt_value *out) {
  dt_op_args a = dt_bw_args();
  return dt_bw_call(b, op, &a, x, NULL, out);
}
int dt_bw_neg(dt_bw *b, const dt_value *x, dt_value *out) { return dt_bw_unary(b, DT_OP_NEG, x, out); }

int dt_bw_sum(dt_bw *b, const dt_value *x, const int64_t *dims, int ndims, int all, int keepdim, dt_value *out) {
  dt_op_args a = dt_bw_args();
  if (all || ndims == 0) a.flags = DT_ARG_ALL_DIMS;
  else memcpy(a.ints, dims, sizeof(int64_t) * (size_t)ndims), a.nints = ndims;
  a.keepdim = keepdim;
  a.dtype = dt_value_dtype(x), a.has_dtype = 1; /* keep the gradient's dtype (no int64 promotion) */
  return dt_bw_call(b, DT_OP_SUM, &a, x, NULL, out);
}

static int shaped(dt_bw *b, dt_op_id op, const dt_value *x, int ndim, const int64_t *shape, dt_value *out) {
  dt_op_args a = dt_bw_args();
  memcpy(a.ints, shape, sizeof(int64_t) * (size_t)ndim), a.nints = ndim;
  return dt_bw_call(b, op, &a, x, NULL, out);
}
int dt_bw_reshape(dt_bw *b, const dt_value *x, int ndim, const int64_t *shape, dt_value *out) {
  return shaped(b, DT_OP_RESHAPE, x, ndim, shape, out);
}
int dt_bw_expand(dt_bw *b, const dt_value *x, int ndim, const int64_t *shape, dt_value *out) {
  return shaped(b, DT_OP_EXPAND, x, ndim, shape, out);
}

int dt_bw_transpose(dt_bw *b, const dt_value *x, int d0, int d1, dt_value *out) {
  dt_op_args a = dt_bw_args();
  a.ints[0] = d0, a.ints[1] = d1, a.nints = 2;
  return dt_bw_call(b, DT_OP_TRANSPOSE, &a, x, NULL, out);
}

int dt_bw_sum_to_input(dt_bw *b, const dt_value *x, int i, dt_value *out) {
  const dt_slot_meta *m = &b->in_meta[i];
  int nd = dt_value_ndim(x), lead = nd - m->ndim;
  const int64_t *shape = dt_value_shape(x);
  if (lead < 0) return dt_error("autograd: %s: a gradient with fewer dims than input %d", b->node->name, i + 1);
  int64_t dims[DT_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < nd; d++)
    if (d < lead || (m->shape[d - lead] == 1 && shape[d] != 1)) dims[n++] = d;
  if (n == 0) return dt_bw_share(x, out);
  dt_value s;
  if (dt_bw_sum(b, x, dims, n, 0, 1, &s) != DT_OK) return DT_ERR;
  int st = dt_bw_reshape(b, &s, m->ndim, m->shape, out);
  dt_value_clear(&s);
  return st;
}

int dt_bw_full_input(dt_bw *b, int i, double v, dt_value *out) { return dt_autograd_full(b->ctx, &b->in_meta[i], v, out); }
int dt_bw_full_output(dt_bw *b, int o, double v, dt_value *out) { return dt_autograd_full(b->ctx, &b->out_meta[o], v, out); }

int dt_bw_grad_or_zeros(dt_bw *b, int o, const dt_value **g, dt_value *tmp) {
  dt_value_init(tmp, NULL, NULL);
  if (b->grad[o]) return *g = b->grad[o], DT_OK;
  if (dt_bw_full_output(b, o, 0.0, tmp) != DT_OK) return DT_ERR;
  *g = tmp;
  return DT_OK;
}

void dt_bw_set(dt_bw *b, int i, dt_value *v) {
  dt_value_clear(&b->grad_in[i]);
  b->grad_in[i] = *v;
  dt_value_init(v, NULL, NULL);
}

int dt_bw_share(const dt_value *v, dt_value *out) { return dt_autograd_share(v, out); }
