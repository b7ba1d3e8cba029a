/* uniform_'s launch arguments (uniform_setup.c), in every build. */
#ifndef DT_KERNELS_CUDA_UNIFORM_SETUP_H
#define DT_KERNELS_CUDA_UNIFORM_SETUP_H

#include "kernels/cuda/launch.h"
#include "ops/op_args.h"

/* u for filling t (its region from a) at a's generator position; dst left NULL. */
int dtc_uniform_setup(const dt_op_args *a, const dt_tensor *t, dtc_uniform *u);

#endif
