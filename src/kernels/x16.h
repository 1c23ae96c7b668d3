/* Internal: what the sixteen-wide layouts (q4_0x16.h, q8_0x16.h,
 * mxfp4x16.h, q4_Kx16.h, q6_Kx16.h) share.
 * One 32-bit lane per 32-value block; a group is 16 blocks, 512 values; its
 * 4-bit values sit in four 64-byte vectors (lane i: block i's values 4u..4u+3
 * in the low nibbles of vector u, 16+4u.. in the high ones) and its 8-bit
 * activations in eight (vector 2u + h: block i's values 16h+4u..+3).  All
 * of them sum their 16 float lanes in the one order of okv_x16_sum16, on
 * every ISA, so their kernels give the same bits everywhere. */
#ifndef OKV_KERNELS_X16_H
#define OKV_KERNELS_X16_H

#include <stdint.h>
#include <string.h>

#include "kernels/cpu.h"

/* Columns one sweep of a row takes at most: the AVX-512 kernels' integer and
 * float accumulators for 8 columns fill half the registers. */
enum { OKV_X16_MAX_COLS = 8 };

/* Weights stream from memory once per token: keep lines in flight well
 * ahead, as the ggml-layout kernels do (8 KiB: a few rows on).  The AVX2
 * tiles prefetch 2 KiB ahead: on an AVX2-only Zen 3 (2 threads, 31 GB/s)
 * 8 KiB left the one-column products at 60-75 % of the read bandwidth,
 * and 2 KiB decoded Q4_0 +12 %, Q8_0 +15 %, Q4_K_M +4 %, gpt-oss +5 %
 * (A-B pairs, medians; Q6_K level); a Zen 4 running this AVX2 code
 * decoded Q4_0 best at 8 KiB (+17-30 % over 2 KiB, README), so the best
 * distance is the core's: 2 KiB is the AVX2-only core's.  The AVX-512 ones
 * keep 8 KiB, measured on the Intel and Zen 4/5 cores that run them. */
enum { OKV_X16_AHEAD = 8192, OKV_X16_AHEAD_AVX2 = 2048 };

/* Groups in a row of k values: the last one may be partly padding (lanes
 * of zero weights and scales, and zero activations), which adds exact
 * zeros, so rows of any whole number of blocks take these layouts. */
static inline int64_t okv_x16_groups(int64_t k) { return (k + 511) / 512; }

/* The lane sum: lanes i + 8, then i + 4, then (0 + 2) + (1 + 3). */
static inline float okv_x16_sum16(const float a[16]) {
    float s8[8], s4[4];
    for (int i = 0; i < 8; i++) s8[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* Regroups 512 8-bit values (16 blocks of 32, in order) into the eight
 * activation vectors. */
static inline void okv_x16_permute_act(const int8_t *q, int8_t out[8][64]) {
    for (int i = 0; i < 16; i++)
        for (int h = 0; h < 2; h++)
            for (int u = 0; u < 4; u++) memcpy(&out[2 * u + h][4 * i], q + 32 * i + 16 * h + 4 * u, 4);
}

/* The integer dot of lane i of a group, scalar: sum over its 32 values of
 * the weight (the nibble, plus qh's fifth bit unless qh is NULL: see
 * OKV_X16_DOTS_512) times the activation. */
static inline int32_t okv_x16_dot_scalar(const uint8_t qs[4][64], const uint8_t *qh, const int8_t x[8][64], int i) {
    int32_t p = 0;
    for (int u = 0; u < 4; u++)
        for (int m = 0; m < 4; m++) {
            const int q = qs[u][4 * i + m], h = qh ? qh[4 * i + m] : 0;
            p += ((q & 0x0F) | ((h >> u) & 1) << 4) * x[2 * u][4 * i + m] +
                 ((q >> 4) | ((h >> (4 + u)) & 1) << 4) * x[2 * u + 1][4 * i + m];
        }
    return p;
}

/* A part of each row's whole groups, for the sweeps whose columns'
 * activations outgrow the budget: 5 columns (verifying 4 drafted tokens) of
 * k = 5632 (TinyLlama's FFN down), or 4 of k = 8192 or 14336 (the FFN down
 * products of Llama 3.2 and Llama 3 8B), went a few columns at a time, each
 * row unpacked once per sweep (Q4_0 2048x14336 by 64 columns, one thread
 * of a Zen 4: 132 GFLOP/s against 295 at k = 5632).  Split into parts that
 * fit, a sweep takes each part of a block of rows in turn: a body runs
 * groups [g0, g1) of its rows (g1 < 0: from g0 to the end, the compact
 * group included, and stores the outputs), its float accumulators coming
 * from park where g0 > 0 and going back there where g1 >= 0.  Each output
 * still adds its groups in order, so the bits are those of one pass. */
typedef struct okv_x16_part {
    int64_t g0, g1;
    int64_t r0;    /* the row whose accumulators start park */
    int64_t ahead; /* the bodies' prefetch distance: the same part of a later row */
    float *park;   /* [OKV_X16_PART_ROWS][OKV_X16_MAX_COLS][16], 64-byte aligned */
} okv_x16_part;

/* Rows in a block whose accumulators park between parts: 64 bytes a row
 * and column (20 KiB for 5 columns, from L1 or L2), while the block's
 * weights stay in L2 between its parts. */
enum { OKV_X16_PART_ROWS = 64 };

/* The parts a sweep of activations of `bytes` takes for a budget: the
 * fewest that fit, at most one per whole group. */
static inline int64_t okv_x16_parts(int64_t bytes, int64_t budget, int64_t k) {
    const int64_t p = (bytes + budget - 1) / budget, nw = k / 512;
    return p < nw ? p : nw < 1 ? 1 : nw;
}

/* What a body reads of its part (NULL: the whole row). */
static inline int64_t okv_x16_part_g0(const okv_x16_part *part) { return part ? part->g0 : 0; }
static inline int64_t okv_x16_part_g1(const okv_x16_part *part, int64_t nw) {
    return part && part->g1 >= 0 ? part->g1 : nw;
}
static inline int okv_x16_part_last(const okv_x16_part *part) { return !part || part->g1 < 0; }
static inline int64_t okv_x16_part_ahead(const okv_x16_part *part) { return part ? part->ahead : OKV_X16_AHEAD; }

#if defined(OKV_X86)
#include <immintrin.h>

static inline __attribute__((always_inline)) OKV_TARGET_AVX2 float okv_x16_sum16_avx2(__m256 lo, __m256 hi) {
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

static inline __attribute__((always_inline)) OKV_TARGET_AVX512 float okv_x16_sum16_avx512(__m512 a) {
    return okv_x16_sum16_avx2(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}

/* The lane masks of a compact last group of nt blocks (okv_q8_0x16_tail_
 * blocks, okv_mxfp4x16_tail_blocks) for the AVX2 masked loads: m[half]'s
 * 32-bit lane i is set where block 8 half + i < nt. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void okv_x16_tail_masks_avx2(int nt, __m256i m[2]) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    m[0] = _mm256_cmpgt_epi32(_mm256_set1_epi32(nt), lane);
    m[1] = _mm256_cmpgt_epi32(_mm256_set1_epi32(nt - 8), lane);
}

/* Two 16-byte loads into one register: lo in the low lane, hi in the high. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 __m256i okv_x16_load2_avx2(const int8_t *lo, const int8_t *hi) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)lo)),
                                   _mm_loadu_si128((const __m128i *)hi), 1);
}

/* Two 4x4 transposes of 32-bit words, one per 128-bit lane: word c of
 * r[k]'s lane becomes word k of t[c]'s. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 void okv_x16_transpose4_avx2(const __m256i r[4], __m256i t[4]) {
    const __m256i a = _mm256_unpacklo_epi32(r[0], r[1]), b = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i c = _mm256_unpacklo_epi32(r[2], r[3]), d = _mm256_unpackhi_epi32(r[2], r[3]);
    t[0] = _mm256_unpacklo_epi64(a, c);
    t[1] = _mm256_unpackhi_epi64(a, c);
    t[2] = _mm256_unpacklo_epi64(b, d);
    t[3] = _mm256_unpackhi_epi64(b, d);
}

/* okv_x16_permute_act for blocks 8 half .. 8 half + 7 of a group, whose 256
 * values q holds in order, into bytes 32 half .. 32 half + 31 of the eight
 * vectors: lane b of vector 2u + h is word 4h + u of block b, so per
 * 16-byte half h of the blocks, one 4x4 word transpose per lane (blocks 0-3
 * low, 4-7 high).  Returns each block's sum of its 32 values in lane b
 * (int16 lanes of 16 values each before the widening: exact). */
static inline __attribute__((always_inline)) OKV_TARGET_AVX2 __m256i okv_x16_permute_act_half_avx2(const int8_t *q, int8_t out[8][64],
                                                                                         int half) {
    __m256i s16 = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i r[4], t[4];
        for (int b = 0; b < 4; b++) r[b] = okv_x16_load2_avx2(q + 32 * b + 16 * h, q + 32 * (b + 4) + 16 * h);
        okv_x16_transpose4_avx2(r, t);
        for (int u = 0; u < 4; u++) {
            _mm256_storeu_si256((__m256i *)(out[2 * u + h] + 32 * half), t[u]);
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_set1_epi8(1), t[u]));
        }
    }
    return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
}

/* A 64-byte activation vector for the vpdpbusd of `rows` rows (1 or 2):
 * for two, loaded once into a register both use (the empty asm: GCC
 * otherwise folds the load into each vpdpbusd, a load a row; a Zen 4 loads
 * one 64-byte vector a cycle, and by several columns one row's products
 * were bound by those loads, not by vpdpbusd). */
static inline __attribute__((always_inline)) OKV_TARGET_AVX512 __m512i okv_x16_load_act512(const void *p, int rows) {
    __m512i v = _mm512_loadu_si512(p);
    if (rows > 1) __asm__("" : "+v"(v));
    return v;
}

/* A body's float accumulator for row `row`, column j at the start of its
 * part (zero at the row's start; okv_x16_part), and its parking at the end. */
static inline __attribute__((always_inline)) OKV_TARGET_AVX512 __m512 okv_x16_part_acc512(const okv_x16_part *part,
                                                                                       int64_t row, int j) {
    return part && part->g0 > 0 ? _mm512_load_ps(part->park + ((row - part->r0) * OKV_X16_MAX_COLS + j) * 16)
                                : _mm512_setzero_ps();
}
static inline __attribute__((always_inline)) OKV_TARGET_AVX512 void okv_x16_part_park512(const okv_x16_part *part,
                                                                                      int64_t row, int j, __m512 a) {
    _mm512_store_ps(part->park + ((row - part->r0) * OKV_X16_MAX_COLS + j) * 16, a);
}

/* The integer dots of one group for RJ rows (1 or 2), p[i][j] (j < NC) +=
 * lane l's sum over its 32 values of row i's weight times activation, for
 * column j's activation vectors xq[j] (int8_t [8][64]).  Row i's weights
 * are the nibbles of qs[i], and with FIVE a fifth bit from qh[i] (byte
 * 4l + m of lane l: bit u for the value in the low nibble of qs[u], bit
 * 4 + u for the high one: Q5_K).
 *
 * With VNNI one vpdpbusd per 64 products.  Two rows meet each activation
 * vector, loaded once (okv_x16_load_act512), with both rows' weights: one
 * 64-byte load per two vpdpbusd, where one row takes a load with each
 * (OKV_X16_SWEEPS_PARTS says where that pays).
 * Without VNNI (AVX-512BW, AVX2), maddubs makes int16 pair sums, which are
 * added as int16 before one madd widens them: 16 products of 4-bit weights
 * (at most 15 * 127 each) or 8 of 5-bit ones (31 * 127) stay within int16,
 * so the sums are exact, the same lanes as VNNI's, in 17 operations per 256
 * products instead of 24 (one row: two rows' int16 sums would not fit the
 * registers). */
#define OKV_X16_DOTS_512(p, RJ, qs, qh, xq, NC, VNNI, FIVE)                                  \
    do {                                                                                     \
        const __m512i low4_ = _mm512_set1_epi8(0x0F), bit4_ = _mm512_set1_epi8(0x10);         \
        __m512i hb_[2], s16_[OKV_X16_MAX_COLS];                                              \
        UNROLL for (int i_ = 0; i_ < (RJ); i_++)                                             \
            hb_[i_] = (FIVE) ? _mm512_loadu_si512((qh)[i_]) : _mm512_setzero_si512();        \
        if (!(VNNI)) UNROLL for (int j_ = 0; j_ < (NC); j_++) s16_[j_] = _mm512_setzero_si512(); \
        UNROLL for (int u_ = 0; u_ < 4; u_++) {                                              \
            __m512i lo_[2], hi_[2];                                                          \
            UNROLL for (int i_ = 0; i_ < (RJ); i_++) {                                       \
                const __m512i wv_ = _mm512_loadu_si512((qs)[i_][u_]);                        \
                lo_[i_] = _mm512_and_si512(wv_, low4_);                                      \
                hi_[i_] = _mm512_and_si512(_mm512_srli_epi16(wv_, 4), low4_);                \
                if (FIVE) {                                                                  \
                    /* bit u to bit 4, bit 4 + u to bit 4 (16-bit shifts: what \
                     * crosses bytes is masked off) */                                       \
                    lo_[i_] = _mm512_or_si512(lo_[i_], _mm512_and_si512(_mm512_sll_epi16(hb_[i_], _mm_cvtsi32_si128(4 - u_)), bit4_)); \
                    hi_[i_] = _mm512_or_si512(hi_[i_], _mm512_and_si512(_mm512_srl_epi16(hb_[i_], _mm_cvtsi32_si128(u_)), bit4_)); \
                }                                                                            \
            }                                                                                \
            UNROLL for (int j_ = 0; j_ < (NC); j_++) {                                       \
                const __m512i xl_ = okv_x16_load_act512((xq)[j_][2 * u_], (RJ));              \
                const __m512i xh_ = okv_x16_load_act512((xq)[j_][2 * u_ + 1], (RJ));          \
                if (VNNI) {                                                                  \
                    UNROLL for (int i_ = 0; i_ < (RJ); i_++) {                               \
                        (p)[i_][j_] = _mm512_dpbusd_epi32((p)[i_][j_], lo_[i_], xl_);        \
                        (p)[i_][j_] = _mm512_dpbusd_epi32((p)[i_][j_], hi_[i_], xh_);        \
                    }                                                                        \
                } else {                                                                     \
                    s16_[j_] = _mm512_add_epi16(s16_[j_], _mm512_maddubs_epi16(lo_[0], xl_)); \
                    s16_[j_] = _mm512_add_epi16(s16_[j_], _mm512_maddubs_epi16(hi_[0], xh_)); \
                    if (u_ == 3 || ((FIVE) && u_ == 1)) {                                    \
                        (p)[0][j_] = _mm512_add_epi32((p)[0][j_], _mm512_madd_epi16(s16_[j_], _mm512_set1_epi16(1))); \
                        s16_[j_] = _mm512_setzero_si512();                                   \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    } while (0)

/* The same for the 8 lanes from byte half*32 of each vector, AVX2.  With
 * more than one column each column's int16 sum is kept in order step by
 * step (an empty asm): GCC otherwise reassociates the adds to after all the
 * columns' products, whose results spilled (Q4_Kx16's AVX2 tile, 4096
 * wide, callgrind: 15 % fewer instructions at NC = 4, 13 % at 3, 6 % at 2). */
#define OKV_X16_DOTS_256(p, qs, qh, xq, NC, half, FIVE)                                      \
    do {                                                                                     \
        const __m256i low4_ = _mm256_set1_epi8(0x0F), bit4_ = _mm256_set1_epi8(0x10);         \
        const __m256i hb_ = (FIVE) ? _mm256_loadu_si256((const __m256i *)((qh) + 32 * (half))) : _mm256_setzero_si256(); \
        __m256i s16_[OKV_X16_MAX_COLS];                                                      \
        UNROLL for (int j_ = 0; j_ < (NC); j_++) s16_[j_] = _mm256_setzero_si256();          \
        UNROLL for (int u_ = 0; u_ < 4; u_++) {                                              \
            const __m256i wv_ = _mm256_loadu_si256((const __m256i *)((qs)[u_] + 32 * (half))); \
            __m256i lo_ = _mm256_and_si256(wv_, low4_);                                      \
            __m256i hi_ = _mm256_and_si256(_mm256_srli_epi16(wv_, 4), low4_);                \
            if (FIVE) {                                                                      \
                lo_ = _mm256_or_si256(lo_, _mm256_and_si256(_mm256_sll_epi16(hb_, _mm_cvtsi32_si128(4 - u_)), bit4_)); \
                hi_ = _mm256_or_si256(hi_, _mm256_and_si256(_mm256_srl_epi16(hb_, _mm_cvtsi32_si128(u_)), bit4_)); \
            }                                                                                \
            UNROLL for (int j_ = 0; j_ < (NC); j_++) {                                       \
                const __m256i xl_ = _mm256_loadu_si256((const __m256i *)((xq)[j_][2 * u_] + 32 * (half))); \
                const __m256i xh_ = _mm256_loadu_si256((const __m256i *)((xq)[j_][2 * u_ + 1] + 32 * (half))); \
                s16_[j_] = _mm256_add_epi16(s16_[j_], _mm256_maddubs_epi16(lo_, xl_));       \
                s16_[j_] = _mm256_add_epi16(s16_[j_], _mm256_maddubs_epi16(hi_, xh_));       \
                if ((NC) > 1) __asm__("" : "+x"(s16_[j_]));                                  \
                if (u_ == 3 || ((FIVE) && u_ == 1)) {                                        \
                    (p)[j_] = _mm256_add_epi32((p)[j_], _mm256_madd_epi16(s16_[j_], _mm256_set1_epi16(1))); \
                    s16_[j_] = _mm256_setzero_si256();                                       \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    } while (0)

/* The AVX2 strips (the block passes, from 5 columns on: wtype.c; without
 * AVX-VNNI, Q4_0's, Q8_0's, Q4_K's and Q5_K's only for rows too long for
 * okv_x16_sweeps_avx2, below) are weight-stationary: AVX2's 16 registers
 * hold one half-group's unpacked weights and no more than a few columns'
 * accumulators besides, which left the 4-column tiles spilling and
 * unpacking every row once per 4 columns (sweeps of 8, measured later, beat
 * the strips where the activations stay in L1).  So each
 * half-group of a row is unpacked once per OKV_X16_CB columns, and a plain
 * loop over the columns takes the activations from memory (L1: a group's
 * activations for 16 columns are 6-10 KiB, used by every row of a strip)
 * and the float accumulators from acc_buf[r][j][half].  Each format's pass
 * only says what one row's group does (q4_0x16.c's is the plainest). */
enum { OKV_X16_CB = 16, OKV_X16_STRIP = 8 };

/* The strips of rows r_begin..r_end by columns c_begin..c_end: for each
 * block of OKV_X16_CB columns (nc of them, activations xs of type AT,
 * xstride groups apart) and each strip of OKV_X16_STRIP rows from r0 (nr
 * of them), zero acc_buf, run ROW_BODY (the variadic argument) for every
 * group g (of ng) of every row r of the strip, then store each lane sum
 * into c->y column by column: y is column-major, and row by row each
 * store went to another line (rows * 4 bytes on: 8 KiB, the same L1 set,
 * for 2048 rows), 4 % of a Q8_0 prefill's samples on a Zen 3 against 0.2 %
 * this way (bench/matmul 2048x2048 by 64, one thread: Q4_0 +10 %, Q8_0
 * +6 %).  Expects c, r_begin, r_end, c_begin, c_end and ng in scope. */
#define OKV_X16_STRIPS_AVX2(AT, ...)                                                        \
    do {                                                                                    \
        __m256 acc_buf[OKV_X16_STRIP][OKV_X16_CB][2];                                       \
        for (int64_t c0 = c_begin; c0 < c_end; c0 += OKV_X16_CB) {                          \
            const int nc = (int)(c_end - c0 < OKV_X16_CB ? c_end - c0 : OKV_X16_CB);        \
            const AT *xs = (const AT *)(c->xa + c0 * c->xa_col);                            \
            const size_t xstride = c->xa_col / sizeof *xs; /* groups between columns */     \
            for (int64_t r0 = r_begin; r0 < r_end; r0 += OKV_X16_STRIP) {                   \
                const int nr = (int)(r_end - r0 < OKV_X16_STRIP ? r_end - r0 : OKV_X16_STRIP); \
                for (int r = 0; r < nr; r++)                                                \
                    for (int j = 0; j < nc; j++)                                            \
                        acc_buf[r][j][0] = acc_buf[r][j][1] = _mm256_setzero_ps();          \
                for (int64_t g = 0; g < ng; g++)                                            \
                    for (int r = 0; r < nr; r++) {                                          \
                        __VA_ARGS__                                                         \
                    }                                                                       \
                for (int j = 0; j < nc; j++)                                                \
                    for (int r = 0; r < nr; r++)                                            \
                        c->y[(c0 + j) * c->rows + r0 + r] =                                 \
                            okv_x16_sum16_avx2(acc_buf[r][j][0], acc_buf[r][j][1]);         \
            }                                                                               \
        }                                                                                   \
    } while (0)

/* p plus one column's half-group dot in the AVX-VNNI block passes: u[v],
 * a half-group's 8 vectors of unsigned weights, by the activations x[v]
 * from byte half*32.  Two chains of 4 vpdpbusd added at the end (exact
 * int32 sums, so the bits of one chain): one chain of 8 waited out 8
 * latencies a column (llvm-mca -mcpu=alderlake on the column loops of
 * q4_0x16.c, q8_0x16.c, mxfp4x16.c: 7.4, 8.5, 8.5 -> 6.1, 6.7, 6.7 cycles). */
static inline __attribute__((always_inline)) OKV_TARGET_AVXVNNI __m256i okv_x16_dot8_avxvnni(__m256i p, const __m256i u[8],
                                                                                          const int8_t (*x)[64], int half) {
    __m256i q = _mm256_setzero_si256();
    for (int v = 0; v < 8; v += 2) {
        p = _mm256_dpbusd_avx_epi32(p, u[v], _mm256_loadu_si256((const __m256i *)(x[v] + 32 * half)));
        q = _mm256_dpbusd_avx_epi32(q, u[v + 1], _mm256_loadu_si256((const __m256i *)(x[v + 1] + 32 * half)));
    }
    return _mm256_add_epi32(p, q);
}

/* Starts a compact last group's bytes at p (ahead of the one in use) on
 * their way to L2: every line they touch, wherever in a line they start
 * (rows of any whole number of blocks leave them anywhere; the whole
 * groups' loops take their size rounded up by a line for the same reason).
 * Without it Q5_0's tile streamed a 2048x2880 matrix (gpt-oss's width: 5
 * groups and 10 blocks a row) at half the rate of Q4_0's. */
static inline __attribute__((always_inline)) void okv_x16_prefetch_tail(const void *p, int bytes) {
    for (int l = 0; l < bytes + 64; l += 64) _mm_prefetch((const char *)p + l, _MM_HINT_T1);
}

/* The same group of the row OKV_X16_STRIP rows on is the next strip's
 * (rows of wrow bytes): start its bytes on their way to L2 now. */
static inline __attribute__((always_inline)) void okv_x16_prefetch_next_strip(const void *group, size_t bytes,
                                                                              size_t wrow) {
    for (size_t l = 0; l < bytes; l += 64)
        _mm_prefetch((const char *)group + OKV_X16_STRIP * wrow + l, _MM_HINT_T1);
}

/* The group two on from the one at group (bytes long; past a row's end it
 * is the next row's or nothing's, and a prefetch never faults) into L1,
 * for the AVX-512 bodies' products of 2 to OKV_X16_MAX_COLS columns
 * (n: the product's, nc: this body's): they are compute-bound, and a weight
 * load that waits on L2 holds up every column's dot products behind it.
 * `offkv bench --verify 5` on the TinyLlama shape, Zen 5, this build and
 * the one before at once, one thread on each core, then swapped: Q4_0
 * +2-26 % (six rounds), Q4_K_M +5-8 %, Q8_0 and Q6_K +3-4 %;
 * `build/bench/matmul` by 5, Q5_0 and MXFP4 +11-13 %.  Not for one column
 * (decode, bound by the stream from memory: 3-5 % slower with it) nor for
 * prefill's wider products (Q8_0 pp512 -4-5 % in turns: the lines took L1
 * from the activations the sweeps keep there). */
static inline __attribute__((always_inline)) void okv_x16_prefetch_l1(int64_t n, int nc, const void *group,
                                                                      size_t bytes) {
    if (nc < 2 || n > OKV_X16_MAX_COLS) return;
    const uintptr_t at = (uintptr_t)group + 2 * bytes;
    for (uintptr_t line = at & ~(uintptr_t)63; line < at + bytes; line += 64) _mm_prefetch((const char *)line, _MM_HINT_T0);
}

#endif /* OKV_X86 */

/* A kernel body's hoisted pointers: wr[r], row r0 + r's first group (of
 * type WT), xs[j], column c0 + j's first activation group (AT), and ng, the
 * groups in a row. */
#define OKV_X16_TILE_SETUP(WT, AT, NG)                                                       \
    const int64_t ng = (NG);                                                                 \
    const WT *wr[MM_TR];                                                                     \
    const AT *xs[OKV_X16_MAX_COLS];                                                          \
    for (int r = 0; r < NR; r++) wr[r] = (const WT *)(c->w + (r0 + r) * c->wrow);           \
    for (int j = 0; j < NC; j++) xs[j] = (const AT *)(c->xa + (c0 + j) * c->xa_col)

/* The scalar kernel of a layout whose groups are WT and activation groups
 * AT: for each row and column, LANES updates acc[0..16) from one group (w,
 * x) per step; then x16's lane sum.  The reference every ISA matches. */
#define OKV_X16_SCALAR_TILE(name, WT, AT, NG, LANES)                                         \
    void name(const okv_mm_ctx *c, int64_t r0, int NR, int64_t c0, int NC) {                 \
        OKV_X16_TILE_SETUP(WT, AT, NG);                                                      \
        for (int r = 0; r < NR; r++)                                                         \
            for (int j = 0; j < NC; j++) {                                                   \
                float acc[16] = {0};                                                         \
                for (int64_t g = 0; g < ng; g++) {                                           \
                    const WT *w = wr[r] + g;                                                 \
                    const AT *x = xs[j] + g;                                                 \
                    LANES                                                                    \
                }                                                                            \
                c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16(acc);                      \
            }                                                                                \
    }

/* The same for layouts whose rows end in a compact group (q8_0x16.h,
 * q4_0x16.h, q5_0x16.h, mxfp4x16.h): GROUP(row, g, nw, nt, &tmp) gives a
 * row's group g, the compact one (TAIL_BLOCKS(k) blocks) copied into tmp,
 * whose other lanes stay zero: the whole group it stands for. */
#define OKV_X16_SCALAR_TILE_COMPACT(name, WT, AT, TAIL_BLOCKS, GROUP, LANES)                 \
    void name(const okv_mm_ctx *c, int64_t r0, int NR, int64_t c0, int NC) {                 \
        OKV_X16_TILE_SETUP(WT, AT, okv_x16_groups(c->k));                                    \
        const int64_t nw = c->k / 512;                                                       \
        const int nt = TAIL_BLOCKS(c->k);                                                    \
        WT tmp;                                                                              \
        memset(&tmp, 0, sizeof tmp);                                                         \
        for (int r = 0; r < NR; r++)                                                         \
            for (int j = 0; j < NC; j++) {                                                   \
                float acc[16] = {0};                                                         \
                for (int64_t g = 0; g < ng; g++) {                                           \
                    const WT *w = GROUP(wr[r], g, nw, nt, &tmp);                             \
                    const AT *x = xs[j] + g;                                                 \
                    LANES                                                                    \
                }                                                                            \
                c->y[(c0 + j) * c->rows + r0 + r] = okv_x16_sum16(acc);                      \
            }                                                                                \
    }

/* A tile function (rows r0.., columns c0.., nc <= 4) from a kernel body
 * NAME(c, r0, nr, c0, NC) specialised for NC. */
#define OKV_X16_TILE_ENTRY(TARGET, NAME, tile_fn)                                             \
    TARGET void tile_fn(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {        \
        switch (nc) {                                                                         \
        case 4: NAME(c, r0, nr, c0, 4); break;                                                \
        case 3: NAME(c, r0, nr, c0, 3); break;                                                \
        case 2: NAME(c, r0, nr, c0, 2); break;                                                \
        default: NAME(c, r0, nr, c0, 1); break;                                               \
        }                                                                                     \
    }

/* The same where VNNI's bodies take rows in pairs (OKV_X16_DOTS_512):
 * NAME2 is NAME's two-row body, for the pairs of a tile's rows by 3 or 4
 * columns (Q4_K 5632x2048 by 3, one thread of a Zen 4: 198-200 -> 219-230
 * GFLOP/s; by 1 and 2 one row at a time, as OKV_X16_SWEEPS_PARTS). */
#define OKV_X16_TILE_ENTRY_PAIRS(TARGET, NAME, NAME2, tile_fn)                                \
    TARGET void tile_fn(const okv_mm_ctx *c, int64_t r0, int nr, int64_t c0, int nc) {        \
        const int even = nr & ~1;                                                             \
        switch (nc) {                                                                         \
        case 4: NAME2(c, r0, even, c0, 4); NAME(c, r0 + even, nr - even, c0, 4); break;       \
        case 3: NAME2(c, r0, even, c0, 3); NAME(c, r0 + even, nr - even, c0, 3); break;       \
        case 2: NAME(c, r0, nr, c0, 2); break;                                                \
        default: NAME(c, r0, nr, c0, 1); break;                                               \
        }                                                                                     \
    }

/* Bytes of activations one sweep of a block pass keeps in L1 (48 KiB on
 * Zen 5 and recent Intel cores, 32 KiB on Zen 4), beside the weights'
 * lines passing through (Q6_K has a budget of its own: q6_Kx16.c). */
enum { OKV_X16_SWEEP_BYTES = 32768 };

/* The columns a block pass sweeps at once out of n (>= 1): 8, 5, 4, 2 or
 * 1, the widths the AVX-512 bodies are built for: all of 1 to 8 made clang
 * with the fuzz build's sanitizers take 687 s on q8_0x16.c, against 209 s
 * with 8, 4, 2 and 1 (199 s with these five; 360 s with 6 as well).  5 is
 * for verifying 4 drafted tokens, 4 for the L1 cap at k = 5632; 6 and 7
 * columns sweep as 5 + 1 and 5 + 2, 15-20 % slower from cache than in one
 * sweep (Zen 5). */
static inline int okv_x16_sweep_cols(int64_t n) { return n >= 8 ? 8 : n >= 5 ? 5 : n >= 4 ? 4 : n >= 2 ? 2 : 1; }

/* One row r of a sweep: NAME's one-row body by nc (5, 4, 2 or 1) columns from j. */
#define OKV_X16_SWEEP_ROW(NAME, r, j, nc)                                                     \
    do {                                                                                      \
        switch (nc) {                                                                         \
        case 5: NAME(c, r, 1, j, 5); break;                                                   \
        case 4: NAME(c, r, 1, j, 4); break;                                                   \
        case 2: NAME(c, r, 1, j, 2); break;                                                   \
        default: NAME(c, r, 1, j, 1); break;                                                  \
        }                                                                                     \
    } while (0)

/* AVX2's block passes from the same body (the AVX-512 ones take
 * OKV_X16_SWEEPS_PARTS, below): up to 8 columns at a time swept over
 * every row of the range (their activations in L1, the rows from L2), so
 * each row's nibbles are unpacked once per sweep.  5 columns (verifying 4
 * drafted tokens) swept as 4 and then 1 unpacked every row twice (Q4_0 one
 * core, in cache, on a Zen 5: 354-362 GFLOP/s that way, 458-471 in one
 * sweep).  A sweep takes no more columns than budget bytes of activations:
 * 8 columns of k = 5632 (55 KiB) came from L2 on every row, and Q4_0
 * 2048x5632 by 64 columns ran at 152-164 GFLOP/s against 388-404 for
 * k = 2048 (Zen 5, one core, OKV_X16_SWEEP_BYTES); 4 a sweep there:
 * 329-365.  Columns never mix, so a column's result is the same in any
 * pass.  Expects c, r0, r1, c0 and c1 in scope. */
#define OKV_X16_SWEEPS(NAME, budget)                                                          \
    do {                                                                                      \
        const int64_t fit_ = (budget) / (int64_t)c->xa_col;                                   \
        const int64_t most_ = okv_x16_sweep_cols(fit_);                                       \
        for (int64_t j_ = c0; j_ < c1;) {                                                     \
            const int nc_ = okv_x16_sweep_cols(c1 - j_ < most_ ? c1 - j_ : most_);            \
            for (int64_t r_ = r0; r_ < r1; r_++) {                                            \
                if (nc_ == 8) NAME(c, r_, 1, j_, 8);                                          \
                else OKV_X16_SWEEP_ROW(NAME, r_, j_, nc_);                                    \
            }                                                                                 \
            j_ += nc_;                                                                        \
        }                                                                                     \
    } while (0)

/* The AVX-512 block passes' sweeps, from bodies that run a part of a row
 * (NAME_part; with PAIRS, NAME2_part is its two-row body).  One row at a
 * time, as OKV_X16_SWEEPS.  In pairs, sweeps of 5 or 4 columns two rows at
 * a time, 8 columns as two sweeps of 4 (two rows' accumulators for 8 would
 * fill every register), 2 and 1 column a row at a time (by 1 and 2 columns
 * the pairs ran level or up to 10 % behind: the weights, not the
 * activations, bound those).  bench/matmul, one thread of a Zen 4 (AVX-512
 * VNNI), GFLOP/s one row -> pairs: by 5 columns (verifying 4 drafted
 * tokens) Q4_K 5632x2048 234-236 -> 285-288, Q4_0 251 -> 270, Q6_K 173 ->
 * 212, at k = 5632 (sweeps of 4 + 1 then) Q4_K 184-187 -> 208-218, Q6_K 111
 * -> 144; by 64 Q4_0 5632x2048 (8 a sweep before) 268-273 -> 322-330, Q4_K
 * 254-258 -> 278-283, 2048x5632 Q4_K 221-225 -> 288, Q6_K 152 -> 198;
 * MXFP4 by 5 247 -> 308.  Q8_0's and Q5_0's pairs ran behind at k = 5632
 * (Q8_0 by 5 165 -> 103: its rows are twice as long; Q5_0 by 3 197 -> 161),
 * so they pair by rules of their own (q8_0x16.c, q5_0x16.c).
 *
 * A sweep takes 5 columns for 5 to 7 and at least 4 from 8 on, and where
 * their activations outgrow the budget it goes in parts (okv_x16_part):
 * rows in blocks of OKV_X16_PART_ROWS, each block's rows taking one part
 * after the other.  Before, a sweep took no more columns than fit: 4 + 1
 * for 5 at k = 5632, 2 at a time at k = 8192 and 1 at 14336.  Q4_0, one
 * thread of a Zen 4, GFLOP/s, three alternations: 2048x5632 by 5 166-174
 * -> 186-190; 2048x8192 by 5 189-192 -> 235-240, by 64 182-189 -> 254-259;
 * 2048x14336 by 5 134-136 -> 175-177, by 64 130-136 -> 253-305. */
#define OKV_X16_SWEEPS_PARTS(NAME, NAME2, budget, PAIRS) OKV_X16_SWEEPS_PARTS_ROWS(NAME, NAME2, budget, PAIRS, 0)

/* The same, where a sweep's parts also count row_bytes for each row it
 * streams at once (one, or two in pairs): Q8_0's, q8_0x16.c says why. */
#define OKV_X16_SWEEPS_PARTS_ROWS(NAME, NAME2, budget, PAIRS, row_bytes)                      \
    do {                                                                                      \
        _Alignas(64) float park_[OKV_X16_PART_ROWS * OKV_X16_MAX_COLS * 16];                  \
        const int64_t nw_ = c->k / 512, fit_ = (budget) / (int64_t)c->xa_col;                 \
        for (int64_t j_ = c0; j_ < c1;) {                                                     \
            const int64_t m_ = c1 - j_;                                                       \
            const int nc_ = (PAIRS) && m_ >= 8 && m_ % 4 == 0 ? 4                             \
                            : (PAIRS) || m_ < 8 ? okv_x16_sweep_cols(m_ < 5 ? m_ : 5)         \
                                                : okv_x16_sweep_cols(fit_ < 4 ? 4 : fit_ < m_ ? fit_ : m_); \
            const int paired_ = (PAIRS) && (nc_ == 5 || nc_ == 4);                            \
            const int64_t parts_ = okv_x16_parts(nc_ * (int64_t)c->xa_col + (paired_ ? 2 : 1) * (int64_t)(row_bytes), \
                                                 (budget), c->k);                             \
            /* a part's bytes of a row are about wrow / parts_: OKV_X16_AHEAD of them on */   \
            const int64_t rows_ahead_ = (OKV_X16_AHEAD * parts_ + (int64_t)c->wrow - 1) / (int64_t)c->wrow; \
            for (int64_t rb_ = r0; rb_ < r1; rb_ += OKV_X16_PART_ROWS) {                      \
                const int64_t re_ = r1 - rb_ < OKV_X16_PART_ROWS ? r1 : rb_ + OKV_X16_PART_ROWS; \
                for (int64_t p_ = 0; p_ < parts_; p_++) {                                     \
                    const okv_x16_part part_ = {.g0 = nw_ * p_ / parts_,                      \
                                                .g1 = p_ + 1 < parts_ ? nw_ * (p_ + 1) / parts_ : -1, \
                                                .r0 = rb_, .ahead = rows_ahead_ * (int64_t)c->wrow, .park = park_}; \
                    const okv_x16_part *pp_ = parts_ > 1 ? &part_ : NULL;                     \
                    const int64_t pairs_end_ = paired_ ? re_ - (re_ - rb_) % 2 : rb_;          \
                    for (int64_t r_ = rb_; r_ < pairs_end_; r_ += 2) {                        \
                        if (nc_ == 5) NAME2##_part(c, r_, 2, j_, 5, pp_);                     \
                        else NAME2##_part(c, r_, 2, j_, 4, pp_);                              \
                    }                                                                         \
                    for (int64_t r_ = pairs_end_; r_ < re_; r_++) {                           \
                        switch (nc_) {                                                        \
                        case 8: /* (not built for pairs, which never take 8) */         \
                            if (!(PAIRS)) NAME##_part(c, r_, 1, j_, 8, pp_);                  \
                            break;                                                            \
                        case 5: NAME##_part(c, r_, 1, j_, 5, pp_); break;                     \
                        case 4: NAME##_part(c, r_, 1, j_, 4, pp_); break;                     \
                        case 2: NAME##_part(c, r_, 1, j_, 2, pp_); break;                     \
                        default: NAME##_part(c, r_, 1, j_, 1, pp_); break;                    \
                        }                                                                     \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
            j_ += nc_;                                                                        \
        }                                                                                     \
    } while (0)

/* A block pass's entry: one row at a time, or in pairs (NAME2). */
#define OKV_X16_BLOCK_ENTRY_BUDGET(TARGET, NAME, block_fn, budget)                            \
    TARGET void block_fn(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) { \
        OKV_X16_SWEEPS_PARTS(NAME, NAME, budget, 0);                                          \
    }
#define OKV_X16_BLOCK_ENTRY(TARGET, NAME, block_fn) \
    OKV_X16_BLOCK_ENTRY_BUDGET(TARGET, NAME, block_fn, OKV_X16_SWEEP_BYTES)
#define OKV_X16_BLOCK_ENTRY_PAIRS_BUDGET(TARGET, NAME, NAME2, block_fn, budget)              \
    TARGET void block_fn(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) { \
        OKV_X16_SWEEPS_PARTS(NAME, NAME2, budget, 1);                                         \
    }
#define OKV_X16_BLOCK_ENTRY_PAIRS(TARGET, NAME, NAME2, block_fn) \
    OKV_X16_BLOCK_ENTRY_PAIRS_BUDGET(TARGET, NAME, NAME2, block_fn, OKV_X16_SWEEP_BYTES)

/* The same sweeps through the AVX2 tiles of Q4_0, Q8_0, Q4_K and Q5_K
 * (up to 8 columns: their bodies keep the columns' float sums in registers
 * and meet each unpacked weight vector with every column's activations in
 * turn, where the strips below keep the sums in acc_buf and run each
 * column's products in one chain).  bench/matmul, one thread, Zen 3,
 * 5632x2048 by 64 columns: Q4_0 173 -> 198-205 GFLOP/s, Q8_0 104 -> 111-116,
 * Q4_K 159-161 -> 179-189, Q5_K 154 -> 165; by 5 (verifying 4 drafted
 * tokens): Q4_0 158 -> 190, Q8_0 79 -> 102, Q4_K 131 -> 170, Q5_K 115 ->
 * 145; k = 2880 by 64: Q4_0 +12 %, Q8_0 +3 %.  Only where 5 or more
 * columns' activations fit OKV_X16_SWEEP_BYTES_AVX2 (k up to 3072): at
 * k = 5632 (7 KiB a column) every row and half read them from L2, and the
 * strips ran ahead (Q4_0 2048x5632 by 64: 177 against 160 in sweeps of 4;
 * by 5: 159 against 76 in one sweep).  Q6_K's and MXFP4's tiles keep both
 * halves' sums (16 registers at 8 columns): by 64 Q6_K ran 8 % slower
 * swept, MXFP4 level, so they keep the strips. */
enum { OKV_X16_SWEEP_BYTES_AVX2 = 20480 };
static inline int okv_x16_sweeps_avx2(size_t xa_col) { return OKV_X16_SWEEP_BYTES_AVX2 / (int64_t)xa_col >= 5; }

#endif
