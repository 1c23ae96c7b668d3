/* aarch64 tile kernels for ggml's own layouts (Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, MXFP4 and the K-quants), included twice by matmul_neon_q.c: once
 * for NEON (ARMv8.0, DOT 0) and once for DOTPROD (DOT 1).  Expects TARGET,
 * DOT and NAME(x) to be defined.
 *
 * Each kernel is matmul_scalar.c's, with the same loops (block, row,
 * column) and the same float expression per block; only the integer sums
 * are vectorized (a row's block is unpacked once for the tile's columns):
 *  - DOTPROD: SDOT, four products per int32 lane;
 *  - NEON: SMULL + SMLAL2 (two products per int16 lane: |w| <= 128 and
 *    |x| <= 127 keep them under 2^15), then SADDLP/SADALP into int32.
 * Integer sums are exact in any order, so every level gives the scalar
 * kernel's bits for any tile shape, hence for any number of columns. */

#define KERNEL static inline __attribute__((always_inline)) TARGET

/* The int32x4 of the 16-value group sums w[g] . x[g], g = 0..3, in lanes
 * 0..3. */
KERNEL int32x4_t NAME(dot16x4)(const int8x16_t w[4], const int8x16_t x[4]) {
    int32x4_t p[4];
    for (int g = 0; g < 4; g++) {
#if DOT
        p[g] = vdotq_s32(vdupq_n_s32(0), w[g], x[g]);
#else
        p[g] = vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(w[g]), vget_low_s8(x[g])), w[g], x[g]));
#endif
    }
    return vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
}

/* The sum of 32 products w0 . x0 + w1 . x1. */
KERNEL int32_t NAME(dot32)(int8x16_t w0, int8x16_t w1, const int8_t *x) {
#if DOT
    return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8(x)), w1, vld1q_s8(x + 16)));
#else
    const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
    const int16x8_t a = vmlal_high_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)), w0, x0);
    const int16x8_t b = vmlal_high_s8(vmull_s8(vget_low_s8(w1), vget_low_s8(x1)), w1, x1);
    return vaddvq_s32(vpadalq_s16(vpaddlq_s16(a), b));
#endif
}

/* Q8_0, Q4_0, Q5_0 and MXFP4 against Q8_0 activations:
 *   acc += dw * dx * (float)sum,
 * and Q4_1, Q5_1 against Q8_1 ones:
 *   acc += dw * dx * (float)sum + m * s. */
KERNEL void NAME(legacy_tile)(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK;
    const size_t bsz = okv_ggml_type_size(wtype);
    const int q8_1 = wtype == OKV_GGML_Q4_1 || wtype == OKV_GGML_Q5_1;
    float acc[MM_TR][MM_TC] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = c->w + (r0 + r) * c->wrow + (size_t)b * bsz;
            __builtin_prefetch(blk + OKV_NEON_AHEAD);
            int8x16_t w0, w1;
            float dw, mw;
            okv_neon_legacy_decode(wtype, blk, &w0, &w1, &dw, &mw);
            for (int j = 0; j < NC; j++) {
                if (q8_1) {
                    const block_q8_1 *y = (const block_q8_1 *)(c->xa + (c0 + j) * c->xa_col) + b;
                    const int32_t s = NAME(dot32)(w0, w1, y->qs);
                    acc[r][j] += dw * okv_f16_to_f32(y->d) * (float)s + mw * okv_f16_to_f32(y->s);
                } else {
                    const int32_t s = NAME(dot32)(w0, w1, c->xq + (c0 + j) * c->k + b * OKV_QK);
                    acc[r][j] += dw * c->xd[(c0 + j) * nb + b] * (float)s;
                }
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = acc[r][j];
}

/* The K-quants against Q8_K activations:
 *   acc += d * dx * (float)sum_g(sc[g] * w[g] . x[g]);
 *   acc -= dmin * dx * (float)sum_g(mn[g] * bsums[g])   (Q2_K, Q4_K, Q5_K). */
KERNEL void NAME(kq_tile)(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const int64_t nb = c->k / OKV_QK_K;
    const size_t bsz = okv_ggml_type_size(wtype);
    const int has_min = wtype == OKV_GGML_Q2_K || wtype == OKV_GGML_Q4_K || wtype == OKV_GGML_Q5_K;
    float acc[MM_TR][MM_TC] = {{0}};
    okv_neon_kq w;
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = c->w + (r0 + r) * c->wrow + (size_t)b * bsz;
            __builtin_prefetch(blk + OKV_NEON_AHEAD);
            __builtin_prefetch(blk + OKV_NEON_AHEAD + 128);
            okv_neon_kq_decode(wtype, blk, &w);
            for (int j = 0; j < NC; j++) {
                const block_q8_K *y = (const block_q8_K *)(c->xa + (c0 + j) * c->xa_col) + b;
                int32x4_t sumv = vdupq_n_s32(0);
                for (int q = 0; q < 4; q++) {
                    int8x16_t wv[4], xv[4];
                    for (int g = 0; g < 4; g++) {
                        wv[g] = vld1q_s8(w.q + 64 * q + 16 * g);
                        xv[g] = vld1q_s8(y->qs + 64 * q + 16 * g);
                    }
                    sumv = vmlaq_s32(sumv, NAME(dot16x4)(wv, xv), vld1q_s32(w.sc + 4 * q));
                }
                acc[r][j] += w.d * y->d * (float)vaddvq_s32(sumv);
                if (has_min) {
                    const int16x8_t b0 = vld1q_s16(y->bsums), b1 = vld1q_s16(y->bsums + 8);
                    int32x4_t m = vmull_s16(vget_low_s16(w.mn[0]), vget_low_s16(b0));
                    m = vmlal_high_s16(m, w.mn[0], b0);
                    m = vmlal_s16(m, vget_low_s16(w.mn[1]), vget_low_s16(b1));
                    m = vmlal_high_s16(m, w.mn[1], b1);
                    acc[r][j] -= w.dmin * y->d * (float)vaddvq_s32(m);
                }
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = acc[r][j];
}

#define TYPED(kind, T, t)                                                                              \
    KERNEL void NAME(t)(const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {  \
        NAME(kind)(T, c, r0, NR, c0, NC);                                                          \
    }                                                                                              \
    OKV_MM_DISPATCH(TARGET, TILE_NAME(t), NAME(t))
TYPED(legacy_tile, OKV_GGML_Q8_0, q8_0)
TYPED(legacy_tile, OKV_GGML_Q4_0, q4_0)
TYPED(legacy_tile, OKV_GGML_Q4_1, q4_1)
TYPED(legacy_tile, OKV_GGML_Q5_0, q5_0)
TYPED(legacy_tile, OKV_GGML_Q5_1, q5_1)
TYPED(legacy_tile, OKV_GGML_MXFP4, mxfp4)
TYPED(kq_tile, OKV_GGML_Q2_K, q2_K)
TYPED(kq_tile, OKV_GGML_Q3_K, q3_K)
TYPED(kq_tile, OKV_GGML_Q4_K, q4_K)
TYPED(kq_tile, OKV_GGML_Q5_K, q5_K)
TYPED(kq_tile, OKV_GGML_Q6_K, q6_K)
#undef TYPED
#undef KERNEL
