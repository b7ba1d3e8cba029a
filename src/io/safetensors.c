/* safetensors reader and writer; see safetensors.h for the format. */
#include "io/safetensors.h"
#include "base/error.h"
#include "base/size.h"
#include "io/file.h"
#include "io/json.h"

#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors I/O assumes a little-endian host"
#endif

/* The reference implementation refuses headers above 100 MB; so do we (corrupt lengths). */
#define ST_MAX_HEADER (100 * 1000 * 1000)

static const char *const codes[DT_NDTYPES] = {
    [DT_FLOAT32] = "F32", [DT_FLOAT64] = "F64", [DT_BFLOAT16] = "BF16", [DT_FLOAT16] = "F16",
    [DT_INT64] = "I64",   [DT_INT32] = "I32",   [DT_UINT8] = "U8",      [DT_BOOL] = "BOOL",
};

const char *dt_safetensors_dtype_code(dt_dtype t) { return codes[t]; }

int dt_safetensors_dtype_from_code(const char *code, dt_dtype *out) {
  for (int i = 0; i < DT_NDTYPES; i++)
    if (strcmp(codes[i], code) == 0) return *out = (dt_dtype)i, DT_OK;
  return DT_ERR;
}

void dt_safetensors_free(dt_safetensors *st) {
  for (int i = 0; i < st->n; i++) {
    free(st->names[i]);
    if (st->tensors[i]) dt_tensor_release(st->tensors[i]);
  }
  for (int i = 0; i < st->nmeta; i++) free(st->meta_keys[i]), free(st->meta_values[i]);
  free(st->names), free(st->tensors), free(st->meta_keys), free(st->meta_values);
  memset(st, 0, sizeof *st);
}

/* ---- save ---- */
static void put_u64le(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static int build_header(const char *path, const dt_safetensors *st, dt_json_buf *b) {
  dt_json_put_raw(b, "{", 1);
  if (st->nmeta > 0) {
    dt_json_put_raw(b, "\"__metadata__\":{", 16);
    for (int i = 0; i < st->nmeta; i++) {
      if (i) dt_json_put_raw(b, ",", 1);
      dt_json_put_string(b, st->meta_keys[i]);
      dt_json_put_raw(b, ":", 1);
      dt_json_put_string(b, st->meta_values[i]);
    }
    dt_json_put_raw(b, "}", 1);
  }
  int64_t offset = 0;
  for (int i = 0; i < st->n; i++) {
    const dt_tensor *t = st->tensors[i];
    if (st->names[i][0] == '\0' || strcmp(st->names[i], "__metadata__") == 0)
      return dt_error("save: %s: invalid tensor name '%s'", path, st->names[i]);
    for (int j = 0; j < i; j++)
      if (strcmp(st->names[i], st->names[j]) == 0) return dt_error("save: %s: duplicate tensor name '%s'", path, st->names[i]);
    if (i || st->nmeta) dt_json_put_raw(b, ",", 1);
    dt_json_put_string(b, st->names[i]);
    dt_json_put_raw(b, ":{\"dtype\":", 10);
    dt_json_put_string(b, codes[t->dtype]);
    dt_json_put_raw(b, ",\"shape\":[", 10);
    for (int d = 0; d < t->ndim; d++) {
      if (d) dt_json_put_raw(b, ",", 1);
      dt_json_put_int(b, t->shape[d]);
    }
    int64_t nbytes = dt_tensor_numel(t) * (int64_t)dt_tensor_elsize(t);
    dt_json_put_raw(b, "],\"data_offsets\":[", 18);
    dt_json_put_int(b, offset);
    dt_json_put_raw(b, ",", 1);
    dt_json_put_int(b, offset + nbytes);
    dt_json_put_raw(b, "]}", 2);
    offset += nbytes;
  }
  dt_json_put_raw(b, "}", 1);
  while (b->len % 8) dt_json_put_raw(b, " ", 1); /* so the data starts 8-byte aligned */
  if (b->failed) return dt_error("save: %s: out of memory", path);
  return DT_OK;
}

int dt_safetensors_save(const char *path, const dt_safetensors *st) {
  dt_json_buf b = {0};
  if (build_header(path, st, &b) != DT_OK) return dt_json_buf_free(&b), DT_ERR;
  dt_file_writer w;
  if (dt_file_writer_open(&w, path, "save") != DT_OK) return dt_json_buf_free(&b), DT_ERR;
  unsigned char len8[8];
  put_u64le(len8, b.len);
  int rc = dt_file_write(&w, len8, 8);
  if (rc == DT_OK) rc = dt_file_write(&w, b.data, b.len);
  dt_json_buf_free(&b);
  for (int i = 0; rc == DT_OK && i < st->n; i++) {
    dt_tensor *c = dt_tensor_host_contiguous(st->tensors[i]);
    if (!c) {
      rc = dt_error_prefix("save: %s", path);
      break;
    }
    rc = dt_file_write(&w, dt_tensor_data(c), (size_t)(dt_tensor_numel(c) * (int64_t)dt_tensor_elsize(c)));
    dt_tensor_release(c);
  }
  if (rc != DT_OK) return dt_file_writer_abort(&w), DT_ERR;
  return dt_file_writer_commit(&w);
}

/* ---- load ---- */
typedef struct entry {
  int64_t begin, end;
  int index; /* in st->names */
  dt_dtype dtype;
  int ndim;
  int64_t shape[DT_MAX_DIMS];
} entry;

static int cmp_entry(const void *x, const void *y) {
  const entry *a = x, *b = y;
  return a->begin < b->begin ? -1 : a->begin > b->begin ? 1 : (a->end > b->end) - (a->end < b->end);
}

static int fail(const char *path, const char *name, const char *what) {
  return dt_error("load: %s: tensor '%s': %s", path, name, what);
}

/* Validates one header entry; fills dtype/shape and the byte range. */
static int parse_entry(const char *path, const char *name, const dt_json *e, entry *range) {
  if (e->type != DT_JSON_OBJECT) return fail(path, name, "entry is not an object");
  const dt_json *jd = dt_json_get(e, "dtype"), *js = dt_json_get(e, "shape"), *jo = dt_json_get(e, "data_offsets");
  if (!jd || jd->type != DT_JSON_STRING) return fail(path, name, "missing or non-string \"dtype\"");
  if (dt_safetensors_dtype_from_code(jd->str, &range->dtype) != DT_OK)
    return dt_error("load: %s: tensor '%s': unknown dtype '%s' (supported: F32 F64 BF16 F16 I64 I32 U8 BOOL)", path,
                    name, jd->str);
  if (!js || js->type != DT_JSON_ARRAY) return fail(path, name, "missing or non-array \"shape\"");
  if (js->n > DT_MAX_DIMS) return dt_error("load: %s: tensor '%s': %d dims (at most %d supported)", path, name, js->n, DT_MAX_DIMS);
  range->ndim = js->n;
  int64_t numel = 1;
  for (int d = 0; d < js->n; d++) {
    const dt_json *s = js->items[d];
    if (s->type != DT_JSON_INT) return fail(path, name, "shape entries must be integers");
    if (s->integer < 0) return dt_error("load: %s: tensor '%s': negative dim %lld in shape", path, name, (long long)s->integer);
    range->shape[d] = s->integer;
  }
  if (dt_shape_numel_checked(js->n, range->shape, &numel) != DT_OK) { /* a 0 dim does not hide the others */
    char op[600];
    snprintf(op, sizeof op, "load: %.300s: tensor '%.200s'", path, name);
    return dt_check_numel(op, js->n, range->shape);
  }
  if (!jo || jo->type != DT_JSON_ARRAY || jo->n != 2 || jo->items[0]->type != DT_JSON_INT || jo->items[1]->type != DT_JSON_INT)
    return fail(path, name, "\"data_offsets\" must be [begin, end] integers");
  range->begin = jo->items[0]->integer, range->end = jo->items[1]->integer;
  if (range->begin < 0 || range->end < range->begin)
    return dt_error("load: %s: tensor '%s': invalid data_offsets [%lld, %lld]", path, name, (long long)range->begin,
                    (long long)range->end);
  int64_t want = numel * (int64_t)dt_dtype_size(range->dtype);
  if (range->end - range->begin != want)
    return dt_error("load: %s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes but shape and dtype %s need %lld",
                    path, name, (long long)range->begin, (long long)range->end, (long long)(range->end - range->begin),
                    jd->str, (long long)want);
  return DT_OK;
}

static int read_metadata(const char *path, const dt_json *m, dt_safetensors *st) {
  if (m->type != DT_JSON_OBJECT) return dt_error("load: %s: \"__metadata__\" is not an object", path);
  st->meta_keys = calloc((size_t)m->n + 1, sizeof(char *));
  st->meta_values = calloc((size_t)m->n + 1, sizeof(char *));
  if (!st->meta_keys || !st->meta_values) return dt_error("load: %s: out of memory", path);
  for (int i = 0; i < m->n; i++) {
    if (m->items[i]->type != DT_JSON_STRING || strlen(m->items[i]->str) != m->items[i]->len)
      return dt_error("load: %s: metadata value of '%s' is not a string (or holds a NUL)", path, m->keys[i]);
    st->meta_keys[i] = strdup(m->keys[i]);
    st->meta_values[i] = strdup(m->items[i]->str);
    st->nmeta = i + 1;
    if (!st->meta_keys[i] || !st->meta_values[i]) return dt_error("load: %s: out of memory", path);
  }
  return DT_OK;
}

/* Every tensor's range must tile the data area exactly: no overlap, no hole, no excess. */
static int check_layout(const char *path, const dt_safetensors *st, entry *ranges, int n, int64_t data_size) {
  qsort(ranges, (size_t)n, sizeof *ranges, cmp_entry);
  int64_t pos = 0;
  for (int i = 0; i < n; i++) {
    const char *name = st->names[ranges[i].index];
    if (ranges[i].begin < pos) return fail(path, name, "data_offsets overlap another tensor");
    if (ranges[i].begin > pos)
      return dt_error("load: %s: tensor '%s': hole in the data before offset %lld", path, name, (long long)ranges[i].begin);
    if (ranges[i].end > data_size)
      return dt_error("load: %s: tensor '%s': data_offsets end %lld is past the data size %lld (file truncated?)", path,
                      name, (long long)ranges[i].end, (long long)data_size);
    pos = ranges[i].end;
  }
  if (pos != data_size)
    return dt_error("load: %s: %lld bytes of data after the last tensor", path, (long long)(data_size - pos));
  return DT_OK;
}

static int load_header(const char *path, FILE *f, int64_t fsize, dt_json **hdr, int64_t *data_start) {
  unsigned char len8[8];
  if (fsize < 8) return dt_error("load: %s: file is %lld bytes, too short for a safetensors header", path, (long long)fsize);
  if (dt_file_read_at(f, 0, len8, 8, path, "load") != DT_OK) return DT_ERR;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
  if (hlen > (uint64_t)(fsize - 8))
    return dt_error("load: %s: header length %llu exceeds the file size %lld", path, (unsigned long long)hlen, (long long)fsize);
  if (hlen > ST_MAX_HEADER) return dt_error("load: %s: header length %llu is too large", path, (unsigned long long)hlen);
  char *text = malloc(hlen ? hlen : 1);
  if (!text) return dt_error("load: %s: out of memory", path);
  if (dt_file_read_at(f, 8, text, hlen, path, "load") != DT_OK) return free(text), DT_ERR;
  int rc = hlen && text[0] == '{' ? dt_json_parse(text, hlen, hdr) : dt_error("json: header does not start with '{'");
  free(text);
  if (rc != DT_OK) return dt_error_prefix("load: %s: invalid header", path);
  if ((*hdr)->type != DT_JSON_OBJECT) {
    dt_json_free(*hdr);
    return dt_error("load: %s: header is not a JSON object", path);
  }
  *data_start = 8 + (int64_t)hlen;
  return DT_OK;
}

/* Parses and checks every entry first, so a corrupt header never triggers a big allocation. */
static int load_tensors(const char *path, FILE *f, const dt_json *hdr, int64_t data_start, int64_t fsize,
                        dt_safetensors *st, entry *ranges) {
  int n = 0;
  for (int i = 0; i < hdr->n; i++) {
    if (strcmp(hdr->keys[i], "__metadata__") == 0) {
      if (read_metadata(path, hdr->items[i], st) != DT_OK) return DT_ERR;
      continue;
    }
    entry *e = &ranges[n];
    if (parse_entry(path, hdr->keys[i], hdr->items[i], e) != DT_OK) return DT_ERR;
    e->index = n;
    st->names[n] = strdup(hdr->keys[i]);
    if (!st->names[n]) return dt_error("load: %s: out of memory", path);
    st->n = ++n;
  }
  if (check_layout(path, st, ranges, n, fsize - data_start) != DT_OK) return DT_ERR;
  for (int i = 0; i < n; i++) {
    const entry *e = &ranges[i];
    dt_tensor *t = st->tensors[e->index] = dt_tensor_empty(e->dtype, e->ndim, e->shape, DT_HOST);
    if (!t) return dt_error_prefix("load: %s", path);
    size_t nbytes = (size_t)(e->end - e->begin);
    if (dt_file_read_at(f, data_start + e->begin, dt_tensor_data(t), nbytes, path, "load") != DT_OK) return DT_ERR;
    if (t->dtype == DT_BOOL) { /* any non-zero byte is true; store canonical 0/1 */
      unsigned char *p = dt_tensor_data(t);
      for (size_t k = 0; k < nbytes; k++) p[k] = p[k] != 0;
    }
  }
  return DT_OK;
}

int dt_safetensors_load(const char *path, dt_safetensors *st) {
  memset(st, 0, sizeof *st);
  int64_t fsize, data_start = 0;
  FILE *f = dt_file_open_read(path, "load", &fsize);
  if (!f) return DT_ERR;
  dt_json *hdr = NULL;
  if (load_header(path, f, fsize, &hdr, &data_start) != DT_OK) return fclose(f), DT_ERR;
  st->names = calloc((size_t)hdr->n + 1, sizeof(char *));
  st->tensors = calloc((size_t)hdr->n + 1, sizeof(dt_tensor *));
  entry *ranges = calloc((size_t)hdr->n + 1, sizeof(entry));
  int rc = st->names && st->tensors && ranges ? load_tensors(path, f, hdr, data_start, fsize, st, ranges)
                                              : dt_error("load: %s: out of memory", path);
  free(ranges);
  dt_json_free(hdr);
  fclose(f);
  if (rc != DT_OK) dt_safetensors_free(st);
  return rc;
}
