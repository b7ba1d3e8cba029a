/* layer_norm's row kernels (norm_rows.h) instantiated: float and double, each in the default
 * ISA (SSE2 on x86-64) and under AVX2, with the same bits; norm_isa_avx2() says which to run.
 * Included by nn.c and by tests/c/test_norm_rows.c (which compares the forms). */
#ifndef DT_KERNELS_CPU_NORM_FORMS_H
#define DT_KERNELS_CPU_NORM_FORMS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define NORM_ISA
#define R float
#define NSUF(x) x##_f32
#include "kernels/cpu/norm_rows.h"
#undef R
#undef NSUF
#define R double
#define NSUF(x) x##_f64
#include "kernels/cpu/norm_rows.h"
#undef R
#undef NSUF
#undef NORM_ISA
#if defined(__x86_64__) && defined(__GNUC__)
#define NORM_ISA __attribute__((target("avx2")))
#define R float
#define NSUF(x) x##_f32_avx2
#include "kernels/cpu/norm_rows.h"
#undef R
#undef NSUF
#define R double
#define NSUF(x) x##_f64_avx2
#include "kernels/cpu/norm_rows.h"
#undef R
#undef NSUF
#undef NORM_ISA
#define DT_NORM_HAVE_AVX2_FORM 1
static inline int norm_isa_avx2(void) { return __builtin_cpu_supports("avx2"); }
#else
#define norm_rows_f32_avx2 norm_rows_f32
#define norm_rows_f64_avx2 norm_rows_f64
#define norm_backward_rows_f32_avx2 norm_backward_rows_f32
#define norm_backward_rows_f64_avx2 norm_backward_rows_f64
static inline int norm_isa_avx2(void) { return 0; }
#endif

#endif
