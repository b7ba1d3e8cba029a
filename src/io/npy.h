/* NumPy .npy files: magic "\x93NUMPY", version, header length (u16 in v1.0, u32 in
 * v2.0/3.0), a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded to a multiple of 64 bytes, then the raw C-order data.
 * dtypes: <f4 <f8 <f2 <i8 <i4 |u1 |b1 (bfloat16 has no NumPy code). */
#ifndef DT_IO_NPY_H
#define DT_IO_NPY_H

#include "base/export.h"

#include "tensor/tensor.h"

/* Writes t atomically (temp file + rename); errors "save_npy: <path>: ...". */
DT_API int dt_npy_save(const char *path, dt_tensor *t);
/* A new contiguous tensor, or NULL with "load_npy: <path>: ...". */
DT_API dt_tensor *dt_npy_load(const char *path);

#endif
