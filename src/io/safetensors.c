/* safetensors reader and writer; see safetensors.h for the format. */
#include "io/safetensors.h"
#include "base/error.h"
#include "base/size.h"
#include "io/file.h"
#include "io/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- read: the header, then whole tensors or boxes of them ---- */
static int cmp_entry(const void *x, const void *y) {
  const dt_safetensors_entry *a = *(const dt_safetensors_entry *const *)x, *b = *(const dt_safetensors_entry *const *)y;
  return a->begin < b->begin ? -1 : a->begin > b->begin ? 1 : (a->end > b->end) - (a->end < b->end);
}

static int fail(const char *op, const char *path, const char *name, const char *what) {
  return dt_error("%s: %s: tensor '%s': %s", op, path, name, what);
}

/* Validates one header entry; fills dtype/shape and the byte range. */
static int parse_entry(const char *op, const char *path, const char *name, const dt_json *e, dt_safetensors_entry *range) {
  if (e->type != DT_JSON_OBJECT) return fail(op, path, name, "entry is not an object");
  const dt_json *jd = dt_json_get(e, "dtype"), *js = dt_json_get(e, "shape"), *jo = dt_json_get(e, "data_offsets");
  if (!jd || jd->type != DT_JSON_STRING) return fail(op, path, name, "missing or non-string \"dtype\"");
  if (dt_safetensors_dtype_from_code(jd->str, &range->dtype) != DT_OK)
    return dt_error("%s: %s: tensor '%s': unknown dtype '%s' (supported: F32 F64 BF16 F16 I64 I32 U8 BOOL)", op, path,
                    name, jd->str);
  if (!js || js->type != DT_JSON_ARRAY) return fail(op, path, name, "missing or non-array \"shape\"");
  if (js->n > DT_MAX_DIMS)
    return dt_error("%s: %s: tensor '%s': %d dims (at most %d supported)", op, path, name, js->n, DT_MAX_DIMS);
  range->ndim = js->n;
  int64_t numel = 1;
  for (int d = 0; d < js->n; d++) {
    const dt_json *s = js->items[d];
    if (s->type != DT_JSON_INT) return fail(op, path, name, "shape entries must be integers");
    if (s->integer < 0)
      return dt_error("%s: %s: tensor '%s': negative dim %lld in shape", op, path, name, (long long)s->integer);
    range->shape[d] = s->integer;
  }
  if (dt_shape_numel_checked(js->n, range->shape, &numel) != DT_OK) { /* a 0 dim does not hide the others */
    char where[600];
    snprintf(where, sizeof where, "%s: %.300s: tensor '%.200s'", op, path, name);
    return dt_check_numel(where, js->n, range->shape);
  }
  if (!jo || jo->type != DT_JSON_ARRAY || jo->n != 2 || jo->items[0]->type != DT_JSON_INT || jo->items[1]->type != DT_JSON_INT)
    return fail(op, path, name, "\"data_offsets\" must be [begin, end] integers");
  range->begin = jo->items[0]->integer, range->end = jo->items[1]->integer;
  if (range->begin < 0 || range->end < range->begin)
    return dt_error("%s: %s: tensor '%s': invalid data_offsets [%lld, %lld]", op, path, name, (long long)range->begin,
                    (long long)range->end);
  int64_t want = numel * (int64_t)dt_dtype_size(range->dtype);
  if (range->end - range->begin != want)
    return dt_error("%s: %s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes but shape and dtype %s need %lld",
                    op, path, name, (long long)range->begin, (long long)range->end,
                    (long long)(range->end - range->begin), jd->str, (long long)want);
  return DT_OK;
}

static int read_metadata(const char *op, const char *path, const dt_json *m, dt_safetensors_file *st) {
  if (m->type != DT_JSON_OBJECT) return dt_error("%s: %s: \"__metadata__\" is not an object", op, path);
  st->meta_keys = calloc((size_t)m->n + 1, sizeof(char *));
  st->meta_values = calloc((size_t)m->n + 1, sizeof(char *));
  if (!st->meta_keys || !st->meta_values) return dt_error("%s: %s: out of memory", op, path);
  for (int i = 0; i < m->n; i++) {
    if (m->items[i]->type != DT_JSON_STRING || strlen(m->items[i]->str) != m->items[i]->len)
      return dt_error("%s: %s: metadata value of '%s' is not a string (or holds a NUL)", op, path, m->keys[i]);
    st->meta_keys[i] = strdup(m->keys[i]);
    st->meta_values[i] = strdup(m->items[i]->str);
    st->nmeta = i + 1;
    if (!st->meta_keys[i] || !st->meta_values[i]) return dt_error("%s: %s: out of memory", op, path);
  }
  return DT_OK;
}

/* Every tensor's range must tile the data area exactly: no overlap, no hole, no excess. */
static int check_layout(const char *op, const char *path, const dt_safetensors_file *st, int64_t data_size) {
  int n = st->n;
  const dt_safetensors_entry **sorted = malloc(sizeof *sorted * ((size_t)n + 1));
  if (!sorted) return dt_error("%s: %s: out of memory", op, path);
  for (int i = 0; i < n; i++) sorted[i] = &st->entries[i];
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_entry);
  int64_t pos = 0;
  int rc = DT_OK;
  for (int i = 0; rc == DT_OK && i < n; i++) {
    const dt_safetensors_entry *e = sorted[i];
    if (e->begin < pos) rc = fail(op, path, e->name, "data_offsets overlap another tensor");
    else if (e->begin > pos)
      rc = dt_error("%s: %s: tensor '%s': hole in the data before offset %lld", op, path, e->name, (long long)e->begin);
    else if (e->end > data_size)
      rc = dt_error("%s: %s: tensor '%s': data_offsets end %lld is past the data size %lld (file truncated?)", op, path,
                    e->name, (long long)e->end, (long long)data_size);
    pos = e->end;
  }
  free(sorted);
  if (rc == DT_OK && pos != data_size)
    rc = dt_error("%s: %s: %lld bytes of data after the last tensor", op, path, (long long)(data_size - pos));
  return rc;
}

static int load_header(const char *op, const char *path, FILE *f, int64_t fsize, dt_json **hdr, int64_t *data_start) {
  unsigned char len8[8];
  if (fsize < 8) return dt_error("%s: %s: file is %lld bytes, too short for a safetensors header", op, path, (long long)fsize);
  if (dt_file_read_at(f, 0, len8, 8, path, op) != DT_OK) return DT_ERR;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
  if (hlen > (uint64_t)(fsize - 8))
    return dt_error("%s: %s: header length %llu exceeds the file size %lld", op, path, (unsigned long long)hlen,
                    (long long)fsize);
  if (hlen > ST_MAX_HEADER) return dt_error("%s: %s: header length %llu is too large", op, path, (unsigned long long)hlen);
  char *text = malloc(hlen ? hlen : 1);
  if (!text) return dt_error("%s: %s: out of memory", op, path);
  if (dt_file_read_at(f, 8, text, hlen, path, op) != DT_OK) return free(text), DT_ERR;
  int rc = hlen && text[0] == '{' ? dt_json_parse(text, hlen, hdr) : dt_error("json: header does not start with '{'");
  free(text);
  if (rc != DT_OK) return dt_error_prefix("%s: %s: invalid header", op, path);
  if ((*hdr)->type != DT_JSON_OBJECT) {
    dt_json_free(*hdr);
    return dt_error("%s: %s: header is not a JSON object", op, path);
  }
  *data_start = 8 + (int64_t)hlen;
  return DT_OK;
}

/* Parses and checks every entry first, so a corrupt header never triggers a big allocation. */
static int read_entries(const char *op, const dt_json *hdr, int64_t fsize, dt_safetensors_file *st) {
  st->entries = calloc((size_t)hdr->n + 1, sizeof *st->entries);
  if (!st->entries) return dt_error("%s: %s: out of memory", op, st->path);
  for (int i = 0; i < hdr->n; i++) {
    if (strcmp(hdr->keys[i], "__metadata__") == 0) {
      if (read_metadata(op, st->path, hdr->items[i], st) != DT_OK) return DT_ERR;
      continue;
    }
    dt_safetensors_entry *e = &st->entries[st->n];
    if (parse_entry(op, st->path, hdr->keys[i], hdr->items[i], e) != DT_OK) return DT_ERR;
    if (!(e->name = strdup(hdr->keys[i]))) return dt_error("%s: %s: out of memory", op, st->path);
    st->n++;
  }
  return check_layout(op, st->path, st, fsize - st->data_start);
}

void dt_safetensors_close(dt_safetensors_file *st) {
  if (!st) return;
  for (int i = 0; i < st->n; i++) free(st->entries[i].name);
  for (int i = 0; i < st->nmeta; i++) free(st->meta_keys[i]), free(st->meta_values[i]);
  free(st->entries), free(st->meta_keys), free(st->meta_values), free(st->path);
  if (st->f) fclose(st->f);
  free(st);
}

int dt_safetensors_open(const char *path, const char *op, dt_safetensors_file **out) {
  *out = NULL;
  dt_safetensors_file *st = calloc(1, sizeof *st);
  if (!st || !(st->path = strdup(path))) return free(st), dt_error("%s: %s: out of memory", op, path);
  int64_t fsize;
  if (!(st->f = dt_file_open_read(path, op, &fsize))) return dt_safetensors_close(st), DT_ERR;
  dt_json *hdr = NULL;
  if (load_header(op, path, st->f, fsize, &hdr, &st->data_start) != DT_OK) return dt_safetensors_close(st), DT_ERR;
  int rc = read_entries(op, hdr, fsize, st);
  dt_json_free(hdr);
  if (rc != DT_OK) return dt_safetensors_close(st), DT_ERR;
  *out = st;
  return DT_OK;
}

int dt_safetensors_find(const dt_safetensors_file *st, const char *name) {
  for (int i = 0; i < st->n; i++)
    if (strcmp(st->entries[i].name, name) == 0) return i;
  return -1;
}

int dt_safetensors_load(const char *path, dt_safetensors *out) {
  memset(out, 0, sizeof *out);
  dt_safetensors_file *st;
  if (dt_safetensors_open(path, "load", &st) != DT_OK) return DT_ERR;
  out->names = calloc((size_t)st->n + 1, sizeof(char *));
  out->tensors = calloc((size_t)st->n + 1, sizeof(dt_tensor *));
  int rc = out->names && out->tensors ? DT_OK : dt_error("load: %s: out of memory", path);
  int64_t zero[DT_MAX_DIMS] = {0};
  for (int i = 0; rc == DT_OK && i < st->n; i++) {
    const dt_safetensors_entry *e = &st->entries[i];
    out->names[i] = e->name, st->entries[i].name = NULL; /* moved */
    out->n = i + 1;
    dt_tensor *t = out->tensors[i] = dt_tensor_empty(e->dtype, e->ndim, e->shape, DT_HOST);
    if (!t) rc = dt_error_prefix("load: %s", path);
    else rc = dt_safetensors_read_box(st, i, zero, e->shape, t, zero, "load");
  }
  out->nmeta = st->nmeta, out->meta_keys = st->meta_keys, out->meta_values = st->meta_values;
  st->nmeta = 0, st->meta_keys = st->meta_values = NULL;
  dt_safetensors_close(st);
  if (rc != DT_OK) dt_safetensors_free(out);
  return rc;
}
