/* Strided N-ary iteration: the engine under copy and every pointwise kernel.
 * Operands share one iteration shape; each has byte strides (0 where broadcast).
 * Dimensions are coalesced where memory allows, and the inner loop is handed
 * runs of the innermost dimension with per-operand byte strides. */
#ifndef DT_TENSOR_ITER_H
#define DT_TENSOR_ITER_H

#include <stdint.h>

#include "base/thread_pool.h"
#include "tensor/tensor.h"

#define DT_ITER_MAX_OPERANDS 4

typedef struct dt_iter {
  int nops, ndim;
  int64_t shape[DT_MAX_DIMS];
  int64_t strides[DT_ITER_MAX_OPERANDS][DT_MAX_DIMS]; /* bytes */
  char *base[DT_ITER_MAX_OPERANDS];
} dt_iter;

/* ptrs[k] points at the run's first element of operand k; strides[k] is its byte step. */
typedef void (*dt_iter_inner_fn)(char **ptrs, const int64_t *strides, int64_t n, void *ctx);

/* Operand 0 is usually the output and defines the iteration shape (ndim, shape); the
 * others must broadcast to it (they are expanded with stride 0). */
int dt_iter_init(dt_iter *it, int nops, dt_tensor *const *ops, int ndim, const int64_t *shape, const char *op);
void dt_iter_run(const dt_iter *it, dt_iter_inner_fn fn, void *ctx);
/* The same on the calling rank's intra-op threads (base/thread_pool.h) when there are at least
 * 2 * DT_ITER_PARALLEL_GRAIN elements: each thread runs fn over its own range of the elements,
 * so fn must only write the elements it is given (ctx is shared, read-only but for flags that
 * every writer sets to the same value).  Results are those of dt_iter_run. */
#define DT_ITER_PARALLEL_GRAIN DT_PARALLEL_GRAIN
void dt_iter_run_parallel(const dt_iter *it, dt_iter_inner_fn fn, void *ctx);
int64_t dt_iter_numel(const dt_iter *it);
/* True when every operand is contiguous with unit element stride in a single run. */
int dt_iter_is_flat(const dt_iter *it, const size_t *elsizes);

#endif
