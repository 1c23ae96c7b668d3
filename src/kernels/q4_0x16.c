/* Q4_0 sixteen blocks wide (see q4_0x16.h): the repacking, the activation
 * layout, and the product kernels of every ISA, which all compute the same
 * operations in the same order (exact integer block sums, one FMA per block
 * and lane, one fixed 16-lane sum) and so give the same bits. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/matmul_impl.h"
#include "kernels/q4_0x16.h"
#include "kernels/quant.h"

void okv_repack_q4_0x16(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t ng = k / OKV_X16_VALUES;
    const block_q4_0 *in = src;
    block_q4_0x16 *out = dst;
    for (int64_t g = 0; g < rows * ng; g++, in += OKV_X16_BLOCKS, out++)
        for (int i = 0; i < OKV_X16_BLOCKS; i++) {
            out->d[i] = in[i].d;
            for (int u = 0; u < 4; u++) memcpy(&out->qs[u][4 * i], &in[i].qs[4 * u], 4);
        }
}

void okv_dequantize_row_q4_0x16(const void *src, float *dst, int64_t k) {
    const block_q4_0x16 *g = src;
    for (int64_t gi = 0; gi < k / OKV_X16_VALUES; gi++, g++)
        for (int i = 0; i < OKV_X16_BLOCKS; i++) {
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

void okv_quantize_act_q8_0x16(okv_isa kern, const float *x, int64_t k, block_q8_0x16 *y) {
    int8_t q[OKV_X16_VALUES];
    for (int64_t g = 0; g < k / OKV_X16_VALUES; g++, y++) {
        const float *xg = x + g * OKV_X16_VALUES;
        if (kern == OKV_ISA_SCALAR) okv_mm_quantize_act_scalar(xg, OKV_X16_VALUES, q, y->d);
        else okv_mm_quantize_act_avx2(xg, OKV_X16_VALUES, q, y->d);
        for (int i = 0; i < OKV_X16_BLOCKS; i++) {
            const int8_t *b = q + i * OKV_QK;
            int32_t s = 0;
            for (int t = 0; t < OKV_QK; t++) s += b[t];
            y->c8[i] = -8 * s;
            for (int h = 0; h < 2; h++)
                for (int u = 0; u < 4; u++) memcpy(&y->qs[2 * u + h][4 * i], b + 16 * h + 4 * u, 4);
        }
    }
}

/* The one order in which every kernel sums its sixteen lanes. */
static inline float sum16(const float a[16]) {
    float s8[8], s4[4];
    for (int i = 0; i < 8; i++) s8[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* Columns one pass over a row takes at most: the AVX-512 kernel's integer
 * and float accumulators for 8 columns fill half the registers. */
enum { X16_MAX_COLS = 8 };

/* Hoisted tile pointers: row r's groups, column j's groups. */
#define X16_TILE_SETUP()                                                                     \
    const int64_t ng = c->k / OKV_X16_VALUES;                                                \
    const block_q4_0x16 *wr[MM_TR];                                                          \
    const block_q8_0x16 *xs[X16_MAX_COLS];                                                   \
    for (int r = 0; r < NR; r++) wr[r] = (const block_q4_0x16 *)(c->w + (r0 + r) * c->wrow); \
    for (int j = 0; j < NC; j++) xs[j] = (const block_q8_0x16 *)(c->xa + (c0 + j) * c->xa_col)

static void tile_scalar(const okv_mm_ctx *c, int64_t r0, int NR, int64_t c0, int NC) {
    X16_TILE_SETUP();
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) {
            float acc[16] = {0};
            for (int64_t g = 0; g < ng; g++) {
                const block_q4_0x16 *w = wr[r] + g;
                const block_q8_0x16 *x = xs[j] + g;
                for (int i = 0; i < 16; i++) {
                    int32_t p = x->c8[i];
                    for (int u = 0; u < 4; u++)
                        for (int m = 0; m < 4; m++) {
                            const int q = w->qs[u][4 * i + m];
                            p += (q & 0x0F) * x->qs[2 * u][4 * i + m] + (q >> 4) * x->qs[2 * u + 1][4 * i + m];
                        }
                    acc[i] = fmaf((float)p, okv_f16_to_f32(w->d[i]) * x->d[i], acc[i]);
                }
            }
            c->y[(c0 + j) * c->rows + r0 + r] = sum16(acc);
        }
}

void okv_mm_tile_q4_0x16_scalar(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {
    tile_scalar(c, r0, nr, c0, nc);
}

/* Weights stream from memory once per token: keep lines in flight well
 * ahead, as the ggml-layout kernels do (8 KiB: a few rows on). */
enum { AHEAD = 8192 };

#define AVX2 static inline __attribute__((always_inline)) OKV_TARGET_AVX2

/* p + the 4-value dot products of unsigned w (0..15) and signed x per lane:
 * pairs stay within int16 (2 * 15 * 127). */
AVX2 __m256i dot_avx2(__m256i p, __m256i w, const void *x) {
    const __m256i pairs = _mm256_maddubs_epi16(w, _mm256_loadu_si256((const __m256i *)x));
    return _mm256_add_epi32(p, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

AVX2 void tile_avx2(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    X16_TILE_SETUP();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int r = 0; r < NR; r++) {
        /* lanes 0-7 (blocks 0-7 of each group) and 8-15 */
        __m256 acc[MM_TC][2];
        UNROLL for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const block_q4_0x16 *w = wr[r] + g;
            for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + AHEAD + l, _MM_HINT_T1);
            UNROLL for (int half = 0; half < 2; half++) {
                __m256i p[MM_TC];
                UNROLL for (int j = 0; j < NC; j++) p[j] = _mm256_loadu_si256((const __m256i *)(xs[j][g].c8 + 8 * half));
                UNROLL for (int u = 0; u < 4; u++) {
                    const __m256i wv = _mm256_loadu_si256((const __m256i *)(w->qs[u] + 32 * half));
                    const __m256i lo = _mm256_and_si256(wv, low4);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), low4);
                    UNROLL for (int j = 0; j < NC; j++) {
                        p[j] = dot_avx2(p[j], lo, xs[j][g].qs[2 * u] + 32 * half);
                        p[j] = dot_avx2(p[j], hi, xs[j][g].qs[2 * u + 1] + 32 * half);
                    }
                }
                const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w->d + 8 * half)));
                UNROLL for (int j = 0; j < NC; j++)
                    acc[j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]),
                                                   _mm256_mul_ps(sw, _mm256_loadu_ps(xs[j][g].d + 8 * half)),
                                                   acc[j][half]);
            }
        }
        UNROLL for (int j = 0; j < NC; j++) {
            /* sum16's order: lanes i + 8, then i + 4, then (0+2) + (1+3) */
            const __m256 s8 = _mm256_add_ps(acc[j][0], acc[j][1]);
            const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
            const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
            c->y[(c0 + j) * c->rows + r0 + r] = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
        }
    }
}

OKV_TARGET_AVX2 void okv_mm_tile_q4_0x16_avx2(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {
    switch (nc) {
    case 4: tile_avx2(c, r0, nr, c0, 4); break;
    case 3: tile_avx2(c, r0, nr, c0, 3); break;
    case 2: tile_avx2(c, r0, nr, c0, 2); break;
    default: tile_avx2(c, r0, nr, c0, 1); break;
    }
}

/* The AVX-512 tile, with the 4-value dot product as DOT: VNNI's one
 * instruction or BW's maddubs + madd (the same exact lanes). */
#define X16_TILE_AVX512(name, TARGET, DOT)                                                                 \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                  int64_t c0, const int NC) {               \
        X16_TILE_SETUP();                                                                                  \
        const __m512i low4 = _mm512_set1_epi8(0x0F);                                                       \
        for (int r = 0; r < NR; r++) {                                                                     \
            __m512 acc[X16_MAX_COLS];                                                                      \
            UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm512_setzero_ps();                              \
            for (int64_t g = 0; g < ng; g++) {                                                             \
                const block_q4_0x16 *w = wr[r] + g;                                                        \
                for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)w + AHEAD + l, _MM_HINT_T1);  \
                __m512i p[X16_MAX_COLS];                                                                   \
                UNROLL for (int j = 0; j < NC; j++) p[j] = _mm512_loadu_si512(xs[j][g].c8);                 \
                UNROLL for (int u = 0; u < 4; u++) {                                                       \
                    const __m512i wv = _mm512_loadu_si512(w->qs[u]);                                       \
                    const __m512i lo = _mm512_and_si512(wv, low4);                                         \
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), low4);                   \
                    UNROLL for (int j = 0; j < NC; j++) {                                                  \
                        p[j] = DOT(p[j], lo, _mm512_loadu_si512(xs[j][g].qs[2 * u]));                      \
                        p[j] = DOT(p[j], hi, _mm512_loadu_si512(xs[j][g].qs[2 * u + 1]));                  \
                    }                                                                                      \
                }                                                                                          \
                const __m512 sw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)w->d));              \
                UNROLL for (int j = 0; j < NC; j++)                                                        \
                    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[j]), _mm512_mul_ps(sw, _mm512_loadu_ps(xs[j][g].d)), \
                                             acc[j]);                                                      \
            }                                                                                              \
            UNROLL for (int j = 0; j < NC; j++) {                                                          \
                const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(acc[j]), _mm512_extractf32x8_ps(acc[j], 1)); \
                const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));    \
                const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                                   \
                c->y[(c0 + j) * c->rows + r0 + r] = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));    \
            }                                                                                              \
        }                                                                                                  \
    }                                                                                                      \
    TARGET void okv_mm_##name(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {               \
        switch (nc) {                                                                                      \
        case 4: name(c, r0, nr, c0, 4); break;                                                             \
        case 3: name(c, r0, nr, c0, 3); break;                                                             \
        case 2: name(c, r0, nr, c0, 2); break;                                                             \
        default: name(c, r0, nr, c0, 1); break;                                                            \
        }                                                                                                  \
    }                                                                                                      \
    /* The block pass: 8 columns at a time against every row of the range,                              \
     * which unpacks the nibbles once per 8 columns instead of per 4, with                               \
     * the columns' activations in L1 and the rows in L2 (a column's result                              \
     * is the same in any pass: columns never mix). */                                                 \
    TARGET void okv_mm_block_##name(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {   \
        for (int64_t j = c0; j < c1;) {                                                                    \
            const int nc = c1 - j >= 8 ? 8 : c1 - j >= 4 ? 4 : c1 - j >= 2 ? 2 : 1;                        \
            for (int64_t r = r0; r < r1; r++) {                                                            \
                if (nc == 8) name(c, r, 1, j, 8);                                                          \
                else if (nc == 4) name(c, r, 1, j, 4);                                                     \
                else if (nc == 2) name(c, r, 1, j, 2);                                                     \
                else name(c, r, 1, j, 1);                                                                  \
            }                                                                                              \
            j += nc;                                                                                       \
        }                                                                                                  \
    }

#define DOT_BW(p, w, x) _mm512_add_epi32((p), _mm512_madd_epi16(_mm512_maddubs_epi16((w), (x)), _mm512_set1_epi16(1)))
#define DOT_VNNI(p, w, x) _mm512_dpbusd_epi32((p), (w), (x))
X16_TILE_AVX512(tile_q4_0x16_avx512, OKV_TARGET_AVX512, DOT_BW)
X16_TILE_AVX512(tile_q4_0x16_avx512vnni, OKV_TARGET_AVX512VNNI, DOT_VNNI)

