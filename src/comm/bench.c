/* Reference figures for bench/collectives.lua, measured in the same run as the
 * collectives: single-thread memcpy bandwidth (what the threads backend is compared with). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/comm.h"
#include "comm/spin_wait.h"

int dt_bench_memcpy(size_t bytes, int iters, double *seconds) {
  char *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1);
  if (!a || !b) return free(a), free(b), dt_error("bench: out of memory");
  memset(a, 1, bytes);
  memset(b, 2, bytes); /* touch both: page faults are not part of the figure */
  memcpy(b, a, bytes);
  double t0 = dt_now();
  for (int i = 0; i < iters; i++) {
    memcpy(b, a, bytes);
    __asm__ __volatile__("" ::"r"(b) : "memory"); /* keep every copy */
  }
  *seconds = (dt_now() - t0) / iters;
  free(a), free(b);
  return DT_OK;
}
