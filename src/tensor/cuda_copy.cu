/* The CUDA device's strided copy (device.h's copy_strided): any layout to any layout, src
 * broadcast, dtype converted as copy.c converts on the host (integers exactly through int64,
 * everything else through double); one contiguous same-dtype copy is a device memcpy. */
#include "tensor/cuda_elem.cuh"

#include <cuda_runtime.h>

extern "C" {
#include "base/error.h"
#include "tensor/cuda.h"
#include "tensor/device.h"
}

__global__ void dtc_copy_kernel(dtc_iter<2> it) {
  int integral = !dtc_is_float(it.dtype[0]) && !dtc_is_float(it.dtype[1]);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.n; i += (int64_t)gridDim.x * blockDim.x) {
    char *p[2];
    dtc_offsets(it, i, p);
    if (integral) dt_cv_store_i64(p[0], it.dtype[0], dt_cv_load_i64(p[1], it.dtype[1]));
    else dt_cv_store_f64(p[0], it.dtype[0], dt_cv_load_f64(p[1], it.dtype[1]));
  }
}

static int contiguous(int ndim, const int64_t *shape, const int64_t *stride) {
  int64_t expect = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (shape[d] != 1 && stride[d] != expect) return 0;
    expect *= shape[d];
  }
  return 1;
}

extern "C" int dt_cuda_copy_strided(const dt_strided_copy *c) {
  int64_t n = 1;
  for (int d = 0; d < c->ndim; d++) n *= c->shape[d];
  if (n == 0) return DT_OK;
  cudaStream_t s = (cudaStream_t)dt_cuda_stream();
  if (!s) return DT_ERR;
  size_t de = dt_dtype_size((dt_dtype)c->dst_dtype), se = dt_dtype_size((dt_dtype)c->src_dtype);
  if (c->dst_dtype == c->src_dtype && contiguous(c->ndim, c->shape, c->dst_stride) &&
      contiguous(c->ndim, c->shape, c->src_stride)) {
    DT_CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, (size_t)n * de, cudaMemcpyDeviceToDevice, s));
    return DT_OK;
  }
  dtc_iter<2> it = {};
  it.ndim = c->ndim, it.n = n;
  for (int d = 0; d < c->ndim; d++) {
    it.shape[d] = c->shape[d];
    it.stride[0][d] = c->dst_stride[d] * (int64_t)de;
    it.stride[1][d] = c->src_stride[d] * (int64_t)se;
  }
  it.ptr[0] = (char *)c->dst, it.ptr[1] = (char *)c->src;
  it.dtype[0] = c->dst_dtype, it.dtype[1] = c->src_dtype;
  dtc_copy_kernel<<<dtc_blocks(n), DTC_THREADS, 0, s>>>(it);
  return dt_cuda_launched("copy");
}
