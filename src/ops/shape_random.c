/* Shape rules of the random ops (generator position: ints[DT_RNG_SLOT_SEED/OFFSET]). */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "ops/ops.h"
#include "ops/random.h"

static int need_float(const char *op, const char *what, dt_dtype t) {
  if (dt_dtype_is_float(t)) return DT_OK;
  return dt_error("%s: %s must be a floating dtype (float32, float64, bfloat16, float16), got %s", op, what,
                  dt_dtype_name(t));
}

static void meta_of(const dt_tensor *t, dt_dtype dtype, dt_meta *m) {
  m->dtype = dtype;
  m->ndim = t->ndim;
  memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

static int factory_meta(const dt_op_args *a, dt_dtype def, dt_meta *out) {
  if (dt_check_shape(a->name, a->nints, a->ints) != DT_OK) return DT_ERR;
  out->dtype = a->has_dtype ? a->dtype : def;
  out->ndim = a->nints;
  memcpy(out->shape, a->ints, sizeof(int64_t) * (size_t)a->nints);
  return DT_OK;
}

/* Value checks shared by rand/uniform_ (scalar = [from, to)) and randn/normal_ (mean, std). */
static int check_params(const dt_op_args *a, int normal) {
  double x = a->scalar[0], y = a->scalar[1];
  if (normal) {
    if (!isfinite(x) || !(y >= 0) || isinf(y))
      return dt_error("%s: needs a finite mean and a finite std >= 0, got mean %g, std %g", a->name, x, y);
  } else if (!isfinite(x) || !isfinite(y) || x > y) {
    return dt_error("%s: needs finite from <= to, got from %g, to %g", a->name, x, y);
  }
  return DT_OK;
}

static int is_normal(const dt_op_args *a) { return a->op == DT_OP_RANDN || a->op == DT_OP_NORMAL_; }

/* rand, randn: ints = shape, float dtype. */
int dt_shape_random_float(const dt_op_args *a, dt_meta *out) {
  if (factory_meta(a, DT_DEFAULT_FLOAT, out) != DT_OK) return DT_ERR;
  if (need_float(a->name, "dtype", out->dtype) != DT_OK) return DT_ERR;
  return check_params(a, is_normal(a));
}

/* uniform_, normal_: in[0] = self, floating. */
int dt_shape_random_inplace(const dt_op_args *a, dt_meta *out) {
  if (need_float(a->name, "the tensor", a->in[0]->dtype) != DT_OK) return DT_ERR;
  meta_of(a->in[0], a->in[0]->dtype, out);
  return check_params(a, is_normal(a));
}

/* randint: ints = shape, ints[LOW/HIGH]; default int64; every value must fit the dtype. */
int dt_shape_randint(const dt_op_args *a, dt_meta *out) {
  if (factory_meta(a, DT_INT64, out) != DT_OK) return DT_ERR;
  int64_t lo = a->ints[DT_RNG_SLOT_LOW], hi = a->ints[DT_RNG_SLOT_HIGH];
  if (lo >= hi) return dt_error("%s: needs low < high, got low %lld, high %lld", a->name, (long long)lo, (long long)hi);
  if (hi > 0 && lo < 0 && (uint64_t)hi - (uint64_t)lo > (uint64_t)INT64_MAX)
    return dt_error("%s: range [%lld, %lld) is wider than 2^63 - 1", a->name, (long long)lo, (long long)hi);
  int64_t min = INT64_MIN, max = INT64_MAX;
  switch (out->dtype) {
  case DT_INT32: min = INT32_MIN, max = INT32_MAX; break;
  case DT_UINT8: min = 0, max = 255; break;
  case DT_BOOL: min = 0, max = 1; break;
  case DT_FLOAT16: min = -2048, max = 2048; break; /* integers exact in the format */
  case DT_BFLOAT16: min = -256, max = 256; break;
  case DT_FLOAT32: min = -(1 << 24), max = 1 << 24; break;
  case DT_FLOAT64: min = -(INT64_C(1) << 53), max = INT64_C(1) << 53; break;
  default: break;
  }
  if (lo < min || hi - 1 > max)
    return dt_error("%s: values in [%lld, %lld) do not fit dtype %s", a->name, (long long)lo, (long long)hi,
                    dt_dtype_name(out->dtype));
  return DT_OK;
}

/* bernoulli: in[0] = probabilities (floating), or with DT_ARG_SCALAR a tensor giving shape
 * and dtype and scalar[0] = p.  Output: in[0]'s shape and dtype. */
int dt_shape_bernoulli(const dt_op_args *a, dt_meta *out) {
  meta_of(a->in[0], a->in[0]->dtype, out);
  if (!(a->flags & DT_ARG_SCALAR)) return need_float(a->name, "probabilities", a->in[0]->dtype);
  double p = a->scalar[0];
  if (!(p >= 0 && p <= 1)) return dt_error("%s: probability must be in [0, 1], got %g", a->name, p);
  return DT_OK;
}

static int check_p(const dt_op_args *a) {
  double p = a->scalar[0];
  if (!(p >= 0 && p <= 1)) return dt_error("%s: probability p must be in [0, 1], got %g", a->name, p);
  return DT_OK;
}

/* dropout: in[0] = x (floating), scalar[0] = p -> (x's shape and dtype, bool mask). */
int dt_shape_dropout(const dt_op_args *a, dt_meta *out) {
  if (need_float(a->name, "input", a->in[0]->dtype) != DT_OK || check_p(a) != DT_OK) return DT_ERR;
  meta_of(a->in[0], a->in[0]->dtype, &out[0]);
  meta_of(a->in[0], DT_BOOL, &out[1]);
  return DT_OK;
}

/* dropout_backward: in[0] = grad (floating), in[1] = bool mask of the same shape. */
int dt_shape_dropout_backward(const dt_op_args *a, dt_meta *out) {
  const dt_tensor *g = a->in[0], *m = a->in[1];
  if (need_float(a->name, "grad", g->dtype) != DT_OK || check_p(a) != DT_OK) return DT_ERR;
  if (m->dtype != DT_BOOL) return dt_error("%s: mask must be bool, got %s", a->name, dt_dtype_name(m->dtype));
  if (!dt_same_shape(g, m)) {
    char b1[64], b2[64];
    return dt_error("%s: grad %s and mask %s differ in shape", a->name, dt_format_shape(b1, 64, g->ndim, g->shape),
                    dt_format_shape(b2, 64, m->ndim, m->shape));
  }
  meta_of(g, g->dtype, out);
  return DT_OK;
}

/* randperm: ints[0] = n, ints[1] = first value; 1-d [n], default int64. */
int dt_shape_randperm(const dt_op_args *a, dt_meta *out) {
  int64_t n = a->ints[0];
  if (n < 0) return dt_error("%s: n must be >= 0, got %lld", a->name, (long long)n);
  out->dtype = a->has_dtype ? a->dtype : DT_INT64;
  out->ndim = 1;
  out->shape[0] = n;
  int64_t max = INT64_MAX;
  switch (out->dtype) {
  case DT_INT32: max = INT32_MAX; break;
  case DT_UINT8: max = 255; break;
  case DT_BOOL: max = 1; break;
  case DT_FLOAT16: max = 2048; break;
  case DT_BFLOAT16: max = 256; break;
  case DT_FLOAT32: max = 1 << 24; break;
  case DT_FLOAT64: max = INT64_C(1) << 53; break;
  default: break;
  }
  int64_t last; /* the largest value, first + n - 1, computed without overflow */
  if (n > 0 && __builtin_add_overflow(a->ints[1], n - 1, &last))
    return dt_error("%s: values up to %lld + %lld do not fit dtype %s", a->name, (long long)a->ints[1],
                    (long long)(n - 1), dt_dtype_name(out->dtype));
  if (n > 0 && last > max)
    return dt_error("%s: values up to %lld do not fit dtype %s", a->name, (long long)last, dt_dtype_name(out->dtype));
  return DT_OK;
}

/* multinomial: in[0] = weights [c] or [r, c]; ints[0] = samples, ints[1] = replacement. */
int dt_shape_multinomial(const dt_op_args *a, dt_meta *out) {
  const dt_tensor *p = a->in[0];
  int64_t k = a->ints[0];
  if (p->ndim != 1 && p->ndim != 2)
    return dt_error("%s: probabilities must be a 1-d or 2-d tensor, got %d-d", a->name, p->ndim);
  if (need_float(a->name, "probabilities", p->dtype) != DT_OK) return DT_ERR;
  if (k <= 0) return dt_error("%s: number of samples must be positive, got %lld", a->name, (long long)k);
  int64_t c = p->shape[p->ndim - 1];
  if (!a->ints[1] && k > c)
    return dt_error("%s: cannot draw %lld samples from %lld categories without replacement", a->name, (long long)k,
                    (long long)c);
  out->dtype = DT_INT64;
  out->ndim = p->ndim;
  if (p->ndim == 2) out->shape[0] = p->shape[0];
  out->shape[p->ndim - 1] = k;
  return DT_OK;
}
