/* The CUDA runtime as the rest of dtlua sees it: device count and selection, the calling
 * thread's (= rank's) compute stream, the caching allocator's stats, and the error check of
 * every CUDA call.  device_cuda.c implements it in a CUDA build, cuda_none.c in a CPU-only one
 * (no device: count 0, every other call an error saying the build has no CUDA). */
#ifndef DT_TENSOR_CUDA_H
#define DT_TENSOR_CUDA_H

#include "base/export.h"
#include "tensor/cuda_cache.h"

/* 1 when this build has CUDA (whether or not a device is present). */
DT_API int dt_cuda_built(void);
/* Devices present (0 without one, or without CUDA); *why (may be NULL) says why 0. */
DT_API int dt_cuda_device_count(const char **why);
/* The calling thread's device (set_device, else the default: dt_cuda_set_default); -1 with
 * dt_error when there is none. */
DT_API int dt_cuda_current_device(void);
/* Makes device i the calling thread's; an error naming i and the count when out of range. */
DT_API int dt_cuda_set_device(int i);
/* The device a thread takes when it has not chosen one: local_rank % device_count. */
DT_API void dt_cuda_set_default(int local_rank);
/* Waits for the thread's stream; an asynchronous kernel error surfaces here, naming the op
 * that launched the last kernel. */
DT_API int dt_cuda_synchronize(void);
/* The caching allocator of the current device. */
DT_API int dt_cuda_memory_stats(dt_cache_stats *out);
DT_API int dt_cuda_empty_cache(void);
/* float32 matmuls may use TF32 tensor cores (off by default, as torch's allow_tf32). */
DT_API void dt_cuda_set_allow_tf32(int on);
DT_API int dt_cuda_allow_tf32(void);

/* For the kernels: the thread's stream (a cudaStream_t), made on first use; NULL on error. */
void *dt_cuda_stream(void);
/* Records the op whose kernel was launched last on this thread (named by a later async error)
 * and checks the launch: DT_OK, or DT_ERR naming the op and the CUDA error. */
int dt_cuda_launched(const char *op);
/* The error of a failed CUDA runtime call: "<call>: <error name>: <description>". */
int dt_cuda_fail(const char *call, int err);

/* Checks a CUDA runtime call: returns DT_ERR from the enclosing function with the call named. */
#define DT_CUDA_CHECK(call)                                     \
  do {                                                          \
    int dt_cuda_rc_ = (int)(call);                              \
    if (dt_cuda_rc_ != 0) return dt_cuda_fail(#call, dt_cuda_rc_); \
  } while (0)

#endif
