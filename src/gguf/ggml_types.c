/* Block layouts of the ggml tensor types, as ggml-common.h defines them.
 * The reader needs every type a GGUF file may hold, not only those offkv
 * computes with, so that it can size (and bounds-check) their data. */
#include <stdint.h>

#include "offkv/gguf.h"

typedef struct {
    const char *name;
    int64_t block;  /* elements per block; 0 = no such type */
    size_t size;    /* bytes per block */
} type_traits;

/* QK_K = 256 for the K-quants and the IQ types built on them. */
static const type_traits traits[OKV_GGML_TYPE_END] = {
    [OKV_GGML_F32] = {"f32", 1, 4},
    [OKV_GGML_F16] = {"f16", 1, 2},
    [OKV_GGML_Q4_0] = {"q4_0", 32, 2 + 16},
    [OKV_GGML_Q4_1] = {"q4_1", 32, 2 + 2 + 16},
    [OKV_GGML_Q5_0] = {"q5_0", 32, 2 + 4 + 16},
    [OKV_GGML_Q5_1] = {"q5_1", 32, 2 + 2 + 4 + 16},
    [OKV_GGML_Q8_0] = {"q8_0", 32, 2 + 32},
    [OKV_GGML_Q8_1] = {"q8_1", 32, 2 + 2 + 32},
    [OKV_GGML_Q2_K] = {"q2_K", 256, 16 + 64 + 2 + 2},
    [OKV_GGML_Q3_K] = {"q3_K", 256, 32 + 64 + 12 + 2},
    [OKV_GGML_Q4_K] = {"q4_K", 256, 2 + 2 + 12 + 128},
    [OKV_GGML_Q5_K] = {"q5_K", 256, 2 + 2 + 12 + 32 + 128},
    [OKV_GGML_Q6_K] = {"q6_K", 256, 128 + 64 + 16 + 2},
    [OKV_GGML_Q8_K] = {"q8_K", 256, 4 + 256 + 32},
    [OKV_GGML_IQ2_XXS] = {"iq2_xxs", 256, 2 + 64},
    [OKV_GGML_IQ2_XS] = {"iq2_xs", 256, 2 + 64 + 8},
    [OKV_GGML_IQ3_XXS] = {"iq3_xxs", 256, 2 + 96},
    [OKV_GGML_IQ1_S] = {"iq1_s", 256, 2 + 32 + 16},
    [OKV_GGML_IQ4_NL] = {"iq4_nl", 32, 2 + 16},
    [OKV_GGML_IQ3_S] = {"iq3_s", 256, 2 + 64 + 8 + 32 + 4},
    [OKV_GGML_IQ2_S] = {"iq2_s", 256, 2 + 64 + 8 + 8},
    [OKV_GGML_IQ4_XS] = {"iq4_xs", 256, 2 + 2 + 4 + 128},
    [OKV_GGML_I8] = {"i8", 1, 1},
    [OKV_GGML_I16] = {"i16", 1, 2},
    [OKV_GGML_I32] = {"i32", 1, 4},
    [OKV_GGML_I64] = {"i64", 1, 8},
    [OKV_GGML_F64] = {"f64", 1, 8},
    [OKV_GGML_IQ1_M] = {"iq1_m", 256, 32 + 16 + 8},
    [OKV_GGML_BF16] = {"bf16", 1, 2},
    [OKV_GGML_TQ1_0] = {"tq1_0", 256, 48 + 4 + 2},
    [OKV_GGML_TQ2_0] = {"tq2_0", 256, 64 + 2},
    [OKV_GGML_MXFP4] = {"mxfp4", 32, 1 + 16},
};

static const type_traits *lookup(int32_t t) {
    if (t < 0 || t >= OKV_GGML_TYPE_END || traits[t].block == 0) return 0;
    return &traits[t];
}

const char *okv_ggml_type_name(int32_t t) {
    const type_traits *tt = lookup(t);
    return tt ? tt->name : 0;
}

int64_t okv_ggml_block_size(int32_t t) {
    const type_traits *tt = lookup(t);
    return tt ? tt->block : 0;
}

size_t okv_ggml_type_size(int32_t t) {
    const type_traits *tt = lookup(t);
    return tt ? tt->size : 0;
}

size_t okv_ggml_row_size(int32_t t, int64_t n) {
    const type_traits *tt = lookup(t);
    if (!tt || n < 0 || n % tt->block != 0) return 0;
    uint64_t blocks = (uint64_t)(n / tt->block);
    if (blocks > SIZE_MAX / tt->size) return 0;
    return (size_t)blocks * tt->size;
}
