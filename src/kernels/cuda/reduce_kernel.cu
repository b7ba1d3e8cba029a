/* Reductions (sum, mean, prod, amax, amin) over any set of dims: one block per output element;
 * its threads stride over the reduced elements, then combine by warp shuffles and one shared
 * array.  Floating inputs accumulate in double (sums within reordering error of the CPU's),
 * integers in int64 (wrapping, as torch); amax/amin propagate NaN. */
#include "tensor/cuda_elem.cuh"

#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

extern "C" {
#include "base/error.h"
#include "tensor/cuda.h"
}

/* kept: the output's dims (x's kept strides); red: the reduced dims (x's strides) */
typedef struct {
  dtc_iter<1> kept, red;
  char *out;
  int out_dtype, x_dtype, kind;
  int64_t out_es;
} reduce_args;

template <typename T> __device__ inline T combine(int kind, T a, T b);
template <> __device__ inline double combine<double>(int kind, double a, double b) {
  switch (kind) {
  case DTC_PROD: return a * b;
  case DTC_AMAX: return (a != a || b != b) ? (a != a ? a : b) : (a > b ? a : b);
  case DTC_AMIN: return (a != a || b != b) ? (a != a ? a : b) : (a < b ? a : b);
  default: return a + b;
  }
}
template <> __device__ inline int64_t combine<int64_t>(int kind, int64_t a, int64_t b) {
  switch (kind) {
  case DTC_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
  case DTC_AMAX: return a > b ? a : b;
  case DTC_AMIN: return a < b ? a : b;
  default: return (int64_t)((uint64_t)a + (uint64_t)b);
  }
}

template <typename T> __device__ inline T load_acc(const char *p, int dtype);
template <> __device__ inline double load_acc<double>(const char *p, int dtype) { return dt_cv_load_f64(p, dtype); }
template <> __device__ inline int64_t load_acc<int64_t>(const char *p, int dtype) { return dt_cv_load_i64(p, dtype); }

__device__ inline void store_acc(char *p, int dtype, double v) { dt_cv_store_f64(p, dtype, v); }
__device__ inline void store_acc(char *p, int dtype, int64_t v) { dt_cv_store_i64(p, dtype, v); }

template <typename T> __device__ inline T shuffle_down(T v, int k) { return __shfl_down_sync(0xffffffffu, v, k); }

template <typename T> __global__ void reduce_kernel(reduce_args r, T identity) {
  __shared__ T partial[DTC_THREADS / 32];
  for (int64_t o = blockIdx.x; o < r.kept.n; o += gridDim.x) {
    char *base[1];
    dtc_offsets(r.kept, o, base);
    T acc = identity;
    int first = 1; /* amax/amin: start from the first element seen, not a sentinel */
    for (int64_t i = threadIdx.x; i < r.red.n; i += blockDim.x) {
      char *p[1];
      dtc_offsets(r.red, i, p);
      T v = load_acc<T>(base[0] + (p[0] - r.red.ptr[0]), r.x_dtype);
      acc = first && (r.kind == DTC_AMAX || r.kind == DTC_AMIN) ? v : combine<T>(r.kind, acc, v);
      first = 0;
    }
    /* a thread that saw nothing holds the identity; for amax/amin it must not win: give it
     * the value of lane 0's first element instead (every block has one: red.n > 0 there) */
    if (first && (r.kind == DTC_AMAX || r.kind == DTC_AMIN)) acc = load_acc<T>(base[0], r.x_dtype);
    for (int k = 16; k > 0; k /= 2) acc = combine<T>(r.kind, acc, shuffle_down(acc, k));
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      T total = partial[0];
      for (int w = 1; w < (int)(blockDim.x / 32); w++) total = combine<T>(r.kind, total, partial[w]);
      char *out = r.out + o * r.out_es;
      if (r.kind == DTC_MEAN) dt_cv_store_f64(out, r.out_dtype, (double)total / (double)r.red.n);
      else store_acc(out, r.out_dtype, total);
    }
    __syncthreads();
  }
}

extern "C" int dtc_launch_reduce(int kind, const dtc_tensor *out, const dtc_tensor *x, unsigned reduce_mask) {
  reduce_args r = {};
  int64_t es = (int64_t)dt_dtype_size((dt_dtype)x->dtype);
  r.kept.n = r.red.n = 1;
  for (int d = 0; d < x->ndim; d++) {
    dtc_iter<1> *it = (reduce_mask >> d) & 1 ? &r.red : &r.kept;
    it->shape[it->ndim] = x->shape[d];
    it->stride[0][it->ndim] = x->stride[d] * es;
    it->ndim++;
    it->n *= x->shape[d];
  }
  r.kept.ptr[0] = (char *)x->data;
  r.red.ptr[0] = (char *)x->data;
  r.out = (char *)out->data;
  r.out_dtype = out->dtype, r.x_dtype = x->dtype, r.kind = kind;
  r.out_es = (int64_t)dt_dtype_size((dt_dtype)out->dtype);
  if (r.kept.n == 0) return DT_OK;
  if (r.red.n == 0 && (kind == DTC_AMAX || kind == DTC_AMIN))
    return dt_error("%s: cannot reduce over a zero-size dim (no identity)", kind == DTC_AMAX ? "amax" : "amin");
  cudaStream_t s = (cudaStream_t)dt_cuda_stream();
  if (!s) return DT_ERR;
  unsigned blocks = (unsigned)(r.kept.n < 65535 * 16 ? r.kept.n : 65535 * 16);
  /* integer results accumulate exactly in int64; everything else in double */
  if (!dtc_is_float(out->dtype) && kind != DTC_MEAN)
    reduce_kernel<int64_t><<<blocks, DTC_THREADS, 0, s>>>(r, (int64_t)(kind == DTC_PROD ? 1 : 0));
  else
    reduce_kernel<double><<<blocks, DTC_THREADS, 0, s>>>(r, kind == DTC_PROD ? 1.0 : 0.0);
  return dt_cuda_launched("reduce");
}
