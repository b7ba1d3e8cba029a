/* Autograd from C, through libdtensor as a C user links it: graphs recorded by dt_call on
 * plain tensors, backward and autograd.grad, accumulation, hooks, the version counter, and
 * the lifetimes of long graphs (freed without recursion; ASan checks the rest). */
#include <math.h>
#include <string.h>

#include "autograd/autograd.h"
#include "base/error.h"
#include "call/call.h"
#include "comm/comm.h"
#include "ctest.h"

static dt_context *ctx;

static dt_value leaf(const double *v, int n, int requires_grad) {
  int64_t shape[1] = {n};
  dt_tensor *t = dt_tensor_empty(DT_FLOAT64, 1, shape, DT_CPU);
  memcpy(dt_tensor_data(t), v, sizeof(double) * (size_t)n);
  dt_value x;
  dt_value_init(&x, t, NULL);
  if (requires_grad) dt_autograd_set_requires_grad(&x, 1);
  return x;
}

static int binary(dt_op_id op, dt_value *a, dt_value *b, dt_value *out) {
  dt_op_args args = {0};
  dt_value *in[2] = {a, b};
  return dt_call(ctx, op, &args, in, 2, &out);
}

static int sum_all(dt_value *a, dt_value *out) {
  dt_op_args args = {0};
  args.flags = DT_ARG_ALL_DIMS;
  return dt_call(ctx, DT_OP_SUM, &args, &a, 1, &out);
}

static double at(const dt_value *v, int i) { return ((const double *)dt_tensor_data(v->local))[i]; }

static void test_product_rule(void) {
  double xv[3] = {1, 2, 3}, wv[3] = {4, 5, 6};
  dt_value x = leaf(xv, 3, 1), w = leaf(wv, 3, 1), y, l;
  CHECK(binary(DT_OP_MUL, &x, &w, &y) == DT_OK);
  CHECK(sum_all(&y, &l) == DT_OK);
  CHECK(strcmp(dt_autograd_grad_fn_name(&l), "sum") == 0);
  dt_value *roots[1] = {&l};
  CHECK(dt_autograd_backward(ctx, roots, NULL, 1, 1) == DT_OK);
  const dt_value *gx = dt_autograd_grad_of(&x), *gw = dt_autograd_grad_of(&w);
  CHECK(gx && gw && at(gx, 0) == 4 && at(gx, 2) == 6 && at(gw, 1) == 2);
  /* a second backward (graph retained) accumulates */
  CHECK(dt_autograd_backward(ctx, roots, NULL, 1, 0) == DT_OK);
  CHECK(at(dt_autograd_grad_of(&x), 0) == 8);
  /* the graph is freed now */
  CHECK(dt_autograd_backward(ctx, roots, NULL, 1, 0) == DT_ERR);
  CHECK(strstr(dt_error_message(), "retain_graph") != NULL);
  dt_value_clear(&l), dt_value_clear(&y), dt_value_clear(&w), dt_value_clear(&x);
}

static void test_grad_allow_unused(void) {
  double xv[2] = {3, 4}, zv[2] = {1, 1};
  dt_value x = leaf(xv, 2, 1), z = leaf(zv, 2, 1), y, l;
  CHECK(binary(DT_OP_MUL, &x, &x, &y) == DT_OK);
  CHECK(sum_all(&y, &l) == DT_OK);
  dt_value *roots[1] = {&l}, *inputs[2] = {&x, &z};
  dt_value out[2];
  CHECK(dt_autograd_grad(ctx, roots, NULL, 1, inputs, 2, 1, 0, out) == DT_ERR); /* z unused */
  CHECK(dt_autograd_grad(ctx, roots, NULL, 1, inputs, 2, 0, 1, out) == DT_OK);
  CHECK(out[0].local && at(&out[0], 0) == 6 && at(&out[0], 1) == 8 && !out[1].local);
  CHECK(dt_autograd_grad_of(&x) == NULL); /* grad() touches no .grad */
  dt_value_clear(&out[0]);
  dt_value_clear(&l), dt_value_clear(&y), dt_value_clear(&z), dt_value_clear(&x);
}

static int double_it(dt_context *c, void *ud, const dt_value *g, dt_value *replace) {
  (void)ud;
  dt_op_args args = {0};
  args.flags = DT_ARG_SCALAR, args.scalar[0] = 2, args.nscalar = 1;
  dt_value *in = (dt_value *)g;
  return dt_call(c, DT_OP_MUL, &args, &in, 1, &replace);
}

static void test_hooks(void) {
  double xv[2] = {1, 2};
  dt_value x = leaf(xv, 2, 1), l;
  int id;
  CHECK(dt_autograd_register_hook(&x, double_it, NULL, NULL, &id) == DT_OK);
  CHECK(sum_all(&x, &l) == DT_OK);
  dt_value *roots[1] = {&l};
  CHECK(dt_autograd_backward(ctx, roots, NULL, 1, 1) == DT_OK);
  CHECK(at(dt_autograd_grad_of(&x), 0) == 2);
  dt_autograd_remove_hook(&x, id);
  dt_autograd_set_grad(&x, NULL);
  CHECK(dt_autograd_backward(ctx, roots, NULL, 1, 0) == DT_OK);
  CHECK(at(dt_autograd_grad_of(&x), 1) == 1);
  dt_value_clear(&l), dt_value_clear(&x);
}

static void test_version_counter(void) {
  double xv[2] = {1, 2}, one[1] = {1};
  dt_value x = leaf(xv, 2, 1), y, z, l, c = leaf(one, 1, 0);
  CHECK(binary(DT_OP_MUL, &x, &x, &y) == DT_OK);
  CHECK(binary(DT_OP_MUL, &y, &y, &z) == DT_OK); /* saves y */
  CHECK(sum_all(&z, &l) == DT_OK);
  dt_op_args args = {0};
  dt_value *in[2] = {&y, &c};
  ctx->modes.grad_enabled = 0; /* an unrecorded write into a saved value */
  CHECK(dt_call(ctx, DT_OP_ADD_, &args, in, 2, NULL) == DT_OK);
  ctx->modes.grad_enabled = 1;
  dt_value *roots[1] = {&l};
  CHECK(dt_autograd_backward(ctx, roots, NULL, 1, 0) == DT_ERR);
  CHECK(strstr(dt_error_message(), "add_") && strstr(dt_error_message(), "mul"));
  dt_value_clear(&l), dt_value_clear(&z), dt_value_clear(&y), dt_value_clear(&x), dt_value_clear(&c);
}

/* 200000 recorded adds: backward and the release of the chain use no recursion. */
static void test_long_chain(void) {
  double xv[1] = {0.5}, one[1] = {1};
  dt_value x = leaf(xv, 1, 1), c = leaf(one, 1, 0), h, next;
  CHECK(binary(DT_OP_ADD, &x, &c, &h) == DT_OK);
  for (int i = 0; i < 200000; i++) {
    CHECK(binary(DT_OP_ADD, &h, &c, &next) == DT_OK);
    dt_value_clear(&h);
    h = next;
  }
  dt_value *roots[1] = {&h};
  CHECK(dt_autograd_backward(ctx, roots, NULL, 1, 0) == DT_OK);
  CHECK(at(dt_autograd_grad_of(&x), 0) == 1);
  dt_value_clear(&h); /* frees the chain */
  dt_value_clear(&c), dt_value_clear(&x);
}

int main(void) {
  dt_threads_world *w = dt_threads_world_new(1, 30);
  ctx = dt_context_new(dt_threads_world_comm(w, 0), 0);
  TEST_CASE(test_product_rule);
  TEST_CASE(test_grad_allow_unused);
  TEST_CASE(test_hooks);
  TEST_CASE(test_version_counter);
  TEST_CASE(test_long_chain);
  dt_threads_world_rank_exited(w, 0);
  dt_context_free(ctx);
  dt_threads_world_free(w);
  return CTEST_END();
}
