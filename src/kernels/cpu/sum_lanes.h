/* The contiguous float32 sum's one summation order, read at memory speed: element i goes to
 * double lane i mod 32 (each lane a running sum in element order), then the lanes fold in
 * halves (lane k += lane k + w for w = 16, 8, 4, 2, 1).  32 independent lanes hide the add
 * latency; the AVX-512, AVX2 and plain C bodies do exactly these double adds (float ->
 * double is exact), so the bits do not depend on the vector width. */
#ifndef DT_KERNELS_CPU_SUM_LANES_H
#define DT_KERNELS_CPU_SUM_LANES_H

#include <stdint.h>

#define DT_SUM_LANES 32

/* x[0] + ... + x[n-1] in the order above, on the widest body this CPU has */
double dt_sum_f32(const float *x, int64_t n);

/* The same on a chosen body, for the tests: width 1 (plain C), 8 (AVX2) or 16 (AVX-512);
 * a body the CPU lacks falls back to the next narrower one.  Returns the width used. */
int dt_sum_f32_width(const float *x, int64_t n, int width, double *sum);

/* acc[i] = ((acc[i] + rows[0][i]) + rows[1][i]) + ... for i < n: the column sums of a sum
 * over leading dims, DT_ADD_ROWS rows a pass (more rows in flight read memory faster, fewer
 * passes over acc); the same adds in every vector width. */
#define DT_ADD_ROWS 4
void dt_add_rows_f32(double *acc, const float *const *rows, int nrows, int64_t n);
/* The same on a chosen body (as dt_sum_f32_width); returns the width used. */
int dt_add_rows_f32_width(double *acc, const float *const *rows, int nrows, int64_t n, int width);

#endif
