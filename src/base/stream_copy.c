/* Non-temporal copies.  A plain copy into memory that is not in cache first reads each
 * destination line (read-for-ownership), then writes it back: three memory transfers per
 * byte moved.  glibc's memcpy avoids that only for long runs (rep movsb, from ~2 KiB here), so
 * the short rows of a strided block (a Shard(i) -> Shard(j) exchange: 1-2 KiB rows) and two
 * ranks copying 64 MiB each at once (sharing the memory bus) ran at half speed.  Streaming
 * stores write whole lines without reading them: two transfers per byte. */
#include "base/stream_copy.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static size_t llc_bytes;
static pthread_once_t llc_once = PTHREAD_ONCE_INIT;

/* the last-level cache's size from sysfs (sysconf's figure was 10x off in a VM); 32 MiB if unknown */
static void read_llc(void) {
  llc_bytes = (size_t)32 << 20;
  for (int i = 3; i >= 2; i--) {
    char path[80];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned long v = 0;
    char unit = 0;
    int got = fscanf(f, "%lu%c", &v, &unit);
    fclose(f);
    if (got >= 1 && v > 0) {
      llc_bytes = (size_t)v << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0);
      return;
    }
  }
}

size_t dt_llc_bytes(void) {
  pthread_once(&llc_once, read_llc);
  return llc_bytes;
}

int dt_stream_pays(size_t out_bytes, int nranks) {
  if (out_bytes < DT_STREAM_MIN_BYTES) return 0;
  return out_bytes * (size_t)(nranks > 0 ? nranks : 1) > dt_llc_bytes() / 4 * 3;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

/* dst is 64-byte aligned, n a multiple of 64 */
__attribute__((target("avx512f"))) static void lines_avx512(char *dst, const char *src, size_t n) {
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    __m512i a = _mm512_loadu_si512(src + i), b = _mm512_loadu_si512(src + i + 64);
    __m512i c = _mm512_loadu_si512(src + i + 128), d = _mm512_loadu_si512(src + i + 192);
    _mm512_stream_si512((void *)(dst + i), a), _mm512_stream_si512((void *)(dst + i + 64), b);
    _mm512_stream_si512((void *)(dst + i + 128), c), _mm512_stream_si512((void *)(dst + i + 192), d);
  }
  for (; i < n; i += 64) _mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512(src + i));
}

static void lines_sse2(char *dst, const char *src, size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(src + i)), b = _mm_loadu_si128((const __m128i *)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32)), d = _mm_loadu_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a), _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c), _mm_stream_si128((__m128i *)(dst + i + 48), d);
  }
}

void dt_stream_copy(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  size_t head = (64 - ((uintptr_t)d & 63)) & 63; /* plain stores up to the first whole line */
  if (n < head + 64) {
    memcpy(d, s, n);
    return;
  }
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  size_t body = n & ~(size_t)63;
  if (__builtin_cpu_supports("avx512f"))
    lines_avx512(d, s, body);
  else
    lines_sse2(d, s, body);
  memcpy(d + body, s + body, n - body);
}

void dt_stream_fence(void) { _mm_sfence(); }

#define ROW_COPY_MIN_BYTES 512 /* below it rep movsb's start costs more than the reads it saves */

static int has_erms;
static pthread_once_t erms_once = PTHREAD_ONCE_INIT;

static void read_erms(void) {
  unsigned a, b, c, d;
  has_erms = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 9));
}

void *dt_row_copy(void *dst, const void *src, size_t n) {
  pthread_once(&erms_once, read_erms);
  if (!has_erms || n < ROW_COPY_MIN_BYTES) return memcpy(dst, src, n);
  void *d = dst;
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
  return dst;
}

#else

void dt_stream_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
void dt_stream_fence(void) {}
void *dt_row_copy(void *dst, const void *src, size_t n) { return memcpy(dst, src, n); }

#endif

void *dt_stream_memcpy(void *dst, const void *src, size_t n) {
  dt_stream_copy(dst, src, n);
  return dst;
}
