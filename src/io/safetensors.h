/* The safetensors format (Hugging Face): u64 little-endian header length N, N bytes of
 * JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"k": "v"}} padded with spaces to a multiple of 8, then the raw
 * little-endian data of every tensor, packed without holes. */
#ifndef DT_IO_SAFETENSORS_H
#define DT_IO_SAFETENSORS_H

#include "base/export.h"

#include "tensor/tensor.h"

#include <stdio.h>

typedef struct dt_safetensors {
  int n;              /* tensors */
  char **names;
  dt_tensor **tensors;
  int nmeta;          /* __metadata__ string pairs */
  char **meta_keys, **meta_values;
} dt_safetensors;

/* Writes the n tensors (any layout: non-contiguous ones are written contiguous) and the
 * metadata to path atomically: on failure the previous file is left as it was.  Errors
 * are "save: <path>: ...". */
DT_API int dt_safetensors_save(const char *path, const dt_safetensors *st);
/* Reads and validates a whole file into *st (owned; free with dt_safetensors_free).
 * Errors are "load: <path>: ..." and leave *st empty. */
DT_API int dt_safetensors_load(const char *path, dt_safetensors *st);
DT_API void dt_safetensors_free(dt_safetensors *st);

/* An open file whose header has been read and validated (the layout tiles the data, so a
 * truncated file is refused here): tensors are then read whole or by boxes. */
typedef struct dt_safetensors_entry {
  char *name;
  dt_dtype dtype;
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  int64_t begin, end; /* byte range in the data area */
} dt_safetensors_entry;

typedef struct dt_safetensors_file {
  char *path;
  FILE *f;
  int64_t data_start; /* file offset of the data area */
  int n;
  dt_safetensors_entry *entries; /* in header order */
  int nmeta;
  char **meta_keys, **meta_values;
} dt_safetensors_file;

/* Errors are "<op>: <path>: ...". */
DT_API int dt_safetensors_open(const char *path, const char *op, dt_safetensors_file **out);
DT_API void dt_safetensors_close(dt_safetensors_file *st);
/* The entry index of name, or -1. */
DT_API int dt_safetensors_find(const dt_safetensors_file *st, const char *name);
/* One box to read: [src_start, src_start + size) of entry `index` of file into dst at
 * dst_start.  dst is any host tensor (strided views included); its dtype may differ from the
 * file's (converted as copy_ converts: the caller decides which casts it allows). */
typedef struct dt_safetensors_box {
  const dt_safetensors_file *file;
  int index;
  int64_t src_start[DT_MAX_DIMS], size[DT_MAX_DIMS];
  dt_tensor *dst;
  int64_t dst_start[DT_MAX_DIMS];
} dt_safetensors_box;
/* Reads the boxes straight into their destinations (safetensors_boxes.c): one preadv per
 * batch of runs contiguous in both, only the needed bytes plus gaps under 64 KiB, or copies
 * out of a mapping of the file for strided boxes, on the calling rank's intra-op threads.
 * Every box is checked before anything is read; an I/O error (or the file shortened by
 * another program meanwhile) leaves the destinations partly written.  Distinct boxes must
 * not overlap in dst. */
DT_API int dt_safetensors_read_boxes(const dt_safetensors_box *boxes, int n, const char *op);
/* How box reads go (safetensors_boxes.c): AUTO chooses per box, mmap for one that keeps under
 * about half the bytes it spans in short runs, preadv otherwise; the others force one way
 * (tests, benchmarks).  after_map, when set, runs on the calling thread once every mapping is
 * made and checked, before any byte is read (tests shorten a file there). */
typedef enum { DT_BOX_READ_AUTO, DT_BOX_READ_PREAD, DT_BOX_READ_MMAP } dt_box_read_mode;
typedef struct dt_safetensors_read_opts {
  dt_box_read_mode mode;
  void (*after_map)(void *ctx);
  void *ctx;
} dt_safetensors_read_opts;
DT_API int dt_safetensors_read_boxes_with(const dt_safetensors_box *boxes, int n, const char *op,
                                          const dt_safetensors_read_opts *opts);
/* One box (dt_safetensors_read_boxes of one). */
DT_API int dt_safetensors_read_box(const dt_safetensors_file *st, int index, const int64_t *src_start,
                                   const int64_t *size, dt_tensor *dst, const int64_t *dst_start, const char *op);

/* "F32" <-> DT_FLOAT32 and so on; DT_ERR for codes this runtime has no dtype for. */
DT_API const char *dt_safetensors_dtype_code(dt_dtype t);
DT_API int dt_safetensors_dtype_from_code(const char *code, dt_dtype *out);

#endif
