/* Yardsticks for bench/gpu.lua, timed with CUDA events on the thread's stream: cuBLAS called
 * directly (no dtlua in between) and a device-to-device memcpy, each the best of reps after one
 * warm-up.  A CUDA build only (the binding says so otherwise). */
#include "kernels/cuda/bench_raw.h"

#include "base/error.h"
#include "tensor/cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

static int timed(cudaStream_t s, int reps, double *best, int (*body)(void *), void *ctx) {
  cudaEvent_t e0, e1;
  DT_CUDA_CHECK(cudaEventCreate(&e0));
  DT_CUDA_CHECK(cudaEventCreate(&e1));
  int rc = body(ctx); /* warm-up */
  *best = 1e30;
  for (int r = 0; rc == DT_OK && r < reps; r++) {
    float ms = 0;
    if (cudaEventRecord(e0, s) != cudaSuccess || (rc = body(ctx)) != DT_OK || cudaEventRecord(e1, s) != cudaSuccess ||
        cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
      if (rc == DT_OK) rc = dt_error("bench: timing with CUDA events failed");
      break;
    }
    if (ms * 1e-3 < *best) *best = ms * 1e-3;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return rc;
}

typedef struct {
  cublasHandle_t h;
  int n;
  cudaDataType_t t;
  cublasComputeType_t ct;
  void *a, *b, *c;
} gemm_ctx;

static int gemm_body(void *v) {
  gemm_ctx *g = v;
  float one = 1, zero = 0;
  cublasStatus_t st = cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, g->t, g->n, g->b, g->t, g->n,
                                   &zero, g->c, g->t, g->n, g->ct, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? DT_OK : dt_error("cublasGemmEx: %s", cublasGetStatusString(st));
}

int dt_cuda_bench_gemm(int n, int bf16, int reps, double *seconds) {
  cudaStream_t s = dt_cuda_stream();
  if (!s) return DT_ERR;
  size_t es = bf16 ? 2 : 4, bytes = (size_t)n * (size_t)n * es;
  gemm_ctx g = {.n = n, .t = bf16 ? CUDA_R_16BF : CUDA_R_32F, .ct = CUBLAS_COMPUTE_32F};
  int rc = DT_ERR;
  if (cublasCreate(&g.h) != CUBLAS_STATUS_SUCCESS) return dt_error("cublasCreate failed");
  if (cudaMalloc(&g.a, bytes) == cudaSuccess && cudaMalloc(&g.b, bytes) == cudaSuccess && cudaMalloc(&g.c, bytes) == cudaSuccess &&
      cudaMemsetAsync(g.a, 0, bytes, s) == cudaSuccess && cudaMemsetAsync(g.b, 0, bytes, s) == cudaSuccess &&
      cublasSetStream(g.h, s) == CUBLAS_STATUS_SUCCESS)
    rc = timed(s, reps, seconds, gemm_body, &g);
  else
    dt_error("bench gemm: cudaMalloc of 3 x %zu bytes failed", bytes);
  cudaFree(g.a), cudaFree(g.b), cudaFree(g.c);
  cublasDestroy(g.h);
  return rc;
}

typedef struct {
  void *dst, *src;
  size_t bytes;
  cudaStream_t s;
} copy_ctx;

static int copy_body(void *v) {
  copy_ctx *c = v;
  DT_CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->s));
  return DT_OK;
}

int dt_cuda_bench_memcpy(size_t bytes, int reps, double *seconds) {
  copy_ctx c = {.bytes = bytes, .s = dt_cuda_stream()};
  if (!c.s) return DT_ERR;
  int rc = DT_ERR;
  if (cudaMalloc(&c.dst, bytes) == cudaSuccess && cudaMalloc(&c.src, bytes) == cudaSuccess)
    rc = timed(c.s, reps, seconds, copy_body, &c);
  else
    dt_error("bench memcpy: cudaMalloc of 2 x %zu bytes failed", bytes);
  cudaFree(c.dst), cudaFree(c.src);
  return rc;
}
