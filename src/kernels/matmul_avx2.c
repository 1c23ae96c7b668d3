/* AVX2 kernels: one 32-value block per 256-bit register. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu.h"
#include "kernels/matmul_impl.h"

#define KERNEL static inline __attribute__((always_inline)) OKV_TARGET_AVX2

KERNEL float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

OKV_TARGET_AVX2 void okv_mm_quantize_act_avx2(const float *x, int64_t k, int8_t *q, float *d) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + b * OKV_QK + 8 * i);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float am = _mm_cvtss_f32(m);
        const float id = am != 0.0f ? 127.0f / am : 0.0f;
        d[b] = _cvtsh_ss(_cvtss_sh(am / 127.0f, _MM_FROUND_TO_NEAREST_INT));
        __m256i iv[4];
        for (int i = 0; i < 4; i++)
            iv[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], _mm256_set1_ps(id)),
                                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* packs interleave 128-bit lanes; the permute restores element order */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + b * OKV_QK), p);
    }
}

/* Software prefetch distance along the weights, into L2, as in the AVX-512
 * kernels (see matmul_avx512_tmpl.h): without it the hardware prefetcher
 * alone left AVX2 Q4_0 decode at under half of memcpy's bandwidth. */
enum { PREFETCH_AHEAD = 8192 };

/* The quantized kernels work in steps of two blocks, b and b+1, of 4 rows.
 * The two blocks go in the two 128-bit lanes ([b's values 0-15 | b+1's
 * values 0-15], and the same for 16-31), so after the byte products each
 * row's vector holds 4 partial sums per block, and the 4 rows reduce (in
 * integers, exactly) into one vector of 8 block sums: row r's block b in
 * lane r, b+1 in lane 4+r.  One convert, one multiply by the 8 scale
 * products and one FMA then serve 8 blocks, where a block per register
 * spent them on each.  Rows past the tile repeat its last row (results
 * dropped), so every lane sees the same operations whatever the tile's
 * height; columns are independent.  y = lane r + lane 4+r at the end. */
#define QROWS 4

/* [16 bytes at a | 16 bytes at b] */
KERNEL __m256i load_pair(const void *a, const void *b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                   _mm_loadu_si128((const __m128i *)b), 1);
}

/* Lane i (of each 128-bit half) = the sum of v[i]'s 4 int32 of that half. */
KERNEL __m256i sum4x4(const __m256i v[QROWS]) {
    const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[0], v[1]), _mm256_unpackhi_epi32(v[0], v[1]));
    const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2], v[3]), _mm256_unpackhi_epi32(v[2], v[3]));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
}

/* The 8 weight scales of a step, in the lanes of sum4x4, from loads whose
 * word 0 is a block's f16 scale (b1[] zero for a lone last block). */
KERNEL __m256 wscales(const __m128i b0[QROWS], const __m128i b1[QROWS]) {
    const __m128i lo = _mm_unpacklo_epi32(_mm_unpacklo_epi16(b0[0], b0[1]), _mm_unpacklo_epi16(b0[2], b0[3]));
    const __m128i hi = _mm_unpacklo_epi32(_mm_unpacklo_epi16(b1[0], b1[1]), _mm_unpacklo_epi16(b1[2], b1[3]));
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(lo, hi));
}

/* One column's activations for a step: values 0-15 and 16-31 of blocks b
 * and b+1 laid out as the weights, and the scales [d_b x4 | d_b+1 x4];
 * with TWO = 0 block b alone, the upper lanes zero. */
typedef struct xstep {
    __m256i lo, hi;
    __m256 d;
} xstep;

KERNEL xstep load_x(const int8_t *xq, const float *xd, const int TWO) {
    xstep x;
    if (TWO) {
        x.lo = load_pair(xq, xq + OKV_QK);
        x.hi = load_pair(xq + 16, xq + OKV_QK + 16);
        const __m128 d2 = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)xd));
        x.d = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d2), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    } else {
        x.lo = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)xq));
        x.hi = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(xq + 16)));
        x.d = _mm256_zextps128_ps256(_mm_set1_ps(xd[0]));
    }
    return x;
}

/* Row and column pointers of a tile, hoisted (GCC otherwise recomputes
 * them from the context on every step). */
typedef struct qtile {
    const uint8_t *rows[QROWS];
    const int8_t *xq[MM_TC];
    const float *xd[MM_TC];
} qtile;

KERNEL qtile qtile_at(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, const int NC) {
    qtile t;
    const int64_t nb = c->k / OKV_QK;
    UNROLL for (int r = 0; r < QROWS; r++) t.rows[r] = c->w + (r0 + (r < nr ? r : nr - 1)) * (int64_t)c->wrow;
    UNROLL for (int j = 0; j < NC; j++) {
        t.xq[j] = c->xq + (c0 + j) * c->k;
        t.xd[j] = c->xd + (c0 + j) * nb;
    }
    return t;
}

KERNEL void qtile_store(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, const int NC, const __m256 acc[MM_TC]) {
    UNROLL for (int j = 0; j < NC; j++) {
        float out[4];
        _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1)));
        for (int r = 0; r < nr; r++) c->y[(c0 + j) * c->rows + r0 + r] = out[r];
    }
}

KERNEL void q8_0_step(const qtile *t, int64_t b, const int TWO, const int NC, __m256 acc[MM_TC]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i wlo[QROWS], whi[QROWS];
    __m128i d0[QROWS], d1[QROWS];
    UNROLL for (int r = 0; r < QROWS; r++) {
        const block_q8_0 *blk = (const block_q8_0 *)t->rows[r] + b;
        _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T1);
        if (TWO) {
            wlo[r] = load_pair(blk[0].qs, blk[1].qs);
            whi[r] = load_pair(blk[0].qs + 16, blk[1].qs + 16);
            d1[r] = _mm_loadu_si128((const __m128i *)&blk[1]);
        } else {
            wlo[r] = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)blk[0].qs));
            whi[r] = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(blk[0].qs + 16)));
            d1[r] = _mm_setzero_si128();
        }
        d0[r] = _mm_loadu_si128((const __m128i *)&blk[0]);
    }
    const __m256 sw = wscales(d0, d1);
    UNROLL for (int j = 0; j < NC; j++) {
        const xstep x = load_x(t->xq[j] + b * OKV_QK, t->xd[j] + b, TWO);
        __m256i p[QROWS];
        UNROLL for (int r = 0; r < QROWS; r++) {
            /* |w| * (x with w's sign): maddubs needs one unsigned side; each
             * half's pairs stay within int16 (2 * 128 * 127) */
            const __m256i plo = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_sign_epi8(wlo[r], wlo[r]), _mm256_sign_epi8(x.lo, wlo[r])), ones);
            const __m256i phi = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_sign_epi8(whi[r], whi[r]), _mm256_sign_epi8(x.hi, whi[r])), ones);
            p[r] = _mm256_add_epi32(plo, phi);
        }
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum4x4(p)), _mm256_mul_ps(sw, x.d), acc[j]);
    }
}

KERNEL void q4_0_step(const qtile *t, int64_t b, const int TWO, const int NC, __m256 acc[MM_TC]) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i eight = _mm256_set1_epi8(8);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i wlo[QROWS], whi[QROWS];
    __m128i d0[QROWS], d1[QROWS];
    UNROLL for (int r = 0; r < QROWS; r++) {
        const block_q4_0 *blk = (const block_q4_0 *)t->rows[r] + b;
        _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T1);
        __m256i q;
        if (TWO) {
            q = load_pair(blk[0].qs, blk[1].qs);
            d1[r] = _mm_loadu_si128((const __m128i *)&blk[1]);
        } else {
            q = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)blk[0].qs));
            d1[r] = _mm_setzero_si128();
        }
        d0[r] = _mm_loadu_si128((const __m128i *)&blk[0]);
        wlo[r] = _mm256_and_si256(q, low4);
        whi[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    }
    const __m256 sw = wscales(d0, d1);
    UNROLL for (int j = 0; j < NC; j++) {
        const xstep x = load_x(t->xq[j] + b * OKV_QK, t->xd[j] + b, TWO);
        /* the stored nibbles are value + 8: take 8 * x off once per column;
         * the int16 sums stay within 2 * 2 * 15 * 127 + 2 * 2 * 8 * 127 */
        const __m256i x8 = _mm256_add_epi16(_mm256_maddubs_epi16(eight, x.lo), _mm256_maddubs_epi16(eight, x.hi));
        __m256i p[QROWS];
        UNROLL for (int r = 0; r < QROWS; r++) {
            const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(wlo[r], x.lo), _mm256_maddubs_epi16(whi[r], x.hi));
            p[r] = _mm256_madd_epi16(_mm256_sub_epi16(s16, x8), ones);
        }
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum4x4(p)), _mm256_mul_ps(sw, x.d), acc[j]);
    }
}

#define QUANT_TILE(kind)                                                                          \
    KERNEL void kind##_tile(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, const int NC) { \
        const int64_t nb = c->k / OKV_QK;                                                         \
        const qtile t = qtile_at(c, r0, nr, c0, NC);                                              \
        __m256 acc[MM_TC];                                                                        \
        UNROLL for (int j = 0; j < NC; j++) acc[j] = _mm256_setzero_ps();                        \
        int64_t b = 0;                                                                            \
        for (; b + 2 <= nb; b += 2) kind##_step(&t, b, 1, NC, acc);                              \
        if (b < nb) kind##_step(&t, b, 0, NC, acc);                                               \
        qtile_store(c, r0, nr, c0, NC, acc);                                                      \
    }                                                                                             \
    OKV_TARGET_AVX2 static void tile_##kind(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) { \
        switch (nc) {                                                                             \
        case 4: kind##_tile(c, r0, nr, c0, 4); break;                                             \
        case 3: kind##_tile(c, r0, nr, c0, 3); break;                                             \
        case 2: kind##_tile(c, r0, nr, c0, 2); break;                                             \
        default: kind##_tile(c, r0, nr, c0, 1); break;                                            \
        }                                                                                         \
    }

QUANT_TILE(q8_0)
QUANT_TILE(q4_0)

KERNEL __m256 load8(int wtype, const uint8_t *row, int64_t i) {
    if (wtype == OKV_GGML_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * i)));
    if (wtype == OKV_GGML_BF16)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * i))), 16));
    return _mm256_loadu_ps((const float *)(row + 4 * i));
}

KERNEL float load1(int wtype, const uint8_t *row, int64_t i) {
    uint16_t h;
    float f;
    if (wtype == OKV_GGML_F16) { memcpy(&h, row + 2 * i, 2); return _cvtsh_ss(h); }
    if (wtype == OKV_GGML_BF16) { memcpy(&h, row + 2 * i, 2); return okv_bf16_to_f32(h); }
    memcpy(&f, row + 4 * i, 4);
    return f;
}

/* One 8-wide step of a float tile at element i. */
KERNEL void float_step(int wtype, const uint8_t *const *rows, const float *const *xs, const int NR, const int NC,
                       int64_t i, __m256 acc[MM_TR][MM_TC]) {
    __m256 xv[MM_TC];
    UNROLL for (int j = 0; j < NC; j++) xv[j] = _mm256_loadu_ps(xs[j] + i);
    UNROLL for (int r = 0; r < NR; r++) {
        const __m256 wv = load8(wtype, rows[r], i);
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm256_fmadd_ps(wv, xv[j], acc[r][j]);
    }
}

KERNEL void float_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    /* row and column pointers hoisted: GCC otherwise recomputes them from
     * the context on every step */
    const uint8_t *rows[MM_TR];
    const float *xs[MM_TC];
    UNROLL for (int r = 0; r < NR; r++) rows[r] = c->w + (r0 + r) * c->wrow;
    UNROLL for (int j = 0; j < NC; j++) xs[j] = c->x + (c0 + j) * c->k;
    __m256 acc[MM_TR][MM_TC];
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm256_setzero_ps();
    const int64_t k = c->k, k8 = k & ~(int64_t)7, k16 = k & ~(int64_t)15;
    const int64_t wsize = wtype == OKV_GGML_F32 ? 4 : 2;
    int64_t i = 0;
    /* two steps per prefetch: one per row and 32 or 64 bytes of weights */
    for (; i < k16; i += 16) {
        UNROLL for (int r = 0; r < NR; r++)
            _mm_prefetch((const char *)rows[r] + wsize * i + PREFETCH_AHEAD, _MM_HINT_T1);
        float_step(wtype, rows, xs, NR, NC, i, acc);
        float_step(wtype, rows, xs, NR, NC, i + 8, acc);
    }
    for (; i < k8; i += 8) float_step(wtype, rows, xs, NR, NC, i, acc);
    UNROLL for (int r = 0; r < NR; r++) {
        UNROLL for (int j = 0; j < NC; j++) {
            float s = hsum256(acc[r][j]);
            for (int64_t e = k8; e < k; e++) s += load1(wtype, rows[r], e) * xs[j][e];
            c->y[(c0 + j) * c->rows + r0 + r] = s;
        }
    }
}

KERNEL void f32_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_F32, c, r0, NR, c0, NC);
}
KERNEL void f16_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_F16, c, r0, NR, c0, NC);
}
KERNEL void bf16_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    float_tile(OKV_GGML_BF16, c, r0, NR, c0, NC);
}

OKV_MM_DISPATCH(OKV_TARGET_AVX2, tile_f32, f32_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, tile_f16, f16_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, tile_bf16, bf16_tile)

okv_mm_tile_fn okv_mm_tile_avx2(int wtype) {
    switch (wtype) {
    case OKV_GGML_F32: return tile_f32;
    case OKV_GGML_F16: return tile_f16;
    case OKV_GGML_BF16: return tile_bf16;
    case OKV_GGML_Q8_0: return tile_q8_0;
    case OKV_GGML_Q4_0: return tile_q4_0;
    }
    return NULL;
}
