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
    float base_swa = 10000.0f, scale = 1.0f;
    if ((st = okv_model_positive(m, "rope.freq_base_swa", &base_swa, err))) return st;
    const char *scale_key = okv_model_has(m, "rope.scaling.factor") ? "rope.scaling.factor" : "rope.scale_linear";
    if ((st = okv_model_positive(m, scale_key, &scale, err))) return st;
    /* The 27B shape (62 layers) scales queries by 1/sqrt(n_embd / n_head). */
    const bool big = m->n_layer == 62;
    for (int32_t i = 0; i < m->n_layer; i++) {
        okv_layer_params *p = &m->layer[i];
        if (p->window > 0) {
            p->rope_base = base_swa;
        } else if (scale > 0.0f && scale != 1.0f) {
            p->rope_pos_scale = 1.0f / scale; /* linear scaling: global layers only */
        }
        if (big) p->attn_scale = 1.0f / sqrtf((float)m->n_embd / (float)p->n_head);
    }
    if (okv_model_has(m, "final_logit_softcapping") &&
        (st = okv_model_positive(m, "final_logit_softcapping", &m->final_softcap, err)))
        return st;
    m->embd_scale = sqrtf((float)m->n_embd);
    m->gelu_table = malloc(sizeof(okv_f16) * 65536);
    if (!m->gelu_table) return okv_fail(err, OKV_ERR_NOMEM, "model: out of memory for the GELU table");
    okv_gelu_table_init(m->gelu_table);

    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const int32_t hd = m->layer[il].head_dim;
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_q_norm, "attn_q_norm", hd, 0},
            {&w->attn_k_norm, "attn_k_norm", hd, 0},
            {&w->attn_post_norm, "post_attention_norm", m->n_embd, 0},
            {&w->ffn_norm, "ffn_norm", m->n_embd, 0},
            {&w->ffn_gate, "ffn_gate", m->n_embd, m->n_ff},
            {&w->ffn_up, "ffn_up", m->n_embd, m->n_ff},
            {&w->ffn_down, "ffn_down", m->n_ff, m->n_embd},
            {&w->ffn_post_norm, "post_ffw_norm", m->n_embd, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err))) return st;
    }
    m->forward = gemma3_forward;
    return OKV_OK;
}

static okv_status gemma3_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        const okv_layer_weights *w = &m->w[il];

        /* attention, normed before and after */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
        if ((st = okv_fwd_qkv(f, il, NULL, NULL))) return st;
        okv_fwd_qk_norm(f, p, &w->attn_q_norm, &w->attn_k_norm, m->norm_eps);
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
    return okv_fwd_head(f);
}
