/* The CUDA device (a CUDA build only): memory from the caching allocator (cuda_cache.c) over
 * cudaMalloc, copies and memsets queued on the calling thread's stream.  Ranks are threads, so
 * the device a rank uses and its compute stream are thread-local; the caches are per device and
 * shared by the ranks on it.  Every CUDA call is checked (DT_CUDA_CHECK). */
#include "tensor/cuda.h"
#include "tensor/device.h"

#include "base/error.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include "tensor/tensor.h"
_Static_assert(DT_MAX_DIMS == 8, "DTC_MAX_DIMS in cuda_elem.cuh must match DT_MAX_DIMS");

#define MAX_DEVICES 64

static _Thread_local int tl_device = -1;      /* chosen by set_device, or the default on first use */
static _Thread_local int tl_default_rank = 0; /* local rank: the default device is it % count */
static _Thread_local cudaStream_t tl_streams[MAX_DEVICES];
static _Thread_local const char *tl_last_op; /* the op whose kernel was launched last */

static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static dt_cuda_cache *caches[MAX_DEVICES];
static _Atomic int allow_tf32;

int dt_cuda_built(void) { return 1; }

int dt_cuda_fail(const char *call, int err) {
  cudaError_t e = (cudaError_t)err;
  return dt_error("%s: %s: %s", call, cudaGetErrorName(e), cudaGetErrorString(e));
}

int dt_cuda_device_count(const char **why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError(); /* not sticky: clear it so later calls do not report it */
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n > MAX_DEVICES) n = MAX_DEVICES;
  if (!n && why) *why = "no CUDA device";
  return n;
}

static int no_device(const char *what) {
  const char *why = NULL;
  dt_cuda_device_count(&why);
  return dt_error("%s: no CUDA device is available (cudaGetDeviceCount: %s)", what, why ? why : "?");
}

/* The thread's device, chosen and made current on first use. */
static int ensure_device(const char *what) {
  if (tl_device >= 0) return DT_OK;
  int n = dt_cuda_device_count(NULL);
  if (n == 0) return no_device(what);
  int d = tl_default_rank % n;
  DT_CUDA_CHECK(cudaSetDevice(d));
  tl_device = d;
  return DT_OK;
}

void dt_cuda_set_default(int local_rank) { tl_default_rank = local_rank < 0 ? 0 : local_rank; }

int dt_cuda_current_device(void) { return ensure_device("cuda.current_device") == DT_OK ? tl_device : -1; }

int dt_cuda_set_device(int i) {
  int n = dt_cuda_device_count(NULL);
  if (n == 0) return no_device("cuda.set_device");
  if (i < 0 || i >= n) return dt_error("cuda.set_device: device %d is out of range (%d device%s)", i, n, n == 1 ? "" : "s");
  DT_CUDA_CHECK(cudaSetDevice(i));
  tl_device = i;
  return DT_OK;
}

void *dt_cuda_stream(void) {
  if (ensure_device("cuda") != DT_OK) return NULL;
  if (!tl_streams[tl_device]) {
    cudaError_t e = cudaStreamCreateWithFlags(&tl_streams[tl_device], cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      dt_cuda_fail("cudaStreamCreateWithFlags", e);
      return NULL;
    }
  }
  return tl_streams[tl_device];
}

int dt_cuda_launched(const char *op) {
  tl_last_op = op;
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return dt_error("%s: kernel launch failed: %s: %s", op, cudaGetErrorName(e), cudaGetErrorString(e));
  return DT_OK;
}

/* Waits for the thread's stream; an error there is some earlier kernel's (launches are async). */
static int sync_stream(const char *what) {
  cudaStream_t s = dt_cuda_stream();
  if (!s) return DT_ERR;
  cudaError_t e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) return DT_OK;
  return dt_error("%s: %s: %s (an asynchronous error of a kernel queued earlier; the last launched was %s's)", what,
                  cudaGetErrorName(e), cudaGetErrorString(e), tl_last_op ? tl_last_op : "no op");
}

int dt_cuda_synchronize(void) {
  if (ensure_device("cuda.synchronize") != DT_OK) return DT_ERR;
  return sync_stream("cuda.synchronize");
}

/* ---- the caching allocator over cudaMalloc ---- */
static void *backing_alloc(size_t n, void *ud) {
  (void)ud; /* the device is the thread's current one: the cache is that device's */
  void *p = NULL;
  if (cudaMalloc(&p, n) != cudaSuccess) {
    cudaGetLastError(); /* out of memory is not sticky */
    return NULL;
  }
  return p;
}

static void backing_free(void *p, size_t n, void *ud) {
  (void)n, (void)ud;
  cudaFree(p);
}

static dt_cuda_cache *device_cache(int d) {
  pthread_mutex_lock(&caches_lock);
  if (!caches[d]) caches[d] = dt_cuda_cache_new((dt_cache_backing){backing_alloc, backing_free, NULL});
  dt_cuda_cache *c = caches[d];
  pthread_mutex_unlock(&caches_lock);
  return c;
}

static void *cuda_alloc(size_t nbytes, size_t *capacity) {
  void *stream = dt_cuda_stream();
  if (!stream) return NULL;
  dt_cuda_cache *c = device_cache(tl_device);
  void *p = c ? dt_cuda_cache_alloc(c, nbytes, stream, capacity) : NULL;
  if (!p && c) {
    dt_cache_stats s = dt_cuda_cache_stats(c);
    dt_error("cuda: out of memory allocating %zu bytes on device %d (%lld bytes allocated, %lld reserved)", nbytes,
             tl_device, (long long)s.allocated_bytes, (long long)s.reserved_bytes);
  }
  return p;
}

/* The block goes back to the cache of the device that handed it out. */
static void cuda_free(void *data, size_t capacity) {
  (void)capacity;
  pthread_mutex_lock(&caches_lock);
  dt_cuda_cache *cs[MAX_DEVICES];
  for (int d = 0; d < MAX_DEVICES; d++) cs[d] = caches[d];
  pthread_mutex_unlock(&caches_lock);
  if (tl_device >= 0 && cs[tl_device] && dt_cuda_cache_free(cs[tl_device], data) == 0) return;
  for (int d = 0; d < MAX_DEVICES; d++)
    if (cs[d] && dt_cuda_cache_free(cs[d], data) == 0) return;
}

int dt_cuda_memory_stats(dt_cache_stats *out) {
  *out = (dt_cache_stats){0};
  if (ensure_device("cuda.memory_stats") != DT_OK) return DT_ERR;
  dt_cuda_cache *c = device_cache(tl_device);
  if (c) *out = dt_cuda_cache_stats(c);
  return DT_OK;
}

int dt_cuda_empty_cache(void) {
  if (ensure_device("cuda.empty_cache") != DT_OK) return DT_ERR;
  /* every stream on the device may still use a cached block: wait for the whole device */
  DT_CUDA_CHECK(cudaDeviceSynchronize());
  dt_cuda_cache *c = device_cache(tl_device);
  if (c) dt_cuda_cache_empty(c);
  return DT_OK;
}

void dt_cuda_set_allow_tf32(int on) { allow_tf32 = on != 0; }
int dt_cuda_allow_tf32(void) { return allow_tf32; }

/* ---- copies: queued on the thread's stream; with host memory, waited for (the host buffer is
 * pageable and may be freed or read as soon as we return) ---- */
static int cuda_copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, int wait) {
  if (!n) return DT_OK;
  cudaStream_t s = dt_cuda_stream();
  if (!s) return DT_ERR;
  DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, s));
  return wait ? sync_stream("cudaMemcpyAsync") : DT_OK;
}
static int cuda_from_host(void *dst, const void *src, size_t n) { return cuda_copy(dst, src, n, cudaMemcpyHostToDevice, 1); }
static int cuda_to_host(void *dst, const void *src, size_t n) { return cuda_copy(dst, src, n, cudaMemcpyDeviceToHost, 1); }
static int cuda_within(void *dst, const void *src, size_t n) { return cuda_copy(dst, src, n, cudaMemcpyDeviceToDevice, 0); }

static int cuda_memset(void *dst, int byte, size_t n) {
  if (!n) return DT_OK;
  cudaStream_t s = dt_cuda_stream();
  if (!s) return DT_ERR;
  DT_CUDA_CHECK(cudaMemsetAsync(dst, byte, n, s));
  return DT_OK;
}

int dt_cuda_copy_strided(const dt_strided_copy *c); /* cuda_copy.cu */
extern const dt_device dt_cuda_device;
const dt_device dt_cuda_device = {
    .name = "cuda",
    .is_host = 0,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy_from_host = cuda_from_host,
    .copy_to_host = cuda_to_host,
    .copy_within = cuda_within,
    .memset = cuda_memset,
    .synchronize = dt_cuda_synchronize,
    .copy_strided = dt_cuda_copy_strided, /* cuda_copy.cu */
};
