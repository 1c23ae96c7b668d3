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
    const int64_t nw = k / OKV_X16_VALUES;
    const int nt = okv_q4_0x16_tail_blocks(k);
    const size_t row = (size_t)nw * sizeof(block_q4_0x16) + (size_t)nt * sizeof(block_q4_0);
    const block_q4_0 *in = src;
    block_q4_0x16 g;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *o = (uint8_t *)dst + (size_t)r * row;
        for (int64_t gi = 0; gi < okv_x16_groups(k); gi++) {
            memset(&g, 0, sizeof g);
            for (int i = 0; i < OKV_X16_BLOCKS && gi * OKV_X16_BLOCKS + i < k / OKV_QK; i++, in++) {
                g.d[i] = in->d;
                for (int u = 0; u < 4; u++) memcpy(&g.qs[u][4 * i], &in->qs[4 * u], 4);
            }
            if (gi < nw) {
                memcpy(o + (size_t)gi * sizeof g, &g, sizeof g);
                continue;
            }
            /* the compact last group: lanes 0..nt-1 of each part */
            uint8_t *t = o + (size_t)nw * sizeof g;
            memcpy(t, g.d, (size_t)nt * sizeof(okv_f16));
            for (int u = 0; u < 4; u++) memcpy(t + 2 * (size_t)nt + 4 * (size_t)nt * u, g.qs[u], 4 * (size_t)nt);
        }
    }
}

void okv_dequantize_row_q4_0x16(const void *src, float *dst, int64_t k) {
    block_q4_0x16 tmp;
    memset(&tmp, 0, sizeof tmp);
    for (int64_t gi = 0; gi < okv_x16_groups(k); gi++) {
        const block_q4_0x16 *g = okv_q4_0x16_group(src, gi, k / OKV_X16_VALUES, okv_q4_0x16_tail_blocks(k), &tmp);
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

/* The reference every ISA matches: per lane, fma(dot, d_w d_x, acc) over the
 * row's groups (the compact last one as its whole group), the dot from c8
 * (-8 * the activations' sum: Q4_0's offset) up, then x16's lane sum. */
OKV_X16_SCALAR_TILE_COMPACT(okv_mm_tile_q4_0x16_scalar, block_q4_0x16, block_act_q8_0x16, okv_q4_0x16_tail_blocks, okv_q4_0x16_group, {
    for (int i = 0; i < 16; i++) {
        const int32_t p = x->c8[i] + okv_x16_dot_scalar(w->qs, NULL, x->qs, i);
        acc[i] = fmaf((float)p, okv_f16_to_f32(w->d[i]) * x->d[i], acc[i]);
    }
})

#if defined(OKV_X86) /* the x86 bodies; aarch64's are in q4_0x16_neon.c */
#include <immintrin.h>

#define AVX2 static inline __attribute__((always_inline)) OKV_TARGET_AVX2

/* Where the nibbles of qs[u] of a group of n blocks at t start (q4_0x16.h:
 * n scales, then 4 n bytes of each qs[u]; n = 16: block_q4_0x16). */
#define QS(t, n, u) ((t) + 2 * (size_t)(n) + 4 * (size_t)(n) * (u))

/* Lanes 8-15 of a compact group of at most 8 blocks are all padding, and
 * their FMAs would add +0 to an accumulator that is never -0 (it starts at
 * +0, and a sum of multiples of 2^-149 that cancels is +0): the AVX2
 * kernels leave that half out, with the same bits. */
static inline int tail_half(int nt, int half) { return nt > 8 * half; }

/* Half a group (lanes 8 half .. 8 half + 7) of one row by NC columns (x[j]:
 * their activation groups) into acc.  The nibbles read in place, a compact
 * last group's (TAIL, n blocks) under its lanes' mask mh; its scales with
 * a whole 16-byte load (its 18 n bytes hold the 16 from 16 half on whenever
 * tail_half) whose lanes past the blocks are then zeroed.  VNNI: vpdpbusd
 * adds the products to c8 in 32 bits, the low and the high nibbles' in two
 * chains added at the end (one chain of 8 waited on vpdpbusd's latency: 2-4
 * columns ~11 % faster hot).  Else int16 sums of the 16 products per lane
 * (at most 16 * 15 * 127: exact), widened once, c8 added after: the same
 * integers, five instructions per 64 products where VNNI takes two. */
#define HALF_AVX2(name, TARGET, VNNI)                                                                      \
    static inline __attribute__((always_inline)) TARGET void name(const uint8_t *t, const int n, const int TAIL, \
                                                                  __m256i mh, const block_act_q8_0x16 *const *x, \
                                                                  const int half, const int NC, __m256 acc[]) { \
        const __m256i low4 = _mm256_set1_epi8(0x0F);                                                      \
        __m256i s[OKV_X16_MAX_COLS], q[OKV_X16_MAX_COLS];                                                 \
        UNROLL for (int j = 0; j < NC; j++) {                                                             \
            s[j] = (VNNI) ? _mm256_loadu_si256((const __m256i *)(x[j]->c8 + 8 * half)) : _mm256_setzero_si256(); \
            q[j] = _mm256_setzero_si256();                                                                \
        }                                                                                                 \
        UNROLL for (int u = 0; u < 4; u++) {                                                              \
            const uint8_t *qu = QS(t, n, u) + 32 * half;                                                  \
            const __m256i v = TAIL ? _mm256_maskload_epi32((const int *)qu, mh) : _mm256_loadu_si256((const __m256i *)qu); \
            const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4); \
            UNROLL for (int j = 0; j < NC; j++) {                                                         \
                const __m256i xl = _mm256_loadu_si256((const __m256i *)(x[j]->qs[2 * u] + 32 * half));    \
                const __m256i xh = _mm256_loadu_si256((const __m256i *)(x[j]->qs[2 * u + 1] + 32 * half)); \
                if (VNNI) {                                                                               \
                    s[j] = _mm256_dpbusd_avx_epi32(s[j], lo, xl);                                         \
                    q[j] = _mm256_dpbusd_avx_epi32(q[j], hi, xh);                                         \
                } else {                                                                                  \
                    s[j] = _mm256_add_epi16(s[j], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh))); \
                    /* summed here: GCC otherwise reassociates the adds to \
                     * after all NC columns' products, whose results spill */ \
                    if (NC > 1) __asm__("" : "+x"(s[j]));                                                 \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + 16 * half)));                  \
        if (TAIL) sw = _mm256_and_ps(sw, _mm256_castsi256_ps(mh));                                        \
        UNROLL for (int j = 0; j < NC; j++) {                                                             \
            const __m256i p = (VNNI) ? _mm256_add_epi32(s[j], q[j])                                       \
                                     : _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(x[j]->c8 + 8 * half)), \
                                                        _mm256_madd_epi16(s[j], _mm256_set1_epi16(1)));   \
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, _mm256_loadu_ps(x[j]->d + 8 * half)), acc[j]); \
        }                                                                                                 \
    }

HALF_AVX2(half_avx2, OKV_TARGET_AVX2, 0)
HALF_AVX2(half_avxvnni, OKV_TARGET_AVXVNNI, 1)

/* One column (decode): both halves of a group per step, one pass over the
 * row's bytes; two accumulators and the int16 sums fit the registers. */
AVX2 void tile1_avx2(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    TILE_SETUP();
    (void)ng; /* the whole groups, then the compact one */
    const int64_t nw = c->k / OKV_X16_VALUES;
    const int nt = okv_q4_0x16_tail_blocks(c->k);
    __m256i mask[2];
    okv_x16_tail_masks_avx2(nt, mask);
    const block_act_q8_0x16 *x[1];
    for (int r = 0; r < NR; r++) {
        /* lanes 0-7 (blocks 0-7 of each group) and 8-15 */
        __m256 acc[2][1] = {{_mm256_setzero_ps()}, {_mm256_setzero_ps()}};
        for (int64_t g = 0; g < nw; g++) {
            const block_q4_0x16 *w = wr[r] + g;
            for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1);
            x[0] = xs[0] + g;
            UNROLL for (int half = 0; half < 2; half++)
                half_avx2((const uint8_t *)w, OKV_X16_BLOCKS, 0, mask[half], x, half, 1, acc[half]);
        }
        if (nt)
            okv_x16_prefetch_tail((const char *)(wr[r] + nw) + OKV_X16_AHEAD_AVX2, 18 * nt);
        x[0] = xs[0] + nw;
        UNROLL for (int half = 0; half < 2; half++)
            if (tail_half(nt, half)) half_avx2((const uint8_t *)(wr[r] + nw), nt, 1, mask[half], x, half, 1, acc[half]);
        c->y[(c0 + 0) * c->rows + r0 + r] = okv_x16_sum16_avx2(acc[0][0], acc[1][0]);
    }
    (void)NC;
}

/* 2 to 8 columns (batched decode; 5 and 8 in x16.h's sweeps): a row's
 * lanes 0-7 (blocks 0-7 of each group) over all its groups, then lanes
 * 8-15 (the row's lines again, from L1).  Each lane's FMAs keep their
 * order over the groups, so the bits are tile1_avx2's, and only NC float
 * accumulators live across the groups: tile1_avx2's 2 NC beside the int16
 * sums spilled 25 ymm moves per half group at NC = 4 (callgrind). */
#define TILEN_AVX2(name, TARGET, HALF)                                                                     \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                  int64_t c0, const int NC) {              \
        TILE_SETUP();                                                                                     \
        (void)ng; /* the whole groups, then the compact one */                                            \
        const int64_t nw = c->k / OKV_X16_VALUES;                                                         \
        const int nt = okv_q4_0x16_tail_blocks(c->k);                                                     \
        __m256i mask[2];                                                                                  \
        okv_x16_tail_masks_avx2(nt, mask);                                                                \
        const block_act_q8_0x16 *x[OKV_X16_MAX_COLS];                                                     \
        for (int r = 0; r < NR; r++) {                                                                    \
            __m256 lanes[2][OKV_X16_MAX_COLS];                                                            \
            UNROLL for (int half = 0; half < 2; half++) {                                                 \
                __m256 acc[OKV_X16_MAX_COLS];                                                             \
                UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();                         \
                for (int64_t g = 0; g < nw; g++) {                                                        \
                    const block_q4_0x16 *w = wr[r] + g;                                                   \
                    if (half == 0)                                                                        \
                        for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD_AVX2 + l, _MM_HINT_T1); \
                    UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + g;                                 \
                    HALF((const uint8_t *)w, OKV_X16_BLOCKS, 0, mask[half], x, half, NC, acc);            \
                }                                                                                         \
                if (tail_half(nt, half)) {                                                                \
                    if (half == 0)                                                                        \
                        okv_x16_prefetch_tail((const char *)(wr[r] + nw) + OKV_X16_AHEAD_AVX2, 18 * nt);    \
                    UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + nw;                                \
                    HALF((const uint8_t *)(wr[r] + nw), nt, 1, mask[half], x, half, NC, acc);             \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) lanes[half][j] = acc[j];                              \
            }                                                                                             \
            UNROLL for (int j = 0; j < NC; j++)                                                           \
                c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(lanes[0][j], lanes[1][j]);          \
        }                                                                                                 \
    }

TILEN_AVX2(tilen_avx2, OKV_TARGET_AVX2, half_avx2)
TILEN_AVX2(tilen_avxvnni, OKV_TARGET_AVXVNNI, half_avxvnni)

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

/* One row's group of n blocks at t (TAIL: the compact one, under mask) for
 * the strips' nc columns (xs, xstride groups apart) into acc[j][half]: each
 * half unpacked once, then a plain loop over the columns.  Each lane sees
 * the tiles' operations in their order (the same exact integer dot, then
 * one FMA per group), so the bits are theirs. */
#define STRIP_GROUP_AVX2(name, TARGET, VNNI)                                                               \
    static inline __attribute__((always_inline)) TARGET void name(const uint8_t *t, const int n, const int TAIL, \
                                                                  const __m256i mask[2], const block_act_q8_0x16 *x, \
                                                                  size_t xstride, int nc, __m256 (*acc)[2]) { \
        const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);                         \
        UNROLL for (int half = 0; half < 2; half++) {                                                     \
            if (TAIL && !tail_half(n, half)) continue;                                                    \
            __m256i wq[8];                                                                                \
            UNROLL for (int u = 0; u < 4; u++) {                                                          \
                const uint8_t *qu = QS(t, n, u) + 32 * half;                                              \
                const __m256i v = TAIL ? _mm256_maskload_epi32((const int *)qu, mask[half])               \
                                       : _mm256_loadu_si256((const __m256i *)qu);                         \
                wq[2 * u] = _mm256_and_si256(v, low4);                                                    \
                wq[2 * u + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);                          \
            }                                                                                             \
            __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + 16 * half)));               \
            if (TAIL) sw = _mm256_and_ps(sw, _mm256_castsi256_ps(mask[half]));                            \
            const block_act_q8_0x16 *xj = x;                                                              \
            for (int j = 0; j < nc; j++, xj += xstride) {                                                 \
                const __m256i c8 = _mm256_loadu_si256((const __m256i *)(xj->c8 + 8 * half));              \
                __m256i p;                                                                                \
                if (VNNI) {                                                                               \
                    p = okv_x16_dot8_avxvnni(c8, wq, xj->qs, half);                                       \
                } else {                                                                                  \
                    /* the tiles' int16 sums: 16 products per lane, exact */                              \
                    __m256i s16 = _mm256_maddubs_epi16(wq[0], _mm256_loadu_si256((const __m256i *)(xj->qs[0] + 32 * half))); \
                    UNROLL for (int v = 1; v < 8; v++) {                                                  \
                        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(wq[v], _mm256_loadu_si256((const __m256i *)(xj->qs[v] + 32 * half)))); \
                        __asm__("" : "+x"(s16)); /* in order: see HALF_AVX2 */                            \
                    }                                                                                     \
                    p = _mm256_add_epi32(c8, _mm256_madd_epi16(s16, ones));                               \
                }                                                                                         \
                acc[j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, _mm256_loadu_ps(xj->d + 8 * half)), \
                                               acc[j][half]);                                             \
            }                                                                                             \
        }                                                                                                 \
    }

STRIP_GROUP_AVX2(strip_group_avx2, OKV_TARGET_AVX2, 0)
STRIP_GROUP_AVX2(strip_group_avxvnni, OKV_TARGET_AVXVNNI, 1)

/* The AVX2 strips, for rows too long for x16.h's sweeps (and every row
 * with AVX-VNNI; x16.h says why weight-stationary). */
#define BLOCK_AVX2(name, TARGET, GROUP)                                                                    \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, \
                                                                  int64_t c_begin, int64_t c_end) {        \
        const int64_t ng = okv_x16_groups(c->k), nw = c->k / OKV_X16_VALUES;                              \
        const int nt = okv_q4_0x16_tail_blocks(c->k);                                                     \
        __m256i mask[2];                                                                                  \
        okv_x16_tail_masks_avx2(nt, mask);                                                                \
        OKV_X16_STRIPS_AVX2(block_act_q8_0x16, {                                                          \
            const uint8_t *t = c->w + (r0 + r) * c->wrow + (size_t)g * sizeof(block_q4_0x16);            \
            okv_x16_prefetch_next_strip(t, sizeof(block_q4_0x16), c->wrow);                               \
            if (g < nw) GROUP(t, OKV_X16_BLOCKS, 0, mask, xs + g, xstride, nc, acc_buf[r]);               \
            else GROUP(t, nt, 1, mask, xs + g, xstride, nc, acc_buf[r]);                                  \
        });                                                                                               \
    }

BLOCK_AVX2(block_avx2, OKV_TARGET_AVX2, strip_group_avx2)
BLOCK_AVX2(block_avxvnni, OKV_TARGET_AVXVNNI, strip_group_avxvnni)

OKV_TARGET_AVX2 void okv_mm_block_q4_0x16_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (okv_x16_sweeps_avx2(c->xa_col)) OKV_X16_SWEEPS(tile_avx2, OKV_X16_SWEEP_BYTES_AVX2);
    else block_avx2(c, r0, r1, c0, c1);
}

OKV_TARGET_AVXVNNI void okv_mm_block_q4_0x16_avxvnni(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    block_avxvnni(c, r0, r1, c0, c1);
}

/* One group of n blocks at t[i] of each of RJ rows (1 or 2) by NC columns
 * into acc[i], with VNNI's dot product or BW's (the same lanes; one row):
 * the nibbles and scales read in place, a compact last group's (TAIL) under
 * its lanes' mask m.  BW's int16 sums take a lane's 16 products (exact),
 * widened once.  Two rows share each activation vector's load
 * (OKV_X16_DOTS_512 says why). */
#define GROUP_AVX512(name, TARGET, VNNI)                                                                   \
    static inline __attribute__((always_inline)) TARGET void name(const uint8_t *const *t, const int RJ, const int n, \
                                                                  const int TAIL, __mmask16 m,             \
                                                                  const block_act_q8_0x16 *const *x, const int NC, \
                                                                  __m512 acc[][OKV_X16_MAX_COLS]) {        \
        const __m512i low4 = _mm512_set1_epi8(0x0F);                                                      \
        __m512i p[2][OKV_X16_MAX_COLS], s16[OKV_X16_MAX_COLS];                                            \
        UNROLL for (int j = 0; j < NC; j++) {                                                             \
            UNROLL for (int i = 0; i < RJ; i++) p[i][j] = _mm512_loadu_si512(x[j]->c8);                   \
            s16[j] = _mm512_setzero_si512();                                                              \
        }                                                                                                 \
        UNROLL for (int u = 0; u < 4; u++) {                                                              \
            __m512i lo[2], hi[2];                                                                         \
            UNROLL for (int i = 0; i < RJ; i++) {                                                         \
                const __m512i v = TAIL ? _mm512_maskz_loadu_epi32(m, QS(t[i], n, u)) : _mm512_loadu_si512(QS(t[i], n, u)); \
                lo[i] = _mm512_and_si512(v, low4);                                                        \
                hi[i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);                                  \
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
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        if (!(VNNI))                                                                                      \
            UNROLL for (int j = 0; j < NC; j++) p[0][j] = _mm512_add_epi32(p[0][j], _mm512_madd_epi16(s16[j], _mm512_set1_epi16(1))); \
        UNROLL for (int i = 0; i < RJ; i++) {                                                             \
            const __m512 sw = _mm512_cvtph_ps(TAIL ? _mm256_maskz_loadu_epi16(m, t[i]) : _mm256_loadu_si256((const __m256i *)t[i])); \
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
        (void)ng;                                                                                         \
        const int64_t nw = c->k / OKV_X16_VALUES, ahead = okv_x16_part_ahead(part);                       \
        const int nt = okv_q4_0x16_tail_blocks(c->k);                                                     \
        const block_act_q8_0x16 *x[OKV_X16_MAX_COLS];                                                     \
        for (int r = 0; r < NR; r += (RJ)) {                                                              \
            __m512 acc[RJ][OKV_X16_MAX_COLS];                                                             \
            const uint8_t *t[RJ];                                                                         \
            UNROLL for (int i = 0; i < (RJ); i++)                                                         \
                UNROLL for (int j = 0; j < NC; j++) acc[i][j] = okv_x16_part_acc512(part, r0 + r + i, j); \
            for (int64_t g = okv_x16_part_g0(part), ge = okv_x16_part_g1(part, nw); g < ge; g++) {        \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    t[i] = (const uint8_t *)(wr[r + i] + g);                                              \
                    for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)t[i] + ahead + l, _MM_HINT_T1); \
                    okv_x16_prefetch_l1(c->n, NC, t[i], sizeof(block_q4_0x16));                         \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + g;                                     \
                GROUP(t, RJ, OKV_X16_BLOCKS, 0, (__mmask16)0xFFFF, x, NC, acc);                           \
            }                                                                                             \
            if (!okv_x16_part_last(part)) {                                                               \
                UNROLL for (int i = 0; i < (RJ); i++)                                                     \
                    UNROLL for (int j = 0; j < NC; j++) okv_x16_part_park512(part, r0 + r + i, j, acc[i][j]); \
                continue;                                                                                 \
            }                                                                                             \
            if (nt) {                                                                                     \
                UNROLL for (int i = 0; i < (RJ); i++) {                                                   \
                    t[i] = (const uint8_t *)(wr[r + i] + nw);                                             \
                    okv_x16_prefetch_tail((const char *)t[i] + ahead, 18 * nt);                           \
                }                                                                                         \
                UNROLL for (int j = 0; j < NC; j++) x[j] = xs[j] + nw;                                    \
                GROUP(t, RJ, nt, 1, (__mmask16)((1u << nt) - 1), x, NC, acc);                             \
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
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_tile_q4_0x16_avx512)
OKV_X16_TILE_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile_avx512vnni, tile2_avx512vnni, okv_mm_tile_q4_0x16_avx512vnni)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_block_q4_0x16_avx512)
OKV_X16_BLOCK_ENTRY_PAIRS(OKV_TARGET_AVX512VNNI, tile_avx512vnni, tile2_avx512vnni, okv_mm_block_q4_0x16_avx512vnni)

#endif /* OKV_X86 */
