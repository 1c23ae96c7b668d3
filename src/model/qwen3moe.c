/* Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): llama's pre-norm decoder with
 * qwen3's attention (per-head RMSNorm of Q and K before NEOX RoPE; the head
 * size comes from key_length and need not be n_embd / n_head) and a
 * mixture-of-experts feed-forward: softmax over every expert, the top
 * expert_used_count kept and renormalised to sum 1 (llama.cpp's qwen3moe
 * always renormalises), SwiGLU experts. */
#include "core/error.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

static okv_status qwen3moe_forward(okv_fwd *f);

okv_status okv_qwen3moe_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_moe(m, err))) return st;
    /* llama.cpp scales the renormalised weights by this key when a file has it */
    if ((st = okv_model_f32(m, "expert_weights_scale", &m->expert_weights_scale, false, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const int32_t hd = m->layer[il].head_dim;
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_q_norm, "attn_q_norm", hd, 0},
            {&w->attn_k_norm, "attn_k_norm", hd, 0},
            {&w->ffn_norm, "ffn_norm", m->n_embd, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err))) return st;
        if ((st = okv_model_bind_moe(m, il, false, err))) return st;
    }
    m->forward = qwen3moe_forward;
    return OKV_OK;
}

static okv_status qwen3moe_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        const okv_layer_weights *w = &m->w[il];

        /* attention: qwen3's Q/K norms before NEOX RoPE */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
        if ((st = okv_fwd_qkv(f, il, NULL, NULL))) return st;
        okv_fwd_qk_norm(f, p, &w->attn_q_norm, &w->attn_k_norm, m->norm_eps);
        okv_fwd_rope(f, p, true);
        if ((st = okv_fwd_attend(f, il, p))) return st;
        if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);

        /* mixture of experts */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->ffn_norm, m->norm_eps);
        if ((st = okv_fwd_moe(f, il, OKV_MOE_SOFTMAX_NORM, OKV_MOE_SILU))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);
    }
    okv_fwd_norm_rows(f, f->x, f->x, E, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
