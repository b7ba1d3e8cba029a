/* Backward rules of the indexing rows. */
#include "autograd/backward.h"

#include "base/error.h"

/* t[k] = v (index_put_(self, v), the key in args): self's old values survive outside the
 * region, so its gradient is g with the region zeroed; v's is g[k] summed back over the dims
 * v was broadcast along. */
static int index_put_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_index_key k;
  dt_index_key_from_args(b->args, &k);
  if (b->nin > 1 && b->needs[1]) {
    dt_value region, r;
    if (dt_bw_index_view(b, b->grad[0], &k, &region) != DT_OK) return DT_ERR;
    int st = dt_bw_sum_to_input(b, &region, 1, &r);
    dt_value_clear(&region);
    if (st != DT_OK) return DT_ERR;
    dt_bw_set(b, 1, &r);
  }
  if (!b->needs[0]) return DT_OK;
  dt_value g, zero, unused;
  if (dt_bw_unary(b, DT_OP_CLONE, b->grad[0], &g) != DT_OK) return DT_ERR;
  dt_op_args f = dt_bw_args(); /* a plain 0-d zero: the same on every rank beside a DTensor */
  f.scalar[0] = 0, f.nscalar = 1, f.dtype = dt_value_dtype(&g), f.has_dtype = 1;
  if (dt_bw_calln(b, DT_OP_FULL, &f, NULL, 0, &zero) != DT_OK) return dt_value_clear(&g), DT_ERR;
  dt_value_init(&unused, NULL, NULL);
  dt_op_args a = *b->args;
  const dt_value *in[2] = {&g, &zero};
  int st = dt_bw_calln(b, DT_OP_INDEX_PUT_, &a, in, 2, &unused);
  dt_value_clear(&zero);
  if (st != DT_OK) return dt_value_clear(&g), DT_ERR;
  dt_bw_set(b, 0, &g);
  return DT_OK;
}
DT_BACKWARD(index_put_, index_put_backward, 0, 0, 0)

/* x + (src's slices added at the index): x's gradient passes unchanged; src's is g's slices at
 * the index (index_select) */
static int index_add_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  dt_value r;
  if (b->needs[0]) {
    if (dt_bw_share(b->grad[0], &r) != DT_OK) return DT_ERR;
    dt_bw_set(b, 0, &r);
  }
  if (b->needs[2]) {
    dt_op_args a = dt_bw_args();
    a.ints[0] = b->args->ints[0], a.nints = 1;
    if (dt_bw_call(b, DT_OP_INDEX_SELECT, &a, b->grad[0], b->in[1], &r) != DT_OK) return DT_ERR;
    dt_bw_set(b, 2, &r);
  }
  return DT_OK;
}
DT_BACKWARD(index_add, index_add_backward, DT_SAVE(1), 0, 0)

/* index_select(x, index, dim): every selected slice's gradient added back at its index
 * (repeated indices accumulate); the index has none */
static int index_select_backward(dt_bw *b) {
  if (!b->grad[0] || !b->needs[0]) return DT_OK;
  dt_bx x;
  dt_bx_begin(&x, b);
  dt_bx_set(&x, 0, dt_bx_index_add(&x, dt_bx_full_input(&x, 0, 0.0), b->args->ints[0], dt_bx_in(&x, 1), dt_bx_grad(&x, 0)));
  return dt_bx_end(&x);
}
DT_BACKWARD(index_select, index_select_backward, DT_SAVE(1), 0, 0)
