/* OpenBLAS picks its kernels in a constructor, at library load: an OpenBLAS older than the CPU
 * (Debian 12's 0.3.21 on some AVX-512 CPUs) falls back to its generic Prescott kernels, 3-5x
 * slower at sgemm, and OPENBLAS_CORETYPE set later in the process is too late.  So when the
 * user set no core, the loaded OpenBLAS reports a generic one and cpuid shows a better one, the
 * program sets OPENBLAS_CORETYPE and re-executes itself once, with the same argv, environment
 * and open files (stdin untouched: nothing has read it yet).  Under mpirun the re-exec keeps
 * the process and its PMI environment; MPI_Init comes later.  The Lua module in a stock lua
 * cannot do this: there the user sets OPENBLAS_CORETYPE (doc/performance.md). */
#include "config.h"
#include "blas_core.h"

#include <stdlib.h>
#include <unistd.h>

#include "kernels/cpu/blas_info.h"

/* Set on the re-exec: never twice, whatever the new core reports. */
#define MARKER "DTLUA_BLAS_CORE_SET"
/* Tests only: re-exec once even when OpenBLAS's own pick is fine, to check what the re-exec
 * keeps (argv, stdin, exit status) on any machine. */
#define TEST_FORCE "DTLUA_TEST_BLAS_REEXEC"

void dtlua_blas_core_pick(char **argv) {
  if (getenv(MARKER) || getenv("OPENBLAS_CORETYPE")) return;
  const char *core = dt_blas_better_openblas_core();
  if (!core && !getenv(TEST_FORCE)) return;
  if (core && setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
  if (setenv(MARKER, core ? core : "test", 1) != 0) return;
  execv("/proc/self/exe", argv);
  /* no /proc or no exec: run on with the slow kernels rather than fail */
  unsetenv(MARKER);
  if (core) unsetenv("OPENBLAS_CORETYPE");
}
