/* MXFP4 sixteen blocks wide (see mxfp4x16.h): the repacking and the product
 * kernels of every ISA.  The activations are q4_0x16.h's (Q8_0 values in the
 * lane order, and c8, -8 times each block's sum).  The values come from
 * okv_mxfp4_values by a byte shuffle; maddubs and vpdpbusd need one unsigned
 * side.  VNNI's take w + 128 (unsigned, from a shifted table) times x and
 * start from 16 c8 = -128 sum(x), as Q8_0x16's do (w + 128 would overflow
 * maddubs's int16 pairs).  AVX2's take w + 12 (0..24, another shifted
 * table; the block pass says why that is exact) and take 1.5 c8 =
 * -12 sum(x) off.  AVX-512 BW's keep the sign trick: |w| times x with w's
 * sign, where an int16 lane's 16 products (8 vpmaddubsw pairs) of
 * |w| <= 12 and |x| <= 127 stay within int16 (24384), so they widen once
 * per group.
 * Every ISA gets the same exact lanes.  The aarch64 bodies are in
 * mxfp4x16_neon.c. */
#include <math.h>
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/mxfp4x16.h"
#include "kernels/quant.h"
#include "kernels/x16.h"

void okv_repack_mxfp4x16(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nb = k / OKV_QK, nw = k / OKV_X16_VALUES;
    const int nt = okv_mxfp4x16_tail_blocks(k);
    const size_t row = (size_t)nw * sizeof(block_mxfp4x16) + (size_t)nt * sizeof(block_mxfp4);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *o = (uint8_t *)dst + (size_t)r * row, *t = o + (size_t)nw * sizeof(block_mxfp4x16);
        for (int64_t b = 0; b < nb; b++) {
            const block_mxfp4 *in = (const block_mxfp4 *)src + r * nb + b;
            if (b < nw * OKV_X16_BLOCKS) {
                block_mxfp4x16 *g = (block_mxfp4x16 *)o + b / OKV_X16_BLOCKS;
                const int i = (int)(b % OKV_X16_BLOCKS);
                g->e[i] = in->e;
                for (int u = 0; u < 4; u++) memcpy(&g->qs[u][4 * i], &in->qs[4 * u], 4);
                continue;
            }
            const int i = (int)(b - nw * OKV_X16_BLOCKS); /* the compact last group's lane i */
            t[i] = in->e;
            for (int u = 0; u < 4; u++) memcpy(t + nt + 4 * nt * u + 4 * i, &in->qs[4 * u], 4);
        }
    }
}

void okv_dequantize_row_mxfp4x16(const void *src, float *dst, int64_t k) {
    block_mxfp4x16 tmp;
    memset(&tmp, 0, sizeof tmp);
    for (int64_t gi = 0; gi < okv_x16_groups(k); gi++) {
        const block_mxfp4x16 *g = okv_mxfp4x16_group(src, gi, k / OKV_X16_VALUES, okv_mxfp4x16_tail_blocks(k), &tmp);
        for (int i = 0; i < OKV_X16_BLOCKS && (gi * OKV_X16_BLOCKS + i) * OKV_QK < k; i++) {
            const float d = okv_e8m0_half(g->e[i]);
            float *y = dst + (gi * OKV_X16_BLOCKS + i) * OKV_QK;
            for (int u = 0; u < 4; u++)
                for (int m = 0; m < 4; m++) {
                    const uint8_t q = g->qs[u][4 * i + m];
                    y[4 * u + m] = okv_mxfp4_values[q & 0x0F] * d;
                    y[16 + 4 * u + m] = okv_mxfp4_values[q >> 4] * d;
                }
        }
    }
}

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_mxfp4x16, block_act_q8_0x16, okv_x16_groups(c->k))

/* Lane i's integer dot, plainly. */
static inline int32_t dot_scalar(const block_mxfp4x16 *w, const int8_t x[8][64], int i) {
    int32_t p = 0;
    for (int u = 0; u < 4; u++)
        for (int m = 0; m < 4; m++) {
            const int q = w->qs[u][4 * i + m];
            p += okv_mxfp4_values[q & 0x0F] * x[2 * u][4 * i + m] + okv_mxfp4_values[q >> 4] * x[2 * u + 1][4 * i + m];
        }
    return p;
}

/* The reference every ISA matches: per lane, fma(dot, scale times d_x, acc)
 * over the row's groups (the compact last one as its whole group), then
 * x16's lane sum. */
OKV_X16_SCALAR_TILE_COMPACT(okv_mm_tile_mxfp4x16_scalar, block_mxfp4x16, block_act_q8_0x16, okv_mxfp4x16_tail_blocks, okv_mxfp4x16_group, {
    for (int i = 0; i < 16; i++)
        acc[i] = fmaf((float)dot_scalar(w, x->qs, i), okv_e8m0_half(w->e[i]) * x->d[i], acc[i]);
})

#if defined(OKV_X86) /* the x86 bodies */
#include <immintrin.h>

#define AVX2 static inline __attribute__((always_inline)) OKV_TARGET_AVX2

/* 2^(e - 128) of 8 exponent bytes, as okv_e8m0_half. */
AVX2 __m256 scales8_avx2(const uint8_t *e) {
    const __m256i e32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e32, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e32);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e32);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
}

/* One group into acc[j] for NC columns: its four vectors of nibbles at
 * qs + u * qstride and its sixteen exponent bytes at e.  With mask (the
 * compact last group), each vector's half is loaded under mask[half]
 * (lanes < nt, the rest zero, as the whole group it stands for): copying
 * that group into a zeroed one took five memcpy calls a row, and made a
 * row of gpt-oss's 2880 values (5 groups and 10 blocks) slower than one of
 * 3072 (6 groups).  Without VNNI, u = w + 12 (0..24) from a shifted table,
 * as the block pass below (which says why it is exact): two int16 sums a
 * half-group and column, of 4 vectors each, then 1.5 c8 = -12 sum(x).
 * With AVX-VNNI, u = w + 128 into vpdpbusd from 16 c8 = -128 sum(x), the
 * low and the high nibbles' products in two chains (one would wait on
 * vpdpbusd's latency at one column). */
#define GROUP_AVX2(name, TARGET, VNNI)                                                                     \
    static inline __attribute__((always_inline)) TARGET void name(const uint8_t *qs, int64_t qstride,      \
                                                                  const __m256i *mask, const uint8_t *e,   \
                                                                  const block_act_q8_0x16 *const *xs, int64_t g, \
                                                                  const int NC, __m256 (*acc)[2]) {        \
        const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);                         \
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)okv_mxfp4_values)); \
        const __m256i utable = VNNI ? _mm256_xor_si256(table, _mm256_set1_epi8((char)0x80)) /* w + 128 */ \
                                    : _mm256_add_epi8(table, _mm256_set1_epi8(12));                       \
        UNROLL for (int half = 0; half < 2; half++) {                                                     \
            __m256i s[2][OKV_X16_MAX_COLS]; /* no VNNI: int16 sums of vectors 0-3, 4-7; VNNI: lo, hi */  \
            if (VNNI)                                                                                     \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    s[0][j] = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(xs[j][g].c8 + 8 * half)), 4); \
                    s[1][j] = _mm256_setzero_si256();                                                     \
                }                                                                                         \
            UNROLL for (int u = 0; u < 4; u++) {                                                          \
                const uint8_t *q = qs + u * qstride + 32 * half;                                          \
                const __m256i wv = mask ? _mm256_maskload_epi32((const int *)q, mask[half])               \
                                        : _mm256_loadu_si256((const __m256i *)q);                         \
                const __m256i lo = _mm256_shuffle_epi8(utable, _mm256_and_si256(wv, low4));               \
                const __m256i hi = _mm256_shuffle_epi8(utable, _mm256_and_si256(_mm256_srli_epi16(wv, 4), low4)); \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    const __m256i xl = _mm256_loadu_si256((const __m256i *)(xs[j][g].qs[2 * u] + 32 * half)); \
                    const __m256i xh = _mm256_loadu_si256((const __m256i *)(xs[j][g].qs[2 * u + 1] + 32 * half)); \
                    if (VNNI) {                                                                           \
                        s[0][j] = _mm256_dpbusd_avx_epi32(s[0][j], lo, xl);                               \
                        s[1][j] = _mm256_dpbusd_avx_epi32(s[1][j], hi, xh);                               \
                        continue;                                                                         \
                    }                                                                                     \
                    const __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)); \
                    s[u / 2][j] = u % 2 ? _mm256_add_epi16(s[u / 2][j], pr) : pr;                         \
                }                                                                                         \
            }                                                                                             \
            const __m256 sw = scales8_avx2(e + 8 * half);                                                 \
            UNROLL for (int j = 0; j < NC; j++) {                                                         \
                __m256i p;                                                                                \
                if (VNNI) {                                                                               \
                    p = _mm256_add_epi32(s[0][j], s[1][j]);                                               \
                } else {                                                                                  \
                    const __m256i c8 = _mm256_loadu_si256((const __m256i *)(xs[j][g].c8 + 8 * half));     \
                    p = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(s[0][j], ones), _mm256_madd_epi16(s[1][j], ones)), \
                                         _mm256_add_epi32(c8, _mm256_srai_epi32(c8, 1)));                 \
                }                                                                                         \
                acc[j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),                                     \
                                               _mm256_mul_ps(sw, _mm256_loadu_ps(xs[j][g].d + 8 * half)), acc[j][half]); \
            }                                                                                             \
        }                                                                                                 \
    }

/* Rows: the whole groups, then the compact one if any (its nt exponent
 * bytes lead 16 nt bytes of nibbles, so the 16 bytes from its start are
 * in the row; those past nt are masked off). */
#define TILE_AVX2(name, group, TARGET)                                                                     \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                  int64_t c0, const int NC) {              \
        TILE_SETUP();                                                                                     \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                         \
        const int nt = okv_mxfp4x16_tail_blocks(c->k);                                                    \
        __m256i mask[2];                                                                                  \
        okv_x16_tail_masks_avx2(nt, mask);                                                                \
        const __m128i emask = _mm_cmpgt_epi8(_mm_set1_epi8((char)nt),                                     \
                                             _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)); \
        for (int r = 0; r < NR; r++) {                                                                    \
            __m256 acc[OKV_X16_MAX_COLS][2];                                                              \
            UNROLL for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();              \
            for (int64_t g = 0; g < nw; g++) {                                                            \
                const block_mxfp4x16 *w = wr[r] + g;                                                      \
                for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1); \
                group(w->qs[0], 64, NULL, w->e, xs, g, NC, acc);                                          \
            }                                                                                             \
            if (ng > nw) { /* nt blocks */                                                                \
                const uint8_t *t = (const uint8_t *)(wr[r] + nw);                                         \
                okv_x16_prefetch_tail((const char *)t + OKV_X16_AHEAD_AVX2, 17 * nt);                      \
                uint8_t et[OKV_X16_BLOCKS];                                                               \
                _mm_storeu_si128((__m128i *)et, _mm_and_si128(_mm_loadu_si128((const __m128i *)t), emask)); \
                group(t + nt, 4 * nt, mask, et, xs, nw, NC, acc);                                         \
            }                                                                                             \
            UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(acc[j][0], acc[j][1]); \
        }                                                                                                 \
    }

GROUP_AVX2(group_avx2, OKV_TARGET_AVX2, 0)
GROUP_AVX2(group_avxvnni, OKV_TARGET_AVXVNNI, 1)
TILE_AVX2(tile_avx2, group_avx2, OKV_TARGET_AVX2)
TILE_AVX2(tile_avxvnni, group_avxvnni, OKV_TARGET_AVXVNNI)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX2, tile_avx2, okv_mm_tile_mxfp4x16_avx2)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVXVNNI, tile_avxvnni, okv_mm_tile_mxfp4x16_avxvnni)

/* The AVX2 block pass (x16.h says why weight-stationary): a strip of
 * OKV_X16_STRIP rows against OKV_X16_CB columns, each row's half-group
 * looked up once for all of them, as u = w + an offset from a shifted
 * table, 8 vectors that stay in registers while a plain loop over the
 * columns takes the activations from L1.  Without VNNI, u = w + 12 in
 * 0..24: vpmaddubsw's pairs reach 2 * 24 * 128 = 6144, so four vectors
 * add exactly in int16 (two sums a half-group), and -12 sum(x) = 1.5 c8
 * (c8 = -8 sum(x)) takes the offset off: two instructions per 32
 * products, against the sign trick's three (vpsignb on x for the
 * unsigned operand |w|).  With AVX-VNNI, u = w + 128 onto 16 c8 =
 * -128 sum(x), as AVX-512's VNNI body: one instruction per 32 products.
 * Each lane gets tile_avx2's exact integer dot and then its FMA, so the
 * same bits. */
#define BLOCK_AVX2(name, TARGET, VNNI)                                                                     \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r_begin,    \
                                                                  int64_t r_end, int64_t c_begin, int64_t c_end) { \
        const int64_t ng = okv_x16_groups(c->k), nw = c->k / OKV_X16_VALUES;                              \
        const int nt = okv_mxfp4x16_tail_blocks(c->k);                                                    \
        const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);                         \
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)okv_mxfp4_values)); \
        const __m256i utable = VNNI ? _mm256_xor_si256(table, _mm256_set1_epi8((char)0x80)) /* w + 128 */ \
                                    : _mm256_add_epi8(table, _mm256_set1_epi8(12));                       \
        block_mxfp4x16 tmp;                                                                               \
        if (nt) memset(&tmp, 0, sizeof tmp);                                                              \
        OKV_X16_STRIPS_AVX2(block_act_q8_0x16, {                                                          \
            const block_mxfp4x16 *row = (const block_mxfp4x16 *)(c->w + (r0 + r) * c->wrow);              \
            const block_mxfp4x16 *w = okv_mxfp4x16_group(row, g, nw, nt, &tmp);                           \
            okv_x16_prefetch_next_strip(row + g, sizeof *w, c->wrow);                                     \
            UNROLL for (int half = 0; half < 2; half++) {                                                 \
                __m256i wu[8];                                                                            \
                UNROLL for (int u = 0; u < 4; u++) {                                                      \
                    const __m256i wv = _mm256_loadu_si256((const __m256i *)(w->qs[u] + 32 * half));      \
                    const __m256i ilo = _mm256_and_si256(wv, low4);                                       \
                    const __m256i ihi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), low4);                 \
                    wu[2 * u] = _mm256_shuffle_epi8(utable, ilo);                                         \
                    wu[2 * u + 1] = _mm256_shuffle_epi8(utable, ihi);                                     \
                }                                                                                         \
                const __m256 sw = scales8_avx2(w->e + 8 * half);                                          \
                const block_act_q8_0x16 *x = xs + g;                                                      \
                for (int j = 0; j < nc; j++, x += xstride) {                                              \
                    __m256i p;                                                                            \
                    if (VNNI) {                                                                           \
                        p = okv_x16_dot8_avxvnni(_mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(x->c8 + 8 * half)), 4), \
                                                 wu, x->qs, half);                                        \
                    } else {                                                                              \
                        __m256i s16[2];                                                                   \
                        UNROLL for (int v = 0; v < 8; v++) {                                              \
                            const __m256i pv = _mm256_maddubs_epi16(wu[v], _mm256_loadu_si256((const __m256i *)(x->qs[v] + 32 * half))); \
                            s16[v / 4] = v % 4 ? _mm256_add_epi16(s16[v / 4], pv) : pv;                   \
                            __asm__("" : "+x"(s16[v / 4])); /* in order, not a tree of live products */  \
                        }                                                                                 \
                        const __m256i c8 = _mm256_loadu_si256((const __m256i *)(x->c8 + 8 * half));       \
                        p = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(s16[0], ones), _mm256_madd_epi16(s16[1], ones)), \
                                             _mm256_add_epi32(c8, _mm256_srai_epi32(c8, 1)));             \
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

OKV_TARGET_AVX2 void okv_mm_block_mxfp4x16_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    block_avx2(c, r0, r1, c0, c1);
}

OKV_TARGET_AVXVNNI void okv_mm_block_mxfp4x16_avxvnni(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    block_avxvnni(c, r0, r1, c0, c1);
}

/* The AVX-512 body, with VNNI's dot product or BW's (the same lanes): one
 * group of RJ rows (1 or 2; BW: 1) into acc[i][j] for NC columns, row i's
 * four 64-byte vectors of nibbles at qs[i] + u * qstride and its exponents
 * at e[i], loaded under masks qm and em (a whole group: all ones, which the
 * compiler drops; the compact last group: its lanes, the rest zero, as the
 * whole group it stands for).  Two rows share each activation vector's
 * load (x16.h's OKV_X16_DOTS_512 says why). */
#define GROUP_AVX512(name, TARGET, VNNI)                                                                   \
    static inline __attribute__((always_inline)) TARGET void name(const uint8_t *const *qs, const int RJ,   \
                                                                  int64_t qstride, __mmask64 qm,           \
                                                                  const uint8_t *const *e, __mmask16 em,   \
                                                                  const block_act_q8_0x16 *const *xs, int64_t g, \
                                                                  const int NC, __m512 acc[][OKV_X16_MAX_COLS]) { \
        const __m512i low4 = _mm512_set1_epi8(0x0F), ones = _mm512_set1_epi16(1);                         \
        const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)okv_mxfp4_values)); \
        const __m512i utable = _mm512_xor_si512(table, _mm512_set1_epi8((char)0x80)); /* value + 128 */  \
        __m512i p[2][OKV_X16_MAX_COLS], s16[OKV_X16_MAX_COLS];                                            \
        UNROLL for (int j = 0; j < NC; j++) {                                                             \
            UNROLL for (int i = 0; i < RJ; i++)                                                           \
                p[i][j] = (VNNI) ? _mm512_slli_epi32(_mm512_loadu_si512(xs[j][g].c8), 4) : _mm512_setzero_si512(); \
            s16[j] = _mm512_setzero_si512();                                                              \
        }                                                                                                 \
        UNROLL for (int u = 0; u < 4; u++) {                                                              \
            __m512i ilo[2], ihi[2];                                                                       \
            UNROLL for (int i = 0; i < RJ; i++) {                                                         \
                const __m512i wv = _mm512_maskz_loadu_epi8(qm, qs[i] + u * qstride);                      \
                ilo[i] = _mm512_and_si512(wv, low4);                                                      \
                ihi[i] = _mm512_and_si512(_mm512_srli_epi16(wv, 4), low4);                                \
            }                                                                                             \
            if (VNNI && RJ > 1) { /* one chain per row and column: 2 NC of them */                        \
                __m512i ulo[2], uhi[2];                                                                   \
                UNROLL for (int i = 0; i < RJ; i++) {                                                     \
                    ulo[i] = _mm512_shuffle_epi8(utable, ilo[i]);                                         \
                    uhi[i] = _mm512_shuffle_epi8(utable, ihi[i]);                                         \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    const __m512i xl = okv_x16_load_act512(xs[j][g].qs[2 * u], RJ);                       \
                    const __m512i xh = okv_x16_load_act512(xs[j][g].qs[2 * u + 1], RJ);                   \
                    UNROLL for (int i = 0; i < RJ; i++)                                                   \
                        p[i][j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(p[i][j], ulo[i], xl), uhi[i], xh); \
                }                                                                                         \
                continue;                                                                                 \
            }                                                                                             \
            if (VNNI) { /* w + 128 times x, and -128 sum(x) from p's start */                             \
                const __m512i ulo = _mm512_shuffle_epi8(utable, ilo[0]), uhi = _mm512_shuffle_epi8(utable, ihi[0]); \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    p[0][j] = _mm512_dpbusd_epi32(p[0][j], ulo, _mm512_loadu_si512(xs[j][g].qs[2 * u]));  \
                    s16[j] = _mm512_dpbusd_epi32(s16[j], uhi, _mm512_loadu_si512(xs[j][g].qs[2 * u + 1])); \
                }                                                                                         \
                continue;                                                                                 \
            }                                                                                             \
            const __m512i lo = _mm512_shuffle_epi8(table, ilo[0]), hi = _mm512_shuffle_epi8(table, ihi[0]); \
            const __m512i alo = _mm512_abs_epi8(lo), ahi = _mm512_abs_epi8(hi);                           \
            const __mmask64 nlo = _mm512_movepi8_mask(lo), nhi = _mm512_movepi8_mask(hi);                 \
            UNROLL for (int j = 0; j < NC; j++) {                                                         \
                __m512i xl = _mm512_loadu_si512(xs[j][g].qs[2 * u]);                                      \
                __m512i xh = _mm512_loadu_si512(xs[j][g].qs[2 * u + 1]);                                  \
                xl = _mm512_mask_sub_epi8(xl, nlo, _mm512_setzero_si512(), xl);                           \
                xh = _mm512_mask_sub_epi8(xh, nhi, _mm512_setzero_si512(), xh);                           \
                s16[j] = _mm512_add_epi16(s16[j], _mm512_maddubs_epi16(alo, xl));                         \
                s16[j] = _mm512_add_epi16(s16[j], _mm512_maddubs_epi16(ahi, xh));                         \
            }                                                                                             \
        }                                                                                                 \
        /* one row with VNNI: s16 holds the high nibbles' int32 sums (two \
         * chains, not one; exact, so the same sums as two rows' one chain) */ \
        if (RJ == 1)                                                                                      \
            UNROLL for (int j = 0; j < NC; j++)                                                           \
                p[0][j] = (VNNI) ? _mm512_add_epi32(p[0][j], s16[j]) : _mm512_madd_epi16(s16[j], ones);    \
        UNROLL for (int i = 0; i < RJ; i++) {                                                             \
            const __m512i e32 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(em, e[i]));                     \
            const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e32, _mm512_set1_epi32(1)), 23);     \
            const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e32);                    \
            const __m512 sw = _mm512_castsi512_ps(                                                        \
                _mm512_mask_mov_epi32(normal, _mm512_cmplt_epu32_mask(e32, _mm512_set1_epi32(2)), sub));   \
            UNROLL for (int j = 0; j < NC; j++)                                                           \
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i][j]), _mm512_mul_ps(sw, _mm512_loadu_ps(xs[j][g].d)), acc[i][j]); \
        }                                                                                                 \
    }

/* Rows, RJ at a time (NR a multiple of RJ): the whole groups, then the
 * compact one if any; NAME_part runs a part of the whole groups
 * (okv_x16_part; NULL: all, then the compact one and the outputs). */
#define TILE_AVX512(name, group, TARGET, RJ)                                                               \
    static inline __attribute__((always_inline)) TARGET void name##_part(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                         int64_t c0, const int NC,        \
                                                                         const okv_x16_part *part) {      \
        TILE_SETUP();                                                                                     \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                         \
        const int nt = okv_mxfp4x16_tail_blocks(c->k);                                                    \
        const int64_t ahead = okv_x16_part_ahead(part);                                                   \
        for (int r = 0; r < NR; r += (RJ)) {                                                              \
            __m512 acc[RJ][OKV_X16_MAX_COLS];                                                             \
            const uint8_t *qs[RJ], *e[RJ];                                                                \
            UNROLL for (int i = 0; i < (RJ); i++)                                                         \
                UNROLL for (int j = 0; j < NC; j++) acc[i][j] = okv_x16_part_acc512(part, r0 + r + i, j); \
            for (int64_t g = okv_x16_part_g0(part), ge = okv_x16_part_g1(part, nw); g < ge; g++) {        \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    const block_mxfp4x16 *w = wr[r + i] + g;                                              \
                    for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + ahead + l, _MM_HINT_T1);         \
                    okv_x16_prefetch_l1(c->n, NC, w, sizeof *w);                                        \
                    qs[i] = w->qs[0];                                                                     \
                    e[i] = w->e;                                                                          \
                }                                                                                         \
                group(qs, RJ, 64, ~(__mmask64)0, e, (__mmask16)0xFFFF, xs, g, NC, acc);                   \
            }                                                                                             \
            if (!okv_x16_part_last(part)) {                                                               \
                UNROLL for (int i = 0; i < (RJ); i++)                                                     \
                    UNROLL for (int j = 0; j < NC; j++) okv_x16_part_park512(part, r0 + r + i, j, acc[i][j]); \
                continue;                                                                                 \
            }                                                                                             \
            if (ng > nw) { /* nt blocks */                                                                \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    const uint8_t *t = (const uint8_t *)(wr[r + i] + nw);                                 \
                    okv_x16_prefetch_tail((const char *)t + ahead, 17 * nt);                               \
                    qs[i] = t + nt;                                                                       \
                    e[i] = t;                                                                             \
                }                                                                                         \
                group(qs, RJ, 4 * nt, ((__mmask64)1 << (4 * nt)) - 1, e, (__mmask16)((1u << nt) - 1), xs, nw, NC, acc); \
            }                                                                                             \
            UNROLL for (int i = 0; i < (RJ); i++)                                                         \
                UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r + i] = okv_x16_sum16_avx512(acc[i][j]); \
        }                                                                                                 \
    }                                                                                                     \
    /* (the whole row; unused where a pass only takes the parts) */                                    \
    static inline __attribute__((always_inline, unused)) TARGET void name(const okv_mm_ctx *c, int64_t r0, \
                                                                          const int NR, int64_t c0, const int NC) { \
        name##_part(c, r0, NR, c0, NC, NULL);                                                             \
    }

GROUP_AVX512(group_avx512, OKV_TARGET_AVX512, 0)
GROUP_AVX512(group_avx512vnni, OKV_TARGET_AVX512VNNI, 1)
TILE_AVX512(tile_avx512, group_avx512, OKV_TARGET_AVX512, 1)
TILE_AVX512(tile_avx512vnni, group_avx512vnni, OKV_TARGET_AVX512VNNI, 1)
TILE_AVX512(tile2_avx512vnni, group_avx512vnni, OKV_TARGET_AVX512VNNI, 2)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_tile_mxfp4x16_avx512)
OKV_X16_TILE_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile_avx512vnni, tile2_avx512vnni, okv_mm_tile_mxfp4x16_avx512vnni)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_block_mxfp4x16_avx512)
OKV_X16_BLOCK_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile_avx512vnni, tile2_avx512vnni, okv_mm_block_mxfp4x16_avx512vnni)
#endif /* OKV_X86 */
