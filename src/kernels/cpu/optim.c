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

/* The options in locals (a double store could alias the job's doubles).  The loop stays
 * scalar: GCC 12 -O2 calls sqrtf for errno and keeps the branches (a vector body with
 * -fno-math-errno would give the same bits: sqrt and division are exact either way). */
#define ADAM_PIECE(NAME, R, SQRT)                                                                   \
  static void NAME(int64_t i0, int64_t i1, void *vj) {                                            \
    const adam_job *j = vj;                                                                       \
    R *restrict p = j->p, *restrict m = j->m, *restrict v = j->v, *restrict vmax = j->vmax;       \
    const R *restrict g = j->g;                                                                   \
    const R decay = (R)j->decay, one_b1 = (R)(1 - j->beta1), b2 = (R)j->beta2, one_b2 = (R)(1 - j->beta2); \
    const R bc2 = (R)j->bc2, eps = (R)j->eps, neg_step = (R)(-j->step_size);                      \
    const int decoupled = j->decoupled, l2 = !decoupled && j->decay != 0, maximize = j->maximize; \
    const int ams = vmax != NULL;                                                                 \
    for (int64_t i = i0; i < i1; i++) {                                                           \
      R gi = maximize ? -g[i] : g[i], pi = p[i];                                                  \
      if (decoupled) pi = pi * decay;                                                             \
      if (l2) gi = gi + decay * pi;                                                               \
      R mi = m[i] + one_b1 * (gi - m[i]);                                                         \
      R vi = v[i] * b2;                                                                           \
      vi = vi + one_b2 * (gi * gi);                                                               \
      R second = vi;                                                                              \
      if (ams) second = vmax[i] = NAN_MAX(vmax[i], vi);                                           \
      R denom = SQRT(second) / bc2 + eps;                                                         \
      m[i] = mi, v[i] = vi;                                                                       \
      p[i] = pi + neg_step * (mi / denom);                                                        \
    }                                                                                             \
  }
ADAM_PIECE(adam_piece_f32, float, sqrtf)
ADAM_PIECE(adam_piece_f64, double, sqrt)

/* adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq?): operands that are not
 * contiguous in the compute dtype are worked on in contiguous copies, the written ones
 * copied back. */
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
                  .step_size = a->scalar[0], .bc2 = a->scalar[1], .beta1 = a->scalar[2], .beta2 = a->scalar[3],
                  .eps = from_bits(a->ints[0]), .decay = from_bits(a->ints[1]), .decoupled = a->flags & 1,
                  .maximize = (a->flags & 2) != 0};
    dt_parallel_for(dt_tensor_numel(w[0]), DT_PARALLEL_GRAIN / 4, cd == DT_FLOAT64 ? adam_piece_f64 : adam_piece_f32, &j);
    for (int i = 0; i < n && rc == DT_OK; i++) /* the written copies back (grad is only read) */
      if (i != 1 && w[i] != a->in[i]) rc = dt_tensor_copy_(a->in[i], w[i], a->name);
  }
  for (int i = 0; i < n; i++)
    if (w[i]) dt_tensor_release(w[i]);
  return rc;
}
