/* gather, scatter and scatter_add: element by element along one dim, at the positions an
 * index tensor holds (0-based here; an index outside the dim is an error naming it 1-based). */
#include <string.h>

#include "base/error.h"
#include "kernels/cpu/elem_walk.h"
#include "kernels/cpu/kernel_table.h"

int dt_cpu_gather(const dt_op_args *a, dt_tensor **out) {
  const dt_tensor *x = a->in[0], *ix = a->in[1];
  int d = (int)a->ints[0], nd = ix->ndim;
  int64_t n = dt_tensor_numel(ix), size = x->ndim ? x->shape[d] : 1, c[DT_MAX_DIMS] = {0};
  size_t es = dt_tensor_elsize(x);
  char *o = dt_tensor_data(out[0]);
  for (int64_t j = 0; j < n; j++, dt_walk_next(nd, ix->shape, c)) {
    int64_t i = dt_load_i64(dt_walk_at(ix, c), ix->dtype), keep = nd ? c[d] : 0;
    if (i < 0 || i >= size) return dt_cpu_index_out_of_range(a->name, i, d, size);
    if (nd) c[d] = i;
    memcpy(o + j * (int64_t)es, dt_walk_at(x, c), es);
    if (nd) c[d] = keep;
  }
  return DT_OK;
}

/* out = x, then src's elements written (or added) at the index's positions along dim */
static int scatter(const dt_op_args *a, dt_tensor *out, int add) {
  const dt_tensor *x = a->in[0], *ix = a->in[1], *src = a->in[2];
  if (dt_tensor_copy_(out, x, a->name) != DT_OK) return DT_ERR;
  int d = (int)a->ints[0], nd = ix->ndim, fl = dt_dtype_is_float(x->dtype);
  int64_t n = dt_tensor_numel(ix), size = x->ndim ? x->shape[d] : 1, c[DT_MAX_DIMS] = {0};
  size_t es = dt_tensor_elsize(x);
  for (int64_t j = 0; j < n; j++, dt_walk_next(nd, ix->shape, c)) {
    int64_t i = dt_load_i64(dt_walk_at(ix, c), ix->dtype), keep = nd ? c[d] : 0;
    if (i < 0 || i >= size) return dt_cpu_index_out_of_range(a->name, i, d, size);
    const char *s = dt_walk_at(src, c);
    if (nd) c[d] = i;
    char *p = dt_walk_at(out, c);
    if (nd) c[d] = keep;
    if (!add) memcpy(p, s, es);
    else if (fl) /* one rounding to the dtype per add, as the dtype's own addition */
      dt_store_f64(p, x->dtype, dt_load_f64(p, x->dtype) + dt_load_f64(s, x->dtype));
    else if (x->dtype == DT_BOOL)
      *(unsigned char *)p = *(unsigned char *)p || *(const unsigned char *)s;
    else
      dt_store_i64(p, x->dtype, (int64_t)((uint64_t)dt_load_i64(p, x->dtype) + (uint64_t)dt_load_i64(s, x->dtype)));
  }
  return DT_OK;
}

int dt_cpu_scatter(const dt_op_args *a, dt_tensor **out) { return scatter(a, out[0], 0); }
int dt_cpu_scatter_add(const dt_op_args *a, dt_tensor **out) { return scatter(a, out[0], 1); }
