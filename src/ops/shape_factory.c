/* Shape rules of the factories: ints = shape, dtype = requested dtype. */
#include "base/error.h"
#include "ops/ops.h"

#include <string.h>

int dt_shape_factory(const dt_op_args *a, dt_meta *out) {
  if (dt_check_shape("factory", a->nints, a->ints) != DT_OK) return DT_ERR;
  out->dtype = a->has_dtype ? a->dtype : DT_DEFAULT_FLOAT;
  out->ndim = a->nints;
  memcpy(out->shape, a->ints, sizeof(int64_t) * a->nints);
  return DT_OK;
}
