/* Elementwise kernels: one templated kernel over the compute dtype (float, double, int64) walks
 * out's index space with broadcast strides; operands load from any dtype into the compute
 * dtype and the result stores into out's, with the CPU's conversions (tensor/cuda_elem.cuh).
 * The op is a switch inside the element loop: uniform across a launch, so it does not diverge. */
#include "tensor/cuda_elem.cuh"

#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

extern "C" {
#include "base/error.h"
#include "ops/op_id.h"
#include "tensor/cuda.h"
}

template <typename T> __device__ inline T load_as(const char *p, int dtype);
template <> __device__ inline float load_as<float>(const char *p, int dtype) { return (float)dt_cv_load_f64(p, dtype); }
template <> __device__ inline double load_as<double>(const char *p, int dtype) { return dt_cv_load_f64(p, dtype); }
template <> __device__ inline int64_t load_as<int64_t>(const char *p, int dtype) { return dt_cv_load_i64(p, dtype); }

__device__ inline void store_as(char *p, int dtype, float v) { dt_cv_store_f64(p, dtype, v); }
__device__ inline void store_as(char *p, int dtype, double v) { dt_cv_store_f64(p, dtype, v); }
__device__ inline void store_as(char *p, int dtype, int64_t v) { dt_cv_store_i64(p, dtype, v); }

/* int64 arithmetic wraps, as torch's does */
__device__ inline int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
__device__ inline int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

__device__ inline float fexp(float x) { return expf(x); }
__device__ inline double fexp(double x) { return exp(x); }
__device__ inline float ferf(float x) { return erff(x); }
__device__ inline double ferf(double x) { return erf(x); }
__device__ inline float ftanh(float x) { return tanhf(x); }
__device__ inline double ftanh(double x) { return tanh(x); }

template <typename T> __device__ inline T unary_float(int op, T x, int flags) {
  switch (op) {
  case DT_OP_NEG: return -x;
  case DT_OP_ABS: return x < 0 ? -x : x == 0 ? (T)0 : x; /* abs(-0) = +0; NaN stays NaN */
  case DT_OP_EXP: return fexp(x);
  case DT_OP_LOG: return log(x);
  case DT_OP_SQRT: return sqrt(x);
  case DT_OP_RSQRT: return (T)1 / sqrt(x);
  case DT_OP_TANH: return ftanh(x);
  case DT_OP_SIGMOID: return (T)1 / ((T)1 + fexp(-x));
  case DT_OP_RELU: return x > 0 ? x : (x != x ? x : (T)0);
  case DT_OP_SILU: return x / ((T)1 + fexp(-x));
  case DT_OP_SIN: return sin(x);
  case DT_OP_COS: return cos(x);
  case DT_OP_FLOOR: return floor(x);
  case DT_OP_CEIL: return ceil(x);
  case DT_OP_TRUNC: return trunc(x);
  case DT_OP_SIGN: return x > 0 ? (T)1 : x < 0 ? (T)-1 : x; /* 0 and NaN stay */
  case DT_OP_ERF: return ferf(x);
  case DT_OP_GELU:
    if (flags & 1) return (T)0.5 * x * ((T)1 + ftanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)));
    return (T)0.5 * x * ((T)1 + ferf(x * (T)0.7071067811865476));
  default: return x;
  }
}

__device__ inline int64_t unary_int(int op, int64_t x) {
  switch (op) {
  case DT_OP_NEG: return wmul(x, -1);
  case DT_OP_ABS: return x < 0 ? wmul(x, -1) : x;
  case DT_OP_RELU: return x > 0 ? x : 0;
  case DT_OP_SIGN: return (x > 0) - (x < 0);
  default: return x; /* floor, ceil, trunc: integers unchanged */
  }
}

template <typename T> __device__ inline T binary_float(const dtc_pointwise &p, T a, T b) {
  switch (p.op) {
  case DT_OP_ADD: case DT_OP_SUB: case DT_OP_ADD_: return p.alpha == 1 ? a + b : a + (T)p.alpha * b;
  case DT_OP_MUL: case DT_OP_MUL_: return a * b;
  case DT_OP_DIV: return a / b;
  default: return a;
  }
}

__device__ inline int64_t binary_int(const dtc_pointwise &p, int64_t a, int64_t b) {
  switch (p.op) {
  case DT_OP_ADD: case DT_OP_SUB: case DT_OP_ADD_: return wadd(a, wmul(p.alphai, b));
  case DT_OP_MUL: case DT_OP_MUL_: return wmul(a, b);
  default: return a;
  }
}

template <typename T> __device__ inline int compare(int op, T a, T b) {
  switch (op) {
  case DT_OP_EQ: return a == b;
  case DT_OP_NE: return a != b;
  case DT_OP_LT: return a < b;
  case DT_OP_LE: return a <= b;
  case DT_OP_GT: return a > b;
  default: return a >= b;
  }
}

__device__ inline bool is_compare(int op) { return op >= DT_OP_EQ && op <= DT_OP_GE; }

/* isnan / isinf / isfinite: a bool result (integers: never NaN or infinite) */
__device__ inline bool is_test(int op) { return op == DT_OP_ISNAN || op == DT_OP_ISINF || op == DT_OP_ISFINITE; }
template <typename T> __device__ inline int test(int op, T x) {
  switch (op) {
  case DT_OP_ISNAN: return isnan(x);
  case DT_OP_ISINF: return isinf(x);
  default: return isfinite(x);
  }
}
template <> __device__ inline int test<int64_t>(int op, int64_t x) { return (void)x, op == DT_OP_ISFINITE; }

template <typename T> __device__ inline T apply_unary(int op, T x, int flags) { return unary_float(op, x, flags); }
template <> __device__ inline int64_t apply_unary<int64_t>(int op, int64_t x, int flags) { (void)flags; return unary_int(op, x); }
template <typename T> __device__ inline T apply_binary(const dtc_pointwise &p, T a, T b) { return binary_float(p, a, b); }
template <> __device__ inline int64_t apply_binary<int64_t>(const dtc_pointwise &p, int64_t a, int64_t b) { return binary_int(p, a, b); }

template <typename T> __device__ inline T scalar_of(const dtc_pointwise &p) { return (T)p.s; }
template <> __device__ inline int64_t scalar_of<int64_t>(const dtc_pointwise &p) { return p.si; }

template <typename T> __global__ void pointwise_kernel(dtc_pointwise p, dtc_iter<3> it, int nin) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.n; i += (int64_t)gridDim.x * blockDim.x) {
    char *ptr[3];
    dtc_offsets(it, i, ptr);
    T x = load_as<T>(ptr[1], it.dtype[1]);
    if (p.mode == DTC_TT && nin == 1 && is_test(p.op)) {
      *(uint8_t *)ptr[0] = (uint8_t)test<T>(p.op, x);
      continue;
    }
    if (p.mode == DTC_TT && nin == 1) { /* unary */
      store_as(ptr[0], it.dtype[0], apply_unary<T>(p.op, x, p.flags));
      continue;
    }
    T a = x, b = scalar_of<T>(p);
    if (p.mode == DTC_TT) b = load_as<T>(ptr[2], it.dtype[2]);
    else if (p.mode == DTC_ST) a = scalar_of<T>(p), b = x;
    if (is_compare(p.op)) *(uint8_t *)ptr[0] = (uint8_t)compare<T>(p.op, a, b);
    else store_as(ptr[0], it.dtype[0], apply_binary<T>(p, a, b));
  }
}

static void fill_iter(dtc_iter<3> *it, int k, const dtc_tensor *t, int64_t elsize) {
  for (int d = 0; d < it->ndim; d++) it->stride[k][d] = t->stride[d] * elsize;
  it->ptr[k] = (char *)t->data;
  it->dtype[k] = t->dtype;
}

extern "C" int dtc_launch_pointwise(const dtc_pointwise *p, const dtc_tensor *out, const dtc_tensor *x, const dtc_tensor *y) {
  dtc_iter<3> it = {};
  it.ndim = out->ndim, it.n = 1;
  for (int d = 0; d < out->ndim; d++) it.shape[d] = out->shape[d], it.n *= out->shape[d];
  if (it.n == 0) return DT_OK;
  fill_iter(&it, 0, out, (int64_t)dt_dtype_size((dt_dtype)out->dtype));
  fill_iter(&it, 1, x, (int64_t)dt_dtype_size((dt_dtype)x->dtype));
  if (y) fill_iter(&it, 2, y, (int64_t)dt_dtype_size((dt_dtype)y->dtype));
  cudaStream_t s = (cudaStream_t)dt_cuda_stream();
  if (!s) return DT_ERR;
  int nin = y ? 2 : (p->mode == DTC_TT ? 1 : 2);
  unsigned blocks = dtc_blocks(it.n);
  if (p->compute == DT_FLOAT64) pointwise_kernel<double><<<blocks, DTC_THREADS, 0, s>>>(*p, it, nin);
  else if (p->compute == DT_INT64) pointwise_kernel<int64_t><<<blocks, DTC_THREADS, 0, s>>>(*p, it, nin);
  else pointwise_kernel<float><<<blocks, DTC_THREADS, 0, s>>>(*p, it, nin);
  return dt_cuda_launched("pointwise");
}

__global__ void fill_kernel(dtc_iter<1> it, double v, int64_t vi, int integral) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < it.n; i += (int64_t)gridDim.x * blockDim.x) {
    char *p[1];
    dtc_offsets(it, i, p);
    if (integral) dt_cv_store_i64(p[0], it.dtype[0], vi);
    else dt_cv_store_f64(p[0], it.dtype[0], v);
  }
}

extern "C" int dtc_launch_fill(const dtc_tensor *out, double v, int64_t vi, int is_int) {
  dtc_iter<1> it = {};
  it.ndim = out->ndim, it.n = 1;
  int64_t es = (int64_t)dt_dtype_size((dt_dtype)out->dtype);
  for (int d = 0; d < out->ndim; d++) it.shape[d] = out->shape[d], it.stride[0][d] = out->stride[d] * es, it.n *= out->shape[d];
  if (it.n == 0) return DT_OK;
  it.ptr[0] = (char *)out->data, it.dtype[0] = out->dtype;
  cudaStream_t s = (cudaStream_t)dt_cuda_stream();
  if (!s) return DT_ERR;
  fill_kernel<<<dtc_blocks(it.n), DTC_THREADS, 0, s>>>(it, v, vi, is_int);
  return dt_cuda_launched("fill");
}
