/* Internal: a loaded model.  model.c reads what every architecture shares
 * (hyperparameters, window layout, tensors by name); each architecture's file
 * (llama.c, gemma3.c, muse_glimmer.c) binds its tensors and holds its
 * forward pass, top to bottom. */
#ifndef OKV_MODEL_IMPL_H
#define OKV_MODEL_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "offkv/cache.h"
#include "offkv/gguf.h"
#include "offkv/model.h"
#include "offkv/tokenizer.h"
#include "kernels/cpu.h"
#include "kernels/f16.h"

/* Provided by src/tokenizer (reads tokenizer.ggml.* keys). */
okv_tokenizer *okv_tokenizer_from_gguf(const okv_gguf *g, okv_error *err);

/* A weight as the kernels take it: ne0 inputs per row, ne1 rows (ggml order). */
typedef struct okv_weight {
    int32_t type;       /* okv_ggml_type */
    const void *data;   /* into the mapped file, or into okv_model.packed */
    int64_t ne0, ne1;
} okv_weight;

typedef struct okv_layer_weights {
    okv_weight attn_norm, wq, wk, wv, wqkv, wo;
    okv_weight attn_q_norm, attn_k_norm;      /* per-head norms (gemma3, muse-glimmer) */
    okv_weight attn_post_norm, attn_gate;     /* gemma3 post_attention_norm; muse-glimmer gate */
    okv_weight ffn_norm, ffn_gate, ffn_up, ffn_down, ffn_post_norm;
    okv_weight bq, bk, bv, bo;                /* attn_{q,k,v,output}.bias (qwen2, gpt-oss), or none */
    okv_weight attn_sinks;                    /* gpt-oss: one logit per head, or none */
} okv_layer_weights;

/* A 3-D expert tensor: n matrices of ne1 rows of ne0 inputs (ggml order),
 * expert e's at (char *)w.data + e * stride.  A weight of its own so that
 * okv_layer_weights stays an array of 2-D weights (repacking walks it). */
typedef struct okv_experts {
    okv_weight w;      /* expert 0's matrix; w.type and shape are every expert's */
    int32_t n;
    size_t stride;     /* bytes from one expert's matrix to the next */
} okv_experts;

/* A layer's mixture-of-experts feed-forward (src/model/moe.c). */
typedef struct okv_moe_weights {
    okv_weight gate_inp, gate_inp_b;            /* router [n_embd -> n_expert], optional bias */
    okv_experts gate, up, down;                 /* [n_embd -> n_ff_exp] x2, [n_ff_exp -> n_embd] */
    okv_weight gate_b, up_b, down_b;            /* optional biases, [n_ff_exp or n_embd][n_expert] F32 */
} okv_moe_weights;

/* How a router's logits become the chosen experts' weights. */
typedef enum okv_moe_gating {
    OKV_MOE_SOFTMAX_NORM,  /* softmax over all experts, top k, the k renormalised to sum 1 (qwen3moe) */
    OKV_MOE_TOPK_SOFTMAX   /* top k of the logits, softmax among those k (gpt-oss) */
} okv_moe_gating;

/* The experts' activation of gate g and up u. */
typedef enum okv_moe_act {
    OKV_MOE_SILU,          /* silu(g) u */
    OKV_MOE_SWIGLU_OAI     /* gpt-oss: g' = min(g, 7), u' = clamp(u, -7, 7), g' sigmoid(1.702 g') (u' + 1) */
} okv_moe_act;

/* What one layer's attention looks like. */
typedef struct okv_layer_params {
    int32_t n_head, n_head_kv, head_dim;
    int32_t n_rot;        /* leading dimensions of each head that RoPE rotates (even, <= head_dim) */
    int32_t window;       /* 0: full attention */
    int32_t kv_from;      /* 0: own K/V; d + 1: attends layer d's (okv_layer_geometry) */
    float rope_base;      /* 0: no rotation (muse-glimmer global layers) */
    float rope_pos_scale; /* positions are multiplied by this (1 / linear scaling factor) */
    float attn_scale;     /* softmax scale of q.k */
    float attn_softcap;   /* > 0: scores are soft-capped before the softmax (gemma2); 0: not */
} okv_layer_params;

typedef enum okv_arch {
    OKV_ARCH_LLAMA,
    OKV_ARCH_GEMMA3,
    OKV_ARCH_MUSE_GLIMMER,
    OKV_ARCH_QWEN2,
    OKV_ARCH_QWEN3,
    OKV_ARCH_SMOLLM3,
    OKV_ARCH_GEMMA2,
    OKV_ARCH_PHI3,
    OKV_ARCH_QWEN3MOE,
    OKV_ARCH_GPT_OSS,
} okv_arch;

/* YaRN RoPE scaling as ggml applies it (ops.h okv_yarn); ext_factor 0: none. */
typedef struct okv_model_yarn {
    float ext_factor, attn_factor, beta_fast, beta_slow;
    int32_t orig_ctx;
} okv_model_yarn;

typedef struct okv_fwd okv_fwd;

struct okv_model {
    okv_gguf *file;
    /* While loading: which of the file's tensors a binding took (or left on
     * purpose, okv_model_leave); one left over is refused at the end. */
    uint8_t *used;
    okv_arch arch;
    char arch_name[32];
    /* The instruction-set level its matrix products run at (the "isa"
     * option; the processor's best by default).  Fixed at load: which
     * layouts the weights are repacked into depends on it. */
    okv_isa isa;
    int32_t n_vocab, n_embd, n_layer, n_ff, n_ctx_train;
    float norm_eps;
    okv_layer_params *layer;     /* n_layer */
    okv_layer_weights *w;        /* n_layer */
    okv_weight tok_embd, output_norm, output;
    const float *rope_freqs;     /* per-frequency divisors, n_rot/2 (llama 3's rope_freqs, phi3's short
                                    LongRoPE factors), or NULL */
    const float *rope_long;      /* phi3 LongRoPE: the divisors for contexts beyond n_ctx_orig, or NULL */
    int32_t n_ctx_orig;          /* rope.scaling.original_context_length (default n_ctx_train): phi3's
                                    short divisors' context, YaRN's original context */
    float rope_attn_factor;      /* rope.scaling.attn_factor: cos and sin are multiplied by it; else 1 */
    okv_model_yarn yarn;         /* rope.scaling.type yarn (gpt-oss, long-context Qwen) */
    int32_t n_expert, n_expert_used, n_ff_exp; /* mixture of experts; 0 when dense */
    float expert_weights_scale;  /* qwen3moe's optional key: the chosen weights times this; 0: none */
    okv_moe_weights *moe;        /* n_layer, or NULL when dense */
    /* Tests only: when set, called for every row a router routes with the
     * gap between its k-th and (k+1)-th logits (how near a tie moved it). */
    void (*moe_probe)(void *ctx, int32_t layer, int32_t pos, float margin);
    void *moe_probe_ctx;
    float embd_scale;            /* gemma3: sqrt(n_embd); else 1 */
    float logit_scale;           /* muse-glimmer; else 1 */
    float final_softcap;         /* 0: none */
    okv_tokenizer *tok;
    okv_f16 *gelu_table;         /* gemma3: llama.cpp's f16 GELU table, 64 Ki entries */
    /* the architecture's whole forward pass over a batch: embeds f->tokens,
     * runs every layer, and writes the logits the segments ask for */
    okv_status (*forward)(okv_fwd *f);
    size_t weight_bytes;
    void *packed;                /* the matrices repacked (kernels/q4_0x16.h), or NULL */
    char desc[256];
};

/* One sequence's rows of a batched forward pass: rows row0 .. row0+n_rows-1
 * of the batch belong to this step. */
typedef struct okv_fwd_seg {
    okv_step *step;
    int32_t row0, n_rows;
    float *logits;             /* NULL: none; else the last row's, or all rows' (all_logits) */
    bool all_logits;
    int32_t n_ctx;             /* positions the sequence's cache holds (its capacity) */
} okv_fwd_seg;

/* Per-eval state handed to an architecture's forward pass: a batch of n
 * token rows, cut into segments, one per sequence.  Buffers hold the
 * batch's max_rows rows. */
struct okv_fwd {
    const okv_model *m;
    okv_threadpool *pool;
    const okv_fwd_seg *seg;    /* n_seg segments covering rows 0..n-1 in order */
    int32_t n_seg;
    int32_t n;                 /* rows in this batch */
    const int32_t *tokens;     /* their token ids */
    const int32_t *pos;        /* their positions (consecutive within a segment) */
    float *x;                  /* [n][n_embd] residual stream */
    float *xb, *xb2;           /* [n][max(n_embd, q width)] */
    float *q, *k, *v;          /* [n][n_head * head_dim], [n][n_head_kv * head_dim] */
    float *att;                /* [n][n_head * head_dim] attention output */
    float *gate;               /* [n][n_head * head_dim] (muse-glimmer) */
    float *qkv;                /* [n][(n_head + 2 n_head_kv) * head_dim] (fused weights) */
    float *hb, *hb2;           /* [n][max(n_ff, n_ff_exp)] */
    float *moe_logits;         /* [n][n_expert] router logits, then probabilities */
    int32_t *moe_ids;          /* [n][n_expert_used] the chosen experts, best first */
    float *moe_w;              /* [n][n_expert_used] their weights */
    int32_t *moe_rows;         /* [n] the rows routed to one expert, and their slots */
    float *moe_x;              /* [n][n_embd] those rows' inputs, gathered */
    float *moe_y;              /* [n][n_embd] one expert's outputs */
    float *moe_out;            /* [n][n_expert_used][n_embd] every row's expert outputs by slot */
    float *head_x, *head_y;    /* [head_rows][n_embd], [head_rows][n_vocab]: last rows gathered */
    int32_t head_rows;
    void *mm_scratch;
    okv_error *err;
};

/* The alignment the kernels read a tensor's data with: 4 for F32, 1 for
 * MXFP4 (bytes only), 2 for the rest (an F16 or a block's F16 scale).  A
 * file of general.alignment 1 could place data anywhere: binding refuses
 * data not so aligned (OKV_ERR_FORMAT), as reading it would be undefined. */
okv_status okv_model_check_align(const okv_gguf_tensor *t, okv_error *err);

/* Marks tensor name, if the file has it, as left unused on purpose (the
 * K/V weights of a layer that reads another's K/V). */
void okv_model_leave(okv_model *m, const char *name);

/* Looks up tensor name and checks its shape (ne1 = 0: a vector of ne0).
 * Missing: OKV_ERR_FORMAT naming it, unless optional (then w->data = NULL).
 * Matrices must be of a type the kernels run (okv_wtype_runnable: the float
 * types, the legacy and K-quants, MXFP4): else OKV_ERR_UNSUPPORTED; vectors must be F32. */
okv_status okv_model_bind(okv_model *m, okv_weight *w, const char *name, int64_t ne0, int64_t ne1,
                          bool optional, okv_error *err);

/* One tensor of a layer: blk.{il}.{name}.weight, shape [ne0, ne1] (ne1 0: a vector). */
typedef struct okv_bind_spec {
    okv_weight *w;
    const char *name;
    int64_t ne0, ne1;
} okv_bind_spec;

/* Binds the n tensors of layer il that specs name, then its attention
 * projections (okv_model_bind_attention). */
okv_status okv_model_bind_layer(okv_model *m, int32_t il, const okv_bind_spec *specs, size_t n,
                                okv_error *err);

/* Binds layer il's dense feed-forward: ffn_norm, ffn_gate, ffn_up (n_embd
 * -> n_ff) and ffn_down. */
okv_status okv_model_bind_ffn(okv_model *m, int32_t il, okv_error *err);

/* Allocates and fills m->gelu_table (llama.cpp's f16 GELU table, for
 * okv_fwd_ffn's gelu); OKV_ERR_NOMEM when memory runs out. */
okv_status okv_model_gelu_table(okv_model *m, okv_error *err);

/* Reads "{arch}.attention.shared_kv_layers" (N, default 0): the last N
 * layers attend the K/V of the last earlier layer of the same kind (sliding
 * or global) instead of computing their own (layer[].kv_from).  Call after
 * the windows are known and before binding.  A count that leaves no donor,
 * or a donor of another shape, is OKV_ERR_FORMAT naming the key. */
okv_status okv_model_read_kv_sharing(okv_model *m, okv_error *err);

/* Binds Q, K, V (separate or a fused attn_qkv), O for layer il (Q and O
 * only for a layer that reads another's K/V). */
okv_status okv_model_bind_attention(okv_model *m, int32_t il, okv_error *err);

/* Architecture hooks: read architecture-specific hyperparameters and bind
 * tensors, setting m->forward. */
okv_status okv_llama_load(okv_model *m, const char *const *options, okv_error *err);
okv_status okv_gemma3_load(okv_model *m, okv_error *err);
okv_status okv_muse_glimmer_load(okv_model *m, okv_error *err);
okv_status okv_qwen2_load(okv_model *m, okv_error *err);
okv_status okv_qwen3_load(okv_model *m, okv_error *err);
okv_status okv_smollm3_load(okv_model *m, okv_error *err);
okv_status okv_gemma2_load(okv_model *m, okv_error *err);
okv_status okv_phi3_load(okv_model *m, okv_error *err);

/* Reads RoPE scaling for every architecture, as llama.cpp does (model.c
 * says how): "{arch}.rope.scaling.type" (none, linear (the default), yarn,
 * longrope), .factor (or the older rope.scale_linear), .attn_factor,
 * .original_context_length and, for yarn, .yarn_beta_fast/.yarn_beta_slow,
 * into every layer's rope_pos_scale, m->rope_attn_factor, m->n_ctx_orig and
 * m->yarn.  Another type is OKV_ERR_UNSUPPORTED naming it; a value out of
 * range is OKV_ERR_FORMAT naming its key. */
okv_status okv_model_read_rope_scaling(okv_model *m, okv_error *err);

/* Binds blk.{il}.{name}.bias, a vector of ne0 (optional: w->data stays
 * NULL when the file has none). */
okv_status okv_model_bind_bias(okv_model *m, okv_weight *w, int32_t il, const char *name, int64_t ne0,
                               bool optional, okv_error *err);

/* Binds layer il's attn_{q,k,v}.bias, and attn_output.bias when output is
 * set (optional: those the file lacks stay NULL). */
okv_status okv_model_bind_attn_biases(okv_model *m, int32_t il, bool output, bool optional, okv_error *err);

okv_status okv_qwen3moe_load(okv_model *m, okv_error *err);
okv_status okv_gpt_oss_load(okv_model *m, okv_error *err);

/* Mixture of experts (moe.c).  okv_model_read_moe reads expert_count,
 * expert_used_count (1 <= used <= count <= 512) and
 * expert_feed_forward_length into m and allocates m->moe; a key missing or
 * out of range is OKV_ERR_FORMAT naming it.  okv_model_bind_moe binds layer
 * il's router (ffn_gate_inp, refused naming it when absent) and
 * ffn_{gate,up,down}_exps, with their biases when biases is set. */
okv_status okv_model_read_moe(okv_model *m, okv_error *err);
okv_status okv_model_bind_moe(okv_model *m, int32_t il, bool biases, okv_error *err);
/* The feed-forward of layer il's experts on the n rows of f->xb into f->xb2:
 * each row's router picks n_expert_used experts; each expert multiplies all
 * the rows routed to it at once (its weights read once per batch), and a
 * row's outputs are summed in its own slot order, so a row's result does not
 * depend on the other rows of the batch. */
okv_status okv_fwd_moe(okv_fwd *f, int32_t il, okv_moe_gating gating, okv_moe_act act);
/* Adds a bias vector (F32, width wide) to each of n rows; a NULL bias adds nothing. */
void okv_fwd_add_bias(float *y, const okv_weight *bias, int32_t n, int64_t width);
/* Per-head RMSNorm of the step's q and k (qwen3, qwen3moe, gemma3), with gains qn, kn. */
void okv_fwd_qk_norm(okv_fwd *f, const okv_layer_params *p, const okv_weight *qn, const okv_weight *kn, float eps);

/* Metadata helpers: "{arch}.{suffix}". Missing and optional: *out keeps its
 * value.  Wrong type: OKV_ERR_FORMAT naming the key. */
okv_status okv_model_u32(const okv_model *m, const char *suffix, uint32_t *out, bool required, okv_error *err);
okv_status okv_model_f32(const okv_model *m, const char *suffix, float *out, bool required, okv_error *err);
bool okv_model_has(const okv_model *m, const char *suffix);
/* An optional float key that, when present, must be > 0 (RoPE bases,
 * scaling factors, soft caps): else OKV_ERR_FORMAT naming it. */
okv_status okv_model_positive(const okv_model *m, const char *suffix, float *out, okv_error *err);

/* Reads "{arch}.attention.sliding_window_pattern" (a period or a per-layer
 * bool array) and the window into m->layer[].window.  When required and
 * either key is absent: OKV_ERR_FORMAT naming it. */
okv_status okv_model_read_windows(okv_model *m, uint32_t default_period, bool required, okv_error *err);

/* Shared forward pieces. */
okv_status okv_fwd_matmul(okv_fwd *f, const okv_weight *w, const float *x, int32_t n, float *y);
/* The products of count (1..OKV_MM_MAX_OPS) weights of equal width with the
 * same x: activations quantized once, one fork-join (forward passes group
 * Q/K/V and gate/up this way). */
okv_status okv_fwd_matmuls(okv_fwd *f, const float *x, int32_t n, int count, const okv_weight *const *ws,
                           float *const *ys);
/* count (1..OKV_MM_MAX_OPS) products of one width, each weight i times
 * its own input column x + i * width into ys[i]: one quantization pass,
 * one fork-join (a decode row's experts' down products). */
okv_status okv_fwd_matmul_each(okv_fwd *f, const float *x, int count, const okv_weight *const *ws,
                               float *const *ys);
/* The feed-forward's two input products: f->hb = ffn_gate . f->xb and
 * f->hb2 = ffn_up . f->xb, with one quantization of f->xb. */
okv_status okv_fwd_gate_up(okv_fwd *f, const okv_layer_weights *w);
/* Computes Q, K, V of layer il from f->xb (separate or fused weights), and
 * extra_y = extra x f->xb with them when extra is not NULL. */
okv_status okv_fwd_qkv(okv_fwd *f, int32_t il, const okv_weight *extra, float *extra_y);
/* The n_rot cos/sin values (okv_rope_cache's layout) layer p rotates
 * position pos by, in a sequence whose cache holds n_ctx positions: its
 * base and position scale, the model's frequency divisors (LongRoPE's long
 * ones when n_ctx exceeds n_ctx_orig), YaRN and attention factor. */
void okv_fwd_rope_cs(const okv_model *m, const okv_layer_params *p, int32_t n_ctx, int32_t pos, float *cs);
/* Rotates the step's q and k of one layer, token by token: "normal"
 * (adjacent pairs) or NEOX (halves).  A layer with rope_base 0 is left alone. */
void okv_fwd_rope(okv_fwd *f, const okv_layer_params *p, bool neox);
/* What sets an architecture's attention block apart (okv_fwd_attention). */
typedef struct okv_attn_opts {
    bool biases;    /* add the layer's Q, K, V and output biases (bq, bk, bv, bo), those it has */
    bool qk_norm;   /* RMS-norm each head of Q and K (attn_q_norm, attn_k_norm) before the rotation */
    bool neox;      /* NEOX rotation (dimension i with i + n_rot/2), not adjacent pairs */
    bool post_norm; /* RMS-norm the block's output (attn_post_norm) before the residual add */
} okv_attn_opts;
/* Layer il's attention block on the residual stream f->x, top to bottom:
 * RMSNorm (attn_norm) into f->xb; Q, K, V; their biases; Q/K norms; RoPE
 * (okv_fwd_rope); attention over the cache (okv_fwd_attend: soft cap and
 * sinks as the layer has them); output projection; its bias; post norm;
 * added to f->x.  The steps opts leaves out are skipped. */
okv_status okv_fwd_attention(okv_fwd *f, int32_t il, okv_attn_opts opts);
/* What sets an architecture's dense feed-forward block apart (okv_fwd_ffn). */
typedef struct okv_ffn_opts {
    bool gelu;           /* GELU(gate) up (llama.cpp's f16 table, m->gelu_table), not silu(gate) up */
    bool post_norm;      /* RMS-norm the block's output (ffn_post_norm) before the residual add */
    float post_norm_eps; /* that norm's epsilon; 0: the model's norm_eps */
} okv_ffn_opts;
/* Layer il's feed-forward block on f->x: RMSNorm (ffn_norm); gate and up
 * (one quantization of the input); the gated activation; down; post norm;
 * added to f->x. */
okv_status okv_fwd_ffn(okv_fwd *f, int32_t il, okv_ffn_opts opts);
/* The token embeddings of the batch's rows into f->x (gemma3's scale
 * included). */
void okv_fwd_embed(okv_fwd *f);
/* Layer il's attention of every segment on its own step: writes f->k/f->v
 * rows into the sequence's cache and attends its f->q rows into f->att. */
okv_status okv_fwd_attend(okv_fwd *f, int32_t il, const okv_layer_params *p);
/* The output layer (with logit scale and soft cap) of the rows whose
 * segments ask for logits, from the normed hidden states in f->x. */
okv_status okv_fwd_head(okv_fwd *f);
/* RMSNorm of each of the step's n rows of width n (gain may be NULL). */
void okv_fwd_norm_rows(okv_fwd *f, float *y, const float *x, int64_t width, const okv_weight *gain, float eps);
/* y = GELU(gate) up with llama.cpp's GELU table gelu_table (kernels/ops.h's
 * okv_geglu_ggml), or, gelu_table NULL, silu(gate) up: n values, spread
 * over the pool when the step has several tokens. */
void okv_fwd_glu(okv_fwd *f, float *y, const float *gate, const float *up, int64_t n, const okv_f16 *gelu_table);

#endif
