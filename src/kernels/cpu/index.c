/* Indexing kernels: index_select copies the selected slices one by one (strided copies);
 * index_add adds source slices into a copy (rows of floats directly, other dtypes slice by
 * slice); index_put_ copies a value into the view t[key]. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/cpu/kernel_table.h"
#include "ops/index_key.h"

/* The slice of t at position i of dim d (a view, d kept with size 1; 0-d tensors: t itself). */
static dt_tensor *slice_at(const dt_tensor *t, int d, int64_t i) {
  if (t->ndim == 0) return dt_tensor_view_of(t, 0, t->shape, t->stride, t->offset);
  int64_t shape[DT_MAX_DIMS];
  for (int k = 0; k < t->ndim; k++) shape[k] = k == d ? 1 : t->shape[k];
  return dt_tensor_view_of(t, t->ndim, shape, t->stride, t->offset + i * t->stride[d]);
}

/* Element j of the index (0-d or 1-d, any strides, int64/int32). */
static int64_t index_at(const dt_tensor *ix, int64_t j) {
  int64_t off = 0;
  for (int k = ix->ndim - 1; k >= 0; k--) off += (j % ix->shape[k]) * ix->stride[k], j /= ix->shape[k];
  return dt_load_i64((const char *)dt_tensor_data(ix) + off * (int64_t)dt_dtype_size(ix->dtype), ix->dtype);
}

/* An index outside 0..size-1, shown 1-based as Lua users wrote it (unsigned: i may be INT64_MAX). */
int dt_cpu_index_out_of_range(const char *op, int64_t i, int d, int64_t size) {
  return dt_error("%s: index %s%llu out of range for dim %d of size %lld (indices are 1-based: 1..%lld)", op,
                  i < -1 ? "-" : "", i < -1 ? 0ULL - ((unsigned long long)i + 1) : (unsigned long long)i + 1, d + 1,
                  (long long)size, (long long)size);
}

int dt_cpu_index_select(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *x = a->in[0], *ix = a->in[1];
  int d = (int)a->ints[0];
  int64_t n = dt_tensor_numel(ix), size = x->ndim ? x->shape[d] : 1;
  for (int64_t j = 0; j < n; j++) {
    int64_t i = index_at(ix, j);
    if (i < 0 || i >= size) return dt_cpu_index_out_of_range("index_select", i, d, size);
    dt_tensor *src = slice_at(x, d, i), *dst = slice_at(out[0], d, j);
    int rc = src && dst ? dt_tensor_copy_(dst, src, a->name) : dt_error("index_select: out of memory");
    if (src) dt_tensor_release(src);
    if (dst) dt_tensor_release(dst);
    if (rc != DT_OK) return rc;
  }
  return DT_OK;
}

/* ---- index_add ---- */
/* out [outer, size, inner] += src [outer, n, inner] at rows pos[j] (-1: skipped), both
 * contiguous floating tensors of one dtype. */
#define ROWS_ADD(NAME, T)                                                                              \
  static void NAME(T *o, const T *s, const int64_t *pos, int64_t outer, int64_t size, int64_t n, int64_t inner) { \
    for (int64_t q = 0; q < outer; q++)                                                                \
      for (int64_t j = 0; j < n; j++) {                                                                \
        if (pos[j] < 0) continue;                                                                      \
        T *dst = o + (q * size + pos[j]) * inner;                                                      \
        const T *src = s + (q * n + j) * inner;                                                        \
        for (int64_t e = 0; e < inner; e++) dst[e] += src[e];                                          \
      }                                                                                                \
  }
ROWS_ADD(rows_add_f32, float)
ROWS_ADD(rows_add_f64, double)

/* ---- dim 0 of contiguous float rows (embedding's backward): out's rows split over the
 * threads, each piece setting its rows (x's, or zeros) and then adding, in index order, the
 * source rows that land in them, so each row's sum has the same order on any thread count */
typedef struct {
  char *o;
  const char *x, *s; /* x NULL: zeros */
  const int64_t *pos;
  int64_t n, inner;
  int f64;
} rows0_job;

/* d += s over w floats, four lanes at a time (each lane's add alone: the same bits as scalar) */
static void add_row_f32(float *restrict d, const float *restrict s, int64_t w) {
  int64_t e = 0;
  for (; e + 16 <= w; e += 16)
    for (int k = 0; k < 16; k += 4) {
      v4f a, b;
      memcpy(&a, d + e + k, sizeof a);
      memcpy(&b, s + e + k, sizeof b);
      a += b;
      memcpy(d + e + k, &a, sizeof a);
    }
  for (; e < w; e++) d[e] += s[e];
}

static void rows0_piece(int64_t r0, int64_t r1, void *vj) {
  const rows0_job *j = vj;
  size_t es = j->f64 ? sizeof(double) : sizeof(float), row = (size_t)j->inner * es;
  if (j->x) memcpy(j->o + (size_t)r0 * row, j->x + (size_t)r0 * row, (size_t)(r1 - r0) * row);
  else memset(j->o + (size_t)r0 * row, 0, (size_t)(r1 - r0) * row);
  for (int64_t k = 0; k < j->n; k++) {
    int64_t r = j->pos[k];
    if (r < r0 || r >= r1) continue;
    if (j->f64) {
      double *d = (double *)(j->o + (size_t)r * row);
      const double *src = (const double *)(j->s + (size_t)k * row);
      for (int64_t e = 0; e < j->inner; e++) d[e] += src[e];
    } else {
      add_row_f32((float *)(j->o + (size_t)r * row), (const float *)(j->s + (size_t)k * row), j->inner);
    }
  }
}

/* Any dtype: one add_ per index, slice into slice. */
static int slices_add(const dt_op_args *a, dt_tensor *out, const dt_tensor *src, const int64_t *pos, int d, int64_t n) {
  for (int64_t j = 0; j < n; j++) {
    if (pos[j] < 0) continue;
    dt_tensor *dst = slice_at(out, d, pos[j]), *s = slice_at(src, d, j);
    dt_tensor *in[2] = {dst, s};
    dt_op_args c = {.op = DT_OP_ADD_, .name = a->name, .in = in, .nin = 2};
    int rc = dst && s ? dt_cpu_add_(&c, &dst) : dt_error("%s: out of memory", a->name);
    if (dst) dt_tensor_release(dst);
    if (s) dt_tensor_release(s);
    if (rc != DT_OK) return rc;
  }
  return DT_OK;
}

/* out = x (zeros with DT_ARG_INDEX_NO_BASE) plus src's slices at the index's positions along
 * dim; with DT_ARG_INDEX_BLOCK x holds only the rows ints[1].. of a dim of ints[2]. */
int dt_cpu_index_add(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *x = a->in[0], *ix = a->in[1];
  int d = (int)a->ints[0], block = (a->flags & DT_ARG_INDEX_BLOCK) != 0;
  int64_t n = dt_tensor_numel(ix), local = x->ndim ? x->shape[d] : 1;
  int64_t first = block ? a->ints[1] : 0, size = block ? a->ints[2] : local;
  int no_base = (a->flags & DT_ARG_INDEX_NO_BASE) != 0, rc = DT_OK;
  int64_t *pos = malloc(sizeof *pos * (size_t)(n ? n : 1));
  if (!pos) return dt_error("%s: out of memory", a->name);
  for (int64_t j = 0; j < n && rc == DT_OK; j++) {
    int64_t i = index_at(ix, j);
    if (i < 0 || i >= size) rc = dt_cpu_index_out_of_range("index_add", i, d, size);
    pos[j] = i - first >= 0 && i - first < local ? i - first : -1; /* another rank's row */
  }
  dt_dtype t = out[0]->dtype;
  if (rc == DT_OK && d == 0 && x->ndim > 0 && (t == DT_FLOAT32 || t == DT_FLOAT64) && dt_tensor_is_contiguous(out[0]) &&
      (no_base || (x->dtype == t && dt_tensor_is_contiguous(x))) && dt_tensor_is_contiguous(a->in[2])) {
    int64_t inner = dt_shape_numel(x->ndim - 1, x->shape + 1), per_row = inner * (1 + (local ? n / local : 0));
    rows0_job j = {.o = dt_tensor_data(out[0]), .x = no_base ? NULL : dt_tensor_data(x), .s = dt_tensor_data(a->in[2]),
                   .pos = pos, .n = n, .inner = inner, .f64 = t == DT_FLOAT64};
    if (local > 0 && inner > 0)
      dt_parallel_for(local, per_row >= DT_PARALLEL_GRAIN ? 1 : DT_PARALLEL_GRAIN / per_row, rows0_piece, &j);
    free(pos);
    return DT_OK;
  }
  if (rc == DT_OK) rc = no_base ? dt_cpu_zero_(a, out) : dt_tensor_copy_(out[0], x, a->name);
  if (rc == DT_OK && (t == DT_FLOAT32 || t == DT_FLOAT64) && dt_tensor_is_contiguous(out[0])) {
    dt_tensor *s = dt_tensor_contiguous(a->in[2]);
    if (!s) rc = dt_error_prefix("%s", a->name);
    else {
      int64_t outer = x->ndim ? dt_shape_numel(d, x->shape) : 1;
      int64_t inner = x->ndim ? dt_shape_numel(x->ndim - d - 1, x->shape + d + 1) : 1;
      if (t == DT_FLOAT32) rows_add_f32(dt_tensor_data(out[0]), dt_tensor_data(s), pos, outer, local, n, inner);
      else rows_add_f64(dt_tensor_data(out[0]), dt_tensor_data(s), pos, outer, local, n, inner);
      dt_tensor_release(s);
    }
  } else if (rc == DT_OK) {
    rc = slices_add(a, out[0], a->in[2], pos, d, n);
  }
  free(pos);
  return rc;
}

/* The view t[key] (the shape rule validated the key). */
static dt_tensor *key_view(const dt_tensor *t, const dt_index_key *k) {
  int64_t shape[DT_MAX_DIMS], stride[DT_MAX_DIMS], off = t->offset;
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    dt_index_kind kind = d < k->ndim ? k->kind[d] : DT_INDEX_ALL;
    if (kind == DT_INDEX_SELECT) {
      off += k->start[d] * t->stride[d];
      continue;
    }
    if (kind == DT_INDEX_ALL) {
      shape[n] = t->shape[d], stride[n++] = t->stride[d];
      continue;
    }
    off += k->start[d] * t->stride[d];
    shape[n] = dt_index_key_count(k, d), stride[n++] = t->stride[d] * k->step[d];
  }
  return dt_tensor_view_of(t, n, shape, stride, off);
}

/* copy_ into the view t[key]: copy_ reads a value that overlaps it first (t[{2, 5}] = t[{1, 4}]). */
int dt_cpu_index_put_(const dt_op_args *a, dt_tensor **out) {
  dt_index_key k;
  dt_index_key_from_args(a, &k);
  dt_tensor *view = key_view(out[0], &k);
  if (!view) return dt_error("%s: out of memory", a->name);
  dt_tensor *in[2] = {view, a->in[1]};
  dt_op_args c = *a;
  c.in = in, c.nin = 2;
  int rc = dt_cpu_copy_(&c, &view);
  dt_tensor_release(view);
  return rc;
}
