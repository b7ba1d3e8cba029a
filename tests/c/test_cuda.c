/* CUDA, as far as a machine without a GPU can test it: the caching allocator's bookkeeping (a
 * fake backing allocator, malloc with a byte budget to simulate running out, stands in for
 * cudaMalloc), the kernel column against its list, and the runtime without a device. */
#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"
#include "kernels/cuda/coverage.h"
#include "kernels/cuda/uniform_elem.h"
#include "kernels/cuda/uniform_setup.h"
#include "ops/random.h"
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

/* The device's uniform_ element function, run on the host, against the CPU fill engine: the
 * same bits for every dtype, random shapes (0-size, uneven), regions of a larger global tensor
 * (a DTensor shard's block), bounds (a == b, a span below the dtype's resolution) and generator positions. */
static uint64_t lcg(uint64_t *s) { return *s = *s * 6364136223846793005ull + 1442695040888963407ull, *s >> 33; }

static void test_uniform_matches_cpu(void) {
  uint64_t rs = 12345;
  const dt_dtype dts[4] = {DT_FLOAT32, DT_FLOAT64, DT_BFLOAT16, DT_FLOAT16};
  const double bounds[5][2] = {{0, 1}, {-2.5, 3.25}, {1, 1}, {-3, -2.9999}, {-1e-3, 7e4}};
  int cases = 0, mismatches = 0;
  for (int iter = 0; iter < 200; iter++) {
    int ndim = (int)(lcg(&rs) % 4);
    dt_rng_region r;
    r.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
      r.gshape[d] = (int64_t)(lcg(&rs) % 7);
      r.start[d] = r.gshape[d] ? (int64_t)(lcg(&rs) % (uint64_t)r.gshape[d]) : 0;
      r.shape[d] = r.gshape[d] ? (int64_t)(lcg(&rs) % (uint64_t)(r.gshape[d] - r.start[d] + 1)) : 0;
    }
    dt_dtype dt = dts[iter % 4];
    dt_tensor *t = dt_tensor_empty(dt, ndim, r.shape, DT_CPU);
    if (!t) continue;
    dt_tensor *in[1] = {t}, *out[1] = {NULL};
    dt_op_args a = {0};
    a.in = in, a.nin = 1, a.nscalar = 2;
    a.scalar[0] = bounds[iter % 5][0], a.scalar[1] = bounds[iter % 5][1];
    a.ints[DT_RNG_SLOT_SEED] = (int64_t)(lcg(&rs) << 20 ^ lcg(&rs));
    a.ints[DT_RNG_SLOT_OFFSET] = (int64_t)(4 * (lcg(&rs) % 1000));
    a.region = &r;
    CHECK(dt_op_call(DT_OP_UNIFORM_, &a, out) == DT_OK);
    dtc_uniform u;
    CHECK(dtc_uniform_setup(&a, t, &u) == DT_OK);
    int64_t n = dt_tensor_numel(t);
    size_t es = dt_dtype_size(dt);
    char buf[8];
    for (int64_t i = 0; i < n; i++) {
      dtu_uniform_elem(&u, i, buf);
      if (memcmp(buf, (char *)dt_tensor_data(t) + i * (int64_t)es, es) != 0) mismatches++;
    }
    cases++;
    if (out[0]) dt_tensor_release(out[0]);
    dt_tensor_release(t);
  }
  CHECK(cases == 200);
  CHECK(mismatches == 0);
  /* an integer tensor is refused by name */
  int64_t shape[1] = {2};
  dt_tensor *ti = dt_tensor_empty(DT_INT64, 1, shape, DT_CPU);
  dt_tensor *in[1] = {ti};
  dt_op_args a = {0};
  a.in = in, a.nin = 1, a.name = "uniform_";
  dtc_uniform u;
  CHECK(dtc_uniform_setup(&a, ti, &u) != DT_OK && strstr(dt_error_message(), "uniform_: dtype int64") != NULL);
  dt_tensor_release(ti);
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
  TEST_CASE(test_uniform_matches_cpu);
  return CTEST_END();
}
