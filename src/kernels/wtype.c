/* The type table (see wtype.h), and the public size and name queries of
 * offkv/gguf.h, which read it. */
#include <string.h>

#include "kernels/mxfp4x16.h"
#include "kernels/q4_0x16.h"
#include "kernels/q4_Kx16.h"
#include "kernels/q5_0x16.h"
#include "kernels/q6_Kx16.h"
#include "kernels/q8_0x16.h"
#include "kernels/quant.h"
#include "kernels/wtype.h"
#include "kernels/x16mm.h"

static void f32_to_float(const void *src, float *dst, int64_t k) { memcpy(dst, src, (size_t)k * sizeof(float)); }
static void f16_to_float(const void *src, float *dst, int64_t k) { okv_f16_to_f32_row(dst, src, k); }
static void bf16_to_float(const void *src, float *dst, int64_t k) { okv_bf16_to_f32_row(dst, src, k); }

/* The kernels of the processor family this is built for; a slot left NULL
 * takes the kernel of the level its ISA includes (okv_isa_fallback: AVX-VNNI
 * AVX2's, AVX512_VNNI AVX512's, ...), down to scalar. */
#if defined(OKV_X86)
/* AVX512_VNNI takes AVX512's kernel where it has none (okv_wtype_tile) */
#define TILES_SIMD(t) {okv_mm_tile_##t##_scalar, okv_mm_tile_##t##_avx2, okv_mm_tile_##t##_avx512}
#define TILES_VNNI(t) \
    {okv_mm_tile_##t##_scalar, okv_mm_tile_##t##_avx2, okv_mm_tile_##t##_avx512, okv_mm_tile_##t##_avx512vnni}
/* the float block passes take strips of rows by every column up to 9
 * (AVX2) or 15 (AVX-512) columns, panels past that: from 2 columns on */
#define FLOAT(t) .act = OKV_ACT_F32, .to_float = t##_to_float, .tile = TILES_SIMD(t), \
                 .block_pass = {[OKV_ISA_AVX2] = okv_mm_block_##t##_avx2, [OKV_ISA_AVX512] = okv_mm_block_##t##_avx512, \
                                [OKV_ISA_AVX512_VNNI] = okv_mm_block_##t##_avx512}, .block_min_n = 2
/* a sixteen-wide layout: every ISA's tiles, AVX-512's block passes */
#define X16(t) .tile = TILES_VNNI(t), \
               .block_pass = {[OKV_ISA_AVX512] = okv_mm_block_##t##_avx512, [OKV_ISA_AVX512_VNNI] = okv_mm_block_##t##_avx512vnni}
/* ... and AVX2's block pass too */
#define X16_AVX2(t) .tile = TILES_VNNI(t), \
               .block_pass = {[OKV_ISA_AVX2] = okv_mm_block_##t##_avx2, [OKV_ISA_AVX512] = okv_mm_block_##t##_avx512, \
                              [OKV_ISA_AVX512_VNNI] = okv_mm_block_##t##_avx512vnni}
/* ... and AVX-VNNI's tiles and block pass (the rest of AVX-VNNI is AVX2's) */
#define X16_AVXVNNI(t) .tile = {okv_mm_tile_##t##_scalar, okv_mm_tile_##t##_avx2, okv_mm_tile_##t##_avx512, \
                                okv_mm_tile_##t##_avx512vnni, [OKV_ISA_AVXVNNI] = okv_mm_tile_##t##_avxvnni}, \
               .block_pass = {[OKV_ISA_AVX2] = okv_mm_block_##t##_avx2, [OKV_ISA_AVX512] = okv_mm_block_##t##_avx512, \
                              [OKV_ISA_AVX512_VNNI] = okv_mm_block_##t##_avx512vnni, \
                              [OKV_ISA_AVXVNNI] = okv_mm_block_##t##_avxvnni}
#define X16_NEON(t) X16(t)
#define X16_NEON_AVX2(t) X16_AVX2(t)
#define X16_NEON_AVXVNNI(t) X16_AVXVNNI(t)
#define X16MM(t) .tile = {okv_mm_tile_##t##_scalar} /* kept only where I8MM runs (model.c) */
#else
/* aarch64 (kernels/..._neon.c: every runnable type's tiles per level,
 * I8MM taking DOTPROD's but for x16mm.h's layouts, which are its own, and
 * the float ones NEON's for every level; no block
 * passes, the tiles already convert a row group once for 4 columns), or any
 * other processor: scalar */
#if defined(OKV_ARM)
#define TILES_SIMD(t) {okv_mm_tile_##t##_scalar, [OKV_ISA_NEON] = okv_mm_tile_##t##_neon, \
                       [OKV_ISA_DOTPROD] = okv_mm_tile_##t##_dotprod}
#define FLOAT(t) .act = OKV_ACT_F32, .to_float = t##_to_float, \
                 .tile = {okv_mm_tile_##t##_scalar, [OKV_ISA_NEON] = okv_mm_tile_##t##_neon}
#else
#define TILES_SIMD(t) {okv_mm_tile_##t##_scalar}
#define FLOAT(t) .act = OKV_ACT_F32, .to_float = t##_to_float, .tile = TILES_SIMD(t)
#endif
#define TILES_VNNI(t) TILES_SIMD(t)
#define X16(t) .tile = TILES_SIMD(t)
#define X16_NEON(t) X16(t)
#define X16_NEON_AVX2(t) X16(t)
#define X16_NEON_AVXVNNI(t) X16(t)
#define X16_AVXVNNI(t) X16(t)
#if defined(OKV_ARM)
/* the SMMLA layouts: I8MM's kernel, the scalar one below it */
#define X16MM(t) .tile = {okv_mm_tile_##t##_scalar, [OKV_ISA_I8MM] = okv_mm_tile_##t##_i8mm}
#else
#define X16MM(t) .tile = {okv_mm_tile_##t##_scalar}
#endif
#endif

/* Block layouts as ggml-common.h defines them (quant.h has the structs);
 * QK_K = 256 for the K-quants and the IQ types built on them. */
static const okv_wtype types[OKV_WT_END] = {
    [OKV_GGML_F32] = {.name = "f32", .block = 1, .size = 4, FLOAT(f32)},
    [OKV_GGML_F16] = {.name = "f16", .block = 1, .size = 2, FLOAT(f16)},
    [OKV_GGML_BF16] = {.name = "bf16", .block = 1, .size = 2, FLOAT(bf16)},
    [OKV_GGML_Q8_0] = {.name = "q8_0", .block = 32, .size = sizeof(block_q8_0), .to_float = okv_dequantize_row_q8_0, .act = OKV_ACT_Q8_0, .tile = TILES_VNNI(q8_0)},
    [OKV_GGML_Q4_0] = {.name = "q4_0", .block = 32, .size = sizeof(block_q4_0), .to_float = okv_dequantize_row_q4_0, .act = OKV_ACT_Q8_0, .tile = TILES_VNNI(q4_0)},
    [OKV_GGML_Q4_1] = {.name = "q4_1", .block = 32, .size = sizeof(block_q4_1), .to_float = okv_dequantize_row_q4_1, .act = OKV_ACT_Q8_1, .tile = TILES_VNNI(q4_1)},
    [OKV_GGML_Q5_0] = {.name = "q5_0", .block = 32, .size = sizeof(block_q5_0), .to_float = okv_dequantize_row_q5_0, .act = OKV_ACT_Q8_0, .tile = TILES_VNNI(q5_0)},
    [OKV_GGML_Q5_1] = {.name = "q5_1", .block = 32, .size = sizeof(block_q5_1), .to_float = okv_dequantize_row_q5_1, .act = OKV_ACT_Q8_1, .tile = TILES_VNNI(q5_1)},
    [OKV_GGML_Q2_K] = {.name = "q2_K", .block = 256, .size = sizeof(block_q2_K), .to_float = okv_dequantize_row_q2_K, .act = OKV_ACT_Q8_K, .tile = TILES_VNNI(q2_K)},
    [OKV_GGML_Q3_K] = {.name = "q3_K", .block = 256, .size = sizeof(block_q3_K), .to_float = okv_dequantize_row_q3_K, .act = OKV_ACT_Q8_K, .tile = TILES_VNNI(q3_K)},
    [OKV_GGML_Q4_K] = {.name = "q4_K", .block = 256, .size = sizeof(block_q4_K), .to_float = okv_dequantize_row_q4_K, .act = OKV_ACT_Q8_K, .tile = TILES_SIMD(q4_K)},
    [OKV_GGML_Q5_K] = {.name = "q5_K", .block = 256, .size = sizeof(block_q5_K), .to_float = okv_dequantize_row_q5_K, .act = OKV_ACT_Q8_K, .tile = TILES_SIMD(q5_K)},
    [OKV_GGML_MXFP4] = {.name = "mxfp4", .block = 32, .size = sizeof(block_mxfp4), .to_float = okv_dequantize_row_mxfp4, .act = OKV_ACT_Q8_0, .tile = TILES_VNNI(mxfp4)},
    [OKV_GGML_Q6_K] = {.name = "q6_K", .block = 256, .size = sizeof(block_q6_K), .to_float = okv_dequantize_row_q6_K, .act = OKV_ACT_Q8_K, .tile = TILES_SIMD(q6_K)},
    /* activation formats: never weights, in ggml either */
    [OKV_GGML_Q8_1] = {.name = "q8_1", .block = 32, .size = sizeof(block_q8_1)},
    [OKV_GGML_Q8_K] = {.name = "q8_K", .block = 256, .size = sizeof(block_q8_K)},
    /* known, not run */
    [OKV_GGML_IQ2_XXS] = {.name = "iq2_xxs", .block = 256, .size = 2 + 64},
    [OKV_GGML_IQ2_XS] = {.name = "iq2_xs", .block = 256, .size = 2 + 64 + 8},
    [OKV_GGML_IQ3_XXS] = {.name = "iq3_xxs", .block = 256, .size = 2 + 96},
    [OKV_GGML_IQ1_S] = {.name = "iq1_s", .block = 256, .size = 2 + 32 + 16},
    [OKV_GGML_IQ4_NL] = {.name = "iq4_nl", .block = 32, .size = 2 + 16},
    [OKV_GGML_IQ3_S] = {.name = "iq3_s", .block = 256, .size = 2 + 64 + 8 + 32 + 4},
    [OKV_GGML_IQ2_S] = {.name = "iq2_s", .block = 256, .size = 2 + 64 + 8 + 8},
    [OKV_GGML_IQ4_XS] = {.name = "iq4_xs", .block = 256, .size = 2 + 2 + 4 + 128},
    [OKV_GGML_I8] = {.name = "i8", .block = 1, .size = 1},
    [OKV_GGML_I16] = {.name = "i16", .block = 1, .size = 2},
    [OKV_GGML_I32] = {.name = "i32", .block = 1, .size = 4},
    [OKV_GGML_I64] = {.name = "i64", .block = 1, .size = 8},
    [OKV_GGML_F64] = {.name = "f64", .block = 1, .size = 8},
    [OKV_GGML_IQ1_M] = {.name = "iq1_m", .block = 256, .size = 32 + 16 + 8},
    [OKV_GGML_TQ1_0] = {.name = "tq1_0", .block = 256, .size = 48 + 4 + 2},
    [OKV_GGML_TQ2_0] = {.name = "tq2_0", .block = 256, .size = 64 + 2},

    /* offkv's own layouts */
    [OKV_WT_Q4_0X16] = {.name = "q4_0x16", .block = OKV_X16_VALUES, .unit = 32, .size = sizeof(block_q4_0x16),
                        .to_float = okv_dequantize_row_q4_0x16, .act = OKV_ACT_Q8_0X16, X16_AVXVNNI(q4_0x16),
                        .block_min_n = 5, .tail_unit = sizeof(block_q4_0)},
    [OKV_WT_Q8_0X16] = {.name = "q8_0x16", .block = OKV_X16_VALUES, .unit = 32, .size = sizeof(block_q8_0x16),
                        .to_float = okv_dequantize_row_q8_0x16, .act = OKV_ACT_Q8_0X16, X16_NEON_AVXVNNI(q8_0x16),
                        .block_min_n = 5, .tail_unit = sizeof(block_q8_0)},
    [OKV_WT_Q5_0X16] = {.name = "q5_0x16", .block = OKV_X16_VALUES, .unit = 32, .size = sizeof(block_q5_0x16),
                        .to_float = okv_dequantize_row_q5_0x16, .act = OKV_ACT_Q8_0X16, X16_NEON_AVX2(q5_0x16),
                        .block_min_n = 5, .tail_unit = sizeof(block_q5_0)},
    [OKV_WT_MXFP4X16] = {.name = "mxfp4x16", .block = OKV_X16_VALUES, .unit = 32, .size = sizeof(block_mxfp4x16),
                         .to_float = okv_dequantize_row_mxfp4x16, .act = OKV_ACT_Q8_0X16, X16_AVXVNNI(mxfp4x16),
                         .block_min_n = 5, .tail_unit = sizeof(block_mxfp4)},
    [OKV_WT_Q6_KX16] = {.name = "q6_Kx16", .block = OKV_QK_K, .size = sizeof(block_q6_Kx16),
                        .to_float = okv_dequantize_row_q6_Kx16, .act = OKV_ACT_Q8_KX16S, X16_NEON_AVX2(q6_Kx16),
                        .block_min_n = 5},
    [OKV_WT_Q5_KX16] = {.name = "q5_Kx16", .block = 512, .unit = OKV_QK_K, .size = sizeof(block_q5_Kx16),
                        .half_size = sizeof(block_q5_Kx8),
                        .to_float = okv_dequantize_row_q5_Kx16, .act = OKV_ACT_Q8_KX16, X16_NEON_AVX2(q5_Kx16),
                        .block_min_n = 5},
    [OKV_WT_Q4_KX16] = {.name = "q4_Kx16", .block = 512, .unit = OKV_QK_K, .size = sizeof(block_q4_Kx16),
                        .half_size = sizeof(block_q4_Kx8),
                        .to_float = okv_dequantize_row_q4_Kx16, .act = OKV_ACT_Q8_KX16, X16_NEON_AVX2(q4_Kx16),
                        .block_min_n = 5},
    /* groups of 4 ggml blocks, no padding: rows of a multiple of 128 */
    [OKV_WT_Q4_0X16MM] = {.name = "q4_0x16mm", .block = OKV_X16MM_VALUES, .size = sizeof(block_q4_0x16mm),
                          .to_float = okv_dequantize_row_q4_0x16mm, .act = OKV_ACT_Q8_0P, X16MM(q4_0x16mm)},
    [OKV_WT_Q8_0X16MM] = {.name = "q8_0x16mm", .block = OKV_X16MM_VALUES, .size = sizeof(block_q8_0x16mm),
                          .to_float = okv_dequantize_row_q8_0x16mm, .act = OKV_ACT_Q8_0P, X16MM(q8_0x16mm)},
    /* two quartets a super-block: rows of a multiple of 256 */
    [OKV_WT_Q4_KX16MM] = {.name = "q4_Kx16mm", .block = OKV_QK_K, .size = 2 * sizeof(block_q4_Kx16mm),
                          .to_float = okv_dequantize_row_q4_Kx16mm, .act = OKV_ACT_Q8_KP, X16MM(q4_Kx16mm)},
};

const okv_wtype *okv_wtype_get(int32_t t) {
    if (t < 0 || t >= OKV_WT_END || types[t].block == 0) return NULL;
    return &types[t];
}

/* What gguf.h's functions answer: ggml's types only. */
static const okv_wtype *ggml_type(int32_t t) { return t < OKV_GGML_TYPE_END ? okv_wtype_get(t) : NULL; }

size_t okv_wtype_row_size(int32_t t, int64_t n) {
    const okv_wtype *w = okv_wtype_get(t);
    if (!w || n < 0 || n % (w->unit ? w->unit : w->block) != 0) return 0;
    const uint64_t whole = (uint64_t)(n / w->block);
    if (w->tail_unit && n % w->block != 0) {
        const size_t tail = (size_t)(n % w->block / w->unit) * w->tail_unit;
        return whole > (SIZE_MAX - tail) / w->size ? 0 : (size_t)whole * w->size + tail;
    }
    const int half = w->half_size && n % w->block == w->block / 2;
    const uint64_t blocks = whole + (n % w->block != 0 && !half);
    const size_t tail = half ? w->half_size : 0;
    if (blocks > (SIZE_MAX - tail) / w->size) return 0;
    return (size_t)blocks * w->size + tail;
}

bool okv_wtype_runnable(int32_t t) {
    const okv_wtype *w = okv_wtype_get(t);
    return w && w->to_float && w->tile[OKV_ISA_SCALAR];
}

okv_mm_tile_fn okv_wtype_tile(int32_t t, okv_isa isa) {
    if (!okv_wtype_runnable(t) || (int)isa < 0 || isa >= OKV_ISA_COUNT) return NULL;
    for (okv_isa i = isa; i != OKV_ISA_COUNT; i = okv_isa_fallback(i))
        if (types[t].tile[i]) return types[t].tile[i];
    return NULL;
}

okv_mm_block_fn okv_wtype_block(int32_t t, okv_isa isa) {
    if (!okv_wtype_runnable(t) || (int)isa < 0 || isa >= OKV_ISA_COUNT) return NULL;
    for (okv_isa i = isa; i != OKV_ISA_COUNT; i = okv_isa_fallback(i))
        if (types[t].block_pass[i]) return types[t].block_pass[i];
    return NULL;
}

const char *okv_ggml_type_name(int32_t t) {
    const okv_wtype *w = ggml_type(t);
    return w ? w->name : NULL;
}

int64_t okv_ggml_block_size(int32_t t) {
    const okv_wtype *w = ggml_type(t);
    return w ? w->block : 0;
}

size_t okv_ggml_type_size(int32_t t) {
    const okv_wtype *w = ggml_type(t);
    return w ? w->size : 0;
}

size_t okv_ggml_row_size(int32_t t, int64_t n) { return ggml_type(t) ? okv_wtype_row_size(t, n) : 0; }
