/* matmul, mm, bmm, addmm.  Every case becomes a batch of [n,k] @ [k,m] products over the
 * broadcast batch shape (a 1-d left operand is one row, a 1-d right operand one column).
 * Floats go through dt_gemm_f32/f64: an operand whose last two strides fit BLAS is passed
 * as is (transposed when its rows are the unit-stride dim), other ones are copied once.
 * bf16/f16 compute in f32 and round at the end; integers use a plain int64 loop. */
#include "base/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_table.h"

#include <string.h>

/* One operand as [batch..., r, c], batch strides already broadcast (0) to the batch shape. */
typedef struct mat {
  char *data;
  int64_t r, c, sr, sc;
  int64_t bstride[DT_MAX_DIMS];
  int trans;  /* BLAS layout: stored transposed */
  int64_t ld; /* BLAS leading dimension */
} mat;

static void describe(const dt_tensor *t, int as_row, int nb, mat *m) {
  int nd = t->ndim;
  m->data = dt_tensor_data(t);
  if (nd == 1) { /* a vector: one row (left operand) or one column (right operand) */
    m->r = as_row ? 1 : t->shape[0];
    m->c = as_row ? t->shape[0] : 1;
    m->sr = as_row ? 0 : t->stride[0];
    m->sc = as_row ? t->stride[0] : 0;
  } else {
    m->r = t->shape[nd - 2], m->c = t->shape[nd - 1];
    m->sr = t->stride[nd - 2], m->sc = t->stride[nd - 1];
  }
  int nbt = nd > 2 ? nd - 2 : 0;
  for (int i = 0; i < nb; i++) {
    int j = i - (nb - nbt);
    m->bstride[i] = j < 0 || t->shape[j] == 1 ? 0 : t->stride[j];
  }
}

/* Picks a BLAS layout for m; 0 when the strides fit none (the caller copies). */
static int blas_layout(mat *m) {
  int64_t r = m->r, c = m->c;
  if ((c <= 1 || m->sc == 1) && (r <= 1 || m->sr >= (c > 1 ? c : 1))) {
    m->trans = 0;
    m->ld = r <= 1 ? (c > 1 ? c : 1) : m->sr;
    return 1;
  }
  if ((r <= 1 || m->sr == 1) && (c <= 1 || m->sc >= (r > 1 ? r : 1))) {
    m->trans = 1;
    m->ld = c <= 1 ? (r > 1 ? r : 1) : m->sc;
    return 1;
  }
  return 0;
}

/* True when x's batch dims step through memory as more rows of one matrix, so that a
 * product with a batch-invariant y is one tall GEMM (the [B,n,k] @ [k,m] linear layer). */
static int folds_into_rows(const mat *x, const mat *y, int nb, const int64_t *bshape) {
  if (x->trans) return 0;
  int64_t expect = x->ld * x->r;
  for (int i = nb - 1; i >= 0; i--) {
    if (bshape[i] == 1) continue;
    if (y->bstride[i] != 0 || x->bstride[i] != expect) return 0;
    expect *= bshape[i];
  }
  return 1;
}

typedef struct prod {
  mat x, y;
  int nb;
  int64_t bshape[DT_MAX_DIMS];
  int64_t n, k, m;
  double alpha, beta;
  char *c; /* contiguous [batch..., n, m] in the compute dtype */
} prod;

/* C[n,m] = alpha * X @ Y + beta * C for one batch, integers (int64 operands). */
static void int_product(const prod *p, const int64_t *x, const int64_t *y, int64_t *c) {
  int64_t alpha = (int64_t)p->alpha, beta = (int64_t)p->beta;
  for (int64_t i = 0; i < p->n; i++)
    for (int64_t j = 0; j < p->m; j++) {
      uint64_t s = 0; /* wraps like PyTorch's int64 instead of overflowing (UB) */
      for (int64_t q = 0; q < p->k; q++) s += (uint64_t)x[i * p->x.sr + q * p->x.sc] * (uint64_t)y[q * p->y.sr + j * p->y.sc];
      int64_t *cij = c + i * p->m + j;
      *cij = (int64_t)((uint64_t)alpha * s + (beta == 0 ? 0 : (uint64_t)beta * (uint64_t)*cij));
    }
}

static void one_product(const prod *p, dt_dtype ct, const char *x, const char *y, char *c, int64_t rows) {
  if (ct == DT_FLOAT32)
    dt_gemm_f32(p->x.trans, p->y.trans, rows, p->m, p->k, (float)p->alpha, (const float *)x, p->x.ld,
                (const float *)y, p->y.ld, (float)p->beta, (float *)c, p->m);
  else if (ct == DT_FLOAT64)
    dt_gemm_f64(p->x.trans, p->y.trans, rows, p->m, p->k, p->alpha, (const double *)x, p->x.ld, (const double *)y,
                p->y.ld, p->beta, (double *)c, p->m);
  else
    int_product(p, (const int64_t *)x, (const int64_t *)y, (int64_t *)c);
}

/* k == 0: the product is zero, so C = beta * C. */
static void scale_c(const prod *p, dt_dtype ct, int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    if (ct == DT_FLOAT32) ((float *)p->c)[i] = p->beta == 0 ? 0 : (float)p->beta * ((float *)p->c)[i];
    else if (ct == DT_FLOAT64) ((double *)p->c)[i] = p->beta == 0 ? 0 : p->beta * ((double *)p->c)[i];
    else ((int64_t *)p->c)[i] = p->beta == 0 ? 0 : (int64_t)p->beta * ((int64_t *)p->c)[i];
  }
}

static void run_batches(prod *p, dt_dtype ct) {
  size_t es = dt_dtype_size(ct);
  int64_t batches = dt_shape_numel(p->nb, p->bshape), csize = p->n * p->m;
  if (p->k == 0) {
    scale_c(p, ct, batches * csize);
    return;
  }
  if (ct != DT_INT64 && folds_into_rows(&p->x, &p->y, p->nb, p->bshape)) {
    one_product(p, ct, p->x.data, p->y.data, p->c, batches * p->n);
    return;
  }
  int64_t cnt[DT_MAX_DIMS] = {0}, xo = 0, yo = 0;
  for (int64_t b = 0; b < batches; b++) {
    one_product(p, ct, p->x.data + xo * (int64_t)es, p->y.data + yo * (int64_t)es, p->c + b * csize * (int64_t)es,
                p->n);
    for (int i = p->nb - 1; i >= 0; i--) {
      xo += p->x.bstride[i], yo += p->y.bstride[i];
      if (++cnt[i] < p->bshape[i]) break;
      xo -= p->bshape[i] * p->x.bstride[i], yo -= p->bshape[i] * p->y.bstride[i];
      cnt[i] = 0;
    }
  }
}

/* out = alpha * x @ y (+ beta * bias when bias is given and beta != 0). */
static int matmul_into(const char *name, dt_tensor *x, dt_tensor *y, dt_tensor *bias, double alpha, double beta,
                       dt_tensor *out) {
  dt_dtype ct = dt_dtype_is_float(x->dtype) ? dt_dtype_compute(x->dtype) : DT_INT64;
  dt_tensor *xc = dt_tensor_to_dtype(x, ct), *yc = xc ? dt_tensor_to_dtype(y, ct) : NULL;
  dt_tensor *cc = out->dtype == ct ? out : dt_tensor_empty(ct, out->ndim, out->shape, DT_CPU);
  int rc = DT_ERR;
  if (!xc || !yc || !cc) goto done;
  prod p = {.alpha = alpha, .beta = bias ? beta : 0, .c = dt_tensor_data(cc)};
  int nx = x->ndim, ny = y->ndim;
  p.nb = out->ndim - (nx >= 2) - (ny >= 2);
  memcpy(p.bshape, out->shape, sizeof(int64_t) * p.nb);
  if (p.beta != 0 && dt_tensor_copy_(cc, bias, name) != DT_OK) goto done;
  for (int pass = 0; pass < 2; pass++) {
    describe(xc, 1, p.nb, &p.x);
    describe(yc, 0, p.nb, &p.y);
    int okx = ct == DT_INT64 || blas_layout(&p.x), oky = ct == DT_INT64 || blas_layout(&p.y);
    if (okx && oky) break;
    /* strides BLAS cannot take (e.g. a broadcast column): one contiguous copy */
    dt_tensor **fix = okx ? &yc : &xc, *copy = dt_tensor_clone(*fix);
    if (!copy) goto done;
    dt_tensor_release(*fix);
    *fix = copy;
    if (!okx && !oky) {
      copy = dt_tensor_clone(yc);
      if (!copy) goto done;
      dt_tensor_release(yc);
      yc = copy;
    }
  }
  p.n = p.x.r, p.k = p.x.c, p.m = p.y.c;
  run_batches(&p, ct);
  rc = cc == out ? DT_OK : dt_tensor_copy_(out, cc, name);
done:
  if (xc) dt_tensor_release(xc);
  if (yc) dt_tensor_release(yc);
  if (cc && cc != out) dt_tensor_release(cc);
  return rc;
}

int dt_cpu_matmul(const dt_op_args *a, dt_tensor **out) {
  return matmul_into(a->name, a->in[0], a->in[1], NULL, 1, 0, out[0]);
}
int dt_cpu_mm(const dt_op_args *a, dt_tensor **out) { return dt_cpu_matmul(a, out); }
int dt_cpu_bmm(const dt_op_args *a, dt_tensor **out) { return dt_cpu_matmul(a, out); }

/* addmm(c, x, y; scalar[0] = beta, scalar[1] = alpha, both 1 when absent). */
int dt_cpu_addmm(const dt_op_args *a, dt_tensor **out) {
  double beta = a->nscalar > 0 ? a->scalar[0] : 1, alpha = a->nscalar > 1 ? a->scalar[1] : 1;
  return matmul_into(a->name, a->in[1], a->in[2], a->in[0], alpha, beta, out[0]);
}
