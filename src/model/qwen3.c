/* Qwen 3 (dense): llama's decoder with, as named steps below, a per-head
 * RMSNorm of Q and K (attn_q_norm, attn_k_norm) before RoPE, and NEOX RoPE.
 * The head size comes from attention.key_length and need not be
 * n_embd / n_head (Qwen3-4B: 32 heads of 128 in a 2560-wide stream); no
 * biases.  model.c reads key_length for every architecture. */
#include "core/error.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

static okv_status qwen3_forward(okv_fwd *f);

okv_status okv_qwen3_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_rope_scaling(m, err))) return st;
    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const int32_t hd = m->layer[il].head_dim;
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_q_norm, "attn_q_norm", hd, 0},
            {&w->attn_k_norm, "attn_k_norm", hd, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err)) ||
            (st = okv_model_bind_ffn(m, il, err)))
            return st;
    }
    m->forward = qwen3_forward;
    return OKV_OK;
}

static okv_status qwen3_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        /* Qwen 3: each head of Q and of K RMS-normed before the rotation; NEOX rotation */
        if ((st = okv_fwd_attention(f, il, (okv_attn_opts){.qk_norm = true, .neox = true}))) return st;
        if ((st = okv_fwd_ffn(f, il, (okv_ffn_opts){0}))) return st; /* SwiGLU */
    }
    okv_fwd_norm_rows(f, f->x, f->x, m->n_embd, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
