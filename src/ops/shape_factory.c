/* Shape rules of the factories: ints = shape, dtype = requested dtype. */
#include "base/error.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

int dt_shape_factory(const dt_op_args *a, dt_meta *out) {
  if (dt_check_shape("factory", a->nints, a->ints) != DT_OK) return DT_ERR;
  out->dtype = a->has_dtype ? a->dtype : DT_DEFAULT_FLOAT;
  out->ndim = a->nints;
  memcpy(out->shape, a->ints, sizeof(int64_t) * a->nints);
  return DT_OK;
}

/* scalar: start, stop (exclusive), step.  Length ceil((stop - start) / step), as torch. */
int dt_shape_arange(const dt_op_args *a, dt_meta *out) {
  double start = a->scalar[0], stop = a->scalar[1], step = a->scalar[2];
  if (!isfinite(start) || !isfinite(stop) || !isfinite(step))
    return dt_error("%s: start, end and step must be finite (got %g, %g, %g)", a->name, start, stop, step);
  if (step == 0) return dt_error("%s: step must be nonzero", a->name);
  if ((stop - start) / step < 0)
    return dt_error("%s: end %g cannot be reached from start %g with step %g", a->name, stop, start, step);
  double n = ceil((stop - start) / step);
  if (n > (double)((int64_t)1 << 46)) return dt_error("%s: %g elements is too large", a->name, n);
  out->dtype = a->has_dtype ? a->dtype : DT_DEFAULT_FLOAT;
  out->ndim = 1;
  out->shape[0] = (int64_t)n;
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
