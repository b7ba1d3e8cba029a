/* Whole-tensor comparisons answering one boolean (not op-table rows: no tensor result). */
#ifndef DT_KERNELS_CPU_COMPARE_ALL_H
#define DT_KERNELS_CPU_COMPARE_ALL_H

#include "tensor/tensor.h"

/* *result = same shape and equal values (compared after promotion; NaN is unequal). */
int dt_cpu_equal(const dt_tensor *a, const dt_tensor *b, int *result);
/* *result = every |a - b| <= atol + rtol * |b| (a and b broadcast; equal infinities are
 * close; NaN is close to nothing unless equal_nan). */
int dt_cpu_allclose(const dt_tensor *a, const dt_tensor *b, double rtol, double atol, int equal_nan, int *result);

#endif
