/* equal and allclose over dt_iter: each run folds its verdict into ctx->ok; the answer is a
 * 0-d bool tensor (the shape rule checked the arguments). */
#include "base/error.h"
#include "kernels/cpu/kernel_table.h"
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

static void answer(dt_tensor *out, int ok) { *(unsigned char *)dt_tensor_data(out) = (unsigned char)(ok != 0); }

/* same shape and equal values (compared after promotion; NaN is unequal) */
int dt_cpu_equal(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *x = a->in[0], *y = a->in[1];
  cmp_ctx c = {0};
  if (dt_same_shape(x, y) && compare(x, y, x->ndim, x->shape, &c, a->name) != DT_OK) return DT_ERR;
  answer(out[0], dt_same_shape(x, y) && c.ok);
  return DT_OK;
}

/* every |x - y| <= atol + rtol * |y| (broadcast; equal infinities are close; NaN is close to
 * nothing unless equal_nan) */
int dt_cpu_allclose(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *x = a->in[0], *y = a->in[1];
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  if (dt_broadcast_shapes(a->name, x->ndim, x->shape, y->ndim, y->shape, &ndim, shape) != DT_OK) return DT_ERR;
  cmp_ctx c = {.rtol = a->scalar[0], .atol = a->scalar[1], .equal_nan = a->flags & DT_ARG_EQUAL_NAN, .close = 1};
  if (compare(x, y, ndim, shape, &c, a->name) != DT_OK) return DT_ERR;
  answer(out[0], c.ok);
  return DT_OK;
}
