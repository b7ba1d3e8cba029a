/* One softmax row with softmax.c's vector exp, for kernels that softmax rows of their own
 * (sdpa's scores): x and y must not overlap. */
#ifndef DT_KERNELS_CPU_SOFTMAX_LINE_H
#define DT_KERNELS_CPU_SOFTMAX_LINE_H

#include <stdint.h>

void dt_cpu_softmax_line_f32(const float *x, float *y, int64_t n);
void dt_cpu_softmax_line_f64(const double *x, double *y, int64_t n);

#endif
