/* Gemma 3: embeddings scaled by sqrt(n_embd); per-head RMSNorm of Q and K;
 * NEOX RoPE with one base for global and another for sliding layers; norms
 * after attention and after the feed-forward as well as before; a GELU
 * feed-forward; tied output; optional final soft-capping.  Sliding layers
 * follow sliding_window_pattern (default: every 6th layer is global). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

static okv_status gemma3_forward(okv_fwd *f);

okv_status okv_gemma3_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_windows(m, 6, false, err))) return st;
    float base_swa = 10000.0f;
    if ((st = okv_model_positive(m, "rope.freq_base_swa", &base_swa, err))) return st;
    if ((st = okv_model_read_rope_scaling(m, err))) return st;
    /* The 27B shape (62 layers) scales queries by 1/sqrt(n_embd / n_head). */
    const bool big = m->n_layer == 62;
    for (int32_t i = 0; i < m->n_layer; i++) {
        okv_layer_params *p = &m->layer[i];
        if (p->window > 0) { /* linear scaling: global layers only */
            p->rope_base = base_swa;
            p->rope_pos_scale = 1.0f;
        }
        if (big) p->attn_scale = 1.0f / sqrtf((float)m->n_embd / (float)p->n_head);
    }
    if (okv_model_has(m, "final_logit_softcapping") &&
        (st = okv_model_positive(m, "final_logit_softcapping", &m->final_softcap, err)))
        return st;
    m->embd_scale = sqrtf((float)m->n_embd);
    if ((st = okv_model_gelu_table(m, err))) return st;

    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const int32_t hd = m->layer[il].head_dim;
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_q_norm, "attn_q_norm", hd, 0},
            {&w->attn_k_norm, "attn_k_norm", hd, 0},
            {&w->attn_post_norm, "post_attention_norm", m->n_embd, 0},
            {&w->ffn_post_norm, "post_ffw_norm", m->n_embd, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err)) ||
            (st = okv_model_bind_ffn(m, il, err)))
            return st;
    }
    m->forward = gemma3_forward;
    return OKV_OK;
}

static okv_status gemma3_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    okv_status st;
    okv_fwd_embed(f); /* scaled by sqrt(n_embd) */
    for (int32_t il = 0; il < m->n_layer; il++) {
        /* attention with Q/K norms, normed before and after */
        if ((st = okv_fwd_attention(f, il, (okv_attn_opts){.qk_norm = true, .neox = true, .post_norm = true})))
            return st;
        /* GELU feed-forward, normed before and after */
        if ((st = okv_fwd_ffn(f, il, (okv_ffn_opts){.gelu = true, .post_norm = true}))) return st;
    }
    okv_fwd_norm_rows(f, f->x, f->x, m->n_embd, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
