/* Autograd through the DTensor conversions from C (src/call/call_dtensor.h), on a threads world
 * of 2 and 4 ranks: a checkpoint-like custom node that recomputes to_local inside its backward
 * and runs a nested backward there; the gradient kind of the node (here: each rank's
 * contribution, from a from_local with Shard downstream) must reach the nested to_local, which
 * then sums the contributions, as it does without the checkpoint. */
#include <string.h>

#include "autograd/autograd.h"
#include "base/error.h"
#include "call/call.h"
#include "call/call_dtensor.h"
#include "distributed/dtensor_api.h"
#include "distributed/mesh.h"
#include "ctest.h"
#include "spmd.h"

static const dt_placement R = {DT_REPLICATE, 0, 0}, S0 = {DT_SHARD, 0, 0};

/* t = to_local(x) * 2, through the front door. */
static int twice_local(dt_context *ctx, dt_value *x, dt_value *out) {
  dt_value t;
  if (dt_call_to_local(ctx, x, NULL, &t) != DT_OK) return DT_ERR;
  dt_op_args a = {.flags = DT_ARG_SCALAR, .scalar = {2}, .nscalar = 1};
  dt_value *in[1] = {&t}, *outs[1] = {out};
  int st = dt_call(ctx, DT_OP_MUL, &a, in, 1, outs);
  dt_value_clear(&t);
  return st;
}

/* A checkpoint: forward without a graph; backward recomputes from a detached copy of x with
 * grad on and runs a nested autograd.grad. */
static int checkpoint_backward(dt_context *ctx, void *ud, const dt_value *const *go, int nout, dt_value *gi, int nin,
                               const unsigned char *needs, dt_grad_kind *kind) {
  (void)nout, (void)nin, (void)kind;
  const dt_value *x = ud;
  if (!go[0] || !needs[0]) return DT_OK;
  dt_value xd, t;
  dt_tensor_retain(x->local);
  dt_value_init(&xd, x->local, dt_dspec_copy(x->spec));
  int mode = ctx->modes.grad_enabled, st = dt_autograd_set_requires_grad(&xd, 1);
  ctx->modes.grad_enabled = 1;
  if (st == DT_OK) st = twice_local(ctx, &xd, &t);
  ctx->modes.grad_enabled = mode;
  if (st == DT_OK) {
    dt_value *roots[1] = {&t}, *inputs[1] = {&xd};
    st = dt_autograd_grad(ctx, roots, go, 1, inputs, 1, 0, 0, &gi[0]);
    dt_value_clear(&t);
  }
  dt_value_clear(&xd);
  return st;
}

/* x Replicate (rows of 1s), t = 2 x's local part (checkpointed or not), y = from_local(t) as
 * Shard(0): y holds n copies of 2x, so d sum(y) / dx = 2n everywhere. */
static int contributions(dt_context *ctx, dt_mesh *m, int checkpoint) {
  int64_t shape[2] = {2, 3};
  dt_tensor *ones = dt_tensor_full(DT_FLOAT64, 2, shape, 1.0, DT_CPU), *full = NULL;
  dt_value x, t, y, loss; /* empty until made: cleared alike at the end */
  dt_value_init(&x, NULL, NULL), dt_value_init(&t, NULL, NULL), dt_value_init(&y, NULL, NULL);
  dt_value_init(&loss, NULL, NULL);
  int ok = ones && dt_distribute_tensor(ctx, ones, m, &R, DT_SRC_LOCAL, &x) == DT_OK;
  ok = ok && dt_autograd_set_requires_grad(&x, 1) == DT_OK;
  if (!ok) {
  } else if (checkpoint) {
    ctx->modes.grad_enabled = 0;
    ok = twice_local(ctx, &x, &t) == DT_OK;
    ctx->modes.grad_enabled = 1;
    dt_value *in[1] = {&x}, *out[1] = {&t};
    ok = ok &&
         dt_autograd_record_custom(ctx, "checkpoint", in, 1, out, 1, NULL, checkpoint_backward, &x, NULL) == DT_OK;
  } else {
    ok = twice_local(ctx, &x, &t) == DT_OK;
  }
  ok = ok && dt_call_from_local(ctx, &t, m, &S0, 0, 2, NULL, NULL, &y) == DT_OK;
  dt_op_args all = {.flags = DT_ARG_ALL_DIMS};
  dt_value *in[1] = {&y}, *out[1] = {&loss}, *roots[1] = {&loss};
  ok = ok && dt_call(ctx, DT_OP_SUM, &all, in, 1, out) == DT_OK;
  ok = ok && dt_autograd_backward(ctx, roots, NULL, 1, 0) == DT_OK;
  const dt_value *g = ok ? dt_autograd_grad_of(&x) : NULL;
  ok = g && dt_full_tensor(ctx, g, &full) == DT_OK;
  for (int64_t i = 0; ok && i < dt_tensor_numel(full); i++) ok = ((double *)dt_tensor_data(full))[i] == 2.0 * m->size;
  dt_tensor_release(full), dt_tensor_release(ones);
  dt_value_clear(&loss), dt_value_clear(&y), dt_value_clear(&t), dt_value_clear(&x);
  return ok;
}

static int run(dt_context *ctx, dt_mesh *m, void *checkpoint) { return contributions(ctx, m, *(int *)checkpoint); }
static int spmd(int n, int checkpoint) { return spmd_run(n, run, &checkpoint); }

static void test_contributions_summed_by_to_local(void) {
  CHECK(spmd(2, 0));
  CHECK(spmd(4, 0));
}

static void test_a_nested_backward_takes_the_custom_node_kind(void) {
  CHECK(spmd(2, 1));
  CHECK(spmd(4, 1));
}

int main(void) {
  TEST_CASE(test_contributions_summed_by_to_local);
  TEST_CASE(test_a_nested_backward_takes_the_custom_node_kind);
  return CTEST_END();
}
