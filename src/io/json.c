/* Strict JSON for file headers: see json.h for what is accepted. */
#include "io/json.h"
#include "base/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct parser {
  const char *s;
  size_t len, pos;
} parser;

const char *dt_json_type_name(dt_json_type t) {
  switch (t) {
    case DT_JSON_OBJECT: return "object";
    case DT_JSON_ARRAY: return "array";
    case DT_JSON_STRING: return "string";
    default: return "integer";
  }
}

void dt_json_free(dt_json *j) {
  if (!j) return;
  for (int i = 0; i < j->n; i++) {
    if (j->keys) free(j->keys[i]);
    dt_json_free(j->items[i]);
  }
  free(j->keys);
  free(j->items);
  free(j->str);
  free(j);
}

const dt_json *dt_json_get(const dt_json *obj, const char *key) {
  if (!obj || obj->type != DT_JSON_OBJECT) return NULL;
  for (int i = 0; i < obj->n; i++)
    if (strcmp(obj->keys[i], key) == 0) return obj->items[i];
  return NULL;
}

static int fail(parser *p, const char *what) { return dt_error("json: %s at byte %zu", what, p->pos); }

static void skip_ws(parser *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static int hex4(parser *p, uint32_t *out) {
  if (p->len - p->pos < 4) return fail(p, "truncated \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->s[p->pos++];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return fail(p, "bad hex digit in \\u escape");
    v = v * 16 + (uint32_t)d;
  }
  *out = v;
  return DT_OK;
}

static size_t put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F)), 3;
  o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* p->pos is at the opening quote.  Escapes never grow the text, so len bytes suffice. */
static int parse_string(parser *p, char **out, size_t *outlen) {
  p->pos++;
  size_t start = p->pos;
  char *buf = malloc(p->len - start + 1);
  if (!buf) return dt_error("json: out of memory");
  size_t n = 0;
  for (;;) {
    if (p->pos >= p->len) return free(buf), fail(p, "unterminated string");
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"') break;
    if (c < 0x20) return free(buf), fail(p, "control character in string");
    p->pos++;
    if (c != '\\') {
      buf[n++] = (char)c;
      continue;
    }
    if (p->pos >= p->len) return free(buf), fail(p, "unterminated string");
    char e = p->s[p->pos++];
    switch (e) {
      case '"': buf[n++] = '"'; break;
      case '\\': buf[n++] = '\\'; break;
      case '/': buf[n++] = '/'; break;
      case 'b': buf[n++] = '\b'; break;
      case 'f': buf[n++] = '\f'; break;
      case 'n': buf[n++] = '\n'; break;
      case 'r': buf[n++] = '\r'; break;
      case 't': buf[n++] = '\t'; break;
      case 'u': {
        uint32_t cp, lo;
        if (hex4(p, &cp) != DT_OK) return free(buf), DT_ERR;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return free(buf), fail(p, "lone low surrogate in \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a pair: \uD83D\uDE00 */
          if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
            return free(buf), fail(p, "lone high surrogate in \\u escape");
          p->pos += 2;
          if (hex4(p, &lo) != DT_OK) return free(buf), DT_ERR;
          if (lo < 0xDC00 || lo > 0xDFFF) return free(buf), fail(p, "bad low surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        n += put_utf8(buf + n, cp);
        break;
      }
      default: return free(buf), fail(p, "unknown escape in string");
    }
  }
  p->pos++; /* closing quote */
  buf[n] = '\0';
  *out = buf;
  *outlen = n;
  return DT_OK;
}

static int parse_int(parser *p, int64_t *out) {
  int neg = 0;
  if (p->s[p->pos] == '-') neg = 1, p->pos++;
  if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return fail(p, "expected a digit");
  if (p->s[p->pos] == '0' && p->pos + 1 < p->len && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9')
    return fail(p, "leading zero in number");
  uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
    unsigned d = (unsigned)(p->s[p->pos] - '0');
    if (v > (limit - d) / 10) return fail(p, "integer out of range");
    v = v * 10 + d;
    p->pos++;
  }
  if (p->pos < p->len && (p->s[p->pos] == '.' || p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
    return fail(p, "only integer numbers are supported");
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return DT_OK;
}

static int parse_value(parser *p, dt_json **out, int depth);

/* Objects and arrays share the loop; objects read "key": before each value. */
static int parse_container(parser *p, dt_json *j, int depth) {
  int is_obj = j->type == DT_JSON_OBJECT;
  char close = is_obj ? '}' : ']';
  int cap = 0;
  p->pos++;
  skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == close) return p->pos++, DT_OK;
  for (;;) {
    char *key = NULL;
    if (is_obj) {
      size_t klen;
      skip_ws(p);
      if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, "expected a string key");
      if (parse_string(p, &key, &klen) != DT_OK) return DT_ERR;
      if (strlen(key) != klen || dt_json_get(j, key)) {
        int bad = strlen(key) != klen;
        free(key);
        return fail(p, bad ? "NUL character in key" : "duplicate key");
      }
      skip_ws(p);
      if (p->pos >= p->len || p->s[p->pos] != ':') return free(key), fail(p, "expected ':'");
      p->pos++;
    }
    if (j->n == cap) {
      cap = cap ? cap * 2 : 4;
      dt_json **items = realloc(j->items, sizeof *items * cap);
      if (items) j->items = items;
      char **keys = is_obj ? realloc(j->keys, sizeof *keys * cap) : NULL;
      if (keys) j->keys = keys;
      if (!items || (is_obj && !keys)) return free(key), dt_error("json: out of memory");
    }
    dt_json *v;
    if (parse_value(p, &v, depth + 1) != DT_OK) return free(key), DT_ERR;
    if (is_obj) j->keys[j->n] = key;
    j->items[j->n++] = v;
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, is_obj ? "unterminated object" : "unterminated array");
    char c = p->s[p->pos++];
    if (c == close) return DT_OK;
    if (c != ',') return p->pos--, fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int parse_value(parser *p, dt_json **out, int depth) {
  if (depth > JSON_MAX_DEPTH) return fail(p, "nesting too deep");
  skip_ws(p);
  if (p->pos >= p->len) return fail(p, "unexpected end of text");
  dt_json *j = calloc(1, sizeof *j);
  if (!j) return dt_error("json: out of memory");
  char c = p->s[p->pos];
  int rc;
  if (c == '{' || c == '[') {
    j->type = c == '{' ? DT_JSON_OBJECT : DT_JSON_ARRAY;
    rc = parse_container(p, j, depth);
  } else if (c == '"') {
    j->type = DT_JSON_STRING;
    rc = parse_string(p, &j->str, &j->len);
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    j->type = DT_JSON_INT;
    rc = parse_int(p, &j->integer);
  } else {
    rc = fail(p, "unsupported value (only objects, arrays, strings and integers)");
  }
  if (rc != DT_OK) return dt_json_free(j), DT_ERR;
  *out = j;
  return DT_OK;
}

int dt_json_parse(const char *text, size_t len, dt_json **out) {
  parser p = {text, len, 0};
  dt_json *j;
  if (parse_value(&p, &j, 0) != DT_OK) return DT_ERR;
  skip_ws(&p);
  if (p.pos != len) {
    dt_json_free(j);
    return fail(&p, "trailing characters after the value");
  }
  *out = j;
  return DT_OK;
}

/* ---- writer ---- */
void dt_json_put_raw(dt_json_buf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
      b->failed = 1;
      return;
    }
    b->data = d, b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void dt_json_put_string(dt_json_buf *b, const char *s) {
  dt_json_put_raw(b, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\', esc[1] = (char)c;
      dt_json_put_raw(b, esc, 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      dt_json_put_raw(b, esc, 6);
    } else {
      dt_json_put_raw(b, (const char *)&c, 1);
    }
  }
  dt_json_put_raw(b, "\"", 1);
}

void dt_json_put_int(dt_json_buf *b, int64_t v) {
  char num[32];
  int n = snprintf(num, sizeof num, "%" PRId64, v);
  dt_json_put_raw(b, num, (size_t)n);
}

void dt_json_buf_free(dt_json_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
