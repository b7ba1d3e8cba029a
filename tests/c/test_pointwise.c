/* C tests of the pointwise ops on strided (transposed, sliced) and expanded views,
 * which the Lua side cannot build until the view ops land. */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "kernels/local_op.h"
#include "tensor/tensor.h"
#include "ctest.h"

/* A 2x3 float64 tensor holding base + i (row-major). */
static dt_tensor *seq(dt_dtype d, double base) {
  int64_t shape[2] = {2, 3};
  dt_tensor *t = dt_tensor_empty(d, 2, shape, DT_CPU);
  for (int i = 0; i < 6; i++) dt_store_f64((char *)dt_tensor_data(t) + i * (int64_t)dt_dtype_size(d), d, base + i);
  return t;
}

/* Its transpose: a 3x2 view with strides {1, 3}. */
static dt_tensor *transposed(dt_tensor *t) {
  int64_t shape[2] = {t->shape[1], t->shape[0]}, stride[2] = {t->stride[1], t->stride[0]};
  return dt_tensor_view_of(t, 2, shape, stride, t->offset);
}

static double at(const dt_tensor *t, int64_t i, int64_t j) {
  const char *p = (const char *)dt_tensor_data(t) + (i * t->stride[0] + j * t->stride[1]) * (int64_t)dt_dtype_size(t->dtype);
  return dt_load_f64(p, t->dtype);
}

static void test_binary_on_transposed_views(void) {
  dt_dtype dts[] = {DT_FLOAT32, DT_FLOAT64, DT_BFLOAT16, DT_INT64, DT_INT32};
  for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
    dt_tensor *a = seq(dts[k], 0), *b = seq(dts[k], 10);
    dt_tensor *at_ = transposed(a), *bt = transposed(b);
    dt_tensor *ins[2] = {at_, bt}, *out[2] = {0};
    dt_op_args args = {.in = ins, .nin = 2};
    CHECK(dt_op_call(DT_OP_MUL, &args, out) == DT_OK);
    CHECK(out[0]->shape[0] == 3 && out[0]->shape[1] == 2 && out[0]->dtype == dts[k]);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 2; j++) CHECK(at(out[0], i, j) == (j * 3 + i) * (10.0 + j * 3 + i));
    dt_tensor_release(out[0]);
    /* transposed with contiguous operand of the same shape */
    dt_tensor *c = dt_tensor_contiguous(at_);
    ins[1] = c;
    CHECK(dt_op_call(DT_OP_SUB, &args, out) == DT_OK);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 2; j++) CHECK(at(out[0], i, j) == 0);
    dt_tensor_release(out[0]);
    dt_tensor_release(c);
    dt_tensor_release(at_);
    dt_tensor_release(bt);
    dt_tensor_release(a);
    dt_tensor_release(b);
  }
}

static void test_unary_and_compare_on_views(void) {
  dt_tensor *a = seq(DT_FLOAT32, -2), *t = transposed(a), *out[2] = {0};
  dt_tensor *ins[1] = {t};
  dt_op_args args = {.in = ins, .nin = 1};
  CHECK(dt_op_call(DT_OP_EXP, &args, out) == DT_OK);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) CHECK(fabs(at(out[0], i, j) - exp(-2.0 + j * 3 + i)) < 1e-5);
  dt_tensor_release(out[0]);
  args.flags = DT_ARG_SCALAR;
  args.scalar[0] = 0.5;
  CHECK(dt_op_call(DT_OP_GT, &args, out) == DT_OK);
  CHECK(out[0]->dtype == DT_BOOL);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) CHECK(at(out[0], i, j) == (-2.0 + j * 3 + i > 0.5));
  dt_tensor_release(out[0]);
  dt_tensor_release(t);
  dt_tensor_release(a);
}

static void test_inplace_into_view(void) {
  /* add_ into a transposed view writes through to the base's memory */
  dt_tensor *a = seq(DT_FLOAT64, 0), *t = transposed(a), *out[2] = {0};
  dt_tensor *ins[1] = {t};
  dt_op_args args = {.in = ins, .nin = 1, .flags = DT_ARG_SCALAR, .scalar = {100}};
  CHECK(dt_op_call(DT_OP_ADD_, &args, out) == DT_OK);
  CHECK(out[0] == t);
  dt_tensor_release(out[0]);
  for (int i = 0; i < 6; i++) CHECK(((double *)dt_tensor_data(a))[i] == 100 + i);
  /* an expanded (stride 0) self is refused */
  int64_t shape[2] = {4, 3};
  dt_tensor *row = dt_tensor_full(DT_FLOAT32, 1, shape + 1, 1, DT_CPU);
  dt_tensor *e = dt_tensor_expand(row, 2, shape, "test");
  ins[0] = e;
  CHECK(dt_op_call(DT_OP_ADD_, &args, out) == DT_ERR);
  CHECK(strstr(dt_error_message(), "add_: cannot write in place into a tensor whose elements overlap") != NULL);
  /* but reading an expanded operand is fine */
  ins[0] = e;
  args.flags = 0;
  args.nin = 1;
  CHECK(dt_op_call(DT_OP_NEG, &args, out) == DT_OK);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) CHECK(at(out[0], i, j) == -1);
  dt_tensor_release(out[0]);
  dt_tensor_release(e);
  dt_tensor_release(row);
  dt_tensor_release(t);
  dt_tensor_release(a);
}

/* a += a^T and a.copy_(a^T) on a 3x3 matrix: the operand is a view of the output's memory */
static void test_inplace_overlapping_operand(void) {
  int64_t shape[2] = {3, 3};
  for (int op = 0; op < 2; op++) {
    dt_tensor *a = dt_tensor_empty(DT_FLOAT32, 2, shape, DT_CPU), *out[2] = {0};
    for (int i = 0; i < 9; i++) ((float *)dt_tensor_data(a))[i] = (float)i;
    dt_tensor *t = transposed(a);
    dt_tensor *ins[2] = {a, t};
    dt_op_args args = {.in = ins, .nin = 2};
    CHECK(dt_op_call(op ? DT_OP_COPY_ : DT_OP_ADD_, &args, out) == DT_OK);
    dt_tensor_release(out[0]);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) CHECK(at(a, i, j) == (op ? 0 : i * 3 + j) + j * 3 + i);
    dt_tensor_release(t);
    dt_tensor_release(a);
  }
}

static void test_where_on_views(void) {
  dt_tensor *a = seq(DT_FLOAT32, 0), *t = transposed(a), *out[2] = {0};
  int64_t shape[2] = {3, 2};
  dt_tensor *cond = dt_tensor_zeros(DT_BOOL, 2, shape, DT_CPU);
  ((uint8_t *)dt_tensor_data(cond))[1] = 1;
  dt_tensor *ins[3] = {cond, t, NULL};
  dt_op_args args = {.in = ins, .nin = 3, .scalar = {0, -1}};
  CHECK(dt_op_call(DT_OP_WHERE, &args, out) == DT_OK);
  CHECK(out[0]->dtype == DT_FLOAT32);
  CHECK(at(out[0], 0, 0) == -1 && at(out[0], 0, 1) == 3 && at(out[0], 2, 1) == -1);
  dt_tensor_release(out[0]);
  dt_tensor_release(cond);
  dt_tensor_release(t);
  dt_tensor_release(a);
}

int main(void) {
  TEST_CASE(test_binary_on_transposed_views);
  TEST_CASE(test_unary_and_compare_on_views);
  TEST_CASE(test_inplace_into_view);
  TEST_CASE(test_inplace_overlapping_operand);
  TEST_CASE(test_where_on_views);
  return CTEST_END();
}
