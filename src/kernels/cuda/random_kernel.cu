/* uniform_ on the device, bit for bit the CPU fill engine's (src/kernels/cpu/random.c): the same
 * Philox words (kernels/philox.h is __host__ __device__) for the same global element index, and
 * the same float arithmetic with every operation rounded on its own (__fadd_rn/__fmul_rn: nvcc
 * would otherwise fuse a + span * u into an FMA, which the x86-64 CPU build does not).  The
 * element itself is uniform_elem.h, which tests/c/test_cuda.c checks on the host. */
#include "tensor/cuda_elem.cuh"

#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

#define DTU_FN __device__ inline
#define DTU_FADD __fadd_rn
#define DTU_FSUB __fsub_rn
#define DTU_FMUL __fmul_rn
#define DTU_DADD __dadd_rn
#define DTU_DSUB __dsub_rn
#define DTU_DMUL __dmul_rn
#include "kernels/cuda/uniform_elem.h"

extern "C" {
#include "base/error.h"
#include "tensor/cuda.h"
}

__global__ void uniform_kernel(dtc_uniform u) {
  size_t es = u.dtype == DT_FLOAT64 ? 8 : u.dtype == DT_FLOAT32 ? 4 : 2;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < u.n; i += (int64_t)gridDim.x * blockDim.x)
    dtu_uniform_elem(&u, i, (char *)u.dst + i * es);
}

extern "C" int dtc_launch_uniform(const dtc_uniform *u) {
  if (u->n == 0) return DT_OK;
  cudaStream_t s = (cudaStream_t)dt_cuda_stream();
  if (!s) return DT_ERR;
  uniform_kernel<<<dtc_blocks(u->n), DTC_THREADS, 0, s>>>(*u);
  return dt_cuda_launched("uniform_");
}
