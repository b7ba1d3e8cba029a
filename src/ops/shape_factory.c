/* Shape rules of the factories: ints = shape, dtype = requested dtype. */
#include "base/error.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

int dt_shape_factory(const dt_op_args *a, dt_meta *out) {
  if (dt_check_shape(a->name, a->nints, a->ints) != DT_OK) return DT_ERR;
  out->dtype = a->has_dtype ? a->dtype : DT_DEFAULT_FLOAT;
  if (a->nscalar && dt_check_value_fits(a->name, out->dtype, a->flags & DT_ARG_SCALAR_INT, a->ints[DT_MAX_DIMS],
                                        a->scalar[0]) != DT_OK)
    return DT_ERR;
  out->ndim = a->nints;
  memcpy(out->shape, a->ints, sizeof(int64_t) * a->nints);
  return DT_OK;
}

/* Length of arange over integers, exact for the whole int64 range. */
static int arange_len_int(const dt_op_args *a, int64_t *n) {
  int64_t start = a->ints[0], stop = a->ints[1], step = a->ints[2];
  if (step == 0) return dt_error("%s: step must be nonzero", a->name);
  if ((stop > start && step < 0) || (stop < start && step > 0))
    return dt_error("%s: end %lld cannot be reached from start %lld with step %lld", a->name, (long long)stop,
                    (long long)start, (long long)step);
  uint64_t diff = stop >= start ? (uint64_t)stop - (uint64_t)start : (uint64_t)start - (uint64_t)stop;
  uint64_t st = step > 0 ? (uint64_t)step : -(uint64_t)step;
  uint64_t len = diff / st + (diff % st != 0);
  if (len > (uint64_t)1 << 46) return dt_error("%s: %llu elements is too large", a->name, (unsigned long long)len);
  *n = (int64_t)len;
  return DT_OK;
}

/* Length ceil((stop - start) / step) in double, as torch does for floating arguments. */
static int arange_len_float(const dt_op_args *a, int64_t *n) {
  double start = a->scalar[0], stop = a->scalar[1], step = a->scalar[2];
  if (!isfinite(start) || !isfinite(stop) || !isfinite(step))
    return dt_error("%s: start, end and step must be finite (got %g, %g, %g)", a->name, start, stop, step);
  if (step == 0) return dt_error("%s: step must be nonzero", a->name);
  if ((stop - start) / step < 0)
    return dt_error("%s: end %g cannot be reached from start %g with step %g", a->name, stop, start, step);
  double len = ceil((stop - start) / step);
  if (len > (double)((int64_t)1 << 46)) return dt_error("%s: %g elements is too large", a->name, len);
  *n = (int64_t)len;
  return DT_OK;
}

/* scalar[0..2]: start, stop (exclusive), step; with DT_ARG_SCALAR_INT the exact integer
 * values are in ints[0..2] instead. */
int dt_shape_arange(const dt_op_args *a, dt_meta *out) {
  int64_t n = 0;
  if (((a->flags & DT_ARG_SCALAR_INT) ? arange_len_int(a, &n) : arange_len_float(a, &n)) != DT_OK) return DT_ERR;
  out->dtype = a->has_dtype ? a->dtype : DT_DEFAULT_FLOAT;
  out->ndim = 1;
  out->shape[0] = n;
  return DT_OK;
}

/* ints: n rows, m columns. */
int dt_shape_eye(const dt_op_args *a, dt_meta *out) {
  if (a->ints[0] < 0 || a->ints[1] < 0)
    return dt_error("%s: sizes must be non-negative, got n=%lld, m=%lld", a->name, (long long)a->ints[0],
                    (long long)a->ints[1]);
  out->dtype = a->has_dtype ? a->dtype : DT_DEFAULT_FLOAT;
  out->ndim = 2;
  out->shape[0] = a->ints[0];
  out->shape[1] = a->ints[1];
  return DT_OK;
}
