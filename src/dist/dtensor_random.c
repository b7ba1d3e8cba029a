/* Random DTensor factories (see dtensor_random.h). */
#include "dist/dtensor_random.h"

#include "base/error.h"

int dt_dtensor_rand_fill(const dt_dspec *s, dt_tensor *local, int normal, uint64_t seed, uint64_t offset,
                         uint64_t *words) {
  dt_rng_fill f = {.kind = normal ? DT_RNG_NORMAL : DT_RNG_UNIFORM, .dtype = s->dtype, .dst = dt_tensor_data(local),
                   .seed = seed, .offset = offset, .a = 0, .b = 1};
  if (!dt_dtype_is_float(s->dtype))
    return dt_error("%s: needs a floating dtype, got %s", normal ? "randn" : "rand", dt_dtype_name(s->dtype));
  dt_rng_fill_init(&f);
  *words = dt_rng_words(f.wide, dt_shape_numel(s->ndim, s->shape));
  if (s->mesh->me < 0) return DT_OK;
  dt_rng_region r = {.ndim = s->ndim};
  int64_t off[DT_MAX_DIMS];
  dt_dspec_local(s, s->p, s->mesh->coord, r.shape, off);
  for (int i = 0; i < s->ndim; i++) r.gshape[i] = s->shape[i], r.start[i] = off[i];
  return dt_rng_fill_region(&f, &r);
}
