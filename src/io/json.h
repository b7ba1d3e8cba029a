/* A minimal, strict JSON reader and writer for file headers (safetensors).
 * Accepted: objects, arrays, strings (with every JSON escape) and integers; anything
 * else (floats, true/false/null, duplicate keys, trailing garbage) is rejected with a
 * message naming the byte offset.  Nesting is limited so corrupt input cannot blow the stack. */
#ifndef DT_IO_JSON_H
#define DT_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum dt_json_type { DT_JSON_OBJECT, DT_JSON_ARRAY, DT_JSON_STRING, DT_JSON_INT } dt_json_type;

typedef struct dt_json {
  dt_json_type type;
  int64_t integer;        /* DT_JSON_INT */
  char *str;              /* DT_JSON_STRING: NUL-terminated UTF-8 (may contain \0 from \u0000) */
  size_t len;             /* string length in bytes */
  int n;                  /* children of an object or array */
  char **keys;            /* object keys, in file order */
  struct dt_json **items; /* children */
} dt_json;

/* Parses text[0..len).  DT_OK and *out, or DT_ERR with dt_error("json: ... at byte N"). */
int dt_json_parse(const char *text, size_t len, dt_json **out);
void dt_json_free(dt_json *j);
/* The member named key of an object, or NULL. */
const dt_json *dt_json_get(const dt_json *obj, const char *key);
const char *dt_json_type_name(dt_json_type t);

/* A growing output buffer; `failed` latches on out-of-memory so callers check once. */
typedef struct dt_json_buf {
  char *data;
  size_t len, cap;
  int failed;
} dt_json_buf;

void dt_json_put_raw(dt_json_buf *b, const char *s, size_t n);
void dt_json_put_string(dt_json_buf *b, const char *s); /* quoted and escaped */
void dt_json_put_int(dt_json_buf *b, int64_t v);
void dt_json_buf_free(dt_json_buf *b);

#endif
