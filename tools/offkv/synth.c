/* offkv synth: a deterministic random-weight GGUF model of any shape, with
 * llama.cpp's tensor names, shapes and metadata keys and a small
 * SentencePiece vocabulary, for tests, benchmarks and the demo.
 *
 * Every row of every tensor draws from its own generator, seeded from the
 * seed, the tensor's name and the row, so the bytes do not depend on the
 * thread count or on the order tensors are written in.  Tensors are
 * produced one at a time through the writer's fill callback: a 1.1B model
 * never sits in memory whole. */
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "cli.h"
#include "offkv/gguf.h"
#include "offkv/threads.h"

enum {
    ARCH_LLAMA,
    ARCH_GEMMA3,
    ARCH_MUSE,
    ARCH_QWEN2,
    ARCH_QWEN3,
    ARCH_GEMMA2,
    ARCH_PHI3,
    ARCH_SMOLLM3,
    ARCH_QWEN3MOE,
    ARCH_GPT_OSS,
};
static const char *const arch_names[] = {
    "llama",
    "gemma3",
    "muse-glimmer",
    "qwen2",
    "qwen3",
    "gemma2",
    "phi3",
    "smollm3",
    "qwen3moe",
    "gpt-oss",
    NULL,
};

/* What each architecture's files hold beyond llama's tensors and keys, one
 * row each, in the order of arch_names. */
typedef struct arch_traits {
    bool qk_norm;     /* attn_q_norm, attn_k_norm */
    bool post_norms;  /* post_attention_norm, post_ffw_norm */
    bool qkv_bias;    /* attn_{q,k,v}.bias */
    bool out_bias_sinks; /* attn_output.bias and attn_sinks (gpt-oss) */
    bool moe;         /* expert tensors instead of ffn_gate/up/down (see build_specs) */
    bool attn_gate;   /* muse-glimmer's attn_gate */
    bool fused;       /* attn_qkv and one ffn_up of 2 n_ff rows, gate then up (phi3) */
    bool tied;        /* never an output.weight */
    bool windows;     /* sliding windows (--sliding-window defaults to 8) */
    bool attn_softcap; /* attn_logit_softcapping 50 and final_logit_softcapping 30 unless --softcap */
    float eps;        /* attention.layer_norm_rms_epsilon */
} arch_traits;
static const arch_traits traits[] = {
    [ARCH_LLAMA] = {.eps = 1e-5f},
    [ARCH_GEMMA3] = {.qk_norm = true, .post_norms = true, .tied = true, .windows = true, .eps = 1e-6f},
    [ARCH_MUSE] = {.qk_norm = true, .post_norms = true, .attn_gate = true, .windows = true, .eps = 1e-6f},
    [ARCH_QWEN2] = {.qkv_bias = true, .eps = 1e-6f},
    [ARCH_QWEN3] = {.qk_norm = true, .eps = 1e-6f},
    [ARCH_GEMMA2] = {.post_norms = true, .tied = true, .windows = true, .attn_softcap = true, .eps = 1e-6f},
    [ARCH_PHI3] = {.fused = true, .eps = 1e-5f},
    [ARCH_SMOLLM3] = {.eps = 1e-6f},
    [ARCH_QWEN3MOE] = {.qk_norm = true, .moe = true, .eps = 1e-6f},
    /* gpt-oss's post_attention_norm is the norm before its experts (no post_ffw_norm) */
    [ARCH_GPT_OSS] = {.qkv_bias = true, .out_bias_sinks = true, .post_norms = true, .windows = true, .moe = true,
                      .eps = 1e-6f},
};

/* --preset: the real shapes (from each model's config.json), so benchmarks
 * need no download; every flag given beside it overrides its value.  Zero
 * fields keep synth's defaults. */
typedef struct preset {
    const char *name;
    int arch;
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, head_dim, ctx, window;
    float rope_base;
    bool tied;
    int32_t n_expert, n_expert_used, n_ff_exp; /* mixture of experts */
    float yarn_factor;
    int32_t yarn_orig_ctx;
} preset;
static const preset presets[] = {
    {.name = "qwen3-4b", .arch = ARCH_QWEN3, .n_embd = 2560, .n_layer = 36, .n_head = 32, .n_head_kv = 8,
     .n_ff = 9728, .n_vocab = 151936, .head_dim = 128, .ctx = 40960, .rope_base = 1e6f, .tied = true},
    {.name = "qwen2.5-7b", .arch = ARCH_QWEN2, .n_embd = 3584, .n_layer = 28, .n_head = 28, .n_head_kv = 4,
     .n_ff = 18944, .n_vocab = 152064, .head_dim = 128, .ctx = 32768, .rope_base = 1e6f},
    {.name = "gemma-2-9b", .arch = ARCH_GEMMA2, .n_embd = 3584, .n_layer = 42, .n_head = 16, .n_head_kv = 8,
     .n_ff = 14336, .n_vocab = 256000, .head_dim = 256, .ctx = 8192, .window = 4096, .rope_base = 1e4f,
     .tied = true},
    {.name = "phi-4", .arch = ARCH_PHI3, .n_embd = 5120, .n_layer = 40, .n_head = 40, .n_head_kv = 10,
     .n_ff = 17920, .n_vocab = 100352, .head_dim = 128, .ctx = 16384, .rope_base = 250000.0f},
    {.name = "smollm3-3b", .arch = ARCH_SMOLLM3, .n_embd = 2048, .n_layer = 36, .n_head = 16, .n_head_kv = 4,
     .n_ff = 11008, .n_vocab = 128256, .head_dim = 128, .ctx = 65536, .rope_base = 5e6f, .tied = true},
    /* Qwen3-30B-A3B: 128 experts, 8 used, ~3.3 B active parameters */
    {.name = "qwen3-30b-a3b", .arch = ARCH_QWEN3MOE, .n_embd = 2048, .n_layer = 48, .n_head = 32, .n_head_kv = 4,
     .n_ff = 6144, .n_vocab = 151936, .head_dim = 128, .ctx = 40960, .rope_base = 1e6f, .n_expert = 128,
     .n_expert_used = 8, .n_ff_exp = 768},
    /* gpt-oss-20b: 32 experts, 4 used; window 128 on even layers; YaRN x32 of 4096 */
    {.name = "gpt-oss-20b", .arch = ARCH_GPT_OSS, .n_embd = 2880, .n_layer = 24, .n_head = 64, .n_head_kv = 8,
     .n_ff = 2880, .n_vocab = 201088, .head_dim = 64, .ctx = 131072, .window = 128, .rope_base = 150000.0f,
     .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880, .yarn_factor = 32.0f, .yarn_orig_ctx = 4096},
};
/* --type: the first four make every matrix that one type; from q4_1 on
 * each is one of llama-quantize's file types, which mixes types per tensor
 * (see mixed_type).  type_ids is the file type's base tensor type. */
static const char *const type_names[] = {"f32",  "f16",  "q8_0",   "q4_0",   "q4_1",   "q5_0", "q5_1",
                                         "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "mxfp4_moe", NULL};
enum { TYPE_FIRST_MIX = 4 };
static const int type_ids[] = {OKV_GGML_F32,  OKV_GGML_F16,  OKV_GGML_Q8_0, OKV_GGML_Q4_0,
                               OKV_GGML_Q4_1, OKV_GGML_Q5_0, OKV_GGML_Q5_1, OKV_GGML_Q2_K,
                               OKV_GGML_Q3_K, OKV_GGML_Q4_K, OKV_GGML_Q5_K, OKV_GGML_Q6_K, OKV_GGML_Q8_0};
/* llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_Q4_0, MOSTLY_Q4_1,
 * MOSTLY_Q5_0, MOSTLY_Q5_1, MOSTLY_Q2_K, MOSTLY_Q3_K_M, MOSTLY_Q4_K_M,
 * MOSTLY_Q5_K_M, MOSTLY_Q6_K, MOSTLY_MXFP4_MOE (experts MXFP4, the rest Q8_0). */
enum { FT_Q2_K = 10, FT_Q3_K_M = 12, FT_Q4_K_M = 15, FT_Q5_K_M = 17, FT_MXFP4_MOE = 38 };
static const uint32_t type_ftype[] = {0, 1, 7, 2, 3, 8, 9, FT_Q2_K, FT_Q3_K_M, FT_Q4_K_M, FT_Q5_K_M, 18, FT_MXFP4_MOE};

typedef struct shape {
    int arch;
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, head_dim, ctx;
    float rope_base, rope_base_swa;
    int32_t window;       /* 0: none */
    int32_t pattern;      /* -1: no key; else the period */
    const char *pattern_bools; /* "1110..." per layer, or NULL */
    float softcap;        /* 0: no key */
    float logit_scale;    /* muse-glimmer */
    bool tied, fused_qkv;
    int32_t n_expert, n_expert_used, n_ff_exp; /* qwen3moe, gpt-oss */
    float yarn_factor;    /* gpt-oss: rope.scaling (yarn) factor; 0: no scaling keys */
    int32_t yarn_orig_ctx;
    int type_idx;
    uint64_t seed;
    int32_t threads;
} shape;

/* ------------------------------------------------------------------ */
/* Random numbers                                                      */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* ------------------------------------------------------------------ */
/* Tensors                                                             */

typedef enum { FILL_MATRIX, FILL_NORM, FILL_BIAS } fill_kind;

typedef struct synth_run synth_run;

typedef struct tspec {
    char name[64];
    fill_kind kind;
    int type;            /* ggml type number */
    int64_t ne0, ne1;    /* ne1 = 1 for vectors */
    int64_t ne2;         /* experts of a 3-D tensor (filled as ne1 * ne2 rows); 1 otherwise */
    int32_t n_dims;
    float scale;         /* matrix: half-width of the uniform; norm: spread around 1 */
    synth_run *run;
} tspec;

struct synth_run {
    tspec *t;
    int n, cap;
    okv_threadpool *pool;
    float *scratch;       /* threads x max_ne0 */
    int64_t max_ne0;
    int32_t n_threads;
    uint64_t seed;
    int n_fallback;       /* matrices written as f16: rows not whole 32-value blocks */
    int n_legacy;         /* K-quant matrices moved to a 32-value type: rows not whole 256-value blocks */
};

typedef struct fill_job {
    const tspec *t;
    unsigned char *dst;
    size_t row_bytes;
} fill_job;

static void fill_rows(void *arg, int32_t ith, int32_t nth) {
    const fill_job *j = arg;
    const tspec *t = j->t;
    float *x = t->run->scratch + (size_t)ith * (size_t)t->run->max_ne0;
    const uint64_t tseed = mix64(t->run->seed ^ name_hash(t->name));
    for (int64_t r = ith; r < t->ne1 * t->ne2; r += nth) {
        uint64_t state = mix64(tseed + (uint64_t)r * 0x9e3779b97f4a7c15ull);
        for (int64_t i = 0; i < t->ne0; i++) {
            state += 0x9e3779b97f4a7c15ull;
            /* 24 bits: every value is exact in a float. */
            float u = (float)(mix64(state) >> 40) * 0x1.0p-24f * 2.0f - 1.0f;
            x[i] = t->kind == FILL_NORM ? 1.0f + t->scale * u : t->scale * u;
        }
        /* ggml's reference quantizers, so the file holds what llama.cpp
         * would write; add_spec only picks types this writes */
        okv_quantize_row(t->type, x, j->dst + (size_t)r * j->row_bytes, t->ne0);
    }
}

static okv_status fill_tensor(void *user, const char *name, void *dst, size_t n_bytes, okv_error *err) {
    const tspec *t = user;
    fill_job j = {t, dst, okv_ggml_row_size(t->type, t->ne0)};
    if (j.row_bytes * (size_t)(t->ne1 * t->ne2) != n_bytes) {
        if (err) {
            snprintf(err->message, sizeof err->message, "synth: tensor '%s': %zu bytes, expected %zu", name,
                     n_bytes, j.row_bytes * (size_t)(t->ne1 * t->ne2));
            err->status = OKV_ERR_INVALID;
        }
        return OKV_ERR_INVALID;
    }
    okv_parallel(t->run->pool, fill_rows, &j);
    return OKV_OK;
}

static tspec *add_spec(synth_run *s, const char *name, fill_kind kind, int type, int64_t ne0, int64_t ne1,
                       float scale) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        tspec *t = realloc(s->t, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        s->t = t;
        s->cap = cap;
    }
    tspec *t = &s->t[s->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->ne0 = ne0;
    t->ne1 = ne1;
    t->ne2 = 1;
    t->n_dims = kind == FILL_MATRIX ? 2 : 1;
    t->scale = scale;
    t->run = s;
    /* llama.cpp's quantizer keeps a row that does not split into 32-value
     * blocks in F16; so do we (the default n_ff of 172 is such a row). */
    t->type = type;
    if (okv_ggml_row_size(type, ne0) == 0) {
        t->type = OKV_GGML_F16;
        s->n_fallback++;
    }
    if (ne0 > s->max_ne0) s->max_ne0 = ne0;
    return t;
}

/* What a matrix is for: the categories llama-quantize reads off tensor names. */
typedef enum {
    ROLE_TOKEN_EMBD, ROLE_OUTPUT, ROLE_ATTN_Q, ROLE_ATTN_K, ROLE_ATTN_V, ROLE_ATTN_QKV, ROLE_ATTN_OUTPUT,
    ROLE_FFN_GATE, ROLE_FFN_UP, ROLE_FFN_DOWN, ROLE_OTHER,
    ROLE_FFN_GATE_EXPS, ROLE_FFN_UP_EXPS, ROLE_FFN_DOWN_EXPS /* ffn_*_exps: the ffn_* rules, and MXFP4_MOE's */
} role;

/* llama.cpp's use_more_bits: the first and last eighth of the layers and
 * every third one in between get more bits in the _M mixes. */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The type llama-quantize (llama_tensor_get_type in src/llama-quant.cpp, no
 * importance matrix, no overrides) gives a matrix of this role in `layer`
 * with rows of ne0 values, for the file types synth offers.  Only the
 * branches those file types reach are here; offkv's architectures are none
 * of the special cases (Falcon, experts), and 70B is llama with 80 layers
 * and grouped KV heads, as llama.cpp's loader names it. */
static int mixed_type(synth_run *s, const shape *sh, role r, int32_t layer, int64_t ne0) {
    const uint32_t ft = type_ftype[sh->type_idx];
    const int base = type_ids[sh->type_idx];
    const int n = sh->n_layer;
    int t = base;
    /* MXFP4_MOE: experts in MXFP4 (32-value rows only, else Q8_0), every
     * other matrix Q8_0 (the routers stay F32: llama-quantize never touches
     * ffn_gate_inp); the 8-expert special cases of llama-quantize (Mixtral's
     * attn_v / attn_output bumps) are not reproduced for any mix */
    if (ft == FT_MXFP4_MOE) {
        const bool exps = r == ROLE_FFN_GATE_EXPS || r == ROLE_FFN_UP_EXPS || r == ROLE_FFN_DOWN_EXPS;
        return exps && ne0 % 32 == 0 ? OKV_GGML_MXFP4 : OKV_GGML_Q8_0;
    }
    if (r == ROLE_FFN_GATE_EXPS) r = ROLE_FFN_GATE;
    if (r == ROLE_FFN_UP_EXPS) r = ROLE_FFN_UP;
    if (r == ROLE_FFN_DOWN_EXPS) r = ROLE_FFN_DOWN;
    /* the output matrix, or token_embd when it is also the output (tied) */
    if (r == ROLE_OUTPUT || (sh->tied && r == ROLE_TOKEN_EMBD)) {
        t = ne0 % okv_ggml_block_size(base) != 0 ? OKV_GGML_Q8_0 : OKV_GGML_Q6_K;
    } else if (r == ROLE_ATTN_V || r == ROLE_ATTN_QKV) {
        /* current llama.cpp gives a fused attn_qkv the attn_v rules (its
         * category test for attn_v comes first); one attn_v or attn_qkv a
         * layer, so the layer is llama.cpp's running attn_v count */
        if (ft == FT_Q2_K) t = sh->n_head / sh->n_head_kv >= 4 ? OKV_GGML_Q4_K : OKV_GGML_Q3_K;
        else if (ft == FT_Q3_K_M) t = layer < 2 ? OKV_GGML_Q5_K : OKV_GGML_Q4_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(layer, n)) t = OKV_GGML_Q6_K;
        const bool is_70b = sh->arch == ARCH_LLAMA && n == 80 && sh->n_head != sh->n_head_kv;
        if (is_70b && (t == OKV_GGML_Q3_K || t == OKV_GGML_Q4_K)) t = OKV_GGML_Q5_K;
    } else if (r == ROLE_FFN_DOWN) {
        if (ft == FT_Q2_K) t = OKV_GGML_Q3_K;
        else if (ft == FT_Q3_K_M) t = layer < n / 16 ? OKV_GGML_Q5_K : OKV_GGML_Q4_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(layer, n)) t = OKV_GGML_Q6_K;
    } else if (r == ROLE_ATTN_OUTPUT) {
        if (ft == FT_Q2_K) t = OKV_GGML_Q3_K;
        else if (ft == FT_Q3_K_M) t = OKV_GGML_Q4_K;
    }
    /* A row that is not whole 256-value super-blocks falls back to a
     * 32-value type as llama.cpp's tensor_type_fallback does.  Q2_K/Q3_K go
     * to Q4_0 as in current llama.cpp (older releases chose IQ4_NL, which
     * offkv cannot run).  A row that is not whole 32-value blocks either is
     * left to add_spec, which makes it f16 (llama.cpp gives up on a legacy
     * type there; f16 is what its fallback does for the K-quants). */
    if (ne0 % okv_ggml_block_size(t) != 0) {
        switch (t) {
        case OKV_GGML_Q2_K: case OKV_GGML_Q3_K: t = OKV_GGML_Q4_0; break;
        case OKV_GGML_Q4_K: t = OKV_GGML_Q5_0; break;
        case OKV_GGML_Q5_K: t = OKV_GGML_Q5_1; break;
        case OKV_GGML_Q6_K: t = OKV_GGML_Q8_0; break;
        }
        if (ne0 % okv_ggml_block_size(t) == 0) s->n_legacy++;
    }
    return t;
}

/* The type of a matrix: --type's own for f32..q4_0, else the mix's. */
static int matrix_type(synth_run *s, const shape *sh, role r, int32_t layer, int64_t ne0) {
    if (sh->type_idx < TYPE_FIRST_MIX) return type_ids[sh->type_idx];
    return mixed_type(s, sh, r, layer, ne0);
}

/* Weights ~ uniform(-a, a) with a = 0.02·√3 (standard deviation 0.02, as
 * GPT-2-style initializations use), so activations stay in a sane range;
 * norm gains 1 ± 0.1 so a wrong gain is visible in the logits. */
#define W_SCALE 0.034641016f
#define NORM_SPREAD 0.1f

static bool build_specs(synth_run *s, const shape *sh) {
    const int64_t E = sh->n_embd, hd = sh->head_dim;
    const int64_t nq = (int64_t)sh->n_head * hd, nkv = (int64_t)sh->n_head_kv * hd;
    char nm[64];
    int32_t l = -1;
#define MT(role, ne0) matrix_type(s, sh, role, l, ne0)
    const arch_traits *tr = &traits[sh->arch];
#define ADD(kind, type, ne0, ne1)                                                   \
    do {                                                                            \
        if (!add_spec(s, nm, kind, type, ne0, ne1, kind == FILL_NORM ? NORM_SPREAD : W_SCALE)) \
            return false;                                                           \
    } while (0)
/* a random F32 vector (bias, sinks) named blk.l.NAME */
#define ADD_VEC(name, n)                                                            \
    do {                                                                            \
        snprintf(nm, sizeof nm, "blk.%d.%s", (int)l, name);                         \
        tspec *t_ = add_spec(s, nm, FILL_MATRIX, OKV_GGML_F32, n, 1, W_SCALE);      \
        if (!t_) return false;                                                      \
        t_->n_dims = 1;                                                             \
    } while (0)
/* a random F32 [n, X] matrix (the experts' biases) named blk.l.NAME */
#define ADD_BIAS2(name, n, X)                                                       \
    do {                                                                            \
        snprintf(nm, sizeof nm, "blk.%d.%s", (int)l, name);                         \
        if (!add_spec(s, nm, FILL_MATRIX, OKV_GGML_F32, n, X, W_SCALE)) return false; \
    } while (0)
/* a 3-D expert tensor [ne0, ne1, X], filled as ne1 * X rows */
#define ADD_EXPS(role, ne0, ne1, X)                                                 \
    do {                                                                            \
        tspec *t_ = add_spec(s, nm, FILL_MATRIX, MT(role, ne0), ne0, ne1, W_SCALE); \
        if (!t_) return false;                                                      \
        t_->ne2 = X;                                                                \
        t_->n_dims = 3;                                                             \
    } while (0)
    snprintf(nm, sizeof nm, "token_embd.weight");
    ADD(FILL_MATRIX, MT(ROLE_TOKEN_EMBD, E), E, sh->n_vocab);
    snprintf(nm, sizeof nm, "output_norm.weight");
    ADD(FILL_NORM, OKV_GGML_F32, E, 1);
    if (!sh->tied) {
        snprintf(nm, sizeof nm, "output.weight");
        ADD(FILL_MATRIX, MT(ROLE_OUTPUT, E), E, sh->n_vocab);
    }
    for (l = 0; l < sh->n_layer; l++) {
#define BLK(suffix) snprintf(nm, sizeof nm, "blk.%d.%s.weight", (int)l, suffix)
#define BIAS(suffix) snprintf(nm, sizeof nm, "blk.%d.%s.bias", (int)l, suffix)
        BLK("attn_norm");
        ADD(FILL_NORM, OKV_GGML_F32, E, 1);
        if (sh->fused_qkv) {
            BLK("attn_qkv");
            ADD(FILL_MATRIX, MT(ROLE_ATTN_QKV, E), E, nq + 2 * nkv);
        } else {
            BLK("attn_q");
            ADD(FILL_MATRIX, MT(ROLE_ATTN_Q, E), E, nq);
            BLK("attn_k");
            ADD(FILL_MATRIX, MT(ROLE_ATTN_K, E), E, nkv);
            BLK("attn_v");
            ADD(FILL_MATRIX, MT(ROLE_ATTN_V, E), E, nkv);
        }
        if (tr->qkv_bias) {
            BIAS("attn_q");
            ADD(FILL_BIAS, OKV_GGML_F32, nq, 1);
            BIAS("attn_k");
            ADD(FILL_BIAS, OKV_GGML_F32, nkv, 1);
            BIAS("attn_v");
            ADD(FILL_BIAS, OKV_GGML_F32, nkv, 1);
        }
        if (tr->out_bias_sinks) {
            ADD_VEC("attn_output.bias", E);
            ADD_VEC("attn_sinks.weight", sh->n_head);
        }
        if (tr->qk_norm) {
            BLK("attn_q_norm");
            ADD(FILL_NORM, OKV_GGML_F32, hd, 1);
            BLK("attn_k_norm");
            ADD(FILL_NORM, OKV_GGML_F32, hd, 1);
        }
        if (tr->attn_gate) {
            /* one gate value per query channel, from the attn_norm output */
            BLK("attn_gate");
            ADD(FILL_MATRIX, MT(ROLE_OTHER, E), E, nq);
        }
        BLK("attn_output");
        ADD(FILL_MATRIX, MT(ROLE_ATTN_OUTPUT, nq), nq, E);
        if (tr->post_norms) {
            /* muse-glimmer's attn_post_norm and ffn_post_norm are stored
             * under gemma3's names, as its converter writes them; gpt-oss's
             * is the norm before its experts */
            BLK("post_attention_norm");
            ADD(FILL_NORM, OKV_GGML_F32, E, 1);
        }
        if (traits[sh->arch].moe) {
            const int64_t F = sh->n_ff_exp, X = sh->n_expert;
            if (sh->arch == ARCH_QWEN3MOE) {
                BLK("ffn_norm");
                ADD(FILL_NORM, OKV_GGML_F32, E, 1);
            }
            BLK("ffn_gate_inp"); /* the router stays F32, as llama-quantize leaves it */
            ADD(FILL_MATRIX, OKV_GGML_F32, E, X);
            BLK("ffn_gate_exps");
            ADD_EXPS(ROLE_FFN_GATE_EXPS, E, F, X);
            BLK("ffn_up_exps");
            ADD_EXPS(ROLE_FFN_UP_EXPS, E, F, X);
            BLK("ffn_down_exps");
            ADD_EXPS(ROLE_FFN_DOWN_EXPS, F, E, X);
            if (sh->arch == ARCH_GPT_OSS) {
                ADD_VEC("ffn_gate_inp.bias", X);
                ADD_BIAS2("ffn_gate_exps.bias", F, X);
                ADD_BIAS2("ffn_up_exps.bias", F, X);
                ADD_BIAS2("ffn_down_exps.bias", E, X);
            }
            continue;
        }
        BLK("ffn_norm");
        ADD(FILL_NORM, OKV_GGML_F32, E, 1);
        if (tr->fused) {
            BLK("ffn_up"); /* gate rows, then up rows */
            ADD(FILL_MATRIX, MT(ROLE_FFN_UP, E), E, 2 * (int64_t)sh->n_ff);
        } else {
            BLK("ffn_gate");
            ADD(FILL_MATRIX, MT(ROLE_FFN_GATE, E), E, sh->n_ff);
            BLK("ffn_up");
            ADD(FILL_MATRIX, MT(ROLE_FFN_UP, E), E, sh->n_ff);
        }
        BLK("ffn_down");
        ADD(FILL_MATRIX, MT(ROLE_FFN_DOWN, sh->n_ff), sh->n_ff, E);
        if (tr->post_norms) {
            BLK("post_ffw_norm");
            ADD(FILL_NORM, OKV_GGML_F32, E, 1);
        }
#undef BLK
#undef BIAS
    }
#undef ADD
#undef ADD_VEC
#undef ADD_BIAS2
#undef ADD_EXPS
#undef MT
    return true;
}

/* ------------------------------------------------------------------ */
/* Vocabulary                                                          */

/* Story words, so "Once upon a time" and friends are whole tokens. */
static const char *const words[] = {
    "Once", "upon", "a", "time", "there", "was", "the", "The", "little", "girl", "boy", "named", "Lily", "Tim",
    "She", "He", "They", "One", "day", "and", "to", "he", "she", "it", "of", "in", "on", "with", "her", "his",
    "they", "said", "big", "play", "happy", "sad", "mom", "dad", "friend", "tree", "sun", "ball", "park", "saw",
    "had", "not", "very", "so", "but", "is", "you", "I", "we", "what", "went", "wanted", "loved", "liked",
    "looked", "found", "home", "house", "toy", "bird", "dog", "cat", "fish", "red", "blue", "green", "good",
    "fun", "then", "when", "all", "up", "down", "out", "too", "can", "do", "go", "see", "help", "new", "run",
    "jump", "smile", "laugh", "together", "after", "again", "asked", "came", "made", "each", "every", "other",
    "thing", "could", "would", "from", "for", "at", "by", "that", "this", "be", "are", "were", "have", "like",
    "will", "my", "your", "its", "their", "them", "him", "me", "us", "no", "yes", "an", "as", "or", "if",
    "some", "more", "many", "much", "long", "old", "nice", "best", "bad", "hot", "cold", "Ben", "Sue", "Max",
};

typedef struct vocab {
    char **tok;
    float *score;
    int32_t *type;
    int32_t n, cap;
    /* open-addressing set of token strings, so duplicates are skipped */
    int32_t *slot;
    size_t n_slot;
} vocab;

static bool vocab_has(const vocab *v, const char *s, size_t *pos) {
    size_t i = (size_t)name_hash(s) & (v->n_slot - 1);
    while (v->slot[i] >= 0) {
        if (strcmp(v->tok[v->slot[i]], s) == 0) return true;
        i = (i + 1) & (v->n_slot - 1);
    }
    *pos = i;
    return false;
}

/* Appends s (while there is room) unless present; false only when out of memory. */
static bool vocab_add(vocab *v, const char *s, int32_t type, float score) {
    size_t pos;
    if (v->n >= v->cap || vocab_has(v, s, &pos)) return true;
    char *copy = malloc(strlen(s) + 1);
    if (!copy) return false;
    strcpy(copy, s);
    v->tok[v->n] = copy;
    v->type[v->n] = type;
    v->score[v->n] = score;
    v->slot[pos] = v->n++;
    return true;
}

static void vocab_free(vocab *v) {
    for (int32_t i = 0; i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->score);
    free(v->type);
    free(v->slot);
}

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's word boundary */

/* Pieces are scored by rank (-1, -2, ...), as a trained SentencePiece vocab
 * is roughly ordered: earlier pieces merge first.  Every word's prefixes
 * ("▁O", "▁On", "▁Onc", "▁Once") are pieces too, so the bigram merges can
 * reach the whole word. */
static bool build_vocab(vocab *v, int32_t n_vocab) {
    v->cap = n_vocab;
    v->n_slot = 1;
    while (v->n_slot < 2 * (size_t)n_vocab) v->n_slot <<= 1;
    v->tok = calloc((size_t)n_vocab, sizeof *v->tok);
    v->score = calloc((size_t)n_vocab, sizeof *v->score);
    v->type = calloc((size_t)n_vocab, sizeof *v->type);
    v->slot = malloc(v->n_slot * sizeof *v->slot);
    if (!v->tok || !v->score || !v->type || !v->slot) return false;
    memset(v->slot, 0xff, v->n_slot * sizeof *v->slot);

    char buf[64];
    int32_t rank = 0;
#define PIECE(str) \
    do { if (!vocab_add(v, (str), 1, (float)-(++rank))) return false; } while (0)
    if (!vocab_add(v, "<unk>", 2, 0.0f) || !vocab_add(v, "<s>", 3, 0.0f) || !vocab_add(v, "</s>", 3, 0.0f))
        return false;
    for (int b = 0; b < 256; b++) {
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        if (!vocab_add(v, buf, 6, 0.0f)) return false;
    }
    PIECE(SPM_SPACE);
    const char *singles = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\"-:;()";
    for (const char *c = singles; *c; c++) {
        buf[0] = *c;
        buf[1] = '\0';
        PIECE(buf);
    }
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t len = strlen(words[w]);
        for (size_t k = 1; k <= len; k++) {
            snprintf(buf, sizeof buf, SPM_SPACE "%.*s", (int)k, words[w]);
            PIECE(buf);
        }
    }
    /* Filler: letter bigrams and trigrams, bare and word-initial; then
     * numbered pieces if a vocabulary is larger still. */
    for (int pass = 0; pass < 4 && v->n < n_vocab; pass++) {
        const char *pre = (pass & 1) ? SPM_SPACE : "";
        for (int a = 0; a < 26; a++)
            for (int b = 0; b < 26; b++) {
                if (pass < 2) {
                    snprintf(buf, sizeof buf, "%s%c%c", pre, 'a' + a, 'a' + b);
                    PIECE(buf);
                    continue;
                }
                for (int c = 0; c < 26; c++) {
                    snprintf(buf, sizeof buf, "%s%c%c%c", pre, 'a' + a, 'a' + b, 'a' + c);
                    PIECE(buf);
                }
            }
    }
    for (int32_t i = 0; v->n < n_vocab; i++) {
        snprintf(buf, sizeof buf, "<filler_%d>", (int)i);
        PIECE(buf);
    }
#undef PIECE
    return true;
}

/* --vocab FILE: every tokenizer.* key of another GGUF (a real model's, or
 * llama.cpp's ggml-vocab-*.gguf), so the synthetic model tokenizes as that
 * model does: benchmarks of what scales with the vocabulary (the output
 * matrix, sampling, grammar masks) then see a real 150 k-token one. */
static okv_status copy_fail(okv_error *err, okv_status st, const char *key, const char *why) {
    err->status = st;
    snprintf(err->message, sizeof err->message, "%s: %s", key, why);
    return st;
}

static okv_status copy_array(okv_gguf_writer *w, const okv_gguf *g, const char *key, okv_error *err) {
    okv_gguf_type et;
    uint64_t n;
    okv_status st = okv_gguf_get_array(g, key, &et, &n, err);
    if (st != OKV_OK) return st;
    static const uint8_t width[] = {[OKV_GGUF_U8] = 1, [OKV_GGUF_I8] = 1, [OKV_GGUF_U16] = 2, [OKV_GGUF_I16] = 2,
                                    [OKV_GGUF_U32] = 4, [OKV_GGUF_I32] = 4, [OKV_GGUF_F32] = 4, [OKV_GGUF_BOOL] = 1,
                                    [OKV_GGUF_STRING] = sizeof(char *), [OKV_GGUF_U64] = 8, [OKV_GGUF_I64] = 8};
    if ((int)et < 0 || (size_t)et >= sizeof width || !width[et])
        return copy_fail(err, OKV_ERR_FORMAT, key, "an array of a type synth cannot copy");
    char *vals = malloc((size_t)(n ? n : 1) * width[et]), *text = NULL;
    size_t text_n = 0;
    if (!vals) return copy_fail(err, OKV_ERR_NOMEM, key, "out of memory");
    if (et == OKV_GGUF_STRING) {
        /* One buffer of NUL-terminated copies; pointers set once it stops moving. */
        for (uint64_t i = 0; i < n && st == OKV_OK; i++) {
            size_t len;
            const char *s;
            if ((st = okv_gguf_array_str(g, key, i, &s, &len, err)) == OKV_OK) text_n += len + 1;
        }
        if (st == OKV_OK && !(text = malloc(text_n ? text_n : 1))) st = copy_fail(err, OKV_ERR_NOMEM, key, "out of memory");
        size_t at = 0;
        for (uint64_t i = 0; i < n && st == OKV_OK; i++) {
            size_t len;
            const char *s;
            if ((st = okv_gguf_array_str(g, key, i, &s, &len, err)) != OKV_OK) break;
            memcpy(text + at, s, len);
            text[at + len] = '\0';
            ((const char **)(void *)vals)[i] = text + at;
            at += len + 1;
        }
    } else {
        for (uint64_t i = 0; i < n && st == OKV_OK; i++) {
            void *dst = vals + i * width[et];
            int64_t iv = 0;
            float fv = 0.0f;
            bool bv = false;
            if (et == OKV_GGUF_F32) {
                if ((st = okv_gguf_array_f32(g, key, i, &fv, err)) == OKV_OK) memcpy(dst, &fv, 4);
            } else if (et == OKV_GGUF_BOOL) {
                if ((st = okv_gguf_array_bool(g, key, i, &bv, err)) == OKV_OK) memcpy(dst, &bv, 1);
            } else if ((st = okv_gguf_array_i64(g, key, i, &iv, err)) == OKV_OK) {
                /* Little-endian, as GGUF: the low bytes are the narrower type's value. */
                memcpy(dst, &iv, width[et]);
            }
        }
    }
    if (st == OKV_OK) st = okv_gguf_writer_add_array(w, key, et, vals, n, err);
    free(vals);
    free(text);
    return st;
}

static okv_status copy_tokenizer(okv_gguf_writer *w, const okv_gguf *g, okv_error *err) {
    for (int64_t i = 0; i < okv_gguf_n_kv(g); i++) {
        const char *key = okv_gguf_key(g, i);
        if (strncmp(key, "tokenizer.", 10) != 0) continue;
        const okv_gguf_type t = okv_gguf_kv_type(g, i);
        okv_status st;
        if (t == OKV_GGUF_ARRAY) {
            st = copy_array(w, g, key, err);
        } else if (t == OKV_GGUF_STRING) {
            const char *s;
            size_t len;
            char *z = NULL;
            if ((st = okv_gguf_get_str(g, key, &s, &len, err)) == OKV_OK) {
                if (!(z = malloc(len + 1))) return copy_fail(err, OKV_ERR_NOMEM, key, "out of memory");
                memcpy(z, s, len);
                z[len] = '\0';
                st = okv_gguf_writer_add_str(w, key, z, err);
            }
            free(z);
        } else if (t == OKV_GGUF_F32) {
            float f;
            if ((st = okv_gguf_get_f32(g, key, &f, err)) == OKV_OK) st = okv_gguf_writer_add_f32(w, key, f, err);
        } else if (t == OKV_GGUF_BOOL) {
            bool b;
            if ((st = okv_gguf_get_bool(g, key, &b, err)) == OKV_OK) st = okv_gguf_writer_add_bool(w, key, b, err);
        } else if (t == OKV_GGUF_U64) {
            uint64_t u;
            if ((st = okv_gguf_get_u64(g, key, &u, err)) == OKV_OK) st = okv_gguf_writer_add_u64(w, key, u, err);
        } else if (t != OKV_GGUF_F64) {
            /* Any other integer: the value, written back in its own type. */
            int64_t iv;
            if ((st = okv_gguf_get_i64(g, key, &iv, err)) == OKV_OK)
                st = okv_gguf_writer_add_scalar(w, key, t, &iv, err); /* little-endian: the low bytes */
        } else {
            st = copy_fail(err, OKV_ERR_FORMAT, key, "an f64 value synth cannot copy");
        }
        if (st != OKV_OK) return st;
    }
    return OKV_OK;
}

/* ------------------------------------------------------------------ */
/* Metadata                                                            */

static okv_status add_metadata(okv_gguf_writer *w, const shape *sh, const vocab *v, const okv_gguf *vocab_file,
                               okv_error *err) {
    const char *arch = arch_names[sh->arch];
    char key[128], name[128];
    okv_status st;
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
#define TRY(call) do { if ((st = (call)) != OKV_OK) return st; } while (0)
    snprintf(name, sizeof name, "offkv synth %s seed %llu (random weights)", arch, (unsigned long long)sh->seed);
    TRY(okv_gguf_writer_add_str(w, "general.architecture", arch, err));
    TRY(okv_gguf_writer_add_str(w, "general.name", name, err));
    TRY(okv_gguf_writer_add_u32(w, "general.file_type", type_ftype[sh->type_idx], err));
    TRY(okv_gguf_writer_add_u32(w, K("context_length"), (uint32_t)sh->ctx, err));
    TRY(okv_gguf_writer_add_u32(w, K("embedding_length"), (uint32_t)sh->n_embd, err));
    TRY(okv_gguf_writer_add_u32(w, K("block_count"), (uint32_t)sh->n_layer, err));
    TRY(okv_gguf_writer_add_u32(w, K("feed_forward_length"), (uint32_t)sh->n_ff, err));
    TRY(okv_gguf_writer_add_u32(w, K("attention.head_count"), (uint32_t)sh->n_head, err));
    TRY(okv_gguf_writer_add_u32(w, K("attention.head_count_kv"), (uint32_t)sh->n_head_kv, err));
    TRY(okv_gguf_writer_add_u32(w, K("vocab_size"), (uint32_t)sh->n_vocab, err));
    if (sh->arch == ARCH_LLAMA) TRY(okv_gguf_writer_add_u32(w, K("rope.dimension_count"), (uint32_t)sh->head_dim, err));
    if (sh->arch != ARCH_LLAMA || sh->head_dim * sh->n_head != sh->n_embd) {
        TRY(okv_gguf_writer_add_u32(w, K("attention.key_length"), (uint32_t)sh->head_dim, err));
        TRY(okv_gguf_writer_add_u32(w, K("attention.value_length"), (uint32_t)sh->head_dim, err));
    }
    TRY(okv_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), traits[sh->arch].eps, err));
    TRY(okv_gguf_writer_add_f32(w, K("rope.freq_base"), sh->rope_base, err));
    if (sh->rope_base_swa > 0.0f) TRY(okv_gguf_writer_add_f32(w, K("rope.freq_base_swa"), sh->rope_base_swa, err));
    if (sh->window > 0) TRY(okv_gguf_writer_add_u32(w, K("attention.sliding_window"), (uint32_t)sh->window, err));
    if (sh->pattern_bools) {
        bool *b = malloc((size_t)sh->n_layer * sizeof *b);
        if (!b) { err->status = OKV_ERR_NOMEM; snprintf(err->message, sizeof err->message, "synth: out of memory"); return OKV_ERR_NOMEM; }
        for (int32_t i = 0; i < sh->n_layer; i++) b[i] = sh->pattern_bools[i] == '1';
        st = okv_gguf_writer_add_array(w, K("attention.sliding_window_pattern"), OKV_GGUF_BOOL, b, (uint64_t)sh->n_layer, err);
        free(b);
        if (st) return st;
    } else if (sh->pattern >= 0) {
        TRY(okv_gguf_writer_add_u32(w, K("attention.sliding_window_pattern"), (uint32_t)sh->pattern, err));
    }
    if (traits[sh->arch].attn_softcap) TRY(okv_gguf_writer_add_f32(w, K("attn_logit_softcapping"), 50.0f, err));
    if (sh->softcap > 0.0f) TRY(okv_gguf_writer_add_f32(w, K("final_logit_softcapping"), sh->softcap, err));
    if (sh->arch == ARCH_MUSE) TRY(okv_gguf_writer_add_f32(w, K("logit_scale"), sh->logit_scale, err));
    if (traits[sh->arch].moe) {
        TRY(okv_gguf_writer_add_u32(w, K("expert_count"), (uint32_t)sh->n_expert, err));
        TRY(okv_gguf_writer_add_u32(w, K("expert_used_count"), (uint32_t)sh->n_expert_used, err));
        TRY(okv_gguf_writer_add_u32(w, K("expert_feed_forward_length"), (uint32_t)sh->n_ff_exp, err));
        TRY(okv_gguf_writer_add_u32(w, K("rope.dimension_count"), (uint32_t)sh->head_dim, err));
    }
    if (sh->yarn_factor > 0.0f) {
        TRY(okv_gguf_writer_add_str(w, K("rope.scaling.type"), "yarn", err));
        TRY(okv_gguf_writer_add_f32(w, K("rope.scaling.factor"), sh->yarn_factor, err));
        TRY(okv_gguf_writer_add_u32(w, K("rope.scaling.original_context_length"), (uint32_t)sh->yarn_orig_ctx, err));
    }

    if (vocab_file) return copy_tokenizer(w, vocab_file, err);
    TRY(okv_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", err));
    TRY(okv_gguf_writer_add_array(w, "tokenizer.ggml.tokens", OKV_GGUF_STRING, v->tok, (uint64_t)v->n, err));
    TRY(okv_gguf_writer_add_array(w, "tokenizer.ggml.scores", OKV_GGUF_F32, v->score, (uint64_t)v->n, err));
    TRY(okv_gguf_writer_add_array(w, "tokenizer.ggml.token_type", OKV_GGUF_I32, v->type, (uint64_t)v->n, err));
    TRY(okv_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0, err));
    TRY(okv_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, err));
    TRY(okv_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, err));
    TRY(okv_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true, err));
    TRY(okv_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", false, err));
#undef K
#undef TRY
    return OKV_OK;
}

/* ------------------------------------------------------------------ */
/* Command                                                             */

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv synth [flags] -o FILE\n"
            "Writes a GGUF v3 model with deterministic random weights (same flags and seed: same bytes).\n"
            "Its text is gibberish; it is for tests, benchmarks and demos.\n\n"
            "  -o, --output FILE        file to write (required)\n"
            "  --arch NAME              llama (default), gemma3, muse-glimmer, qwen2, qwen3, gemma2, phi3 or\n"
            "                           smollm3, qwen3moe or gpt-oss\n"
            "  --preset NAME            a real model's shape, any flag beside it overriding: qwen3-4b,\n"
            "                           qwen2.5-7b, gemma-2-9b, phi-4, smollm3-3b, qwen3-30b-a3b or\n"
            "                           gpt-oss-20b\n"
            "  --type T                 matrix type: f32 (default), f16, q8_0 or q4_0 for every matrix, or\n"
            "                           llama-quantize's per-tensor mix of the file type q4_1, q5_0, q5_1,\n"
            "                           q2_k, q3_k_m, q4_k_m, q5_k_m or q6_k (e.g. q4_k_m: output.weight and\n"
            "                           some attn_v/ffn_down in q6_K, the rest q4_K).  Norms stay f32; a\n"
            "                           K-quant matrix whose rows do not split into 256-value blocks is\n"
            "                           q5_0 (for q4_K), q5_1 (q5_K), q8_0 (q6_K) or q4_0 (q2_K, q3_K); one\n"
            "                           whose rows do not split into 32-value blocks is f16.  mxfp4_moe:\n"
            "                           experts in MXFP4, every other matrix q8_0, routers f32 (as\n"
            "                           llama-quantize's MXFP4_MOE)\n"
            "  --seed S                 random seed (default 1)\n"
            "  --n-embd N               embedding width (default 64)\n"
            "  --n-layer N              layers (default 2)\n"
            "  --n-head N               attention heads (default 4)\n"
            "  --n-head-kv N            key/value heads, dividing n-head (default 2)\n"
            "  --n-ff N                 feed-forward width (default 172)\n"
            "  --n-vocab N              vocabulary size, at least 260 (default 512)\n"
            "  --vocab FILE             the tokenizer (every tokenizer.* key) of another GGUF, e.g. llama.cpp's\n"
            "                           ggml-vocab-qwen3.gguf; the vocabulary size is then its token count\n"
            "  --head-dim N             head width (default n-embd / n-head)\n"
            "  --ctx N                  training context length written to the file (default 2048)\n"
            "  --rope-base F            rope.freq_base (default 10000)\n"
            "  --rope-base-swa F        rope.freq_base_swa for sliding layers (gemma3, gemma2, muse-glimmer,\n"
            "                           gpt-oss; default: no key)\n"
            "  --sliding-window N       attention.sliding_window (default 8 for gemma3, gemma2, muse-glimmer\n"
            "                           and gpt-oss; no key for llama; refused for the others, which take none)\n"
            "  --sliding-window-pattern P\n"
            "                           a period n (layer i slides iff n == 0 or i mod n < n-1), or 0/1 digits,\n"
            "                           one per layer, written as a bool array (10 and 11 are periods unless\n"
            "                           there are 2 layers; default: no key for gemma3, period 4 for muse-glimmer)\n"
            "  --softcap F              final_logit_softcapping (gemma3, muse-glimmer, gpt-oss: default and 0\n"
            "                           no key; gemma2: default 30, 0 refused)\n"
            "  --logit-scale F          muse-glimmer logit_scale (default 0.5)\n"
            "  --tied                   no output.weight: the output reuses token_embd (always for gemma3\n"
            "                           and gemma2)\n"
            "  --fused-qkv              one attn_qkv tensor instead of attn_q/attn_k/attn_v (always for phi3)\n"
            "  --n-expert N             experts per layer (qwen3moe, gpt-oss; default 8)\n"
            "  --n-expert-used N        experts each token uses (default 2)\n"
            "  --n-ff-exp N             an expert's feed-forward width (default 64)\n"
            "  --yarn-factor F          gpt-oss YaRN rope scaling factor, 0 for none (default 32)\n"
            "  --yarn-orig-ctx N        gpt-oss YaRN original context (default 4096; refused without YaRN)\n"
            "  -t, --threads N          threads generating weights (default 2)\n"
            "  -h, --help               this help\n"
            "\nTinyLlama-1.1B shape: --n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632 "
            "--n-vocab 32000\n");
}

/* Refuses, before writing a byte, a model that the file system cannot take:
 * a mistyped shape should not fill the disk for minutes first.  The whole
 * size is needed even when replacing a file, since the new one is written
 * beside the old before it takes its name. */
static bool fits_on_disk(const char *cmd, const okv_gguf_writer *w, const char *out) {
    uint64_t need = 0;
    okv_error err = {0};
    if (okv_gguf_writer_size(w, &need, &err) != OKV_OK) {
        cli_error(cmd, "%s", err.message);
        return false;
    }
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) return true; /* a device or FIFO: no space to know */
    char *copy = strdup(out);
    if (!copy) {
        cli_error(cmd, "out of memory");
        return false;
    }
    struct statvfs fs;
    const bool known = statvfs(dirname(copy), &fs) == 0;
    free(copy);
    if (!known) return true; /* the write itself will say what is wrong with the folder */
    const uint64_t avail = (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize;
    if (need > avail) {
        char b0[32], b1[32];
        cli_error(cmd, "the model would take %llu bytes (%s), but the file system of '%s' has %llu bytes (%s) free",
                  (unsigned long long)need, cli_bytes((size_t)need, b0, sizeof b0), out,
                  (unsigned long long)avail, cli_bytes((size_t)avail, b1, sizeof b1));
        return false;
    }
    return true;
}

int cmd_synth(int argc, char **argv) {
    const char *cmd = "synth";
    shape sh = {.arch = ARCH_LLAMA, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 172,
                .n_vocab = 512, .head_dim = 0, .ctx = 2048, .rope_base = 10000.0f, .rope_base_swa = 0.0f,
                .window = -1, .pattern = -2, .logit_scale = 0.5f, .type_idx = 0, .seed = 1, .threads = 2,
                .yarn_factor = -1.0f};
    const char *out = NULL, *vocab_path = NULL, *v;
    bool seen_n_vocab = false; /* a preset's n_vocab gives way to --vocab's; the flag's must agree */
    cli_seen seen = {0};
    const char *pattern_arg = NULL;
    /* A preset first, whatever its place: the other flags override it. */
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--preset") != 0) continue;
        const preset *p = NULL;
        for (size_t j = 0; j < sizeof presets / sizeof presets[0] && !p; j++)
            if (strcmp(argv[i + 1], presets[j].name) == 0) p = &presets[j];
        if (!p) {
            cli_error(cmd, "unknown --preset '%s' (qwen3-4b, qwen2.5-7b, gemma-2-9b, phi-4, smollm3-3b, qwen3-30b-a3b or gpt-oss-20b)", argv[i + 1]);
            return CLI_USAGE;
        }
        sh.arch = p->arch;
        sh.n_embd = p->n_embd;
        sh.n_layer = p->n_layer;
        sh.n_head = p->n_head;
        sh.n_head_kv = p->n_head_kv;
        sh.n_ff = p->n_ff;
        sh.n_vocab = p->n_vocab;
        sh.head_dim = p->head_dim;
        sh.ctx = p->ctx;
        sh.rope_base = p->rope_base;
        if (p->window) sh.window = p->window;
        sh.tied = p->tied;
        sh.n_expert = p->n_expert;
        sh.n_expert_used = p->n_expert_used;
        sh.n_ff_exp = p->n_ff_exp;
        if (p->yarn_factor > 0.0f) {
            sh.yarn_factor = p->yarn_factor;
            sh.yarn_orig_ctx = p->yarn_orig_ctx;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        if (cli_is(a, "--tied", NULL)) { sh.tied = true; continue; }
        if (cli_is(a, "--fused-qkv", NULL)) { sh.fused_qkv = true; continue; }
        if (!(cli_is(a, "-o", "--output") || cli_is(a, "--arch", "--type") || cli_is(a, "--seed", "--n-embd") ||
              cli_is(a, "--n-layer", "--n-head") || cli_is(a, "--n-head-kv", "--n-ff") ||
              cli_is(a, "--n-vocab", "--head-dim") || cli_is(a, "--ctx", "--rope-base") ||
              cli_is(a, "--rope-base-swa", "--sliding-window") || cli_is(a, "--sliding-window-pattern", "--softcap") ||
              cli_is(a, "--logit-scale", "-t") || cli_is(a, "--threads", "--preset") ||
              cli_is(a, "--n-expert", "--n-expert-used") || cli_is(a, "--n-ff-exp", "--yarn-factor") ||
              cli_is(a, "--yarn-orig-ctx", "--vocab")))
            return cli_unknown(cmd, a);
        if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
        bool ok = true;
        if (cli_is(a, "--preset", NULL)) continue; /* applied above */
        if (cli_is(a, "-o", "--output")) out = v;
        else if (cli_is(a, "--vocab", NULL)) vocab_path = v;
        else if (cli_is(a, "--arch", NULL)) ok = cli_choice(cmd, a, v, arch_names, &sh.arch);
        else if (cli_is(a, "--type", NULL)) ok = cli_choice(cmd, a, v, type_names, &sh.type_idx);
        else if (cli_is(a, "--seed", NULL)) ok = cli_u64(cmd, a, v, &sh.seed);
        else if (cli_is(a, "--n-embd", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 16, &sh.n_embd);
        else if (cli_is(a, "--n-layer", NULL)) ok = cli_int(cmd, a, v, 1, 1024, &sh.n_layer);
        else if (cli_is(a, "--n-head", NULL)) ok = cli_int(cmd, a, v, 1, 4096, &sh.n_head);
        else if (cli_is(a, "--n-head-kv", NULL)) ok = cli_int(cmd, a, v, 1, 4096, &sh.n_head_kv);
        else if (cli_is(a, "--n-ff", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 18, &sh.n_ff);
        else if (cli_is(a, "--n-vocab", NULL)) seen_n_vocab = ok = cli_int(cmd, a, v, 260, 1 << 20, &sh.n_vocab);
        else if (cli_is(a, "--head-dim", NULL)) ok = cli_int(cmd, a, v, 2, 512, &sh.head_dim);
        else if (cli_is(a, "--ctx", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 24, &sh.ctx);
        else if (cli_is(a, "--rope-base", NULL)) ok = cli_float(cmd, a, v, 1.0, 1e12, &sh.rope_base);
        else if (cli_is(a, "--rope-base-swa", NULL)) ok = cli_float(cmd, a, v, 1.0, 1e12, &sh.rope_base_swa);
        else if (cli_is(a, "--sliding-window", NULL)) ok = cli_int(cmd, a, v, 0, 1 << 24, &sh.window);
        else if (cli_is(a, "--softcap", NULL)) ok = cli_float(cmd, a, v, 0.0, 1e6, &sh.softcap);
        else if (cli_is(a, "--logit-scale", NULL)) ok = cli_float(cmd, a, v, -1e6, 1e6, &sh.logit_scale);
        else if (cli_is(a, "-t", "--threads")) ok = cli_int(cmd, a, v, 1, 256, &sh.threads);
        else if (cli_is(a, "--n-expert", NULL)) ok = cli_int(cmd, a, v, 1, 512, &sh.n_expert);
        else if (cli_is(a, "--n-expert-used", NULL)) ok = cli_int(cmd, a, v, 1, 512, &sh.n_expert_used);
        else if (cli_is(a, "--n-ff-exp", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 18, &sh.n_ff_exp);
        else if (cli_is(a, "--yarn-factor", NULL)) ok = cli_float(cmd, a, v, 0.0, 1e6, &sh.yarn_factor);
        else if (cli_is(a, "--yarn-orig-ctx", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 24, &sh.yarn_orig_ctx);
        else if (cli_is(a, "--sliding-window-pattern", NULL)) pattern_arg = v; /* read once --n-layer is known */
        if (!ok) return CLI_USAGE;
    }
    /* 0/1 digits are bools, one per layer, except that two digits are a
     * period (10 or 11) unless there are two layers; a count that does not
     * match the layers is refused below, not read as a period of 1011. */
    if (pattern_arg) {
        const size_t n = strlen(pattern_arg);
        if (n > 1 && strspn(pattern_arg, "01") == n && (n > 2 || sh.n_layer == 2 || pattern_arg[0] == '0'))
            sh.pattern_bools = pattern_arg;
        else if (!cli_int(cmd, "--sliding-window-pattern", pattern_arg, 0, 1 << 20, &sh.pattern))
            return CLI_USAGE;
    }
    if (!out) {
        cli_error(cmd, "no output file: give -o FILE (see offkv synth --help)");
        return CLI_USAGE;
    }
    if (!out[0]) {
        cli_error(cmd, "bad value '' for -o: an empty path names no file");
        return CLI_USAGE;
    }
    if (sh.head_dim == 0) {
        if (sh.n_embd % sh.n_head != 0) {
            cli_error(cmd, "--n-embd %d is not a multiple of --n-head %d: give --head-dim", (int)sh.n_embd,
                      (int)sh.n_head);
            return CLI_USAGE;
        }
        sh.head_dim = sh.n_embd / sh.n_head;
    }
    if (sh.head_dim % 2 != 0) {
        cli_error(cmd, "head dim %d is odd: rope rotates pairs, so it must be even", (int)sh.head_dim);
        return CLI_USAGE;
    }
    if (sh.n_head % sh.n_head_kv != 0) {
        cli_error(cmd, "--n-head %d is not a multiple of --n-head-kv %d", (int)sh.n_head, (int)sh.n_head_kv);
        return CLI_USAGE;
    }
    if (sh.pattern_bools && (int32_t)strlen(sh.pattern_bools) != sh.n_layer) {
        cli_error(cmd, "--sliding-window-pattern '%s' has %zu entries for %d layers", sh.pattern_bools,
                  strlen(sh.pattern_bools), (int)sh.n_layer);
        return CLI_USAGE;
    }
    if (traits[sh.arch].moe) {
        if (sh.n_expert == 0) sh.n_expert = 8;
        if (sh.n_expert_used == 0) sh.n_expert_used = sh.n_expert < 2 ? sh.n_expert : 2;
        if (sh.n_ff_exp == 0) sh.n_ff_exp = 64;
        if (sh.n_expert_used > sh.n_expert) {
            cli_error(cmd, "--n-expert-used %d exceeds --n-expert %d", (int)sh.n_expert_used, (int)sh.n_expert);
            return CLI_USAGE;
        }
        if (sh.arch == ARCH_GPT_OSS && sh.yarn_factor < 0.0f) {
            sh.yarn_factor = 32.0f;
            if (sh.yarn_orig_ctx == 0) sh.yarn_orig_ctx = 4096;
        }
    } else if (sh.n_expert || sh.n_expert_used || sh.n_ff_exp) {
        cli_error(cmd, "--n-expert, --n-expert-used and --n-ff-exp are for qwen3moe and gpt-oss");
        return CLI_USAGE;
    }
    if (sh.yarn_factor < 0.0f) sh.yarn_factor = 0.0f;
    if (sh.yarn_factor > 0.0f && sh.arch != ARCH_GPT_OSS) {
        cli_error(cmd, "--yarn-factor is for gpt-oss");
        return CLI_USAGE;
    }
    if (sh.yarn_factor > 0.0f && sh.yarn_orig_ctx == 0) sh.yarn_orig_ctx = 4096;
    if (cli_given(&seen, "--yarn-orig-ctx") && sh.yarn_factor == 0.0f) {
        cli_error(cmd, "--yarn-orig-ctx needs YaRN: gpt-oss with a --yarn-factor above 0");
        return CLI_USAGE;
    }
    if (cli_given(&seen, "--logit-scale") && sh.arch != ARCH_MUSE) {
        cli_error(cmd, "--logit-scale is for muse-glimmer");
        return CLI_USAGE;
    }
    if (cli_given(&seen, "--sliding-window") && sh.window > 0 && !traits[sh.arch].windows && sh.arch != ARCH_LLAMA) {
        /* The file would hold the key and the model would run without it. */
        cli_error(cmd, "--sliding-window is for llama, gemma3, gemma2, muse-glimmer and gpt-oss: %s's loader takes no "
                       "window (as llama.cpp's), so the key would do nothing", arch_names[sh.arch]);
        return CLI_USAGE;
    }
    if (cli_given(&seen, "--softcap") && sh.softcap == 0.0f && sh.arch == ARCH_GEMMA2) {
        cli_error(cmd, "bad value '0' for --softcap: gemma2 always caps (a file without the key reads as 30)");
        return CLI_USAGE;
    }
    if (!traits[sh.arch].windows) {
        if (sh.pattern != -2 || sh.pattern_bools || sh.softcap > 0.0f || sh.rope_base_swa > 0.0f) {
            cli_error(cmd, "--sliding-window-pattern, --softcap and --rope-base-swa are for gemma3, gemma2, "
                           "muse-glimmer and gpt-oss");
            return CLI_USAGE;
        }
        if (sh.window < 0) sh.window = 0;
        sh.pattern = -1;
    } else {
        if (sh.window < 0) sh.window = 8;
        if (sh.arch == ARCH_MUSE && sh.window == 0) {
            /* offkv refuses a muse-glimmer file without a window, so do not write one */
            cli_error(cmd, "bad value '0' for --sliding-window: muse-glimmer needs a window of at least 1");
            return CLI_USAGE;
        }
        if (sh.pattern == -2) sh.pattern = sh.arch == ARCH_MUSE && !sh.pattern_bools ? 4 : -1;
        if (sh.arch == ARCH_GEMMA2 && sh.softcap == 0.0f) sh.softcap = 30.0f;
    }
    if (traits[sh.arch].tied) sh.tied = true;
    if (traits[sh.arch].fused) sh.fused_qkv = true;

    synth_run run = {.seed = sh.seed};
    vocab voc = {0};
    okv_error err = {0};
    okv_gguf_writer *w = NULL;
    okv_gguf *vocab_file = NULL;
    int rc = CLI_FAIL;
    if (vocab_path) {
        uint64_t n_tok = 0;
        if (!(vocab_file = okv_gguf_open(vocab_path, &err)) ||
            okv_gguf_get_array(vocab_file, "tokenizer.ggml.tokens", NULL, &n_tok, &err) != OKV_OK) {
            cli_error(cmd, "--vocab %s: %s", vocab_path, err.message);
            goto done;
        }
        if (n_tok < 260 || n_tok > (1u << 20)) {
            cli_error(cmd, "--vocab %s has %llu tokens; synth takes 260 to 1048576", vocab_path,
                      (unsigned long long)n_tok);
            goto done;
        }
        if (seen_n_vocab && sh.n_vocab != (int32_t)n_tok) {
            cli_error(cmd, "--n-vocab %d disagrees with the %llu tokens of --vocab %s", (int)sh.n_vocab,
                      (unsigned long long)n_tok, vocab_path);
            goto done;
        }
        sh.n_vocab = (int32_t)n_tok;
    }
    if ((!vocab_file && !build_vocab(&voc, sh.n_vocab)) || !build_specs(&run, &sh)) {
        cli_error(cmd, "out of memory building the model description");
        goto done;
    }
    run.n_threads = sh.threads;
    run.pool = okv_threadpool_create(sh.threads, &err);
    run.scratch = malloc((size_t)sh.threads * (size_t)run.max_ne0 * sizeof *run.scratch);
    if (!run.pool || !run.scratch) {
        cli_error(cmd, "cannot start %d threads: %s", (int)sh.threads, run.pool ? "out of memory" : err.message);
        goto done;
    }
    if (!(w = okv_gguf_writer_create(&err)) || add_metadata(w, &sh, &voc, vocab_file, &err) != OKV_OK) {
        cli_error(cmd, "metadata: %s", err.message);
        goto done;
    }
    for (int i = 0; i < run.n; i++) {
        tspec *t = &run.t[i];
        int64_t ne[3] = {t->ne0, t->ne1, t->ne2};
        if (okv_gguf_writer_add_tensor_fn(w, t->name, (okv_ggml_type)t->type, t->n_dims, ne, fill_tensor, t, &err) !=
            OKV_OK) {
            cli_error(cmd, "tensor %s: %s", t->name, err.message);
            goto done;
        }
    }
    if (!fits_on_disk(cmd, w, out)) goto done;
    double t0 = cli_now();
    if (okv_gguf_writer_write(w, out, &err) != OKV_OK) {
        cli_error(cmd, "%s", err.message); /* it names the file */
        goto done;
    }
    fprintf(stderr,
            "offkv synth: wrote %s: %s, %d layers, n_embd %d, %d/%d heads, head_dim %d, ffn %d, vocab %d, %s, "
            "seed %llu (%.1f s)\n",
            out, arch_names[sh.arch], (int)sh.n_layer, (int)sh.n_embd, (int)sh.n_head, (int)sh.n_head_kv,
            (int)sh.head_dim, (int)sh.n_ff, (int)sh.n_vocab, type_names[sh.type_idx],
            (unsigned long long)sh.seed, cli_now() - t0);
    if (run.n_fallback && sh.type_idx >= 2)
        fprintf(stderr, "offkv synth: %d matrices whose rows do not split into 32-value blocks are f16\n",
                run.n_fallback);
    if (run.n_legacy)
        fprintf(stderr,
                "offkv synth: %d K-quant matrices whose rows do not split into 256-value blocks use a 32-value "
                "type, as llama-quantize does\n",
                run.n_legacy);
    rc = CLI_OK;
done:
    okv_gguf_writer_free(w);
    okv_threadpool_free(run.pool);
    free(run.scratch);
    free(run.t);
    vocab_free(&voc);
    okv_gguf_close(vocab_file);
    return rc;
}
