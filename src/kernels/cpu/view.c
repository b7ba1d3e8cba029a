/* View ops: new shape/stride/offset over the input's storage (no data moves), except
 * reshape/flatten, which copy when no strides can express the result.  The geometry is
 * device-neutral (ops/view_geom.c), shared with the shape rules so both validate alike. */
#include "base/error.h"
#include "kernels/cpu/kernel_table.h"
#include "ops/view_geom.h"

typedef int (*geom_fn)(const dt_op_args *a, dt_view_geom *g);

static int make_view(geom_fn fn, const dt_op_args *a, dt_tensor **out) {
  dt_view_geom g;
  if (fn(a, &g) != DT_OK) return DT_ERR;
  out[0] = dt_tensor_view_of(a->in[0], g.ndim, g.shape, g.stride, g.offset);
  return out[0] ? DT_OK : DT_ERR;
}

int dt_cpu_transpose(const dt_op_args *a, dt_tensor **out) { return make_view(dt_view_transpose, a, out); }
int dt_cpu_permute(const dt_op_args *a, dt_tensor **out) { return make_view(dt_view_permute, a, out); }
int dt_cpu_narrow(const dt_op_args *a, dt_tensor **out) { return make_view(dt_view_narrow, a, out); }
int dt_cpu_slice(const dt_op_args *a, dt_tensor **out) { return make_view(dt_view_slice, a, out); }
int dt_cpu_select(const dt_op_args *a, dt_tensor **out) { return make_view(dt_view_select, a, out); }
int dt_cpu_unsqueeze(const dt_op_args *a, dt_tensor **out) { return make_view(dt_view_unsqueeze, a, out); }
int dt_cpu_squeeze(const dt_op_args *a, dt_tensor **out) { return make_view(dt_view_squeeze, a, out); }

/* A view of x as shape when strides allow, else (copy_ok) a contiguous copy. */
static int view_or_copy(const dt_op_args *a, int ndim, const int64_t *shape, int copy_ok, dt_tensor **out) {
  dt_tensor *x = a->in[0];
  int64_t stride[DT_MAX_DIMS];
  if (dt_view_strides(x, ndim, shape, stride)) {
    out[0] = dt_tensor_view_of(x, ndim, shape, stride, x->offset);
    return out[0] ? DT_OK : DT_ERR;
  }
  if (!copy_ok) {
    char b1[160], b2[160], b3[160];
    return dt_error("%s: a tensor of shape %s and strides %s cannot be viewed as %s (use reshape() or "
                    "contiguous() first)",
                    a->name, dt_format_shape(b1, sizeof b1, x->ndim, x->shape),
                    dt_format_shape(b2, sizeof b2, x->ndim, x->stride), dt_format_shape(b3, sizeof b3, ndim, shape));
  }
  dt_tensor *c = dt_tensor_clone(x);
  if (!c) return DT_ERR;
  dt_contiguous_strides(ndim, shape, stride);
  out[0] = dt_tensor_view_of(c, ndim, shape, stride, c->offset);
  dt_tensor_release(c);
  return out[0] ? DT_OK : DT_ERR;
}

typedef int (*shape_fn)(const dt_op_args *a, int *ndim, int64_t *shape);

static int shaped(shape_fn fn, int copy_ok, const dt_op_args *a, dt_tensor **out) {
  int n;
  int64_t shape[DT_MAX_DIMS];
  if (fn(a, &n, shape) != DT_OK) return DT_ERR;
  return view_or_copy(a, n, shape, copy_ok, out);
}

int dt_cpu_view(const dt_op_args *a, dt_tensor **out) { return shaped(dt_view_target_shape, 0, a, out); }
int dt_cpu_reshape(const dt_op_args *a, dt_tensor **out) { return shaped(dt_view_target_shape, 1, a, out); }
int dt_cpu_flatten(const dt_op_args *a, dt_tensor **out) { return shaped(dt_view_flatten_shape, 1, a, out); }

int dt_cpu_expand(const dt_op_args *a, dt_tensor **out) {
  int n;
  int64_t shape[DT_MAX_DIMS];
  if (dt_view_expand_shape(a, &n, shape) != DT_OK) return DT_ERR;
  out[0] = dt_tensor_expand(a->in[0], n, shape, a->name);
  return out[0] ? DT_OK : DT_ERR;
}
