/* aarch64 kernels for the quantized types in ggml's own layouts (what runs
 * when a tensor is not repacked: repack=off, or a shape the sixteen-wide
 * layouts do not take): the block unpacking here, the tiles in
 * matmul_neon_tmpl.h, once per level.  Every level gives matmul_scalar.c's
 * bits (test_matmul checks it on each level under qemu). */
#include "kernels/cpu.h"

#if defined(OKV_ARM)
#include <arm_neon.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/matmul_impl.h"

/* Prefetch distance along a row's blocks: a few blocks ahead, into L1 (as
 * the sixteen-wide kernels do; not measured on ARM hardware). */
#define OKV_NEON_AHEAD 512

#define DECODE static inline __attribute__((always_inline))

/* Bit i of the 32 bits at qh as byte i of hi (0..15) and hi1 (16..31):
 * bit set -> 0x10 (Q5_0 / Q5_1's fifth bit). */
DECODE void fifth_bits(const uint8_t *qh, uint8x16_t *h0, uint8x16_t *h1) {
    static const uint8_t idx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                    2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t v;
    memcpy(&v, qh, 4);
    const uint8x16_t q = vreinterpretq_u8_u32(vdupq_n_u32(v)), m = vld1q_u8(bit), t = vdupq_n_u8(0x10);
    *h0 = vandq_u8(vtstq_u8(vqtbl1q_u8(q, vld1q_u8(idx)), m), t);
    *h1 = vandq_u8(vtstq_u8(vqtbl1q_u8(q, vld1q_u8(idx + 16)), m), t);
}

/* matmul_scalar.c's legacy_decode (and its Q8_0, Q4_0, MXFP4 cases): a
 * block's 32 integer values (w0: 0..15, w1: 16..31), its scale and
 * offset. */
DECODE void okv_neon_legacy_decode(int wtype, const uint8_t *blk, int8x16_t *w0, int8x16_t *w1, float *d,
                                   float *m) {
    okv_f16 hd, hm = 0;
    memcpy(&hd, blk, 2);
    *m = 0.0f;
    if (wtype == OKV_GGML_Q8_0) {
        *w0 = vld1q_s8((const int8_t *)blk + 2);
        *w1 = vld1q_s8((const int8_t *)blk + 18);
        *d = okv_f16_to_f32(hd);
        return;
    }
    if (wtype == OKV_GGML_MXFP4) {
        const uint8x16_t q = vld1q_u8(blk + 1);
        const int8x16_t tab = vld1q_s8(okv_mxfp4_values);
        *w0 = vqtbl1q_s8(tab, vandq_u8(q, vdupq_n_u8(0x0F)));
        *w1 = vqtbl1q_s8(tab, vshrq_n_u8(q, 4));
        *d = okv_e8m0_half(blk[0]);
        return;
    }
    const uint8_t *qs;
    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    int off = 0;
    switch (wtype) {
    case OKV_GGML_Q4_0: qs = blk + 2; off = 8; break;
    case OKV_GGML_Q4_1: memcpy(&hm, blk + 2, 2); qs = blk + 4; break;
    case OKV_GGML_Q5_0: fifth_bits(blk + 2, &h0, &h1); qs = blk + 6; off = 16; break;
    default: /* Q5_1 */ memcpy(&hm, blk + 2, 2); fifth_bits(blk + 4, &h0, &h1); qs = blk + 8; break;
    }
    const uint8x16_t q = vld1q_u8(qs), o = vdupq_n_u8((uint8_t)off);
    *w0 = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), h0), o));
    *w1 = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(vshrq_n_u8(q, 4), h1), o));
    *d = okv_f16_to_f32(hd);
    *m = okv_f16_to_f32(hm);
}

/* A K-quant super-block unpacked as matmul_scalar.c's kq_decode: 256
 * integer values in its order, an int32 scale per 16 values, the mins as
 * int16 (Q2_K, Q4_K, Q5_K), d and dmin. */
typedef struct okv_neon_kq {
    int8_t q[OKV_QK_K];
    int32_t sc[16];
    int16x8_t mn[2];
    float d, dmin;
} okv_neon_kq;

DECODE void okv_neon_kq_decode(int wtype, const uint8_t *blk, okv_neon_kq *o) {
    const uint8x16_t three = vdupq_n_u8(3), low4 = vdupq_n_u8(0x0F);
    switch (wtype) {
    case OKV_GGML_Q2_K: {
        const block_q2_K *x = (const block_q2_K *)blk;
        int p = 0;
        for (int n = 0; n < 2; n++) {
            const uint8x16_t q0 = vld1q_u8(x->qs + 32 * n), q1 = vld1q_u8(x->qs + 32 * n + 16);
            for (int shift = 0; shift < 8; shift += 2, p += 32) {
                const int8x16_t s = vdupq_n_s8((int8_t)-shift);
                vst1q_u8((uint8_t *)o->q + p, vandq_u8(vshlq_u8(q0, s), three));
                vst1q_u8((uint8_t *)o->q + p + 16, vandq_u8(vshlq_u8(q1, s), three));
            }
        }
        const uint8x16_t sc = vld1q_u8(x->scales);
        const uint16x8_t s0 = vmovl_u8(vget_low_u8(vandq_u8(sc, low4))), s1 = vmovl_high_u8(vandq_u8(sc, low4));
        vst1q_s32(o->sc, vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s0))));
        vst1q_s32(o->sc + 4, vreinterpretq_s32_u32(vmovl_high_u16(s0)));
        vst1q_s32(o->sc + 8, vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s1))));
        vst1q_s32(o->sc + 12, vreinterpretq_s32_u32(vmovl_high_u16(s1)));
        const uint8x16_t mn = vshrq_n_u8(sc, 4);
        o->mn[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn)));
        o->mn[1] = vreinterpretq_s16_u16(vmovl_high_u8(mn));
        o->d = okv_f16_to_f32(x->d);
        o->dmin = okv_f16_to_f32(x->dmin);
        break;
    }
    case OKV_GGML_Q3_K: {
        const block_q3_K *x = (const block_q3_K *)blk;
        const uint8x16_t h0 = vld1q_u8(x->hmask), h1 = vld1q_u8(x->hmask + 16), four = vdupq_n_u8(4);
        int p = 0, m = 1;
        for (int n = 0; n < 2; n++) {
            const uint8x16_t q0 = vld1q_u8(x->qs + 32 * n), q1 = vld1q_u8(x->qs + 32 * n + 16);
            for (int shift = 0; shift < 8; shift += 2, m <<= 1, p += 32) {
                const int8x16_t s = vdupq_n_s8((int8_t)-shift);
                const uint8x16_t mv = vdupq_n_u8((uint8_t)m);
                /* value - 4 where the high bit is clear */
                vst1q_u8((uint8_t *)o->q + p, vsubq_u8(vandq_u8(vshlq_u8(q0, s), three), vbicq_u8(four, vtstq_u8(h0, mv))));
                vst1q_u8((uint8_t *)o->q + p + 16,
                         vsubq_u8(vandq_u8(vshlq_u8(q1, s), three), vbicq_u8(four, vtstq_u8(h1, mv))));
            }
        }
        for (int g = 0; g < 16; g++) o->sc[g] = okv_q3_K_scale(g, x->scales);
        o->d = okv_f16_to_f32(x->d);
        break;
    }
    case OKV_GGML_Q4_K: case OKV_GGML_Q5_K: {
        const int five = wtype == OKV_GGML_Q5_K;
        const block_q4_K *x4 = (const block_q4_K *)blk;
        const block_q5_K *x5 = (const block_q5_K *)blk;
        const uint8_t *scales = five ? x5->scales : x4->scales;
        const uint8_t *q = five ? x5->qs : x4->qs;
        int16_t mn[16];
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            okv_q4_K_scale_min(s, scales, &sc, &m);
            o->sc[2 * s] = o->sc[2 * s + 1] = sc;
            mn[2 * s] = mn[2 * s + 1] = m;
        }
        o->mn[0] = vld1q_s16(mn);
        o->mn[1] = vld1q_s16(mn + 8);
        /* sub-blocks 2i and 2i+1: the low and high nibbles of q[32i..];
         * Q5_K's fifth bit of sub-block s: bit s of qh[l] */
        uint8x16_t qh[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
        if (five) { qh[0] = vld1q_u8(x5->qh); qh[1] = vld1q_u8(x5->qh + 16); }
        const uint8x16_t t = vdupq_n_u8(0x10);
        for (int i = 0; i < 4; i++)
            for (int h = 0; h < 2; h++) {
                const uint8x16_t v = vld1q_u8(q + 32 * i + 16 * h);
                uint8x16_t lo = vandq_u8(v, low4), hi = vshrq_n_u8(v, 4);
                if (five) {
                    lo = vorrq_u8(lo, vandq_u8(vtstq_u8(qh[h], vdupq_n_u8((uint8_t)(1u << (2 * i)))), t));
                    hi = vorrq_u8(hi, vandq_u8(vtstq_u8(qh[h], vdupq_n_u8((uint8_t)(1u << (2 * i + 1)))), t));
                }
                vst1q_u8((uint8_t *)o->q + 64 * i + 16 * h, lo);
                vst1q_u8((uint8_t *)o->q + 64 * i + 32 + 16 * h, hi);
            }
        o->d = okv_f16_to_f32(five ? x5->d : x4->d);
        o->dmin = okv_f16_to_f32(five ? x5->dmin : x4->dmin);
        break;
    }
    default: { /* Q6_K */
        const block_q6_K *x = (const block_q6_K *)blk;
        const uint8x16_t bias = vdupq_n_u8(32);
        for (int n = 0; n < 2; n++)
            for (int h = 0; h < 2; h++) {
                const uint8x16_t l0 = vld1q_u8(x->ql + 64 * n + 16 * h), l1 = vld1q_u8(x->ql + 64 * n + 32 + 16 * h);
                const uint8x16_t qh = vld1q_u8(x->qh + 32 * n + 16 * h);
                uint8_t *y = (uint8_t *)o->q + 128 * n + 16 * h;
                vst1q_u8(y, vsubq_u8(vorrq_u8(vandq_u8(l0, low4), vshlq_n_u8(vandq_u8(qh, three), 4)), bias));
                vst1q_u8(y + 32, vsubq_u8(vorrq_u8(vandq_u8(l1, low4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), three), 4)), bias));
                vst1q_u8(y + 64, vsubq_u8(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), three), 4)), bias));
                vst1q_u8(y + 96, vsubq_u8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4)), bias));
            }
        const int8x16_t sc = vld1q_s8(x->scales);
        const int16x8_t s0 = vmovl_s8(vget_low_s8(sc)), s1 = vmovl_high_s8(sc);
        vst1q_s32(o->sc, vmovl_s16(vget_low_s16(s0)));
        vst1q_s32(o->sc + 4, vmovl_high_s16(s0));
        vst1q_s32(o->sc + 8, vmovl_s16(vget_low_s16(s1)));
        vst1q_s32(o->sc + 12, vmovl_high_s16(s1));
        o->d = okv_f16_to_f32(x->d);
        break;
    }
    }
}

#define TARGET OKV_TARGET_NEON
#define DOT 0
#define NAME(x) neon_##x
#define TILE_NAME(t) okv_mm_tile_##t##_neon
#include "kernels/matmul_neon_tmpl.h"
#undef TARGET
#undef DOT
#undef NAME
#undef TILE_NAME

#define TARGET OKV_TARGET_DOTPROD
#define DOT 1
#define NAME(x) dotprod_##x
#define TILE_NAME(t) okv_mm_tile_##t##_dotprod
#include "kernels/matmul_neon_tmpl.h"

#endif /* OKV_ARM */
