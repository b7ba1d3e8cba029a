/* Copies that write around the caches (non-temporal stores), for the threads backend's large
 * collectives.  Internal to src/comm. */
#ifndef DT_COMM_STREAM_COPY_H
#define DT_COMM_STREAM_COPY_H

#include <stddef.h>

/* Output bytes of one collective on one rank from which its copies stream: below it the
 * output fits the caches and is likely read next from there. */
#define DT_STREAM_MIN_BYTES ((size_t)4 << 20)

/* memcpy(dst, src, n) with non-temporal stores where the CPU has them (else memcpy).  The
 * stores are weakly ordered: call dt_stream_fence() before peers may read dst. */
void dt_stream_copy(void *dst, const void *src, size_t n);
/* Orders every streamed store before the stores that follow (x86 sfence; else nothing). */
void dt_stream_fence(void);

#endif
