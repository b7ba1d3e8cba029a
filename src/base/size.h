/* Checked size arithmetic.  Every product of sizes (element counts, strides, byte counts)
 * goes through these, so a shape can never claim more elements than its storage holds.
 * The element limit keeps numel * element size (8 bytes at most, 16 to spare) and sums of
 * such byte counts inside int64 and size_t. */
#ifndef DT_BASE_SIZE_H
#define DT_BASE_SIZE_H

#include "base/export.h"

#include <stdint.h>

/* The most elements a shape may have: 2^59. */
#define DT_MAX_NUMEL_LOG2 59
#define DT_MAX_NUMEL ((int64_t)1 << DT_MAX_NUMEL_LOG2)

/* *out = a * b, or a + b: DT_OK (0), or DT_ERR when the result overflows int64 (*out is then
 * unspecified).  No message: callers name the op and the values. */
static inline int dt_mul_size(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline int dt_add_size(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }

/* The element count of a shape, checked: DT_ERR (no message) when a size is negative or the
 * product of the non-zero sizes exceeds DT_MAX_NUMEL (a 0 in one dim does not hide an
 * overflow in the others). */
DT_API int dt_shape_numel_checked(int ndim, const int64_t *shape, int64_t *numel);
/* The same with the message "<op>: shape {4294967296,4294967296} has more elements than fit
 * in memory (2^64; at most 2^59)".  Sizes must already be non-negative. */
DT_API int dt_check_numel(const char *op, int ndim, const int64_t *shape);

#endif
