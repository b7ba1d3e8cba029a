/* equal and allclose over dt_iter: each run folds its verdict into ctx->ok. */
#include "kernels/cpu/compare_all.h"
#include "base/error.h"
#include "tensor/iter.h"

#include <math.h>

typedef struct {
  dt_dtype da, db;
  int integral; /* both integer/bool: compare as int64, exact beyond 2^53 */
  double rtol, atol;
  int equal_nan, close; /* close: allclose, else equal */
  int ok;
} cmp_ctx;

static void cmp_f32(char **p, const int64_t *s, int64_t n, void *vctx) {
  cmp_ctx *c = vctx;
  int ok = 1;
  for (int64_t i = 0; i < n; i++) {
    float x = *(const float *)(p[0] + i * s[0]), y = *(const float *)(p[1] + i * s[1]);
    ok &= x == y;
  }
  c->ok &= ok;
}

static void cmp_generic(char **p, const int64_t *s, int64_t n, void *vctx) {
  cmp_ctx *c = vctx;
  if (!c->ok) return;
  for (int64_t i = 0; i < n; i++) {
    const char *pa = p[0] + i * s[0], *pb = p[1] + i * s[1];
    if (c->integral) {
      int64_t x = dt_load_i64(pa, c->da), y = dt_load_i64(pb, c->db);
      if (x == y) continue;
      if (!c->close || fabs((double)x - (double)y) > c->atol + c->rtol * fabs((double)y)) goto differ;
      continue;
    }
    double x = dt_load_f64(pa, c->da), y = dt_load_f64(pb, c->db);
    if (x == y) continue;
    if (c->close && isnan(x) && isnan(y) && c->equal_nan) continue;
    if (!c->close || !isfinite(x) || !isfinite(y) || fabs(x - y) > c->atol + c->rtol * fabs(y)) goto differ;
  }
  return;
differ:
  c->ok = 0;
}

static int compare(const dt_tensor *a, const dt_tensor *b, int ndim, const int64_t *shape, cmp_ctx *c, const char *op) {
  dt_iter it;
  dt_tensor *ops[2] = {(dt_tensor *)a, (dt_tensor *)b};
  if (dt_iter_init(&it, 2, ops, ndim, shape, op) != DT_OK) return DT_ERR;
  c->da = a->dtype, c->db = b->dtype, c->ok = 1;
  c->integral = !dt_dtype_is_float(a->dtype) && !dt_dtype_is_float(b->dtype);
  int fast = !c->close && a->dtype == DT_FLOAT32 && b->dtype == DT_FLOAT32;
  dt_iter_run(&it, fast ? cmp_f32 : cmp_generic, c);
  return DT_OK;
}

static int check_devices(const dt_tensor *a, const dt_tensor *b, const char *op) {
  if (dt_tensor_device(a) != DT_CPU || dt_tensor_device(b) != DT_CPU)
    return dt_error("%s: only CPU tensors are supported", op);
  return DT_OK;
}

int dt_cpu_equal(const dt_tensor *a, const dt_tensor *b, int *result) {
  if (check_devices(a, b, "equal") != DT_OK) return DT_ERR;
  *result = 0;
  if (!dt_same_shape(a, b)) return DT_OK;
  cmp_ctx c = {0};
  if (compare(a, b, a->ndim, a->shape, &c, "equal") != DT_OK) return DT_ERR;
  *result = c.ok;
  return DT_OK;
}

int dt_cpu_allclose(const dt_tensor *a, const dt_tensor *b, double rtol, double atol, int equal_nan, int *result) {
  if (check_devices(a, b, "allclose") != DT_OK) return DT_ERR;
  if (!(rtol >= 0) || !(atol >= 0))
    return dt_error("allclose: rtol and atol must be non-negative, got rtol=%g, atol=%g", rtol, atol);
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  if (dt_broadcast_shapes("allclose", a->ndim, a->shape, b->ndim, b->shape, &ndim, shape) != DT_OK) return DT_ERR;
  cmp_ctx c = {.rtol = rtol, .atol = atol, .equal_nan = equal_nan, .close = 1};
  if (compare(a, b, ndim, shape, &c, "allclose") != DT_OK) return DT_ERR;
  *result = c.ok;
  return DT_OK;
}
