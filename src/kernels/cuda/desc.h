/* Tensors as the launchers' plain descriptors (launch.h), for the C side of the CUDA backend. */
#ifndef DT_KERNELS_CUDA_DESC_H
#define DT_KERNELS_CUDA_DESC_H

#include "kernels/cuda/launch.h"
#include "tensor/tensor.h"

_Static_assert(DTC_MAX_DIMS == DT_MAX_DIMS, "launch.h's DTC_MAX_DIMS must match DT_MAX_DIMS");

static inline dtc_tensor dtc_of(const dt_tensor *t) {
  dtc_tensor d = {dt_tensor_data(t), t->dtype, t->ndim, {0}, {0}};
  for (int i = 0; i < t->ndim; i++) d.shape[i] = t->shape[i], d.stride[i] = t->stride[i];
  return d;
}

/* t seen with to's shape: leading dims added and size-1 dims stretched with stride 0 (the shape
 * rule has checked that t broadcasts to it). */
static inline dtc_tensor dtc_broadcast(const dt_tensor *t, const dt_tensor *to) {
  dtc_tensor d = {dt_tensor_data(t), t->dtype, to->ndim, {0}, {0}};
  int lead = to->ndim - t->ndim;
  for (int i = 0; i < to->ndim; i++) {
    int j = i - lead;
    d.shape[i] = to->shape[i];
    d.stride[i] = j < 0 || t->shape[j] != to->shape[i] ? 0 : t->stride[j];
  }
  return d;
}

#endif
