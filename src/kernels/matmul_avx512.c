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
#include "kernels/matmul_avx512_tmpl.h"
#undef TARGET
#undef USE_VNNI
#undef NAME

#define TARGET OKV_TARGET_AVX512VNNI
#define USE_VNNI 1
#define NAME(x) CAT(x, _vnni)
#include "kernels/matmul_avx512_tmpl.h"
#undef TARGET
#undef USE_VNNI
#undef NAME

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

OKV_MM_DISPATCH(OKV_TARGET_AVX512, tile_f32, f32_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512, tile_f16, f16_tile)
OKV_MM_DISPATCH(OKV_TARGET_AVX512, tile_bf16, bf16_tile)

static okv_mm_tile_fn float_tiles(int wtype) {
    switch (wtype) {
    case OKV_GGML_F32: return tile_f32;
    case OKV_GGML_F16: return tile_f16;
    case OKV_GGML_BF16: return tile_bf16;
    }
    return NULL;
}

okv_mm_tile_fn okv_mm_tile_avx512(int wtype) {
    if (wtype == OKV_GGML_Q8_0) return tile_q8_0_bw;
    if (wtype == OKV_GGML_Q4_0) return tile_q4_0_bw;
    return float_tiles(wtype);
}

okv_mm_tile_fn okv_mm_tile_avx512vnni(int wtype) {
    if (wtype == OKV_GGML_Q8_0) return tile_q8_0_vnni;
    if (wtype == OKV_GGML_Q4_0) return tile_q4_0_vnni;
    return float_tiles(wtype);
}
