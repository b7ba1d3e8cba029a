/* sort and topk: each line along dim is ordered by a stable merge sort of (value, position),
 * so equal values keep their order (the lower index first) and the result is the same on
 * every run and every machine; NaN counts as larger than any number (torch's order).  topk
 * is the first k of the same order, which is what makes a distributed topk (the per-shard
 * candidates merged) exact, ties included. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/cpu/elem_walk.h"
#include "kernels/cpu/kernel_table.h"

typedef struct entry {
  double f;  /* floating dtypes */
  int64_t i; /* integer dtypes */
  int64_t pos;
} entry;

typedef struct order {
  int is_float, descending;
} order;

/* a strictly before b (equal values: neither, so the merge keeps their order) */
static int before(const order *o, const entry *a, const entry *b) {
  if (!o->is_float) return o->descending ? a->i > b->i : a->i < b->i;
  int na = isnan(a->f), nb = isnan(b->f);
  if (na || nb) return o->descending ? na && !nb : !na && nb;
  return o->descending ? a->f > b->f : a->f < b->f;
}

static void merge_sort(const order *o, entry *v, entry *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2;
  merge_sort(o, v, tmp, h);
  merge_sort(o, v + h, tmp, n - h);
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = before(o, &v[j], &v[i]) ? v[j++] : v[i++];
  while (i < h) tmp[k++] = v[i++];
  while (j < n) tmp[k++] = v[j++];
  memcpy(v, tmp, sizeof *v * (size_t)n);
}

/* the first k of each line along dim, in order: values into out[0], 0-based positions into out[1] */
static int sort_lines(const dt_op_args *a, dt_tensor **out, int64_t k, int descending) {
  const dt_tensor *x = a->in[0];
  int d = (int)a->ints[0], nd = x->ndim;
  int64_t len = nd ? x->shape[d] : 1, lines = len ? dt_tensor_numel(x) / len : 0;
  if (lines == 0 || len == 0) return DT_OK;
  order o = {dt_dtype_is_float(x->dtype), descending};
  entry *v = malloc(sizeof *v * (size_t)len * 2);
  if (!v) return dt_error("%s: out of memory for a line of %lld elements", a->name, (long long)len);
  int64_t outer[DT_MAX_DIMS] = {0}, lshape[DT_MAX_DIMS], c[DT_MAX_DIMS];
  for (int e = 0; e < nd; e++) lshape[e] = e == d ? 1 : x->shape[e];
  size_t es = dt_tensor_elsize(x);
  for (int64_t l = 0; l < lines; l++, dt_walk_next(nd, lshape, outer)) {
    memcpy(c, outer, sizeof c);
    for (int64_t p = 0; p < len; p++) {
      if (nd) c[d] = p;
      const char *src = dt_walk_at(x, c);
      v[p].pos = p;
      if (o.is_float) v[p].f = dt_load_f64(src, x->dtype);
      else v[p].i = dt_load_i64(src, x->dtype);
    }
    merge_sort(&o, v, v + len, len);
    for (int64_t p = 0; p < k; p++) {
      if (nd) c[d] = v[p].pos;
      const char *src = dt_walk_at(x, c);
      if (nd) c[d] = p;
      memcpy(dt_walk_at(out[0], c), src, es);
      *(int64_t *)dt_walk_at(out[1], c) = v[p].pos;
    }
  }
  free(v);
  return DT_OK;
}

int dt_cpu_sort(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *x = a->in[0];
  return sort_lines(a, out, x->ndim ? x->shape[a->ints[0]] : 1, a->nints > 1 && a->ints[1]);
}

int dt_cpu_topk(const dt_op_args *a, dt_tensor **out) { return sort_lines(a, out, a->ints[1], a->ints[2] != 0); }
