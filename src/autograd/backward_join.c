/* Backward rules of the joins: each input's gradient is its part of the output's gradient
 * (cat: a narrow along the dim; stack: a select). */
#include "autograd/backward.h"

#include "base/error.h"

static int empty_1d(const dt_slot_meta *m) { return m->ndim == 1 && m->shape[0] == 0; }

/* cat skips 1-d empty inputs beside others (ops/join.h): they get no gradient, and the dim
 * counts from the first input it does not skip */
static int cat_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  int ref = 0;
  while (ref < b->nin && empty_1d(&b->in_meta[ref])) ref++;
  if (ref == b->nin) ref = 0;
  int64_t d = b->args->ints[0], start = 0;
  for (int i = 0; i < b->nin; i++) {
    const dt_slot_meta *m = &b->in_meta[i];
    if (i != ref && empty_1d(m)) continue;
    int64_t v[3] = {d, start, m->shape[d]};
    start += m->shape[d];
    if (!b->needs[i]) continue;
    dt_value r;
    if (dt_bw_call_ints(b, DT_OP_NARROW, b->grad[0], 3, v, &r) != DT_OK) return DT_ERR;
    dt_bw_set(b, i, &r);
  }
  return DT_OK;
}
DT_BACKWARD(cat, cat_backward, 0, 0, 0)

static int stack_backward(dt_bw *b) {
  if (!b->grad[0]) return DT_OK;
  for (int i = 0; i < b->nin; i++) {
    if (!b->needs[i]) continue;
    int64_t v[2] = {b->args->ints[0], i};
    dt_value r;
    if (dt_bw_call_ints(b, DT_OP_SELECT, b->grad[0], 2, v, &r) != DT_OK) return DT_ERR;
    dt_bw_set(b, i, &r);
  }
  return DT_OK;
}
DT_BACKWARD(stack, stack_backward, 0, 0, 0)
