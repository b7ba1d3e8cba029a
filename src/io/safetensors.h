/* The safetensors format (Hugging Face): u64 little-endian header length N, N bytes of
 * JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"k": "v"}} padded with spaces to a multiple of 8, then the raw
 * little-endian data of every tensor, packed without holes. */
#ifndef DT_IO_SAFETENSORS_H
#define DT_IO_SAFETENSORS_H

#include "base/export.h"

#include "tensor/tensor.h"

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

/* "F32" <-> DT_FLOAT32 and so on; DT_ERR for codes this runtime has no dtype for. */
DT_API const char *dt_safetensors_dtype_code(dt_dtype t);
DT_API int dt_safetensors_dtype_from_code(const char *code, dt_dtype *out);

#endif
