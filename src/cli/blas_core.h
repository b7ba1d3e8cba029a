/* Before anything else in main: run OpenBLAS's best kernels for this CPU without the user
 * setting OPENBLAS_CORETYPE (see blas_core.c). */
#ifndef DTLUA_BLAS_CORE_H
#define DTLUA_BLAS_CORE_H

/* Returns only when no re-exec was needed or it failed (the program then runs as it is). */
void dtlua_blas_core_pick(char **argv);

#endif
