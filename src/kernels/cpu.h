/* Internal: which SIMD instruction sets this processor runs.  Kernels are
 * compiled per ISA with target attributes, so one binary serves every x86-64
 * (or every aarch64) machine and picks at run time. */
#ifndef OKV_KERNELS_CPU_H
#define OKV_KERNELS_CPU_H

/* Two families past the scalar code, x86-64's and aarch64's; a processor
 * runs scalar and at most one family.  The matmul kernels come in one
 * variant per ISA; other code (attention) treats the VNNI levels as the
 * level they extend.  Different variants may round differently (the order
 * of float sums differs); integer parts are exact.
 *
 * Each ISA includes the one okv_isa_fallback names, down to scalar, and a
 * kernel missing at one level is taken from there.  AVX-VNNI (vpdpbusd on
 * 256-bit registers, VEX-encoded: Intel's client cores from Alder Lake,
 * which have no AVX-512, and Zen 5) extends AVX2 only: Zen 4 has AVX-512
 * VNNI but not AVX-VNNI, so no AVX-512 level includes it, and the levels are
 * ranked (okv_isa_rank), not ordered by their numbers. */
typedef enum okv_isa {
    OKV_ISA_SCALAR = 0,
    OKV_ISA_AVX2 = 1,        /* AVX2 + FMA + F16C */
    OKV_ISA_AVX512 = 2,      /* AVX-512 F/BW/VL/DQ + the AVX2 set */
    OKV_ISA_AVX512_VNNI = 3, /* the above + AVX512-VNNI (vpdpbusd) */
    OKV_ISA_NEON = 4,        /* aarch64's Advanced SIMD (ARMv8.0, every aarch64 processor) */
    OKV_ISA_DOTPROD = 5,     /* + SDOT/UDOT (ARMv8.2 dotprod; Cortex-A55/A76 on, Apple M1 on) */
    OKV_ISA_I8MM = 6,        /* + SMMLA/USDOT (ARMv8.6 i8mm; Graviton3, Apple M2 on) */
    OKV_ISA_AVXVNNI = 7,     /* AVX2 + AVX-VNNI (vpdpbusd ymm) */
    OKV_ISA_COUNT = 8
} okv_isa;

/* The family an ISA belongs to: code that picks x86 or ARM kernels by a
 * level must first ask which family it is in. */
static inline int okv_isa_is_x86(okv_isa isa) {
    return (isa >= OKV_ISA_AVX2 && isa <= OKV_ISA_AVX512_VNNI) || isa == OKV_ISA_AVXVNNI;
}
static inline int okv_isa_is_arm(okv_isa isa) { return isa >= OKV_ISA_NEON && isa <= OKV_ISA_I8MM; }

/* The level isa includes, whose kernels it runs where it has none of its
 * own; OKV_ISA_COUNT below scalar. */
static inline okv_isa okv_isa_fallback(okv_isa isa) {
    switch (isa) {
    case OKV_ISA_AVX2: case OKV_ISA_NEON: return OKV_ISA_SCALAR;
    case OKV_ISA_AVX512: case OKV_ISA_AVXVNNI: return OKV_ISA_AVX2;
    case OKV_ISA_AVX512_VNNI: return OKV_ISA_AVX512;
    case OKV_ISA_DOTPROD: return OKV_ISA_NEON;
    case OKV_ISA_I8MM: return OKV_ISA_DOTPROD;
    default: return OKV_ISA_COUNT;
    }
}

/* Better is higher, within a family: the best ISA a processor runs is its
 * highest ranked, and OKV_ISA caps by rank. */
static inline int okv_isa_rank(okv_isa isa) {
    switch (isa) {
    case OKV_ISA_AVX2: case OKV_ISA_NEON: return 1;
    case OKV_ISA_AVXVNNI: case OKV_ISA_DOTPROD: return 2;
    case OKV_ISA_AVX512: case OKV_ISA_I8MM: return 3;
    case OKV_ISA_AVX512_VNNI: return 4;
    default: return 0;
    }
}

/* The best ISA this processor supports (AVX512_VNNI or I8MM where it has
 * it), capped by the environment variable OKV_ISA (scalar, avx2, avx512,
 * avx512vnni, avxvnni, neon, dotprod or i8mm; read once) if set: a benchmarking and
 * testing aid for running a narrower machine's kernels (a name this
 * processor cannot run is ignored).  Kernels choose by this; okv_cpu_has_isa
 * stays the plain hardware answer. */
okv_isa okv_cpu_best_isa(void);

/* True if isa can run here (tests use it to try every path). */
int okv_cpu_has_isa(okv_isa isa);

/* True where the core runs each 512-bit vector operation as two 256-bit
 * halves on its 256-bit units (okv_cpu_amd_halves_512's AMD cores):
 * kernels whose best tile differs between such a core and one with
 * full-width 512-bit units (Intel's AVX-512 cores, Zen 5's EPYC and
 * desktop parts) ask this.  CPUID has no bit for it, so it is read off the
 * vendor, family and model.  The environment variable OKV_HALVES_512 (1 or
 * 0) overrides the table, for testing and timing either tile on any
 * machine.  Read once. */
int okv_cpu_halves_512(void);

/* The table behind it for an AMD processor whose CPUID leaf 1 EAX (its
 * signature: stepping, model, family and their extensions) is signature:
 * family 0x19 (Zen 3, Zen 4), and the Zen 5 laptop parts of family 0x1A
 * whose vector units are 256 bits wide, Strix Point (models 0x20-0x2F)
 * and Krackan Point (0x60-0x6F); not Zen 5's EPYC, desktop or Strix Halo
 * parts, which have full-width units (only the EPYC and Zen 4 were
 * measured: the laptop rows follow public descriptions of those cores). */
int okv_cpu_amd_halves_512(unsigned signature);

const char *okv_isa_name(okv_isa isa);

/* The ISA okv_isa_name calls name; OKV_ISA_COUNT for any other string. */
okv_isa okv_isa_from_name(const char *name);

#if defined(__x86_64__) || defined(__i386__)
#define OKV_X86 1
#define OKV_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
/* OKV_TARGET_AVX2 plus AVX-VNNI; check okv_cpu_has_isa(OKV_ISA_AVXVNNI). */
#define OKV_TARGET_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define OKV_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
/* OKV_TARGET_AVX512 plus the 8-bit dot product instruction (vpdpbusd);
 * check okv_cpu_has_isa(OKV_ISA_AVX512_VNNI) before calling such code. */
#define OKV_TARGET_AVX512VNNI \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#endif

#if defined(__aarch64__)
#define OKV_ARM 1
/* NEON (Advanced SIMD) is part of ARMv8.0-A: the baseline kernels need no
 * attribute.  The dot-product and 8-bit matrix kernels are compiled for
 * their extension function by function; check okv_cpu_has_isa first. */
#define OKV_TARGET_NEON
/* GCC 12's arm_neon.h declares SDOT and SMMLA for armv8.2-a plus the
 * extension, so the attribute names that (not just "+dotprod"). */
#define OKV_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#define OKV_TARGET_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif

#endif
