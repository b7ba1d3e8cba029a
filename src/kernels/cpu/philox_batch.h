/* Many consecutive Philox blocks at once, for the CPU fill loops: 8 blocks per AVX2 step
 * where the CPU has AVX2 (checked at run time), else the scalar header function.  Bit
 * for bit the stream of src/kernels/philox.h (tests/c/test_philox.c compares them). */
#ifndef DT_KERNELS_CPU_PHILOX_BATCH_H
#define DT_KERNELS_CPU_PHILOX_BATCH_H

#include <stdint.h>

/* Blocks b0 .. b0 + n - 1 of seed's stream: 4n words into out, in stream order. */
void dt_philox_blocks(uint64_t seed, uint64_t b0, int64_t n, uint32_t *out);
/* The same without the vector path (for tests and as the fallback). */
void dt_philox_blocks_scalar(uint64_t seed, uint64_t b0, int64_t n, uint32_t *out);

#endif
