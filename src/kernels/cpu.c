#include "kernels/cpu.h"

int okv_cpu_has_isa(okv_isa isa) {
#if defined(__x86_64__) || defined(__i386__)
    switch (isa) {
    case OKV_ISA_SCALAR: return 1;
    case OKV_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case OKV_ISA_AVX512:
        return okv_cpu_has_isa(OKV_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
    case OKV_ISA_AVX512_VNNI:
        return okv_cpu_has_isa(OKV_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
    case OKV_ISA_COUNT: break;
    }
    return 0;
#else
    return isa == OKV_ISA_SCALAR;
#endif
}

okv_isa okv_cpu_best_isa(void) {
    for (int i = OKV_ISA_COUNT - 1; i > 0; i--)
        if (okv_cpu_has_isa((okv_isa)i)) return (okv_isa)i;
    return OKV_ISA_SCALAR;
}

const char *okv_isa_name(okv_isa isa) {
    switch (isa) {
    case OKV_ISA_SCALAR: return "scalar";
    case OKV_ISA_AVX2: return "avx2";
    case OKV_ISA_AVX512: return "avx512";
    case OKV_ISA_AVX512_VNNI: return "avx512vnni";
    case OKV_ISA_COUNT: break;
    }
    return "unknown";
}
