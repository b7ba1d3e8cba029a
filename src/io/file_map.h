/* Read-only mappings of a file's byte range, and reads out of them guarded against SIGBUS
 * (file_map.c).  A mapping outlives a shortening of its file by another program: touching a
 * page past the new end raises SIGBUS, which a guarded call turns into an error return. */
#ifndef DT_IO_FILE_MAP_H
#define DT_IO_FILE_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_file_map {
  const char *base;   /* the mapping (of the whole file), or NULL */
  size_t length;      /* bytes mapped */
  const char *data;   /* the first byte asked for: file offset `offset` */
  int64_t file_size;  /* the file's size when mapped (fstat) */
  struct shared_map *shared;
} dt_file_map;

#define DT_FILE_MAP_SHORT (-1) /* the file ends before offset + length */
/* Maps [offset, offset + length) of fd read-only and private, advised for a sequential read,
 * after checking the file's size (fstat): returns 0, an errno value, or DT_FILE_MAP_SHORT
 * (m->file_size says the size).  Mappings are shared by the process's threads (ranks as
 * threads read the same files): the whole file is mapped once per version of the file and
 * unmapped by its last user. */
int dt_file_map_range(int fd, int64_t offset, int64_t length, dt_file_map *m);
void dt_file_unmap(dt_file_map *m);
/* Whether [offset, offset + length) of the range mapped (offset from m->data) is in the page
 * cache, judged from 32 pages spread over it (mincore): 1 or 0. */
int dt_file_map_resident(const dt_file_map *m, int64_t offset, int64_t length);

/* Runs fn(arg) on the calling thread and returns 0; a SIGBUS raised while it reads m's pages
 * ends fn and returns DT_FILE_MAP_SIGBUS (fn's writes so far stay); -1 when the handler
 * could not be installed (fn not run).  A SIGBUS elsewhere goes to the
 * handler that was installed before (the default one kills the process, as without this).
 * fn must not take locks or allocate: it may be left at any point. */
#define DT_FILE_MAP_SIGBUS 1
int dt_file_map_guarded(const dt_file_map *m, void (*fn)(void *), void *arg);

#endif
