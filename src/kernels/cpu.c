#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
/* The kernel's hwcap bits (asm/hwcap.h), spelled out for older headers. */
enum { ARM_HWCAP_ASIMD = 1 << 1, ARM_HWCAP_ASIMDDP = 1 << 20, ARM_HWCAP2_I8MM = 1 << 13 };
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* CPUID leaf 1, ECX bit 29, asked directly: clang 14's
 * __builtin_cpu_supports does not know "f16c", and the library must build
 * with clang too (the fuzzers). */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* CPUID leaf 7 subleaf 1, EAX bit 4 (GCC 12's __builtin_cpu_supports has
 * no name for it); the registers it uses are AVX2's, whose OS support the
 * AVX2 probe checks. */
static int has_avxvnni(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}

static int probe_halves_512(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    /* "AuthenticAMD" in EBX, EDX, ECX */
    if (b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u) return 0;
    return __get_cpuid(1, &a, &b, &c, &d) && okv_cpu_amd_halves_512(a);
}
#endif

static int probe_isa(okv_isa isa) {
#if defined(__x86_64__) || defined(__i386__)
    switch (isa) {
    case OKV_ISA_SCALAR: return 1;
    case OKV_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case OKV_ISA_AVX512:
        return probe_isa(OKV_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
    case OKV_ISA_AVX512_VNNI:
        return probe_isa(OKV_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
    case OKV_ISA_AVXVNNI: return probe_isa(OKV_ISA_AVX2) && has_avxvnni();
    default: break;
    }
    return 0;
#elif defined(__aarch64__) && defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    switch (isa) {
    case OKV_ISA_SCALAR: return 1;
    case OKV_ISA_NEON: return (hw & ARM_HWCAP_ASIMD) != 0;
    case OKV_ISA_DOTPROD: return probe_isa(OKV_ISA_NEON) && (hw & ARM_HWCAP_ASIMDDP);
    case OKV_ISA_I8MM: return probe_isa(OKV_ISA_DOTPROD) && (hw2 & ARM_HWCAP2_I8MM);
    default: break;
    }
    return 0;
#elif defined(__aarch64__)
    /* no hwcaps to ask: Advanced SIMD is part of every aarch64 processor */
    return isa == OKV_ISA_SCALAR || isa == OKV_ISA_NEON;
#else
    return isa == OKV_ISA_SCALAR;
#endif
}

int okv_cpu_has_isa(okv_isa isa) {
    /* Probed once: CPUID traps to the hypervisor in a virtual machine, and
     * this is asked on every product and every f16 row conversion (asking
     * each time cost 10% of a batched decode step on a cloud VM).  Racing
     * threads compute and store the same mask. */
    static atomic_int mask = -1;
    if ((int)isa < 0 || isa >= OKV_ISA_COUNT) return 0;
    int m = atomic_load_explicit(&mask, memory_order_relaxed);
    if (m < 0) {
        m = 0;
        for (int i = 0; i < OKV_ISA_COUNT; i++)
            if (probe_isa((okv_isa)i)) m |= 1 << i;
        atomic_store_explicit(&mask, m, memory_order_relaxed);
    }
    return (m >> isa) & 1;
}

static okv_isa probe_best_isa(void) {
    okv_isa best = OKV_ISA_SCALAR;
    for (int i = 1; i < OKV_ISA_COUNT; i++)
        if (okv_cpu_has_isa((okv_isa)i) && okv_isa_rank((okv_isa)i) > okv_isa_rank(best)) best = (okv_isa)i;
    /* OKV_ISA caps the choice, for benchmarking and testing a narrower
     * machine's paths (e.g. AVX2 on an AVX-512 machine); it never raises it
     * above what the processor runs, never names the other family's ISA,
     * and other values are ignored. */
    const char *cap = getenv("OKV_ISA");
    const okv_isa want = cap ? okv_isa_from_name(cap) : OKV_ISA_COUNT;
    if (want != OKV_ISA_COUNT && okv_isa_rank(want) < okv_isa_rank(best) && okv_cpu_has_isa(want)) best = want;
    return best;
}

okv_isa okv_cpu_best_isa(void) {
    /* The probe (and OKV_ISA) is read once: every thread that races here
     * computes and stores the same value. */
    static atomic_int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = (int)probe_best_isa();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return (okv_isa)v;
}

int okv_cpu_amd_halves_512(unsigned signature) {
    /* the family is the base family plus the extended one where the base
     * is 0xF; the model has the extended model as its high nibble there */
    const unsigned base = (signature >> 8) & 0xF;
    const unsigned family = base == 0xF ? base + ((signature >> 20) & 0xFF) : base;
    const unsigned model = ((signature >> 4) & 0xF) | (base == 0xF ? ((signature >> 16) & 0xF) << 4 : 0);
    if (family == 0x19) return 1; /* Zen 3 (no AVX-512) and Zen 4 */
    /* Zen 5: full width but in Strix Point and Krackan Point */
    return family == 0x1A && ((model >= 0x20 && model <= 0x2F) || (model >= 0x60 && model <= 0x6F));
}

int okv_cpu_halves_512(void) {
    /* cached as okv_cpu_has_isa's mask is, for the same reason (CPUID traps
     * in a virtual machine), and asked once per block pass */
    static atomic_int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
#if defined(__x86_64__) || defined(__i386__)
        v = probe_halves_512();
#else
        v = 0;
#endif
        /* OKV_HALVES_512=1 or 0 overrides the table, so that either tile
         * shape can be tested and timed on any machine; other values are
         * ignored, as OKV_ISA's are */
        const char *e = getenv("OKV_HALVES_512");
        if (e && (!strcmp(e, "0") || !strcmp(e, "1"))) v = e[0] == '1';
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

const char *okv_isa_name(okv_isa isa) {
    switch (isa) {
    case OKV_ISA_SCALAR: return "scalar";
    case OKV_ISA_AVX2: return "avx2";
    case OKV_ISA_AVX512: return "avx512";
    case OKV_ISA_AVX512_VNNI: return "avx512vnni";
    case OKV_ISA_NEON: return "neon";
    case OKV_ISA_DOTPROD: return "dotprod";
    case OKV_ISA_I8MM: return "i8mm";
    case OKV_ISA_AVXVNNI: return "avxvnni";
    case OKV_ISA_COUNT: break;
    }
    return "unknown";
}

okv_isa okv_isa_from_name(const char *name) {
    for (int i = OKV_ISA_SCALAR; name && i < OKV_ISA_COUNT; i++)
        if (!strcmp(name, okv_isa_name((okv_isa)i))) return (okv_isa)i;
    return OKV_ISA_COUNT;
}
