/* Q6_K sixteen sub-blocks wide (see q6_Kx16.h): the repacking, the
 * activation layout, and the product kernels of every ISA, all computing the
 * same integers and float operations in the same order (so the same bits). */
#include <math.h>
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/q6_Kx16.h"
#include "kernels/quant.h"
#include "kernels/x16.h"

/* The 256 values of a Q6_K block as stored, 0..63, in ggml's order: per
 * half of 128, four quarters of 32 from ql's low nibbles (l, l + 32), then
 * its high nibbles, with qh's bit pairs 0, 2, 4, 6. */
static void q6_K_values(const block_q6_K *b, uint8_t v[256]) {
    for (int half = 0; half < 2; half++)
        for (int l = 0; l < 32; l++) {
            const uint8_t l0 = b->ql[64 * half + l], l1 = b->ql[64 * half + 32 + l], h = b->qh[32 * half + l];
            uint8_t *o = v + 128 * half + l;
            o[0] = (uint8_t)((l0 & 0x0F) | (h & 3) << 4);
            o[32] = (uint8_t)((l1 & 0x0F) | ((h >> 2) & 3) << 4);
            o[64] = (uint8_t)((l0 >> 4) | ((h >> 4) & 3) << 4);
            o[96] = (uint8_t)((l1 >> 4) | ((h >> 6) & 3) << 4);
        }
}

void okv_repack_q6_Kx16(void *dst, const void *src, int64_t rows, int64_t k) {
    const block_q6_K *in = src;
    block_q6_Kx16 *out = dst;
    uint8_t v[OKV_QK_K];
    for (int64_t g = 0; g < rows * (k / OKV_QK_K); g++, in++, out++) {
        q6_K_values(in, v);
        out->d = in->d;
        memcpy(out->sc, in->scales, 16);
        for (int i = 0; i < 16; i++)
            for (int m = 0; m < 4; m++) {
                const uint8_t *s = v + 16 * i + m; /* s[4v'] is value 4v' + m of sub-block i */
                out->qh[4 * i + m] = (uint8_t)(s[0] >> 4 | (s[4] >> 4) << 2 | (s[8] >> 4) << 4 | (s[12] >> 4) << 6);
                out->ql[0][4 * i + m] = (uint8_t)((s[0] & 0x0F) | (s[8] & 0x0F) << 4);
                out->ql[1][4 * i + m] = (uint8_t)((s[4] & 0x0F) | (s[12] & 0x0F) << 4);
            }
    }
}

/* Value 4v + m of sub-block i, 0..63. */
static inline int x16_value(const block_q6_Kx16 *g, int i, int v, int m) {
    const uint8_t ql = g->ql[v % 2][4 * i + m];
    return (v < 2 ? ql & 0x0F : ql >> 4) | ((g->qh[4 * i + m] >> (2 * v)) & 3) << 4;
}

void okv_dequantize_row_q6_Kx16(const void *src, float *dst, int64_t k) {
    const block_q6_Kx16 *g = src;
    for (int64_t gi = 0; gi < k / OKV_QK_K; gi++, g++) {
        const float d = okv_f16_to_f32(g->d);
        for (int i = 0; i < 16; i++)
            for (int v = 0; v < 4; v++)
                for (int m = 0; m < 4; m++)
                    dst[gi * OKV_QK_K + 16 * i + 4 * v + m] = d * (float)g->sc[i] * (float)(x16_value(g, i, v, m) - 32);
    }
}

#if defined(OKV_X86)
/* A super-block's activations from its Q8_K block, AVX2: the scalar code's
 * bytes.  Lane i of vector v is word v of sub-block i: per 8 sub-blocks one
 * 4x4 word transpose per 128-bit lane (sub-blocks 0-3 low, 4-7 high). */
static OKV_TARGET_AVX2 void act_from_q8_K_avx2(const block_q8_K *a, block_act_q8_Kx16s *y) {
    for (int half = 0; half < 2; half++) {
        const int8_t *q = a->qs + 128 * half;
        __m256i r[4], t[4];
        for (int i = 0; i < 4; i++) r[i] = okv_x16_load2_avx2(q + 16 * i, q + 16 * (i + 4));
        okv_x16_transpose4_avx2(r, t);
        for (int v = 0; v < 4; v++) _mm256_storeu_si256((__m256i *)(y->qs[v] + 32 * half), t[v]);
        const __m256i s = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(a->bsums + 8 * half)));
        _mm256_storeu_si256((__m256i *)(y->c32 + 8 * half), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s, 5)));
        _mm256_storeu_ps(y->d + 8 * half, _mm256_set1_ps(a->d));
    }
}
#endif

void okv_quantize_act_q8_Kx16s(okv_isa kern, const float *x, int64_t k, block_act_q8_Kx16s *y) {
    block_q8_K a;
    for (int64_t g = 0; g < k / OKV_QK_K; g++, y++) {
        okv_mm_quantize_q8_K(kern, x + g * OKV_QK_K, &a, OKV_QK_K);
#if defined(OKV_X86)
        if (okv_isa_is_x86(kern)) {
            act_from_q8_K_avx2(&a, y);
            continue;
        }
#endif
        for (int i = 0; i < 16; i++) {
            y->c32[i] = -32 * a.bsums[i];
            y->d[i] = a.d;
            for (int v = 0; v < 4; v++) memcpy(&y->qs[v][4 * i], a.qs + 16 * i + 4 * v, 4);
        }
    }
}

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q6_Kx16, block_act_q8_Kx16s, c->k / OKV_QK_K)

OKV_X16_SCALAR_TILE(okv_mm_tile_q6_Kx16_scalar, block_q6_Kx16, block_act_q8_Kx16s, c->k / OKV_QK_K, {
    const float d = okv_f16_to_f32(w->d);
    for (int i = 0; i < 16; i++) {
        int32_t p = x->c32[i];
        for (int v = 0; v < 4; v++)
            for (int m = 0; m < 4; m++) p += x16_value(w, i, v, m) * x->qs[v][4 * i + m];
        acc[i] = fmaf((float)p, d * (float)w->sc[i] * x->d[i], acc[i]);
    }
})

#if defined(OKV_X86) /* the x86 bodies; aarch64's are in q6_Kx16_neon.c */
#include <immintrin.h>

/* The four value vectors of a super-block from its nibbles and high bits:
 * value vector v = (nibble) | (bits 2v, 2v + 1 of qh) << 4.  A 16-bit shift
 * moves bits across bytes only where the 0x30 mask drops them. */
#define Q6_VALUES(w, L0, L1, H, AND, SL, SR, SET1, OR)                                      \
    const __typeof__(L0) m4_ = SET1(0x0F), m30_ = SET1(0x30);                               \
    w[0] = OR(AND(L0, m4_), AND(SL(H, 4), m30_));                                           \
    w[1] = OR(AND(L1, m4_), AND(SL(H, 2), m30_));                                           \
    w[2] = OR(AND(SR(L0, 4), m4_), AND(H, m30_));                                           \
    w[3] = OR(AND(SR(L1, 4), m4_), AND(SR(H, 2), m30_))

#define SET1_256(v) _mm256_set1_epi8(v)
#define SET1_512(v) _mm512_set1_epi8(v)

/* Half a super-block's four value vectors (wv) and its 8 sub-block scales
 * times d. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 __m256 half_avx2(const block_q6_Kx16 *w, int half, float d,
                                                                              __m256i wv[4]) {
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(w->ql[0] + 32 * half));
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(w->ql[1] + 32 * half));
    const __m256i h = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * half));
    Q6_VALUES(wv, l0, l1, h, _mm256_and_si256, _mm256_slli_epi16, _mm256_srli_epi16, SET1_256, _mm256_or_si256);
    return _mm256_mul_ps(_mm256_set1_ps(d),
                         _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(w->sc + 8 * half)))));
}

/* One column's exact lane dots over half a super-block: c32, plus maddubs
 * pairs (at most 2 * 63 * 127) added as int16 two vectors at a time
 * (32004), then widened. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 __m256i dot_avx2(const __m256i wv[4],
                                                                              const block_act_q8_Kx16s *x, int half) {
    __m256i p = _mm256_loadu_si256((const __m256i *)(x->c32 + 8 * half));
    UNROLL for (int v = 0; v < 4; v += 2) {
        const __m256i s =
            _mm256_add_epi16(_mm256_maddubs_epi16(wv[v], _mm256_loadu_si256((const __m256i *)(x->qs[v] + 32 * half))),
                             _mm256_maddubs_epi16(wv[v + 1], _mm256_loadu_si256((const __m256i *)(x->qs[v + 1] + 32 * half))));
        p = _mm256_add_epi32(p, _mm256_madd_epi16(s, _mm256_set1_epi16(1)));
    }
    return p;
}

/* AVX2: dot_avx2's exact lane dots, one FMA per half super-block. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void tile_avx2(const okv_mm_ctx *c, int64_t r0,
                                                                            const int NR, int64_t c0, const int NC) {
    TILE_SETUP();
    for (int r = 0; r < NR; r++) {
        __m256 acc[OKV_X16_MAX_COLS][2];
        UNROLL for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const block_q6_Kx16 *w = wr[r] + g;
            for (int l = 0; l < 256; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1);
            const float d = _cvtsh_ss(w->d); /* F16C: exact, branch-free */
            UNROLL for (int half = 0; half < 2; half++) {
                __m256i wv[4];
                const __m256 dsc = half_avx2(w, half, d, wv);
                UNROLL for (int j = 0; j < NC; j++) {
                    const __m256i p = dot_avx2(wv, &xs[j][g], half);
                    acc[j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                                   _mm256_mul_ps(dsc, _mm256_loadu_ps(xs[j][g].d + 8 * half)), acc[j][half]);
                }
            }
        }
        UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(acc[j][0], acc[j][1]);
    }
}

OKV_X16_TILE_ENTRY(OKV_TARGET_AVX2, tile_avx2, okv_mm_tile_q6_Kx16_avx2)

/* The AVX2 block pass (from 5 columns on), weight-stationary (x16.h says
 * why): a half-super-block's 6-bit values stay in 4 registers for
 * OKV_X16_CB columns; tile_avx2's integers and float operations in its
 * order, so its bits. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void block_avx2(const okv_mm_ctx *c, int64_t r_begin,
                                                                             int64_t r_end, int64_t c_begin,
                                                                             int64_t c_end) {
    const int64_t ng = c->k / OKV_QK_K;
    OKV_X16_STRIPS_AVX2(block_act_q8_Kx16s, {
        const block_q6_Kx16 *w = (const block_q6_Kx16 *)(c->w + (r0 + r) * c->wrow) + g;
        okv_x16_prefetch_next_strip(w, sizeof *w, c->wrow);
        const float d = _cvtsh_ss(w->d);
        UNROLL for (int half = 0; half < 2; half++) {
            __m256i wv[4];
            const __m256 dsc = half_avx2(w, half, d, wv);
            const block_act_q8_Kx16s *x = xs + g;
            for (int j = 0; j < nc; j++, x += xstride) {
                const __m256i p = dot_avx2(wv, x, half);
                acc_buf[r][j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                                      _mm256_mul_ps(dsc, _mm256_loadu_ps(x->d + 8 * half)),
                                                      acc_buf[r][j][half]);
            }
        }
    });
}

OKV_TARGET_AVX2 void okv_mm_block_q6_Kx16_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    block_avx2(c, r0, r1, c0, c1);
}

/* The AVX-512 body: VNNI's dot product, or BW's maddubs pairs added two
 * vectors at a time as int16 (the same exact lanes); rows RJ at a time (NR
 * a multiple of RJ; BW: 1), two rows sharing each activation vector's load
 * (x16.h's OKV_X16_DOTS_512 says why); NAME_part runs a part of the groups
 * (okv_x16_part; NULL: all, then the outputs). */
#define TILE_AVX512(name, TARGET, VNNI, RJ)                                                               \
    static inline __attribute__((always_inline)) TARGET void name##_part(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                         int64_t c0, const int NC,        \
                                                                         const okv_x16_part *part) {      \
        TILE_SETUP();                                                                                     \
        const __m512i ones = _mm512_set1_epi16(1);                                                        \
        const int64_t ahead = okv_x16_part_ahead(part);                                                   \
        for (int r = 0; r < NR; r += (RJ)) {                                                              \
            __m512 acc[RJ][OKV_X16_MAX_COLS];                                                             \
            UNROLL for (int i = 0; i < (RJ); i++)                                                         \
                UNROLL for (int j = 0; j < NC; j++) acc[i][j] = okv_x16_part_acc512(part, r0 + r + i, j); \
            for (int64_t g = okv_x16_part_g0(part), ge = okv_x16_part_g1(part, ng); g < ge; g++) {        \
                __m512i wv[RJ][4];                                                                        \
                __m512 dsc[RJ];                                                                           \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    const block_q6_Kx16 *w = wr[r + i] + g;                                               \
                    for (int l = 0; l < 256; l += 64) _mm_prefetch((const char *)w + ahead + l, _MM_HINT_T1);         \
                    okv_x16_prefetch_l1(c->n, NC, w, sizeof *w);                                        \
                    const __m512i l0 = _mm512_loadu_si512(w->ql[0]), l1 = _mm512_loadu_si512(w->ql[1]);    \
                    const __m512i h = _mm512_loadu_si512(w->qh);                                          \
                    Q6_VALUES(wv[i], l0, l1, h, _mm512_and_si512, _mm512_slli_epi16, _mm512_srli_epi16, SET1_512, \
                              _mm512_or_si512);                                                           \
                    dsc[i] = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(w->d)),                               \
                                           _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)w->sc)))); \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    const int8_t (*xq)[64] = xs[j][g].qs;                                                 \
                    __m512i p[RJ];                                                                        \
                    UNROLL for (int i = 0; i < (RJ); i++) p[i] = _mm512_loadu_si512(xs[j][g].c32);        \
                    UNROLL for (int v = 0; v < 4; v += 2) {                                               \
                        const __m512i x0 = okv_x16_load_act512(xq[v], (RJ));                              \
                        const __m512i x1 = okv_x16_load_act512(xq[v + 1], (RJ));                          \
                        UNROLL for (int i = 0; i < (RJ); i++) {                                           \
                            if (VNNI) {                                                                   \
                                p[i] = _mm512_dpbusd_epi32(p[i], wv[i][v], x0);                           \
                                p[i] = _mm512_dpbusd_epi32(p[i], wv[i][v + 1], x1);                       \
                            } else {                                                                      \
                                const __m512i s = _mm512_add_epi16(_mm512_maddubs_epi16(wv[i][v], x0),    \
                                                                   _mm512_maddubs_epi16(wv[i][v + 1], x1)); \
                                p[i] = _mm512_add_epi32(p[i], _mm512_madd_epi16(s, ones));                \
                            }                                                                             \
                        }                                                                                 \
                    }                                                                                     \
                    const __m512 xd = _mm512_loadu_ps(xs[j][g].d);                                        \
                    UNROLL for (int i = 0; i < (RJ); i++)                                                 \
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i]), _mm512_mul_ps(dsc[i], xd), acc[i][j]); \
                }                                                                                         \
            }                                                                                             \
            if (!okv_x16_part_last(part)) {                                                               \
                UNROLL for (int i = 0; i < (RJ); i++)                                                     \
                    UNROLL for (int j = 0; j < NC; j++) okv_x16_part_park512(part, r0 + r + i, j, acc[i][j]); \
                continue;                                                                                 \
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

TILE_AVX512(tile_avx512, OKV_TARGET_AVX512, 0, 1)
TILE_AVX512(tile_avx512vnni, OKV_TARGET_AVX512VNNI, 1, 1)
TILE_AVX512(tile2_avx512vnni, OKV_TARGET_AVX512VNNI, 1, 2)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_tile_q6_Kx16_avx512)
OKV_X16_TILE_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile_avx512vnni, tile2_avx512vnni, okv_mm_tile_q6_Kx16_avx512vnni)
/* Q6_K's activations take 1.5 bytes a value (c32 and d per lane), the
 * 512-value groups' 1.25: at k = 5632 four columns are 33 KiB, just over
 * OKV_X16_SWEEP_BYTES, which then swept them two at a time (5 columns as
 * 2 + 2 + 1), unpacking every row two or three times.  Four a sweep from a
 * slightly overfull 32 KiB L1 ran ahead (Zen 4, 2048x5632, two threads:
 * by 5 columns 145-150 -> 171-185 GFLOP/s, by 64 one thread 125 -> 151),
 * where five of the other layouts' columns (35 KiB) ran 18-33 % behind four:
 * so this budget is Q6_K's alone. */
enum { Q6_SWEEP_BYTES = 36864 };
OKV_X16_BLOCK_ENTRY_BUDGET(OKV_TARGET_AVX512, tile_avx512, okv_mm_block_q6_Kx16_avx512, Q6_SWEEP_BYTES)
OKV_X16_BLOCK_ENTRY_PAIRS_BUDGET(OKV_TARGET_AVX512VNNI, tile_avx512vnni, tile2_avx512vnni, okv_mm_block_q6_Kx16_avx512vnni,
                                 Q6_SWEEP_BYTES)

#endif /* OKV_X86 */
