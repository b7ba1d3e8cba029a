/* Status values and the per-thread error message.
 * Every fallible C function returns DT_OK or DT_ERR (or NULL) and, on error, leaves
 * a message naming the op and the values involved in dt_error_message().  The
 * message is thread-local because ranks can be threads of one process. */
#ifndef DT_BASE_ERROR_H
#define DT_BASE_ERROR_H

#include "base/export.h"

#include <stdint.h>

#define DT_OK 0
#define DT_ERR (-1)

/* Formats the message (printf-style) and returns DT_ERR, so `return dt_error(...)` reads well. */
DT_API int dt_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefixes the current message with "prefix: " (adds context on the way up). */
DT_API int dt_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
DT_API const char *dt_error_message(void);
DT_API void dt_error_clear(void);

/* Formats a shape as {2,3} into buf (size >= 16 recommended); returns buf. */
DT_API char *dt_format_shape(char *buf, int buflen, int ndim, const int64_t *shape);

#endif
