/* Backward rules of the reductions.  A reduction's gradient is the output gradient put back
 * over the reduced dims (unsqueezed where keepdim dropped them, then expanded). */
#include "autograd/backward.h"

#include <math.h>
#include <string.h>

#include "base/error.h"

/* Does the forward reduce dim d of input 0? */
static int reduces_dim(const dt_bw *b, int d) {
  const dt_op_args *a = b->args;
  if ((a->flags & DT_ARG_ALL_DIMS) || a->nints == 0) return 1;
  for (int k = 0; k < a->nints; k++)
    if (a->ints[k] == d) return 1;
  return 0;
}

/* Input 0's shape with the forward's reduced dims set to 1 (what keepdim gives). */
static void kept_shape(const dt_bw *b, int64_t *kshape) {
  const dt_slot_meta *m = &b->in_meta[0];
  for (int d = 0; d < m->ndim; d++) kshape[d] = reduces_dim(b, d) ? 1 : m->shape[d];
}

int dt_bw_unreduce(dt_bw *b, const dt_value *g, dt_value *out) {
  const dt_slot_meta *m = &b->in_meta[0];
  int64_t kshape[DT_MAX_DIMS];
  kept_shape(b, kshape);
  dt_value kept;
  if (dt_bw_reshape(b, g, m->ndim, kshape, &kept) != DT_OK) return DT_ERR;
  int st = dt_bw_expand(b, &kept, m->ndim, m->shape, out);
  dt_value_clear(&kept);
  return st;
}

const dt_value *dt_bx_keepdim(dt_bx *x, const dt_value *p) {
  if (!p) return x->failed = 1, NULL;
  int64_t kshape[DT_MAX_DIMS];
  kept_shape(x->b, kshape);
  dt_op_args a = dt_bw_args();
  memcpy(a.ints, kshape, sizeof(int64_t) * (size_t)x->b->in_meta[0].ndim), a.nints = x->b->in_meta[0].ndim;
  return dt_bx_op(x, DT_OP_RESHAPE, &a, &p, 1);
}

const dt_value *dt_bx_unreduce(dt_bx *x, const dt_value *p) {
  const dt_slot_meta *m = &x->b->in_meta[0];
  const dt_value *k = dt_bx_keepdim(x, p);
  if (!k) return NULL;
  dt_op_args a = dt_bw_args();
  memcpy(a.ints, m->shape, sizeof(int64_t) * (size_t)m->ndim), a.nints = m->ndim;
  return dt_bx_op(x, DT_OP_EXPAND, &a, &k, 1);
}

const dt_value *dt_bx_reduce_like(dt_bx *x, dt_op_id op, const dt_value *p) {
  if (!p) return x->failed = 1, NULL;
  const dt_op_args *f = x->b->args;
  dt_op_args a = dt_bw_args();
  if ((f->flags & DT_ARG_ALL_DIMS) || f->nints == 0) a.flags = DT_ARG_ALL_DIMS;
  else memcpy(a.ints, f->ints, sizeof(int64_t) * (size_t)f->nints), a.nints = f->nints;
  a.keepdim = 1;
  return dt_bx_op(x, op, &a, &p, 1);
}

static int sum_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (dt_bw_unreduce(b, b->grad[0], &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(sum, sum_backward, 0, 0, 0)

/* How many input elements each output element of a reduction gathers. */
static int64_t reduced_count(const dt_bw *b) {
  const dt_slot_meta *m = &b->in_meta[0];
  int64_t n = 1;
  for (int d = 0; d < m->ndim; d++)
    if (reduces_dim(b, d)) n *= m->shape[d];
  return n;
}

/* mean: g / n over the n elements reduced (an empty reduction: the gradient is empty too) */
static int mean_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  int64_t n = reduced_count(b);
  const dt_value *g = dt_bx_unreduce(&e, b->grad[0]);
  dt_bx_set(&e, 0, n > 0 ? dt_bx_scalar(&e, DT_OP_DIV, g, (double)n) : g);
  return dt_bx_end(&e);
}
DT_BACKWARD(mean, mean_backward, 0, 0, 0)

/* prod: d/dx_i = the product of the others.  Without division by zero: with z = (x == 0),
 * p = the product of the nonzero elements and k = the count of zeros (per output element),
 *   nonzero x_i: y / x_i (y is 0 when the group has a zero, which is right),
 *   zero x_i:    p when it is the group's only zero, else 0.
 * Exact for any number of zeros (torch's rule). */
static int prod_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *x = dt_bx_in(&e, 0), *z = dt_bx_scalar(&e, DT_OP_EQ, x, 0);
  const dt_value *x_nz = dt_bx_where_scalar(&e, z, 1, x);
  const dt_value *p = dt_bx_reduce_like(&e, DT_OP_PROD, x_nz);
  const dt_value *k = dt_bx_reduce_like(&e, DT_OP_SUM, z);
  const dt_value *only_zero = dt_bx_keep_where(&e, dt_bx_scalar(&e, DT_OP_EQ, k, 1), p);
  const dt_value *others = dt_bx_where(&e, z, only_zero, dt_bx_div(&e, dt_bx_keepdim(&e, dt_bx_out(&e, 0)), x_nz));
  dt_bx_set(&e, 0, dt_bx_mul(&e, dt_bx_keepdim(&e, b->grad[0]), others));
  return dt_bx_end(&e);
}
DT_BACKWARD(prod, prod_backward, DT_SAVE(0), DT_SAVE(0), 0)

/* amax/amin: g shared evenly among the elements equal to the result (torch's rule for ties) */
static const dt_value *share_among(dt_bx *e, const dt_value *mask, const dt_value *g_kept) {
  return dt_bx_keep_where(e, mask, dt_bx_div(e, g_kept, dt_bx_reduce_like(e, DT_OP_SUM, mask)));
}
static int amax_amin_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  const dt_value *mask = dt_bx_binary(&e, DT_OP_EQ, dt_bx_in(&e, 0), dt_bx_keepdim(&e, dt_bx_out(&e, 0)));
  dt_bx_set(&e, 0, share_among(&e, mask, dt_bx_keepdim(&e, b->grad[0])));
  return dt_bx_end(&e);
}
DT_BACKWARD(amax, amax_amin_backward, DT_SAVE(0), DT_SAVE(0), 0)
DT_BACKWARD(amin, amax_amin_backward, DT_SAVE(0), DT_SAVE(0), 0)

/* max/min over a dim: g goes to the position the index output names (ties: that one only) */
static int max_min_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  if (b->in_meta[0].ndim == 0) { /* a 0-d input is its own max */
    dt_bx_set(&e, 0, b->grad[0]);
    return dt_bx_end(&e);
  }
  int dim = (int)b->args->ints[0];
  const dt_value *at = dt_bx_binary(&e, DT_OP_EQ, dt_bx_positions(&e, 0, dim), dt_bx_keepdim(&e, dt_bx_out(&e, 1)));
  dt_bx_set(&e, 0, dt_bx_keep_where(&e, at, dt_bx_keepdim(&e, b->grad[0])));
  return dt_bx_end(&e);
}
DT_BACKWARD(max, max_min_backward, 0, DT_SAVE(1), 0)
DT_BACKWARD(min, max_min_backward, 0, DT_SAVE(1), 0)

/* var: g (x - mean) 2 / dof; std: g (x - mean) / (dof y); dof = n - correction (torch's:
 * dof <= 0 gives inf or a negative scale, as the forward's inf/nan) */
static int var_std_backward(dt_bw *b, int is_std) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  double correction = b->args->nscalar > 0 ? b->args->scalar[0] : 1;
  double dof = (double)reduced_count(b) - correction;
  const dt_value *x = dt_bx_in(&e, 0), *g = dt_bx_keepdim(&e, b->grad[0]);
  const dt_value *centered = dt_bx_sub(&e, x, dt_bx_reduce_like(&e, DT_OP_MEAN, x));
  if (is_std) g = dt_bx_div(&e, g, dt_bx_keepdim(&e, dt_bx_out(&e, 0)));
  double scale = dof != 0 ? (is_std ? 1 : 2) / dof : INFINITY;
  dt_bx_set(&e, 0, dt_bx_mul(&e, dt_bx_mul_scalar(&e, g, scale), centered));
  return dt_bx_end(&e);
}
static int var_backward(dt_bw *b) { return var_std_backward(b, 0); }
static int std_backward(dt_bw *b) { return var_std_backward(b, 1); }
DT_BACKWARD(var, var_backward, DT_SAVE(0), 0, 0)
DT_BACKWARD(std, std_backward, DT_SAVE(0), DT_SAVE(0), 0)

/* norm, y = (sum |x|^p)^(1/p), torch's cases:
 *   p = 0: zeros;  p = 1: g sgn(x);  p = 2: g x / y (0 where y == 0)
 *   p = +-inf: g sgn(x) shared evenly among the |x| equal to y
 *   p < 1: g sgn(x) |x|^(p-1) y^(1-p) (0 where x == 0)
 *   otherwise: g sgn(x) |x|^(p-1) / y^(p-1) (0 where y == 0) */
static int norm_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_bx e;
  dt_bx_begin(&e, b);
  double p = b->args->nscalar > 0 ? b->args->scalar[0] : 2;
  const dt_value *x = dt_bx_in(&e, 0), *g = dt_bx_keepdim(&e, b->grad[0]), *y = dt_bx_keepdim(&e, dt_bx_out(&e, 0));
  const dt_value *r;
  if (p == 0) {
    r = dt_bx_full_input(&e, 0, 0);
  } else if (p == 1) {
    r = dt_bx_mul(&e, g, dt_bx_sgn(&e, x));
  } else if (p == 2) {
    r = dt_bx_mul(&e, g, dt_bx_zero_where(&e, dt_bx_scalar(&e, DT_OP_EQ, y, 0), dt_bx_div(&e, x, y)));
  } else if (isinf(p)) {
    const dt_value *mask = dt_bx_binary(&e, DT_OP_EQ, dt_bx_unary(&e, DT_OP_ABS, x), y);
    r = dt_bx_mul(&e, dt_bx_sgn(&e, x), share_among(&e, mask, g));
  } else {
    const dt_value *ax = dt_bx_unary(&e, DT_OP_ABS, x);
    const dt_value *d = dt_bx_mul(&e, dt_bx_sgn(&e, x), dt_bx_scalar(&e, DT_OP_POW, ax, p - 1));
    if (p < 1) {
      d = dt_bx_zero_where(&e, dt_bx_scalar(&e, DT_OP_EQ, x, 0), d);
      r = dt_bx_mul(&e, d, dt_bx_mul(&e, g, dt_bx_scalar(&e, DT_OP_POW, y, 1 - p)));
    } else {
      const dt_value *scale = dt_bx_div(&e, g, dt_bx_scalar(&e, DT_OP_POW, y, p - 1));
      r = dt_bx_mul(&e, d, dt_bx_zero_where(&e, dt_bx_scalar(&e, DT_OP_EQ, y, 0), scale));
    }
  }
  dt_bx_set(&e, 0, r);
  return dt_bx_end(&e);
}
DT_BACKWARD(norm, norm_backward, DT_SAVE(0), DT_SAVE(0), 0)
