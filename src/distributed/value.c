/* The user-visible value (see value.h). */
#include "distributed/value.h"

void dt_value_init(dt_value *v, dt_tensor *local, dt_dspec *spec) {
  v->local = local;
  v->spec = spec;
  v->grad = NULL;
}

void dt_value_clear(dt_value *v) {
  if (v->local) dt_tensor_release(v->local);
  dt_dspec_free(v->spec);
  v->local = NULL, v->spec = NULL;
}
