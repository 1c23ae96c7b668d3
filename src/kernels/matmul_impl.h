/* Internal to the matmul kernels: what the driver (matmul.c) hands the
 * per-ISA tile functions (matmul_scalar.c, matmul_avx2.c, matmul_avx512.c). */
#ifndef OKV_KERNELS_MATMUL_IMPL_H
#define OKV_KERNELS_MATMUL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"

/* Tile shape: at most MM_TR rows by MM_TC activation columns per call. */
enum { MM_TR = 4, MM_TC = 4 };

/* Columns whose activations are swept per pass over a row tile: 64 columns
 * of k = 2048 are 512 KiB as f32 (k = 8192: 2 MiB) and 144 KiB as Q8_1
 * (576 KiB), which a 1-2 MiB L2 keeps while the weights in use stay in L1.
 * Where they outgrow L2 they stream from L3: the F16 block pass reusing
 * each 512-value slice over four 8-row strips instead measured no faster
 * (one and two threads of an SPR-class Xeon, k = 8192 and 16384). */
enum { MM_COL_BLOCK = 64 };

/* How far ahead (bytes) a tile of nr float rows prefetches each of them
 * while it reads: the same place in the next tile's rows where those fit
 * in 64 KiB, else 8 KiB on in its own row.  A fixed 8 KiB had F16 rows of
 * 4 KiB (k = 2048) prefetch rows the tile was reading already: bench/matmul
 * F16 5632x2048, one column, 2 threads of a Zen 5, read 31 GB/s that way
 * and 38 this way. */
static inline int64_t okv_mm_float_ahead(size_t wrow, int nr) {
    return wrow * (size_t)nr <= 65536 ? (int64_t)wrow * nr : 8192;
}

/* The float block passes' next panel (matmul_avx2.c, matmul_avx512.c):
 * `rows` rows of `bytes` each, wrow apart, streamed into L2 a few lines at
 * a time while the current panel is multiplied, walked by row and column
 * (no division per line).  On a Zen 3 the samples after a prefetch (the
 * prefetch waiting for a fill buffer) were 3-4 % of an F16 prefill while
 * the AVX2 pass converted each panel in a pass of its own, and 0.9 % once
 * the first column tile did it: how the prefetches are spread over the
 * work matters more than this arithmetic. */
typedef struct okv_mm_prefetch {
    const char *row;        /* the row being prefetched */
    size_t wrow;
    int64_t per_row, col;   /* lines a row, the next one's in it */
    int64_t line, lines;    /* lines done, in all */
} okv_mm_prefetch;

static inline okv_mm_prefetch okv_mm_prefetch_start(const void *next, size_t wrow, int rows, int64_t bytes) {
    const int64_t per_row = (bytes + 63) / 64;
    return (okv_mm_prefetch){(const char *)next, wrow, per_row, 0, 0, next ? rows * per_row : 0};
}

/* Prefetches lines until `end` (of pf->lines) are done. */
static inline void okv_mm_prefetch_until(okv_mm_prefetch *pf, int64_t end) {
    for (; pf->line < end; pf->line++) {
        __builtin_prefetch(pf->row + pf->col * 64, 0, 2); /* prefetcht1 */
        if (++pf->col == pf->per_row) {
            pf->col = 0;
            pf->row += pf->wrow;
        }
    }
}

typedef struct okv_mm_ctx {
    const uint8_t *w;   /* row r at w + r * wrow */
    size_t wrow;
    int64_t rows, k, n;
    const float *x;     /* f32 activations, column j at x + j * k */
    const int8_t *xq;   /* Q8_0 activations, column j at xq + j * k */
    const float *xd;    /* their block scales (f16-rounded), column j at xd + j * (k / 32) */
    const uint8_t *xa;  /* the other activation formats (ggml's block_q8_1 and
                         * block_q8_K, the sixteen-wide layouts' groups, ...),
                         * column j at xa + j * xa_col */
    size_t xa_col;
    float *y;           /* column j at y + j * rows */
} okv_mm_ctx;

/* Computes y for rows r0 .. r0+nr-1 and columns c0 .. c0+nc-1,
 * 1 <= nr <= MM_TR, 1 <= nc <= MM_TC. */
typedef void (*okv_mm_tile_fn)(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc);

/* Computes y for rows r0 .. r1-1 and columns c0 .. c1-1 (at most
 * MM_COL_BLOCK), with every output bit for bit as the tile function of the
 * same kernel and type computes it.  Optional: a kernel offers one where
 * working on a whole row range at once pays (converting weights once). */
typedef void (*okv_mm_block_fn)(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1);

/* The kernels, one per weight type and ISA; kernels/wtype.c lists them.
 * Scalar, AVX2 and AVX512 have every runnable type; AVX512_VNNI, of ggml's
 * layouts, the legacy 32-value formats (vpdpbusd replaces maddubs + madd
 * there) and Q2_K and Q3_K (whose 16-value scales keep the 16-bit step:
 * vpdpwssd takes their madd and add in one), and uses AVX512's for the
 * others (ggml's Q4_K, Q5_K and Q6_K rows are repacked sixteen wide); the
 * sixteen-wide layouts (K-quants included) have VNNI kernels of their own. */
#define OKV_MM_TILE(name) void name(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc)
#define OKV_MM_BLOCK(name) void name(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
#define OKV_MM_TILES_OF(isa)                                                                        \
    OKV_MM_TILE(okv_mm_tile_f32_##isa); OKV_MM_TILE(okv_mm_tile_f16_##isa);                        \
    OKV_MM_TILE(okv_mm_tile_bf16_##isa); OKV_MM_TILE(okv_mm_tile_q8_0_##isa);                      \
    OKV_MM_TILE(okv_mm_tile_q4_0_##isa); OKV_MM_TILE(okv_mm_tile_q4_1_##isa);                      \
    OKV_MM_TILE(okv_mm_tile_q5_0_##isa); OKV_MM_TILE(okv_mm_tile_q5_1_##isa);                      \
    OKV_MM_TILE(okv_mm_tile_q2_K_##isa); OKV_MM_TILE(okv_mm_tile_q3_K_##isa);                      \
    OKV_MM_TILE(okv_mm_tile_q4_K_##isa); OKV_MM_TILE(okv_mm_tile_q5_K_##isa);                      \
    OKV_MM_TILE(okv_mm_tile_q6_K_##isa); OKV_MM_TILE(okv_mm_tile_mxfp4_##isa)
OKV_MM_TILES_OF(scalar);
OKV_MM_TILES_OF(avx2);
OKV_MM_TILES_OF(avx512);
OKV_MM_TILE(okv_mm_tile_q8_0_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q4_0_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q4_1_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q5_0_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q5_1_avx512vnni);
OKV_MM_TILE(okv_mm_tile_mxfp4_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q2_K_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q3_K_avx512vnni);
/* Q4_0 sixteen blocks wide (kernels/q4_0x16.h), every ISA its own. */
OKV_MM_TILE(okv_mm_tile_q4_0x16_scalar);
OKV_MM_TILE(okv_mm_tile_q4_0x16_avx2);
OKV_MM_TILE(okv_mm_tile_q4_0x16_avx512);
OKV_MM_TILE(okv_mm_tile_q4_0x16_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q4_0x16_avxvnni);
OKV_MM_BLOCK(okv_mm_block_q4_0x16_avx2);
OKV_MM_BLOCK(okv_mm_block_q4_0x16_avxvnni);
OKV_MM_BLOCK(okv_mm_block_q4_0x16_avx512);
OKV_MM_BLOCK(okv_mm_block_q4_0x16_avx512vnni);
/* aarch64 (kernels/..._neon.c): NEON and DOTPROD per sixteen-wide layout ... */
#define OKV_MM_TILES_ARM(t) OKV_MM_TILE(okv_mm_tile_##t##_neon); OKV_MM_TILE(okv_mm_tile_##t##_dotprod)
OKV_MM_TILES_ARM(q4_0x16);
OKV_MM_TILES_ARM(q8_0x16);
OKV_MM_TILES_ARM(q4_Kx16);
OKV_MM_TILES_ARM(q5_Kx16);
OKV_MM_TILES_ARM(q5_0x16);
OKV_MM_TILES_ARM(q6_Kx16);
OKV_MM_TILES_ARM(mxfp4x16);
/* ... and ggml's layouts (kernels/matmul_neon_q.c, matmul_neon_f.c: one
 * float kernel for every level). */
OKV_MM_TILES_ARM(q8_0); OKV_MM_TILES_ARM(q4_0); OKV_MM_TILES_ARM(q4_1);
OKV_MM_TILES_ARM(q5_0); OKV_MM_TILES_ARM(q5_1); OKV_MM_TILES_ARM(mxfp4);
OKV_MM_TILES_ARM(q2_K); OKV_MM_TILES_ARM(q3_K); OKV_MM_TILES_ARM(q4_K);
OKV_MM_TILES_ARM(q5_K); OKV_MM_TILES_ARM(q6_K);
OKV_MM_TILE(okv_mm_tile_f32_neon); OKV_MM_TILE(okv_mm_tile_f16_neon); OKV_MM_TILE(okv_mm_tile_bf16_neon);
/* MXFP4 sixteen blocks wide (kernels/mxfp4x16.h). */
OKV_MM_TILE(okv_mm_tile_mxfp4x16_scalar);
OKV_MM_TILE(okv_mm_tile_mxfp4x16_avx2);
OKV_MM_TILE(okv_mm_tile_mxfp4x16_avxvnni);
OKV_MM_TILE(okv_mm_tile_mxfp4x16_avx512);
OKV_MM_TILE(okv_mm_tile_mxfp4x16_avx512vnni);
OKV_MM_BLOCK(okv_mm_block_mxfp4x16_avx2);
OKV_MM_BLOCK(okv_mm_block_mxfp4x16_avxvnni);
OKV_MM_BLOCK(okv_mm_block_mxfp4x16_avx512);
OKV_MM_BLOCK(okv_mm_block_mxfp4x16_avx512vnni);
/* Q8_0 sixteen blocks wide (kernels/q8_0x16.h). */
OKV_MM_TILE(okv_mm_tile_q8_0x16_scalar);
OKV_MM_TILE(okv_mm_tile_q8_0x16_avx2);
OKV_MM_TILE(okv_mm_tile_q8_0x16_avx512);
OKV_MM_TILE(okv_mm_tile_q8_0x16_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q8_0x16_avxvnni);
OKV_MM_BLOCK(okv_mm_block_q8_0x16_avx2);
OKV_MM_BLOCK(okv_mm_block_q8_0x16_avxvnni);
OKV_MM_BLOCK(okv_mm_block_q8_0x16_avx512);
OKV_MM_BLOCK(okv_mm_block_q8_0x16_avx512vnni);
/* Q4_0 and Q8_0 for SMMLA (kernels/x16mm.h): scalar (every level but I8MM
 * runs it, where a test asks; the model keeps these layouts only at I8MM)
 * and I8MM. */
OKV_MM_TILE(okv_mm_tile_q4_0x16mm_scalar);
OKV_MM_TILE(okv_mm_tile_q8_0x16mm_scalar);
OKV_MM_TILE(okv_mm_tile_q4_0x16mm_i8mm);
OKV_MM_TILE(okv_mm_tile_q8_0x16mm_i8mm);
OKV_MM_TILE(okv_mm_tile_q4_Kx16mm_scalar);
OKV_MM_TILE(okv_mm_tile_q4_Kx16mm_i8mm);
/* Q6_K sixteen sub-blocks wide (kernels/q6_Kx16.h). */
OKV_MM_TILE(okv_mm_tile_q6_Kx16_scalar);
OKV_MM_TILE(okv_mm_tile_q6_Kx16_avx2);
OKV_MM_TILE(okv_mm_tile_q6_Kx16_avx512);
OKV_MM_TILE(okv_mm_tile_q6_Kx16_avx512vnni);
OKV_MM_BLOCK(okv_mm_block_q6_Kx16_avx2);
OKV_MM_BLOCK(okv_mm_block_q6_Kx16_avx512);
OKV_MM_BLOCK(okv_mm_block_q6_Kx16_avx512vnni);
/* Q4_K and Q5_K sixteen sub-blocks wide (kernels/q4_Kx16.h). */
OKV_MM_TILE(okv_mm_tile_q5_Kx16_scalar);
OKV_MM_TILE(okv_mm_tile_q5_Kx16_avx2);
OKV_MM_TILE(okv_mm_tile_q5_Kx16_avx512);
OKV_MM_TILE(okv_mm_tile_q5_Kx16_avx512vnni);
OKV_MM_BLOCK(okv_mm_block_q5_Kx16_avx2);
OKV_MM_BLOCK(okv_mm_block_q5_Kx16_avx512);
OKV_MM_BLOCK(okv_mm_block_q5_Kx16_avx512vnni);
/* Q5_0 sixteen blocks wide (kernels/q5_0x16.h). */
OKV_MM_TILE(okv_mm_tile_q5_0x16_scalar);
OKV_MM_TILE(okv_mm_tile_q5_0x16_avx2);
OKV_MM_TILE(okv_mm_tile_q5_0x16_avx512);
OKV_MM_TILE(okv_mm_tile_q5_0x16_avx512vnni);
OKV_MM_BLOCK(okv_mm_block_q5_0x16_avx2);
OKV_MM_BLOCK(okv_mm_block_q5_0x16_avx512);
OKV_MM_BLOCK(okv_mm_block_q5_0x16_avx512vnni);
OKV_MM_TILE(okv_mm_tile_q4_Kx16_scalar);
OKV_MM_TILE(okv_mm_tile_q4_Kx16_avx2);
OKV_MM_TILE(okv_mm_tile_q4_Kx16_avx512);
OKV_MM_TILE(okv_mm_tile_q4_Kx16_avx512vnni);
OKV_MM_BLOCK(okv_mm_block_q4_Kx16_avx2);
OKV_MM_BLOCK(okv_mm_block_q4_Kx16_avx512);
OKV_MM_BLOCK(okv_mm_block_q4_Kx16_avx512vnni);
/* The block pass for float weights (prefill), AVX2's and AVX-512's (also
 * AVX512_VNNI's). */
OKV_MM_BLOCK(okv_mm_block_f32_avx2);
OKV_MM_BLOCK(okv_mm_block_f16_avx2);
OKV_MM_BLOCK(okv_mm_block_bf16_avx2);
OKV_MM_BLOCK(okv_mm_block_f32_avx512);
OKV_MM_BLOCK(okv_mm_block_f16_avx512);
OKV_MM_BLOCK(okv_mm_block_bf16_avx512);

/* The Q8_0 activation quantizer (the others are in quant.c). */
void okv_mm_quantize_act_scalar(const float *x, int64_t k, int8_t *q, float *d);
void okv_mm_quantize_act_avx2(const float *x, int64_t k, int8_t *q, float *d);
void okv_mm_quantize_act_neon(const float *x, int64_t k, int8_t *q, float *d);
/* okv_quantize_row_q8_K bit for bit (for finite x), vectorized: decode
 * quantizes every K-quant product's activations first. */
void okv_mm_quantize_q8_K_avx2(const float *x, block_q8_K *y, int64_t k);
void okv_mm_quantize_q8_K_neon(const float *x, block_q8_K *y, int64_t k);
/* The two above with the quantizer of kern's family (the scalar one where
 * the family has none): the same bits whichever runs (matmul.c). */
void okv_mm_quantize_act(okv_isa kern, const float *x, int64_t k, int8_t *q, float *d);
void okv_mm_quantize_q8_K(okv_isa kern, const float *x, block_q8_K *y, int64_t k);

/* Put before every loop over a tile's rows or columns.  Unrolled this early,
 * GCC keeps the accumulator arrays in registers; otherwise (at -O3) it also
 * stored every accumulator to the stack on every step, which left the F16
 * 4x4 tile bound by stores at a third of the FMA rate. */
#define UNROLL _Pragma("GCC unroll 8")

/* Expands a tile function body written for compile-time NR x NC into a
 * dispatcher, so the accumulators of each shape live in registers. */
#define OKV_MM_DISPATCH(attr, name, body)                                                         \
    attr void name(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {  \
        switch (nr * 8 + nc) {                                                             \
        case 4 * 8 + 4: body(c, r0, 4, c0, 4); break;                                      \
        case 4 * 8 + 3: body(c, r0, 4, c0, 3); break;                                      \
        case 4 * 8 + 2: body(c, r0, 4, c0, 2); break;                                      \
        case 4 * 8 + 1: body(c, r0, 4, c0, 1); break;                                      \
        default:                                                                           \
            for (int r_ = 0; r_ < nr; r_++) {                                              \
                int64_t j_ = 0;                                                            \
                for (; j_ + 4 <= nc; j_ += 4) body(c, r0 + r_, 1, c0 + j_, 4);             \
                for (; j_ < nc; j_++) body(c, r0 + r_, 1, c0 + j_, 1);                     \
            }                                                                              \
        }                                                                                  \
    }

/* The float types' tiles of an ISA from its float_tile(wtype, c, r0, NR,
 * c0, NC) body: f32_tile, f16_tile and bf16_tile (qual: their inline
 * qualifiers), and their dispatchers okv_mm_tile_f32_<isa> and so on
 * (attr: the ISA's target attribute). */
#define OKV_MM_FLOAT_TILES(qual, attr, isa, float_tile)                                            \
    qual void f32_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        float_tile(OKV_GGML_F32, c, r0, NR, c0, NC);                                               \
    }                                                                                              \
    qual void f16_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        float_tile(OKV_GGML_F16, c, r0, NR, c0, NC);                                               \
    }                                                                                              \
    qual void bf16_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        float_tile(OKV_GGML_BF16, c, r0, NR, c0, NC);                                              \
    }                                                                                              \
    OKV_MM_DISPATCH(attr, okv_mm_tile_f32_##isa, f32_tile)                                         \
    OKV_MM_DISPATCH(attr, okv_mm_tile_f16_##isa, f16_tile)                                         \
    OKV_MM_DISPATCH(attr, okv_mm_tile_bf16_##isa, bf16_tile)

#endif
