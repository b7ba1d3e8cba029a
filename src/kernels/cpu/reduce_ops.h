/* Elementwise reductions of n buffers into one, per dtype: the arithmetic of all_reduce and
 * reduce_scatter, shared by the threads backend and the MPI backend's custom ops.  The
 * reduce-op enum itself is base/reduce_op.h. */
#ifndef DT_KERNELS_CPU_REDUCE_OPS_H
#define DT_KERNELS_CPU_REDUCE_OPS_H

#include <stddef.h>

#include "base/reduce_op.h"

/* out[i] = in[0][i] op in[1][i] op ... op in[nin-1][i] for i < count (avg: the sum / nin).
 * out may be any one of the inputs (the same pointer: each element is read before it is written).
 * bf16/f16 accumulate in f32 across all inputs. */
void dt_reduce_ops_apply(dt_reduce_op op, dt_dtype dtype, void *out, const void *const *in, int nin,
                         size_t count);
/* buf[i] /= n: the second half of avg when the sum was done elsewhere (MPI). */
void dt_reduce_ops_divide(dt_dtype dtype, void *buf, size_t count, int n);

#endif
