/* C tests of the io layer (JSON codec, non-contiguous saves) and of the nn kernels on
 * strided (non-contiguous) inputs, which the Lua API cannot build until views land. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/json.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "kernels/local_op.h"
#include "ctest.h"

static void test_json_values(void) {
  dt_json *j = NULL;
  const char *text = " {\"a\": [1, -2, 9223372036854775807], \"s\": \"x\\ty\\u00e9\\ud83d\\ude00\", \"o\": {}} ";
  CHECK(dt_json_parse(text, strlen(text), &j) == DT_OK);
  const dt_json *a = dt_json_get(j, "a"), *s = dt_json_get(j, "s");
  CHECK(a && a->type == DT_JSON_ARRAY && a->n == 3);
  CHECK(a && a->items[1]->integer == -2 && a->items[2]->integer == INT64_MAX);
  CHECK(s && strcmp(s->str, "x\ty\xc3\xa9\xf0\x9f\x98\x80") == 0);
  CHECK(dt_json_get(j, "o") && dt_json_get(j, "o")->n == 0);
  CHECK(dt_json_get(j, "missing") == NULL);
  dt_json_free(j);
}

static void test_json_rejects(void) {
  const char *bad[] = {"", "{", "{\"a\":1,}", "[1 2]", "1.5", "1e3", "01", "true", "null", "\"\\x\"", "\"a\nb\"",
                       "9223372036854775808", "{\"a\":1}x", "\"\\ud800\"", "{1:2}", "[-]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dt_json *j = NULL;
    int rc = dt_json_parse(bad[i], strlen(bad[i]), &j);
    if (rc == DT_OK) printf("  accepted: %s\n", bad[i]);
    CHECK(rc == DT_ERR);
    CHECK(strncmp(dt_error_message(), "json: ", 6) == 0);
  }
}

static void test_json_writer_roundtrip(void) {
  dt_json_buf b = {0};
  dt_json_put_raw(&b, "[", 1);
  dt_json_put_string(&b, "q\"\\\n\x01");
  dt_json_put_raw(&b, ",", 1);
  dt_json_put_int(&b, INT64_MIN);
  dt_json_put_raw(&b, "]", 1);
  CHECK(!b.failed);
  dt_json *j = NULL;
  CHECK(dt_json_parse(b.data, b.len, &j) == DT_OK);
  CHECK(j && strcmp(j->items[0]->str, "q\"\\\n\x01") == 0 && j->items[1]->integer == INT64_MIN);
  dt_json_free(j);
  dt_json_buf_free(&b);
}

/* A [3, 2] float64 view transposed from a [2, 3] tensor holding 0..5. */
static dt_tensor *transposed(dt_tensor **base) {
  int64_t shape[2] = {2, 3}, tshape[2] = {3, 2}, tstride[2] = {1, 3};
  *base = dt_tensor_empty(DT_FLOAT64, 2, shape, DT_CPU);
  for (int i = 0; i < 6; i++) ((double *)dt_tensor_data(*base))[i] = i;
  return dt_tensor_view_of(*base, 2, tshape, tstride, 0);
}

static void test_save_non_contiguous(void) {
  dt_tensor *base, *t = transposed(&base);
  CHECK(!dt_tensor_is_contiguous(t));
  char path[] = "/tmp/dt_test_io_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  char *name = "t";
  dt_safetensors st = {.n = 1, .names = &name, .tensors = &t}, back;
  CHECK(dt_safetensors_save(path, &st) == DT_OK);
  CHECK(dt_safetensors_load(path, &back) == DT_OK);
  const double expect[6] = {0, 3, 1, 4, 2, 5};
  CHECK(back.n == 1 && back.tensors[0]->shape[0] == 3 && memcmp(dt_tensor_data(back.tensors[0]), expect, 48) == 0);
  dt_safetensors_free(&back);
  CHECK(dt_npy_save(path, t) == DT_OK);
  dt_tensor *n = dt_npy_load(path);
  CHECK(n && n->shape[0] == 3 && n->shape[1] == 2 && memcmp(dt_tensor_data(n), expect, 48) == 0);
  if (n) dt_tensor_release(n);
  unlink(path);
  dt_tensor_release(t);
  dt_tensor_release(base);
}

/* Runs op on the strided inputs and on contiguous copies; the results must agree exactly. */
static int same_on_copies(dt_op_id id, dt_op_args *a) {
  dt_tensor *r1 = NULL, *r2 = NULL, *copies[4] = {0};
  dt_tensor *const *orig = a->in;
  if (dt_op_call(id, a, &r1) != DT_OK) return printf("  %s\n", dt_error_message()), 0;
  for (int i = 0; i < a->nin; i++) copies[i] = orig[i] ? dt_tensor_clone(orig[i]) : NULL;
  a->in = copies;
  int ok = dt_op_call(id, a, &r2) == DT_OK && dt_same_shape(r1, r2) &&
           memcmp(dt_tensor_data(r1), dt_tensor_data(r2), (size_t)dt_tensor_numel(r1) * dt_tensor_elsize(r1)) == 0;
  a->in = orig;
  for (int i = 0; i < a->nin; i++)
    if (copies[i]) dt_tensor_release(copies[i]);
  dt_tensor_release(r1);
  if (r2) dt_tensor_release(r2);
  return ok;
}

static void test_nn_strided_inputs(void) {
  dt_tensor *base, *x = transposed(&base); /* [3, 2] */
  dt_tensor *w = dt_tensor_full(DT_FLOAT64, 1, (int64_t[]){2}, 1.5, DT_CPU);
  dt_tensor *ln_in[3] = {x, w, NULL};
  dt_op_args ln = {.in = ln_in, .nin = 3, .nints = 2, .ints = {1, 2}, .scalar = {1e-5}, .nscalar = 1};
  CHECK(same_on_copies(DT_OP_LAYER_NORM, &ln));
  dt_op_args rms = {.in = ln_in, .nin = 2, .nints = 2, .ints = {1, 2}, .scalar = {1e-6}, .nscalar = 1};
  CHECK(same_on_copies(DT_OP_RMS_NORM, &rms));
  /* sdpa: q = x [3, 2], k = x, v = x (all strided) with a causal mask */
  dt_tensor *at_in[3] = {x, x, x};
  dt_op_args at = {.in = at_in, .nin = 3, .flags = 1};
  CHECK(same_on_copies(DT_OP_SDPA, &at));
  /* embedding from a strided weight, cross_entropy from strided logits */
  dt_tensor *ids = dt_tensor_full(DT_INT64, 1, (int64_t[]){2}, 2, DT_CPU);
  dt_tensor *em_in[2] = {ids, x};
  dt_op_args em = {.in = em_in, .nin = 2};
  CHECK(same_on_copies(DT_OP_EMBEDDING, &em));
  dt_tensor *tg = dt_tensor_full(DT_INT64, 1, (int64_t[]){3}, 1, DT_CPU);
  dt_tensor *ce_in[2] = {x, tg};
  dt_op_args ce = {.in = ce_in, .nin = 2, .nints = 2, .ints = {-100, 0}};
  CHECK(same_on_copies(DT_OP_CROSS_ENTROPY, &ce));
  /* the C kernels check 0-based ranges themselves */
  ((int64_t *)dt_tensor_data(ids))[1] = 3;
  dt_tensor *out = NULL;
  CHECK(dt_op_call(DT_OP_EMBEDDING, &em, &out) == DT_ERR);
  CHECK(strcmp(dt_error_message(), "embedding: id 3 out of range for vocab size 3 (0-based)") == 0);
  /* a row-wise shard of the vocab (rows 2..4 of it): ids outside read zeros, no error */
  ((int64_t *)dt_tensor_data(ids))[0] = 1, ((int64_t *)dt_tensor_data(ids))[1] = 4;
  dt_op_args shard = {.in = em_in, .nin = 2, .flags = DT_ARG_VOCAB_SHARD, .nints = 1, .ints = {2}};
  CHECK(dt_op_call(DT_OP_EMBEDDING, &shard, &out) == DT_OK);
  dt_tensor *xc = dt_tensor_contiguous(x);
  const double *y = dt_tensor_data(out), *xr = dt_tensor_data(xc);
  CHECK(y[0] == 0 && y[1] == 0 && y[2] == xr[4] && y[3] == xr[5]);
  dt_tensor_release(xc);
  dt_tensor_release(out);
  out = NULL;
  ((int64_t *)dt_tensor_data(tg))[0] = 2;
  CHECK(dt_op_call(DT_OP_CROSS_ENTROPY, &ce, &out) == DT_ERR);
  CHECK(strcmp(dt_error_message(), "cross_entropy: target 2 out of range for 2 classes (0-based)") == 0);
  dt_tensor_release(tg);
  dt_tensor_release(ids);
  dt_tensor_release(w);
  dt_tensor_release(x);
  dt_tensor_release(base);
}

int main(void) {
  TEST_CASE(test_json_values);
  TEST_CASE(test_json_rejects);
  TEST_CASE(test_json_writer_roundtrip);
  TEST_CASE(test_save_non_contiguous);
  TEST_CASE(test_nn_strided_inputs);
  return CTEST_END();
}
