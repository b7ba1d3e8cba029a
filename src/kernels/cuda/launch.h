/* The CUDA kernels' launchers (*.cu), callable from the C side of the backend (*.c), which turns
 * dt_op_args and tensors into these plain descriptors (tensor.h is C11, not C++).  Each launcher
 * queues its kernel on the calling thread's stream and returns DT_OK or DT_ERR (dt_error). */
#ifndef DT_KERNELS_CUDA_LAUNCH_H
#define DT_KERNELS_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#define DTC_MAX_DIMS 8

/* A tensor on the device: strides in elements (0: broadcast). */
typedef struct dtc_tensor {
  void *data;
  int dtype;
  int ndim;
  int64_t shape[DTC_MAX_DIMS];
  int64_t stride[DTC_MAX_DIMS];
} dtc_tensor;

/* The operand roles of a binary op: two tensors, or a tensor and a number on its right/left. */
enum { DTC_TT = 0, DTC_TS, DTC_ST };

/* The arguments of an elementwise op beside its tensors. */
typedef struct dtc_pointwise {
  int op;         /* dt_op_id */
  int compute;    /* dt_dtype the arithmetic runs in: float32, float64 or int64 */
  int mode;       /* DTC_TT, DTC_TS, DTC_ST */
  double s;       /* the number operand; unary ops' first parameter */
  int64_t si;     /* ... exactly, when the compute dtype is int64 */
  double alpha;   /* add/sub: b's factor (alpha != 1 only for DTC_TT and DTC_ST) */
  int64_t alphai; /* ... in int64 */
  double p1;      /* unary ops' second parameter */
  int flags;      /* op flags (gelu: tanh approximation) */
} dtc_pointwise;

/* uniform_ on the device: the CPU fill engine's bits (kernels/random.h) for element g of the
 * global tensor, g from the region (start/shape within gshape) of the local elements. */
typedef struct dtc_uniform {
  void *dst; /* contiguous, the region's shape */
  int dtype;
  uint64_t seed, offset;
  int wide;          /* 2 words per element (float64) */
  double a, b, top;  /* [a, b); top: the largest value below b in dtype (float32/float64) */
  uint16_t top_half; /* bf16/f16: the same, as bits; a and b already rounded to the dtype */
  int bits;          /* bf16/f16: random bits per value */
  int degenerate;    /* !(b > a): every value a (top_half: a's bits) */
  int ndim;
  int64_t n, gshape[DTC_MAX_DIMS], start[DTC_MAX_DIMS], shape[DTC_MAX_DIMS];
} dtc_uniform;

#ifdef __cplusplus
extern "C" {
#endif

/* out, x (and y) all have out's shape (inputs broadcast by strides).  nin: 1 or 2 tensors. */
int dtc_launch_pointwise(const dtc_pointwise *p, const dtc_tensor *out, const dtc_tensor *x, const dtc_tensor *y);
/* Every element of out set to vi (is_int: converted as dt_store_i64 does) or v (dt_store_f64). */
int dtc_launch_fill(const dtc_tensor *out, double v, int64_t vi, int is_int);

enum { DTC_SUM, DTC_MEAN, DTC_PROD, DTC_AMAX, DTC_AMIN };
/* out (contiguous, kept dims in order) = the reduction of x over the dims whose bit is set in
 * reduce_mask. */
int dtc_launch_reduce(int kind, const dtc_tensor *out, const dtc_tensor *x, unsigned reduce_mask);
/* softmax (or log_softmax) of x along dim into out (contiguous, x's shape). */
int dtc_launch_softmax(int log, const dtc_tensor *out, const dtc_tensor *x, int dim);

int dtc_launch_uniform(const dtc_uniform *u);
/* layer_norm (rms 0) / rms_norm (rms 1) over rows of n contiguous elements of x into y (x's
 * dtype); w, b (n elements, any float dtype) may be NULL. */
int dtc_launch_norm(int rms, const void *x, const void *w, const void *b, void *y, int dtype, int wdtype, int bdtype,
                    int64_t rows, int64_t n, double eps);
/* out[i, :] = weight[ids[i] - first, :] (rows of rowbytes), ids int64; an id outside the weight's
 * vocab rows: zeros when shard, else the error (checked after the kernel, naming the id). */
int dtc_launch_embedding(const int64_t *ids, int64_t nids, const void *weight, int64_t vocab, int64_t first,
                         size_t rowbytes, void *out, int shard, const char *op);

#ifdef __cplusplus
}
#endif

#endif
