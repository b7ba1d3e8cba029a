/* Copies, casts, fills and where: clone to contiguous copy_ fill_ zero_ where. */
#include <string.h>

#include "base/error.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/kernel_table.h"

int dt_cpu_clone(const dt_op_args *a, dt_tensor **out) { return dt_tensor_copy_(out[0], a->in[0], a->name); }

/* A view op: x itself when the dtype already matches (as torch's Tensor.to), else a copy. */
int dt_cpu_to(const dt_op_args *a, dt_tensor **out) {
  out[0] = dt_tensor_to_dtype(a->in[0], a->dtype);
  return out[0] ? DT_OK : dt_error_prefix("%s", a->name);
}

int dt_cpu_contiguous(const dt_op_args *a, dt_tensor **out) {
  out[0] = dt_tensor_contiguous(a->in[0]);
  return out[0] ? DT_OK : dt_error_prefix("%s", a->name);
}

int dt_cpu_copy_(const dt_op_args *a, dt_tensor **out) {
  if (!pw_partial_overlap(out[0], a->in[1])) return dt_tensor_copy_(out[0], a->in[1], a->name);
  dt_tensor *src = dt_tensor_clone(a->in[1]); /* a:copy_(a:t()) must read the old values */
  if (!src) return dt_error_prefix("%s", a->name);
  int rc = dt_tensor_copy_(out[0], src, a->name);
  dt_tensor_release(src);
  return rc;
}

/* One element's bytes in the filled tensor's dtype. */
typedef struct {
  size_t es;
  union {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
  } v;
} fill_ctx;

static void fill_loop(char **p, const int64_t *s, int64_t n, void *ctx) {
  const fill_ctx *f = ctx;
  switch (f->es) {
  case 1: for (int64_t i = 0; i < n; i++) *(uint8_t *)(p[0] + i * s[0]) = f->v.u8; break;
  case 2: for (int64_t i = 0; i < n; i++) *(uint16_t *)(p[0] + i * s[0]) = f->v.u16; break;
  case 4: for (int64_t i = 0; i < n; i++) *(uint32_t *)(p[0] + i * s[0]) = f->v.u32; break;
  default: for (int64_t i = 0; i < n; i++) *(uint64_t *)(p[0] + i * s[0]) = f->v.u64; break;
  }
}

static int fill(dt_tensor *t, double v, int is_int, int64_t vi, const char *op) {
  fill_ctx f = {.es = dt_dtype_size(t->dtype)};
  if (is_int) dt_store_i64(&f.v, t->dtype, vi);
  else dt_store_f64(&f.v, t->dtype, v);
  dt_iter it;
  if (dt_iter_init(&it, 1, &t, t->ndim, t->shape, op) != DT_OK) return DT_ERR;
  dt_iter_run_parallel(&it, fill_loop, &f);
  return DT_OK;
}

/* fill_: scalar[0], or ints[0] when DT_ARG_SCALAR_INT (exact for large int64). */
int dt_cpu_fill_(const dt_op_args *a, dt_tensor **out) {
  return fill(out[0], a->scalar[0], a->flags & DT_ARG_SCALAR_INT, a->ints[0], a->name);
}

int dt_cpu_zero_(const dt_op_args *a, dt_tensor **out) { return fill(out[0], 0, 1, 0, a->name); }

/* ---- where ---- */
#define PW_WHERE(NAME, T)                                                                      \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vc) {                          \
    (void)vc;                                                                                  \
    const int64_t e = sizeof(T);                                                               \
    if (s[0] == e && s[1] == 1 && s[2] == e && s[3] == e) {                                    \
      T *o = (T *)p[0];                                                                        \
      const uint8_t *c = (const uint8_t *)p[1];                                                \
      const T *x = (const T *)p[2], *y = (const T *)p[3];                                      \
      for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : y[i];                               \
    } else {                                                                                   \
      for (int64_t i = 0; i < n; i++)                                                          \
        *(T *)(p[0] + i * s[0]) =                                                              \
            *(const uint8_t *)(p[1] + i * s[1]) ? *(const T *)(p[2] + i * s[2]) : *(const T *)(p[3] + i * s[3]); \
    }                                                                                          \
  }
PW_WHERE(where_f32, float)
PW_WHERE(where_f64, double)
PW_WHERE(where_i64, int64_t)

/* A scalar operand of where as a 0-d tensor of dtype ct. */
static dt_tensor *scalar_tensor(dt_dtype ct, double v, int is_int, int64_t vi) {
  int64_t no_dims[1] = {1}; /* never read for 0-d, but memcpy wants a valid pointer */
  dt_tensor *t = dt_tensor_empty(ct, 0, no_dims, DT_CPU);
  if (!t) return NULL;
  if (is_int) dt_store_i64(dt_tensor_data(t), ct, vi);
  else dt_store_f64(dt_tensor_data(t), ct, v);
  return t;
}

/* where(cond, a, b): a NULL in[1] / in[2] is the number scalar[0] / scalar[1]
 * (ints[0] / ints[1] when DT_ARG_WHERE_A_INT / DT_ARG_WHERE_B_INT). */
int dt_cpu_where(const dt_op_args *a, dt_tensor **out) {
  dt_dtype ct = pw_compute(out[0]->dtype);
  dt_tensor *ops[3] = {a->in[0], a->in[1], a->in[2]};
  dt_tensor *own[2] = {NULL, NULL};
  int rc = DT_ERR;
  for (int k = 0; k < 2; k++) {
    if (ops[k + 1]) continue;
    own[k] = scalar_tensor(ct, a->scalar[k], a->flags & (k ? DT_ARG_WHERE_B_INT : DT_ARG_WHERE_A_INT), a->ints[k]);
    if (!own[k]) goto done;
    ops[k + 1] = own[k];
  }
  dt_dtype in_dt[3] = {DT_BOOL, ct, ct};
  dt_iter_inner_fn fn = ct == DT_FLOAT32 ? where_f32 : ct == DT_FLOAT64 ? where_f64 : where_i64;
  pw_ctx c = {0};
  rc = pw_run(out[0], ct, out[0]->dtype, 3, ops, in_dt, fn, &c, a->name);
done:
  for (int k = 0; k < 2; k++)
    if (own[k]) dt_tensor_release(own[k]);
  return rc;
}

/* masked_fill(x, mask, v) is where(mask, v, x) computed in x's dtype (the output's). */
int dt_cpu_masked_fill(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *in[3] = {a->in[1], NULL, a->in[0]};
  dt_op_args w = *a;
  w.in = in;
  w.nin = 3;
  w.flags = (a->flags & DT_ARG_SCALAR_INT) ? DT_ARG_WHERE_A_INT : 0;
  return dt_cpu_where(&w, out);
}
