/* CUDA, as far as a machine without a GPU can test it: the caching allocator's bookkeeping (a
 * fake backing allocator, malloc with a byte budget to simulate running out, stands in for
 * cudaMalloc), the kernel column against its list, and the runtime without a device. */
#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"
#include "kernels/cuda/coverage.h"
#include "kernels/local_op.h"
#include "tensor/cuda.h"
#include "tensor/cuda_cache.h"
#include "tensor/tensor.h"
#include <string.h>
#include "ctest.h"

typedef struct {
  size_t budget, used;
  int allocs, frees;
} fake;

static void *fake_alloc(size_t n, void *ud) {
  fake *f = ud;
  if (f->used + n > f->budget) return NULL;
  void *p = aligned_alloc(512, n);
  if (p) f->used += n, f->allocs++;
  return p;
}

static void fake_free(void *p, size_t n, void *ud) {
  fake *f = ud;
  f->used -= n, f->frees++;
  free(p);
}

static dt_cuda_cache *new_cache(fake *f, size_t budget) {
  *f = (fake){.budget = budget};
  return dt_cuda_cache_new((dt_cache_backing){fake_alloc, fake_free, f});
}

static void test_size_classes(void) {
  CHECK(dt_cuda_cache_class(0) == 512);
  CHECK(dt_cuda_cache_class(1) == 512);
  CHECK(dt_cuda_cache_class(512) == 512);
  CHECK(dt_cuda_cache_class(513) == 1024);
  CHECK(dt_cuda_cache_class((1u << 20) - 1) == (1u << 20));
  CHECK(dt_cuda_cache_class((1u << 20) + 1) == (2u << 20));
  CHECK(dt_cuda_cache_class((size_t)-1) == 0); /* no class: out of memory, not a wrapped size */
}

static void test_reuse_same_stream_only(void) {
  fake f;
  dt_cuda_cache *c = new_cache(&f, 1 << 26);
  int s1, s2; /* two streams: only their addresses matter */
  size_t cap = 0;
  void *a = dt_cuda_cache_alloc(c, 1000, &s1, &cap);
  CHECK(a && cap == 1024);
  CHECK(dt_cuda_cache_free(c, a) == 0);
  void *b = dt_cuda_cache_alloc(c, 1000, &s2, &cap); /* other stream: a fresh block */
  CHECK(b && b != a && f.allocs == 2);
  void *a2 = dt_cuda_cache_alloc(c, 900, &s1, &cap); /* same class, same stream: a again */
  CHECK(a2 == a && f.allocs == 2);
  void *d = dt_cuda_cache_alloc(c, 2000, &s1, &cap); /* other class: fresh */
  CHECK(d && d != a && cap == 2048 && f.allocs == 3);
  dt_cache_stats st = dt_cuda_cache_stats(c);
  CHECK(st.num_allocs == 4 && st.num_cache_hits == 1 && st.num_backing_allocs == 3);
  CHECK(st.allocated_bytes == 1024 + 1024 + 2048 && st.reserved_bytes == st.allocated_bytes);
  CHECK(st.cached_blocks == 0);
  dt_cuda_cache_free(c, a2), dt_cuda_cache_free(c, b), dt_cuda_cache_free(c, d);
  st = dt_cuda_cache_stats(c);
  CHECK(st.allocated_bytes == 0 && st.reserved_bytes == 4096 && st.cached_blocks == 3);
  CHECK(st.peak_allocated_bytes == 4096);
  CHECK(dt_cuda_cache_empty(c) == 4096);
  st = dt_cuda_cache_stats(c);
  CHECK(st.reserved_bytes == 0 && st.cached_blocks == 0 && st.num_backing_frees == 3 && f.used == 0);
  dt_cuda_cache_destroy(c);
}

static void test_unknown_pointer(void) {
  fake f;
  dt_cuda_cache *c = new_cache(&f, 1 << 20);
  int s, x;
  void *a = dt_cuda_cache_alloc(c, 10, &s, NULL);
  CHECK(dt_cuda_cache_free(c, &x) == -1); /* not ours: refused, nothing changes */
  CHECK(dt_cuda_cache_stats(c).allocated_bytes == 512);
  CHECK(dt_cuda_cache_free(c, a) == 0);
  CHECK(dt_cuda_cache_free(c, a) == -1); /* a double free is refused too */
  CHECK(dt_cuda_cache_free(c, NULL) == 0);
  dt_cuda_cache_destroy(c);
  CHECK(f.used == 0);
}

static void test_oom_releases_cache_and_retries(void) {
  fake f;
  dt_cuda_cache *c = new_cache(&f, 3u << 20); /* room for three 1 MiB blocks */
  int s1, s2;
  void *p[3];
  for (int i = 0; i < 3; i++) p[i] = dt_cuda_cache_alloc(c, 1u << 20, &s1, NULL);
  CHECK(p[0] && p[1] && p[2]);
  dt_cuda_cache_free(c, p[0]), dt_cuda_cache_free(c, p[1]);
  /* 2 MiB on another stream: no cached block fits, the backing is full: the cache goes back */
  void *big = dt_cuda_cache_alloc(c, 2u << 20, &s2, NULL);
  CHECK(big != NULL);
  dt_cache_stats st = dt_cuda_cache_stats(c);
  CHECK(st.cached_blocks == 0 && st.num_backing_frees == 2 && st.reserved_bytes == (4 << 20) - (1 << 20));
  CHECK(dt_cuda_cache_alloc(c, 1u << 20, &s1, NULL) == NULL); /* truly out of memory: NULL */
  CHECK(dt_cuda_cache_stats(c).num_allocs == 4);
  dt_cuda_cache_free(c, big), dt_cuda_cache_free(c, p[2]);
  dt_cuda_cache_destroy(c);
  CHECK(f.used == 0);
}

/* Many blocks in the address table: growth and deletion keep every block findable. */
static void test_many_blocks(void) {
  fake f;
  dt_cuda_cache *c = new_cache(&f, (size_t)1 << 30);
  int s;
  enum { N = 1000 };
  static void *p[N];
  for (int i = 0; i < N; i++) p[i] = dt_cuda_cache_alloc(c, (size_t)(i % 7 + 1) * 512, &s, NULL);
  for (int i = 0; i < N; i += 2) CHECK(dt_cuda_cache_free(c, p[i]) == 0);
  for (int i = 1; i < N; i += 2) CHECK(dt_cuda_cache_free(c, p[i]) == 0);
  dt_cache_stats st = dt_cuda_cache_stats(c);
  CHECK(st.allocated_bytes == 0 && st.cached_blocks == N);
  for (int i = 0; i < N; i++) p[i] = dt_cuda_cache_alloc(c, (size_t)(i % 7 + 1) * 512, &s, NULL);
  st = dt_cuda_cache_stats(c);
  CHECK(st.num_cache_hits == N && st.num_backing_allocs == N && st.cached_blocks == 0);
  for (int i = 0; i < N; i++) dt_cuda_cache_free(c, p[i]);
  dt_cuda_cache_destroy(c);
  CHECK(f.used == 0 && f.frees == N);
}

/* Ranks are threads sharing a device's cache. */
static dt_cuda_cache *shared;
static void *worker(void *arg) {
  for (int i = 0; i < 2000; i++) {
    void *p = dt_cuda_cache_alloc(shared, (size_t)(i % 5 + 1) * 700, arg, NULL);
    if (p) dt_cuda_cache_free(shared, p);
  }
  return NULL;
}
static void test_threads(void) {
  fake f;
  shared = new_cache(&f, (size_t)1 << 30);
  pthread_t t[4];
  int streams[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, &streams[i]);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  dt_cache_stats st = dt_cuda_cache_stats(shared);
  CHECK(st.allocated_bytes == 0 && st.num_allocs == 8000);
  CHECK(st.num_backing_allocs <= 4 * 5); /* one block per (stream, class) is enough */
  dt_cuda_cache_destroy(shared);
  CHECK(f.used == 0);
}

/* The CUDA kernel table has exactly the rows of kernel_list.h (in a CUDA build; none without). */
static void test_kernel_column(void) {
  int listed = 0;
  for (int i = 0; i < DT_OP_COUNT; i++) {
    int has = dt_kernel_get(DT_CUDA, (dt_op_id)i) != NULL;
    listed += dt_cuda_row_has_kernel((dt_op_id)i);
    CHECK(has == (dt_cuda_built() && dt_cuda_row_has_kernel((dt_op_id)i)));
  }
  CHECK(listed > 40);
  CHECK(!dt_cuda_row_has_kernel(DT_OP_COUNT));
}

/* Without a device: allocation on "cuda" fails with a message, no crash (this machine has none). */
static void test_no_device(void) {
  if (dt_cuda_device_count(NULL) > 0) return; /* tests/gpu covers a device */
  CHECK(dt_cuda_stream() == NULL);
  int64_t shape[1] = {4};
  dt_error_clear();
  dt_tensor *t = dt_tensor_empty(DT_FLOAT32, 1, shape, DT_CUDA);
  CHECK(t == NULL);
  CHECK(strstr(dt_error_message(), dt_cuda_built() ? "no CUDA device" : "not available in this build") != NULL);
  dt_cache_stats st;
  CHECK(dt_cuda_memory_stats(&st) != 0 && st.allocated_bytes == 0);
  CHECK(dt_cuda_synchronize() != 0 && strstr(dt_error_message(), "cuda.synchronize") != NULL);
}

int main(void) {
  TEST_CASE(test_size_classes);
  TEST_CASE(test_reuse_same_stream_only);
  TEST_CASE(test_unknown_pointer);
  TEST_CASE(test_oom_releases_cache_and_retries);
  TEST_CASE(test_many_blocks);
  TEST_CASE(test_threads);
  TEST_CASE(test_kernel_column);
  TEST_CASE(test_no_device);
  return CTEST_END();
}
