/* Q4_0 sixteen blocks wide (see q4_0x16.h): the repacking, the activation
 * layout, and the product kernels of every ISA, which all compute the same
 * operations in the same order (exact integer block sums, one FMA per block
 * and lane, x16.h's lane sum) and so give the same bits. */
#include <math.h>
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/q4_0x16.h"
#include "kernels/quant.h"
#include "kernels/x16.h"

void okv_repack_q4_0x16(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nb = k / OKV_QK, ng = okv_x16_groups(k);
    block_q4_0x16 *out = dst;
    memset(out, 0, (size_t)(rows * ng) * sizeof *out); /* the padding */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            const block_q4_0 *in = (const block_q4_0 *)src + r * nb + b;
            block_q4_0x16 *g = out + r * ng + b / OKV_X16_BLOCKS;
            const int i = (int)(b % OKV_X16_BLOCKS);
            g->d[i] = in->d;
            for (int u = 0; u < 4; u++) memcpy(&g->qs[u][4 * i], &in->qs[4 * u], 4);
        }
}

void okv_dequantize_row_q4_0x16(const void *src, float *dst, int64_t k) {
    const block_q4_0x16 *g = src;
    for (int64_t gi = 0; gi < okv_x16_groups(k); gi++, g++)
        for (int i = 0; i < OKV_X16_BLOCKS && (gi * OKV_X16_BLOCKS + i) * OKV_QK < k; i++) {
            const float d = okv_f16_to_f32(g->d[i]);
            float *y = dst + (gi * OKV_X16_BLOCKS + i) * OKV_QK;
            for (int u = 0; u < 4; u++)
                for (int m = 0; m < 4; m++) {
                    const uint8_t q = g->qs[u][4 * i + m];
                    y[4 * u + m] = (float)((q & 0x0F) - 8) * d;
                    y[16 + 4 * u + m] = (float)((q >> 4) - 8) * d;
                }
        }
}

#if defined(OKV_X86)
/* A quantized group's block sums and permutation (q: its 512 values in
 * order), AVX2: the scalar code's bytes. */
static OKV_TARGET_AVX2 void finish_act_avx2(const int8_t *q, block_act_q8_0x16 *y) {
    for (int half = 0; half < 2; half++) {
        const __m256i s = okv_x16_permute_act_half_avx2(q + 256 * half, y->qs, half);
        /* -8 s (exact: |s| <= 32 * 128) */
        _mm256_storeu_si256((__m256i *)(y->c8 + 8 * half), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s, 3)));
    }
}
#endif

void okv_quantize_act_q8_0x16(okv_isa kern, const float *x, int64_t k, block_act_q8_0x16 *y) {
    int8_t q[OKV_X16_VALUES];
    for (int64_t g = 0; g < okv_x16_groups(k); g++, y++) {
        const float *xg = x + g * OKV_X16_VALUES;
        const int64_t len = k - g * OKV_X16_VALUES < OKV_X16_VALUES ? k - g * OKV_X16_VALUES : OKV_X16_VALUES;
        memset(q, 0, sizeof q);
        memset(y->d, 0, sizeof y->d);
        okv_mm_quantize_act(kern, xg, len, q, y->d);
#if defined(OKV_X86)
        if (okv_isa_is_x86(kern)) {
            finish_act_avx2(q, y);
            continue;
        }
#endif
        for (int i = 0; i < OKV_X16_BLOCKS; i++) {
            int32_t s = 0;
            for (int t = 0; t < OKV_QK; t++) s += q[i * OKV_QK + t];
            y->c8[i] = -8 * s;
        }
        okv_x16_permute_act(q, y->qs);
    }
}

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q4_0x16, block_act_q8_0x16, okv_x16_groups(c->k))

OKV_X16_SCALAR_TILE(okv_mm_tile_q4_0x16_scalar, block_q4_0x16, block_act_q8_0x16, okv_x16_groups(c->k), {
    for (int i = 0; i < 16; i++) {
        const int32_t p = x->c8[i] + okv_x16_dot_scalar(w->qs, NULL, x->qs, i);
        acc[i] = fmaf((float)p, okv_f16_to_f32(w->d[i]) * x->d[i], acc[i]);
    }
})

#if defined(OKV_X86) /* the x86 bodies; aarch64's are in q4_0x16_neon.c */
#include <immintrin.h>

#define AVX2 static inline __attribute__((always_inline)) OKV_TARGET_AVX2

/* One column (decode): both halves of a group per step, one loop over the
 * groups; two accumulators and the int16 sums fit the registers. */
AVX2 void tile1_avx2(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    TILE_SETUP();
    const int8_t (*xq[OKV_X16_MAX_COLS])[64];
    for (int r = 0; r < NR; r++) {
        /* lanes 0-7 (blocks 0-7 of each group) and 8-15 */
        __m256 acc[OKV_X16_MAX_COLS][2];
        UNROLL for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const block_q4_0x16 *w = wr[r] + g;
            for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1);
            UNROLL for (int j = 0; j < NC; j++) xq[j] = xs[j][g].qs;
            UNROLL for (int half = 0; half < 2; half++) {
                __m256i p[OKV_X16_MAX_COLS];
                UNROLL for (int j = 0; j < NC; j++) p[j] = _mm256_loadu_si256((const __m256i *)(xs[j][g].c8 + 8 * half));
                OKV_X16_DOTS_256(p, w->qs, w->qs[0], xq, NC, half, 0); /* qh unused */
                const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w->d + 8 * half)));
                UNROLL for (int j = 0; j < NC; j++)
                    acc[j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]),
                                                   _mm256_mul_ps(sw, _mm256_loadu_ps(xs[j][g].d + 8 * half)),
                                                   acc[j][half]);
            }
        }
        UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(acc[j][0], acc[j][1]);
    }
}

/* 2 to 8 columns (batched decode; 5 and 8 in x16.h's sweeps): a row's
 * lanes 0-7 (blocks 0-7 of each group) over all its groups, then lanes
 * 8-15 (the row's lines again, from L1).  Each lane's FMAs keep their
 * order over the groups, so the bits are tile1_avx2's, and only NC float
 * accumulators live across the groups: tile1_avx2's 2 NC beside the int16
 * sums spilled 25 ymm moves per half group at NC = 4 (callgrind).  The
 * int16 sums take OKV_X16_DOTS_256's 16 products per lane (exact); the c8
 * term joins after the widening.  With AVX-VNNI, vpdpbusd adds the
 * products to c8 in 32 bits: the same sums, two instructions per 64
 * products where the int16 way takes five; the low and the high nibbles'
 * products go to two chains, added at the end (one chain of 8 waited on
 * vpdpbusd's latency: 2-4 columns ~11 % faster hot). */
#define TILEN_AVX2(name, TARGET, VNNI)                                                                     \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                  int64_t c0, const int NC) {              \
        TILE_SETUP();                                                                                     \
        const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);                         \
        for (int r = 0; r < NR; r++) {                                                                    \
            __m256 lanes[2][OKV_X16_MAX_COLS];                                                            \
            UNROLL for (int half = 0; half < 2; half++) {                                                 \
                __m256 acc[OKV_X16_MAX_COLS];                                                             \
                UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();                         \
                for (int64_t g = 0; g < ng; g++) {                                                        \
                    const block_q4_0x16 *w = wr[r] + g;                                                   \
                    if (half == 0)                                                                        \
                        for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1); \
                    __m256i s[OKV_X16_MAX_COLS], t[OKV_X16_MAX_COLS];                                     \
                    if (VNNI)                                                                             \
                        UNROLL for (int j = 0; j < NC; j++) {                                             \
                            s[j] = _mm256_loadu_si256((const __m256i *)(xs[j][g].c8 + 8 * half));         \
                            t[j] = _mm256_setzero_si256();                                                \
                        }                                                                                 \
                    UNROLL for (int u = 0; u < 4; u++) {                                                  \
                        const __m256i v = _mm256_loadu_si256((const __m256i *)(w->qs[u] + 32 * half));     \
                        const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4); \
                        UNROLL for (int j = 0; j < NC; j++) {                                             \
                            const __m256i xl = _mm256_loadu_si256((const __m256i *)(xs[j][g].qs[2 * u] + 32 * half)); \
                            const __m256i xh = _mm256_loadu_si256((const __m256i *)(xs[j][g].qs[2 * u + 1] + 32 * half)); \
                            if (VNNI) {                                                                   \
                                s[j] = _mm256_dpbusd_avx_epi32(s[j], lo, xl);                             \
                                t[j] = _mm256_dpbusd_avx_epi32(t[j], hi, xh);                             \
                            } else {                                                                      \
                                const __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)); \
                                s[j] = u == 0 ? t : _mm256_add_epi16(s[j], t);                            \
                                /* summed here: GCC otherwise reassociates the adds \
                                 * to after all 8 NC products, whose results spill */ \
                                __asm__("" : "+x"(s[j]));                                                 \
                            }                                                                             \
                        }                                                                                 \
                    }                                                                                     \
                    const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w->d + 8 * half))); \
                    UNROLL for (int j = 0; j < NC; j++) {                                                 \
                        const __m256i p = (VNNI) ? _mm256_add_epi32(s[j], t[j])                           \
                                                 : _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(xs[j][g].c8 + 8 * half)), \
                                                                    _mm256_madd_epi16(s[j], ones));       \
                        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, _mm256_loadu_ps(xs[j][g].d + 8 * half)), \
                                                 acc[j]);                                                 \
                    }                                                                                     \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) lanes[half][j] = acc[j];                              \
            }                                                                                             \
            UNROLL for (int j = 0; j < NC; j++)                                                           \
                c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(lanes[0][j], lanes[1][j]);          \
        }                                                                                                 \
    }

TILEN_AVX2(tilen_avx2, OKV_TARGET_AVX2, 0)
TILEN_AVX2(tilen_avxvnni, OKV_TARGET_AVXVNNI, 1)

AVX2 void tile_avx2(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    if (NC == 1) tile1_avx2(c, r0, NR, c0, 1);
    else tilen_avx2(c, r0, NR, c0, NC);
}

/* decode (one column) reads memory, not multiplies: AVX2's tile1 */
static inline __attribute__((always_inline)) OKV_TARGET_AVXVNNI void tile_avxvnni(const okv_mm_ctx *c, int64_t r0, const int NR,
                                                                                    int64_t c0, const int NC) {
    if (NC == 1) tile1_avx2(c, r0, NR, c0, 1);
    else tilen_avxvnni(c, r0, NR, c0, NC);
}

OKV_X16_TILE_ENTRY(OKV_TARGET_AVX2, tile_avx2, okv_mm_tile_q4_0x16_avx2)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVXVNNI, tile_avxvnni, okv_mm_tile_q4_0x16_avxvnni)

/* The AVX2 strips, for rows too long for x16.h's sweeps (and every row
 * with AVX-VNNI; x16.h says why weight-stationary): each lane sees
 * tile_avx2's operations in its order (the same exact integer dot, then
 * one FMA per group), so the bits are the same. */
#define BLOCK_AVX2(name, TARGET, VNNI)                                                                     \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, \
                                                                  int64_t c_begin, int64_t c_end) {        \
        const int64_t ng = okv_x16_groups(c->k);                                                          \
        const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);                         \
        OKV_X16_STRIPS_AVX2(block_act_q8_0x16, {                                                          \
            const block_q4_0x16 *w = (const block_q4_0x16 *)(c->w + (r0 + r) * c->wrow) + g;              \
            okv_x16_prefetch_next_strip(w, sizeof *w, c->wrow);                                           \
            UNROLL for (int half = 0; half < 2; half++) {                                                 \
                __m256i wq[8];                                                                            \
                UNROLL for (int u = 0; u < 4; u++) {                                                      \
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(w->qs[u] + 32 * half));       \
                    wq[2 * u] = _mm256_and_si256(v, low4);                                                \
                    wq[2 * u + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);                      \
                }                                                                                         \
                const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w->d + 8 * half)));   \
                const block_act_q8_0x16 *x = xs + g;                                                      \
                for (int j = 0; j < nc; j++, x += xstride) {                                              \
                    const __m256i c8 = _mm256_loadu_si256((const __m256i *)(x->c8 + 8 * half));           \
                    __m256i p;                                                                            \
                    if (VNNI) {                                                                           \
                        p = okv_x16_dot8_avxvnni(c8, wq, x->qs, half);                                    \
                    } else {                                                                              \
                        /* OKV_X16_DOTS_256's sums: 16 products per int16 lane, exact */                  \
                        __m256i s16 = _mm256_maddubs_epi16(wq[0], _mm256_loadu_si256((const __m256i *)(x->qs[0] + 32 * half))); \
                        UNROLL for (int v = 1; v < 8; v++) {                                              \
                            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(wq[v], _mm256_loadu_si256((const __m256i *)(x->qs[v] + 32 * half)))); \
                            __asm__("" : "+x"(s16)); /* in order: see tilen_avx2 */                       \
                        }                                                                                 \
                        p = _mm256_add_epi32(c8, _mm256_madd_epi16(s16, ones));                           \
                    }                                                                                     \
                    acc_buf[r][j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),                          \
                                                          _mm256_mul_ps(sw, _mm256_loadu_ps(x->d + 8 * half)), \
                                                          acc_buf[r][j][half]);                           \
                }                                                                                         \
            }                                                                                             \
        });                                                                                               \
    }

BLOCK_AVX2(block_avx2, OKV_TARGET_AVX2, 0)
BLOCK_AVX2(block_avxvnni, OKV_TARGET_AVXVNNI, 1)

OKV_TARGET_AVX2 void okv_mm_block_q4_0x16_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (okv_x16_sweeps_avx2(c->xa_col)) OKV_X16_SWEEPS(tile_avx2, OKV_X16_SWEEP_BYTES_AVX2);
    else block_avx2(c, r0, r1, c0, c1);
}

OKV_TARGET_AVXVNNI void okv_mm_block_q4_0x16_avxvnni(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    block_avxvnni(c, r0, r1, c0, c1);
}

/* The AVX-512 body, with VNNI's dot product or BW's (the same lanes). */
#define TILE_AVX512(name, TARGET, VNNI)                                                                    \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                  int64_t c0, const int NC) {              \
        TILE_SETUP();                                                                                     \
        const int8_t (*xq[OKV_X16_MAX_COLS])[64];                                                         \
        for (int r = 0; r < NR; r++) {                                                                    \
            __m512 acc[OKV_X16_MAX_COLS];                                                                 \
            UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm512_setzero_ps();                             \
            for (int64_t g = 0; g < ng; g++) {                                                            \
                const block_q4_0x16 *w = wr[r] + g;                                                       \
                for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD + l, _MM_HINT_T1); \
                __m512i p[OKV_X16_MAX_COLS];                                                              \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    p[j] = _mm512_loadu_si512(xs[j][g].c8);                                               \
                    xq[j] = xs[j][g].qs;                                                                  \
                }                                                                                         \
                OKV_X16_DOTS_512(p, w->qs, w->qs[0], xq, NC, VNNI, 0); /* qh unused */                     \
                const __m512 sw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)w->d));             \
                UNROLL for (int j = 0; j < NC; j++)                                                       \
                    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[j]), _mm512_mul_ps(sw, _mm512_loadu_ps(xs[j][g].d)), \
                                             acc[j]);                                                     \
            }                                                                                             \
            UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx512(acc[j]); \
        }                                                                                                 \
    }

TILE_AVX512(tile_avx512, OKV_TARGET_AVX512, 0)
TILE_AVX512(tile_avx512vnni, OKV_TARGET_AVX512VNNI, 1)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_tile_q4_0x16_avx512)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512VNNI, tile_avx512vnni, okv_mm_tile_q4_0x16_avx512vnni)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_block_q4_0x16_avx512)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512VNNI, tile_avx512vnni, okv_mm_block_q4_0x16_avx512vnni)

#endif /* OKV_X86 */
