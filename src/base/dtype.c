#include "base/dtype.h"
#include "base/error.h"

#include <math.h>

static const struct {
  const char *name;
  size_t size;
  int category;
} dtype_info[DT_NDTYPES] = {
    [DT_FLOAT32] = {"float32", 4, 2}, [DT_FLOAT64] = {"float64", 8, 2},
    [DT_BFLOAT16] = {"bfloat16", 2, 2}, [DT_FLOAT16] = {"float16", 2, 2},
    [DT_INT64] = {"int64", 8, 1}, [DT_INT32] = {"int32", 4, 1},
    [DT_UINT8] = {"uint8", 1, 1}, [DT_BOOL] = {"bool", 1, 0},
};

static const struct {
  const char *alias;
  dt_dtype dtype;
} dtype_aliases[] = {
    {"float", DT_FLOAT32}, {"f32", DT_FLOAT32}, {"double", DT_FLOAT64}, {"f64", DT_FLOAT64},
    {"bf16", DT_BFLOAT16}, {"half", DT_FLOAT16}, {"f16", DT_FLOAT16}, {"long", DT_INT64},
    {"int", DT_INT32},     {"byte", DT_UINT8},
};

size_t dt_dtype_size(dt_dtype t) { return dtype_info[t].size; }
const char *dt_dtype_name(dt_dtype t) { return (unsigned)t < DT_NDTYPES ? dtype_info[t].name : "?"; }
int dt_dtype_category(dt_dtype t) { return dtype_info[t].category; }
int dt_dtype_is_float(dt_dtype t) { return dtype_info[t].category == 2; }
int dt_dtype_is_integer(dt_dtype t) { return dtype_info[t].category == 1; }

int dt_dtype_from_name(const char *name, dt_dtype *out) {
  for (int i = 0; i < DT_NDTYPES; i++)
    if (strcmp(name, dtype_info[i].name) == 0) return *out = (dt_dtype)i, DT_OK;
  for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
    if (strcmp(name, dtype_aliases[i].alias) == 0) return *out = dtype_aliases[i].dtype, DT_OK;
  return dt_error("unknown dtype '%s' (expected float32, float64, bfloat16, float16, int64, int32, uint8 or bool)",
                  name);
}

int dt_dtype_can_cast(dt_dtype from, dt_dtype to) {
  if (dt_dtype_is_float(from) && !dt_dtype_is_float(to)) return 0;
  if (from != DT_BOOL && to == DT_BOOL) return 0;
  return 1;
}

dt_dtype dt_dtype_promote(dt_dtype a, dt_dtype b) {
  if (a == b) return a;
  int ca = dtype_info[a].category, cb = dtype_info[b].category;
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if ((a == DT_BFLOAT16 && b == DT_FLOAT16) || (a == DT_FLOAT16 && b == DT_BFLOAT16)) return DT_FLOAT32;
    return dtype_info[a].size >= dtype_info[b].size ? a : b;
  }
  /* integers: uint8 with a signed type goes to the signed type (i32/i64 are wider) */
  return dtype_info[a].size >= dtype_info[b].size ? a : b;
}

dt_dtype dt_dtype_compute(dt_dtype t) { return (t == DT_BFLOAT16 || t == DT_FLOAT16) ? DT_FLOAT32 : t; }

float dt_f16_to_f32(uint16_t h) { return dt_cv_f16_to_f32(h); }
uint16_t dt_f32_to_f16(float f) { return dt_cv_f32_to_f16(f); }
double dt_load_f64(const void *p, dt_dtype t) { return dt_cv_load_f64(p, t); }
void dt_store_f64(void *p, dt_dtype t, double v) { dt_cv_store_f64(p, t, v); }
int64_t dt_load_i64(const void *p, dt_dtype t) { return dt_cv_load_i64(p, t); }
void dt_store_i64(void *p, dt_dtype t, int64_t v) { dt_cv_store_i64(p, t, v); }

/* A number the dtype cannot hold is refused, as torch does (uint8 + 300), rather than
 * wrapped.  Floats overflow to inf (IEEE); any number is a valid bool. */
int dt_check_value_fits(const char *op, dt_dtype t, int is_int, int64_t vi, double v) {
  double lo, end; /* valid: lo <= x < end */
  switch (t) {
  case DT_INT64:
    if (is_int) return DT_OK;
    lo = -9223372036854775808.0, end = 9223372036854775808.0;
    break;
  case DT_INT32: lo = INT32_MIN, end = (double)INT32_MAX + 1; break;
  case DT_UINT8: lo = 0, end = 256; break;
  default: return DT_OK;
  }
  double x = is_int ? (double)vi : trunc(v);
  if (x == x && x >= lo && x < end) return DT_OK;
  if (is_int) return dt_error("%s: value %lld cannot be converted to type %s without overflow", op, (long long)vi,
                              dt_dtype_name(t));
  return dt_error("%s: value %g cannot be converted to type %s without overflow", op, v, dt_dtype_name(t));
}
