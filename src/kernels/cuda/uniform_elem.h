/* One element of uniform_ on a device, as a function of the generator position and the element's
 * local index: shared by the CUDA kernel (random_kernel.cu, with its correctly rounded intrinsics)
 * and tests/c/test_cuda.c, which runs it on the host against the CPU fill engine (same bits).
 * The includer may define DTU_FN and the arithmetic macros; the defaults are plain C, whose x86-64
 * build rounds every operation on its own (no FMA), as the CPU engine does. */
#ifndef DT_KERNELS_CUDA_UNIFORM_ELEM_H
#define DT_KERNELS_CUDA_UNIFORM_ELEM_H

#include "base/dtype.h"
#include "kernels/cuda/launch.h"
#include "kernels/philox.h"

#ifndef DTU_FN
#define DTU_FN static inline
#define DTU_FADD(a, b) ((a) + (b))
#define DTU_FSUB(a, b) ((a) - (b))
#define DTU_FMUL(a, b) ((a) * (b))
#define DTU_DADD(a, b) ((a) + (b))
#define DTU_DSUB(a, b) ((a) - (b))
#define DTU_DMUL(a, b) ((a) * (b))
#endif

/* the global row-major index of local element i (the region's own row-major order) */
DTU_FN int64_t dtu_global_index(const dtc_uniform *u, int64_t i) {
  int64_t g = 0, gstride = 1;
  for (int d = u->ndim - 1; d >= 0; d--) {
    int64_t idx = i % u->shape[d];
    i /= u->shape[d];
    g += (u->start[d] + idx) * gstride;
    gstride *= u->gshape[d];
  }
  return g;
}

/* local element i into dst (u->dst's element i on the device) */
DTU_FN void dtu_uniform_elem(const dtc_uniform *u, int64_t i, void *dst) {
  uint64_t p = u->offset + (uint64_t)dtu_global_index(u, i) * (u->wide ? 2u : 1u);
  uint32_t w0 = dt_philox_word(u->seed, p);
  switch (u->dtype) {
  case DT_FLOAT32: {
    float a = (float)u->a, span = DTU_FSUB((float)u->b, a), top = (float)u->top;
    float v = DTU_FADD(a, DTU_FMUL(span, DTU_FMUL((float)(int32_t)(w0 >> 8), 1.0f / 16777216.0f)));
    *(float *)dst = u->degenerate ? a : (v < top ? v : top);
    break;
  }
  case DT_FLOAT64: {
    uint32_t w1 = dt_philox_word(u->seed, p + 1);
    double v = DTU_DADD(u->a, DTU_DMUL(DTU_DSUB(u->b, u->a), dt_philox_unit_f64(w0, w1)));
    *(double *)dst = v < u->b ? v : (u->degenerate ? u->a : u->top);
    break;
  }
  default: { /* bf16/f16: a and b already rounded to the dtype */
    float a = (float)u->a, b = (float)u->b;
    float v = DTU_FADD(a, DTU_FMUL(DTU_FSUB(b, a), dt_philox_unit_f32(w0, u->bits)));
    int bf = u->dtype == DT_BFLOAT16;
    uint16_t h = bf ? dt_cv_f32_to_bf16(v) : dt_cv_f32_to_f16(v);
    float back = bf ? dt_cv_bf16_to_f32(h) : dt_cv_f16_to_f32(h);
    *(uint16_t *)dst = back < b ? h : u->top_half;
    break;
  }
  }
}

#endif
