/* .npy reader and writer; see npy.h for the format. */
#include "io/npy.h"
#include "base/error.h"
#include "base/size.h"
#include "io/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy I/O assumes a little-endian host"
#endif

#define NPY_MAX_HEADER (1 << 20) /* numpy itself refuses headers over 10 kB by default */

static const char *const descrs[DT_NDTYPES] = {
    [DT_FLOAT32] = "<f4", [DT_FLOAT64] = "<f8", [DT_BFLOAT16] = NULL, [DT_FLOAT16] = "<f2",
    [DT_INT64] = "<i8",   [DT_INT32] = "<i4",   [DT_UINT8] = "|u1",   [DT_BOOL] = "|b1",
};

/* ---- save ---- */
int dt_npy_save(const char *path, dt_tensor *t) {
  if (!descrs[t->dtype])
    return dt_error("save_npy: %s: %s has no NumPy dtype (convert it first, e.g. :to(\"float32\"))", path,
                    dt_dtype_name(t->dtype));
  char dict[512];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descrs[t->dtype]);
  for (int d = 0; d < t->ndim; d++) n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld, ", (long long)t->shape[d]);
  if (t->ndim > 1) n -= 2; /* (2, 3) but (3,) */
  if (t->ndim == 1) n -= 1;
  n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
  /* magic(6) + version(2) + len(2) + dict + spaces + '\n' is a multiple of 64 */
  size_t total = (size_t)(10 + n + 1 + 63) / 64 * 64;
  unsigned char head[640];
  memcpy(head, "\x93NUMPY\x01\x00", 8);
  size_t hlen = total - 10;
  head[8] = (unsigned char)(hlen & 0xff), head[9] = (unsigned char)(hlen >> 8);
  memcpy(head + 10, dict, (size_t)n);
  memset(head + 10 + n, ' ', total - 10 - (size_t)n - 1);
  head[total - 1] = '\n';

  dt_tensor *c = dt_tensor_host_contiguous(t);
  if (!c) return dt_error_prefix("save_npy: %s", path);
  dt_file_writer w;
  int rc = dt_file_writer_open(&w, path, "save_npy");
  if (rc == DT_OK) {
    rc = dt_file_write(&w, head, total);
    if (rc == DT_OK) rc = dt_file_write(&w, dt_tensor_data(c), (size_t)(dt_tensor_numel(c) * (int64_t)dt_tensor_elsize(c)));
    rc = rc == DT_OK ? dt_file_writer_commit(&w) : (dt_file_writer_abort(&w), DT_ERR);
  }
  dt_tensor_release(c);
  return rc;
}

/* ---- load: a tiny parser for the header's Python dict literal ---- */
typedef struct lit {
  const char *s;
  size_t pos, len;
} lit;

static void ws(lit *p) {
  while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n')) p->pos++;
}
static int eat(lit *p, char c) {
  ws(p);
  if (p->pos < p->len && p->s[p->pos] == c) return p->pos++, 1;
  return 0;
}
/* A quoted string ('x' or "x", no escapes: none of the valid keys or descrs need them). */
static int str(lit *p, char *out, size_t cap) {
  ws(p);
  if (p->pos >= p->len || (p->s[p->pos] != '\'' && p->s[p->pos] != '"')) return 0;
  char q = p->s[p->pos++];
  size_t n = 0;
  while (p->pos < p->len && p->s[p->pos] != q) {
    if (n + 1 >= cap) return 0;
    out[n++] = p->s[p->pos++];
  }
  if (p->pos >= p->len) return 0;
  p->pos++;
  out[n] = '\0';
  return 1;
}
static int word(lit *p, const char *w) {
  ws(p);
  size_t n = strlen(w);
  if (p->len - p->pos >= n && memcmp(p->s + p->pos, w, n) == 0) return p->pos += n, 1;
  return 0;
}

#define BAD(what) dt_error("load_npy: %s: invalid header: %s", path, what)

static int parse_shape(lit *p, const char *path, int *ndim, int64_t *shape) {
  if (!eat(p, '(')) return BAD("'shape' is not a tuple");
  *ndim = 0;
  while (!eat(p, ')')) {
    ws(p);
    int neg = p->pos < p->len && p->s[p->pos] == '-';
    if (neg) p->pos++;
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return BAD("'shape' must hold integers");
    int64_t v = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
      if (v > (INT64_MAX - 9) / 10) return BAD("dim too large");
      v = v * 10 + (p->s[p->pos++] - '0');
    }
    if (p->pos < p->len && p->s[p->pos] == 'L') p->pos++; /* Python 2 longs */
    if (neg) return dt_error("load_npy: %s: negative dim -%lld in shape", path, (long long)v);
    if (*ndim == DT_MAX_DIMS) return dt_error("load_npy: %s: more than %d dims", path, DT_MAX_DIMS);
    shape[(*ndim)++] = v;
    if (!eat(p, ',')) {
      if (!eat(p, ')')) return BAD("expected ',' or ')' in 'shape'");
      break;
    }
  }
  return DT_OK;
}

static int parse_dict(const char *path, const char *text, size_t len, dt_dtype *dtype, int *ndim, int64_t *shape) {
  lit p = {text, 0, len};
  int have = 0; /* bits: descr, fortran_order, shape */
  if (!eat(&p, '{')) return BAD("not a dict");
  while (!eat(&p, '}')) {
    char key[32], val[32];
    if (!str(&p, key, sizeof key) || !eat(&p, ':')) return BAD("expected 'key':");
    if (strcmp(key, "descr") == 0) {
      if (!str(&p, val, sizeof val)) return BAD("'descr' is not a string");
      int found = 0;
      for (int i = 0; i < DT_NDTYPES && !found; i++)
        if (descrs[i] && strcmp(descrs[i], val) == 0) *dtype = (dt_dtype)i, found = 1;
      if (!found && strcmp(val, "<u1") == 0) *dtype = DT_UINT8, found = 1;
      if (!found && strcmp(val, "<b1") == 0) *dtype = DT_BOOL, found = 1;
      if (!found)
        return dt_error("load_npy: %s: unsupported dtype '%s' (supported: <f4 <f8 <f2 <i8 <i4 |u1 |b1, little-endian)",
                        path, val);
      have |= 1;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (word(&p, "True")) return dt_error("load_npy: %s: fortran_order True is not supported (save C-ordered)", path);
      if (!word(&p, "False")) return BAD("'fortran_order' must be True or False");
      have |= 2;
    } else if (strcmp(key, "shape") == 0) {
      if (parse_shape(&p, path, ndim, shape) != DT_OK) return DT_ERR;
      have |= 4;
    } else {
      return dt_error("load_npy: %s: invalid header: unknown key '%s'", path, key);
    }
    if (!eat(&p, ',')) {
      if (!eat(&p, '}')) return BAD("expected ',' or '}'");
      break;
    }
  }
  ws(&p);
  if (p.pos != len) return BAD("characters after the dict");
  if (have != 7) return BAD("needs 'descr', 'fortran_order' and 'shape'");
  return DT_OK;
}

static dt_tensor *load_body(const char *path, FILE *f, int64_t fsize) {
  unsigned char pre[12];
  if (fsize < 10 || dt_file_read_at(f, 0, pre, 10, path, "load_npy") != DT_OK || memcmp(pre, "\x93NUMPY", 6) != 0) {
    dt_error("load_npy: %s: not a .npy file (bad magic)", path);
    return NULL;
  }
  int major = pre[6];
  int64_t hlen, start;
  if (major == 1) {
    hlen = pre[8] | pre[9] << 8, start = 10;
  } else if (major == 2 || major == 3) {
    if (dt_file_read_at(f, 0, pre, 12, path, "load_npy") != DT_OK) return NULL;
    hlen = (int64_t)pre[8] | (int64_t)pre[9] << 8 | (int64_t)pre[10] << 16 | (int64_t)pre[11] << 24, start = 12;
  } else {
    dt_error("load_npy: %s: unsupported format version %d.%d", path, major, pre[7]);
    return NULL;
  }
  if (hlen > fsize - start || hlen > NPY_MAX_HEADER) {
    dt_error("load_npy: %s: header length %lld exceeds the file size %lld", path, (long long)hlen, (long long)fsize);
    return NULL;
  }
  char *text = malloc((size_t)hlen + 1);
  if (!text) return dt_error("load_npy: %s: out of memory", path), NULL;
  dt_dtype dtype = DT_FLOAT32;
  int ndim = 0;
  int64_t shape[DT_MAX_DIMS];
  int rc = dt_file_read_at(f, start, text, (size_t)hlen, path, "load_npy");
  if (rc == DT_OK) rc = parse_dict(path, text, (size_t)hlen, &dtype, &ndim, shape);
  free(text);
  if (rc != DT_OK) return NULL;
  int64_t numel;
  if (dt_shape_numel_checked(ndim, shape, &numel) != DT_OK) { /* a 0 dim does not hide the others */
    char op[400];
    snprintf(op, sizeof op, "load_npy: %.300s", path);
    return dt_check_numel(op, ndim, shape), NULL;
  }
  int64_t nbytes = numel * (int64_t)dt_dtype_size(dtype), have = fsize - start - hlen;
  if (have != nbytes) {
    dt_error("load_npy: %s: data is %lld bytes but shape and dtype need %lld%s", path, (long long)have, (long long)nbytes,
             have < nbytes ? " (file truncated?)" : "");
    return NULL;
  }
  dt_tensor *t = dt_tensor_empty(dtype, ndim, shape, DT_HOST);
  if (!t) return dt_error_prefix("load_npy: %s", path), NULL;
  if (dt_file_read_at(f, start + hlen, dt_tensor_data(t), (size_t)nbytes, path, "load_npy") != DT_OK) {
    dt_tensor_release(t);
    return NULL;
  }
  if (dtype == DT_BOOL) {
    unsigned char *p = dt_tensor_data(t);
    for (int64_t k = 0; k < nbytes; k++) p[k] = p[k] != 0;
  }
  return t;
}

dt_tensor *dt_npy_load(const char *path) {
  int64_t fsize;
  FILE *f = dt_file_open_read(path, "load_npy", &fsize);
  if (!f) return NULL;
  dt_tensor *t = load_body(path, f, fsize);
  fclose(f);
  return t;
}
