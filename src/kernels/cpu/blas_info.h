/* Which BLAS the CPU kernels call and which of its kernels run on this CPU: for dt.config()
 * and `dtlua -v`, and for the program's pick of an OpenBLAS core (src/cli/blas_core.c). */
#ifndef DT_KERNELS_CPU_BLAS_INFO_H
#define DT_KERNELS_CPU_BLAS_INFO_H

#include "base/export.h"

typedef struct {
  const char *library; /* "openblas", "blis" or "none" (the C loops in gemm.c) */
  const char *core;    /* the kernels in use: OpenBLAS's core name, BLIS's arch, or "generic" */
  int threads;         /* the threads GEMMs run on: the rank's intra-op pool, one BLAS call each */
  const char *cpu;     /* the widest vector ISA of this CPU: "amx", "avx512", "avx2", "sse" */
} dt_blas_info;

DT_API void dt_blas_get_info(dt_blas_info *out);

/* The OPENBLAS_CORETYPE that would run faster kernels than the loaded OpenBLAS picked for
 * itself (it falls back to generic ones on CPUs newer than it knows), or NULL when its pick
 * is fine, it is not OpenBLAS, or it cannot switch cores (built without DYNAMIC_ARCH). */
DT_API const char *dt_blas_better_openblas_core(void);

#endif
