/* torch.result_type over tensors of three tiers and Lua numbers. */
#include "ops/result_type.h"

void dt_result_type_init(dt_result_type *r) { r->dim = r->zero = r->wrapped = -1; }

static int promote_opt(int a, int b) { return a < 0 ? b : b < 0 ? a : (int)dt_dtype_promote(a, b); }

void dt_result_type_tensor(dt_result_type *r, const dt_tensor *t) {
  if (t->ndim > 0) r->dim = promote_opt(r->dim, t->dtype);
  else r->zero = promote_opt(r->zero, t->dtype);
}

void dt_result_type_number(dt_result_type *r, int is_int) {
  r->wrapped = promote_opt(r->wrapped, is_int ? DT_INT64 : DT_DEFAULT_FLOAT);
}

/* c10's combine_categories: the higher tier wins unless the lower one is of a higher category. */
static int combine(int hi, int lo) {
  if (hi < 0) return lo;
  if (lo < 0 || dt_dtype_is_float(hi)) return hi;
  if (hi == DT_BOOL || dt_dtype_is_float(lo)) return dt_dtype_promote(hi, lo);
  return hi;
}

dt_dtype dt_result_type_get(const dt_result_type *r) {
  int t = combine(r->dim, combine(r->zero, r->wrapped));
  return t < 0 ? DT_DEFAULT_FLOAT : (dt_dtype)t;
}

dt_dtype dt_result_type_binary(const dt_op_args *a) {
  dt_result_type r;
  dt_result_type_init(&r);
  dt_result_type_tensor(&r, a->in[0]);
  if (a->flags & DT_ARG_SCALAR) dt_result_type_number(&r, a->flags & DT_ARG_SCALAR_INT);
  else dt_result_type_tensor(&r, a->in[1]);
  return dt_result_type_get(&r);
}

dt_dtype dt_result_type_clamp(const dt_op_args *a) {
  dt_result_type r;
  dt_result_type_init(&r);
  dt_result_type_tensor(&r, a->in[0]);
  if (a->flags & (DT_ARG_HAS_MIN | DT_ARG_HAS_MAX)) dt_result_type_number(&r, a->flags & DT_ARG_SCALAR_INT);
  return dt_result_type_get(&r);
}

dt_dtype dt_result_type_where(const dt_op_args *a) {
  dt_result_type r;
  dt_result_type_init(&r);
  if (a->in[1]) dt_result_type_tensor(&r, a->in[1]);
  else dt_result_type_number(&r, a->flags & DT_ARG_WHERE_A_INT);
  if (a->in[2]) dt_result_type_tensor(&r, a->in[2]);
  else dt_result_type_number(&r, a->flags & DT_ARG_WHERE_B_INT);
  return dt_result_type_get(&r);
}
