#include "kernels/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* CPUID leaf 1, ECX bit 29, asked directly: clang 14's
 * __builtin_cpu_supports does not know "f16c", and the library must build
 * with clang too (the fuzzers). */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

int okv_cpu_has_isa(okv_isa isa) {
#if defined(__x86_64__) || defined(__i386__)
    switch (isa) {
    case OKV_ISA_SCALAR: return 1;
    case OKV_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case OKV_ISA_AVX512:
        return okv_cpu_has_isa(OKV_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
    }
    return 0;
#else
    return isa == OKV_ISA_SCALAR;
#endif
}

okv_isa okv_cpu_best_isa(void) {
    if (okv_cpu_has_isa(OKV_ISA_AVX512)) return OKV_ISA_AVX512;
    if (okv_cpu_has_isa(OKV_ISA_AVX2)) return OKV_ISA_AVX2;
    return OKV_ISA_SCALAR;
}

const char *okv_isa_name(okv_isa isa) {
    switch (isa) {
    case OKV_ISA_SCALAR: return "scalar";
    case OKV_ISA_AVX2: return "avx2";
    case OKV_ISA_AVX512: return "avx512";
    }
    return "unknown";
}

int okv_cpu_has_avx512vnni(void) {
#if defined(__x86_64__) || defined(__i386__)
    return okv_cpu_has_isa(OKV_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}
