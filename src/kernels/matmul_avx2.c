/* AVX2 kernels of ggml's layouts: one 32-value block per 256-bit register
 * (Q8_0, Q4_0 and MXFP4 take two at a time, below), and the float ones.
 * The sixteen-wide layouts are in their own files. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu.h"
#include "kernels/matmul_impl.h"
#define KQ_TARGET OKV_TARGET_AVX2
#include "kernels/matmul_kq_scales.h"

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

/* quantize_row_q8_K_ref (quant.h) with the same float operations, for
 * finite x: the largest magnitude (max of |x|, NaN-free), the first value
 * of that magnitude for the sign, q = min(127, nearest-even(iscale * x))
 * (cvtps rounds as ggml's nearest_int does), bsums per 16. */
OKV_TARGET_AVX2 void okv_mm_quantize_q8_K_avx2(const float *x, block_q8_K *y, int64_t k) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < k / OKV_QK_K; b++) {
        const float *xb = x + b * OKV_QK_K;
        __m256 amax = _mm256_setzero_ps();
        for (int i = 0; i < OKV_QK_K; i += 8) amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)), amax);
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float am = _mm_cvtss_f32(m);
        if (am == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float max = 0.0f;
        const __m256 amv = _mm256_set1_ps(am);
        for (int i = 0; i < OKV_QK_K; i += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)), amv, _CMP_EQ_OQ));
            if (hit) { max = xb[i + __builtin_ctz((unsigned)hit)]; break; }
        }
        const float iscale = -127.0f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i lim = _mm256_set1_epi32(127), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
        __m256i part[8];
        for (int c = 0; c < 8; c++) {
            __m256i iv[4];
            for (int i = 0; i < 4; i++)
                iv[i] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(xb + 32 * c + 8 * i))), lim);
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[b].qs + 32 * c), p);
            /* sums of 4 (|q| <= 127 leaves maddubs exact), low lane group 2c, high 2c+1 */
            part[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, p), ones16);
        }
        for (int h = 0; h < 2; h++) {
            const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(part[4 * h], part[4 * h + 1]),
                                                _mm256_hadd_epi32(part[4 * h + 2], part[4 * h + 3]));
            /* low lane: groups 8h + 0, 2, 4, 6; high lane: 8h + 1, 3, 5, 7 */
            const __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
            const __m128i g = _mm_packs_epi32(_mm_unpacklo_epi32(lo, hi), _mm_unpackhi_epi32(lo, hi));
            _mm_storeu_si128((__m128i *)(y[b].bsums + 8 * h), g);
        }
        y[b].d = 1.0f / iscale;
    }
}

KERNEL __m256 block_scale(okv_f16 d) { return _mm256_set1_ps(_cvtsh_ss(d)); }

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

/* MXFP4: the nibbles index okv_mxfp4_values (a byte shuffle), then as
 * Q8_0; the scales are powers of two, 2^(e - 128). */
KERNEL void mxfp4_step(const qtile *t, int64_t b, const int TWO, const int NC, __m256 acc[MM_TC]) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)okv_mxfp4_values));
    __m256i wlo[QROWS], whi[QROWS];
    float s[8];
    UNROLL for (int r = 0; r < QROWS; r++) {
        const block_mxfp4 *blk = (const block_mxfp4 *)t->rows[r] + b;
        _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T1);
        __m256i q;
        if (TWO) {
            q = load_pair(blk[0].qs, blk[1].qs);
            s[4 + r] = okv_e8m0_half(blk[1].e);
        } else {
            q = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)blk[0].qs));
            s[4 + r] = 0.0f;
        }
        s[r] = okv_e8m0_half(blk[0].e);
        wlo[r] = _mm256_shuffle_epi8(table, _mm256_and_si256(q, low4));
        whi[r] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
    }
    const __m256 sw = _mm256_loadu_ps(s);
    UNROLL for (int j = 0; j < NC; j++) {
        const xstep x = load_x(t->xq[j] + b * OKV_QK, t->xd[j] + b, TWO);
        __m256i p[QROWS];
        UNROLL for (int r = 0; r < QROWS; r++) {
            const __m256i plo = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_sign_epi8(wlo[r], wlo[r]), _mm256_sign_epi8(x.lo, wlo[r])), ones);
            const __m256i phi = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_sign_epi8(whi[r], whi[r]), _mm256_sign_epi8(x.hi, whi[r])), ones);
            p[r] = _mm256_add_epi32(plo, phi);
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
    OKV_TARGET_AVX2 void okv_mm_tile_##kind##_avx2(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) { \
        switch (nc) {                                                                             \
        case 4: kind##_tile(c, r0, nr, c0, 4); break;                                             \
        case 3: kind##_tile(c, r0, nr, c0, 3); break;                                             \
        case 2: kind##_tile(c, r0, nr, c0, 2); break;                                             \
        default: kind##_tile(c, r0, nr, c0, 1); break;                                            \
        }                                                                                         \
    }

QUANT_TILE(q8_0)
QUANT_TILE(q4_0)
QUANT_TILE(mxfp4)

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

/* An output from its accumulator (lane l: the products of elements l, l+8,
 * ... below k8 = k & ~7, in order) and the last k - k8 elements, one by one:
 * the tile and the block pass both end here, so they round alike. */
KERNEL float float_finish(int wtype, __m256 acc, const uint8_t *row, const float *x, int64_t k8, int64_t k) {
    float s = hsum256(acc);
    for (int64_t e = k8; e < k; e++) s += load1(wtype, row, e) * x[e];
    return s;
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
    const int64_t ahead = okv_mm_float_ahead(c->wrow, NR);
    int64_t i = 0;
    /* two steps per prefetch: one per row and 32 or 64 bytes of weights */
    for (; i < k16; i += 16) {
        UNROLL for (int r = 0; r < NR; r++)
            _mm_prefetch((const char *)rows[r] + wsize * i + ahead, _MM_HINT_T1);
        float_step(wtype, rows, xs, NR, NC, i, acc);
        float_step(wtype, rows, xs, NR, NC, i + 8, acc);
    }
    for (; i < k8; i += 8) float_step(wtype, rows, xs, NR, NC, i, acc);
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = float_finish(wtype, acc[r][j], rows[r], xs[j], k8, k);
}

OKV_MM_FLOAT_TILES(KERNEL, OKV_TARGET_AVX2, avx2, float_tile)

/* The block pass for float weights (prefill), as AVX-512's (matmul_avx512.c):
 * each weight row is converted to f32 once per column block into a panel
 * (FP_ROWS rows of FP_K elements, 16 KiB, in L1; by the first column tile,
 * which writes it as it multiplies), instead of once per 4-column tile, and
 * tiles of 4 rows by 3 columns (12 accumulators, 3
 * activation registers and 1 weight register: all 16 that AVX2 has) run on
 * it with two loads per three FMAs, near the FMA rate.  The accumulators
 * are carried between panels in acc_buf.  Every output sees the same FMAs on
 * the same values in the same order as in float_tile (the conversion is
 * exact; panels cover k8 = k & ~7 and float_finish adds the rest), so the
 * results are bit-identical to the tile's, whatever n: the tests check. */
enum { FP_ROWS = 8, FP_K = 512, FP_TR = 4, FP_TC = 3 };

typedef struct fpanel {
    float *panel;         /* FP_ROWS rows of FP_K floats */
    const uint8_t *src;   /* the panel's weights as stored (row r at src + r * wrow) */
    int wtype;
    const float *x;       /* activations of column c0 at element kc */
    int64_t k;            /* column stride of x */
    int64_t len;          /* elements in this panel, a multiple of 8 */
    __m256 *acc_buf;      /* [FP_ROWS][MM_COL_BLOCK], column 0 = c0 */
    const uint8_t *next;  /* the next panel's weights (NULL: none): pf_rows rows */
    size_t wrow;          /* of pf_bytes each, wrow apart */
    int pf_rows;
    int64_t pf_bytes;
} fpanel;

/* Rows pr0 .. pr0+NR-1 of the panel by columns jb .. jb+NC-1 of the block.
 * The accumulators always come from and go back to acc_buf (a conditional
 * start or end keeps them in memory in the loop).  CONVERT (the block's
 * first column tile): the weights come from src and are written to the
 * panel on the way, for the tiles after it; a separate conversion pass
 * before the tiles was 6 % of an F16 prefill's samples (perf, Zen 3). */
KERNEL void fpanel_tile(const fpanel *p, int pr0, const int NR, int jb, const int NC, const bool CONVERT) {
    __m256 acc[FP_TR][FP_TC];
    const float *xs[FP_TC];
    float *ws[FP_TR];
    const uint8_t *src[FP_TR];
    UNROLL for (int r = 0; r < NR; r++) {
        ws[r] = p->panel + (pr0 + r) * FP_K;
        src[r] = p->src + (pr0 + r) * p->wrow;
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = p->acc_buf[(pr0 + r) * MM_COL_BLOCK + jb + j];
    }
    UNROLL for (int j = 0; j < NC; j++) xs[j] = p->x + (jb + j) * p->k;
    for (int64_t i = 0; i < p->len; i += 8) {
        __m256 xv[FP_TC];
        UNROLL for (int j = 0; j < NC; j++) xv[j] = _mm256_loadu_ps(xs[j] + i);
        UNROLL for (int r = 0; r < NR; r++) {
            __m256 wv;
            if (CONVERT) {
                wv = load8(p->wtype, src[r], i);
                _mm256_store_ps(ws[r] + i, wv);
            } else {
                wv = _mm256_load_ps(ws[r] + i);
            }
            /* one load per row, not one folded into each FMA */
            __asm__("" : "+x"(wv));
            UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm256_fmadd_ps(wv, xv[j], acc[r][j]);
        }
    }
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) p->acc_buf[(pr0 + r) * MM_COL_BLOCK + jb + j] = acc[r][j];
}

/* nr rows of the panel by nc columns (nc >= 10: fsmall_block takes fewer):
 * column tiles of 3, and of 2 for the last 2 or 4 columns (a 4x1 tile has 4
 * FMA chains, half the FMA rate at latency 4: 64 columns ended in one), each
 * over the panel's rows in strips of 4 (then 1), so a tile's activations are
 * read from L2 once and from L1 for the second strip. */
KERNEL void fpanel_pass(const fpanel *p, int nr, int nc) {
    /* The next panel's weights stream into L2 meanwhile, a few lines per
     * column tile of 3: all at once (128 lines), the prefetches filled the
     * line-fill buffers and stalled the tiles (5632x2048 at 85 GFLOP per
     * CPU second against 99 for 512 rows that stay in L2). */
    okv_mm_prefetch pf = okv_mm_prefetch_start(p->next, p->wrow, p->pf_rows, p->pf_bytes);
    const int nc3 = nc - (nc % FP_TC == 1 ? 4 : nc % FP_TC), tiles = nc3 / FP_TC;
    int j = 0;
    for (int t = 0; j < nc3; j += FP_TC, t++) {
        okv_mm_prefetch_until(&pf, pf.lines * (t + 1) / tiles);
        int r = 0;
        /* Two branches, so that CONVERT is a constant in each inlined
         * copy of fpanel_tile and the later tiles' loop has no test. */
        if (t == 0) {
            for (; r + FP_TR <= nr; r += FP_TR) fpanel_tile(p, r, FP_TR, j, FP_TC, true);
            for (; r < nr; r++) fpanel_tile(p, r, 1, j, FP_TC, true);
            continue;
        }
        for (; r + FP_TR <= nr; r += FP_TR) fpanel_tile(p, r, FP_TR, j, FP_TC, false);
        for (; r < nr; r++) fpanel_tile(p, r, 1, j, FP_TC, false);
    }
    for (; j < nc; j += 2) {
        int r = 0;
        for (; r + FP_TR <= nr; r += FP_TR) fpanel_tile(p, r, FP_TR, j, 2, false);
        for (; r < nr; r++) fpanel_tile(p, r, 1, j, 2, false);
    }
}

KERNEL void float_block(int wtype, const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, int64_t c0, int64_t c1) {
    _Alignas(32) float panel[FP_ROWS * FP_K];
    __m256 acc_buf[FP_ROWS * MM_COL_BLOCK];
    const int nc = (int)(c1 - c0);
    const int64_t k8 = c->k & ~(int64_t)7;
    const int64_t wbytes = wtype == OKV_GGML_F32 ? 4 : 2;
    for (int64_t r0 = r_begin; r0 < r_end; r0 += FP_ROWS) {
        const int nr = (int)(r_end - r0 < FP_ROWS ? r_end - r0 : FP_ROWS);
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < nc; j++) acc_buf[r * MM_COL_BLOCK + j] = _mm256_setzero_ps();
        for (int64_t kc = 0; kc < k8; kc += FP_K) {
            const int64_t len = k8 - kc < FP_K ? k8 - kc : FP_K;
            /* the next panel: this strip's next one or the next strip's first */
            const int64_t nk = kc + FP_K < k8 ? kc + FP_K : 0, nr0 = nk ? r0 : r0 + FP_ROWS;
            const int64_t nrows = r_end - nr0 < FP_ROWS ? r_end - nr0 : FP_ROWS;
            /* before the last panel, the line of y each column's outputs
             * go to (F16 prefill, Zen 5: 2-3% in three A-B pairs) */
            if (kc + FP_K >= k8)
                for (int j = 0; j < nc; j++) {
                    const float *y = c->y + (c0 + j) * c->rows + r0;
                    _mm_prefetch((const char *)y, _MM_HINT_T0);
                    _mm_prefetch((const char *)(y + nr - 1), _MM_HINT_T0);
                }
            const fpanel p = {.panel = panel, .src = c->w + r0 * c->wrow + kc * wbytes, .wtype = wtype,
                              .x = c->x + c0 * c->k + kc, .k = c->k, .len = len, .acc_buf = acc_buf,
                              .next = nrows > 0 ? c->w + nr0 * c->wrow + nk * wbytes : NULL, .wrow = c->wrow,
                              .pf_rows = (int)nrows, .pf_bytes = (k8 - nk < FP_K ? k8 - nk : FP_K) * wbytes};
            fpanel_pass(&p, nr, nc);
        }
        /* column by column: y is column-major, and stores that went row by
         * row, to nc lines in turn, stalled ~10% of an F16 prefill (perf on
         * a Zen 5: 90 -> 100 t/s) */
        for (int j = 0; j < nc; j++)
            for (int r = 0; r < nr; r++)
                c->y[(c0 + j) * c->rows + r0 + r] = float_finish(wtype, acc_buf[r * MM_COL_BLOCK + j],
                                                                 c->w + (r0 + r) * c->wrow, c->x + (c0 + j) * c->k, k8, c->k);
    }
}

/* Few columns (speculative verification, batched decode: 2 to
 * FS_MAX_N): the weights stream from memory once, and the 4x4 tiles
 * (16 accumulators, 4 activations and a weight: 21 registers) spilled and
 * converted each weight once per 4 columns.  Here a strip of NR rows takes
 * every column of the block at once: each 8-wide step converts the strip's
 * NR weight vectors once and, column by column, loads an activation
 * vector for NR FMAs (NR * NC accumulators, NR weights and one activation:
 * at most 16 registers for fsmall_block's shapes), or where the strip is
 * taller than wide holds the NC activations and converts a weight at a
 * time (NR * NC + NC + 1).  Each output gets float_tile's FMAs in
 * float_tile's order and float_finish, so the bits are the tile's. */
enum { FS_MAX_N = 9 };

KERNEL void fsmall_step(int wtype, const uint8_t *const *rows, const float *const *xs, const int NR, const int NC,
                        int64_t i, __m256 acc[4][FS_MAX_N]) {
    if (NR > NC) { /* 4x3: 16 registers this way, 17 the other */
        __m256 xv[FS_MAX_N];
        UNROLL for (int j = 0; j < NC; j++) xv[j] = _mm256_loadu_ps(xs[j] + i);
        UNROLL for (int r = 0; r < NR; r++) {
            const __m256 wv = load8(wtype, rows[r], i);
            UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm256_fmadd_ps(wv, xv[j], acc[r][j]);
        }
        return;
    }
    __m256 wv[4];
    UNROLL for (int r = 0; r < NR; r++) wv[r] = load8(wtype, rows[r], i);
    UNROLL for (int j = 0; j < NC; j++) {
        const __m256 xv = _mm256_loadu_ps(xs[j] + i);
        UNROLL for (int r = 0; r < NR; r++) acc[r][j] = _mm256_fmadd_ps(wv[r], xv, acc[r][j]);
    }
}

KERNEL void fsmall_strip(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const uint8_t *rows[4];
    const float *xs[FS_MAX_N];
    UNROLL for (int r = 0; r < NR; r++) rows[r] = c->w + (r0 + r) * c->wrow;
    UNROLL for (int j = 0; j < NC; j++) xs[j] = c->x + (c0 + j) * c->k;
    __m256 acc[4][FS_MAX_N];
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm256_setzero_ps();
    const int64_t k = c->k, k8 = k & ~(int64_t)7, k16 = k & ~(int64_t)15;
    const int64_t wsize = wtype == OKV_GGML_F32 ? 4 : 2;
    const int64_t ahead = okv_mm_float_ahead(c->wrow, NR);
    int64_t i = 0;
    /* two steps per prefetch, as float_tile */
    for (; i < k16; i += 16) {
        UNROLL for (int r = 0; r < NR; r++)
            _mm_prefetch((const char *)rows[r] + wsize * i + ahead, _MM_HINT_T1);
        fsmall_step(wtype, rows, xs, NR, NC, i, acc);
        fsmall_step(wtype, rows, xs, NR, NC, i + 8, acc);
    }
    for (; i < k8; i += 8) fsmall_step(wtype, rows, xs, NR, NC, i, acc);
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++)
            c->y[(c0 + j) * c->rows + r0 + r] = float_finish(wtype, acc[r][j], rows[r], xs[j], k8, k);
}

/* Rows r_begin .. r_end-1 in strips of NR (the rest one by one), by the NC
 * columns from c0. */
KERNEL void fsmall_rows(int wtype, const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, const int NR, int64_t c0,
                        const int NC) {
    int64_t r = r_begin;
    for (; r + NR <= r_end; r += NR) fsmall_strip(wtype, c, r, NR, c0, NC);
    for (; r < r_end; r++) fsmall_strip(wtype, c, r, 1, c0, NC);
}

/* Column counts of 7 and more in two sweeps over strips of FS_STRIP rows
 * (their weights then come from L2 the second time): one sweep at one row
 * per step loaded the activations once per FMA. */
enum { FS_STRIP = 12 };

/* The strip height per column count that keeps fsmall_step within the 16
 * registers (more rows: fewer activation loads per FMA). */
KERNEL void fsmall_block(int wtype, const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const int64_t n = c1 - c0;
    if (n <= 6) {
        switch (n) {
        case 1: fsmall_rows(wtype, c, r0, r1, 4, c0, 1); break;
        case 2: fsmall_rows(wtype, c, r0, r1, 4, c0, 2); break;
        case 3: fsmall_rows(wtype, c, r0, r1, 4, c0, 3); break;
        case 4: fsmall_rows(wtype, c, r0, r1, 3, c0, 4); break;
        case 5: fsmall_rows(wtype, c, r0, r1, 2, c0, 5); break;
        default: fsmall_rows(wtype, c, r0, r1, 2, c0, 6); break;
        }
        return;
    }
    for (int64_t r = r0; r < r1; r += FS_STRIP) {
        const int64_t re = r1 - r < FS_STRIP ? r1 : r + FS_STRIP;
        fsmall_rows(wtype, c, r, re, 3, c0, 4);
        switch (n) {
        case 7: fsmall_rows(wtype, c, r, re, 4, c0 + 4, 3); break;
        case 8: fsmall_rows(wtype, c, r, re, 3, c0 + 4, 4); break;
        default: fsmall_rows(wtype, c, r, re, 2, c0 + 4, 5); break;
        }
    }
}

/* The block pass of the float types: fsmall_block up to FS_MAX_N columns
 * (matmul.c sends a single column to the tiles), float_block's panels from
 * there on (a short last column block of a wide product included: the bits
 * are the same either way). */
#define FLOAT_BLOCK(kind, wtype)                                                                    \
    OKV_TARGET_AVX2 void okv_mm_block_##kind##_avx2(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, \
                                                   int64_t c1) {                                     \
        if (c1 - c0 <= FS_MAX_N) fsmall_block(wtype, c, r0, r1, c0, c1);                            \
        else float_block(wtype, c, r0, r1, c0, c1);                                                  \
    }
FLOAT_BLOCK(f32, OKV_GGML_F32)
FLOAT_BLOCK(f16, OKV_GGML_F16)
FLOAT_BLOCK(bf16, OKV_GGML_BF16)

/* ---- The legacy formats beside Q4_0 and Q8_0 ---- */

/* Prefetch distance along the weights, as in the AVX-512 kernels
 * (matmul_avx512_tmpl.h says how it was chosen). */
enum { AHEAD = 8192 };

/* 32 bytes, 0xFF where bit j of the 4 bytes at p is set (ggml's
 * bytes_from_bits_32). */
KERNEL __m256i bytes_from_bits(const uint8_t *p) {
    uint32_t x32;
    memcpy(&x32, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x32), shuf);
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

/* Values 0-15 of a 32-value block in the low 128 bits, 16-31 in the high:
 * the low and high nibbles of qs, with the fifth bits of qh (if any). */
KERNEL __m256i legacy_values(const uint8_t *qs, const uint8_t *qh) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
                                 _mm256_set1_epi8(0x0F));
    if (qh) v = _mm256_or_si256(v, _mm256_and_si256(bytes_from_bits(qh), _mm256_set1_epi8(0x10)));
    return v;
}

/* Q5_0 against Q8_0 activations: values (5 bits) - 16, so subtract 16 * x
 * once per column, as q4_0_tile does with 8. */
KERNEL void q5_0_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i sixteen = _mm256_set1_epi8(16);
    __m256 acc[MM_TR][MM_TC];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) acc[r][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[MM_TC], x16[MM_TC];
        __m256 sx[MM_TC];
        for (int j = 0; j < NC; j++) {
            xv[j] = _mm256_loadu_si256((const __m256i *)(c->xq + (c0 + j) * c->k + b * OKV_QK));
            x16[j] = _mm256_maddubs_epi16(sixteen, xv[j]);
            sx[j] = _mm256_set1_ps(c->xd[(c0 + j) * nb + b]);
        }
        for (int r = 0; r < NR; r++) {
            const block_q5_0 *blk = (const block_q5_0 *)(c->w + (r0 + r) * c->wrow) + b;
            _mm_prefetch((const char *)blk + AHEAD, _MM_HINT_T1);
            const __m256i wq = legacy_values(blk->qs, blk->qh);
            const __m256 sw = block_scale(blk->d);
            for (int j = 0; j < NC; j++) {
                const __m256i p = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(wq, xv[j]), x16[j]), ones);
                acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, sx[j]), acc[r][j]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = hsum256(acc[r][j]);
}

/* Q4_1 and Q5_1 against Q8_1 activations: (dw * dx) * sum(q x) per block in
 * the vector accumulator, the offsets' m * s in a scalar one. */
KERNEL void q_1_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    const int five = wtype == OKV_GGML_Q5_1;
    const size_t bsz = five ? sizeof(block_q5_1) : sizeof(block_q4_1);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[MM_TR][MM_TC];
    float accm[MM_TR][MM_TC];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) { acc[r][j] = _mm256_setzero_ps(); accm[r][j] = 0.0f; }
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[MM_TC];
        float dx[MM_TC], sx[MM_TC];
        for (int j = 0; j < NC; j++) {
            const block_q8_1 *y = (const block_q8_1 *)(c->xa + (c0 + j) * c->xa_col) + b;
            xv[j] = _mm256_loadu_si256((const __m256i *)y->qs);
            dx[j] = _cvtsh_ss(y->d);
            sx[j] = _cvtsh_ss(y->s);
        }
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = c->w + (r0 + r) * c->wrow + (size_t)b * bsz;
            _mm_prefetch((const char *)blk + AHEAD, _MM_HINT_T1);
            okv_f16 hd, hm;
            memcpy(&hd, blk, 2);
            memcpy(&hm, blk + 2, 2);
            const __m256i wq = five ? legacy_values(blk + 8, blk + 4) : legacy_values(blk + 4, NULL);
            const float dw = _cvtsh_ss(hd), mw = _cvtsh_ss(hm);
            for (int j = 0; j < NC; j++) {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xv[j]), ones);
                acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * dx[j]), acc[r][j]);
                accm[r][j] += mw * sx[j];
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = hsum256(acc[r][j]) + accm[r][j];
}

KERNEL void q4_1_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    q_1_tile(OKV_GGML_Q4_1, c, r0, NR, c0, NC);
}
KERNEL void q5_1_tile(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    q_1_tile(OKV_GGML_Q5_1, c, r0, NR, c0, NC);
}

/* ---- K-quants: 256-value super-blocks against Q8_K activations ----
 *
 * Per super-block and column the integer sum of scale * value * x over its
 * sub-blocks (maddubs pairs, then madd with the scales), exact in int32;
 * offsets (Q6_K's 32, Q3_K's 4) and mins meet the activations' bsums
 * instead of every value.  Then, as the scalar kernel, in float:
 * acc += (d * dx) * sum, acc -= (dmin * dx) * mins, per lane. */

KERNEL const block_q8_K *act_k(const okv_mm_ctx *c, int64_t col, int64_t b) {
    return (const block_q8_K *)(c->xa + col * c->xa_col) + b;
}

KERNEL void prefetch_block(const void *blk, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)blk + AHEAD + o, _MM_HINT_T1);
}

/* Scales of 16-value groups g and g+1 as 16 int16 (8 each), from 16 int8. */
KERNEL __m256i scale_pair(__m128i sc8, int g) {
    const __m128i idx = _mm_add_epi8(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), _mm_set1_epi8((char)g));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, idx));
}

/* The tile loop shared by the K-quants: DOT(x, y, sumi, mins, NC) sets
 * sumi[j] to each column's integer sum for weight block x (8 int32 lanes)
 * and mins[j] to the mins' integer sums (zero for the symmetric formats);
 * DMIN(x) is the block's dmin where HAS_MIN. */
#define KQ_TILE(name, block_t, DOT, HAS_MIN, DMIN)                                                          \
    KERNEL void name(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {       \
        const int64_t nb = c->k / OKV_QK_K;                                                           \
        __m256 acc[MM_TR][MM_TC];                                                                     \
        for (int r = 0; r < NR; r++)                                                                  \
            for (int j = 0; j < NC; j++) acc[r][j] = _mm256_setzero_ps();                             \
        for (int64_t b = 0; b < nb; b++) {                                                            \
            const block_q8_K *y[MM_TC];                                                               \
            for (int j = 0; j < NC; j++) y[j] = act_k(c, c0 + j, b);                                  \
            for (int r = 0; r < NR; r++) {                                                            \
                const block_t *x = (const block_t *)(c->w + (r0 + r) * c->wrow) + b;                  \
                prefetch_block(x, sizeof *x);                                                         \
                __m256i sumi[MM_TC], mins[MM_TC];                                                     \
                DOT(x, y, sumi, mins, NC);                                                            \
                const float dw = _cvtsh_ss(x->d);                                                     \
                for (int j = 0; j < NC; j++) {                                                        \
                    acc[r][j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y[j]->d), _mm256_cvtepi32_ps(sumi[j]), \
                                                acc[r][j]);                                           \
                    if (HAS_MIN)                                                                      \
                        acc[r][j] = _mm256_fmadd_ps(_mm256_set1_ps(-(DMIN(x) * y[j]->d)),  \
                                                    _mm256_cvtepi32_ps(mins[j]), acc[r][j]);          \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        for (int r = 0; r < NR; r++)                                                                  \
            for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = hsum256(acc[r][j]);      \
    }

/* The mins (or scales, for an offset) of the 16 groups against the
 * activations' 16 bsums: 8 int32 lanes. */
KERNEL __m256i with_bsums(__m256i per_group16, const block_q8_K *y) {
    return _mm256_madd_epi16(per_group16, _mm256_loadu_si256((const __m256i *)y->bsums));
}

/* Q4_K: sub-blocks of 32, 64 values per step: low nibbles (sub 2q), high
 * nibbles (sub 2q+1) of 32 bytes; Q5_K adds bit 2q / 2q+1 of qh. */
KERNEL void q45_K_dot(const uint8_t *qs, const uint8_t *qh, const uint8_t *scales, const block_q8_K *const *y,
                      __m256i *sumi, __m256i *mins, const int NC) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m128i sm = kq_q4_K_scales_mins(scales);
    /* the scales as int16 in both 128-bit lanes, for broadcasts by shuffle */
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    /* mins per 16-value group (each sub-block's twice) for the bsums */
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    const __m256i hbits = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    for (int j = 0; j < NC; j++) {
        sumi[j] = _mm256_setzero_si256();
        mins[j] = with_bsums(mn16, y[j]);
    }
    for (int q = 0; q < 4; q++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(qs + 32 * q));
        __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        if (qh) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * q), one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * q + 1), one), 4));
        }
        const __m256i sl = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(4 * q | (4 * q + 1) << 8)));
        const __m256i sh = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)((4 * q + 2) | (4 * q + 3) << 8)));
        for (int j = 0; j < NC; j++) {
            const __m256i xl = _mm256_loadu_si256((const __m256i *)(y[j]->qs + 64 * q));
            const __m256i xh = _mm256_loadu_si256((const __m256i *)(y[j]->qs + 64 * q + 32));
            const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(sl, _mm256_maddubs_epi16(lo, xl)),
                                               _mm256_madd_epi16(sh, _mm256_maddubs_epi16(hi, xh)));
            sumi[j] = _mm256_add_epi32(sumi[j], p);
        }
    }
}

#define Q4_K_DOT(x, y, sumi, mins, NC) q45_K_dot((x)->qs, NULL, (x)->scales, y, sumi, mins, NC)
#define Q5_K_DOT(x, y, sumi, mins, NC) q45_K_dot((x)->qs, (x)->qh, (x)->scales, y, sumi, mins, NC)

/* Q6_K: per half, four 32-value vectors of 6-bit values (0..63) from the
 * nibbles of ql and the bit pairs of qh; the -32 offset is taken off
 * through the bsums: sum sc (q - 32) x = sum sc q x - 32 sum_g sc_g bsum_g. */
KERNEL void q6_K_dot(const block_q6_K *x, const block_q8_K *const *y, __m256i *sumi, __m256i *mins, const int NC) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)x->scales);
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    for (int j = 0; j < NC; j++) {
        sumi[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(with_bsums(sc16, y[j]), 5));
        mins[j] = _mm256_setzero_si256();
    }
    for (int h = 0; h < 2; h++) {
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));
        const __m256i b2 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32));
        const __m256i bh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(b1, m4), _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4));
        q[1] = _mm256_or_si256(_mm256_and_si256(b2, m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4));
        for (int i = 0; i < 4; i++) {
            const __m256i s = scale_pair(sc8, 8 * h + 2 * i);
            for (int j = 0; j < NC; j++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(y[j]->qs + 128 * h + 32 * i));
                sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(s, _mm256_maddubs_epi16(q[i], xv)));
            }
        }
    }
}

#define Q6_K_DOT(x, y, sumi, mins, NC) q6_K_dot(x, y, sumi, mins, NC)

/* Q3_K: value = low 2 bits + 4 * high bit - 4, the -4 through the bsums;
 * per half (qs[32h..]), bit pair s of qs and bit 4h + s of hmask give
 * groups 8h + 2s and 8h + 2s + 1. */
KERNEL void q3_K_dot(const block_q3_K *x, const block_q8_K *const *y, __m256i *sumi, __m256i *mins, const int NC) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m128i sc8 = kq_q3_K_scales(x->scales);
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)x->hmask);
    for (int j = 0; j < NC; j++) {
        sumi[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(with_bsums(sc16, y[j]), 2));
        mins[j] = _mm256_setzero_si256();
    }
    for (int h = 0; h < 2; h++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        for (int s = 0; s < 4; s++) {
            const __m256i q = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), one), 2));
            const __m256i sc = scale_pair(sc8, 8 * h + 2 * s);
            for (int j = 0; j < NC; j++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(y[j]->qs + 128 * h + 32 * s));
                sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(sc, _mm256_maddubs_epi16(q, xv)));
            }
        }
    }
}

#define Q3_K_DOT(x, y, sumi, mins, NC) q3_K_dot(x, y, sumi, mins, NC)

/* Q2_K: 2-bit values with scale (low nibble) and min (high nibble) per 16;
 * groups as Q3_K's. */
KERNEL void q2_K_dot(const block_q2_K *x, const block_q8_K *const *y, __m256i *sumi, __m256i *mins, const int NC) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i raw = _mm_loadu_si128((const __m128i *)x->scales);
    const __m128i sc8 = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
    for (int j = 0; j < NC; j++) {
        sumi[j] = _mm256_setzero_si256();
        mins[j] = with_bsums(mn16, y[j]);
    }
    for (int h = 0; h < 2; h++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        for (int s = 0; s < 4; s++) {
            const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
            const __m256i sc = scale_pair(sc8, 8 * h + 2 * s);
            for (int j = 0; j < NC; j++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(y[j]->qs + 128 * h + 32 * s));
                sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(sc, _mm256_maddubs_epi16(q, xv)));
            }
        }
    }
}

#define Q2_K_DOT(x, y, sumi, mins, NC) q2_K_dot(x, y, sumi, mins, NC)

#define DMIN_OF(x) _cvtsh_ss((x)->dmin)
#define NO_DMIN(x) 0.0f
KQ_TILE(q2_K_tile, block_q2_K, Q2_K_DOT, 1, DMIN_OF)
KQ_TILE(q3_K_tile, block_q3_K, Q3_K_DOT, 0, NO_DMIN)
KQ_TILE(q4_K_tile, block_q4_K, Q4_K_DOT, 1, DMIN_OF)
KQ_TILE(q5_K_tile, block_q5_K, Q5_K_DOT, 1, DMIN_OF)
KQ_TILE(q6_K_tile, block_q6_K, Q6_K_DOT, 0, NO_DMIN)

OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q4_1_avx2, q4_1_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q5_0_avx2, q5_0_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q5_1_avx2, q5_1_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q2_K_avx2, q2_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q3_K_avx2, q3_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q4_K_avx2, q4_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q5_K_avx2, q5_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX2, okv_mm_tile_q6_K_avx2, q6_K_tile)
