/* Gemma 2: differences from llama, each a named step below: embeddings
 * scaled by sqrt(n_embd); attention logits soft-capped (c tanh(s / c),
 * attn_logit_softcapping, default 50) before the softmax; a sliding window
 * (default 4096) on the even layers, full attention on the odd ones; norms
 * after attention and after the feed-forward as well as before; a GELU
 * feed-forward (llama.cpp's f16 GELU table, as gemma3); NEOX RoPE; the
 * output tied to the embeddings; final logits soft-capped (default 30).
 * The attention scale is 1/sqrt(head_dim), except for the 27B shape (46
 * layers), which Google scales by 1/sqrt(n_embd / n_head), as llama.cpp
 * does (its query_pre_attn_scalar is not in the GGUF). */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

static okv_status gemma2_forward(okv_fwd *f);

okv_status okv_gemma2_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_rope_scaling(m, err))) return st;
    /* Gemma 2: sliding layers are the even ones (period 2); the window is
     * 4096 when the file does not say */
    if (okv_model_has(m, "attention.sliding_window")) {
        if ((st = okv_model_read_windows(m, 2, false, err))) return st;
    } else {
        for (int32_t i = 0; i < m->n_layer; i++) m->layer[i].window = i % 2 == 0 ? 4096 : 0;
    }
    /* Gemma 2: the soft caps */
    float attn_cap = 50.0f;
    if ((st = okv_model_positive(m, "attn_logit_softcapping", &attn_cap, err))) return st;
    m->final_softcap = 30.0f;
    if ((st = okv_model_positive(m, "final_logit_softcapping", &m->final_softcap, err))) return st;
    const bool big = m->n_layer == 46; /* gemma-2-27b */
    for (int32_t i = 0; i < m->n_layer; i++) {
        okv_layer_params *p = &m->layer[i];
        p->attn_softcap = attn_cap;
        if (big) p->attn_scale = 1.0f / sqrtf((float)(m->n_embd / p->n_head));
    }
    /* Gemma: embeddings scaled by sqrt(n_embd), a GELU feed-forward */
    m->embd_scale = sqrtf((float)m->n_embd);
    if ((st = okv_model_gelu_table(m, err))) return st;

    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_post_norm, "post_attention_norm", m->n_embd, 0},
            {&w->ffn_post_norm, "post_ffw_norm", m->n_embd, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err)) ||
            (st = okv_model_bind_ffn(m, il, err)))
            return st;
    }
    m->forward = gemma2_forward;
    return OKV_OK;
}

static okv_status gemma2_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    okv_status st;
    okv_fwd_embed(f); /* scaled by sqrt(n_embd) */
    for (int32_t il = 0; il < m->n_layer; il++) {
        /* attention, normed before and after; the scores soft-capped in
         * okv_fwd_attend (p->attn_softcap) */
        if ((st = okv_fwd_attention(f, il, (okv_attn_opts){.neox = true, .post_norm = true}))) return st;
        /* GELU feed-forward, normed before and after */
        if ((st = okv_fwd_ffn(f, il, (okv_ffn_opts){.gelu = true, .post_norm = true}))) return st;
    }
    okv_fwd_norm_rows(f, f->x, f->x, m->n_embd, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f); /* final soft cap (m->final_softcap) */
}
