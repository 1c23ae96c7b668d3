/* AVX-512 tile kernels, included twice by matmul_avx512.c: once for
 * AVX-512BW (USE_VNNI 0) and once with VNNI (USE_VNNI 1).  Quantized kernels
 * take two 32-value blocks per 512-bit register; both variants produce the
 * same int32 lanes (exact), hence bit-identical outputs.
 * Expects TARGET, USE_VNNI, NAME(x) (its helpers) and TILE_NAME(t) (the
 * exported tile of type t) to be defined. */

#define KERNEL static inline __attribute__((always_inline)) TARGET

#ifndef PREFETCH_AHEAD
/* Software prefetch distance along the weights, into L2.  The hardware
 * prefetcher alone left Q8_0/Q4_0 decode at ~60% of the read bandwidth
 * that F16 gets; 512 bytes ahead into L1 helped a little (Q8_0 6.6 -> 9-11
 * GB/s on one core).  8 KiB ahead into L2 (a few rows ahead: the rows of a
 * matrix are contiguous) keeps enough lines in flight to cover DRAM
 * latency: decode tg64 at 2 threads, Q4_0 25.8 -> 34-39 t/s, Q8_0 17.1 ->
 * 20.7 (same-session A/B; 4 KiB gave less, 16 KiB the same). */
#define PREFETCH_AHEAD 8192
#endif

/* Two block scales, one per 256-bit half. */
KERNEL __m512 NAME(scale2)(float d0, float d1) {
    return _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
}

/* The same from two f16 scales in memory: two word broadcasts and one
 * conversion cost fewer shuffle-port operations than two scalar conversions
 * and an insert (d1 may be NULL: upper half 0). */
KERNEL __m512 NAME(wscale2)(const okv_f16 *d0, const okv_f16 *d1) {
    __m256i h = _mm256_broadcastw_epi16(_mm_loadu_si16(d0));
    h = d1 ? _mm256_mask_broadcastw_epi16(h, 0xFF00, _mm_loadu_si16(d1))
           : _mm256_maskz_mov_epi16(0x00FF, h);
    return _mm512_cvtph_ps(h);
}

/* One step over blocks b and b+1 (TWO = 1) or the last block b alone
 * (TWO = 0, upper half zero, adding exactly nothing). */
KERNEL void NAME(q8_0_step)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC,
                            int64_t b, const int TWO, __m512 acc[MM_TR][MM_TC]) {
    const int64_t nb = c->k / OKV_QK;
    __m512i xv[MM_TC];
#if USE_VNNI
    __m512i xc[MM_TC];
#endif
    __m512 sx[MM_TC];
    for (int j = 0; j < NC; j++) {
        const int8_t *xq = c->xq + (c0 + j) * c->k + b * OKV_QK;
        const float *xd = c->xd + (c0 + j) * nb + b;
        xv[j] = TWO ? _mm512_loadu_si512(xq) : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)xq));
        sx[j] = NAME(scale2)(xd[0], TWO ? xd[1] : 0.0f);
#if USE_VNNI
        /* weights go in offset by 128 (unsigned); take 128 * x off per column */
        xc[j] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                 _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), xv[j]));
#endif
    }
    for (int r = 0; r < NR; r++) {
        const block_q8_0 *blk = (const block_q8_0 *)(c->w + (r0 + r) * c->wrow) + b;
        _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T1);
        const __m512i lo = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)blk[0].qs));
        const __m512i wv = TWO ? _mm512_inserti64x4(lo, _mm256_loadu_si256((const __m256i *)blk[1].qs), 1) : lo;
        const __m512 sw = NAME(wscale2)(&blk[0].d, TWO ? &blk[1].d : NULL);
#if USE_VNNI
        /* sum (w+128) x - 128 sum x = sum w x, exactly, in each 4-byte lane */
        const __m512i wu = _mm512_xor_si512(wv, _mm512_set1_epi8((char)0x80));
        for (int j = 0; j < NC; j++) {
            const __m512i p = _mm512_dpbusd_epi32(xc[j], wu, xv[j]);
            acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, sx[j]), acc[r][j]);
        }
#else
        /* |w| * (x with w's sign): maddubs needs one unsigned side; pairs
         * stay within int16 since |w| <= 128 and |x| <= 127 */
        const __m512i wa = _mm512_abs_epi8(wv);
        const __mmask64 neg = _mm512_movepi8_mask(wv);
        const __m512i ones = _mm512_set1_epi16(1);
        for (int j = 0; j < NC; j++) {
            const __m512i xs = _mm512_mask_sub_epi8(xv[j], neg, _mm512_setzero_si512(), xv[j]);
            const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(wa, xs), ones);
            acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, sx[j]), acc[r][j]);
        }
#endif
    }
}

KERNEL void NAME(q8_0_tile)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    __m512 acc[MM_TR][MM_TC];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) acc[r][j] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) NAME(q8_0_step)(c, r0, NR, c0, NC, b, 1, acc);
    if (b < nb) NAME(q8_0_step)(c, r0, NR, c0, NC, b, 0, acc);
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc[r][j]);
}

KERNEL void NAME(q4_0_step)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC,
                            int64_t b, const int TWO, __m512 acc[MM_TR][MM_TC]) {
    const int64_t nb = c->k / OKV_QK;
    const __m512i eight = _mm512_set1_epi8(8);
    __m512i xv[MM_TC], x8[MM_TC];
    __m512 sx[MM_TC];
    for (int j = 0; j < NC; j++) {
        const int8_t *xq = c->xq + (c0 + j) * c->k + b * OKV_QK;
        const float *xd = c->xd + (c0 + j) * nb + b;
        xv[j] = TWO ? _mm512_loadu_si512(xq) : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)xq));
        sx[j] = NAME(scale2)(xd[0], TWO ? xd[1] : 0.0f);
        /* the stored nibbles are value + 8: take 8 * x off once per column */
#if USE_VNNI
        x8[j] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                 _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, xv[j]));
#else
        x8[j] = _mm512_maddubs_epi16(eight, xv[j]);
#endif
    }
    /* 128-bit lanes: [q0, q0 >> 4, q1, q1 >> 4] & 15 = block b's values 0-15,
     * 16-31, then block b+1's */
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int r = 0; r < NR; r++) {
        const block_q4_0 *blk = (const block_q4_0 *)(c->w + (r0 + r) * c->wrow) + b;
        _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T1);
        const __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)blk[0].qs));
        const __m256i q1 = TWO ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)blk[1].qs))
                               : _mm256_setzero_si256();
        const __m512i wq = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), shifts), low4);
        const __m512 sw = NAME(wscale2)(&blk[0].d, TWO ? &blk[1].d : NULL);
        for (int j = 0; j < NC; j++) {
#if USE_VNNI
            const __m512i p = _mm512_dpbusd_epi32(x8[j], wq, xv[j]);
#else
            const __m512i p = _mm512_madd_epi16(_mm512_sub_epi16(_mm512_maddubs_epi16(wq, xv[j]), x8[j]),
                                                _mm512_set1_epi16(1));
#endif
            acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, sx[j]), acc[r][j]);
        }
    }
}

KERNEL void NAME(q4_0_tile)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    __m512 acc[MM_TR][MM_TC];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) acc[r][j] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) NAME(q4_0_step)(c, r0, NR, c0, NC, b, 1, acc);
    if (b < nb) NAME(q4_0_step)(c, r0, NR, c0, NC, b, 0, acc);
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc[r][j]);
}

/* MXFP4 against Q8_0 activations: the nibbles (as Q4_0's) index
 * okv_mxfp4_values by a byte shuffle, then as q8_0_step; the scales are
 * 2^(e - 128). */
KERNEL void NAME(mxfp4_step)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC,
                             int64_t b, const int TWO, __m512 acc[MM_TR][MM_TC]) {
    const int64_t nb = c->k / OKV_QK;
    __m512i xv[MM_TC];
#if USE_VNNI
    __m512i xc[MM_TC];
#endif
    __m512 sx[MM_TC];
    for (int j = 0; j < NC; j++) {
        const int8_t *xq = c->xq + (c0 + j) * c->k + b * OKV_QK;
        const float *xd = c->xd + (c0 + j) * nb + b;
        xv[j] = TWO ? _mm512_loadu_si512(xq) : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)xq));
        sx[j] = NAME(scale2)(xd[0], TWO ? xd[1] : 0.0f);
#if USE_VNNI
        xc[j] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                 _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), xv[j]));
#endif
    }
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)okv_mxfp4_values));
    for (int r = 0; r < NR; r++) {
        const block_mxfp4 *blk = (const block_mxfp4 *)(c->w + (r0 + r) * c->wrow) + b;
        _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T1);
        const __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)blk[0].qs));
        const __m256i q1 = TWO ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)blk[1].qs))
                               : _mm256_setzero_si256();
        const __m512i idx = _mm512_and_si512(
            _mm512_srlv_epi64(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), shifts), low4);
        /* a lone last block's upper half indexes value 0 (zero) */
        const __m512i wv = _mm512_shuffle_epi8(table, idx);
        const __m512 sw = NAME(scale2)(okv_e8m0_half(blk[0].e), TWO ? okv_e8m0_half(blk[1].e) : 0.0f);
#if USE_VNNI
        const __m512i wu = _mm512_xor_si512(wv, _mm512_set1_epi8((char)0x80));
        for (int j = 0; j < NC; j++) {
            const __m512i p = _mm512_dpbusd_epi32(xc[j], wu, xv[j]);
            acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, sx[j]), acc[r][j]);
        }
#else
        const __m512i wa = _mm512_abs_epi8(wv);
        const __mmask64 neg = _mm512_movepi8_mask(wv);
        const __m512i ones = _mm512_set1_epi16(1);
        for (int j = 0; j < NC; j++) {
            const __m512i xs = _mm512_mask_sub_epi8(xv[j], neg, _mm512_setzero_si512(), xv[j]);
            const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(wa, xs), ones);
            acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, sx[j]), acc[r][j]);
        }
#endif
    }
}

KERNEL void NAME(mxfp4_tile)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    __m512 acc[MM_TR][MM_TC];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) acc[r][j] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) NAME(mxfp4_step)(c, r0, NR, c0, NC, b, 1, acc);
    if (b < nb) NAME(mxfp4_step)(c, r0, NR, c0, NC, b, 0, acc);
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc[r][j]);
}

/* The legacy formats with a fifth bit or an offset, two blocks per step as
 * Q4_0: values in the same byte order (block b's 0-31, then block b+1's). */

/* The values of blocks b and b+1 (TWO) from their nibbles and, unless qh0
 * is NULL (Q4_1), the fifth bits of their qh words (bit j for value j: one
 * 64-bit mask). */
KERNEL __m512i NAME(q5_values)(const uint8_t *qs0, const uint8_t *qh0, const uint8_t *qs1, const uint8_t *qh1,
                               const int TWO) {
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs0));
    const __m256i q1 = TWO ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs1)) : _mm256_setzero_si256();
    const __m512i wq = _mm512_and_si512(
        _mm512_srlv_epi64(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), shifts), _mm512_set1_epi8(0x0F));
    if (!qh0) return wq;
    uint32_t h0, h1 = 0;
    memcpy(&h0, qh0, 4);
    if (TWO) memcpy(&h1, qh1, 4);
    return _mm512_or_si512(wq, _mm512_maskz_mov_epi8((__mmask64)h0 | (__mmask64)h1 << 32, _mm512_set1_epi8(0x10)));
}

/* Q5_0 against Q8_0 activations: as q4_0_step, with 16 for the offset. */
KERNEL void NAME(q5_0_step)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC,
                            int64_t b, const int TWO, __m512 acc[MM_TR][MM_TC]) {
    const int64_t nb = c->k / OKV_QK;
    const __m512i sixteen = _mm512_set1_epi8(16);
    __m512i xv[MM_TC], x16[MM_TC];
    __m512 sx[MM_TC];
    for (int j = 0; j < NC; j++) {
        const int8_t *xq = c->xq + (c0 + j) * c->k + b * OKV_QK;
        const float *xd = c->xd + (c0 + j) * nb + b;
        xv[j] = TWO ? _mm512_loadu_si512(xq) : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)xq));
        sx[j] = NAME(scale2)(xd[0], TWO ? xd[1] : 0.0f);
#if USE_VNNI
        x16[j] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), sixteen, xv[j]));
#else
        x16[j] = _mm512_maddubs_epi16(sixteen, xv[j]);
#endif
    }
    for (int r = 0; r < NR; r++) {
        const block_q5_0 *blk = (const block_q5_0 *)(c->w + (r0 + r) * c->wrow) + b;
        _mm_prefetch((const char *)blk + PREFETCH_AHEAD, _MM_HINT_T1);
        const __m512i wq = NAME(q5_values)(blk[0].qs, blk[0].qh, TWO ? blk[1].qs : NULL, TWO ? blk[1].qh : NULL, TWO);
        const __m512 sw = NAME(wscale2)(&blk[0].d, TWO ? &blk[1].d : NULL);
        for (int j = 0; j < NC; j++) {
#if USE_VNNI
            const __m512i p = _mm512_dpbusd_epi32(x16[j], wq, xv[j]);
#else
            const __m512i p = _mm512_madd_epi16(_mm512_sub_epi16(_mm512_maddubs_epi16(wq, xv[j]), x16[j]),
                                                _mm512_set1_epi16(1));
#endif
            acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, sx[j]), acc[r][j]);
        }
    }
}

/* Q4_1 and Q5_1 against Q8_1 activations: the unsigned values times x, and
 * m * s once per block, in lanes 0 and 8 (one per block). */
KERNEL void NAME(q_1_step)(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC,
                           int64_t b, const int TWO, __m512 acc[MM_TR][MM_TC]) {
    const int five = wtype == OKV_GGML_Q5_1;
    const size_t bsz = five ? sizeof(block_q5_1) : sizeof(block_q4_1);
    __m512i xv[MM_TC];
    __m512 sx[MM_TC], ss[MM_TC];
    for (int j = 0; j < NC; j++) {
        const block_q8_1 *y = (const block_q8_1 *)(c->xa + (c0 + j) * c->xa_col) + b;
        const __m256i lo = _mm256_loadu_si256((const __m256i *)y[0].qs);
        xv[j] = TWO ? _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *)y[1].qs), 1)
                    : _mm512_zextsi256_si512(lo);
        sx[j] = NAME(wscale2)(&y[0].d, TWO ? &y[1].d : NULL);
        ss[j] = NAME(wscale2)(&y[0].s, TWO ? &y[1].s : NULL);
    }
    for (int r = 0; r < NR; r++) {
        const uint8_t *b0 = c->w + (r0 + r) * c->wrow + (size_t)b * bsz, *b1 = b0 + bsz;
        _mm_prefetch((const char *)b0 + PREFETCH_AHEAD, _MM_HINT_T1);
        const __m512i wq = five ? NAME(q5_values)(b0 + 8, b0 + 4, b1 + 8, b1 + 4, TWO)
                                : NAME(q5_values)(b0 + 4, NULL, b1 + 4, NULL, TWO);
        const __m512 sw = NAME(wscale2)((const okv_f16 *)b0, TWO ? (const okv_f16 *)b1 : NULL);
        const __m512 sm = NAME(wscale2)((const okv_f16 *)(b0 + 2), TWO ? (const okv_f16 *)(b1 + 2) : NULL);
        for (int j = 0; j < NC; j++) {
#if USE_VNNI
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, xv[j]);
#else
            const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(wq, xv[j]), _mm512_set1_epi16(1));
#endif
            acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, sx[j]), acc[r][j]);
            acc[r][j] = _mm512_mask3_fmadd_ps(sm, ss[j], acc[r][j], 0x0101);
        }
    }
}

#define NAME_LEGACY_TILE(T, STEP)                                                                    \
    KERNEL void NAME(T##_tile)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) { \
        const int64_t nb = c->k / OKV_QK;                                                            \
        __m512 acc[MM_TR][MM_TC];                                                                    \
        for (int r = 0; r < NR; r++)                                                                 \
            for (int j = 0; j < NC; j++) acc[r][j] = _mm512_setzero_ps();                            \
        int64_t b = 0;                                                                               \
        for (; b + 2 <= nb; b += 2) STEP(c, r0, NR, c0, NC, b, 1, acc);                              \
        if (b < nb) STEP(c, r0, NR, c0, NC, b, 0, acc);                                              \
        for (int r = 0; r < NR; r++)                                                                 \
            for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc[r][j]); \
    }
#define Q4_1_STEP(...) NAME(q_1_step)(OKV_GGML_Q4_1, __VA_ARGS__)
#define Q5_1_STEP(...) NAME(q_1_step)(OKV_GGML_Q5_1, __VA_ARGS__)
NAME_LEGACY_TILE(q5_0, NAME(q5_0_step))
NAME_LEGACY_TILE(q4_1, Q4_1_STEP)
NAME_LEGACY_TILE(q5_1, Q5_1_STEP)
#undef Q4_1_STEP
#undef Q5_1_STEP
#undef NAME_LEGACY_TILE

OKV_MM_DISPATCH(TARGET, TILE_NAME(q8_0), NAME(q8_0_tile))
OKV_MM_DISPATCH(TARGET, TILE_NAME(q4_0), NAME(q4_0_tile))
OKV_MM_DISPATCH(TARGET, TILE_NAME(mxfp4), NAME(mxfp4_tile))
OKV_MM_DISPATCH(TARGET, TILE_NAME(q5_0), NAME(q5_0_tile))
OKV_MM_DISPATCH(TARGET, TILE_NAME(q4_1), NAME(q4_1_tile))
OKV_MM_DISPATCH(TARGET, TILE_NAME(q5_1), NAME(q5_1_tile))

#undef KERNEL
