/* C unit tests of the base and tensor layers, through the public C API. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "base/error.h"
#include "base/size.h"
#include "kernels/local_op.h"
#include "tensor/block_cache.h"
#include "tensor/tensor.h"
#include "ctest.h"

static void test_dtype_promotion(void) {
  CHECK(dt_dtype_promote(DT_INT32, DT_FLOAT32) == DT_FLOAT32);
  CHECK(dt_dtype_promote(DT_UINT8, DT_INT32) == DT_INT32);
  CHECK(dt_dtype_promote(DT_BOOL, DT_UINT8) == DT_UINT8);
  CHECK(dt_dtype_promote(DT_BFLOAT16, DT_FLOAT16) == DT_FLOAT32);
  CHECK(dt_dtype_promote(DT_FLOAT32, DT_FLOAT64) == DT_FLOAT64);
  CHECK(dt_dtype_promote(DT_INT64, DT_BFLOAT16) == DT_BFLOAT16);
}

static void test_half_conversions(void) {
  const float vals[] = {0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 1e-9f};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    float back = dt_f16_to_f32(dt_f32_to_f16(vals[i]));
    CHECK(back == (vals[i] == 1e-9f ? 0.f : vals[i]));
  }
  CHECK(dt_f32_to_f16(1e6f) == 0x7c00);          /* overflow -> inf */
  CHECK(dt_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(dt_bf16_to_f32(dt_f32_to_bf16(3.140625f)) == 3.140625f);
  CHECK(dt_f32_to_bf16(1.00390625f) == 0x3f80);  /* ties to even */
  CHECK(isnan(dt_bf16_to_f32(dt_f32_to_bf16(NAN))));
}

static void test_strided_copy_and_convert(void) {
  int64_t shape[2] = {2, 3};
  dt_tensor *a = dt_tensor_empty(DT_FLOAT64, 2, shape, DT_CPU);
  double *pa = dt_tensor_data(a);
  for (int i = 0; i < 6; i++) pa[i] = i + 0.5;
  /* transposed view, copied into an int32 tensor */
  int64_t tshape[2] = {3, 2}, tstride[2] = {1, 3};
  dt_tensor *at = dt_tensor_view_of(a, 2, tshape, tstride, 0);
  CHECK(!dt_tensor_is_contiguous(at));
  dt_tensor *b = dt_tensor_empty(DT_INT32, 2, tshape, DT_CPU);
  CHECK(dt_tensor_copy_(b, at, "test") == DT_OK);
  int32_t *pb = dt_tensor_data(b);
  const int32_t expect[6] = {0, 3, 1, 4, 2, 5};
  CHECK(memcmp(pb, expect, sizeof expect) == 0);
  dt_tensor_release(at);
  dt_tensor_release(a);
  dt_tensor_release(b);
}

static void test_broadcast_error_names_op(void) {
  int64_t s1[2] = {2, 3}, s2[1] = {4}, out[8];
  int n;
  CHECK(dt_broadcast_shapes("add", 2, s1, 1, s2, &n, out) == DT_ERR);
  CHECK(strcmp(dt_error_message(), "add: shapes {2,3} and {4} cannot broadcast") == 0);
  int64_t s3[3] = {4, 1, 3};
  CHECK(dt_broadcast_shapes("add", 2, s1, 3, s3, &n, out) == DT_OK);
  CHECK(n == 3 && out[0] == 4 && out[1] == 2 && out[2] == 3);
}

static void test_op_table_front_door(void) {
  dt_op_id id;
  CHECK(dt_op_find("full", &id) == DT_OK && id == DT_OP_FULL);
  CHECK(dt_op_find("no_such_op", &id) == DT_ERR);
  dt_op_args a = {0};
  a.nints = 2;
  a.ints[0] = 3;
  a.ints[1] = 4;
  a.scalar[0] = 2.5;
  a.dtype = DT_FLOAT32;
  a.has_dtype = 1;
  dt_tensor *out[2] = {0};
  CHECK(dt_op_call(DT_OP_FULL, &a, out) == DT_OK);
  CHECK(out[0] && dt_tensor_numel(out[0]) == 12 && ((float *)dt_tensor_data(out[0]))[11] == 2.5f);
  dt_tensor_release(out[0]);
  a.ints[1] = -1;
  CHECK(dt_op_call(DT_OP_FULL, &a, out) == DT_ERR);
}

/* Mid-sized blocks: every block of a burst of frees comes back (the bins have no slot limit),
 * each size from its own bin, and a size never gets another size's block. */
static void test_block_cache_keeps_bursts_of_mid_blocks(void) {
  enum { N = 200 };
  void *blocks[N];
  size_t cap, caps[N];
  for (int i = 0; i < N; i++) {
    blocks[i] = dt_block_alloc((size_t)64 << 10, &caps[i]);
    CHECK(blocks[i] && ((uintptr_t)blocks[i] & 63) == 0 && caps[i] == ((size_t)64 << 10));
  }
  for (int i = 0; i < N; i++) dt_block_free(blocks[i], caps[i]); /* 12.5 MiB at once */
  void *other = dt_block_alloc((size_t)96 << 10, &cap); /* another size: a fresh block */
  int reused = 0;
  for (int i = 0; i < N; i++) reused += other == blocks[i];
  CHECK(!reused && cap == ((size_t)96 << 10));
  dt_block_free(other, cap);
  void *again[N];
  for (int i = 0; i < N; i++) { /* every 64 KiB block is one of the burst's, each once */
    again[i] = dt_block_alloc((size_t)64 << 10, &cap);
    int found = 0;
    for (int k = 0; k < N; k++) found += again[i] == blocks[k];
    for (int k = 0; k < i; k++) found += again[i] == again[k];
    CHECK(found == 1 && cap == ((size_t)64 << 10));
  }
  for (int i = 0; i < N; i++) dt_block_free(again[i], cap);
  dt_block_cache_trim();
}

static void test_block_cache_reuses_large_blocks(void) {
  size_t cap1, cap2, cap3;
  void *a = dt_block_alloc((size_t)4 << 20, &cap1);
  CHECK(a && ((uintptr_t)a & 63) == 0);
  dt_block_free(a, cap1);
  void *b = dt_block_alloc((size_t)4 << 20, &cap2); /* same size: the cached block */
  CHECK(b == a && cap2 == cap1);
  dt_block_free(b, cap2);
  void *c = dt_block_alloc((size_t)3 << 20, &cap3); /* far smaller: never pins the big block */
  CHECK(c != a && cap3 == ((size_t)3 << 20));
  dt_block_free(c, cap3);
  dt_block_cache_trim();
  void *d = dt_block_alloc(100, &cap3); /* small: plain allocation, 64-byte multiple */
  CHECK(d && cap3 == 128);
  dt_block_free(d, cap3);
}

/* Checked size arithmetic: overflow is reported, a 0 dim hides nothing, every tensor
 * (allocated, expanded or viewed) keeps its element count within DT_MAX_NUMEL. */
static void test_size_arithmetic_is_checked(void) {
  int64_t r;
  CHECK(dt_mul_size(INT64_C(1) << 31, INT64_C(1) << 31, &r) == DT_OK && r == INT64_C(1) << 62);
  CHECK(dt_mul_size(INT64_C(1) << 32, INT64_C(1) << 32, &r) != DT_OK);
  CHECK(dt_add_size(INT64_MAX, 1, &r) != DT_OK);
  int64_t ok[3] = {0, INT64_C(1) << 40, 4}, zero_big[3] = {0, INT64_C(1) << 62, 4}, wrap[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
  CHECK(dt_shape_numel_checked(3, ok, &r) == DT_OK && r == 0);
  CHECK(dt_shape_numel_checked(3, zero_big, &r) != DT_OK);
  CHECK(dt_shape_numel_checked(2, wrap, &r) != DT_OK);
  CHECK(dt_check_shape("zeros", 2, wrap) == DT_ERR);
  CHECK(strcmp(dt_error_message(),
               "zeros: shape {4294967296,4294967296} has more elements than fit in memory (2^64; at most 2^59)") == 0);
  CHECK(dt_tensor_empty(DT_FLOAT32, 3, zero_big, DT_HOST) == NULL);
  int64_t huge[1] = {INT64_C(1) << 58}; /* within the limit, more bytes than any machine has */
  CHECK(dt_tensor_empty(DT_FLOAT64, 1, huge, DT_HOST) == NULL);
  CHECK(strstr(dt_error_message(), "out of memory allocating 2305843009213693952 bytes") != NULL);
  int64_t one[2] = {1, 1};
  dt_tensor *t = dt_tensor_zeros(DT_FLOAT32, 2, one, DT_HOST);
  CHECK(t != NULL);
  CHECK(dt_tensor_expand(t, 2, wrap, "expand") == NULL);
  CHECK(strstr(dt_error_message(), "expand: shape {4294967296,4294967296} has more elements") != NULL);
  int64_t st[2] = {0, 0};
  CHECK(dt_tensor_view_of(t, 2, wrap, st, 0) == NULL);
  dt_tensor_release(t);
}

/* A released storage keeps its size and version; a refill of a view brings the bytes back
 * with the source's values and leaves the version alone; reading it released is an error. */
static void test_storage_release_and_refill(void) {
  int64_t shape[1] = {6}, half[1] = {3}, one[1] = {1};
  dt_tensor *t = dt_tensor_empty(DT_FLOAT64, 1, shape, DT_CPU);
  dt_tensor *tail = dt_tensor_view_of(t, 1, half, one, 3);
  dt_tensor *src = dt_tensor_empty(DT_FLOAT32, 1, half, DT_CPU);
  float *ps = dt_tensor_data(src);
  for (int i = 0; i < 3; i++) ps[i] = (float)i + 1.5f;
  t->storage->version = 7;
  CHECK(dt_storage_release_data(t->storage) == DT_OK);
  CHECK(dt_storage_is_released(t->storage) && t->storage->nbytes == 6 * sizeof(double));
  CHECK(dt_storage_release_data(t->storage) == DT_OK); /* twice: nothing more */
  CHECK(dt_tensor_to_host(tail) == NULL && strstr(dt_error_message(), "released") != NULL);
  CHECK(dt_tensor_refill_(src, tail, "test") != DT_OK); /* a released source */
  CHECK(dt_tensor_refill_(tail, src, "test") == DT_OK);
  CHECK(!dt_storage_is_released(t->storage) && t->storage->version == 7);
  const double *pt = dt_tensor_data(t);
  CHECK(pt[3] == 1.5 && pt[4] == 2.5 && pt[5] == 3.5);
  dt_tensor_release(tail);
  dt_tensor_release(src);
  dt_tensor_release(t);
}

int main(void) {
  TEST_CASE(test_dtype_promotion);
  TEST_CASE(test_half_conversions);
  TEST_CASE(test_strided_copy_and_convert);
  TEST_CASE(test_broadcast_error_names_op);
  TEST_CASE(test_op_table_front_door);
  TEST_CASE(test_block_cache_reuses_large_blocks);
  TEST_CASE(test_block_cache_keeps_bursts_of_mid_blocks);
  TEST_CASE(test_size_arithmetic_is_checked);
  TEST_CASE(test_storage_release_and_refill);
  return CTEST_END();
}
