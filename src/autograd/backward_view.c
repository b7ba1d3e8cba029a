/* Backward rules of the view rows: the gradient takes the inverse view (or is scattered
 * back into zeros of the input's shape for views that drop elements). */
#include "autograd/backward.h"

#include "base/error.h"

/* view/reshape/flatten: the gradient reshaped to the input's shape */
static int reshape_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (dt_bw_reshape(b, b->grad[0], b->in_meta[0].ndim, b->in_meta[0].shape, &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(view, reshape_backward, 0, 0, 0)
DT_BACKWARD(reshape, reshape_backward, 0, 0, 0)
DT_BACKWARD(flatten, reshape_backward, 0, 0, 0)

/* The gradient of output 0 through op with the given ints, into input 0. */
static int pass_back(dt_bw *b, dt_op_id op, int n, const int64_t *ints) {
  dt_value r;
  if (dt_bw_call_ints(b, op, b->grad[0], n, ints, &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}

/* transpose is its own inverse */
static int transpose_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  return pass_back(b, DT_OP_TRANSPOSE, 2, b->args->ints);
}
DT_BACKWARD(transpose, transpose_backward, 0, 0, 0)

/* the inverse permutation: output dim i was input dim order[i] */
static int permute_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  int64_t inv[DT_MAX_DIMS];
  for (int i = 0; i < b->args->nints; i++) inv[b->args->ints[i]] = i;
  return pass_back(b, DT_OP_PERMUTE, b->args->nints, inv);
}
DT_BACKWARD(permute, permute_backward, 0, 0, 0)

/* unsqueeze/squeeze add or drop size-1 dims: the gradient reshaped back */
DT_BACKWARD(unsqueeze, reshape_backward, 0, 0, 0)
DT_BACKWARD(squeeze, reshape_backward, 0, 0, 0)

/* expand: each input element fed every copy of it */
static int expand_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (dt_bw_sum_to_input(b, b->grad[0], 0, &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}
DT_BACKWARD(expand, expand_backward, 0, 0, 0)

/* narrow, slice, select keep a region of their input: the gradient is zeros with the output's
 * gradient written into that region */
static int region_backward(dt_bw *b, const dt_index_key *k) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (dt_bw_zeros_with(b, 0, k, b->grad[0], &r) != DT_OK) return DT_ERR;
  dt_bw_set(b, 0, &r);
  return DT_OK;
}

static int narrow_backward(dt_bw *b) { /* ints: dim, start, length */
  const int64_t *v = b->args->ints;
  dt_index_key k;
  dt_bw_key_all(b, 0, &k);
  k.kind[v[0]] = DT_INDEX_RANGE, k.start[v[0]] = v[1], k.stop[v[0]] = v[1] + v[2];
  return region_backward(b, &k);
}
DT_BACKWARD(narrow, narrow_backward, 0, 0, 0)

static int slice_backward(dt_bw *b) { /* ints: dim, start, stop, step */
  const int64_t *v = b->args->ints;
  dt_index_key k;
  dt_bw_key_all(b, 0, &k);
  k.kind[v[0]] = DT_INDEX_RANGE, k.start[v[0]] = v[1], k.stop[v[0]] = v[2], k.step[v[0]] = v[3];
  return region_backward(b, &k);
}
DT_BACKWARD(slice, slice_backward, 0, 0, 0)

static int select_backward(dt_bw *b) { /* ints: dim, index */
  const int64_t *v = b->args->ints;
  dt_index_key k;
  dt_bw_key_all(b, 0, &k);
  k.kind[v[0]] = DT_INDEX_SELECT, k.start[v[0]] = v[1], k.stop[v[0]] = v[1] + 1;
  return region_backward(b, &k);
}
DT_BACKWARD(select, select_backward, 0, 0, 0)
