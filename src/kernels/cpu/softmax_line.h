/* One softmax row (log_out: log_softmax) with softmax.c's vector exp, the softmax op's values
 * for a contiguous row, for kernels that softmax rows of their own (sdpa's scores,
 * cross_entropy's logits): x and y must not overlap.  dt_cpu_softmax_dim: the softmax op's whole
 * computation (log_out: log_softmax) of contiguous x [outer, n, inner] along n into y, over
 * the rank's threads, for kernels that need the op's exact values (cross_entropy's). */
#ifndef DT_KERNELS_CPU_SOFTMAX_LINE_H
#define DT_KERNELS_CPU_SOFTMAX_LINE_H

#include <stdint.h>

void dt_cpu_softmax_line_f32(const float *x, float *y, int64_t n, int log_out);
void dt_cpu_softmax_line_f64(const double *x, double *y, int64_t n, int log_out);
/* cross_entropy's rows (y: n elements of scratch, or the row of d logits): log_softmax(x)[t]
 * alone; y = (softmax(x) - onehot(t)) * w, both with the line's values bit for bit. */
float dt_cpu_log_softmax_at_f32(const float *x, float *y, int64_t n, int64_t t);
double dt_cpu_log_softmax_at_f64(const double *x, double *y, int64_t n, int64_t t);
void dt_cpu_softmax_line_scaled_f32(const float *x, float *y, int64_t n, int64_t t, float w);
void dt_cpu_softmax_line_scaled_f64(const double *x, double *y, int64_t n, int64_t t, double w);
void dt_cpu_softmax_dim(const void *x, void *y, int64_t outer, int64_t n, int64_t inner, int log_out, int f64);

#endif
