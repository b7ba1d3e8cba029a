/* File helpers shared by the savers and loaders: whole-or-nothing writes and checked reads. */
#ifndef DT_IO_FILE_H
#define DT_IO_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* An atomic save: data goes to a temporary file in the target's directory, which is
 * fsync'ed and renamed over the target only when everything was written.  On any failure
 * the temporary is removed and the previous file (if any) is untouched. */
typedef struct dt_file_writer {
  FILE *f;
  char *tmp_path;
  const char *path, *op;
} dt_file_writer;

int dt_file_writer_open(dt_file_writer *w, const char *path, const char *op);
int dt_file_write(dt_file_writer *w, const void *data, size_t n);
/* Flush, fsync, rename.  Always releases the writer. */
int dt_file_writer_commit(dt_file_writer *w);
/* Drops the temporary file (after a failure); safe to call twice. */
void dt_file_writer_abort(dt_file_writer *w);

/* Opens path for reading and returns its size; errors name op and path. */
FILE *dt_file_open_read(const char *path, const char *op, int64_t *size);
/* Reads exactly n bytes at offset; a short read is reported as a truncated file. */
int dt_file_read_at(FILE *f, int64_t offset, void *buf, size_t n, const char *path, const char *op);

#endif
