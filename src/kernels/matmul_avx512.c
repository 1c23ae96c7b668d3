/* AVX-512 kernels: the 32-value legacy formats come from
 * matmul_avx512_tmpl.h in a BW and a VNNI build; the K-quants (ggml's
 * layout) are written here, BW only but for Q2_K's and Q3_K's VNNI tiles,
 * and the float ones are shared (VNNI adds nothing there).  The
 * sixteen-wide layouts are in their own files. */
#include <immintrin.h>

#include "kernels/cpu.h"
#include "kernels/matmul_impl.h"
#define KQ_TARGET OKV_TARGET_AVX512
#include "kernels/matmul_kq_scales.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define TARGET OKV_TARGET_AVX512
#define USE_VNNI 0
#define NAME(x) CAT(x, _bw)
#define TILE_NAME(t) okv_mm_tile_##t##_avx512
#include "kernels/matmul_avx512_tmpl.h"
#undef TARGET
#undef USE_VNNI
#undef NAME
#undef TILE_NAME

#define TARGET OKV_TARGET_AVX512VNNI
#define USE_VNNI 1
#define NAME(x) CAT(x, _vnni)
#define TILE_NAME(t) okv_mm_tile_##t##_avx512vnni
#include "kernels/matmul_avx512_tmpl.h"
#undef TARGET
#undef USE_VNNI
#undef NAME
#undef TILE_NAME

#define KERNEL static inline __attribute__((always_inline)) OKV_TARGET_AVX512

/* 16 weights from element i of a row; a masked load past the row end reads
 * nothing (masked-off lanes do not touch memory). */
KERNEL __m512 load16(int wtype, const uint8_t *row, int64_t i, __mmask16 m) {
    if (wtype == OKV_GGML_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
    if (wtype == OKV_GGML_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * i)), 16));
    return _mm512_maskz_loadu_ps(m, row + 4 * i);
}

/* Few columns (batched decode, speculative verification: 2 to FS_MAX_N;
 * the panels below take 16 and more, where they gain ~10 %, and with 8
 * their conversion cost more than it saved: F16 5632x2048, one thread,
 * ~50 against ~70 GFLOP/s): where 4x4 tiles read and converted each
 * weight once per 4 columns (8 columns as two tiles of 4, 5 as 4 + 1), a
 * strip of NR rows takes up to FS_SWEEP columns at once: each 16-wide step
 * converts the strip's NR weight vectors once and, column by column, loads
 * an activation vector for NR FMAs (NR * NC accumulators, NR weights and one
 * activation), or where the strip is taller than wide holds the NC
 * activations and converts a weight at a time (NR * NC + NC + 1): at most
 * 29 of the 32 registers (4 rows by 6 columns, or 6 by 4).  The tiles of
 * decode (one column, MM_TR x MM_TC at most) are such strips too, so every
 * output gets the same FMAs in the same order and the same final sum
 * whatever the column count: the bits are the same. */
enum { FS_MAX_N = 15, FS_SWEEP = 6, FS_ROWS = 6 };

/* One 16-wide step of a strip at element i (lanes under m). */
KERNEL void float_step(int wtype, const uint8_t *const *rows, const float *const *xs, const int NR, const int NC,
                        int64_t i, __mmask16 m, __m512 acc[FS_ROWS][FS_SWEEP]) {
    if (NR > NC) {
        __m512 xv[FS_SWEEP];
        UNROLL for (int j = 0; j < NC; j++) xv[j] = _mm512_maskz_loadu_ps(m, xs[j] + i);
        UNROLL for (int r = 0; r < NR; r++) {
            const __m512 wv = load16(wtype, rows[r], i, m);
            UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm512_fmadd_ps(wv, xv[j], acc[r][j]);
        }
        return;
    }
    __m512 wv[FS_ROWS];
    UNROLL for (int r = 0; r < NR; r++) wv[r] = load16(wtype, rows[r], i, m);
    UNROLL for (int j = 0; j < NC; j++) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, xs[j] + i);
        UNROLL for (int r = 0; r < NR; r++) acc[r][j] = _mm512_fmadd_ps(wv[r], xv, acc[r][j]);
    }
}

/* Rows r0 .. r0+NR-1 (NR <= FS_ROWS) by the NC (<= FS_SWEEP) columns from c0. */
KERNEL void float_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const uint8_t *rows[FS_ROWS];
    const float *xs[FS_SWEEP];
    UNROLL for (int r = 0; r < NR; r++) rows[r] = c->w + (r0 + r) * c->wrow;
    UNROLL for (int j = 0; j < NC; j++) xs[j] = c->x + (c0 + j) * c->k;
    __m512 acc[FS_ROWS][FS_SWEEP];
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm512_setzero_ps();
    const int64_t k = c->k, k16 = k & ~(int64_t)15;
    const int64_t wsize = wtype == OKV_GGML_F32 ? 4 : 2;
    const int64_t ahead = okv_mm_float_ahead(c->wrow, NR);
    int64_t i = 0;
    /* One prefetch per 64-byte line of each row, into L2 (matmul_impl.h
     * says how far ahead; the AVX2 float tile issues one per 16 elements):
     * 1 KiB ahead into L1 on every step left F16 decode on a Zen 4 at
     * 8.7-9.1 t/s (TinyLlama-1.1B shape, 2 threads; 8 KiB ahead into L2:
     * 11.7-12.8, no prefetch 10.7, same-minute A/B). */
    for (; i < k16; i += 16) {
        if (((wsize * i) & 63) == 0)
            UNROLL for (int r = 0; r < NR; r++)
                _mm_prefetch((const char *)rows[r] + wsize * i + ahead, _MM_HINT_T1);
        float_step(wtype, rows, xs, NR, NC, i, (__mmask16)0xFFFF, acc);
    }
    if (i < k) float_step(wtype, rows, xs, NR, NC, i, (__mmask16)((1u << (k - i)) - 1), acc);
    UNROLL for (int j = 0; j < NC; j++)
        UNROLL for (int r = 0; r < NR; r++) c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc[r][j]);
}

OKV_MM_FLOAT_TILES(KERNEL, OKV_TARGET_AVX512, avx512, float_tile)

/* Rows r_begin .. r_end-1 in strips of NR (then of 4, the rest one by
 * one), by the NC columns from c0. */
KERNEL void fsmall_rows(int wtype, const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, const int NR, int64_t c0,
                        const int NC) {
    int64_t r = r_begin;
    for (; r + NR <= r_end; r += NR) float_tile(wtype, c, r, NR, c0, NC);
    if (NR > 4)
        for (; r + 4 <= r_end; r += 4) float_tile(wtype, c, r, 4, c0, NC);
    for (; r < r_end; r++) float_tile(wtype, c, r, 1, c0, NC);
}

/* Column counts past FS_SWEEP in sweeps of as even a width over strips of
 * FS_STRIP rows, whose weights come from L1 or L2 after the first sweep:
 * one sweep of 8 columns over 3-row strips (28 registers) ran 6-8 % slower
 * than the 4x4 tiles, two of 4 over 12 rows 4-11 % faster, 12 columns as
 * two of 6 27-28 % (F16 5632 x 2048, one thread of a Zen 5).  Sweeps of 4
 * in 6-row tiles then: 8 columns another 6-16 %, 7 (4 + 3) level to +4 %,
 * and 8 sequences of TinyLlama F16 decoded in 76-90 ms steps, not 84-91
 * (build/bench/batch, 2 threads, the same Zen 5, four pairs in turns). */
enum { FS_STRIP = 12 };

/* n (1 to FS_SWEEP) columns as a constant for float_tile, in strips of 4
 * rows, or of 6 in a sweep of up to 4 columns (swept), whose later sweeps
 * read the weights from L1 or L2: 6 rows take an activation load per 6
 * FMAs where 4 take one per 4 (measured above).  Without sweeps, the
 * weights all from memory, strips stay at 4 rows, whose weight streams the
 * prefetch distance is set for: strips of 8 rows by 2 columns and of 6
 * rows by 4 ran 1-11 % slower in decodes of 2 and of 4 sequences. */
KERNEL void fsmall_cols(int wtype, const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t n, int swept) {
    switch (n) {
    case 1: fsmall_rows(wtype, c, r0, r1, 4, c0, 1); break;
    case 2: fsmall_rows(wtype, c, r0, r1, 4, c0, 2); break;
    case 3:
        if (swept) fsmall_rows(wtype, c, r0, r1, 6, c0, 3);
        else fsmall_rows(wtype, c, r0, r1, 4, c0, 3);
        break;
    case 4:
        if (swept) fsmall_rows(wtype, c, r0, r1, 6, c0, 4);
        else fsmall_rows(wtype, c, r0, r1, 4, c0, 4);
        break;
    case 5: fsmall_rows(wtype, c, r0, r1, 4, c0, 5); break;
    default: fsmall_rows(wtype, c, r0, r1, 4, c0, 6); break;
    }
}

KERNEL void fsmall_block(int wtype, const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const int64_t n = c1 - c0;
    if (n <= FS_SWEEP) {
        fsmall_cols(wtype, c, r0, r1, c0, n, 0);
        return;
    }
    const int64_t sweeps = (n + FS_SWEEP - 1) / FS_SWEEP;
    for (int64_t r = r0; r < r1; r += FS_STRIP) {
        const int64_t re = r1 - r < FS_STRIP ? r1 : r + FS_STRIP;
        for (int64_t s = 0; s < sweeps; s++)
            fsmall_cols(wtype, c, r, re, c0 + n * s / sweeps, n * (s + 1) / sweeps - n * s / sweeps, 1);
    }
}

/* The block pass for float weights: each weight row is converted to f32
 * once per column block into a small panel (PANEL_K elements of up to
 * PANEL_ROWS rows, in L1), instead of once per 4-column tile; the tiles
 * then read f32 weights, and with no conversions on the FMA ports a tile
 * of 8 rows by 3 columns (24 accumulators, 11 loads a step) runs near the
 * FMA rate.  Not on a Zen 4, whose 512-bit FMAs take both of its 256-bit
 * pipes (okv_cpu_halves_512): there 8-row tiles ran 11-15 % slower than
 * 4-row ones (F16 5632 x 2048 by 512 columns, one thread, 85-88 against
 * 93-97 GFLOP/s), where on a Zen 5's full-width units 4-row tiles ran
 * 6-11 % slower than 8-row ones (4 x 4 and 8 x 2 tiles 4-5 %, panels of
 * 256 or 1024 values 10 %).  The accumulators are carried between panels
 * in acc_buf.  Each output still sees the same FMAs
 * on the same values in the same order as in float_tile (conversion to f32
 * is exact; the zero padding of the last panel meets the same zeroed
 * activations as float_tile's masked loads), so results are bit-identical
 * to it, as the tests check. */
enum { PANEL_ROWS = 8, PANEL_K = 512, PANEL_TC = 3 };

typedef struct panel_ctx {
    const float *panel;   /* PANEL_ROWS rows of PANEL_K floats */
    const float *x;       /* activations of column c0 at element kc */
    int64_t k;            /* column stride of x */
    int64_t len;          /* elements in this panel */
    __m512 *acc_buf;      /* [PANEL_ROWS][MM_COL_BLOCK], column 0 = c0 */
    const uint8_t *next;  /* the next panel's weights (NULL: none): pf_rows rows */
    size_t wrow;          /* of pf_bytes each, wrow apart */
    int pf_rows;
    int64_t pf_bytes;
} panel_ctx;

/* One 16-wide step at element i (lanes under m) of rows pr0 .. pr0+NR-1 of
 * the panel by the NC columns at xs, into acc. */
KERNEL void panel_step(const panel_ctx *p, const float *const *xs, int pr0, const int NR, const int NC, int64_t i,
                       __mmask16 m, __m512 acc[PANEL_ROWS][PANEL_TC]) {
    __m512 xv[PANEL_TC];
    UNROLL for (int j = 0; j < NC; j++) xv[j] = _mm512_maskz_loadu_ps(m, xs[j] + i);
    UNROLL for (int r = 0; r < NR; r++) {
        __m512 wv = _mm512_load_ps(p->panel + (pr0 + r) * PANEL_K + i);
        /* one load per row: folded into each FMA instead (GCC's choice), the
         * loads outnumber what the load ports take per FMA */
        __asm__("" : "+v"(wv));
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm512_fmadd_ps(wv, xv[j], acc[r][j]);
    }
}

/* Rows pr0 .. pr0+NR-1 of the panel by columns jb .. jb+NC-1 of the block.
 * The accumulators always come from and go back to acc_buf: with a
 * conditional start or end GCC keeps them in memory in the loop. */
KERNEL void panel_tile(const panel_ctx *p, int pr0, const int NR, int jb, const int NC) {
    __m512 acc[PANEL_ROWS][PANEL_TC];
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = p->acc_buf[(pr0 + r) * MM_COL_BLOCK + jb + j];
    const float *xs[PANEL_TC];
    UNROLL for (int j = 0; j < NC; j++) xs[j] = p->x + (jb + j) * p->k;
    const int64_t len16 = p->len & ~(int64_t)15;
    int64_t i = 0;
    for (; i < len16; i += 16) panel_step(p, xs, pr0, NR, NC, i, (__mmask16)0xFFFF, acc);
    if (i < p->len) panel_step(p, xs, pr0, NR, NC, i, (__mmask16)((1u << (p->len - i)) - 1), acc);
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) p->acc_buf[(pr0 + r) * MM_COL_BLOCK + jb + j] = acc[r][j];
}

/* Rows 0 .. nr-1 of the panel by columns jb .. jb+NC-1: strips of TR rows,
 * then of 4, then single rows. */
KERNEL void panel_strips(const panel_ctx *p, int nr, const int TR, int jb, const int NC) {
    int r = 0;
    for (; r + TR <= nr; r += TR) panel_tile(p, r, TR, jb, NC);
    for (; r + 4 <= nr; r += 4) panel_tile(p, r, 4, jb, NC);
    for (; r < nr; r++) panel_tile(p, r, 1, jb, NC);
}

/* nr rows of the panel (<= PANEL_ROWS) by nc columns, as the AVX2 block
 * pass: column tiles of 3, and of 2 for the last 2 or 4 columns (a 4x1 tile
 * has half the FMA chains), each over the panel's rows in strips of TR (8,
 * or 4 where 512-bit FMAs run in halves), so a tile's activations are read
 * from L2 once.  The next panel's
 * weights stream into L2 meanwhile, a few lines before each column tile:
 * all 128 lines at once before the conversion, the conversion of the next
 * panel still waited on them (14% of an F16 prefill's samples on a Zen 5). */
KERNEL void panel_pass(const panel_ctx *p, int nr, int nc, const int TR) {
    okv_mm_prefetch pf = okv_mm_prefetch_start(p->next, p->wrow, p->pf_rows, p->pf_bytes);
    const int nc3 = nc - (nc % PANEL_TC == 1 && nc > 1 ? 4 : nc % PANEL_TC), tiles = nc3 / PANEL_TC;
    if (tiles == 0) /* a last block of 1 or 2 columns: no tiles of 3 to spread them over */
        okv_mm_prefetch_until(&pf, pf.lines);
    int j = 0;
    for (int t = 0; j < nc3; j += PANEL_TC, t++) {
        okv_mm_prefetch_until(&pf, pf.lines * (t + 1) / tiles);
        panel_strips(p, nr, TR, j, PANEL_TC);
    }
    for (; j + 2 <= nc; j += 2) panel_strips(p, nr, TR, j, 2);
    for (; j < nc; j++) panel_strips(p, nr, TR, j, 1);
}

KERNEL void float_block(int wtype, const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, int64_t c0, int64_t c1) {
    _Alignas(64) float panel[PANEL_ROWS * PANEL_K];
    __m512 acc_buf[PANEL_ROWS * MM_COL_BLOCK];
    const int nc = (int)(c1 - c0);
    const int halves = okv_cpu_halves_512();
    for (int64_t r0 = r_begin; r0 < r_end; r0 += PANEL_ROWS) {
        const int nr = (int)(r_end - r0 < PANEL_ROWS ? r_end - r0 : PANEL_ROWS);
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < nc; j++) acc_buf[r * MM_COL_BLOCK + j] = _mm512_setzero_ps();
        for (int64_t kc = 0; kc < c->k; kc += PANEL_K) {
            const int64_t len = c->k - kc < PANEL_K ? c->k - kc : PANEL_K;
            /* the weights of the next panel (this strip's or the next
             * strip's first) stream in while this one is computed */
            const int64_t nk = kc + PANEL_K < c->k ? kc + PANEL_K : 0;
            const int64_t nr0 = nk ? r0 : r0 + PANEL_ROWS;
            const int64_t wbytes = c->wrow / c->k;  /* bytes per weight */
            const int64_t nrows = r_end - nr0 < PANEL_ROWS ? r_end - nr0 : PANEL_ROWS;
            for (int r = 0; r < nr; r++) {
                const uint8_t *row = c->w + (r0 + r) * c->wrow;
                for (int64_t i = 0; i < len; i += 16) {
                    const __mmask16 m = len - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - i)) - 1);
                    _mm512_store_ps(panel + r * PANEL_K + i, load16(wtype, row, kc + i, m));
                }
            }
            const panel_ctx p = {.panel = panel, .x = c->x + c0 * c->k + kc, .k = c->k, .len = len,
                                 .acc_buf = acc_buf, .next = nrows > 0 ? c->w + nr0 * c->wrow + nk * wbytes : NULL,
                                 .wrow = c->wrow, .pf_rows = nrows > 0 ? (int)nrows : 0,
                                 .pf_bytes = (c->k - nk < PANEL_K ? c->k - nk : PANEL_K) * wbytes};
            /* two calls, so that the tile height is a constant in each */
            if (halves)
                panel_pass(&p, nr, nc, 4);
            else
                panel_pass(&p, nr, nc, 8);
        }
        /* column by column, as the AVX2 block pass (matmul_avx2.c says why) */
        for (int j = 0; j < nc; j++)
            for (int r = 0; r < nr; r++)
                c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc_buf[r * MM_COL_BLOCK + j]);
    }
}

/* The block pass of the float types: fsmall_block up to FS_MAX_N columns
 * (matmul.c sends a single column to the tiles), float_block's panels from
 * there on (a short last column block of a wide product included: the bits
 * are the same either way). */
#define FLOAT_BLOCK(kind, wtype)                                                                      \
    OKV_TARGET_AVX512 void okv_mm_block_##kind##_avx512(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, \
                                                       int64_t c1) {                                   \
        if (c1 - c0 <= FS_MAX_N) fsmall_block(wtype, c, r0, r1, c0, c1);                              \
        else float_block(wtype, c, r0, r1, c0, c1);                                                    \
    }
FLOAT_BLOCK(f32, OKV_GGML_F32)
FLOAT_BLOCK(f16, OKV_GGML_F16)
FLOAT_BLOCK(bf16, OKV_GGML_BF16)

/* ---- K-quants, 64 values per 512-bit step ----
 *
 * The same integer sums as the AVX2 kernels (matmul_avx2.c), two of their
 * 32-value vectors at once: Q4_K/Q5_K's low and high nibbles of 32 bytes are
 * the consecutive values 64c..64c+63, matching one 64-byte load of the
 * activations; Q6_K's four 32-value vectors pair up the same way.  Scales
 * go in per 16-bit lane with one vpermw per step. */

#define KQ_AHEAD 8192 /* bytes, as the other AVX-512 kernels' PREFETCH_AHEAD */

KERNEL void kq_prefetch(const void *blk, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)blk + KQ_AHEAD + o, _MM_HINT_T1);
}

KERNEL const block_q8_K *kq_act(const okv_mm_ctx *c, int64_t col, int64_t b) {
    return (const block_q8_K *)(c->xa + col * c->xa_col) + b;
}

/* 32 int16 lanes: lanes 16h..16h+15 (h = 0, 1) hold scale base + h of the
 * eight int16 scales in sc16 (Q4_K/Q5_K: sub-blocks of 32). */
KERNEL __m512i scales_by_32(__m128i sc16, int base) {
    const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16((short)base),
                                         _mm512_srli_epi16(_mm512_setr_epi32(0x00010000, 0x00030002, 0x00050004,
                                                                             0x00070006, 0x00090008, 0x000B000A,
                                                                             0x000D000C, 0x000F000E, 0x00110010,
                                                                             0x00130012, 0x00150014, 0x00170016,
                                                                             0x00190018, 0x001B001A, 0x001D001C,
                                                                             0x001F001E),
                                                           4));
    return _mm512_permutexvar_epi16(idx, _mm512_castsi128_si512(sc16));
}

/* 32 int16 lanes: lanes 8q..8q+7 (q = 0..3) hold scale base + q of the 16
 * int16 scales in sc16 (Q6_K: groups of 16). */
KERNEL __m512i scales_by_16(__m256i sc16, int base) {
    const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16((short)base),
                                         _mm512_srli_epi16(_mm512_setr_epi32(0x00010000, 0x00030002, 0x00050004,
                                                                             0x00070006, 0x00090008, 0x000B000A,
                                                                             0x000D000C, 0x000F000E, 0x00110010,
                                                                             0x00130012, 0x00150014, 0x00170016,
                                                                             0x00190018, 0x001B001A, 0x001D001C,
                                                                             0x001F001E),
                                                           3));
    return _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(sc16));
}

/* Q4_K (qh NULL) and Q5_K: sumi[j] gets sum sc * q * x, mins[j] (8 int32)
 * sum m * bsums, per column j. */
KERNEL void q45_K_dot512(const uint8_t *qs, const uint8_t *qh, const uint8_t *scales,
                         const block_q8_K *const *y, __m512i *sumi, __m256i *mins, const int NC) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    const __m512i nib = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    const __m128i sm = kq_q4_K_scales_mins(scales);
    const __m128i sc16 = _mm_cvtepu8_epi16(sm);
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    const __m512i hbits = qh ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh)) : _mm512_setzero_si512();
    UNROLL for (int j = 0; j < NC; j++) {
        sumi[j] = _mm512_setzero_si512();
        mins[j] = _mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)y[j]->bsums));
    }
    UNROLL for (int q = 0; q < 4; q++) {
        const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * q)));
        __m512i w = _mm512_and_si512(_mm512_srlv_epi64(bits, nib), m4);
        if (qh) {
            const __m512i hs = _mm512_setr_epi64(2 * q, 2 * q, 2 * q, 2 * q, 2 * q + 1, 2 * q + 1, 2 * q + 1, 2 * q + 1);
            w = _mm512_or_si512(w, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hbits, hs), one), 4));
        }
        const __m512i s = scales_by_32(sc16, 2 * q);
        UNROLL for (int j = 0; j < NC; j++) {
            const __m512i xv = _mm512_loadu_si512(y[j]->qs + 64 * q);
            sumi[j] = _mm512_add_epi32(sumi[j], _mm512_madd_epi16(s, _mm512_maddubs_epi16(w, xv)));
        }
    }
}

/* Q6_K: per half, [values l | l+32] from the low nibbles of ql's 64 bytes
 * and bit pairs 0, 2 of qh; [l+64 | l+96] from the high nibbles and bit
 * pairs 4, 6; the -32 offset through the bsums. */
KERNEL void q6_K_dot512(const block_q6_K *x, const block_q8_K *const *y, __m512i *sumi, __m256i *mins,
                        const int NC) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    const __m512i s02 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2), s46 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    UNROLL for (int j = 0; j < NC; j++) {
        const __m256i corr = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[j]->bsums));
        sumi[j] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5)));
        mins[j] = _mm256_setzero_si256();
    }
    UNROLL for (int h = 0; h < 2; h++) {
        const __m512i l = _mm512_loadu_si512(x->ql + 64 * h);
        const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
        const __m512i a = _mm512_or_si512(_mm512_and_si512(l, m4),
                                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hb, s02), m3), 4));
        const __m512i b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hb, s46), m3), 4));
        const __m512i sa = scales_by_16(sc16, 8 * h), sb = scales_by_16(sc16, 8 * h + 4);
        UNROLL for (int j = 0; j < NC; j++) {
            const __m512i xa = _mm512_loadu_si512(y[j]->qs + 128 * h);
            const __m512i xb = _mm512_loadu_si512(y[j]->qs + 128 * h + 64);
            sumi[j] = _mm512_add_epi32(sumi[j], _mm512_madd_epi16(sa, _mm512_maddubs_epi16(a, xa)));
            sumi[j] = _mm512_add_epi32(sumi[j], _mm512_madd_epi16(sb, _mm512_maddubs_epi16(b, xb)));
        }
    }
}

/* Q2_K (hm NULL) and Q3_K: per half (qs[32h..32h+31]), bit pairs 0 and 2 give
 * values [128h .. +63], pairs 4 and 6 [128h+64 .. +127] (groups of 16 in
 * order); Q3_K adds 4 * bit 4h + s of hmask and takes 4 off through the
 * bsums.  sc16: the 16 scales; mn16: Q2_K's mins.  With VNNI, vpdpwssd
 * takes the scales' madd and the add in one: the same int32 sums of the
 * same int16 factors (maddubs's pair sums, at most 2 * 7 * 128, and the
 * scales), two instructions per 64 products where BW takes three. */
#define Q23_K_DOT512(name, TARGET, VNNI)                                                                   \
    static inline __attribute__((always_inline)) TARGET void name(const uint8_t *qs, const uint8_t *hm, __m256i sc16, \
                                                                  __m256i mn16, const block_q8_K *const *y, \
                                                                  __m512i *sumi, __m256i *mins, const int NC) { \
        const __m512i m3 = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);                                \
        const __m512i s02 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2), s46 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6); \
        const __m512i hmv = hm ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)hm)) : _mm512_setzero_si512(); \
        UNROLL for (int j = 0; j < NC; j++) {                                                             \
            const __m256i bs = _mm256_loadu_si256((const __m256i *)y[j]->bsums);                          \
            if (hm) {                                                                                     \
                const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 2);                   \
                sumi[j] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), corr));         \
                mins[j] = _mm256_setzero_si256();                                                         \
            } else {                                                                                      \
                sumi[j] = _mm512_setzero_si512();                                                         \
                mins[j] = _mm256_madd_epi16(mn16, bs);                                                    \
            }                                                                                             \
        }                                                                                                 \
        UNROLL for (int h = 0; h < 2; h++) {                                                              \
            const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * h))); \
            __m512i a = _mm512_and_si512(_mm512_srlv_epi64(bits, s02), m3);                               \
            __m512i b = _mm512_and_si512(_mm512_srlv_epi64(bits, s46), m3);                               \
            if (hm) {                                                                                     \
                const __m512i ha = _mm512_setr_epi64(4 * h, 4 * h, 4 * h, 4 * h, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 1); \
                const __m512i hb = _mm512_add_epi64(ha, _mm512_set1_epi64(2));                            \
                a = _mm512_or_si512(a, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hmv, ha), one), 2)); \
                b = _mm512_or_si512(b, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(hmv, hb), one), 2)); \
            }                                                                                             \
            const __m512i sa = scales_by_16(sc16, 8 * h), sb = scales_by_16(sc16, 8 * h + 4);             \
            UNROLL for (int j = 0; j < NC; j++) {                                                         \
                const __m512i xa = _mm512_loadu_si512(y[j]->qs + 128 * h);                                \
                const __m512i xb = _mm512_loadu_si512(y[j]->qs + 128 * h + 64);                           \
                if (VNNI) {                                                                               \
                    sumi[j] = _mm512_dpwssd_epi32(sumi[j], _mm512_maddubs_epi16(a, xa), sa);              \
                    sumi[j] = _mm512_dpwssd_epi32(sumi[j], _mm512_maddubs_epi16(b, xb), sb);              \
                } else {                                                                                  \
                    sumi[j] = _mm512_add_epi32(sumi[j], _mm512_madd_epi16(sa, _mm512_maddubs_epi16(a, xa))); \
                    sumi[j] = _mm512_add_epi32(sumi[j], _mm512_madd_epi16(sb, _mm512_maddubs_epi16(b, xb))); \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }

Q23_K_DOT512(q23_K_dot512, OKV_TARGET_AVX512, 0)
Q23_K_DOT512(q23_K_dot512_vnni, OKV_TARGET_AVX512VNNI, 1)

#define Q2_K_DOT512(name, TARGET, DOT23)                                                                   \
    static inline __attribute__((always_inline)) TARGET void name(const block_q2_K *x, const block_q8_K *const *y, \
                                                                  __m512i *sumi, __m256i *mins, const int NC) { \
        const __m128i raw = _mm_loadu_si128((const __m128i *)x->scales), low4 = _mm_set1_epi8(0x0F);      \
        DOT23(x->qs, NULL, _mm256_cvtepu8_epi16(_mm_and_si128(raw, low4)),                                \
              _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), low4)), y, sumi, mins, NC);      \
    }
#define Q3_K_DOT512(name, TARGET, DOT23)                                                                   \
    static inline __attribute__((always_inline)) TARGET void name(const block_q3_K *x, const block_q8_K *const *y, \
                                                                  __m512i *sumi, __m256i *mins, const int NC) { \
        DOT23(x->qs, x->hmask, _mm256_cvtepi8_epi16(kq_q3_K_scales(x->scales)), _mm256_setzero_si256(), y, sumi, \
              mins, NC);                                                                                  \
    }
Q2_K_DOT512(q2_K_dot512, OKV_TARGET_AVX512, q23_K_dot512)
Q2_K_DOT512(q2_K_dot512_vnni, OKV_TARGET_AVX512VNNI, q23_K_dot512_vnni)
Q3_K_DOT512(q3_K_dot512, OKV_TARGET_AVX512, q23_K_dot512)
Q3_K_DOT512(q3_K_dot512_vnni, OKV_TARGET_AVX512VNNI, q23_K_dot512_vnni)

#define KQ512_TILE(name, TARGET, block_t, DOT, HAS_MIN, DMIN)                                           \
    static inline __attribute__((always_inline)) TARGET void name(const okv_mm_ctx *c, int64_t r0, const int NR, \
                                                                  int64_t c0, const int NC) {           \
        const int64_t nb = c->k / OKV_QK_K;                                                             \
        __m512 acc[MM_TR][MM_TC];                                                                       \
        UNROLL for (int r = 0; r < NR; r++)                                                             \
            UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm512_setzero_ps();                        \
        for (int64_t b = 0; b < nb; b++) {                                                              \
            const block_q8_K *y[MM_TC];                                                                 \
            UNROLL for (int j = 0; j < NC; j++) y[j] = kq_act(c, c0 + j, b);                            \
            UNROLL for (int r = 0; r < NR; r++) {                                                       \
                const block_t *x = (const block_t *)(c->w + (r0 + r) * c->wrow) + b;                    \
                kq_prefetch(x, sizeof *x);                                                              \
                __m512i sumi[MM_TC];                                                                    \
                __m256i mins[MM_TC];                                                                    \
                DOT(x, y, sumi, mins, NC);                                                              \
                const float dw = _cvtsh_ss(x->d);                                                       \
                UNROLL for (int j = 0; j < NC; j++) {                                                   \
                    acc[r][j] = _mm512_fmadd_ps(_mm512_set1_ps(dw * y[j]->d), _mm512_cvtepi32_ps(sumi[j]), \
                                                acc[r][j]);                                             \
                    if (HAS_MIN)                                                                        \
                        acc[r][j] = _mm512_fmadd_ps(_mm512_set1_ps(-(DMIN(x) * y[j]->d)),               \
                                                    _mm512_zextps256_ps512(_mm256_cvtepi32_ps(mins[j])), \
                                                    acc[r][j]);                                         \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
        UNROLL for (int r = 0; r < NR; r++)                                                             \
            UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc[r][j]); \
    }

#define Q4_K_DOT(x, y, sumi, mins, NC) q45_K_dot512((x)->qs, NULL, (x)->scales, y, sumi, mins, NC)
#define Q5_K_DOT(x, y, sumi, mins, NC) q45_K_dot512((x)->qs, (x)->qh, (x)->scales, y, sumi, mins, NC)
#define Q6_K_DOT(x, y, sumi, mins, NC) q6_K_dot512(x, y, sumi, mins, NC)
#define Q2_K_DOT(x, y, sumi, mins, NC) q2_K_dot512(x, y, sumi, mins, NC)
#define Q3_K_DOT(x, y, sumi, mins, NC) q3_K_dot512(x, y, sumi, mins, NC)
#define DMIN_OF(x) _cvtsh_ss((x)->dmin)
#define NO_DMIN(x) 0.0f

#define Q2_K_DOT_VNNI(x, y, sumi, mins, NC) q2_K_dot512_vnni(x, y, sumi, mins, NC)
#define Q3_K_DOT_VNNI(x, y, sumi, mins, NC) q3_K_dot512_vnni(x, y, sumi, mins, NC)

KQ512_TILE(q4_K_tile, OKV_TARGET_AVX512, block_q4_K, Q4_K_DOT, 1, DMIN_OF)
KQ512_TILE(q5_K_tile, OKV_TARGET_AVX512, block_q5_K, Q5_K_DOT, 1, DMIN_OF)
KQ512_TILE(q6_K_tile, OKV_TARGET_AVX512, block_q6_K, Q6_K_DOT, 0, NO_DMIN)
KQ512_TILE(q2_K_tile, OKV_TARGET_AVX512, block_q2_K, Q2_K_DOT, 1, DMIN_OF)
KQ512_TILE(q3_K_tile, OKV_TARGET_AVX512, block_q3_K, Q3_K_DOT, 0, NO_DMIN)
KQ512_TILE(q2_K_tile_vnni, OKV_TARGET_AVX512VNNI, block_q2_K, Q2_K_DOT_VNNI, 1, DMIN_OF)
KQ512_TILE(q3_K_tile_vnni, OKV_TARGET_AVX512VNNI, block_q3_K, Q3_K_DOT_VNNI, 0, NO_DMIN)

OKV_MM_DISPATCH(OKV_TARGET_AVX512, okv_mm_tile_q4_K_avx512, q4_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512, okv_mm_tile_q5_K_avx512, q5_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512, okv_mm_tile_q6_K_avx512, q6_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512, okv_mm_tile_q2_K_avx512, q2_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512, okv_mm_tile_q3_K_avx512, q3_K_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512VNNI, okv_mm_tile_q2_K_avx512vnni, q2_K_tile_vnni)
OKV_MM_DISPATCH(OKV_TARGET_AVX512VNNI, okv_mm_tile_q3_K_avx512vnni, q3_K_tile_vnni)
