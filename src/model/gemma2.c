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
    m->gelu_table = malloc(sizeof(okv_f16) * 65536);
    if (!m->gelu_table) return okv_fail(err, OKV_ERR_NOMEM, "model: out of memory for the GELU table");
    okv_gelu_table_init(m->gelu_table);

    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_post_norm, "post_attention_norm", m->n_embd, 0},
            {&w->ffn_norm, "ffn_norm", m->n_embd, 0},
            {&w->ffn_gate, "ffn_gate", m->n_embd, m->n_ff},
            {&w->ffn_up, "ffn_up", m->n_embd, m->n_ff},
            {&w->ffn_down, "ffn_down", m->n_ff, m->n_embd},
            {&w->ffn_post_norm, "post_ffw_norm", m->n_embd, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err))) return st;
    }
    m->forward = gemma2_forward;
    return OKV_OK;
}

static okv_status gemma2_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_embed(f); /* scaled by sqrt(n_embd) */
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        const okv_layer_weights *w = &m->w[il];

        /* attention, normed before and after; the scores soft-capped in
         * okv_fwd_attend (p->attn_softcap) */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
        if ((st = okv_fwd_qkv(f, il, NULL, NULL))) return st;
        okv_fwd_rope(f, p, true);
        if ((st = okv_fwd_attend(f, il, p))) return st;
        if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
        okv_fwd_norm_rows(f, f->xb2, f->xb2, E, &w->attn_post_norm, m->norm_eps);
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);

        /* GELU feed-forward, normed before and after */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->ffn_norm, m->norm_eps);
        if ((st = okv_fwd_gate_up(f, w))) return st;
        okv_geglu_ggml(f->hb, f->hb, f->hb2, (int64_t)n * m->n_ff, m->gelu_table);
        if ((st = okv_fwd_matmul(f, &w->ffn_down, f->hb, n, f->xb2))) return st;
        okv_fwd_norm_rows(f, f->xb2, f->xb2, E, &w->ffn_post_norm, m->norm_eps);
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);
    }
    okv_fwd_norm_rows(f, f->x, f->x, E, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f); /* final soft cap (m->final_softcap) */
}
