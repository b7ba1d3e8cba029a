#include "base/error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char error_buf[2048];

int dt_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_buf, sizeof error_buf, fmt, ap);
  va_end(ap);
  return DT_ERR;
}

int dt_error_prefix(const char *fmt, ...) {
  char prefix[512], old[sizeof error_buf];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, error_buf, sizeof old);
  snprintf(error_buf, sizeof error_buf, "%.500s: %.1500s", prefix, old);
  return DT_ERR;
}

const char *dt_error_message(void) { return error_buf[0] ? error_buf : "unknown error"; }

void dt_error_clear(void) { error_buf[0] = 0; }

char *dt_format_shape(char *buf, int buflen, int ndim, const int64_t *shape) {
  int n = snprintf(buf, buflen, "{");
  for (int i = 0; i < ndim && n < buflen; i++)
    n += snprintf(buf + n, buflen - n, i ? ",%" PRId64 : "%" PRId64, shape[i]);
  if (n < buflen) snprintf(buf + n, buflen - n, "}");
  return buf;
}
