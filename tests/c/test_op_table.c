/* The operator table is the one registration of an op: every row names a sharding family
 * that has a rule (or says it is local-only / random), every device table answers for
 * every row, and storage goes through the device interface. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "distributed/sharding_rules/sharding_rules.h"
#include "kernels/local_op.h"
#include "tensor/tensor.h"
#include "ctest.h"

/* Families routed by the dispatcher to a fixed algorithm instead of a priced rule: the RNG
 * tracker (RANDOM) and the block writes of t[k] = v (WRITE). */
static int dispatched(dt_sharding_family f) {
  return f != DT_SHARDING_LOCAL_ONLY && f != DT_SHARDING_RANDOM && f != DT_SHARDING_WRITE;
}

static void test_every_dispatched_family_has_a_rule(void) {
  for (int f = 0; f < DT_SHARDING_COUNT; f++) {
    int ok = dispatched(f) ? dt_rule_of_family(f) != NULL : dt_rule_of_family(f) == NULL;
    if (!ok) printf("  family %s: rule %s\n", dt_sharding_family_name(f), dispatched(f) ? "missing" : "unexpected");
    CHECK(ok);
  }
}

static void test_every_row_has_a_rule_or_says_local_only(void) {
  for (int id = 0; id < DT_OP_COUNT; id++) {
    const dt_op_def *op = dt_op_get(id);
    int in_range = (unsigned)op->sharding < DT_SHARDING_COUNT;
    CHECK(in_range);
    int ok = !in_range || !dispatched(op->sharding) || dt_rule_for(id);
    if (!ok) printf("  %s: family %s has no rule function\n", op->name, dt_sharding_family_name(op->sharding));
    CHECK(ok);
  }
}

static void test_random_rows_go_to_the_rng_tracker(void) {
  for (int id = 0; id < DT_OP_COUNT; id++) {
    const dt_op_def *op = dt_op_get(id);
    int random = (op->flags & DT_OPF_RANDOM) != 0;
    int ok = random == (op->sharding == DT_SHARDING_RANDOM);
    if (!ok) printf("  %s: DT_OPF_RANDOM and the RANDOM family must go together\n", op->name);
    CHECK(ok);
  }
}

static void test_rows_are_complete(void) {
  dt_op_id found;
  for (int id = 0; id < DT_OP_COUNT; id++) {
    const dt_op_def *op = dt_op_get(id);
    CHECK(op->name && op->schema && op->shape && op->nout >= 1 && op->nout <= DT_OP_MAX_OUT);
    CHECK(dt_op_find(op->name, &found) == DT_OK && found == (dt_op_id)id);
    int ok = dt_device_supports_op(DT_HOST, id);
    if (!ok) printf("  %s: no kernel on the host device\n", op->name);
    CHECK(ok);
  }
  CHECK(dt_op_find("no_such_op", &found) == DT_ERR);
}

static void test_device_interface(void) {
  const dt_device *host = dt_device_get(DT_HOST);
  CHECK(host && host->is_host && strcmp(host->name, dt_device_name(DT_HOST)) == 0);
  int64_t shape[2] = {2, 3};
  dt_tensor *z = dt_tensor_zeros(DT_FLOAT32, 2, shape, DT_HOST);
  CHECK(z && ((float *)dt_tensor_data(z))[5] == 0.f);
  dt_tensor *h = dt_tensor_to_host(z);
  CHECK(h == z); /* host memory: the tensor itself, retained */
  dt_tensor_release(h);
  dt_tensor *c = dt_tensor_to_device(z, DT_HOST);
  CHECK(c == z);
  dt_tensor_release(c);
  dt_tensor_release(z);
  for (int d = 0; d < DT_NDEVICES; d++) {
    if (dt_device_get(d)) continue; /* a device this build lacks: a clear error, no crash */
    CHECK(dt_tensor_empty(DT_FLOAT32, 2, shape, d) == NULL);
    CHECK(strstr(dt_error_message(), "not available") != NULL);
    CHECK(!dt_device_supports_op(d, DT_OP_ADD));
  }
}

/* Shape rules tell ops apart by id (dt_op_args.op), not by name. */
static void test_shape_rules_use_the_op_id(void) {
  int64_t shape[1] = {4};
  dt_tensor *x = dt_tensor_full(DT_FLOAT32, 1, shape, 1.0, DT_HOST), *out[2] = {0};
  dt_op_args a = {0};
  a.in = &x, a.nin = 1, a.name = "renamed";
  CHECK(dt_op_call(DT_OP_NORMAL_, &a, out) == DT_OK); /* mean 0, std 1: fine for normal_ */
  CHECK(a.op == DT_OP_NORMAL_ && strcmp(a.name, "renamed") == 0); /* a caller's name is kept for its errors */
  dt_tensor_release(out[0]);
  a.scalar[0] = 5, a.scalar[1] = 1, a.nscalar = 2; /* mean 5, std 1: a bad range for uniform_ only */
  CHECK(dt_op_call(DT_OP_NORMAL_, &a, out) == DT_OK);
  dt_tensor_release(out[0]);
  CHECK(dt_op_call(DT_OP_UNIFORM_, &a, out) == DT_ERR);
  dt_tensor_release(x);
}

/* softmax's fused backward rows: one shape rule tells the two apart by id, checks grad
 * against y, and the kernels give the formulas (rows of 3: y = softmax or log_softmax). */
static void test_softmax_backward_rows(void) {
  int64_t shape[2] = {2, 3}, other[2] = {3, 2};
  dt_tensor *g = dt_tensor_empty(DT_FLOAT64, 2, shape, DT_HOST), *y = dt_tensor_empty(DT_FLOAT64, 2, shape, DT_HOST);
  double *gd = dt_tensor_data(g), *yd = dt_tensor_data(y);
  for (int i = 0; i < 6; i++) gd[i] = 0.5 * i - 1, yd[i] = (i % 3 + 1) / 6.0; /* rows 1/6, 2/6, 3/6 */
  dt_tensor *in[2] = {g, y}, *out[2] = {0};
  dt_op_args a = {0};
  a.in = in, a.nin = 2, a.ints[0] = 1, a.nints = 1;
  CHECK(dt_op_call(DT_OP_SOFTMAX_BACKWARD, &a, out) == DT_OK);
  for (int r = 0; r < 2; r++) {
    double s = 0;
    for (int c = 0; c < 3; c++) s += gd[3 * r + c] * yd[3 * r + c];
    for (int c = 0; c < 3; c++) CHECK(fabs(((double *)dt_tensor_data(out[0]))[3 * r + c] - yd[3 * r + c] * (gd[3 * r + c] - s)) < 1e-15);
  }
  dt_tensor_release(out[0]);
  CHECK(dt_op_call(DT_OP_LOG_SOFTMAX_BACKWARD, &a, out) == DT_OK);
  for (int r = 0; r < 2; r++) {
    double s = gd[3 * r] + gd[3 * r + 1] + gd[3 * r + 2];
    for (int c = 0; c < 3; c++) CHECK(fabs(((double *)dt_tensor_data(out[0]))[3 * r + c] - (gd[3 * r + c] - exp(yd[3 * r + c]) * s)) < 1e-15);
  }
  dt_tensor_release(out[0]);
  dt_tensor *t = dt_tensor_empty(DT_FLOAT64, 2, other, DT_HOST);
  in[1] = t;
  CHECK(dt_op_call(DT_OP_SOFTMAX_BACKWARD, &a, out) == DT_ERR);
  CHECK(strstr(dt_error_message(), "softmax_backward: grad has shape {2,3}, the output {3,2}") != NULL);
  dt_tensor_release(t);
  dt_tensor_release(g);
  dt_tensor_release(y);
}

int main(void) {
  TEST_CASE(test_every_dispatched_family_has_a_rule);
  TEST_CASE(test_every_row_has_a_rule_or_says_local_only);
  TEST_CASE(test_random_rows_go_to_the_rng_tracker);
  TEST_CASE(test_rows_are_complete);
  TEST_CASE(test_device_interface);
  TEST_CASE(test_shape_rules_use_the_op_id);
  TEST_CASE(test_softmax_backward_rows);
  return CTEST_END();
}
