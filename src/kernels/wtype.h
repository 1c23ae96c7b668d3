/* Internal: one traits table for every ggml tensor type, as ggml keeps one
 * (type_traits in ggml.c, type_traits_cpu in ggml-cpu.c).
 *
 * Every type a GGUF file may hold has a name, a block size and bytes per
 * block, so the reader can size and bounds-check tensors it will never
 * compute with.  The types offkv runs ("runnable") also have a row
 * conversion to f32, the activation format their products take, and their
 * product kernels per ISA.  Everything else that asks "which types exist"
 * (model loading, the matmul driver, okv_dequantize_row) asks this table. */
#ifndef OKV_KERNELS_WTYPE_H
#define OKV_KERNELS_WTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu.h"
#include "kernels/matmul_impl.h"

/* What the activations are turned into before a product with the weights. */
typedef enum okv_act_fmt {
    OKV_ACT_F32 = 0, /* used as they are: float weights */
    OKV_ACT_Q8_0,    /* 8-bit blocks of 32, one scale: Q8_0, Q4_0, Q5_0 */
    OKV_ACT_Q8_1,    /* the same plus d * sum(q), for the offsets of Q4_1, Q5_1 */
    OKV_ACT_Q8_K,    /* 8-bit blocks of 256 with sums per 16: the K-quants */
    OKV_ACT_Q8_0X16, /* Q8_0 values in groups of 16 blocks, block per lane: Q4_0X16 */
    OKV_ACT_Q8_KX16, /* Q8_K values in groups of 2 super-blocks, sub-block per lane: Q4_KX16 */
    OKV_ACT_Q8_KX16S, /* Q8_K values by super-block, 16-value sub-block per lane: Q6_KX16 */
    OKV_ACT_Q8_0P,   /* Q8_0 values, column pairs interleaved 8 bytes at a time: x16mm.h */
    OKV_ACT_Q8_KP,   /* Q8_K values in Q8_0P's places, scales and sums per 32: x16mm.h */
    OKV_ACT_COUNT
} okv_act_fmt;

/* Layouts of offkv's own, past ggml's numbers: never in a file, never
 * named by the public gguf.h functions; the model repacks into them. */
enum {
    OKV_WT_Q4_0X16 = OKV_GGML_TYPE_END, /* kernels/q4_0x16.h */
    OKV_WT_Q4_KX16,                     /* kernels/q4_Kx16.h */
    OKV_WT_Q8_0X16,                     /* kernels/q8_0x16.h */
    OKV_WT_Q6_KX16,                     /* kernels/q6_Kx16.h */
    OKV_WT_Q5_KX16,                     /* kernels/q4_Kx16.h */
    OKV_WT_MXFP4X16,                    /* kernels/mxfp4x16.h */
    OKV_WT_Q4_0X16MM,                   /* kernels/x16mm.h: where I8MM runs */
    OKV_WT_Q8_0X16MM,                   /* kernels/x16mm.h */
    OKV_WT_Q4_KX16MM,                   /* kernels/x16mm.h */
    OKV_WT_Q5_0X16,                     /* kernels/q5_0x16.h */
    OKV_WT_END
};

typedef void (*okv_to_float_fn)(const void *src, float *dst, int64_t k);

typedef struct okv_wtype {
    const char *name;          /* ggml's name ("q4_K") */
    int64_t block;             /* values per block */
    int64_t unit;              /* 0, or a row may be any multiple of this (< block): its last
                                  block is then partly padding (offkv's sixteen-wide layouts) */
    size_t size;               /* bytes per block */
    /* the rest only for runnable types */
    okv_to_float_fn to_float;  /* row to f32, k a multiple of block */
    okv_act_fmt act;
    okv_mm_tile_fn tile[OKV_ISA_COUNT];   /* NULL: that ISA uses the one it includes (okv_isa_fallback) */
    okv_mm_block_fn block_pass[OKV_ISA_COUNT]; /* optional */
    int64_t block_min_n;       /* fewest columns that take the block pass (never fewer than 2) */
    size_t half_size;          /* 0, or a row's last block holding block / 2 values takes these
                                  bytes, not size (q4_Kx16.h's block_q4_Kx8) */
    size_t tail_unit;          /* 0, or a row's last, partial block is stored compactly in this
                                  many bytes per unit it holds (mxfp4x16.h, q8_0x16.h) */
} okv_wtype;

/* The entry for type t, or NULL for a number that is no ggml type. */
const okv_wtype *okv_wtype_get(int32_t t);

/* Bytes of n values of type t (ggml's or offkv's own), 0 if n is not
 * whole blocks or t is unknown. */
size_t okv_wtype_row_size(int32_t t, int64_t n);

/* True if offkv computes with type t (it has a scalar kernel). */
bool okv_wtype_runnable(int32_t t);

/* The tile function of runnable type t for isa: the ISA's own, else that
 * of the ISA it includes, and so on (okv_isa_fallback; every runnable type
 * has a scalar one).  NULL if t is not runnable. */
okv_mm_tile_fn okv_wtype_tile(int32_t t, okv_isa isa);

/* The block pass of type t for isa, found as okv_wtype_tile finds tiles
 * (the scalar level has none), or NULL. */
okv_mm_block_fn okv_wtype_block(int32_t t, okv_isa isa);

#endif
