/* Q5_0 sixteen blocks wide (see q5_0x16.h): the repacking and the product
 * kernels of every x86 ISA (aarch64's are in q5_0x16_neon.c), which compute
 * the same integers and the same float operations in the same order (so
 * the same bits). */
#include <math.h>
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/q5_0x16.h"
#include "kernels/quant.h"
#include "kernels/x16.h"

void okv_repack_q5_0x16(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nw = k / OKV_X16_VALUES;
    const int nt = okv_q5_0x16_tail_blocks(k);
    const size_t row = (size_t)nw * sizeof(block_q5_0x16) + (size_t)nt * sizeof(block_q5_0);
    const block_q5_0 *in = src;
    block_q5_0x16 g;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *o = (uint8_t *)dst + (size_t)r * row;
        for (int64_t gi = 0; gi < okv_x16_groups(k); gi++) {
            memset(&g, 0, sizeof g);
            for (int i = 0; i < OKV_X16_BLOCKS && gi * OKV_X16_BLOCKS + i < k / OKV_QK; i++, in++) {
                const uint32_t qh = (uint32_t)in->qh[0] | (uint32_t)in->qh[1] << 8 | (uint32_t)in->qh[2] << 16 |
                                    (uint32_t)in->qh[3] << 24;
                g.d[i] = in->d;
                for (int u = 0; u < 4; u++)
                    for (int m = 0; m < 4; m++) {
                        g.qs[u][4 * i + m] = in->qs[4 * u + m];
                        g.qh[4 * i + m] |= (uint8_t)(((qh >> (4 * u + m)) & 1) << u | ((qh >> (16 + 4 * u + m)) & 1) << (4 + u));
                    }
            }
            if (gi < nw) {
                memcpy(o + (size_t)gi * sizeof g, &g, sizeof g);
                continue;
            }
            /* the compact last group: lanes 0..nt-1 of each part */
            uint8_t *t = o + (size_t)nw * sizeof g;
            memcpy(t, g.d, (size_t)nt * sizeof(okv_f16));
            t += (size_t)nt * sizeof(okv_f16);
            memcpy(t, g.qh, 4 * (size_t)nt);
            for (int u = 0; u < 4; u++) memcpy(t + 4 * (size_t)nt * (u + 1), g.qs[u], 4 * (size_t)nt);
        }
    }
}

void okv_dequantize_row_q5_0x16(const void *src, float *dst, int64_t k) {
    block_q5_0x16 tmp;
    memset(&tmp, 0, sizeof tmp);
    for (int64_t gi = 0; gi < okv_x16_groups(k); gi++) {
        const block_q5_0x16 *g = okv_q5_0x16_group(src, gi, k / OKV_X16_VALUES, okv_q5_0x16_tail_blocks(k), &tmp);
        for (int i = 0; i < OKV_X16_BLOCKS && (gi * OKV_X16_BLOCKS + i) * OKV_QK < k; i++) {
            const float d = okv_f16_to_f32(g->d[i]);
            float *y = dst + (gi * OKV_X16_BLOCKS + i) * OKV_QK;
            for (int u = 0; u < 4; u++)
                for (int m = 0; m < 4; m++) {
                    const int q = g->qs[u][4 * i + m], h = g->qh[4 * i + m];
                    y[4 * u + m] = (float)(((q & 0x0F) | ((h >> u) & 1) << 4) - 16) * d;
                    y[16 + 4 * u + m] = (float)(((q >> 4) | ((h >> (4 + u)) & 1) << 4) - 16) * d;
                }
        }
    }
}

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q5_0x16, block_act_q8_0x16, okv_x16_groups(c->k))

/* The reference every ISA matches: per lane, fma(dot, d_w d_x, acc) over the
 * row's groups (the compact last one as its whole group), the dot the
 * unsigned 5-bit weights' plus 2 c8 (-16 * the activations' sum), then x16's
 * lane sum. */
OKV_X16_SCALAR_TILE_COMPACT(okv_mm_tile_q5_0x16_scalar, block_q5_0x16, block_act_q8_0x16, okv_q5_0x16_tail_blocks, okv_q5_0x16_group, {
    for (int i = 0; i < 16; i++) {
        const int32_t p = 2 * x->c8[i] + okv_x16_dot_scalar(w->qs, w->qh, x->qs, i);
        acc[i] = fmaf((float)p, okv_f16_to_f32(w->d[i]) * x->d[i], acc[i]);
    }
})

#if defined(OKV_X86)
#include <immintrin.h>

#define AVX2 static inline __attribute__((always_inline)) OKV_TARGET_AVX2

/* The parts of a group of n blocks at t (q5_0x16.h: n scales, 4 n bytes
 * of fifth bits, then 4 n bytes of each qs[u]; n = 16: block_q5_0x16). */
#define QH(t, n) ((t) + 2 * (size_t)(n))
#define QS(t, n, u) ((t) + 2 * (size_t)(n) + 4 * (size_t)(n) * ((u) + 1))

/* Half a group (lanes 8 half .. 8 half + 7) of one row by NC columns into
 * acc: the nibbles and fifth bits read in place, the compact last group
 * (TAIL) with masked loads (lanes past its blocks read as zero; its scales
 * a whole 16-byte load from d, the lanes past its blocks then zeroed: its
 * 22 n bytes hold the 16 from 16 half on whenever n > 8 half, the only
 * halves the tile runs), so no group is copied.  Each column's int16 sums
 * take 8 products (at most 8 * 31 * 127 = 31496: exact) before widening. */
AVX2 void half_avx2(const uint8_t *t, const int n, const int TAIL, __m256i mh, const okv_f16 *d,
                    const block_act_q8_0x16 *const *x, const int half, const int NC, __m256 acc[]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    const __m256i hb = TAIL ? _mm256_maskload_epi32((const int *)(QH(t, n) + 32 * half), mh)
                            : _mm256_loadu_si256((const __m256i *)(QH(t, n) + 32 * half));
    __m256i p[OKV_X16_MAX_COLS], s16[OKV_X16_MAX_COLS];
    UNROLL for (int j = 0; j < NC; j++) {
        const __m256i c8 = _mm256_loadu_si256((const __m256i *)(x[j]->c8 + 8 * half));
        p[j] = _mm256_add_epi32(c8, c8);
        s16[j] = _mm256_setzero_si256();
    }
    UNROLL for (int u = 0; u < 4; u++) {
        const __m256i v = TAIL ? _mm256_maskload_epi32((const int *)(QS(t, n, u) + 32 * half), mh)
                               : _mm256_loadu_si256((const __m256i *)(QS(t, n, u) + 32 * half));
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, low4),
                                           _mm256_and_si256(_mm256_sll_epi16(hb, _mm_cvtsi32_si128(4 - u)), bit4));
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4),
                                           _mm256_and_si256(_mm256_srl_epi16(hb, _mm_cvtsi32_si128(u)), bit4));
        UNROLL for (int j = 0; j < NC; j++) {
            s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(x[j]->qs[2 * u] + 32 * half))));
            s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(x[j]->qs[2 * u + 1] + 32 * half))));
            if (NC > 1) __asm__("" : "+x"(s16[j])); /* in order: x16.h's OKV_X16_DOTS_256 says why */
            if (u % 2 == 1) {
                p[j] = _mm256_add_epi32(p[j], _mm256_madd_epi16(s16[j], ones));
                s16[j] = _mm256_setzero_si256();
            }
        }
    }
    __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 8 * half)));
    if (TAIL) sw = _mm256_and_ps(sw, _mm256_castsi256_ps(mh));
    UNROLL for (int j = 0; j < NC; j++)
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]), _mm256_mul_ps(sw, _mm256_loadu_ps(x[j]->d + 8 * half)), acc[j]);
}

/* 1 to 4 columns: a row's lanes 0-7 over all its groups, then lanes 8-15
 * (the row's lines again, from L1), so only NC float accumulators live
 * across the groups beside the int16 sums (q4_0x16.c's tilen_avx2 says why).
 * A compact group of at most 8 blocks leaves its all-padding half out
 * (q4_0x16.c's tail_half: the same bits). */
AVX2 void tile_avx2(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    TILE_SETUP();
    (void)ng; /* the whole groups, then the compact one */
    const int64_t nw = c->k / OKV_X16_VALUES;
    const int nt = okv_q5_0x16_tail_blocks(c->k);
    __m256i mask[2];
    okv_x16_tail_masks_avx2(nt, mask);
    const block_act_q8_0x16 *x[OKV_X16_MAX_COLS];
    for (int r = 0; r < NR; r++) {
        const uint8_t *tail = (const uint8_t *)(wr[r] + nw);
        __m256 lanes[2][OKV_X16_MAX_COLS];
        UNROLL for (int half = 0; half < 2; half++) {
            __m256 acc[OKV_X16_MAX_COLS];
            UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();
            for (int64_t g = 0; g < nw; g++) {
                const block_q5_0x16 *w = wr[r] + g;
                if (half == 0)
                    for (int l = 0; l < (int)sizeof *w; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1);
                UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + g;
                half_avx2((const uint8_t *)w, OKV_X16_BLOCKS, 0, mask[half], w->d, x, half, NC, acc);
            }
            if (nt > 8 * half) {
                if (half == 0) okv_x16_prefetch_tail(tail + OKV_X16_AHEAD_AVX2, nt * (int)sizeof(block_q5_0));
                UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + nw;
                half_avx2(tail, nt, 1, mask[half], (const okv_f16 *)tail, x, half, NC, acc);
            }
            UNROLL for (int j = 0; j < NC; j++) lanes[half][j] = acc[j];
        }
        UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(lanes[0][j], lanes[1][j]);
    }
}

OKV_X16_TILE_ENTRY(OKV_TARGET_AVX2, tile_avx2, okv_mm_tile_q5_0x16_avx2)

/* The AVX2 block pass (from 5 columns: x16.h's strips): each half-group of
 * a row unpacked once, its fifth bits joined, for OKV_X16_CB columns; per
 * column two int16 sums of 8 products each (at most 8 * 31 * 127 = 31496:
 * exact), as the tiles' OKV_X16_DOTS_256, so the bits are theirs. */
OKV_TARGET_AVX2 void okv_mm_block_q5_0x16_avx2(const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, int64_t c_begin,
                                               int64_t c_end) {
    const int64_t ng = okv_x16_groups(c->k), nw = c->k / OKV_X16_VALUES;
    const int nt = okv_q5_0x16_tail_blocks(c->k);
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    block_q5_0x16 tmp;
    if (nt) memset(&tmp, 0, sizeof tmp);
    OKV_X16_STRIPS_AVX2(block_act_q8_0x16, {
        const block_q5_0x16 *row = (const block_q5_0x16 *)(c->w + (r0 + r) * c->wrow);
        const block_q5_0x16 *w = okv_q5_0x16_group(row, g, nw, nt, &tmp);
        okv_x16_prefetch_next_strip(row + g, sizeof *w, c->wrow);
        UNROLL for (int half = 0; half < 2; half++) {
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * half));
            __m256i wq[8];
            UNROLL for (int u = 0; u < 4; u++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(w->qs[u] + 32 * half));
                wq[2 * u] = _mm256_or_si256(_mm256_and_si256(v, low4),
                                            _mm256_and_si256(_mm256_sll_epi16(hb, _mm_cvtsi32_si128(4 - u)), bit4));
                wq[2 * u + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4),
                                                _mm256_and_si256(_mm256_srl_epi16(hb, _mm_cvtsi32_si128(u)), bit4));
            }
            const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w->d + 8 * half)));
            const block_act_q8_0x16 *x = xs + g;
            for (int j = 0; j < nc; j++, x += xstride) {
                const __m256i c8 = _mm256_loadu_si256((const __m256i *)(x->c8 + 8 * half));
                __m256i s[2];
                UNROLL for (int q = 0; q < 2; q++) {
                    s[q] = _mm256_maddubs_epi16(wq[4 * q], _mm256_loadu_si256((const __m256i *)(x->qs[4 * q] + 32 * half)));
                    UNROLL for (int v = 4 * q + 1; v < 4 * q + 4; v++)
                        s[q] = _mm256_add_epi16(s[q], _mm256_maddubs_epi16(wq[v], _mm256_loadu_si256((const __m256i *)(x->qs[v] + 32 * half))));
                }
                const __m256i p = _mm256_add_epi32(_mm256_add_epi32(c8, c8),
                                                   _mm256_add_epi32(_mm256_madd_epi16(s[0], ones), _mm256_madd_epi16(s[1], ones)));
                acc_buf[r][j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, _mm256_loadu_ps(x->d + 8 * half)),
                                                      acc_buf[r][j][half]);
            }
        }
    });
}

/* One group of n blocks at t[i] (m: its lanes) of each of RJ rows (1 or 2;
 * BW: 1) by NC columns into acc[i], with VNNI's dot product or BW's (the
 * same lanes): the parts read in place, the compact last group's with its
 * lanes' mask, as for AVX2.  Two rows share each activation vector's load
 * (x16.h's OKV_X16_DOTS_512 says why). */
#define GROUP_AVX512(name, TARGET, VNNI)                                                                   \
    static inline __attribute__((always_inline)) TARGET void name(const uint8_t *const *t, const int RJ, const int n, \
                                                                  __mmask16 m, const block_act_q8_0x16 *const *x, \
                                                                  const int NC, __m512 acc[][OKV_X16_MAX_COLS]) { \
        const __m512i low4 = _mm512_set1_epi8(0x0F);                                                      \
        __m512i hb[2], p[2][OKV_X16_MAX_COLS], s16[OKV_X16_MAX_COLS];                                     \
        UNROLL for (int i = 0; i < RJ; i++) hb[i] = _mm512_maskz_loadu_epi32(m, QH(t[i], n));              \
        UNROLL for (int j = 0; j < NC; j++) {                                                             \
            const __m512i c8 = _mm512_loadu_si512(x[j]->c8);                                              \
            UNROLL for (int i = 0; i < RJ; i++) p[i][j] = _mm512_add_epi32(c8, c8);                       \
            s16[j] = _mm512_setzero_si512();                                                              \
        }                                                                                                 \
        UNROLL for (int u = 0; u < 4; u++) {                                                              \
            __m512i lo[2], hi[2];                                                                         \
            UNROLL for (int i = 0; i < RJ; i++) {                                                         \
                const __m512i v = _mm512_maskz_loadu_epi32(m, QS(t[i], n, u));                            \
                /* hu: only bits u and 4 + u of each byte, so the shifts \
                 * below put one of them at bit 4 and nothing above it; \
                 * vpternlogd (0xE4: A where C, else B) takes the nibble from \
                 * v and bit 4 from hu */                                                                 \
                const __m512i hu = _mm512_and_si512(hb[i], _mm512_set1_epi8((char)(0x11 << u)));          \
                lo[i] = _mm512_ternarylogic_epi32(v, _mm512_sll_epi16(hu, _mm_cvtsi32_si128(4 - u)), low4, 0xE4); \
                hi[i] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), _mm512_srl_epi16(hu, _mm_cvtsi32_si128(u)), \
                                                  low4, 0xE4);                                            \
            }                                                                                             \
            UNROLL for (int j = 0; j < NC; j++) {                                                         \
                const __m512i xl = okv_x16_load_act512(x[j]->qs[2 * u], RJ);                              \
                const __m512i xh = okv_x16_load_act512(x[j]->qs[2 * u + 1], RJ);                          \
                if (VNNI) {                                                                               \
                    UNROLL for (int i = 0; i < RJ; i++) {                                                 \
                        p[i][j] = _mm512_dpbusd_epi32(p[i][j], lo[i], xl);                                \
                        p[i][j] = _mm512_dpbusd_epi32(p[i][j], hi[i], xh);                                \
                    }                                                                                     \
                } else {                                                                                  \
                    s16[j] = _mm512_add_epi16(s16[j], _mm512_maddubs_epi16(lo[0], xl));                   \
                    s16[j] = _mm512_add_epi16(s16[j], _mm512_maddubs_epi16(hi[0], xh));                   \
                    if (u % 2 == 1) {                                                                     \
                        p[0][j] = _mm512_add_epi32(p[0][j], _mm512_madd_epi16(s16[j], _mm512_set1_epi16(1))); \
                        s16[j] = _mm512_setzero_si512();                                                  \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        UNROLL for (int i = 0; i < RJ; i++) {                                                             \
            const __m512 sw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, t[i]));                         \
            UNROLL for (int j = 0; j < NC; j++)                                                           \
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i][j]), _mm512_mul_ps(sw, _mm512_loadu_ps(x[j]->d)), acc[i][j]); \
        }                                                                                                 \
    }

GROUP_AVX512(group_avx512, OKV_TARGET_AVX512, 0)
GROUP_AVX512(group_avx512vnni, OKV_TARGET_AVX512VNNI, 1)

/* The AVX-512 tiles, 1 to 8 columns (x16.h's sweeps), RJ rows at a time
 * (NR a multiple of RJ): the whole groups, then the compact one; NAME_part
 * runs a part of the whole groups (okv_x16_part; NULL: all, then the
 * compact one and the outputs). */
#define TILE_AVX512(name, TARGET, GROUP, RJ)                                                               \
    static inline __attribute__((always_inline)) TARGET void name##_part(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                         int64_t c0, const int NC,        \
                                                                         const okv_x16_part *part) {      \
        TILE_SETUP();                                                                                     \
        (void)ng; /* the whole groups, then the compact one */                                            \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                         \
        const int nt = okv_q5_0x16_tail_blocks(c->k);                                                     \
        const int64_t ahead = okv_x16_part_ahead(part);                                                   \
        const block_act_q8_0x16 *x[OKV_X16_MAX_COLS];                                                     \
        for (int r = 0; r < NR; r += (RJ)) {                                                              \
            __m512 acc[RJ][OKV_X16_MAX_COLS];                                                             \
            const uint8_t *t[RJ];                                                                         \
            UNROLL for (int i = 0; i < (RJ); i++)                                                         \
                UNROLL for (int j = 0; j < NC; j++) acc[i][j] = okv_x16_part_acc512(part, r0 + r + i, j); \
            for (int64_t g = okv_x16_part_g0(part), ge = okv_x16_part_g1(part, nw); g < ge; g++) {        \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    t[i] = (const uint8_t *)(wr[r + i] + g);                                              \
                    for (int l = 0; l < (int)sizeof(block_q5_0x16); l += 64)                              \
                        _mm_prefetch((const char *)t[i] + ahead + l, _MM_HINT_T1);                \
                    okv_x16_prefetch_l1(c->n, NC, t[i], sizeof(block_q5_0x16));                         \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + g;                                     \
                GROUP(t, RJ, OKV_X16_BLOCKS, (__mmask16)0xFFFF, x, NC, acc);                              \
            }                                                                                             \
            if (!okv_x16_part_last(part)) {                                                               \
                UNROLL for (int i = 0; i < (RJ); i++)                                                     \
                    UNROLL for (int j = 0; j < NC; j++) okv_x16_part_park512(part, r0 + r + i, j, acc[i][j]); \
                continue;                                                                                 \
            }                                                                                             \
            if (nt) {                                                                                     \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    t[i] = (const uint8_t *)(wr[r + i] + nw);                                             \
                    okv_x16_prefetch_tail((const char *)t[i] + ahead, nt * (int)sizeof(block_q5_0)); \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + nw;                                    \
                GROUP(t, RJ, nt, (__mmask16)((1u << nt) - 1), x, NC, acc);                                \
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

TILE_AVX512(tile_avx512, OKV_TARGET_AVX512, group_avx512, 1)
TILE_AVX512(tile_avx512vnni, OKV_TARGET_AVX512VNNI, group_avx512vnni, 1)
TILE_AVX512(tile2_avx512vnni, OKV_TARGET_AVX512VNNI, group_avx512vnni, 2)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_tile_q5_0x16_avx512)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_block_q5_0x16_avx512)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512VNNI, tile_avx512vnni, okv_mm_tile_q5_0x16_avx512vnni)

/* VNNI's rows in pairs (x16.h's OKV_X16_SWEEPS_PARTS), except by 5 to 7
 * columns where their activations overfill a sweep (k = 5632, then swept
 * as 4 + 1, now 5 in two parts) and the pairs ran behind.  bench/matmul,
 * one thread of a Zen 4, 2048 rows, GFLOP/s one row -> pairs, three
 * alternations: by 5 columns k = 2048 249 -> 293, 4096 237 -> 304, 5632
 * 202 -> 186; by 8 k = 2048 262 -> 286, 5632 232 -> 243; by 64 k = 2048
 * 273 -> 300, 4096 258 -> 311, 5632 244 -> 301.  The tiles (1 to 4 columns: decode) keep one row, as Q8_0's: its
 * pairs by 3 and 4 columns ran behind (k = 5632 by 3: 197 -> 161). */
OKV_TARGET_AVX512VNNI void okv_mm_block_q5_0x16_avx512vnni(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0,
                                                          int64_t c1) {
    if (c1 - c0 < 8 && OKV_X16_SWEEP_BYTES / (int64_t)c->xa_col < 5)
        OKV_X16_SWEEPS_PARTS(tile_avx512vnni, tile_avx512vnni, OKV_X16_SWEEP_BYTES, 0);
    else
        OKV_X16_SWEEPS_PARTS(tile_avx512vnni, tile2_avx512vnni, OKV_X16_SWEEP_BYTES, 1);
}

#endif /* OKV_X86 */
