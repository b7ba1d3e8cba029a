/* The dtype table: sizes, names, categories, promotion, and scalar load/store. */
#ifndef DT_BASE_DTYPE_H
#define DT_BASE_DTYPE_H

#include "base/export.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum dt_dtype {
  DT_FLOAT32 = 0,
  DT_FLOAT64,
  DT_BFLOAT16,
  DT_FLOAT16,
  DT_INT64,
  DT_INT32,
  DT_UINT8,
  DT_BOOL,
  DT_NDTYPES
} dt_dtype;

#define DT_DEFAULT_FLOAT DT_FLOAT32

#include "base/dtype_convert.h" /* the conversions themselves, shared with CUDA device code */

DT_API size_t dt_dtype_size(dt_dtype t);
DT_API const char *dt_dtype_name(dt_dtype t);
/* Accepts "float32", "float", "f32", "float64", "double", "bfloat16", "bf16", "float16", "half",
 * "f16", "int64", "long", "int32", "int", "uint8", "bool".  Returns DT_OK or DT_ERR. */
DT_API int dt_dtype_from_name(const char *name, dt_dtype *out);
DT_API int dt_dtype_is_float(dt_dtype t);    /* f32 f64 bf16 f16 */
DT_API int dt_dtype_is_integer(dt_dtype t);  /* i64 i32 u8 (not bool) */
/* Category for promotion: 0 bool, 1 integer, 2 floating. */
DT_API int dt_dtype_category(dt_dtype t);
/* PyTorch's promote_types for two dimensioned tensors. */
DT_API dt_dtype dt_dtype_promote(dt_dtype a, dt_dtype b);
/* torch.can_cast: no float into an integer, nothing but bool into bool. */
DT_API int dt_dtype_can_cast(dt_dtype from, dt_dtype to);
/* dtype kernels compute in: bf16/f16 -> f32, everything else itself. */
DT_API dt_dtype dt_dtype_compute(dt_dtype t);

/* ---- half-precision conversions (round to nearest even) ---------------------- */
static inline float dt_bf16_to_f32(uint16_t h) { return dt_cv_bf16_to_f32(h); }
static inline uint16_t dt_f32_to_bf16(float f) { return dt_cv_f32_to_bf16(f); }
DT_API float dt_f16_to_f32(uint16_t h);
DT_API uint16_t dt_f32_to_f16(float f);

/* ---- generic scalar access (slow path; typed loops are the fast path) -------- */
DT_API double dt_load_f64(const void *p, dt_dtype t);
DT_API void dt_store_f64(void *p, dt_dtype t, double v);
DT_API int64_t dt_load_i64(const void *p, dt_dtype t);
DT_API void dt_store_i64(void *p, dt_dtype t, int64_t v);

/* DT_OK when the number (vi when is_int, else v) fits t's range, else DT_ERR with
 * "<op>: value 300 cannot be converted to type uint8 without overflow". */
DT_API int dt_check_value_fits(const char *op, dt_dtype t, int is_int, int64_t vi, double v);

#endif
