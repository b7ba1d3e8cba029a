#include "config.h"
#include "kernels/cpu/blas_info.h"
#include "base/thread_pool.h"

#include <string.h>

#ifdef DT_HAVE_OPENBLAS
#include <cblas.h> /* OpenBLAS's: openblas_get_corename, openblas_get_config */
#elif defined(DT_HAVE_CBLAS)
#include <blis.h>
#endif

static int has_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* the subset OpenBLAS's SkylakeX kernels use; libgcc also checks the OS saves the zmm state */
static int has_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
/* AMX-TILE: cpuid leaf 7 edx bit 24 (GCC 12's __builtin_cpu_supports lacks it) */
static int has_amx(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return (d >> 24) & 1;
}
#else
static int has_amx(void) { return 0; }
#endif

static const char *cpu_isa(void) {
  if (has_avx512() && has_amx()) return "amx";
  if (has_avx512()) return "avx512";
  if (has_avx2()) return "avx2";
  return "sse";
}

void dt_blas_get_info(dt_blas_info *out) {
  out->cpu = cpu_isa();
#ifdef DT_HAVE_OPENBLAS
  out->library = "openblas";
  out->core = openblas_get_corename();
  out->threads = dt_get_num_threads(); /* the rank's pool runs the GEMMs (gemm.c) */
#elif defined(DT_HAVE_CBLAS)
  out->library = "blis";
  out->core = bli_arch_string(bli_arch_query_id());
  out->threads = dt_get_num_threads();
#else
  out->library = "none";
  out->core = "generic";
  out->threads = dt_get_num_threads();
#endif
}

const char *dt_blas_better_openblas_core(void) {
#ifdef DT_HAVE_OPENBLAS
  static const char *const avx2_cores[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
  const char *core = openblas_get_corename();
  const char *config = openblas_get_config();
  if (!core || !config || !strstr(config, "DYNAMIC_ARCH")) return NULL;
  for (size_t i = 0; i < sizeof avx2_cores / sizeof avx2_cores[0]; i++)
    if (strcmp(core, avx2_cores[i]) == 0) return NULL;
  /* both are in every DYNAMIC_ARCH build of OpenBLAS 0.3; the newer cores
   * (Cooperlake, SapphireRapids) add bf16 and AMX paths that float32 sgemm does not use */
  if (has_avx512()) return "SkylakeX";
  if (has_avx2()) return "Haswell";
  return NULL;
#else
  return NULL;
#endif
}
