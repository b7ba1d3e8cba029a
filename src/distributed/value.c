/* The user-visible value (see value.h). */
#include "distributed/value.h"

void dt_value_clear(dt_value *v) {
  if (v->local) dt_tensor_release(v->local);
  dt_dspec_free(v->spec);
  if (v->autograd) v->autograd->release(v->autograd);
  v->local = NULL, v->spec = NULL, v->autograd = NULL;
}
