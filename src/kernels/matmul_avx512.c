/* AVX-512 kernels: the quantized ones come from matmul_avx512_tmpl.h in a
 * BW and a VNNI build; the float ones are shared (VNNI adds nothing there). */
#include <immintrin.h>

#include "kernels/cpu.h"
#include "kernels/matmul_impl.h"

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

/* One 16-wide step of a tile at element i; row and column pointers come
 * hoisted, as GCC otherwise reloads and remultiplies them on every step. */
KERNEL void float_step(int wtype, const uint8_t *const *rows, const float *const *xs, const int NR, const int NC,
                       int64_t i, __mmask16 m, __m512 acc[MM_TR][MM_TC]) {
    __m512 xv[MM_TC];
    UNROLL for (int j = 0; j < NC; j++) xv[j] = _mm512_maskz_loadu_ps(m, xs[j] + i);
    UNROLL for (int r = 0; r < NR; r++) {
        /* as in the quantized kernels: helps decode stream from DRAM */
        _mm_prefetch((const char *)rows[r] + (wtype == OKV_GGML_F32 ? 4 : 2) * i + 1024, _MM_HINT_T0);
        const __m512 wv = load16(wtype, rows[r], i, m);
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm512_fmadd_ps(wv, xv[j], acc[r][j]);
    }
}

KERNEL void float_tile(int wtype, const okv_mm_ctx *c, int64_t r0, const int NR, int64_t c0, const int NC) {
    const uint8_t *rows[MM_TR];
    const float *xs[MM_TC];
    UNROLL for (int r = 0; r < NR; r++) rows[r] = c->w + (r0 + r) * c->wrow;
    UNROLL for (int j = 0; j < NC; j++) xs[j] = c->x + (c0 + j) * c->k;
    __m512 acc[MM_TR][MM_TC];
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) acc[r][j] = _mm512_setzero_ps();
    const int64_t k = c->k, k16 = k & ~(int64_t)15;
    int64_t i = 0;
    for (; i < k16; i += 16) float_step(wtype, rows, xs, NR, NC, i, (__mmask16)0xFFFF, acc);
    if (i < k) float_step(wtype, rows, xs, NR, NC, i, (__mmask16)((1u << (k - i)) - 1), acc);
    UNROLL for (int r = 0; r < NR; r++)
        UNROLL for (int j = 0; j < NC; j++) c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc[r][j]);
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

OKV_MM_DISPATCH(OKV_TARGET_AVX512, okv_mm_tile_f32_avx512, f32_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512, okv_mm_tile_f16_avx512, f16_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512, okv_mm_tile_bf16_avx512, bf16_tile)

/* The block pass for float weights: each weight row is converted to f32
 * once per column block into a small panel (PANEL_K elements of up to
 * PANEL_ROWS rows, in L1), instead of once per 4-column tile; the tiles
 * then read f32 weights, and with no conversions on the FMA ports a tile
 * of 8 rows by 3 columns runs near the FMA rate.  The accumulators are
 * carried between panels in acc_buf.  Each output still sees the same FMAs
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
} panel_ctx;

/* Rows pr0 .. pr0+NR-1 of the panel by columns jb .. jb+NC-1 of the block.
 * The accumulators always come from and go back to acc_buf: with a
 * conditional start or end GCC keeps them in memory in the loop. */
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

/* nr rows of the panel (<= PANEL_ROWS) by nc columns, in strips of 8, 4 or
 * 1 rows and tiles of 3 or 1 columns. */
KERNEL void panel_pass(const panel_ctx *p, int nr, int nc) {
    for (int pr = 0; pr < nr;) {
        const int strip = nr - pr >= 8 ? 8 : nr - pr >= 4 ? 4 : 1;
        int j = 0;
        for (; j + PANEL_TC <= nc; j += PANEL_TC) {
            if (strip == 8) panel_tile(p, pr, 8, j, PANEL_TC);
            else if (strip == 4) panel_tile(p, pr, 4, j, PANEL_TC);
            else panel_tile(p, pr, 1, j, PANEL_TC);
        }
        for (; j < nc; j++) {
            if (strip == 8) panel_tile(p, pr, 8, j, 1);
            else if (strip == 4) panel_tile(p, pr, 4, j, 1);
            else panel_tile(p, pr, 1, j, 1);
        }
        pr += strip;
    }
}

KERNEL void float_block(int wtype, const okv_mm_ctx *c, int64_t r_begin, int64_t r_end, int64_t c0, int64_t c1) {
    _Alignas(64) float panel[PANEL_ROWS * PANEL_K];
    __m512 acc_buf[PANEL_ROWS * MM_COL_BLOCK];
    const int nc = (int)(c1 - c0);
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
            for (int64_t r = nr0; r < nr0 + PANEL_ROWS && r < r_end; r++) {
                const int64_t nlen = c->k - nk < PANEL_K ? c->k - nk : PANEL_K;
                for (int64_t b = 0; b < nlen * wbytes; b += 64)
                    _mm_prefetch((const char *)c->w + r * c->wrow + nk * wbytes + b, _MM_HINT_T1);
            }
            for (int r = 0; r < nr; r++) {
                const uint8_t *row = c->w + (r0 + r) * c->wrow;
                for (int64_t i = 0; i < len; i += 16) {
                    const __mmask16 m = len - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - i)) - 1);
                    _mm512_store_ps(panel + r * PANEL_K + i, load16(wtype, row, kc + i, m));
                }
            }
            const panel_ctx p = {.panel = panel, .x = c->x + c0 * c->k + kc, .k = c->k, .len = len,
                                 .acc_buf = acc_buf};
            panel_pass(&p, nr, nc);
        }
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < nc; j++)
                c->y[(c0 + j) * c->rows + r0 + r] = _mm512_reduce_add_ps(acc_buf[r * MM_COL_BLOCK + j]);
    }
}

OKV_TARGET_AVX512 void okv_mm_block_f32_avx512(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    float_block(OKV_GGML_F32, c, r0, r1, c0, c1);
}
OKV_TARGET_AVX512 void okv_mm_block_f16_avx512(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    float_block(OKV_GGML_F16, c, r0, r1, c0, c1);
}
OKV_TARGET_AVX512 void okv_mm_block_bf16_avx512(const okv_mm_ctx *c, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    float_block(OKV_GGML_BF16, c, r0, r1, c0, c1);
}
