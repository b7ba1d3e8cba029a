/* Shape rules of the view ops: they validate the arguments and report the output shape;
 * the geometry itself (view_geom.c) is shared with the kernels so both agree. */
#include "base/error.h"
#include "ops/ops.h"
#include "ops/view_geom.h"

#include <string.h>

static int need_input(const dt_op_args *a) {
  if (a->nin < 1 || !a->in[0]) return dt_error("%s: expected a tensor input", a->name);
  return DT_OK;
}

static int from_geom(int (*fn)(const dt_op_args *, dt_view_geom *), const dt_op_args *a, dt_meta *out) {
  dt_view_geom g;
  if (need_input(a) != DT_OK || fn(a, &g) != DT_OK) return DT_ERR;
  out->dtype = a->in[0]->dtype;
  out->ndim = g.ndim;
  memcpy(out->shape, g.shape, sizeof(int64_t) * g.ndim);
  return DT_OK;
}

static int from_shape(int (*fn)(const dt_op_args *, int *, int64_t *), const dt_op_args *a, dt_meta *out) {
  if (need_input(a) != DT_OK || fn(a, &out->ndim, out->shape) != DT_OK) return DT_ERR;
  out->dtype = a->in[0]->dtype;
  return DT_OK;
}

int dt_shape_view(const dt_op_args *a, dt_meta *out) { return from_shape(dt_view_target_shape, a, out); }
int dt_shape_flatten(const dt_op_args *a, dt_meta *out) { return from_shape(dt_view_flatten_shape, a, out); }
int dt_shape_expand(const dt_op_args *a, dt_meta *out) { return from_shape(dt_view_expand_shape, a, out); }
int dt_shape_transpose(const dt_op_args *a, dt_meta *out) { return from_geom(dt_view_transpose, a, out); }
int dt_shape_permute(const dt_op_args *a, dt_meta *out) { return from_geom(dt_view_permute, a, out); }
int dt_shape_narrow(const dt_op_args *a, dt_meta *out) { return from_geom(dt_view_narrow, a, out); }
int dt_shape_slice(const dt_op_args *a, dt_meta *out) { return from_geom(dt_view_slice, a, out); }
int dt_shape_select(const dt_op_args *a, dt_meta *out) { return from_geom(dt_view_select, a, out); }
int dt_shape_unsqueeze(const dt_op_args *a, dt_meta *out) { return from_geom(dt_view_unsqueeze, a, out); }
int dt_shape_squeeze(const dt_op_args *a, dt_meta *out) { return from_geom(dt_view_squeeze, a, out); }
