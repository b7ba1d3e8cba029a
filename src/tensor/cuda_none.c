/* The CUDA API of a build without CUDA: no device, and every call that needs one says so. */
#include "tensor/cuda.h"

#include "base/error.h"

#define NO_CUDA "this build has no CUDA (configure found no toolkit, or --without-cuda)"

int dt_cuda_built(void) { return 0; }
int dt_cuda_device_count(const char **why) {
  if (why) *why = NO_CUDA;
  return 0;
}
int dt_cuda_current_device(void) { return dt_error("cuda.current_device: %s", NO_CUDA), -1; }
int dt_cuda_set_device(int i) { return dt_error("cuda.set_device: %s (device %d)", NO_CUDA, i); }
void dt_cuda_set_default(int local_rank) { (void)local_rank; }
int dt_cuda_synchronize(void) { return dt_error("cuda.synchronize: %s", NO_CUDA); }
int dt_cuda_memory_stats(dt_cache_stats *out) {
  *out = (dt_cache_stats){0};
  return dt_error("cuda.memory_stats: %s", NO_CUDA);
}
int dt_cuda_empty_cache(void) { return dt_error("cuda.empty_cache: %s", NO_CUDA); }
/* a setting, kept as a CUDA build keeps it (it takes effect only there) */
static _Atomic int allow_tf32;
void dt_cuda_set_allow_tf32(int on) { allow_tf32 = on != 0; }
int dt_cuda_allow_tf32(void) { return allow_tf32; }
void *dt_cuda_stream(void) { return NULL; }
int dt_cuda_launched(const char *op) { return dt_error("%s: %s", op, NO_CUDA); }
int dt_cuda_fail(const char *call, int err) { return dt_error("%s: CUDA error %d (%s)", call, err, NO_CUDA); }
