/* ids_to_zero_based: 1-based index values (int64/int32/uint8, any layout) checked against
 * 1..hi -- a value equal to skip passes, shifted like the rest -- and written as int64 v - 1
 * in row-major order.  The error names the first bad value, as the Lua functions do. */
#include <stdio.h>

#include "base/error.h"
#include "kernels/cpu/kernel_table.h"
#include "ops/ids_kind.h"

static int out_of_range(const dt_op_args *a, int64_t bad) {
  const char *op = "", *what = "", *range = "";
  if (dt_ids_kind_names(a->ints[3], &op, &what, &range) != DT_OK) return DT_ERR;
  char desc[64];
  snprintf(desc, sizeof desc, range, (long long)a->ints[0]);
  return dt_error("%s: %s %lld out of range for %s (%ss are 1-based: 1..%lld)", op, what, (long long)bad, desc, what,
                  (long long)a->ints[0]);
}

int dt_cpu_ids_to_zero_based(const dt_op_args *a, dt_tensor **out) {
  dt_tensor *c = dt_tensor_contiguous_as(a->in[0], DT_INT64);
  if (!c) return DT_ERR;
  const int64_t *src = dt_tensor_data(c);
  int64_t *dst = dt_tensor_data(out[0]), n = dt_tensor_numel(c), hi = a->ints[0], skip = a->ints[2];
  int has_skip = a->ints[1] != 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = src[i];
    if ((v < 1 || v > hi) && !(has_skip && v == skip)) {
      dt_tensor_release(c);
      return out_of_range(a, v);
    }
    dst[i] = v - 1;
  }
  dt_tensor_release(c);
  return DT_OK;
}
