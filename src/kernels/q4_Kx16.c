/* Q4_K and Q5_K sixteen sub-blocks wide (see q4_Kx16.h): the repacking,
 * the activation layout, and the product kernels of every ISA, all
 * computing the same float operations in the same order (so the same bits).
 * The kernels are one body each, FIVE choosing Q5_K's fifth bits. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/q4_Kx16.h"
#include "kernels/quant.h"
#include "kernels/x16.h"

/* Super-blocks per group. */
enum { SB = 2 };

/* One super-block's low 4 bits, scales and mins into half b of group o;
 * qs, scales, d and dmin are at the same places in Q4_K and Q5_K blocks'
 * terms (the caller passes them). */
static void put_super_block(block_q4_Kx16 *o, int b, okv_f16 d, okv_f16 dmin, const uint8_t *scales,
                            const uint8_t *qs) {
    o->d[b] = d;
    o->dmin[b] = dmin;
    for (int j = 0; j < 8; j++) okv_q4_K_scale_min(j, scales, &o->sc[8 * b + j], &o->m[8 * b + j]);
    /* sub-blocks 2c and 2c + 1 are the low and high nibbles of qs[32c ..]:
     * their bytes for value pairs (4u + m, 16 + 4u + m), 16 at a time */
    for (int c = 0; c < 4; c++) {
        const uint8_t *a = qs + 32 * c, *h = a + 16;
        uint8_t even[16], odd[16];
        for (int t = 0; t < 16; t++) {
            even[t] = (uint8_t)((a[t] & 0x0F) | (h[t] & 0x0F) << 4);
            odd[t] = (uint8_t)((a[t] >> 4) | (h[t] & 0xF0));
        }
        const int i = 8 * b + 2 * c;
        for (int u = 0; u < 4; u++) {
            memcpy(&o->qs[u][4 * i], even + 4 * u, 4);
            memcpy(&o->qs[u][4 * (i + 1)], odd + 4 * u, 4);
        }
    }
}

/* Lanes 0-7 of o (its second super-block unused) as a half group. */
static void halve(block_q4_Kx8 *h, const block_q4_Kx16 *o) {
    for (int u = 0; u < 4; u++) memcpy(h->qs[u], o->qs[u], sizeof h->qs[u]);
    memcpy(h->sc, o->sc, sizeof h->sc);
    memcpy(h->m, o->m, sizeof h->m);
    h->d = o->d[0];
    h->dmin = o->dmin[0];
}

/* Bytes of a row of k values (FIVE: Q5_K's layout). */
static size_t row_bytes(int64_t k, int FIVE) {
    const int64_t nw = okv_kx16_whole(k);
    if (FIVE) return (size_t)nw * sizeof(block_q5_Kx16) + (k % 512 ? sizeof(block_q5_Kx8) : 0);
    return (size_t)nw * sizeof(block_q4_Kx16) + (k % 512 ? sizeof(block_q4_Kx8) : 0);
}

void okv_repack_q4_Kx16(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nsb = k / OKV_QK_K, nw = okv_kx16_whole(k);
    const size_t row = row_bytes(k, 0);
    const block_q4_K *in = src;
    for (int64_t r = 0; r < rows; r++) {
        block_q4_Kx16 *out = (block_q4_Kx16 *)((uint8_t *)dst + (size_t)r * row);
        for (int64_t s = 0; s < nsb; s++, in++) {
            if (s / SB < nw) {
                put_super_block(out + s / SB, (int)(s % SB), in->d, in->dmin, in->scales, in->qs);
                continue;
            }
            block_q4_Kx16 o = {0};
            put_super_block(&o, 0, in->d, in->dmin, in->scales, in->qs);
            halve((block_q4_Kx8 *)(out + nw), &o);
        }
    }
}

/* Q5_K super-block in into half b of group o (whose fifth bits start at zero). */
static void put_q5_K(block_q5_Kx16 *o, int b, const block_q5_K *in) {
    put_super_block(&o->low, b, in->d, in->dmin, in->scales, in->qs);
    /* sub-block j's value l has its fifth bit at bit j of qh[l] */
    for (int j = 0; j < 8; j++)
        for (int u = 0; u < 4; u++)
            for (int m = 0; m < 4; m++) {
                const int lo = (in->qh[4 * u + m] >> j) & 1, hi = (in->qh[16 + 4 * u + m] >> j) & 1;
                o->qh[4 * (8 * b + j) + m] |= (uint8_t)(lo << u | hi << (4 + u));
            }
}

void okv_repack_q5_Kx16(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nsb = k / OKV_QK_K, nw = okv_kx16_whole(k);
    const size_t row = row_bytes(k, 1);
    const block_q5_K *in = src;
    memset(dst, 0, (size_t)rows * row);
    for (int64_t r = 0; r < rows; r++) {
        block_q5_Kx16 *out = (block_q5_Kx16 *)((uint8_t *)dst + (size_t)r * row);
        for (int64_t s = 0; s < nsb; s++, in++) {
            if (s / SB < nw) {
                put_q5_K(out + s / SB, (int)(s % SB), in);
                continue;
            }
            block_q5_Kx16 o = {0};
            put_q5_K(&o, 0, in);
            block_q5_Kx8 *h = (block_q5_Kx8 *)(out + nw);
            halve(&h->low, &o.low);
            memcpy(h->qh, o.qh, sizeof h->qh);
        }
    }
}

/* Group g of a row of nw whole groups (FIVE: Q5_K's), the half group after
 * them expanded into *tmp with zero lanes 8-15: the padded group the kernels'
 * half-group steps stand for (q4_Kx16.h).  The scalar kernel and the
 * dequantization read it so. */
static const block_q4_Kx16 *group_at(const uint8_t *row, int64_t g, int64_t nw, int FIVE, block_q5_Kx16 *tmp) {
    const size_t gs = FIVE ? sizeof(block_q5_Kx16) : sizeof(block_q4_Kx16);
    if (g < nw) return (const block_q4_Kx16 *)(row + (size_t)g * gs);
    const block_q4_Kx8 *h = (const block_q4_Kx8 *)(row + (size_t)nw * gs);
    memset(tmp, 0, sizeof *tmp);
    for (int u = 0; u < 4; u++) memcpy(tmp->low.qs[u], h->qs[u], sizeof h->qs[u]);
    memcpy(tmp->low.sc, h->sc, sizeof h->sc);
    memcpy(tmp->low.m, h->m, sizeof h->m);
    tmp->low.d[0] = h->d;
    tmp->low.dmin[0] = h->dmin;
    if (FIVE) memcpy(tmp->qh, ((const block_q5_Kx8 *)h)->qh, sizeof((const block_q5_Kx8 *)h)->qh);
    return &tmp->low;
}

/* A row's groups (FIVE: Q5_K's). */
static void dequantize_row(const uint8_t *src, int FIVE, float *dst, int64_t k) {
    block_q5_Kx16 tmp;
    for (int64_t gi = 0; gi < okv_x16_groups(k); gi++) {
        const block_q4_Kx16 *g = group_at(src, gi, okv_kx16_whole(k), FIVE, &tmp);
        const uint8_t *qh = FIVE ? ((const block_q5_Kx16 *)g)->qh : NULL;
        for (int i = 0; i < 16 && (gi * 16 + i) * 32 < k; i++) {
            /* ggml's float operations: d * sc, min * m, then d1 * q - m1 */
            const float d1 = okv_f16_to_f32(g->d[i / 8]) * (float)g->sc[i];
            const float m1 = okv_f16_to_f32(g->dmin[i / 8]) * (float)g->m[i];
            float *y = dst + (gi * 16 + i) * 32;
            for (int u = 0; u < 4; u++)
                for (int m = 0; m < 4; m++) {
                    const uint8_t q = g->qs[u][4 * i + m], h = qh ? qh[4 * i + m] : 0;
                    y[4 * u + m] = d1 * (float)((q & 0x0F) | ((h >> u) & 1) << 4) - m1;
                    y[16 + 4 * u + m] = d1 * (float)((q >> 4) | ((h >> (4 + u)) & 1) << 4) - m1;
                }
        }
    }
}

void okv_dequantize_row_q4_Kx16(const void *src, float *dst, int64_t k) { dequantize_row(src, 0, dst, k); }

void okv_dequantize_row_q5_Kx16(const void *src, float *dst, int64_t k) { dequantize_row(src, 1, dst, k); }

#if defined(OKV_X86)
/* A group's activations from its two Q8_K super-blocks, AVX2: the scalar
 * code's bytes. */
static OKV_TARGET_AVX2 void act_from_q8_K_avx2(const block_q8_K a[SB], block_act_q8_Kx16 *y) {
    for (int half = 0; half < SB; half++) {
        const block_q8_K *b = &a[half];
        okv_x16_permute_act_half_avx2(b->qs, y->qs, half);
        const __m256 d = _mm256_set1_ps(b->d);
        _mm256_storeu_ps(y->d + 8 * half, d);
        /* the 32-value sums of bsums' pairs (exact in int32), then the same float product */
        const __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)b->bsums), _mm256_set1_epi16(1));
        _mm256_storeu_ps(y->xm + 8 * half, _mm256_mul_ps(d, _mm256_cvtepi32_ps(s)));
    }
}
#endif

void okv_quantize_act_q8_Kx16(okv_isa kern, const float *x, int64_t k, block_act_q8_Kx16 *y) {
    block_q8_K a[SB];
    int8_t q[SB * OKV_QK_K];
    for (int64_t g = 0; g < okv_x16_groups(k); g++, y++) {
        const float *xg = x + g * SB * OKV_QK_K;
        const int64_t len = k - g * SB * OKV_QK_K < SB * OKV_QK_K ? k - g * SB * OKV_QK_K : SB * OKV_QK_K;
        memset(a, 0, sizeof a); /* a missing second super-block: zero values, scale and sums */
        okv_mm_quantize_q8_K(kern, xg, a, len);
#if defined(OKV_X86)
        if (okv_isa_is_x86(kern)) {
            act_from_q8_K_avx2(a, y);
            continue;
        }
#endif
        for (int i = 0; i < 16; i++) {
            const block_q8_K *b = &a[i / 8];
            memcpy(q + 32 * i, b->qs + 32 * (i % 8), 32);
            y->d[i] = b->d;
            y->xm[i] = b->d * (float)(b->bsums[2 * (i % 8)] + b->bsums[2 * (i % 8) + 1]);
        }
        okv_x16_permute_act(q, y->qs);
    }
}

/* Hoisted tile pointers: row r's groups (gs bytes each: block_q4_Kx16 or
 * block_q5_Kx16; after nw of them perhaps a half group) and column j's
 * groups. */
#define TILE_SETUP(FIVE)                                                                     \
    const size_t gs = (FIVE) ? sizeof(block_q5_Kx16) : sizeof(block_q4_Kx16);               \
    const int64_t nw = okv_kx16_whole(c->k);                                                 \
    OKV_X16_TILE_SETUP(uint8_t, block_act_q8_Kx16, okv_x16_groups(c->k))

/* Group g of row r: its Q4_K part and (FIVE) its fifth bits. */
#define GROUP(FIVE)                                                                          \
    const block_q4_Kx16 *w = (const block_q4_Kx16 *)(wr[r] + g * gs);                        \
    const uint8_t *qh = (FIVE) ? ((const block_q5_Kx16 *)w)->qh : NULL

/* Row r's half group, if any (g is nw): its Q4_K part and (FIVE) its fifth bits. */
#define HALF_GROUP(FIVE)                                                                     \
    const block_q4_Kx8 *h = (const block_q4_Kx8 *)(wr[r] + nw * gs);                         \
    const uint8_t *hqh = (FIVE) ? ((const block_q5_Kx8 *)h)->qh : NULL

/* Per lane and group: acc = fma(dot, (d sc) dx, acc), then
 * acc = fnmadd(dmin m, xm, acc).  d sc and dmin m are exact in f32
 * (11-bit mantissas times 6-bit integers). */
static void tile_scalar(const okv_mm_ctx *c, int64_t r0, int NR, int64_t c0, int NC, int FIVE) {
    const int64_t nw = okv_kx16_whole(c->k);
    OKV_X16_TILE_SETUP(uint8_t, block_act_q8_Kx16, okv_x16_groups(c->k));
    block_q5_Kx16 tmp;
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) {
            float acc[16] = {0};
            for (int64_t g = 0; g < ng; g++) {
                const block_q4_Kx16 *w = group_at(wr[r], g, nw, FIVE, &tmp);
                const uint8_t *qh = FIVE ? ((const block_q5_Kx16 *)w)->qh : NULL;
                const block_act_q8_Kx16 *x = xs[j] + g;
                for (int i = 0; i < 16; i++) {
                    const float dsc = okv_f16_to_f32(w->d[i / 8]) * (float)w->sc[i];
                    const float dm = okv_f16_to_f32(w->dmin[i / 8]) * (float)w->m[i];
                    acc[i] = fmaf((float)okv_x16_dot_scalar(w->qs, qh, x->qs, i), dsc * x->d[i], acc[i]);
                    acc[i] = fmaf(-dm, x->xm[i], acc[i]);
                }
            }
            c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16(acc);
        }
}

void okv_mm_tile_q4_Kx16_scalar(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {
    tile_scalar(c, r0, nr, c0, nc, 0);
}

void okv_mm_tile_q5_Kx16_scalar(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {
    tile_scalar(c, r0, nr, c0, nc, 1);
}

#if defined(OKV_X86) /* the x86 bodies; aarch64's are in q4_Kx16_neon.c */
#include <immintrin.h>

#define AVX2 static inline __attribute__((always_inline)) OKV_TARGET_AVX2

/* A super-block's d sc and dmin m for its 8 lanes, from its scale d, min
 * scale dmin and 6-bit scales and mins (8 bytes each). */
AVX2 void scales_avx2(okv_f16 d16, okv_f16 dmin16, const uint8_t *sc, const uint8_t *mn, __m256 *dsc, __m256 *dm) {
    /* F16C's conversion (exact, as okv_f16_to_f32's; no branches for
     * subnormals in the loop of every super-block) */
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(d16)), mv = _mm256_set1_ps(_cvtsh_ss(dmin16));
    *dsc = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc))));
    *dm = _mm256_mul_ps(mv, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn))));
}

/* One super-block for NC columns: lanes 8 half .. 8 half + 7 of activation
 * group g into ACC[j] (__m256): weights QS[u] + 32 half, fifth bits QH + 32
 * half, then scales_avx2 of D, DMIN, SC, MN.  A macro, as QS is a group's
 * [4][64] or a half group's [4][32] (half 0). */
#define SUPER_BLOCK_AVX2(ACC, QS, QH, D, DMIN, SC, MN, half, FIVE)                               \
    do {                                                                                     \
        __m256i p_[OKV_X16_MAX_COLS];                                                        \
        UNROLL for (int j_ = 0; j_ < NC; j_++) p_[j_] = _mm256_setzero_si256();              \
        OKV_X16_DOTS_256(p_, QS, QH, xq, NC, half, FIVE);                                    \
        __m256 dsc_, dm_;                                                                    \
        scales_avx2(D, DMIN, SC, MN, &dsc_, &dm_);                                           \
        UNROLL for (int j_ = 0; j_ < NC; j_++) {                                             \
            const __m256 a_ = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p_[j_]),                   \
                                              _mm256_mul_ps(dsc_, _mm256_loadu_ps(xs[j_][g].d + 8 * (half))), ACC[j_]); \
            ACC[j_] = _mm256_fnmadd_ps(dm_, _mm256_loadu_ps(xs[j_][g].xm + 8 * (half)), a_);  \
        }                                                                                    \
    } while (0)

AVX2 void tile_avx2(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC, const int FIVE) {
    TILE_SETUP(FIVE);
    const int8_t (*xq[OKV_X16_MAX_COLS])[64];
    for (int r = 0; r < NR; r++) {
        __m256 acc[2][OKV_X16_MAX_COLS]; /* lanes 0-7, 8-15 */
        UNROLL for (int j = 0; j < NC; j++) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
        for (int64_t g = 0; g < nw; g++) {
            GROUP(FIVE);
            for (size_t l = 0; l < gs + 64; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1);
            UNROLL for (int j = 0; j < NC; j++) xq[j] = xs[j][g].qs;
            UNROLL for (int half = 0; half < 2; half++)
                SUPER_BLOCK_AVX2(acc[half], w->qs, qh, w->d[half], w->dmin[half], w->sc + 8 * half, w->m + 8 * half, half, FIVE);
        }
        if (ng > nw) {
            const int64_t g = nw;
            HALF_GROUP(FIVE);
            for (size_t l = 0; l < gs / 2 + 64; l += 64) _mm_prefetch((const char *)h + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1);
            UNROLL for (int j = 0; j < NC; j++) xq[j] = xs[j][g].qs;
            SUPER_BLOCK_AVX2(acc[0], h->qs, hqh, h->d, h->dmin, h->sc, h->m, 0, FIVE);
        }
        UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(acc[0][j], acc[1][j]);
    }
}

AVX2 void tile4_avx2(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    tile_avx2(c, r0, NR, c0, NC, 0);
}
AVX2 void tile5_avx2(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    tile_avx2(c, r0, NR, c0, NC, 1);
}
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX2, tile4_avx2, okv_mm_tile_q4_Kx16_avx2)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX2, tile5_avx2, okv_mm_tile_q5_Kx16_avx2)

/* Q4_Kx16's and Q5_Kx16's AVX2 strips (from 5 columns on, for rows too
 * long for x16.h's sweeps), weight-stationary (x16.h says why): a
 * half-group's 4- or 5-bit values stay unpacked in 8 registers for
 * OKV_X16_CB columns; tile_avx2's integers and float operations in its
 * order, so its bits. */
AVX2 void block_avx2(const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, int64_t c_begin, int64_t c_end,
                     const int FIVE) {
    const int64_t ng = okv_x16_groups(c->k), nw = okv_kx16_whole(c->k);
    const size_t gs = FIVE ? sizeof(block_q5_Kx16) : sizeof(block_q4_Kx16);
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    OKV_X16_STRIPS_AVX2(block_act_q8_Kx16, {
        const int whole = g < nw; /* else the half group: its lanes 0-7 only */
        const uint8_t *wg = c->w + (r0 + r) * c->wrow + g * gs;
        const block_q4_Kx16 *w = (const block_q4_Kx16 *)wg;
        const block_q4_Kx8 *h = (const block_q4_Kx8 *)wg;
        okv_x16_prefetch_next_strip(wg, whole ? gs : gs / 2, c->wrow);
        for (int half = 0; half < 1 + whole; half++) {
            /* the super-block's 32-byte rows of values, fifth bits, scales */
            const uint8_t *qs = whole ? w->qs[0] + 32 * half : h->qs[0];
            const size_t qstride = whole ? sizeof w->qs[0] : sizeof h->qs[0];
            const uint8_t *qh = !FIVE ? NULL
                                : whole ? ((const block_q5_Kx16 *)wg)->qh + 32 * half
                                        : ((const block_q5_Kx8 *)wg)->qh;
            __m256i wq[8];
            const __m256i hb = FIVE ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
            UNROLL for (int u = 0; u < 4; u++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + u * qstride));
                wq[2 * u] = _mm256_and_si256(v, low4);
                wq[2 * u + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                if (FIVE) { /* OKV_X16_DOTS_256's fifth bits */
                    wq[2 * u] = _mm256_or_si256(wq[2 * u], _mm256_and_si256(_mm256_sll_epi16(hb, _mm_cvtsi32_si128(4 - u)), bit4));
                    wq[2 * u + 1] = _mm256_or_si256(wq[2 * u + 1], _mm256_and_si256(_mm256_srl_epi16(hb, _mm_cvtsi32_si128(u)), bit4));
                }
            }
            __m256 dsc, dm;
            if (whole) scales_avx2(w->d[half], w->dmin[half], w->sc + 8 * half, w->m + 8 * half, &dsc, &dm);
            else scales_avx2(h->d, h->dmin, h->sc, h->m, &dsc, &dm);
            const block_act_q8_Kx16 *x = xs + g;
            for (int j = 0; j < nc; j++, x += xstride) {
                /* OKV_X16_DOTS_256's sums, exact: 16 products per int16 lane
                 * of 4-bit weights, 8 of 5-bit ones */
                __m256i s16 = _mm256_maddubs_epi16(wq[0], _mm256_loadu_si256((const __m256i *)(x->qs[0] + 32 * half)));
                __m256i p = _mm256_setzero_si256();
                UNROLL for (int v = 1; v < 8; v++) {
                    if (FIVE && v == 4) {
                        p = _mm256_madd_epi16(s16, ones);
                        s16 = _mm256_setzero_si256();
                    }
                    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(wq[v], _mm256_loadu_si256((const __m256i *)(x->qs[v] + 32 * half))));
                    /* summed in order: GCC otherwise reassociated the adds
                     * to after all 8 products, spilling unpacked weights */
                    __asm__("" : "+x"(s16));
                }
                p = FIVE ? _mm256_add_epi32(p, _mm256_madd_epi16(s16, ones)) : _mm256_madd_epi16(s16, ones);
                __m256 a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dsc, _mm256_loadu_ps(x->d + 8 * half)),
                                           acc_buf[r][j][half]);
                acc_buf[r][j][half] = _mm256_fnmadd_ps(dm, _mm256_loadu_ps(x->xm + 8 * half), a);
            }
        }
    });
}

OKV_TARGET_AVX2 void okv_mm_block_q4_Kx16_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (okv_x16_sweeps_avx2(c->xa_col)) OKV_X16_SWEEPS(tile4_avx2, OKV_X16_SWEEP_BYTES_AVX2);
    else block_avx2(c, r0, r1, c0, c1, 0);
}
OKV_TARGET_AVX2 void okv_mm_block_q5_Kx16_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (okv_x16_sweeps_avx2(c->xa_col)) OKV_X16_SWEEPS(tile5_avx2, OKV_X16_SWEEP_BYTES_AVX2);
    else block_avx2(c, r0, r1, c0, c1, 1);
}

/* d (lanes 0-7 from super-block 0, 8-15 from 1) times 16 unsigned bytes. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX512 __m512 scaled_bytes(const okv_f16 d[2],
                                                                                   const uint8_t *b) {
    const __m512 dv = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(d[0])), _mm256_set1_ps(_cvtsh_ss(d[1])), 1);
    return _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b))));
}

/* The AVX-512 body, with VNNI's dot product or BW's (the same lanes), and
 * Q5_K's fifth bits when FIVE: rows RJ at a time (NR a multiple of RJ);
 * NAME_part runs a part of the whole groups (okv_x16_part; NULL: all, then
 * the half one and the outputs). */
#define TILE_AVX512(name, TARGET, VNNI, FIVE, RJ)                                                         \
    static inline __attribute__((always_inline)) TARGET void name##_part(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                         int64_t c0, const int NC,        \
                                                                         const okv_x16_part *part) {      \
        TILE_SETUP(FIVE);                                                                                 \
        const int64_t ahead = okv_x16_part_ahead(part);                                                   \
        const int8_t (*xq[OKV_X16_MAX_COLS])[64];                                                         \
        for (int r1 = 0; r1 < NR; r1 += (RJ)) {                                                           \
            __m512 acc[RJ][OKV_X16_MAX_COLS];                                                             \
            UNROLL for (int i = 0; i < (RJ); i++)                                                         \
                UNROLL for (int j = 0; j < NC; j++) acc[i][j] = okv_x16_part_acc512(part, r0 + r1 + i, j); \
            for (int64_t g = okv_x16_part_g0(part), ge = okv_x16_part_g1(part, nw); g < ge; g++) {        \
                const block_q4_Kx16 *wi[RJ];                                                              \
                const uint8_t (*qs[RJ])[64], *wqh[RJ];                                                     \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    const int r = r1 + i;                                                                 \
                    GROUP(FIVE);                                                                          \
                    for (size_t l = 0; l < gs + 64; l += 64) _mm_prefetch((const char *)w + ahead + l, _MM_HINT_T1);         \
                    okv_x16_prefetch_l1(c->n, NC, w, gs);                                               \
                    wi[i] = w;                                                                            \
                    qs[i] = w->qs;                                                                        \
                    wqh[i] = qh;                                                                          \
                }                                                                                         \
                __m512i p[RJ][OKV_X16_MAX_COLS];                                                          \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    UNROLL for (int i = 0; i < (RJ); i++) p[i][j] = _mm512_setzero_si512();               \
                    xq[j] = xs[j][g].qs;                                                                  \
                }                                                                                         \
                OKV_X16_DOTS_512(p, RJ, qs, wqh, xq, NC, VNNI, FIVE);                                      \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    const __m512 dsc = scaled_bytes(wi[i]->d, wi[i]->sc), dm = scaled_bytes(wi[i]->dmin, wi[i]->m); \
                    UNROLL for (int j = 0; j < NC; j++) {                                                 \
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i][j]),                          \
                                                    _mm512_mul_ps(dsc, _mm512_loadu_ps(xs[j][g].d)), acc[i][j]); \
                        acc[i][j] = _mm512_fnmadd_ps(dm, _mm512_loadu_ps(xs[j][g].xm), acc[i][j]);        \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
            if (!okv_x16_part_last(part)) {                                                               \
                UNROLL for (int i = 0; i < (RJ); i++)                                                     \
                    UNROLL for (int j = 0; j < NC; j++) okv_x16_part_park512(part, r0 + r1 + i, j, acc[i][j]); \
                continue;                                                                                 \
            }                                                                                             \
            UNROLL for (int i = 0; i < (RJ); i++) {                                                       \
                const int r = r1 + i;                                                                     \
                if (ng > nw) { /* the half group: lanes 0-7, AVX2's operations on them */                \
                    const int64_t g = nw;                                                                 \
                    HALF_GROUP(FIVE);                                                                     \
                    for (size_t l = 0; l < gs / 2 + 64; l += 64) _mm_prefetch((const char *)h + ahead + l, _MM_HINT_T1); \
                    __m256 lo[OKV_X16_MAX_COLS];                                                          \
                    UNROLL for (int j = 0; j < NC; j++) {                                                 \
                        lo[j] = _mm512_castps512_ps256(acc[i][j]);                                        \
                        xq[j] = xs[j][g].qs;                                                              \
                    }                                                                                     \
                    SUPER_BLOCK_AVX2(lo, h->qs, hqh, h->d, h->dmin, h->sc, h->m, 0, FIVE);                   \
                    UNROLL for (int j = 0; j < NC; j++) acc[i][j] = _mm512_insertf32x8(acc[i][j], lo[j], 0); \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx512(acc[i][j]); \
            }                                                                                             \
        }                                                                                                 \
    }                                                                                                     \
    /* (the whole row; unused where a pass only takes the parts) */                                    \
    static inline __attribute__((always_inline, unused)) TARGET void name(const okv_mm_ctx *c, int64_t r0, \
                                                                          const int NR, int64_t c0, const int NC) { \
        name##_part(c, r0, NR, c0, NC, NULL);                                                             \
    }

TILE_AVX512(tile4_avx512, OKV_TARGET_AVX512, 0, 0, 1)
TILE_AVX512(tile5_avx512, OKV_TARGET_AVX512, 0, 1, 1)
TILE_AVX512(tile4_avx512vnni, OKV_TARGET_AVX512VNNI, 1, 0, 1)
TILE_AVX512(tile5_avx512vnni, OKV_TARGET_AVX512VNNI, 1, 1, 1)
TILE_AVX512(tile4x2_avx512vnni, OKV_TARGET_AVX512VNNI, 1, 0, 2)
TILE_AVX512(tile5x2_avx512vnni, OKV_TARGET_AVX512VNNI, 1, 1, 2)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile4_avx512, okv_mm_tile_q4_Kx16_avx512)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile5_avx512, okv_mm_tile_q5_Kx16_avx512)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512, tile4_avx512, okv_mm_block_q4_Kx16_avx512)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512, tile5_avx512, okv_mm_block_q5_Kx16_avx512)
OKV_X16_TILE_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile4_avx512vnni, tile4x2_avx512vnni, okv_mm_tile_q4_Kx16_avx512vnni)
OKV_X16_TILE_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile5_avx512vnni, tile5x2_avx512vnni, okv_mm_tile_q5_Kx16_avx512vnni)
OKV_X16_BLOCK_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile4_avx512vnni, tile4x2_avx512vnni, okv_mm_block_q4_Kx16_avx512vnni)
OKV_X16_BLOCK_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile5_avx512vnni, tile5x2_avx512vnni, okv_mm_block_q5_Kx16_avx512vnni)

#endif /* OKV_X86 */
