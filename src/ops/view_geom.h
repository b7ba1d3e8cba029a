/* View geometry: the shape, strides and offset a view op gives its input.  Device-neutral,
 * shared by the shape rules (shape_view.c, which only need the shape) and every device's
 * view kernels (which build the view), so both validate the same way. */
#ifndef DT_OPS_VIEW_GEOM_H
#define DT_OPS_VIEW_GEOM_H

#include "ops/op_args.h"

typedef struct dt_view_geom {
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  int64_t stride[DT_MAX_DIMS];
  int64_t offset;
} dt_view_geom;

/* One per view op whose result is always a view; args as the op's schema says. */
int dt_view_transpose(const dt_op_args *a, dt_view_geom *g);
int dt_view_permute(const dt_op_args *a, dt_view_geom *g);
int dt_view_narrow(const dt_op_args *a, dt_view_geom *g);
int dt_view_slice(const dt_op_args *a, dt_view_geom *g);
int dt_view_select(const dt_op_args *a, dt_view_geom *g);
int dt_view_unsqueeze(const dt_op_args *a, dt_view_geom *g);
int dt_view_squeeze(const dt_op_args *a, dt_view_geom *g);

/* Output shapes of the ops that may copy (view/reshape/flatten) and of expand. */
int dt_view_target_shape(const dt_op_args *a, int *ndim, int64_t *shape);  /* view, reshape: one -1 inferred */
int dt_view_flatten_shape(const dt_op_args *a, int *ndim, int64_t *shape); /* flatten */
int dt_view_expand_shape(const dt_op_args *a, int *ndim, int64_t *shape);  /* expand: -1 keeps */

/* PyTorch's computeStride: strides for viewing x as shape (1), or 0 when x's memory layout
 * cannot express it. */
int dt_view_strides(const dt_tensor *x, int ndim, const int64_t *shape, int64_t *stride);

#endif
