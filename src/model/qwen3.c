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
            {&w->ffn_norm, "ffn_norm", m->n_embd, 0},
            {&w->ffn_gate, "ffn_gate", m->n_embd, m->n_ff},
            {&w->ffn_up, "ffn_up", m->n_embd, m->n_ff},
            {&w->ffn_down, "ffn_down", m->n_ff, m->n_embd},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err))) return st;
    }
    m->forward = qwen3_forward;
    return OKV_OK;
}

static okv_status qwen3_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        const okv_layer_weights *w = &m->w[il];

        /* attention */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
        if ((st = okv_fwd_qkv(f, il, NULL, NULL))) return st;
        /* Qwen 3: each head of Q and of K RMS-normed, before the rotation */
        okv_fwd_qk_norm(f, p, &w->attn_q_norm, &w->attn_k_norm, m->norm_eps);
        /* Qwen: NEOX rotation */
        okv_fwd_rope(f, p, true);
        if ((st = okv_fwd_attend(f, il, p))) return st;
        if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);

        /* SwiGLU feed-forward */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->ffn_norm, m->norm_eps);
        if ((st = okv_fwd_gate_up(f, w))) return st;
        okv_swiglu(f->hb, f->hb, f->hb2, (int64_t)n * m->n_ff);
        if ((st = okv_fwd_matmul(f, &w->ffn_down, f->hb, n, f->xb2))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);
    }
    okv_fwd_norm_rows(f, f->x, f->x, E, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
