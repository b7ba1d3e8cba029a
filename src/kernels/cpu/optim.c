/* CPU kernels of the fused optimizer updates: Adam/AdamW in one pass over (param, grad,
 * exp_avg, exp_avg_sq[, max_exp_avg_sq]), where the composed update (lua/dtensor/optim/
 * adam.lua's reference path) made eight ops and five temporaries per parameter.  Each
 * element takes the composed path's float operations in its order, the numbers rounded to
 * the compute dtype as the scalar ops round them, so float32/float64 results equal it
 * bitwise; bf16/f16 compute in float32 and round once. */
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/kernel_table.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
  void *p, *m, *v, *vmax;
  const void *g;
  double step_size, bc2, beta1, beta2, eps, decay;
  int decoupled, maximize;
} adam_job;

static double from_bits(int64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* torch.maximum: NaN wins */
#define NAN_MAX(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))

/* One element range, the composed path's float operations in its order (-std=c11 keeps FMA
 * contraction off). */
#define ADAM_LOOP(NAME, R, SQRT)                                                                    \
  static inline void NAME(int64_t i0, int64_t i1, R *restrict p, R *restrict m, R *restrict v,     \
                          R *restrict vmax, const R *restrict g, R decay, R one_b1, R b2, R one_b2, \
                          R bc2, R eps, R neg_step, int decoupled, int l2, int maximize, int ams) { \
    for (int64_t i = i0; i < i1; i++) {                                                             \
      R gi = maximize ? -g[i] : g[i], pi = p[i];                                                    \
      if (decoupled) pi = pi * decay;                                                               \
      if (l2) gi = gi + decay * pi;                                                                 \
      R mi = m[i] + one_b1 * (gi - m[i]);                                                           \
      R vi = v[i] * b2;                                                                             \
      vi = vi + one_b2 * (gi * gi);                                                                 \
      R second = vi;                                                                                \
      if (ams) second = vmax[i] = NAN_MAX(vmax[i], vi);                                             \
      R denom = SQRT(second) / bc2 + eps;                                                           \
      m[i] = mi, v[i] = vi;                                                                         \
      p[i] = pi + neg_step * (mi / denom);                                                          \
    }                                                                                               \
  }
ADAM_LOOP(adam_loop_f32, float, sqrtf)
ADAM_LOOP(adam_loop_f64, double, sqrt)

/* One range in the general loop, the flags read per call. */
#define ADAM_PIECE(NAME, R, LOOP)                                                                 \
  static void NAME(int64_t i0, int64_t i1, const adam_job *j) {                                   \
    const R decay = (R)j->decay, one_b1 = (R)(1 - j->beta1), b2 = (R)j->beta2, one_b2 = (R)(1 - j->beta2); \
    LOOP(i0, i1, j->p, j->m, j->v, j->vmax, j->g, decay, one_b1, b2, one_b2, (R)j->bc2, (R)j->eps,  \
         (R)(-j->step_size), j->decoupled, !j->decoupled && j->decay != 0, j->maximize, j->vmax != NULL); \
  }
ADAM_PIECE(adam_general_f32, float, adam_loop_f32)
ADAM_PIECE(adam_general_f64, double, adam_loop_f64)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* float32 Adam/AdamW without maximize or amsgrad, 8 lanes: gcc -O2 will not vectorise the loop
 * (sqrtf keeps its libm call for errno), so the same operations are written as AVX2 vectors
 * (no FMA), the tail through the scalar loop: the same bits everywhere. */
#define ADAM_AVX2_BODY(NAME, DECOUPLED, L2)                                                       \
  __attribute__((target("avx2"))) static void NAME(int64_t i0, int64_t i1, const adam_job *j) {   \
    float *p = j->p, *m = j->m, *v = j->v;                                                        \
    const float *g = j->g;                                                                        \
    const float decay = (float)j->decay, one_b1 = (float)(1 - j->beta1), b2 = (float)j->beta2;   \
    const float one_b2 = (float)(1 - j->beta2), bc2 = (float)j->bc2, eps = (float)j->eps;         \
    const float neg_step = (float)(-j->step_size);                                               \
    const __m256 vdecay = _mm256_set1_ps(decay), vone_b1 = _mm256_set1_ps(one_b1), vb2 = _mm256_set1_ps(b2); \
    const __m256 vone_b2 = _mm256_set1_ps(one_b2), vbc2 = _mm256_set1_ps(bc2), veps = _mm256_set1_ps(eps); \
    const __m256 vstep = _mm256_set1_ps(neg_step);                                               \
    int64_t i = i0;                                                                               \
    for (; i + 8 <= i1; i += 8) {                                                                 \
      __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i), mo = _mm256_loadu_ps(m + i); \
      if (DECOUPLED) pi = _mm256_mul_ps(pi, vdecay);                                              \
      if (L2) gi = _mm256_add_ps(gi, _mm256_mul_ps(vdecay, pi));                                  \
      __m256 mi = _mm256_add_ps(mo, _mm256_mul_ps(vone_b1, _mm256_sub_ps(gi, mo)));               \
      __m256 vi = _mm256_mul_ps(_mm256_loadu_ps(v + i), vb2);                                     \
      vi = _mm256_add_ps(vi, _mm256_mul_ps(vone_b2, _mm256_mul_ps(gi, gi)));                      \
      __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), vbc2), veps);                \
      _mm256_storeu_ps(m + i, mi);                                                                \
      _mm256_storeu_ps(v + i, vi);                                                                \
      _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_mul_ps(vstep, _mm256_div_ps(mi, denom)))); \
    }                                                                                             \
    adam_loop_f32(i, i1, p, m, v, NULL, g, decay, one_b1, b2, one_b2, bc2, eps, neg_step, DECOUPLED, L2, 0, 0); \
  }
ADAM_AVX2_BODY(adamw_f32_avx2, 1, 0)
ADAM_AVX2_BODY(adam_l2_f32_avx2, 0, 1)
ADAM_AVX2_BODY(adam_f32_avx2, 0, 0)
#define ADAM_HAVE_AVX2 1
#else
#define ADAM_HAVE_AVX2 0
#endif

static void adam_piece_f32(int64_t i0, int64_t i1, void *vj) {
  const adam_job *j = vj;
#if ADAM_HAVE_AVX2
  if (!j->maximize && !j->vmax && __builtin_cpu_supports("avx2")) {
    if (j->decoupled) adamw_f32_avx2(i0, i1, j);
    else if (j->decay != 0) adam_l2_f32_avx2(i0, i1, j);
    else adam_f32_avx2(i0, i1, j);
    return;
  }
#endif
  adam_general_f32(i0, i1, j);
}

static void adam_piece_f64(int64_t i0, int64_t i1, void *vj) { adam_general_f64(i0, i1, vj); }

/* The value of a 1-element float32 or float64 tensor (the shape rule took no other). */
static double number_of(const dt_tensor *t) { return dt_load_f64(dt_tensor_data(t), t->dtype); }

/* Lua 5.4's `^` (luai_numpow): a square is a product */
static double lua_pow(double a, double b) { return b == 2 ? a * a : pow(a, b); }

/* The numbers of the update: given (scalar[0..1], the decay term's bits), or -- with the step
 * count as a tensor (a graph: dt.compile) -- computed from it and lr in double, the operations
 * adam.lua does in Lua when eager (lr / (1 - beta1^step), sqrt(1 - beta2^step), 1 - lr wd), so
 * both round alike to the compute dtype. */
static void adam_numbers(const dt_op_args *a, adam_job *j) {
  j->beta1 = a->scalar[2], j->beta2 = a->scalar[3];
  j->eps = from_bits(a->ints[0]);
  const dt_tensor *step = a->nin > 5 ? a->in[5] : NULL;
  if (!step) {
    j->step_size = a->scalar[0], j->bc2 = a->scalar[1], j->decay = from_bits(a->ints[1]);
    return;
  }
  double s = number_of(step), lr = a->nin > 6 && a->in[6] ? number_of(a->in[6]) : from_bits(a->ints[2]);
  double wd = from_bits(a->ints[1]);
  j->step_size = lr / (1 - lua_pow(j->beta1, s));
  j->bc2 = sqrt(1 - lua_pow(j->beta2, s));
  j->decay = j->decoupled ? 1 - lr * wd : wd;
}

int dt_cpu_adam_step_(const dt_op_args *a, dt_tensor **out) {
  (void)out; /* in-place: out[0] is param */
  int n = a->nin > 4 && a->in[4] ? 5 : 4, rc = DT_OK;
  dt_dtype cd = dt_dtype_compute(a->in[0]->dtype);
  dt_tensor *w[5] = {0};
  for (int i = 0; i < n && rc == DT_OK; i++)
    if (!(w[i] = dt_tensor_contiguous_as(a->in[i], cd))) rc = dt_error_prefix("%s", a->name);
  if (rc == DT_OK) {
    adam_job j = {.p = dt_tensor_data(w[0]), .g = dt_tensor_data(w[1]), .m = dt_tensor_data(w[2]),
                  .v = dt_tensor_data(w[3]), .vmax = n > 4 ? dt_tensor_data(w[4]) : NULL,
                  .decoupled = a->flags & 1, .maximize = (a->flags & 2) != 0};
    adam_numbers(a, &j);
    dt_parallel_for(dt_tensor_numel(w[0]), DT_PARALLEL_GRAIN / 4, cd == DT_FLOAT64 ? adam_piece_f64 : adam_piece_f32, &j);
    for (int i = 0; i < n && rc == DT_OK; i++) /* the written copies back (grad is only read) */
      if (i != 1 && w[i] != a->in[i]) rc = dt_tensor_copy_(a->in[i], w[i], a->name);
  }
  for (int i = 0; i < n; i++)
    if (w[i]) dt_tensor_release(w[i]);
  return rc;
}
