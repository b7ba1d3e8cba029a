/* The matmul family on CUDA through cuBLAS: every case becomes one strided-batched GEMM over
 * contiguous row-major operands (C = A B is C^T = B^T A^T in cuBLAS's column-major terms).
 * float32 (TF32 tensor cores when dt.cuda.allow_tf32), float64, and bfloat16/float16 with float32
 * accumulation.  Every cuBLAS status is checked and named. */
#include "kernels/cuda/desc.h"
#include "kernels/cuda/kernel_table.h"

#include "base/error.h"
#include "tensor/cuda.h"

#include <cublas_v2.h>
#include <limits.h>

#define MAX_DEVICES 64

static _Thread_local cublasHandle_t handles[MAX_DEVICES];

static int cublas_fail(const char *call, cublasStatus_t st) {
  return dt_error("%s: %s (%s)", call, cublasGetStatusName(st), cublasGetStatusString(st));
}

#define CUBLAS_CHECK(call)                                   \
  do {                                                       \
    cublasStatus_t st_ = (call);                             \
    if (st_ != CUBLAS_STATUS_SUCCESS) return cublas_fail(#call, st_); \
  } while (0)

/* The thread's handle on its device, bound to its stream. */
static int get_handle(cublasHandle_t *h) {
  void *stream = dt_cuda_stream();
  if (!stream) return DT_ERR;
  int d = dt_cuda_current_device();
  if (d < 0 || d >= MAX_DEVICES) return DT_ERR;
  if (!handles[d]) CUBLAS_CHECK(cublasCreate(&handles[d]));
  CUBLAS_CHECK(cublasSetStream(handles[d], (cudaStream_t)stream));
  *h = handles[d];
  return DT_OK;
}

/* C[b] = alpha A[b] B[b] + beta C[b]; A [batch,n,k], B [batch,k,m], C [batch,n,m], contiguous. */
static int gemm(const char *op, dt_tensor *c, const dt_tensor *a, const dt_tensor *b, int64_t batch, int64_t n, int64_t k,
                int64_t m, double alpha, double beta) {
  if (n > INT_MAX || k > INT_MAX || m > INT_MAX || batch > INT_MAX)
    return dt_error("%s: a dimension over 2^31-1 (batch %lld, %lld x %lld x %lld) is beyond cuBLAS", op, (long long)batch,
                    (long long)n, (long long)k, (long long)m);
  if (batch == 0 || n == 0 || m == 0) return DT_OK;
  cudaDataType_t t;
  cublasComputeType_t ct;
  switch (c->dtype) {
  case DT_FLOAT32: t = CUDA_R_32F, ct = dt_cuda_allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; break;
  case DT_FLOAT64: t = CUDA_R_64F, ct = CUBLAS_COMPUTE_64F; break;
  case DT_BFLOAT16: t = CUDA_R_16BF, ct = CUBLAS_COMPUTE_32F; break;
  case DT_FLOAT16: t = CUDA_R_16F, ct = CUBLAS_COMPUTE_32F; break;
  default: return dt_error("%s: dtype %s is not supported on cuda (floating dtypes only)", op, dt_dtype_name(c->dtype));
  }
  cublasHandle_t h = NULL;
  if (get_handle(&h) != DT_OK) return DT_ERR;
  float af = (float)alpha, bf = (float)beta;
  const void *ap = ct == CUBLAS_COMPUTE_64F ? (const void *)&alpha : (const void *)&af;
  const void *bp = ct == CUBLAS_COMPUTE_64F ? (const void *)&beta : (const void *)&bf;
  if (k == 0) { /* no products: C = beta C (beta 0: zeros, C not read) */
    dtc_tensor o = dtc_of(c);
    if (beta == 0) return dtc_launch_fill(&o, 0, 0, 1);
    dtc_pointwise p = {.op = DT_OP_MUL, .compute = c->dtype == DT_FLOAT64 ? DT_FLOAT64 : DT_FLOAT32, .mode = DTC_TS, .s = beta};
    return dtc_launch_pointwise(&p, &o, &o, NULL);
  }
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)m, (int)n, (int)k, ap, dt_tensor_data(b), t,
                                          (int)m, m * k, dt_tensor_data(a), t, (int)k, n * k, bp, dt_tensor_data(c), t,
                                          (int)m, n * m, (int)batch, ct, CUBLAS_GEMM_DEFAULT));
  return dt_cuda_launched(op);
}

/* x (ndim >= 2) as a contiguous [batch..., r, c] tensor with the given batch dims (x's own
 * broadcast to them); a new reference. */
static dt_tensor *batched(const dt_tensor *x, int nb, const int64_t *bshape, const char *op) {
  int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS];
  int lead = nb - (x->ndim - 2);
  for (int i = 0; i < nb; i++) {
    int j = i - lead;
    shape[i] = bshape[i];
    stride[i] = j < 0 || x->shape[j] != bshape[i] ? 0 : x->stride[j];
  }
  for (int i = 0; i < 2; i++) shape[nb + i] = x->shape[x->ndim - 2 + i], stride[nb + i] = x->stride[x->ndim - 2 + i];
  dt_tensor *v = dt_tensor_view_of(x, nb + 2, shape, stride, x->offset);
  dt_tensor *c = v ? dt_tensor_contiguous(v) : NULL;
  dt_tensor_release(v);
  if (!c) dt_error_prefix("%s", op);
  return c;
}

/* matmul's general case (torch.matmul): 1-D operands get a dim of 1 that the result drops,
 * batch dims broadcast; the result's memory is [batch..., n, m] contiguous either way. */
static int matmul_into(const char *op, dt_tensor *out, const dt_tensor *a, const dt_tensor *b, double alpha, double beta) {
  int64_t ashape[2], bshape[2], astr[2], bstr[2];
  dt_tensor *a2 = NULL, *b2 = NULL;
  if (a->ndim == 1) { /* [k] -> [1, k] */
    ashape[0] = 1, ashape[1] = a->shape[0], astr[0] = 0, astr[1] = a->stride[0];
    a = a2 = dt_tensor_view_of(a, 2, ashape, astr, a->offset);
  }
  if (b->ndim == 1) { /* [k] -> [k, 1] */
    bshape[0] = b->shape[0], bshape[1] = 1, bstr[0] = b->stride[0], bstr[1] = 0;
    b = b2 = dt_tensor_view_of(b, 2, bshape, bstr, b->offset);
  }
  int rc = DT_ERR;
  dt_tensor *ac = NULL, *bc = NULL;
  if (!a || !b) goto done;
  int na = a->ndim - 2, nbd = b->ndim - 2, nb = na > nbd ? na : nbd;
  int64_t batch_shape[DT_MAX_DIMS], batch = 1;
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - na), ib = i - (nb - nbd);
    int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
    batch_shape[i] = sa == 1 ? sb : sa;
    batch *= batch_shape[i];
  }
  ac = batched(a, nb, batch_shape, op);
  bc = ac ? batched(b, nb, batch_shape, op) : NULL;
  if (!bc) goto done;
  rc = gemm(op, out, ac, bc, batch, a->shape[a->ndim - 2], a->shape[a->ndim - 1], b->shape[b->ndim - 1], alpha, beta);
done:
  if (!a || !b) dt_error_prefix("%s", op);
  dt_tensor_release(ac), dt_tensor_release(bc), dt_tensor_release(a2), dt_tensor_release(b2);
  return rc;
}

int dt_cuda_matmul(const dt_op_args *a, dt_tensor **out) { return matmul_into(a->name, out[0], a->in[0], a->in[1], 1, 0); }
int dt_cuda_mm(const dt_op_args *a, dt_tensor **out) { return matmul_into(a->name, out[0], a->in[0], a->in[1], 1, 0); }
int dt_cuda_bmm(const dt_op_args *a, dt_tensor **out) { return matmul_into(a->name, out[0], a->in[0], a->in[1], 1, 0); }

/* addmm: out = beta c + alpha a b; c broadcast into out first unless beta is 0 (then c is not
 * read, NaN included, as torch) */
int dt_cuda_addmm(const dt_op_args *a, dt_tensor **out) {
  double beta = a->nscalar > 0 ? a->scalar[0] : 1, alpha = a->nscalar > 1 ? a->scalar[1] : 1;
  if (beta != 0 && dt_tensor_copy_(out[0], a->in[0], a->name) != DT_OK) return DT_ERR;
  return matmul_into(a->name, out[0], a->in[1], a->in[2], alpha, beta);
}
