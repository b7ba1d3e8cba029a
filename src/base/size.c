#include "base/size.h"
#include "base/error.h"

#include <math.h>
#include <stdio.h>

int dt_shape_numel_checked(int ndim, const int64_t *shape, int64_t *numel) {
  int64_t n = 1;
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] == 0) zero = 1;
    else if (dt_mul_size(n, shape[i], &n) != 0 || n > DT_MAX_NUMEL) return -1;
  }
  *numel = zero ? 0 : n;
  return 0;
}

int dt_check_numel(const char *op, int ndim, const int64_t *shape) {
  int64_t n;
  if (dt_shape_numel_checked(ndim, shape, &n) == 0) return DT_OK;
  double lg = 0; /* log2 of the product of the non-zero sizes */
  for (int i = 0; i < ndim; i++)
    if (shape[i] > 0) lg += log2((double)shape[i]);
  char buf[200], mag[32];
  if (fabs(lg - round(lg)) < 1e-9) snprintf(mag, sizeof mag, "2^%.0f", lg);
  else snprintf(mag, sizeof mag, "about 2^%.1f", lg);
  return dt_error("%s: shape %s has more elements than fit in memory (%s; at most 2^%d)", op,
                  dt_format_shape(buf, sizeof buf, ndim, shape), mag, DT_MAX_NUMEL_LOG2);
}
