/* Element-by-element walks over strided tensors, for the kernels that move single elements
 * (gather/scatter, sort, flip/roll/repeat, tril/triu, diag): the coordinates of a row-major
 * position, and a tensor's element at coordinates.  A 0-d tensor walks as one element. */
#ifndef DT_KERNELS_CPU_ELEM_WALK_H
#define DT_KERNELS_CPU_ELEM_WALK_H

#include "tensor/tensor.h"

/* advances c (row-major over shape, nd dims) by one */
static inline void dt_walk_next(int nd, const int64_t *shape, int64_t *c) {
  for (int d = nd - 1; d >= 0; d--) {
    if (++c[d] < shape[d]) return;
    c[d] = 0;
  }
}

/* element offset (in elements, from the view's first element) of coordinates c in t */
static inline int64_t dt_walk_offset(const dt_tensor *t, const int64_t *c) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) off += c[d] * t->stride[d];
  return off;
}

/* pointer to t's element at coordinates c */
static inline char *dt_walk_at(const dt_tensor *t, const int64_t *c) {
  return (char *)dt_tensor_data(t) + dt_walk_offset(t, c) * (int64_t)dt_tensor_elsize(t);
}

#endif
