/* Shape rules of matmul, mm, bmm, addmm (PyTorch rules).  Operands must share a dtype
 * (PyTorch does not promote here either); bool is rejected. */
#include "base/error.h"
#include "ops/ops.h"

static int check_dtypes(const dt_op_args *a, const dt_tensor *x, const dt_tensor *y) {
  if (x->dtype != y->dtype)
    return dt_error("%s: dtypes %s and %s differ (convert one with :to())", a->name, dt_dtype_name(x->dtype),
                    dt_dtype_name(y->dtype));
  if (x->dtype == DT_BOOL) return dt_error("%s: not defined for bool tensors", a->name);
  return DT_OK;
}

static int not_aligned(const dt_op_args *a, const dt_tensor *x, const dt_tensor *y, int64_t kx, int64_t ky) {
  char bx[160], by[160];
  return dt_error("%s: shapes %s and %s are not aligned (%lld != %lld)", a->name,
                  dt_format_shape(bx, sizeof bx, x->ndim, x->shape), dt_format_shape(by, sizeof by, y->ndim, y->shape),
                  (long long)kx, (long long)ky);
}

static int check_two(const dt_op_args *a, int first) {
  if (a->nin < first + 2 || !a->in[first] || !a->in[first + 1]) return dt_error("%s: expected two tensors", a->name);
  return check_dtypes(a, a->in[first], a->in[first + 1]);
}

int dt_shape_matmul(const dt_op_args *a, dt_meta *out) {
  if (check_two(a, 0) != DT_OK) return DT_ERR;
  const dt_tensor *x = a->in[0], *y = a->in[1];
  int nx = x->ndim, ny = y->ndim;
  if (nx == 0 || ny == 0)
    return dt_error("%s: both arguments need at least 1 dim, got %d-d and %d-d", a->name, nx, ny);
  int64_t kx = x->shape[nx - 1], ky = y->shape[ny >= 2 ? ny - 2 : 0];
  if (kx != ky) return not_aligned(a, x, y, kx, ky);
  /* batch dims: everything before the last two (a 1-d operand has none) */
  int nbx = nx > 2 ? nx - 2 : 0, nby = ny > 2 ? ny - 2 : 0, nb = 0;
  if (dt_broadcast_shapes(a->name, nbx, x->shape, nby, y->shape, &nb, out->shape) != DT_OK) {
    char bx[160], by[160];
    return dt_error("%s: batch dims of shapes %s and %s cannot broadcast", a->name,
                    dt_format_shape(bx, sizeof bx, nx, x->shape), dt_format_shape(by, sizeof by, ny, y->shape));
  }
  int n = nb;
  if (nx >= 2) out->shape[n++] = x->shape[nx - 2];
  if (ny >= 2) out->shape[n++] = y->shape[ny - 1];
  out->ndim = n;
  out->dtype = x->dtype;
  return DT_OK;
}

int dt_shape_mm(const dt_op_args *a, dt_meta *out) {
  if (check_two(a, 0) != DT_OK) return DT_ERR;
  const dt_tensor *x = a->in[0], *y = a->in[1];
  if (x->ndim != 2 || y->ndim != 2) return dt_error("%s: expected 2-d tensors, got %d-d and %d-d", a->name, x->ndim, y->ndim);
  return dt_shape_matmul(a, out);
}

int dt_shape_bmm(const dt_op_args *a, dt_meta *out) {
  if (check_two(a, 0) != DT_OK) return DT_ERR;
  const dt_tensor *x = a->in[0], *y = a->in[1];
  if (x->ndim != 3 || y->ndim != 3) return dt_error("%s: expected 3-d tensors, got %d-d and %d-d", a->name, x->ndim, y->ndim);
  if (x->shape[0] != y->shape[0])
    return dt_error("%s: batch sizes %lld and %lld differ", a->name, (long long)x->shape[0], (long long)y->shape[0]);
  return dt_shape_matmul(a, out);
}

/* addmm(c, a, b): c broadcasts to [n, m]. */
int dt_shape_addmm(const dt_op_args *a, dt_meta *out) {
  if (a->nin < 3 || !a->in[0]) return dt_error("%s: expected three tensors", a->name);
  if (check_two(a, 1) != DT_OK) return DT_ERR;
  const dt_tensor *c = a->in[0], *x = a->in[1], *y = a->in[2];
  if (x->ndim != 2 || y->ndim != 2) return dt_error("%s: expected 2-d tensors, got %d-d and %d-d", a->name, x->ndim, y->ndim);
  if (c->dtype != x->dtype)
    return dt_error("%s: dtypes %s and %s differ (convert one with :to())", a->name, dt_dtype_name(c->dtype),
                    dt_dtype_name(x->dtype));
  if (x->shape[1] != y->shape[0]) return not_aligned(a, x, y, x->shape[1], y->shape[0]);
  out->ndim = 2;
  out->shape[0] = x->shape[0];
  out->shape[1] = y->shape[1];
  out->dtype = x->dtype;
  int fits = c->ndim <= 2;
  for (int i = 0; fits && i < c->ndim; i++) {
    int64_t s = c->shape[c->ndim - 1 - i];
    fits = s == 1 || s == out->shape[1 - i];
  }
  if (!fits) {
    char bc[160], bo[160];
    return dt_error("%s: input of shape %s does not broadcast to the product's shape %s", a->name,
                    dt_format_shape(bc, sizeof bc, c->ndim, c->shape), dt_format_shape(bo, sizeof bo, 2, out->shape));
  }
  return DT_OK;
}
