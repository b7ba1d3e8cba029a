/* Random DTensor factories: each rank fills only its shard, with the values the same op
 * gives the global tensor on one device (kernels/random.h regions). */
#ifndef DT_DIST_DTENSOR_RANDOM_H
#define DT_DIST_DTENSOR_RANDOM_H

#include "dist/dtensor.h"
#include "kernels/random.h"

/* Fills local (contiguous, this rank's shard of s) with uniform [0,1) (normal: 0) or
 * standard normal values at generator position (seed, offset); *words is what the op
 * consumed over the global tensor (identical on every rank, also off-mesh). */
int dt_dtensor_rand_fill(const dt_dspec *s, dt_tensor *local, int normal, uint64_t seed, uint64_t offset,
                         uint64_t *words);

#endif
