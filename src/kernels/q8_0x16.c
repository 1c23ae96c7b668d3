/* Q8_0 sixteen blocks wide (see q8_0x16.h): the repacking and the product
 * kernels of every ISA, which compute the same integers and the same float
 * operations in the same order (so the same bits). */
#include <math.h>
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/q8_0x16.h"
#include "kernels/quant.h"
#include "kernels/x16.h"

void okv_repack_q8_0x16(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nw = k / OKV_X16_VALUES;
    const int nt = okv_q8_0x16_tail_blocks(k);
    const size_t row = (size_t)nw * sizeof(block_q8_0x16) + (size_t)nt * sizeof(block_q8_0);
    const block_q8_0 *in = src;
    int8_t q[OKV_X16_VALUES];
    block_q8_0x16 g;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *o = (uint8_t *)dst + (size_t)r * row;
        for (int64_t gi = 0; gi < okv_x16_groups(k); gi++) {
            /* the group, its lanes past the row's blocks zero */
            memset(q, 0, sizeof q);
            memset(g.d, 0, sizeof g.d);
            for (int i = 0; i < OKV_X16_BLOCKS && gi * OKV_X16_BLOCKS + i < k / OKV_QK; i++, in++) {
                g.d[i] = in->d;
                memcpy(q + OKV_QK * i, in->qs, OKV_QK);
            }
            okv_x16_permute_act(q, g.qs);
            if (gi < nw) {
                memcpy(o + (size_t)gi * sizeof g, &g, sizeof g);
                continue;
            }
            /* the compact last group: lanes 0..nt-1 only */
            uint8_t *t = o + (size_t)nw * sizeof g;
            memcpy(t, g.d, (size_t)nt * sizeof(okv_f16));
            for (int v = 0; v < 8; v++) memcpy(t + nt * sizeof(okv_f16) + 4 * (size_t)nt * v, g.qs[v], 4 * (size_t)nt);
        }
    }
}

void okv_dequantize_row_q8_0x16(const void *src, float *dst, int64_t k) {
    block_q8_0x16 tmp;
    memset(&tmp, 0, sizeof tmp);
    for (int64_t gi = 0; gi < okv_x16_groups(k); gi++) {
        const block_q8_0x16 *g = okv_q8_0x16_group(src, gi, k / OKV_X16_VALUES, okv_q8_0x16_tail_blocks(k), &tmp);
        for (int i = 0; i < OKV_X16_BLOCKS && (gi * OKV_X16_BLOCKS + i) * OKV_QK < k; i++) {
            const float d = okv_f16_to_f32(g->d[i]);
            float *y = dst + (gi * OKV_X16_BLOCKS + i) * OKV_QK;
            for (int h = 0; h < 2; h++)
                for (int u = 0; u < 4; u++)
                    for (int m = 0; m < 4; m++) y[16 * h + 4 * u + m] = (float)g->qs[2 * u + h][4 * i + m] * d;
        }
    }
}

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q8_0x16, block_act_q8_0x16, okv_x16_groups(c->k))

/* The reference every ISA matches: per lane, fma(dot, d_w d_x, acc) over the
 * row's groups (the compact last one as its whole group), then x16's lane
 * sum. */
OKV_X16_SCALAR_TILE_COMPACT(okv_mm_tile_q8_0x16_scalar, block_q8_0x16, block_act_q8_0x16, okv_q8_0x16_tail_blocks, okv_q8_0x16_group, {
    for (int i = 0; i < 16; i++) {
        int32_t p = 0;
        for (int v = 0; v < 8; v++)
            for (int m = 0; m < 4; m++) p += w->qs[v][4 * i + m] * x->qs[v][4 * i + m];
        acc[i] = fmaf((float)p, okv_f16_to_f32(w->d[i]) * x->d[i], acc[i]);
    }
})

#if defined(OKV_X86) /* the x86 bodies; aarch64's are in q8_0x16_neon.c */
#include <immintrin.h>

/* AVX2: |w| times x with w's sign, int16 pairs of at most 2 * 128 * 127,
 * each vector's widened before the next (two would overflow): the exact
 * lane dots.  One group into acc[j] for NC columns, its eight vectors of
 * values at qs + v * qstride and its scales at d; with mask (the compact
 * last group), each vector's half loaded under mask[half] (lanes < nt, the
 * rest zero, as the whole group it stands for) and the scales' lanes past
 * nt zeroed after a whole 16-byte load: a copy into a zeroed group
 * cost more (callgrind, rows of 2880, one column: 1064 instructions a row
 * against 824; the padded group's were 736). */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void group1_avx2(const int8_t *qs, int64_t qstride,
                                                                             const __m256i *mask, const okv_f16 *d,
                                                                             const block_act_q8_0x16 *const *xs,
                                                                             int64_t g, const int NC,
                                                                             __m256 (*acc)[2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    UNROLL for (int half = 0; half < 2; half++) {
        __m256i p[OKV_X16_MAX_COLS];
        UNROLL for (int j = 0; j < NC; j++) p[j] = _mm256_setzero_si256();
        UNROLL for (int v = 0; v < 8; v++) {
            const int8_t *q = qs + v * qstride + 32 * half;
            const __m256i wv = mask ? _mm256_maskload_epi32((const int *)q, mask[half])
                                    : _mm256_loadu_si256((const __m256i *)q);
            const __m256i wa = _mm256_abs_epi8(wv);
            UNROLL for (int j = 0; j < NC; j++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xs[j][g].qs[v] + 32 * half));
                p[j] = _mm256_add_epi32(p[j], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(xv, wv)), ones));
            }
        }
        __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 8 * half)));
        if (mask) sw = _mm256_and_ps(sw, _mm256_castsi256_ps(mask[half]));
        UNROLL for (int j = 0; j < NC; j++)
            acc[j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]), _mm256_mul_ps(sw, _mm256_loadu_ps(xs[j][g].d + 8 * half)),
                                           acc[j][half]);
    }
}

/* Rows: the whole groups, then the compact one if any, its scales read in
 * place as q4_0x16.c's: a whole 16-byte load per half (the group's 34 nt
 * bytes hold the 32 from its start), the lanes past its blocks zeroed
 * (a copy into a zeroed array cost a library call a row). */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void tile1_avx2(const okv_mm_ctx *c, int64_t r0,
                                                                            const int NR, int64_t c0, const int NC) {
    TILE_SETUP();
    const int64_t nw = c->k / OKV_X16_VALUES;
    const int nt = okv_q8_0x16_tail_blocks(c->k);
    __m256i mask[2];
    okv_x16_tail_masks_avx2(nt, mask);
    for (int r = 0; r < NR; r++) {
        __m256 acc[OKV_X16_MAX_COLS][2];
        UNROLL for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
        for (int64_t g = 0; g < nw; g++) {
            const block_q8_0x16 *w = wr[r] + g;
            for (int l = 0; l < 576; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1);
            group1_avx2(w->qs[0], 64, NULL, w->d, xs, g, NC, acc);
        }
        if (ng > nw) { /* nt blocks, in Q8_0's bytes */
            const uint8_t *t = (const uint8_t *)(wr[r] + nw);
            okv_x16_prefetch_tail((const char *)t + OKV_X16_AHEAD_AVX2, nt * (int)sizeof(block_q8_0));
            group1_avx2((const int8_t *)t + nt * sizeof(okv_f16), 4 * nt, mask, (const okv_f16 *)t, xs, nw, NC, acc);
        }
        UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(acc[j][0], acc[j][1]);
    }
}

/* 3 and 4 columns (batched decode): lanes 0-7 of a row over all its groups,
 * then lanes 8-15 (the row's lines again, from L1), so only NC float
 * accumulators live across the groups, and an empty asm keeps each
 * column's int32 sum in order (GCC otherwise reassociated the adds to
 * after all the products): tile1_avx2's 2 NC accumulators spilled 32 ymm
 * moves per half group at NC = 4 (callgrind; at NC = 2 they fit, and the
 * second loop costs more than it saves).  Each lane's integers and FMAs
 * are tile1_avx2's, so the bits are the same.  With AVX-VNNI, vpdpbusd
 * adds u = w + 128 (unsigned) times x to -128 * the activation sum (16 *
 * c8, as AVX-512's VNNI body does): the same exact lane dot in one
 * instruction per 32 products where AVX2 takes four, the even and the odd
 * vectors' in two chains added at the end (x16.h's okv_x16_dot8_avxvnni
 * says why).  One half-group into
 * acc[j], its values at qs + v * qstride under mask as group1_avx2's (the
 * compact last group copied into a zeroed one took 9 memcpy calls a row
 * and half: 4 columns of rows of 2880 ran slower than of 3072). */
#define HALFN_AVX2(name, TARGET, VNNI)                                                                     \
    static inline __attribute__((always_inline)) TARGET void name(const int8_t *qs, int64_t qstride,       \
                                                                  const __m256i *mask, const okv_f16 *d,   \
                                                                  const block_act_q8_0x16 *const *xs, int64_t g, \
                                                                  const int half, const int NC, __m256 *acc) { \
        const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8((char)0x80);                   \
        __m256i p[OKV_X16_MAX_COLS], odd[OKV_X16_MAX_COLS]; /* VNNI: the even and the odd v */            \
        if (VNNI)                                                                                         \
            UNROLL for (int j = 0; j < NC; j++) {                                                         \
                p[j] = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(xs[j][g].c8 + 8 * half)), 4); \
                odd[j] = _mm256_setzero_si256();                                                          \
            }                                                                                             \
        UNROLL for (int v = 0; v < 8; v++) {                                                              \
            const int8_t *q = qs + v * qstride + 32 * half;                                               \
            const __m256i wv = mask ? _mm256_maskload_epi32((const int *)q, mask[half])                   \
                                    : _mm256_loadu_si256((const __m256i *)q);                             \
            const __m256i wa = VNNI ? _mm256_xor_si256(wv, bias) : _mm256_abs_epi8(wv);                   \
            UNROLL for (int j = 0; j < NC; j++) {                                                         \
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xs[j][g].qs[v] + 32 * half));     \
                if (VNNI) {                                                                               \
                    if (v % 2) odd[j] = _mm256_dpbusd_avx_epi32(odd[j], wa, xv);                          \
                    else p[j] = _mm256_dpbusd_avx_epi32(p[j], wa, xv);                                    \
                } else {                                                                                  \
                    const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(xv, wv)), ones); \
                    p[j] = v == 0 ? t : _mm256_add_epi32(p[j], t);                                        \
                    __asm__("" : "+x"(p[j]));                                                             \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 8 * half)));                    \
        if (mask) sw = _mm256_and_ps(sw, _mm256_castsi256_ps(mask[half]));                                \
        UNROLL for (int j = 0; j < NC; j++) {                                                             \
            if (VNNI) p[j] = _mm256_add_epi32(p[j], odd[j]);                                              \
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]), _mm256_mul_ps(sw, _mm256_loadu_ps(xs[j][g].d + 8 * half)), \
                                     acc[j]);                                                             \
        }                                                                                                 \
    }

/* Rows: each half over the whole groups, then the compact one if any (its
 * scales read in place, as tile1_avx2's). */
#define TILEN_AVX2(name, halfn, TARGET)                                                                    \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                  int64_t c0, const int NC) {              \
        TILE_SETUP();                                                                                     \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                         \
        const int nt = okv_q8_0x16_tail_blocks(c->k);                                                     \
        __m256i mask[2];                                                                                  \
        okv_x16_tail_masks_avx2(nt, mask);                                                                \
        for (int r = 0; r < NR; r++) {                                                                    \
            const uint8_t *t = (const uint8_t *)(wr[r] + nw); /* the compact group, if any */             \
            __m256 lanes[2][OKV_X16_MAX_COLS];                                                            \
            UNROLL for (int half = 0; half < 2; half++) {                                                 \
                __m256 acc[OKV_X16_MAX_COLS];                                                             \
                UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();                         \
                for (int64_t g = 0; g < nw; g++) {                                                        \
                    const block_q8_0x16 *w = wr[r] + g;                                                   \
                    if (half == 0)                                                                        \
                        for (int l = 0; l < 576; l += 64)                                                 \
                            _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1);               \
                    halfn(w->qs[0], 64, NULL, w->d, xs, g, half, NC, acc);                                \
                }                                                                                         \
                if (ng > nw) {                                                                            \
                    if (half == 0)                                                                        \
                        okv_x16_prefetch_tail((const char *)t + OKV_X16_AHEAD_AVX2, nt * (int)sizeof(block_q8_0)); \
                    halfn((const int8_t *)t + nt * sizeof(okv_f16), 4 * nt, mask, (const okv_f16 *)t, xs, nw, half, NC, acc); \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) lanes[half][j] = acc[j];                              \
            }                                                                                             \
            UNROLL for (int j = 0; j < NC; j++)                                                           \
                c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(lanes[0][j], lanes[1][j]);          \
        }                                                                                                 \
    }

HALFN_AVX2(halfn_avx2, OKV_TARGET_AVX2, 0)
HALFN_AVX2(halfn_avxvnni, OKV_TARGET_AVXVNNI, 1)
TILEN_AVX2(tilen_avx2, halfn_avx2, OKV_TARGET_AVX2)
TILEN_AVX2(tilen_avxvnni, halfn_avxvnni, OKV_TARGET_AVXVNNI)

static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void tile_avx2(const okv_mm_ctx *c, int64_t r0,
                                                                            const int NR, int64_t c0, const int NC) {
    if (NC <= 2) tile1_avx2(c, r0, NR, c0, NC);
    else tilen_avx2(c, r0, NR, c0, NC);
}

/* one or two columns read memory, not multiply: AVX2's tile1 (tilen's
 * second pass over each row made 2 sequences of a Q8_0 model's decode 25 %
 * slower a step on a Zen 5) */
static inline __attribute__((always_inline)) OKV_TARGET_AVXVNNI void tile_avxvnni(const okv_mm_ctx *c, int64_t r0,
                                                                                  const int NR, int64_t c0, const int NC) {
    if (NC <= 2) tile1_avx2(c, r0, NR, c0, NC);
    else tilen_avxvnni(c, r0, NR, c0, NC);
}

OKV_X16_TILE_ENTRY(OKV_TARGET_AVX2, tile_avx2, okv_mm_tile_q8_0x16_avx2)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVXVNNI, tile_avxvnni, okv_mm_tile_q8_0x16_avxvnni)

/* The AVX2 strips, for rows too long for x16.h's sweeps (and every row
 * with AVX-VNNI; x16.h says why weight-stationary): a strip of
 * OKV_X16_STRIP rows against OKV_X16_CB columns, one group at a time.
 *
 * Without VNNI, w * x the way tile_avx2 does it (vpsignb, vpmaddubsw,
 * vpmaddwd per 32 products: the pairs |w| * |x| reach 2 * 128 * 127, so no
 * two vpmaddubsw results add in int16) takes three instructions that on a
 * Zen 4 all issue to the same two pipes (vpsignb and vpabsb included: 1.5
 * cycles per 32 products, measured).  Here each weight is split instead:
 * u = w + 128 = 16h + l, with nibbles h and l in 0..15, so
 *   w * x = 16 * (h * x) + l * x - 128 * x,
 * and h * x and l * x are Q4_0's products: vpmaddubsw pairs of at most
 * 2 * 15 * 128, eight of which add exactly in int16, so 32 products cost
 * two vpmaddubsw and two vpaddw (one cycle of the two multiply pipes), and
 * each block sum one vpmaddwd for each nibble, which also multiplies the
 * high one by 16; -128 * the block's activation sum is 16 * c8
 * (q4_0x16.h).  l and h are made once per row and group for OKV_X16_CB columns
 * (lh); the columns then go X16_JS at a time, each vector of l and h loaded
 * once for all X16_JS.  That is 4.75 vector operations per 32 products
 * against 4.4, but 2.25 of them multiplies against 3: on the Zen 4 (AVX2
 * code), a hot 64x2048 by 64 block ~4-5 % more products per CPU-second
 * (interleaved runs in one process), the rest of the time being the
 * per-block tail (vpmaddwd, the scale product, the FMA).
 * The lane dots are the exact integers tile_avx2 computes, followed by the
 * same FMA per group: the same bits. */
enum { X16_JS = 4 };

/* JS columns, x, x + xstride, .., of one row's half-group, whose nibbles
 * are lh[v][0] (l) and lh[v][1] (h) and scales wd. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void cols_avx2(const __m256i (*lh)[2], const okv_f16 *wd,
                                                                            const int half,
                                                                            const block_act_q8_0x16 *x,
                                                                            size_t xstride, __m256 (*acc)[2],
                                                                            const int JS) {
    __m256i sl[X16_JS], sh[X16_JS];
    UNROLL for (int v = 0; v < 8; v++) {
        __m256i l = _mm256_load_si256(&lh[v][0]), h = _mm256_load_si256(&lh[v][1]);
        /* kept in registers: else GCC reloads them for each product */
        __asm__("" : "+x"(l), "+x"(h));
        UNROLL for (int j = 0; j < JS; j++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(x[j * xstride].qs[v] + 32 * half));
            const __m256i pl = _mm256_maddubs_epi16(l, xv), ph = _mm256_maddubs_epi16(h, xv);
            sl[j] = v ? _mm256_add_epi16(sl[j], pl) : pl;
            sh[j] = v ? _mm256_add_epi16(sh[j], ph) : ph;
            /* summed in order: GCC reassociates the sums into trees that
             * keep every product live, and spills them */
            __asm__("" : "+x"(sl[j]), "+x"(sh[j]));
        }
    }
    const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wd + 8 * half)));
    UNROLL for (int j = 0; j < JS; j++) {
        const block_act_q8_0x16 *xj = x + j * xstride;
        const __m256i p = _mm256_add_epi32(
            _mm256_add_epi32(_mm256_madd_epi16(sh[j], _mm256_set1_epi16(16)), _mm256_madd_epi16(sl[j], _mm256_set1_epi16(1))),
            _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(xj->c8 + 8 * half)), 4));
        acc[j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, _mm256_loadu_ps(xj->d + 8 * half)),
                                       acc[j][half]);
    }
}

/* With AVX-VNNI, u = w + 128 goes to vpdpbusd whole (HALFN_AVX2's VNNI
 * way): each half-group's 8 vectors of u are made once per row and OKV_X16_CB
 * columns and stay in registers while a plain loop over the columns takes
 * the activations from L1, one instruction per 32 products, as q4_0x16.c's
 * VNNI block pass. */
#define BLOCK_AVX2(name, TARGET, VNNI)                                                                     \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r_begin,    \
                                                                  int64_t r_end, int64_t c_begin, int64_t c_end) { \
        const int64_t ng = okv_x16_groups(c->k), nw = c->k / OKV_X16_VALUES;                              \
        const int nt = okv_q8_0x16_tail_blocks(c->k);                                                     \
        const __m256i bias = _mm256_set1_epi8((char)0x80), low4 = _mm256_set1_epi8(0x0F);                 \
        block_q8_0x16 tmp;                                                                                \
        if (nt) memset(&tmp, 0, sizeof tmp);                                                              \
        __m256i lh[2][8][2]; /* [half][v]: l, h */                                                        \
        OKV_X16_STRIPS_AVX2(block_act_q8_0x16, {                                                          \
            const block_q8_0x16 *row = (const block_q8_0x16 *)(c->w + (r0 + r) * c->wrow);                \
            const block_q8_0x16 *w = okv_q8_0x16_group(row, g, nw, nt, &tmp);                             \
            okv_x16_prefetch_next_strip(row + g, sizeof *w, c->wrow);                                     \
            const block_act_q8_0x16 *x = xs + g;                                                          \
            if (VNNI) {                                                                                   \
                UNROLL for (int half = 0; half < 2; half++) {                                             \
                    __m256i wu[8];                                                                        \
                    UNROLL for (int v = 0; v < 8; v++)                                                    \
                        wu[v] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w->qs[v] + 32 * half)), bias); \
                    const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w->d + 8 * half))); \
                    const block_act_q8_0x16 *xj = x;                                                      \
                    for (int j = 0; j < nc; j++, xj += xstride) {                                         \
                        const __m256i p = okv_x16_dot8_avxvnni(                                           \
                            _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(xj->c8 + 8 * half)), 4), wu, xj->qs, half); \
                        acc_buf[r][j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),                      \
                                                              _mm256_mul_ps(sw, _mm256_loadu_ps(xj->d + 8 * half)), \
                                                              acc_buf[r][j][half]);                       \
                    }                                                                                     \
                }                                                                                         \
                continue;                                                                                 \
            }                                                                                             \
            UNROLL for (int half = 0; half < 2; half++)                                                   \
                UNROLL for (int v = 0; v < 8; v++) {                                                      \
                    const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w->qs[v] + 32 * half)), bias); \
                    lh[half][v][0] = _mm256_and_si256(u, low4);                                           \
                    lh[half][v][1] = _mm256_and_si256(_mm256_srli_epi16(u, 4), low4);                     \
                }                                                                                         \
            UNROLL for (int half = 0; half < 2; half++) {                                                 \
                int j = 0;                                                                                \
                for (; j + X16_JS <= nc; j += X16_JS)                                                     \
                    cols_avx2(lh[half], w->d, half, x + j * xstride, xstride, acc_buf[r] + j, X16_JS);    \
                switch (nc - j) { /* X16_JS - 1 at most */                                                \
                case 3: cols_avx2(lh[half], w->d, half, x + j * xstride, xstride, acc_buf[r] + j, 3); break; \
                case 2: cols_avx2(lh[half], w->d, half, x + j * xstride, xstride, acc_buf[r] + j, 2); break; \
                case 1: cols_avx2(lh[half], w->d, half, x + j * xstride, xstride, acc_buf[r] + j, 1); break; \
                }                                                                                         \
            }                                                                                             \
        });                                                                                               \
    }

BLOCK_AVX2(block_avx2, OKV_TARGET_AVX2, 0)
BLOCK_AVX2(block_avxvnni, OKV_TARGET_AVXVNNI, 1)

OKV_TARGET_AVX2 void okv_mm_block_q8_0x16_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (okv_x16_sweeps_avx2(c->xa_col)) OKV_X16_SWEEPS(tile_avx2, OKV_X16_SWEEP_BYTES_AVX2);
    else block_avx2(c, r0, r1, c0, c1);
}

OKV_TARGET_AVXVNNI void okv_mm_block_q8_0x16_avxvnni(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    block_avxvnni(c, r0, r1, c0, c1);
}

/* AVX-512: VNNI takes w + 128 (unsigned) and starts each lane at
 * -128 * its activation sum (16 * c8); BW moves w's sign onto x.  One
 * group of each of RJ rows (1 or 2; BW: 1) into acc[i][j] for NC columns,
 * row i's eight 64-byte vectors of values at qs[i] + v * qstride and its
 * scales at d[i], loaded under masks qm and dm (a whole group: all ones,
 * which the compiler drops; the compact last group: its lanes, the rest
 * zero, as the whole group it stands for).  Two rows share each activation
 * vector's load (x16.h's OKV_X16_DOTS_512 says why). */
#define GROUP_AVX512(name, TARGET, VNNI)                                                                   \
    static inline __attribute__((always_inline)) TARGET void name(const int8_t *const *qs, const int RJ,    \
                                                                  int64_t qstride, __mmask64 qm,           \
                                                                  const okv_f16 *const *d, __mmask16 dm,   \
                                                                  const block_act_q8_0x16 *const *xs, int64_t g, \
                                                                  const int NC, __m512 acc[][OKV_X16_MAX_COLS]) { \
        const __m512i bias = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi16(1);                   \
        __m512i p[2][OKV_X16_MAX_COLS];                                                                   \
        UNROLL for (int j = 0; j < NC; j++) {                                                             \
            p[0][j] = VNNI ? _mm512_slli_epi32(_mm512_loadu_si512(xs[j][g].c8), 4) : _mm512_setzero_si512(); \
            if (RJ > 1) p[1][j] = p[0][j];                                                                \
        }                                                                                                 \
        UNROLL for (int v = 0; v < 8; v++) {                                                              \
            if (VNNI) {                                                                                   \
                __m512i wu[2];                                                                            \
                UNROLL for (int i = 0; i < RJ; i++)                                                       \
                    wu[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(qm, qs[i] + v * qstride), bias);     \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    const __m512i xv = okv_x16_load_act512(xs[j][g].qs[v], RJ);                           \
                    UNROLL for (int i = 0; i < RJ; i++) p[i][j] = _mm512_dpbusd_epi32(p[i][j], wu[i], xv); \
                }                                                                                         \
            } else {                                                                                      \
                const __m512i wv = _mm512_maskz_loadu_epi8(qm, qs[0] + v * qstride);                      \
                const __m512i wa = _mm512_abs_epi8(wv);                                                   \
                const __mmask64 neg = _mm512_movepi8_mask(wv);                                            \
                UNROLL for (int j = 0; j < NC; j++) {                                                     \
                    const __m512i xv = _mm512_loadu_si512(xs[j][g].qs[v]);                                \
                    const __m512i xsgn = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);       \
                    p[0][j] = _mm512_add_epi32(p[0][j], _mm512_madd_epi16(_mm512_maddubs_epi16(wa, xsgn), ones)); \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        UNROLL for (int i = 0; i < RJ; i++) {                                                             \
            const __m512 sw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(dm, d[i]));                        \
            UNROLL for (int j = 0; j < NC; j++)                                                           \
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i][j]), _mm512_mul_ps(sw, _mm512_loadu_ps(xs[j][g].d)), acc[i][j]); \
        }                                                                                                 \
    }

/* RJ rows at a time (NR a multiple of RJ): the whole groups, then the
 * compact one if any; NAME_part runs a part of the whole groups
 * (okv_x16_part; NULL: all, then the compact one and the outputs). */
#define TILE_AVX512(name, group, TARGET, RJ)                                                               \
    static inline __attribute__((always_inline)) TARGET void name##_part(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                         int64_t c0, const int NC,        \
                                                                         const okv_x16_part *part) {      \
        TILE_SETUP();                                                                                     \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                         \
        const int nt = okv_q8_0x16_tail_blocks(c->k);                                                     \
        const int64_t ahead = okv_x16_part_ahead(part);                                                   \
        for (int r = 0; r < NR; r += (RJ)) {                                                              \
            __m512 acc[RJ][OKV_X16_MAX_COLS];                                                             \
            const int8_t *q[RJ];                                                                          \
            const okv_f16 *d[RJ];                                                                         \
            UNROLL for (int i = 0; i < (RJ); i++)                                                         \
                UNROLL for (int j = 0; j < NC; j++) acc[i][j] = okv_x16_part_acc512(part, r0 + r + i, j); \
            for (int64_t g = okv_x16_part_g0(part), ge = okv_x16_part_g1(part, nw); g < ge; g++) {        \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    const block_q8_0x16 *w = wr[r + i] + g;                                               \
                    for (int l = 0; l < 576; l += 64) _mm_prefetch((const char *)w + ahead + l, _MM_HINT_T1); \
                    okv_x16_prefetch_l1(c->n, NC, w, sizeof *w);                                        \
                    q[i] = w->qs[0];                                                                      \
                    d[i] = w->d;                                                                          \
                }                                                                                         \
                group(q, RJ, 64, ~(__mmask64)0, d, (__mmask16)0xFFFF, xs, g, NC, acc);                    \
            }                                                                                             \
            if (!okv_x16_part_last(part)) {                                                               \
                UNROLL for (int i = 0; i < (RJ); i++)                                                     \
                    UNROLL for (int j = 0; j < NC; j++) okv_x16_part_park512(part, r0 + r + i, j, acc[i][j]); \
                continue;                                                                                 \
            }                                                                                             \
            if (ng > nw) { /* nt blocks, in Q8_0's bytes */                                               \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    const uint8_t *t = (const uint8_t *)(wr[r + i] + nw);                                 \
                    okv_x16_prefetch_tail((const char *)t + ahead, nt * (int)sizeof(block_q8_0));  \
                    q[i] = (const int8_t *)t + 2 * nt;                                                    \
                    d[i] = (const okv_f16 *)t;                                                            \
                }                                                                                         \
                group(q, RJ, 4 * nt, ((__mmask64)1 << (4 * nt)) - 1, d, (__mmask16)((1u << nt) - 1), xs, nw, NC, acc); \
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
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_tile_q8_0x16_avx512)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_block_q8_0x16_avx512)

OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512VNNI, tile_avx512vnni, okv_mm_tile_q8_0x16_avx512vnni)

/* VNNI's rows in pairs (x16.h's OKV_X16_SWEEPS_PARTS) pay for Q8_0 only
 * where the products are bound by the loads, not by the weights' stream:
 * its rows are twice Q4_0's bytes.  bench/matmul, one thread of a Zen 4,
 * 2048 rows, GFLOP/s one row -> pairs, three alternations: by 5 columns
 * (verifying 4 drafted tokens) k = 2048 226 -> 257, k = 2880 212 -> 227;
 * by 64 (prefill) k = 2048 253 -> 298, 2880 224 -> 272, 4096 248 -> 311;
 * by 16 k = 2048 255 -> 267, 4096 230 -> 263; but by 8 k = 2048 250 -> 226
 * (sweeps of 4 + 4 where one row takes all 8), by 4 (the tiles) 191 ->
 * 173, by 3 140 -> 118.
 *
 * A row streams about as many bytes as a column's activations (1.06
 * against 1.25 a value), so the rows a sweep streams at once take L1 from
 * its activations as much as a column does: by 5 columns at k = 5632
 * pairs without parts ran at 103 against 168 (28 KiB of activations beside
 * 12 KiB of two rows).  By 16 columns and more, and by fewer than 8, the
 * parts count the streamed rows' bytes with the activations (pairs where
 * fewer than 8 fit one part).  Old -> new, three alternations: by 64
 * k = 5632 217-220 -> 274-283 (pairs in 2 parts, not one row in 1),
 * 8192 217-221 -> 264 (pairs in 2), 14336 216 -> 274 (pairs in 4, not one
 * row in 3); by 16 k = 5632 125 -> 229; by 5 k = 8192 101-140 -> 137-156,
 * 14336 85-106 -> 144-175 (one row in 4 parts, not 3); by 8 and 12 the
 * rows ran level or behind counted, so they are not. */
OKV_TARGET_AVX512VNNI void okv_mm_block_q8_0x16_avx512vnni(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0,
                                                          int64_t c1) {
    const int64_t n = c1 - c0, row_bytes = n < 8 || n >= 16 ? (int64_t)c->wrow : 0;
    if (n >= 16 || (n < 8 && 5 * (int64_t)c->xa_col + 2 * (int64_t)c->wrow <= OKV_X16_SWEEP_BYTES))
        OKV_X16_SWEEPS_PARTS_ROWS(tile_avx512vnni, tile2_avx512vnni, OKV_X16_SWEEP_BYTES, 1, row_bytes);
    else
        OKV_X16_SWEEPS_PARTS_ROWS(tile_avx512vnni, tile_avx512vnni, OKV_X16_SWEEP_BYTES, 0, row_bytes);
}

#endif /* OKV_X86 */
