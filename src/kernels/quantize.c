/* ggml's reference quantizers (quantize_row_*_ref in ggml-quants.c), written
 * again for offkv.  Byte equality with llama-quantize is the point, so every
 * expression keeps ggml's operand order and types: a float times an int
 * converts the int and multiplies left to right, sums accumulate in float in
 * index order, and nothing may be fused into an FMA (CMakeLists builds this
 * file with -ffp-contract=off).  Where ggml stores an int into a narrower
 * type and relies on the wrap, so do we, spelled out with a cast. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/quantize.h"

/* ggml's GROUP_MAX_EPS: below this a group counts as all zeros. */
#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* Round to nearest, ties to even, for |f| <= 2^22 - 1: adding 1.5 * 2^23
 * leaves the rounded integer in the low mantissa bits (ggml's nearest_int;
 * its rounding of ties differs from roundf's, so it must be this). */
static inline int nearest_int(float f) {
    float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* ------------------------------------------------------------------ */
/* Legacy formats                                                      */

void okv_quantize_row_q4_1(const float *x, block_q4_1 *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < OKV_QK; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = okv_f32_to_f16(d);
        y[b].m = okv_f32_to_f16(min);
        for (int j = 0; j < OKV_QK / 2; j++) {
            const float x0 = (xb[j] - min) * id;
            const float x1 = (xb[j + OKV_QK / 2] - min) * id;
            /* ggml truncates after adding 0.5 (x0 >= 0, so this rounds) */
            const int q0 = imin(15, (int8_t)(x0 + 0.5f));
            const int q1 = imin(15, (int8_t)(x1 + 0.5f));
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* The fifth bits of 32 values, bit j for value j, as a little-endian word. */
static void put_qh(uint8_t qh[4], uint32_t bits) {
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(bits >> (8 * i));
}

void okv_quantize_row_q5_0(const float *x, block_q5_0 *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        /* the signed value of largest magnitude (the first one on ties) */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < OKV_QK; j++) {
            if (amax < fabsf(xb[j])) { amax = fabsf(xb[j]); max = xb[j]; }
        }
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = okv_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < OKV_QK / 2; j++) {
            const float x0 = xb[j] * id;
            const float x1 = xb[j + OKV_QK / 2] * id;
            const int q0 = imin(31, (int8_t)(x0 + 16.5f));
            const int q1 = imin(31, (int8_t)(x1 + 16.5f));
            y[b].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= (uint32_t)((q0 & 0x10) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10) >> 4) << (j + OKV_QK / 2);
        }
        put_qh(y[b].qh, qh);
    }
}

void okv_quantize_row_q5_1(const float *x, block_q5_1 *y, int64_t k) {
    for (int64_t b = 0; b < k / OKV_QK; b++) {
        const float *xb = x + b * OKV_QK;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < OKV_QK; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = okv_f32_to_f16(d);
        y[b].m = okv_f32_to_f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < OKV_QK / 2; j++) {
            const float x0 = (xb[j] - min) * id;
            const float x1 = (xb[j + OKV_QK / 2] - min) * id;
            /* no clamp here in ggml: (x - min) * id + 0.5 stays below 32 */
            const int q0 = (uint8_t)(x0 + 0.5f);
            const int q1 = (uint8_t)(x1 + 0.5f);
            y[b].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= (uint32_t)((q0 & 0x10) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10) >> 4) << (j + OKV_QK / 2);
        }
        put_qh(y[b].qh, qh);
    }
}

/* ------------------------------------------------------------------ */
/* Searches for a group's scale                                       */

/* Symmetric: levels l in [-nmax, nmax-1], value ~ scale * l, weighted by
 * x^2 (ggml's make_qx_quants with rmse_type 1 and no importance weights).
 * Tries 19 inverse scales around -nmax/max and keeps the least-squares
 * best; L receives l + nmax. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            l = imax(-nmax, imin(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric for q3_K (ggml's make_q3_quants with do_rmse): start from
 * -nmax/max, then up to 5 passes moving single values to the level that
 * improves the x^2-weighted fit.  L receives l + nmax. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0.0f) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = imax(-nmax, imin(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric: value ~ scale * l - the_min with l in [0, nmax] (ggml's
 * make_qkx2_quants).  Starts from the min..max grid, then tries nstep + 1
 * grids (rmin + rdelta * is + nmax levels over the range), refitting scale
 * and min by weighted least squares, and keeps the one with the smallest
 * weighted error (absolute when use_mad, squared otherwise). */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.0f / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * (x[i] - min));
            l = imax(0, imin(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.0f) {
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* ------------------------------------------------------------------ */
/* K-quants                                                            */

/* Packs 256 2-bit values: byte l of each 32-byte group holds values
 * l, l+32, l+64, l+96 of its 128 in bits 0-1, 2-3, 4-5, 6-7. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < OKV_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

void okv_quantize_row_q2_K(const float *x, block_q2_K *y, int64_t k) {
    uint8_t L[OKV_QK_K], Laux[16];
    float weights[16], mins[OKV_QK_K / 16], scales[OKV_QK_K / 16];
    const float q4scale = 15.0f;
    for (int64_t i = 0; i < k / OKV_QK_K; i++, x += OKV_QK_K) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < OKV_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15,
                                         true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0.0f) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < OKV_QK_K / 16; j++) y[i].scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
            y[i].d = okv_f32_to_f16(max_scale / q4scale);
        } else {
            for (int j = 0; j < OKV_QK_K / 16; j++) y[i].scales[j] = 0;
            y[i].d = okv_f32_to_f16(0.0f);
        }
        if (max_min > 0.0f) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < OKV_QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)(y[i].scales[j] | (nearest_int(iscale * mins[j]) << 4));
            y[i].dmin = okv_f32_to_f16(max_min / q4scale);
        } else {
            y[i].dmin = okv_f32_to_f16(0.0f);
        }
        /* requantize against the scales as stored (4 bits, f16 d/dmin) */
        for (int j = 0; j < OKV_QK_K / 16; j++) {
            const float d = okv_f16_to_f32(y[i].d) * (float)(y[i].scales[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = okv_f16_to_f32(y[i].dmin) * (float)(y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                const int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)imax(0, imin(3, l));
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void okv_quantize_row_q3_K(const float *x, block_q3_K *y, int64_t k) {
    int8_t L[OKV_QK_K];
    float scales[OKV_QK_K / 16];
    for (int64_t i = 0; i < k / OKV_QK_K; i++, x += OKV_QK_K) {
        float max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < OKV_QK_K / 16; j++) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            const float scale = fabsf(scales[j]);
            if (scale > amax) { amax = scale; max_scale = scales[j]; }
        }
        /* 16 6-bit scales (biased by 32): low nibbles in bytes 0-7 (sub-block
         * j and j+8 share byte j), the 2 high bits of sub-block j in byte
         * 8 + j%4 at bit 2*(j/4) */
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < OKV_QK_K / 16; j++) {
                int8_t l = (int8_t)nearest_int(iscale * scales[j]);
                l = (int8_t)(imax(-32, imin(31, l)) + 32);
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l = (int8_t)(l >> 4);
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = okv_f32_to_f16(1.0f / iscale);
        } else {
            y[i].d = okv_f32_to_f16(0.0f);
        }
        for (int j = 0; j < OKV_QK_K / 16; j++) {
            int sc = j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4;
            sc = (sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float d = okv_f16_to_f32(y[i].d) * (float)sc;
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ii++) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-4, imin(3, l)) + 4);
            }
        }
        /* the high bit of value j goes to hmask[j % 32], bit j / 32 */
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        uint8_t Lu[OKV_QK_K];
        for (int j = 0; j < OKV_QK_K; j++) {
            int l = L[j];
            if (l > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                l -= 4;
            }
            Lu[j] = (uint8_t)l;
        }
        pack_2bit(Lu, y[i].qs);
    }
}

/* q4_K/q5_K: 8 scales and 8 mins of 6 bits in 12 bytes.  Sub-blocks 0-3:
 * scale in byte j, min in byte j+4 (low 6 bits).  Sub-blocks 4-7: low
 * nibbles of scale and min in byte j+4, their 2 high bits in the top bits
 * of bytes j-4 (scale) and j (min). */
static void pack_scales_k4(uint8_t *q, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        q[j] = ls;
        q[j + 4] = lm;
    } else {
        q[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        q[j - 4] |= (uint8_t)((ls >> 4) << 6);
        q[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

static void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The shared first half of q4_K and q5_K: per 32-value sub-block an
 * asymmetric fit with nmax levels, the 6-bit scales and mins, f16 d and
 * dmin, then every value requantized against the stored scales into L. */
static void quantize_k4_scales(const float *x, okv_f16 *d_out, okv_f16 *dmin_out, uint8_t *packed, uint8_t *L,
                               int nmax, float rmin, int nstep) {
    uint8_t Laux[32];
    float weights[32], mins[OKV_QK_K / 32], scales[OKV_QK_K / 32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < OKV_QK_K / 32; j++) {
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep,
                                     false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < OKV_QK_K / 32; j++) {
        /* ggml keeps only the low 8 bits before clamping to 63 */
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        pack_scales_k4(packed, j, ls, lm);
    }
    *d_out = okv_f32_to_f16(max_scale / 63.0f);
    *dmin_out = okv_f32_to_f16(max_min / 63.0f);
    for (int j = 0; j < OKV_QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, packed, &sc, &m);
        const float d = okv_f16_to_f32(*d_out) * (float)sc;
        if (d == 0.0f) continue;
        const float dm = okv_f16_to_f32(*dmin_out) * (float)m;
        for (int ii = 0; ii < 32; ii++) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

void okv_quantize_row_q4_K(const float *x, block_q4_K *y, int64_t k) {
    uint8_t L[OKV_QK_K];
    for (int64_t i = 0; i < k / OKV_QK_K; i++, x += OKV_QK_K) {
        quantize_k4_scales(x, &y[i].d, &y[i].dmin, y[i].scales, L, 15, -1.0f, 20);
        /* each 64 values: byte l holds value l (low nibble) and l+32 (high) */
        uint8_t *q = y[i].qs;
        for (int j = 0; j < OKV_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void okv_quantize_row_q5_K(const float *x, block_q5_K *y, int64_t k) {
    uint8_t L[OKV_QK_K];
    for (int64_t i = 0; i < k / OKV_QK_K; i++, x += OKV_QK_K) {
        quantize_k4_scales(x, &y[i].d, &y[i].dmin, y[i].scales, L, 31, -0.5f, 15);
        /* nibbles as q4_K; the fifth bit of value n+j (n = 0, 64, ...) goes
         * to qh[j] bit 2n/64, that of value n+j+32 to bit 2n/64 + 1 */
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, OKV_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < OKV_QK_K; n += 64, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
                if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

void okv_quantize_row_q6_K(const float *x, block_q6_K *y, int64_t k) {
    int8_t L[OKV_QK_K];
    float scales[OKV_QK_K / 16];
    for (int64_t i = 0; i < k / OKV_QK_K; i++, x += OKV_QK_K) {
        float max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int ib = 0; ib < OKV_QK_K / 16; ib++) {
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            const float abs_scale = fabsf(scales[ib]);
            if (abs_scale > max_abs_scale) { max_abs_scale = abs_scale; max_scale = scales[ib]; }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            y[i].d = okv_f32_to_f16(0.0f);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y[i].d = okv_f32_to_f16(1.0f / iscale);
        for (int ib = 0; ib < OKV_QK_K / 16; ib++)
            y[i].scales[ib] = (int8_t)imin(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < OKV_QK_K / 16; j++) {
            const float d = okv_f16_to_f32(y[i].d) * (float)y[i].scales[j];
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ii++) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
            }
        }
        /* per 128 values: ql[l] = value l | value l+64 << 4, ql[l+32] =
         * value l+32 | value l+96 << 4; qh[l] the four values' top 2 bits */
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < OKV_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
                ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

void okv_quantize_row_mxfp4(const float *x, block_mxfp4 *y, int64_t k) {
    for (int64_t i = 0; i < k / OKV_QK; i++) {
        const float *xb = x + i * OKV_QK;
        float amax = 0.0f;
        for (int j = 0; j < OKV_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        const uint8_t e = amax > 0.0f ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = okv_e8m0_half(e);
        y[i].e = e;
        for (int j = 0; j < OKV_QK / 2; j++) {
            int best[2] = {0, 0};
            for (int h = 0; h < 2; h++) {
                const float v = xb[j + h * OKV_QK / 2];
                float best_err = fabsf(okv_mxfp4_values[0] * d - v);
                for (int q = 1; q < 16; q++) {
                    const float err = fabsf(okv_mxfp4_values[q] * d - v);
                    if (err < best_err) { best[h] = q; best_err = err; }
                }
            }
            y[i].qs[j] = (uint8_t)(best[0] | best[1] << 4);
        }
    }
}

int okv_quantize_row(int type, const float *x, void *dst, int64_t k) {
    if (okv_ggml_row_size(type, k) == 0 && k != 0) return 0;
    switch (type) {
    case OKV_GGML_F32: memcpy(dst, x, (size_t)k * sizeof *x); return 1;
    case OKV_GGML_F16: okv_f32_to_f16_row(dst, x, k); return 1;
    case OKV_GGML_BF16: okv_f32_to_bf16_row(dst, x, k); return 1;
    case OKV_GGML_Q8_0: okv_quantize_row_q8_0(x, dst, k); return 1;
    case OKV_GGML_Q4_0: okv_quantize_row_q4_0(x, dst, k); return 1;
    case OKV_GGML_Q4_1: okv_quantize_row_q4_1(x, dst, k); return 1;
    case OKV_GGML_Q5_0: okv_quantize_row_q5_0(x, dst, k); return 1;
    case OKV_GGML_Q5_1: okv_quantize_row_q5_1(x, dst, k); return 1;
    case OKV_GGML_Q2_K: okv_quantize_row_q2_K(x, dst, k); return 1;
    case OKV_GGML_Q3_K: okv_quantize_row_q3_K(x, dst, k); return 1;
    case OKV_GGML_Q4_K: okv_quantize_row_q4_K(x, dst, k); return 1;
    case OKV_GGML_Q5_K: okv_quantize_row_q5_K(x, dst, k); return 1;
    case OKV_GGML_Q6_K: okv_quantize_row_q6_K(x, dst, k); return 1;
    case OKV_GGML_MXFP4: okv_quantize_row_mxfp4(x, dst, k); return 1;
    }
    return 0;
}
