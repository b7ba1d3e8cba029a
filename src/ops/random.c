/* The random ops' regions and generator word counts (the contract: ops/random.h). */
#include "ops/random.h"

#include <string.h>

#include "base/error.h"

void dt_rng_region_whole(dt_rng_region *r, int ndim, const int64_t *shape) {
  r->ndim = ndim;
  for (int d = 0; d < ndim; d++) r->gshape[d] = r->shape[d] = shape[d], r->start[d] = 0;
}

int dt_rng_region_of(const dt_op_args *a, const dt_tensor *t, dt_rng_region *r) {
  if (!a->region) return dt_rng_region_whole(r, t->ndim, t->shape), DT_OK;
  *r = *a->region;
  if (r->ndim != t->ndim || memcmp(r->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) != 0)
    return dt_error("%s: the random region does not match the local tensor's shape", a->name);
  return DT_OK;
}

uint64_t dt_rng_randperm_words(int64_t n) {
  return dt_rng_round_words((uint64_t)n * ((uint64_t)n > 0xffffffffull ? 2u : 1u));
}

uint64_t dt_rng_multinomial_words(int64_t rows, int64_t cats, int64_t samples, int replacement) {
  return dt_rng_round_words(2u * (uint64_t)rows * (uint64_t)(replacement ? samples : cats));
}
