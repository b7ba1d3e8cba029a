/* Elementwise reductions of n buffers into one, per dtype: the arithmetic of all_reduce and
 * reduce_scatter, shared by the threads backend and the MPI backend's custom ops. */
#ifndef DT_KERNELS_CPU_REDUCE_OPS_H
#define DT_KERNELS_CPU_REDUCE_OPS_H

#include <stddef.h>

#include "base/dtype.h"

typedef enum dt_reduce_op {
  DT_REDUCE_SUM = 0,
  DT_REDUCE_AVG,
  DT_REDUCE_MAX,
  DT_REDUCE_MIN,
  DT_REDUCE_PRODUCT,
  DT_NREDUCE_OPS
} dt_reduce_op;

const char *dt_reduce_op_name(dt_reduce_op op);
/* "sum", "avg"/"mean", "max", "min", "product"/"prod"; DT_ERR + message otherwise. */
int dt_reduce_op_from_name(const char *name, dt_reduce_op *out);
/* avg needs a floating dtype (as in PyTorch); DT_ERR + message naming `who` otherwise. */
int dt_reduce_op_check(dt_reduce_op op, dt_dtype dtype, const char *who);

/* out[i] = in[0][i] op in[1][i] op ... op in[nin-1][i] for i < count (avg: the sum / nin).
 * out may alias in[0] (and only in[0]).  bf16/f16 accumulate in f32 across all inputs. */
void dt_reduce_ops_apply(dt_reduce_op op, dt_dtype dtype, void *out, const void *const *in, int nin,
                         size_t count);
/* buf[i] /= n: the second half of avg when the sum was done elsewhere (MPI). */
void dt_reduce_ops_divide(dt_dtype dtype, void *buf, size_t count, int n);

#endif
