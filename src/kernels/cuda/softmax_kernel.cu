/* softmax and log_softmax along one dim: one block per row (every index of the other dims); a
 * max pass, a sum-of-exp pass and a write pass, each combined across the block by warp shuffles.
 * Computes in float (double for float64), as the CPU does. */
#include "tensor/cuda_elem.cuh"

#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

extern "C" {
#include "base/error.h"
#include "tensor/cuda.h"
}

typedef struct {
  dtc_iter<2> rows; /* x, out over the other dims */
  int64_t len, xs, os; /* the dim's size and its byte strides in x and out */
} softmax_args;

template <typename T> __device__ inline T block_combine(T v, int is_max, T *shared) {
  for (int k = 16; k > 0; k /= 2) {
    T o = __shfl_down_sync(0xffffffffu, v, k);
    v = is_max ? (o > v || o != o ? o : v) : v + o;
  }
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T t = shared[0];
    for (int w = 1; w < (int)(blockDim.x / 32); w++) t = is_max ? (shared[w] > t || shared[w] != shared[w] ? shared[w] : t) : t + shared[w];
    shared[0] = t;
  }
  __syncthreads();
  T r = shared[0];
  __syncthreads();
  return r;
}

__device__ inline float fexp(float x) { return expf(x); }
__device__ inline double fexp(double x) { return exp(x); }
__device__ inline float flog(float x) { return logf(x); }
__device__ inline double flog(double x) { return log(x); }

template <typename T> __global__ void softmax_kernel(softmax_args a, int log) {
  __shared__ T shared[DTC_THREADS / 32];
  for (int64_t r = blockIdx.x; r < a.rows.n; r += gridDim.x) {
    char *p[2];
    dtc_offsets(a.rows, r, p);
    T m = -INFINITY;
    for (int64_t i = threadIdx.x; i < a.len; i += blockDim.x) {
      T v = (T)dt_cv_load_f64(p[0] + i * a.xs, a.rows.dtype[0]);
      m = v > m || v != v ? v : m;
    }
    m = block_combine<T>(m, 1, shared);
    T sum = 0;
    for (int64_t i = threadIdx.x; i < a.len; i += blockDim.x) sum += fexp((T)dt_cv_load_f64(p[0] + i * a.xs, a.rows.dtype[0]) - m);
    sum = block_combine<T>(sum, 0, shared);
    T lse = flog(sum);
    for (int64_t i = threadIdx.x; i < a.len; i += blockDim.x) {
      T z = (T)dt_cv_load_f64(p[0] + i * a.xs, a.rows.dtype[0]) - m;
      dt_cv_store_f64(p[1] + i * a.os, a.rows.dtype[1], log ? z - lse : fexp(z) / sum);
    }
  }
}

extern "C" int dtc_launch_softmax(int log, const dtc_tensor *out, const dtc_tensor *x, int dim) {
  softmax_args a = {};
  int64_t xe = (int64_t)dt_dtype_size((dt_dtype)x->dtype), oe = (int64_t)dt_dtype_size((dt_dtype)out->dtype);
  a.rows.n = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (d == dim) continue;
    int k = a.rows.ndim++;
    a.rows.shape[k] = x->shape[d];
    a.rows.stride[0][k] = x->stride[d] * xe;
    a.rows.stride[1][k] = out->stride[d] * oe;
    a.rows.n *= x->shape[d];
  }
  a.len = x->ndim ? x->shape[dim] : 1;
  a.xs = x->ndim ? x->stride[dim] * xe : 0;
  a.os = x->ndim ? out->stride[dim] * oe : 0;
  a.rows.ptr[0] = (char *)x->data, a.rows.ptr[1] = (char *)out->data;
  a.rows.dtype[0] = x->dtype, a.rows.dtype[1] = out->dtype;
  if (a.rows.n == 0 || a.len == 0) return DT_OK;
  cudaStream_t s = (cudaStream_t)dt_cuda_stream();
  if (!s) return DT_ERR;
  unsigned blocks = (unsigned)(a.rows.n < 65535 * 16 ? a.rows.n : 65535 * 16);
  if (out->dtype == DT_FLOAT64) softmax_kernel<double><<<blocks, DTC_THREADS, 0, s>>>(a, log);
  else softmax_kernel<float><<<blocks, DTC_THREADS, 0, s>>>(a, log);
  return dt_cuda_launched(log ? "log_softmax" : "softmax");
}
