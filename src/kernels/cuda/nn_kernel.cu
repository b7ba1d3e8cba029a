/* layer_norm / rms_norm (one block per row: mean, then the centred squares, in double as the
 * CPU's row sums; then y = (x - mean) * inv * w + b in the compute dtype) and embedding (a row
 * gather; ids outside the vocab raise an error after the kernel, or read zeros on a shard). */
#include "tensor/cuda_elem.cuh"

#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

extern "C" {
#include "base/error.h"
#include "tensor/cuda.h"
}

__device__ inline double block_sum(double v, double *shared) {
  for (int k = 16; k > 0; k /= 2) v += __shfl_down_sync(0xffffffffu, v, k);
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int w = 0; w < (int)(blockDim.x / 32); w++) t += shared[w];
    shared[0] = t;
  }
  __syncthreads();
  double r = shared[0];
  __syncthreads();
  return r;
}

template <typename R> __global__ void norm_kernel(int rms, const char *x, const char *w, const char *b, char *y, int dt,
                                                  int wdt, int bdt, int64_t rows, int64_t n, double eps) {
  __shared__ double shared[DTC_THREADS / 32];
  int64_t es = dt == DT_FLOAT64 ? 8 : dt == DT_FLOAT32 ? 4 : 2;
  int64_t wes = wdt == DT_FLOAT64 ? 8 : wdt == DT_FLOAT32 ? 4 : 2, bes = bdt == DT_FLOAT64 ? 8 : bdt == DT_FLOAT32 ? 4 : 2;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const char *xr = x + r * n * es;
    char *yr = y + r * n * es;
    double s = 0;
    if (!rms) {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += (R)dt_cv_load_f64(xr + i * es, dt);
      s = block_sum(s, shared);
    }
    R mu = rms ? (R)0 : (R)(s / (double)n);
    double q = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      double c = (double)((R)dt_cv_load_f64(xr + i * es, dt) - mu);
      q += c * c;
    }
    q = block_sum(q, shared);
    R inv = (R)(1.0 / sqrt(q / (double)n + eps));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      R v = ((R)dt_cv_load_f64(xr + i * es, dt) - mu) * inv;
      if (w) v *= (R)dt_cv_load_f64(w + i * wes, wdt);
      if (b) v += (R)dt_cv_load_f64(b + i * bes, bdt);
      dt_cv_store_f64(yr + i * es, dt, (double)v);
    }
  }
}

extern "C" int dtc_launch_norm(int rms, const void *x, const void *w, const void *b, void *y, int dtype, int wdtype, int bdtype,
                               int64_t rows, int64_t n, double eps) {
  if (rows == 0 || n == 0) return DT_OK;
  cudaStream_t s = (cudaStream_t)dt_cuda_stream();
  if (!s) return DT_ERR;
  unsigned blocks = (unsigned)(rows < 65535 * 16 ? rows : 65535 * 16);
  if (dtype == DT_FLOAT64)
    norm_kernel<double><<<blocks, DTC_THREADS, 0, s>>>(rms, (const char *)x, (const char *)w, (const char *)b, (char *)y, dtype,
                                                      wdtype, bdtype, rows, n, eps);
  else
    norm_kernel<float><<<blocks, DTC_THREADS, 0, s>>>(rms, (const char *)x, (const char *)w, (const char *)b, (char *)y, dtype,
                                                     wdtype, bdtype, rows, n, eps);
  return dt_cuda_launched(rms ? "rms_norm" : "layer_norm");
}

/* bad: the first out-of-range id's position + 1 (0: none), for the error after the kernel */
__global__ void embedding_kernel(const int64_t *ids, int64_t nids, const char *weight, int64_t vocab, int64_t first,
                                 int64_t rowbytes, char *out, int shard, unsigned long long *bad) {
  int64_t total = nids * rowbytes;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total; k += (int64_t)gridDim.x * blockDim.x) {
    int64_t i = k / rowbytes, j = k % rowbytes, r = ids[i] - first;
    if (r >= 0 && r < vocab) {
      out[k] = weight[r * rowbytes + j];
    } else {
      out[k] = 0;
      if (!shard && j == 0) atomicMin(bad, (unsigned long long)i + 1);
    }
  }
}

extern "C" int dtc_launch_embedding(const int64_t *ids, int64_t nids, const void *weight, int64_t vocab, int64_t first,
                                    size_t rowbytes, void *out, int shard, const char *op) {
  if (nids == 0 || rowbytes == 0) return DT_OK;
  cudaStream_t s = (cudaStream_t)dt_cuda_stream();
  if (!s) return DT_ERR;
  unsigned long long *bad = NULL, none = ~0ull, found = ~0ull;
  DT_CUDA_CHECK(cudaMallocAsync((void **)&bad, sizeof *bad, s));
  int rc = DT_OK;
  if (cudaMemcpyAsync(bad, &none, sizeof none, cudaMemcpyHostToDevice, s) != cudaSuccess) rc = dt_error("%s: cudaMemcpyAsync failed", op);
  if (rc == DT_OK) {
    embedding_kernel<<<dtc_blocks(nids * (int64_t)rowbytes), DTC_THREADS, 0, s>>>(ids, nids, (const char *)weight, vocab, first,
                                                                                (int64_t)rowbytes, (char *)out, shard, bad);
    rc = dt_cuda_launched(op);
  }
  if (rc == DT_OK && !shard) { /* the error needs the id: read it back (one small sync) */
    cudaError_t e = cudaMemcpyAsync(&found, bad, sizeof found, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) rc = dt_cuda_fail("cudaMemcpyAsync (embedding's id check)", e);
    else if (found != ~0ull) {
      int64_t id = 0;
      if (cudaMemcpy(&id, ids + (found - 1), sizeof id, cudaMemcpyDeviceToHost) == cudaSuccess)
        rc = dt_error("%s: id %lld out of range for vocab size %lld (0-based)", op, (long long)id, (long long)vocab);
      else
        rc = dt_error("%s: an id out of range for vocab size %lld", op, (long long)vocab);
    }
  }
  cudaFreeAsync(bad, s);
  return rc;
}
