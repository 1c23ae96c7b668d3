/* gpt-oss (OpenAI's open-weight MoE): a pre-norm decoder whose attention
 * has Q/K/V and output biases, one sink logit per head (it joins every
 * softmax denominator and attends to nothing), NEOX RoPE with YaRN scaling,
 * and a sliding window on every other layer (period 2: even layers slide,
 * as llama.cpp's set_swa_pattern(2)); post_attention_norm is the norm before
 * the feed-forward, a mixture of experts with a biased router whose top-k
 * logits are softmaxed among themselves, biased experts and SwiGLU-OAI. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

static okv_status gpt_oss_forward(okv_fwd *f);

okv_status okv_gpt_oss_load(okv_model *m, okv_error *err) {
    okv_status st;
    /* The window is required, as in llama.cpp's gpt-oss (its gemma3 reads a
     * missing one as none): without it every layer would run globally.  The
     * layout may be left to the default period. */
    uint32_t window;
    if ((st = okv_model_u32(m, "attention.sliding_window", &window, true, err))) return st;
    if ((st = okv_model_read_windows(m, 2, false, err))) return st;
    if ((st = okv_model_read_rope_scaling(m, err))) return st; /* YaRN, as the files say */
    if ((st = okv_model_read_moe(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_params *p = &m->layer[il];
        okv_layer_weights *w = &m->w[il];
        p->attn_scale = 1.0f / sqrtf((float)p->n_rot); /* llama.cpp scales by n_rot */
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_post_norm, "post_attention_norm", m->n_embd, 0},
            {&w->attn_sinks, "attn_sinks", p->n_head, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err))) return st;
        if ((st = okv_model_bind_attn_biases(m, il, true, false, err))) return st;
        if ((st = okv_model_bind_moe(m, il, true, err))) return st;
    }
    m->forward = gpt_oss_forward;
    return OKV_OK;
}

static okv_status gpt_oss_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        /* biased projections, YaRN NEOX RoPE, sinks (okv_fwd_attend passes
         * w->attn_sinks), biased output */
        if ((st = okv_fwd_attention(f, il, (okv_attn_opts){.biases = true, .neox = true}))) return st;

        /* mixture of experts, normed by post_attention_norm */
        okv_fwd_norm_rows(f, f->xb, f->x, m->n_embd, &m->w[il].attn_post_norm, m->norm_eps);
        if ((st = okv_fwd_moe(f, il, OKV_MOE_TOPK_SOFTMAX, OKV_MOE_SWIGLU_OAI))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)f->n * m->n_embd);
    }
    okv_fwd_norm_rows(f, f->x, f->x, m->n_embd, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
