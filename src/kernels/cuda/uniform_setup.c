/* uniform_'s launch arguments for tensor t (bounds worked out exactly as the CPU fill engine
 * does, kernels/random.h); plain C, built in every build so that tests/c/test_cuda.c can run the
 * device's element function (uniform_elem.h) on the host against the CPU. */
#include "kernels/cuda/uniform_setup.h"

#include "base/error.h"
#include "kernels/random.h"

#include <math.h>

int dtc_uniform_setup(const dt_op_args *a, const dt_tensor *t, dtc_uniform *out) {
  dt_rng_region r;
  if (dt_rng_region_of(a, t, &r) != DT_OK) return DT_ERR;
  dt_rng_fill f = {.kind = DT_RNG_UNIFORM, .dtype = t->dtype};
  dt_rng_fill_init(&f);
  dtc_uniform u = {.dtype = t->dtype, .seed = dt_rng_args_seed(a), .offset = dt_rng_args_offset(a), .wide = f.wide,
                   .a = a->scalar[0], .b = a->scalar[1], .ndim = r.ndim, .n = dt_tensor_numel(t)};
  for (int d = 0; d < r.ndim; d++) u.gshape[d] = r.gshape[d], u.start[d] = r.start[d], u.shape[d] = r.shape[d];
  switch (t->dtype) {
  case DT_FLOAT32:
    u.degenerate = !((float)u.b > (float)u.a);
    u.top = nextafterf((float)u.b, -INFINITY);
    break;
  case DT_FLOAT64:
    u.degenerate = !(u.b > u.a);
    u.top = nextafter(u.b, -INFINITY);
    break;
  case DT_BFLOAT16:
  case DT_FLOAT16: {
    int bf = t->dtype == DT_BFLOAT16;
    u.bits = bf ? 8 : 11;
    float fa = bf ? dt_bf16_to_f32(dt_f32_to_bf16((float)u.a)) : dt_f16_to_f32(dt_f32_to_f16((float)u.a));
    float fb = bf ? dt_bf16_to_f32(dt_f32_to_bf16((float)u.b)) : dt_f16_to_f32(dt_f32_to_f16((float)u.b));
    u.a = fa, u.b = fb;
    u.top_half = fb > fa ? dt_rng_half_below(fb, t->dtype) : (bf ? dt_f32_to_bf16(fa) : dt_f32_to_f16(fa));
    break;
  }
  default: return dt_error("%s: dtype %s is not floating point", a->name, dt_dtype_name(t->dtype));
  }
  *out = u;
  return DT_OK;
}
