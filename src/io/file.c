/* Whole-or-nothing writes (temp file + fsync + rename) and checked reads. */
#include "io/file.h"
#include "base/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dt_file_writer_open(dt_file_writer *w, const char *path, const char *op) {
  memset(w, 0, sizeof *w);
  w->path = path, w->op = op;
  size_t n = strlen(path);
  w->tmp_path = malloc(n + 16);
  if (!w->tmp_path) return dt_error("%s: %s: out of memory", op, path);
  /* same directory as the target, so the final rename cannot cross file systems */
  memcpy(w->tmp_path, path, n);
  memcpy(w->tmp_path + n, ".tmp.XXXXXX", 12);
  int fd = mkstemp(w->tmp_path);
  if (fd < 0) {
    int e = errno;
    free(w->tmp_path);
    w->tmp_path = NULL;
    return dt_error("%s: %s: cannot create file (%s)", op, path, strerror(e));
  }
  fchmod(fd, 0644); /* mkstemp makes 0600; saved tensors are ordinary files */
  w->f = fdopen(fd, "wb");
  if (!w->f) {
    int e = errno;
    close(fd);
    dt_file_writer_abort(w);
    return dt_error("%s: %s: cannot open file (%s)", op, path, strerror(e));
  }
  return DT_OK;
}

int dt_file_write(dt_file_writer *w, const void *data, size_t n) {
  if (n && fwrite(data, 1, n, w->f) != n) return dt_error("%s: %s: write failed (%s)", w->op, w->path, strerror(errno));
  return DT_OK;
}

void dt_file_writer_abort(dt_file_writer *w) {
  if (w->f) fclose(w->f);
  w->f = NULL;
  if (w->tmp_path) {
    unlink(w->tmp_path);
    free(w->tmp_path);
  }
  w->tmp_path = NULL;
}

int dt_file_writer_commit(dt_file_writer *w) {
  const char *why = NULL;
  if (fflush(w->f) != 0) why = "flush";
  else if (fsync(fileno(w->f)) != 0) why = "fsync";
  int e = errno;
  if (fclose(w->f) != 0 && !why) why = "close", e = errno;
  w->f = NULL;
  if (!why && rename(w->tmp_path, w->path) != 0) why = "rename", e = errno;
  if (why) {
    dt_file_writer_abort(w);
    return dt_error("%s: %s: %s failed (%s)", w->op, w->path, why, strerror(e));
  }
  free(w->tmp_path);
  w->tmp_path = NULL;
  return DT_OK;
}

FILE *dt_file_open_read(const char *path, const char *op, int64_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    dt_error("%s: %s: cannot open (%s)", op, path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    dt_error("%s: %s: not a regular file", op, path);
    return NULL;
  }
  *size = (int64_t)st.st_size;
  return f;
}

int dt_file_read_at(FILE *f, int64_t offset, void *buf, size_t n, const char *path, const char *op) {
  if (fseeko(f, (off_t)offset, SEEK_SET) != 0) return dt_error("%s: %s: seek failed (%s)", op, path, strerror(errno));
  if (n && fread(buf, 1, n, f) != n) return dt_error("%s: %s: file is truncated", op, path);
  return DT_OK;
}
