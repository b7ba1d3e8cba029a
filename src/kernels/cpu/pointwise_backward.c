/* Fused backward kernels of pointwise activations: grad * f'(x) in one pass over (grad, x),
 * where the composed rule made a temporary per step (gelu's: eight ops over the tensor). */
#include <math.h>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/vec_math.h"

#define SQRT1_2 0.70710678118654752440     /* 1/sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1/sqrt(2 pi) */
#define SQRT_2_PI 0.79788456080286535588    /* sqrt(2/pi) */

/* exact gelu: Phi(x) + x phi(x) (float32: gelu_grad4 in vec_math.h) */
static inline double gelu_d_f64(double x) { return 0.5 * (1.0 + erf(x * SQRT1_2)) + x * exp(-0.5 * x * x) * INV_SQRT_2PI; }
/* tanh approximation, torch's formula: 0.5 (1 + t) + 0.5 x (1 - t^2) k0 (1 + 3 k1 x^2) */
static inline float gelut_d_f32(float x) {
  const float k0 = (float)SQRT_2_PI, k1 = 0.044715f;
  float t = tanhf(k0 * (x + k1 * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * x * x);
}
static inline double gelut_d_f64(double x) {
  const double k0 = SQRT_2_PI, k1 = 0.044715;
  double t = tanh(k0 * (x + k1 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k0 * (1.0 + 3.0 * k1 * x * x);
}

/* out = grad * DERIV(x) over (out, grad, x), with a contiguous branch */
#define BW_LOOP(NAME, T, DERIV)                                                                     \
  static void NAME(char **p, const int64_t *s, int64_t n, void *c) {                                \
    (void)c;                                                                                        \
    if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T) && s[2] == (int64_t)sizeof(T)) {   \
      T *restrict o = (T *)p[0];                                                                    \
      const T *restrict g = (const T *)p[1], *restrict x = (const T *)p[2];                         \
      for (int64_t i = 0; i < n; i++) o[i] = g[i] * DERIV(x[i]);                                    \
    } else {                                                                                        \
      for (int64_t i = 0; i < n; i++)                                                               \
        *(T *)(p[0] + i * s[0]) = *(const T *)(p[1] + i * s[1]) * DERIV(*(const T *)(p[2] + i * s[2])); \
    }                                                                                               \
  }
/* float32 exact gelu: vec_math.h's vector erf and exp with the product by grad in the same
 * sweep when both are contiguous, else a block of x and grad gathered at a time */
DEFINE_VEC_MAP(gelu_grad_map_f32, gelu_grad4, gelu_grad8, gelu_grad16)
static void gelu_bw_f32(char **p, const int64_t *s, int64_t n, void *c) {
  (void)c;
  const int64_t f = (int64_t)sizeof(float);
  if (s[0] == f && s[1] == f && s[2] == f) {
    gelu_grad_map_f32((const float *)p[2], (const float *)p[1], (float *)p[0], n);
    return;
  }
  float xs[256], gs[256];
  for (int64_t i0 = 0; i0 < n; i0 += 256) {
    int64_t m = n - i0 < 256 ? n - i0 : 256;
    for (int64_t i = 0; i < m; i++) {
      xs[i] = *(const float *)(p[2] + (i0 + i) * s[2]);
      gs[i] = *(const float *)(p[1] + (i0 + i) * s[1]);
    }
    gelu_grad_map_f32(xs, gs, xs, m);
    for (int64_t i = 0; i < m; i++) *(float *)(p[0] + (i0 + i) * s[0]) = xs[i];
  }
}
BW_LOOP(gelu_bw_f64, double, gelu_d_f64)
BW_LOOP(gelut_bw_f32, float, gelut_d_f32)
BW_LOOP(gelut_bw_f64, double, gelut_d_f64)

int dt_cpu_gelu_backward(const dt_op_args *a, dt_tensor **out) {
  dt_dtype rt = out[0]->dtype, ct = pw_compute(rt);
  int tanh_form = a->nints > 0 && a->ints[0] == 1;
  dt_iter_inner_fn fn = ct == DT_FLOAT64 ? (tanh_form ? gelut_bw_f64 : gelu_bw_f64) : (tanh_form ? gelut_bw_f32 : gelu_bw_f32);
  dt_dtype in_dt[2] = {ct, ct};
  pw_ctx c = {0};
  return pw_run(out[0], ct, rt, 2, a->in, in_dt, fn, &c, a->name);
}
