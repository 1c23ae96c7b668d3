/* Muse Glimmer: 3 sliding layers to 1 global.  Embeddings are RMS-normed
 * (no gain); attention output is gated by sigmoid(attn_gate . x); Q and K
 * are RMS-normed per head; sliding layers rotate adjacent pairs, global
 * layers use no positional rotation at all; norms (eps 1e-8) after attention
 * and feed-forward; logits are scaled, then soft-capped (30 when the file
 * says nothing, as llama.cpp does). */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

static const float POST_NORM_EPS = 1e-8f;

static okv_status muse_glimmer_forward(okv_fwd *f);

/* The file may name the post norms either way. */
static okv_status bind_either(okv_model *m, okv_weight *w, int32_t il, const char *a, const char *b,
                              okv_error *err) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.weight", (int)il, a);
    if (okv_gguf_find_tensor(m->file, name) < 0) snprintf(name, sizeof name, "blk.%d.%s.weight", (int)il, b);
    return okv_model_bind(m, w, name, m->n_embd, 0, false, err);
}

okv_status okv_muse_glimmer_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_windows(m, 0, true, err))) return st;
    /* as llama.cpp, for every architecture: the sliding layers rotate */
    if ((st = okv_model_read_rope_scaling(m, err))) return st;
    float base = m->layer[0].rope_base, base_swa;
    base_swa = base;
    if ((st = okv_model_positive(m, "rope.freq_base_swa", &base_swa, err))) return st;
    for (int32_t i = 0; i < m->n_layer; i++) m->layer[i].rope_base = m->layer[i].window > 0 ? base_swa : 0.0f;
    if ((st = okv_model_f32(m, "logit_scale", &m->logit_scale, true, err))) return st;
    m->final_softcap = 30.0f;
    if ((st = okv_model_positive(m, "final_logit_softcapping", &m->final_softcap, err))) return st;

    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const okv_layer_params *p = &m->layer[il];
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_gate, "attn_gate", m->n_embd, (int64_t)p->n_head * p->head_dim},
            {&w->attn_q_norm, "attn_q_norm", p->head_dim, 0},
            {&w->attn_k_norm, "attn_k_norm", p->head_dim, 0},
        };
        if ((st = bind_either(m, &w->attn_post_norm, il, "attn_post_norm", "post_attention_norm", err))) return st;
        if ((st = bind_either(m, &w->ffn_post_norm, il, "ffn_post_norm", "post_ffw_norm", err))) return st;
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err)) ||
            (st = okv_model_bind_ffn(m, il, err)))
            return st;
    }
    m->forward = muse_glimmer_forward;
    return OKV_OK;
}

static okv_status muse_glimmer_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_embed(f);
    okv_fwd_norm_rows(f, f->x, f->x, E, NULL, m->norm_eps);
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        const okv_layer_weights *w = &m->w[il];
        const int64_t nq = (int64_t)p->n_head * p->head_dim;

        /* gated attention */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
        if ((st = okv_fwd_qkv(f, il, &w->attn_gate, f->gate))) return st;
        okv_fwd_qk_norm(f, p, &w->attn_q_norm, &w->attn_k_norm, m->norm_eps);
        okv_fwd_rope(f, p, false); /* no-op on global layers (rope_base 0) */
        if ((st = okv_fwd_attend(f, il, p))) return st;
        okv_sigmoid(f->gate, f->gate, n * nq);
        okv_mul(f->att, f->att, f->gate, n * nq);
        if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
        okv_fwd_norm_rows(f, f->xb2, f->xb2, E, &w->attn_post_norm, POST_NORM_EPS);
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);

        /* SwiGLU feed-forward, post-normed */
        if ((st = okv_fwd_ffn(f, il, (okv_ffn_opts){.post_norm = true, .post_norm_eps = POST_NORM_EPS}))) return st;
    }
    okv_fwd_norm_rows(f, f->x, f->x, E, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
