/* tostring(t): PyTorch's print format (torch/_tensor_str.py with default options:
 * precision 4, linewidth 80, summarise above 1000 elements with 3 edge items).
 *   tensor([[1., 2.],
 *           [3., 4.]])
 * Floats share one mode chosen from the nonzero finite values: integers ("1."),
 * fixed ("1.2500") or scientific ("1.2500e+08"); every value is padded to one width.
 * Only the elements shown are read, so printing a huge tensor is cheap. */
#include "base/error.h"
#include "bindings/l_tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define PRECISION 4
#define LINEWIDTH 80
#define THRESHOLD 1000
#define EDGEITEMS 3

typedef struct fmt {
  const dt_tensor *t;
  int is_float, is_bool, summarize;
  int int_mode, sci_mode, max_width;
  int have_nz; /* a nonzero finite value was seen */
  double nz_min, nz_max;
} fmt;

typedef void (*elem_fn)(fmt *f, const char *p);

/* Calls fn on every element that will be shown, in order. */
static void visit(fmt *f, const char *p, int d, elem_fn fn) {
  const dt_tensor *t = f->t;
  if (d == t->ndim) {
    fn(f, p);
    return;
  }
  int64_t n = t->shape[d], step = t->stride[d] * (int64_t)dt_tensor_elsize(t);
  for (int64_t i = 0; i < n; i++) {
    if (f->summarize && n > 2 * EDGEITEMS && i == EDGEITEMS) i = n - EDGEITEMS;
    visit(f, p + i * step, d + 1, fn);
  }
}

static int format_value(const fmt *f, const char *p, char *buf, size_t len) {
  dt_dtype dt = f->t->dtype;
  if (f->is_bool) return snprintf(buf, len, "%s", dt_load_i64(p, dt) ? "True" : "False");
  if (!f->is_float) return snprintf(buf, len, "%lld", (long long)dt_load_i64(p, dt));
  double v = dt_load_f64(p, dt);
  if (isnan(v)) return snprintf(buf, len, "nan");
  if (isinf(v)) return snprintf(buf, len, v > 0 ? "inf" : "-inf");
  if (f->sci_mode) return snprintf(buf, len, "%.*e", PRECISION, v);
  if (f->int_mode) return snprintf(buf, len, "%.0f.", v);
  return snprintf(buf, len, "%.*f", PRECISION, v);
}

/* pass 1 (floats): range of the nonzero finite values and whether all are integers */
static void stats(fmt *f, const char *p) {
  double v = fabs(dt_load_f64(p, f->t->dtype));
  if (v == 0 || !isfinite(v)) return;
  if (v != ceil(v)) f->int_mode = 0;
  if (!f->have_nz || v < f->nz_min) f->nz_min = v;
  if (!f->have_nz || v > f->nz_max) f->nz_max = v;
  f->have_nz = 1;
}

/* pass 2: the widest formatted value (for floats, nonzero finite values only, as torch) */
static void width(fmt *f, const char *p) {
  if (f->is_float) {
    double v = dt_load_f64(p, f->t->dtype);
    if (v == 0 || !isfinite(v)) return;
  }
  char buf[64];
  int n = format_value(f, p, buf, sizeof buf);
  if (n > f->max_width) f->max_width = n;
}

static void fmt_init(fmt *f, const dt_tensor *t) {
  memset(f, 0, sizeof *f);
  f->t = t;
  f->is_float = dt_dtype_is_float(t->dtype);
  f->is_bool = t->dtype == DT_BOOL;
  f->summarize = dt_tensor_numel(t) > THRESHOLD;
  f->int_mode = 1;
  f->max_width = 1;
  const char *p = dt_tensor_data(t);
  if (f->is_float) {
    visit(f, p, 0, stats);
    if (!f->have_nz) return;
    f->sci_mode = f->nz_max / f->nz_min > 1000.0 || f->nz_max > 1.0e8 || (!f->int_mode && f->nz_min < 1.0e-4);
  }
  visit(f, p, 0, width);
}

static void add_spaces(luaL_Buffer *b, int n) {
  for (int i = 0; i < n; i++) luaL_addchar(b, ' ');
}

static void add_value(const fmt *f, luaL_Buffer *b, const char *p) {
  char buf[64];
  int n = format_value(f, p, buf, sizeof buf);
  add_spaces(b, f->max_width - n);
  luaL_addlstring(b, buf, (size_t)n);
}

/* The last dim: as many values per line as fit in the line width. */
static void add_vector(const fmt *f, luaL_Buffer *b, const char *p, int indent) {
  const dt_tensor *t = f->t;
  int64_t n = t->shape[t->ndim - 1], step = t->stride[t->ndim - 1] * (int64_t)dt_tensor_elsize(t);
  int per_line = (LINEWIDTH - indent) / (f->max_width + 2);
  if (per_line < 1) per_line = 1;
  int skip = f->summarize && n > 2 * EDGEITEMS;
  int64_t items = skip ? 2 * EDGEITEMS + 1 : n;
  luaL_addchar(b, '[');
  for (int64_t k = 0; k < items; k++) {
    if (k > 0 && k % per_line == 0) {
      luaL_addstring(b, ",\n");
      add_spaces(b, indent + 1);
    } else if (k > 0) {
      luaL_addstring(b, ", ");
    }
    if (skip && k == EDGEITEMS) luaL_addstring(b, " ...");
    else add_value(f, b, p + (skip && k > EDGEITEMS ? n - items + k : k) * step);
  }
  luaL_addchar(b, ']');
}

static void add_tensor(const fmt *f, luaL_Buffer *b, const char *p, int d, int indent) {
  const dt_tensor *t = f->t;
  if (d == t->ndim) return add_value(f, b, p);
  if (d == t->ndim - 1) return add_vector(f, b, p, indent);
  int64_t n = t->shape[d], step = t->stride[d] * (int64_t)dt_tensor_elsize(t);
  int skip = f->summarize && n > 2 * EDGEITEMS;
  luaL_addchar(b, '[');
  for (int64_t i = 0; i < n; i++) {
    if (i > 0) { /* "," then one blank line per dim below this one */
      luaL_addchar(b, ',');
      for (int k = 0; k < t->ndim - d - 1; k++) luaL_addchar(b, '\n');
      add_spaces(b, indent + 1);
    }
    if (skip && i == EDGEITEMS) {
      luaL_addstring(b, "...");
      i = n - EDGEITEMS - 1;
      continue;
    }
    add_tensor(f, b, p + i * step, d + 1, indent + 1);
  }
  luaL_addchar(b, ']');
}

/* ", size=(2, 0)" and the like, wrapped onto a new line when the line would pass 80. */
static void add_suffix(luaL_Buffer *b, const char *s, int indent) {
  const char *all = luaL_buffaddr(b), *nl = NULL;
  size_t len = luaL_bufflen(b);
  for (size_t i = 0; i < len; i++)
    if (all[i] == '\n') nl = all + i;
  size_t last_line = nl ? (size_t)(all + len - nl) + 1 : len + 2; /* torch's arithmetic */
  if (last_line + strlen(s) + 2 > LINEWIDTH) {
    luaL_addstring(b, ",\n");
    add_spaces(b, indent);
  } else {
    luaL_addstring(b, ", ");
  }
  luaL_addstring(b, s);
}

static int tensor_tostring(lua_State *L) {
  dt_lua_capture_refuse(L, "tostring(t) (tensor values read into Lua)");
  /* named: tostring/print of a released tensor said "bad argument #1 to '?'" */
  const dt_tensor *t = dt_lua_check_value_for(L, 1, "tostring", NULL)->local;
  /* values are read on the host: a copy only for a device tensor (not leaked by raises otherwise) */
  dt_tensor *h = dt_device_is_host(dt_tensor_device(t)) ? NULL : dt_tensor_to_host((dt_tensor *)t);
  if (!dt_device_is_host(dt_tensor_device(t)) && !h) return dt_lua_raise(L);
  const dt_tensor *v = h ? h : t;
  const char *prefix = "tensor(";
  int indent = (int)strlen(prefix), empty = dt_tensor_numel(t) == 0;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, prefix);
  if (empty) {
    luaL_addstring(&b, "[]");
  } else {
    fmt f;
    fmt_init(&f, v);
    add_tensor(&f, &b, dt_tensor_data(v), 0, indent);
  }
  char s[256];
  if (empty && t->ndim != 1) { /* Python tuple syntax: (0, 3); {0} prints as tensor([]) */
    int n = snprintf(s, sizeof s, "size=(");
    for (int i = 0; i < t->ndim; i++) n += snprintf(s + n, sizeof s - n, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    snprintf(s + n, sizeof s - n, ")");
    add_suffix(&b, s, indent);
  }
  /* float32, int64 and bool are what dt.tensor infers, so their dtype goes unsaid, except
   * for empty tensors where nothing shows the dtype */
  if (t->dtype != DT_DEFAULT_FLOAT && (empty || (t->dtype != DT_INT64 && t->dtype != DT_BOOL))) {
    snprintf(s, sizeof s, "dtype=%s", dt_dtype_name(t->dtype));
    add_suffix(&b, s, indent);
  }
  dt_tensor_release(h);
  if (!dt_device_is_host(dt_tensor_device(t))) {
    snprintf(s, sizeof s, "device=%s", dt_device_name(dt_tensor_device(t)));
    add_suffix(&b, s, indent);
  }
  luaL_addchar(&b, ')');
  luaL_pushresult(&b);
  return 1;
}

void dt_lua_open_print(lua_State *L, const dt_lua_targets *tg) {
  lua_pushcfunction(L, tensor_tostring);
  lua_setfield(L, tg->meta, "__tostring");
  lua_pushcfunction(L, tensor_tostring);
  lua_setfield(L, tg->methods, "tostring");
}
