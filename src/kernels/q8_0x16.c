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
    const int64_t nb = k / OKV_QK, ng = okv_x16_groups(k);
    const block_q8_0 *in = src;
    block_q8_0x16 *out = dst;
    int8_t q[OKV_X16_VALUES];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t g = 0; g < ng; g++, out++) {
            memset(q, 0, sizeof q);
            memset(out->d, 0, sizeof out->d); /* the padding */
            for (int i = 0; i < OKV_X16_BLOCKS && g * OKV_X16_BLOCKS + i < nb; i++, in++) {
                out->d[i] = in->d;
                memcpy(q + OKV_QK * i, in->qs, OKV_QK);
            }
            okv_x16_permute_act(q, out->qs);
        }
}

void okv_dequantize_row_q8_0x16(const void *src, float *dst, int64_t k) {
    const block_q8_0x16 *g = src;
    for (int64_t gi = 0; gi < okv_x16_groups(k); gi++, g++)
        for (int i = 0; i < OKV_X16_BLOCKS && (gi * OKV_X16_BLOCKS + i) * OKV_QK < k; i++) {
            const float d = okv_f16_to_f32(g->d[i]);
            float *y = dst + (gi * OKV_X16_BLOCKS + i) * OKV_QK;
            for (int h = 0; h < 2; h++)
                for (int u = 0; u < 4; u++)
                    for (int m = 0; m < 4; m++) y[16 * h + 4 * u + m] = (float)g->qs[2 * u + h][4 * i + m] * d;
        }
}

#define TILE_SETUP() OKV_X16_TILE_SETUP(block_q8_0x16, block_act_q8_0x16, okv_x16_groups(c->k))

OKV_X16_SCALAR_TILE(okv_mm_tile_q8_0x16_scalar, block_q8_0x16, block_act_q8_0x16, okv_x16_groups(c->k), {
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
 * lane dots. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void tile1_avx2(const okv_mm_ctx *c, int64_t r0,
                                                                            const int NR, int64_t c0, const int NC) {
    TILE_SETUP();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < NR; r++) {
        __m256 acc[OKV_X16_MAX_COLS][2];
        UNROLL for (int j = 0; j < NC; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const block_q8_0x16 *w = wr[r] + g;
            for (int l = 0; l < 576; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD + l, _MM_HINT_T1);
            UNROLL for (int half = 0; half < 2; half++) {
                __m256i p[OKV_X16_MAX_COLS];
                UNROLL for (int j = 0; j < NC; j++) p[j] = _mm256_setzero_si256();
                UNROLL for (int v = 0; v < 8; v++) {
                    const __m256i wv = _mm256_loadu_si256((const __m256i *)(w->qs[v] + 32 * half));
                    const __m256i wa = _mm256_abs_epi8(wv);
                    UNROLL for (int j = 0; j < NC; j++) {
                        const __m256i xv = _mm256_loadu_si256((const __m256i *)(xs[j][g].qs[v] + 32 * half));
                        p[j] = _mm256_add_epi32(p[j], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(xv, wv)), ones));
                    }
                }
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

/* 3 and 4 columns (batched decode): lanes 0-7 of a row over all its groups,
 * then lanes 8-15 (the row's lines again, from L1), so only NC float
 * accumulators live across the groups, and an empty asm keeps each
 * column's int32 sum in order (GCC otherwise reassociated the adds to
 * after all the products): tile1_avx2's 2 NC accumulators spilled 32 ymm
 * moves per half group at NC = 4 (callgrind; at NC = 2 they fit, and the
 * second loop costs more than it saves).  Each lane's integers and FMAs
 * are tile1_avx2's, so the bits are the same. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void tilen_avx2(const okv_mm_ctx *c, int64_t r0,
                                                                             const int NR, int64_t c0, const int NC) {
    TILE_SETUP();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < NR; r++) {
        __m256 lanes[2][OKV_X16_MAX_COLS];
        UNROLL for (int half = 0; half < 2; half++) {
            __m256 acc[OKV_X16_MAX_COLS];
            UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();
            for (int64_t g = 0; g < ng; g++) {
                const block_q8_0x16 *w = wr[r] + g;
                if (half == 0)
                    for (int l = 0; l < 576; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD + l, _MM_HINT_T1);
                __m256i p[OKV_X16_MAX_COLS];
                UNROLL for (int v = 0; v < 8; v++) {
                    const __m256i wv = _mm256_loadu_si256((const __m256i *)(w->qs[v] + 32 * half));
                    const __m256i wa = _mm256_abs_epi8(wv);
                    UNROLL for (int j = 0; j < NC; j++) {
                        const __m256i xv = _mm256_loadu_si256((const __m256i *)(xs[j][g].qs[v] + 32 * half));
                        const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(xv, wv)), ones);
                        p[j] = v == 0 ? t : _mm256_add_epi32(p[j], t);
                        __asm__("" : "+x"(p[j]));
                    }
                }
                const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w->d + 8 * half)));
                UNROLL for (int j = 0; j < NC; j++)
                    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]), _mm256_mul_ps(sw, _mm256_loadu_ps(xs[j][g].d + 8 * half)),
                                             acc[j]);
            }
            UNROLL for (int j = 0; j < NC; j++) lanes[half][j] = acc[j];
        }
        UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(lanes[0][j], lanes[1][j]);
    }
}

static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void tile_avx2(const okv_mm_ctx *c, int64_t r0,
                                                                            const int NR, int64_t c0, const int NC) {
    if (NC <= 2) tile1_avx2(c, r0, NR, c0, NC);
    else tilen_avx2(c, r0, NR, c0, NC);
}

OKV_X16_TILE_ENTRY(OKV_TARGET_AVX2, tile_avx2, okv_mm_tile_q8_0x16_avx2)

/* The AVX2 block pass (from 5 columns on: wtype.c), weight-stationary as
 * q4_0x16.c's: a half-group's eight |w| vectors stay in registers for
 * X16_CB columns (tile_avx2 makes them again for every 4 columns, and its
 * accumulators for 4 columns besides them fill AVX2's 16 registers); the
 * signs come from w in memory (vpsignb's mask operand, L1), the float
 * accumulators from acc_buf.  Each lane sees tile_avx2's operations in its
 * order (the same exact integer dot, then one FMA per group): the same
 * bits. */
enum { X16_CB = 16, X16_STRIP = 8 };

static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void block_avx2(const okv_mm_ctx *c, int64_t r_begin,
                                                                             int64_t r_end, int64_t c_begin,
                                                                             int64_t c_end) {
    const int64_t ng = okv_x16_groups(c->k);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc_buf[X16_STRIP][X16_CB][2];
    for (int64_t c0 = c_begin; c0 < c_end; c0 += X16_CB) {
        const int nc = (int)(c_end - c0 < X16_CB ? c_end - c0 : X16_CB);
        const block_act_q8_0x16 *xs = (const block_act_q8_0x16 *)(c->xa + c0 * c->xa_col);
        const size_t xstride = c->xa_col / sizeof *xs; /* groups between columns */
        for (int64_t r0 = r_begin; r0 < r_end; r0 += X16_STRIP) {
            const int nr = (int)(r_end - r0 < X16_STRIP ? r_end - r0 : X16_STRIP);
            for (int r = 0; r < nr; r++)
                for (int j = 0; j < nc; j++) acc_buf[r][j][0] = acc_buf[r][j][1] = _mm256_setzero_ps();
            for (int64_t g = 0; g < ng; g++) {
                for (int r = 0; r < nr; r++) {
                    const block_q8_0x16 *w = (const block_q8_0x16 *)(c->w + (r0 + r) * c->wrow) + g;
                    /* the next strip's group: used X16_STRIP rows later */
                    for (int l = 0; l < (int)sizeof *w; l += 64)
                        _mm_prefetch((const char *)w + X16_STRIP * c->wrow + l, _MM_HINT_T1);
                    UNROLL for (int half = 0; half < 2; half++) {
                        __m256i wa[8];
                        UNROLL for (int v = 0; v < 8; v++)
                            wa[v] = _mm256_abs_epi8(_mm256_loadu_si256((const __m256i *)(w->qs[v] + 32 * half)));
                        const __m256 sw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w->d + 8 * half)));
                        const block_act_q8_0x16 *x = xs + g;
                        for (int j = 0; j < nc; j++, x += xstride) {
                            __m256i p = _mm256_setzero_si256();
                            UNROLL for (int v = 0; v < 8; v++) {
                                const __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(x->qs[v] + 32 * half)),
                                                                    _mm256_loadu_si256((const __m256i *)(w->qs[v] + 32 * half)));
                                p = _mm256_add_epi32(p, _mm256_madd_epi16(_mm256_maddubs_epi16(wa[v], xv), ones));
                                __asm__("" : "+x"(p)); /* in order: see tilen_avx2 */
                            }
                            acc_buf[r][j][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                                                  _mm256_mul_ps(sw, _mm256_loadu_ps(x->d + 8 * half)),
                                                                  acc_buf[r][j][half]);
                        }
                    }
                }
            }
            for (int r = 0; r < nr; r++)
                for (int j = 0; j < nc; j++)
                    c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16_avx2(acc_buf[r][j][0], acc_buf[r][j][1]);
        }
    }
}

OKV_TARGET_AVX2 void okv_mm_block_q8_0x16_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    block_avx2(c, r0, r1, c0, c1);
}

/* AVX-512: VNNI takes w + 128 (unsigned) and starts each lane at
 * -128 * its activation sum (16 * c8); BW moves w's sign onto x. */
#define TILE_AVX512(name, TARGET, VNNI)                                                                   \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                  int64_t c0, const int NC) {              \
        TILE_SETUP();                                                                                     \
        const __m512i bias = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi16(1);                   \
        for (int r = 0; r < NR; r++) {                                                                    \
            __m512 acc[OKV_X16_MAX_COLS];                                                                 \
            UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm512_setzero_ps();                             \
            for (int64_t g = 0; g < ng; g++) {                                                            \
                const block_q8_0x16 *w = wr[r] + g;                                                       \
                for (int l = 0; l < 576; l += 64) _mm_prefetch((const char *)w + OKV_X16_AHEAD + l, _MM_HINT_T1); \
                __m512i p[OKV_X16_MAX_COLS];                                                              \
                UNROLL for (int j = 0; j < NC; j++)                                                       \
                    p[j] = VNNI ? _mm512_slli_epi32(_mm512_loadu_si512(xs[j][g].c8), 4) : _mm512_setzero_si512(); \
                UNROLL for (int v = 0; v < 8; v++) {                                                      \
                    const __m512i wv = _mm512_loadu_si512(w->qs[v]);                                      \
                    if (VNNI) {                                                                           \
                        const __m512i wu = _mm512_xor_si512(wv, bias);                                    \
                        UNROLL for (int j = 0; j < NC; j++)                                               \
                            p[j] = _mm512_dpbusd_epi32(p[j], wu, _mm512_loadu_si512(xs[j][g].qs[v]));     \
                    } else {                                                                              \
                        const __m512i wa = _mm512_abs_epi8(wv);                                           \
                        const __mmask64 neg = _mm512_movepi8_mask(wv);                                    \
                        UNROLL for (int j = 0; j < NC; j++) {                                             \
                            const __m512i xv = _mm512_loadu_si512(xs[j][g].qs[v]);                        \
                            const __m512i xsgn = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv); \
                            p[j] = _mm512_add_epi32(p[j], _mm512_madd_epi16(_mm512_maddubs_epi16(wa, xsgn), ones)); \
                        }                                                                                 \
                    }                                                                                     \
                }                                                                                         \
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
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_tile_q8_0x16_avx512)
OKV_X16_TILE_ENTRY(OKV_TARGET_AVX512VNNI, tile_avx512vnni, okv_mm_tile_q8_0x16_avx512vnni)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512, tile_avx512, okv_mm_block_q8_0x16_avx512)
OKV_X16_BLOCK_ENTRY(OKV_TARGET_AVX512VNNI, tile_avx512vnni, okv_mm_block_q8_0x16_avx512vnni)

#endif /* OKV_X86 */
