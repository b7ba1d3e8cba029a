/* Copies that write around the caches (non-temporal stores), for the threads backend's large
 * collectives and the pointwise kernels' outputs that outgrow the last-level cache. */
#ifndef DT_BASE_STREAM_COPY_H
#define DT_BASE_STREAM_COPY_H

#include <stddef.h>

/* Output bytes of one collective on one rank from which its copies stream: below it the
 * output fits the caches and is likely read next from there. */
#define DT_STREAM_MIN_BYTES ((size_t)4 << 20)

/* Whether a collective whose ranks (threads of one process) each write out_bytes should
 * stream its copies: from DT_STREAM_MIN_BYTES, and only when the ranks' outputs together exceed
 * 3/4 of the last-level cache.  Below that a plain copy leaves them in the cache, where a caller
 * reusing its buffers reads them next (streamed, 4 MiB all_gathers on 2 ranks ran at 0.3x of
 * memcpy, plain 0.9x); strided blocks (Shard(i) -> Shard(j)'s short rows) measured the same
 * either way, so they follow the same rule. */
int dt_stream_pays(size_t out_bytes, int nranks);
/* The last-level cache's size in bytes (sysfs; 32 MiB when unknown). */
size_t dt_llc_bytes(void);

/* memcpy(dst, src, n) with non-temporal stores where the CPU has them (else memcpy).  The
 * stores are weakly ordered: call dt_stream_fence() before peers may read dst. */
void dt_stream_copy(void *dst, const void *src, size_t n);
/* dt_stream_copy with memcpy's signature (returns dst), to stand in for it. */
void *dt_stream_memcpy(void *dst, const void *src, size_t n);
/* memcpy for one row of a strided block (a few KiB at most), into memory that need not be in
 * cache: `rep movsb` where the CPU has fast strings (ERMS) and the row is long enough to pay its
 * start, which writes whole lines without first reading them; glibc's memcpy does that only
 * from 2112 bytes (x86_rep_movsb_threshold), so its 1-2 KiB copies read every destination line
 * first and ran at half the speed of one long copy of the same bytes.  memcpy elsewhere. */
void *dt_row_copy(void *dst, const void *src, size_t n);
/* Asks for the n bytes at p in the core's L2 (x86 prefetcht1), for a strided walk whose next
 * row the hardware prefetcher cannot guess: it stops at each 4 KiB page, and Shard(i) ->
 * Shard(j)'s rows start on a new one every time.  A hint: nothing faults, nothing waits. */
static inline void dt_prefetch_l2(const void *p, size_t n) {
  for (size_t o = 0; o < n; o += 64) __builtin_prefetch((const char *)p + o, 0, 1);
}
/* Orders every streamed store before the stores that follow (x86 sfence; else nothing). */
void dt_stream_fence(void);

#endif
