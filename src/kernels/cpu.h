/* Internal: which SIMD instruction sets this processor runs.  Kernels are
 * compiled per ISA with target attributes, so one binary serves every x86-64
 * machine and picks at run time. */
#ifndef OKV_KERNELS_CPU_H
#define OKV_KERNELS_CPU_H

/* Ordered: each ISA includes the ones before it.  The matmul kernels come
 * in one variant per ISA; other code (attention) treats AVX512_VNNI as
 * AVX512.  Different variants may round differently (the order of float
 * sums differs); integer parts are exact. */
typedef enum okv_isa {
    OKV_ISA_SCALAR = 0,
    OKV_ISA_AVX2 = 1,        /* AVX2 + FMA + F16C */
    OKV_ISA_AVX512 = 2,      /* AVX-512 F/BW/VL/DQ + the AVX2 set */
    OKV_ISA_AVX512_VNNI = 3, /* the above + AVX512-VNNI (vpdpbusd) */
    OKV_ISA_COUNT = 4
} okv_isa;

/* The best ISA this processor supports (AVX512_VNNI where it has it). */
okv_isa okv_cpu_best_isa(void);

/* True if isa can run here (tests use it to try every path). */
int okv_cpu_has_isa(okv_isa isa);

const char *okv_isa_name(okv_isa isa);

#define OKV_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define OKV_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
/* OKV_TARGET_AVX512 plus the 8-bit dot product instruction (vpdpbusd);
 * check okv_cpu_has_isa(OKV_ISA_AVX512_VNNI) before calling such code. */
#define OKV_TARGET_AVX512VNNI \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

#endif
