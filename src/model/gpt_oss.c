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

/* YaRN (rope.scaling.type "yarn"): positions divided by the factor for the
 * low frequencies, kept for the high ones, mixed between, as ggml's rope
 * with ext_factor 1 (llama.cpp's default for YaRN files) and its beta_fast
 * 32 / beta_slow 1 unless the file says otherwise. */
static okv_status read_yarn(okv_model *m, okv_error *err) {
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch_name);
    const char *type = "none";
    size_t len = 4;
    if (okv_gguf_find_key(m->file, key) >= 0 && okv_gguf_get_str(m->file, key, &type, &len, err))
        return okv_fail(err, OKV_ERR_FORMAT, "model: '%s' is not a string", key);
    if (len == 4 && memcmp(type, "none", 4) == 0) return OKV_OK;
    if (!(len == 4 && memcmp(type, "yarn", 4) == 0))
        return okv_fail(err, OKV_ERR_UNSUPPORTED, "model: %s rope scaling type '%.*s' is not supported (yarn, none)",
                        m->arch_name, (int)len, type);
    float factor = 1.0f;
    uint32_t orig = (uint32_t)m->n_ctx_train;
    okv_status st;
    if ((st = okv_model_positive(m, "rope.scaling.factor", &factor, err))) return st;
    if ((st = okv_model_u32(m, "rope.scaling.original_context_length", &orig, false, err))) return st;
    if (orig < 1 || orig > (1u << 30))
        return okv_fail(err, OKV_ERR_FORMAT, "model: %s.rope.scaling.original_context_length = %u is out of range",
                        m->arch_name, orig);
    okv_model_yarn *y = &m->yarn;
    *y = (okv_model_yarn){.ext_factor = 1.0f, .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f,
                          .orig_ctx = (int32_t)orig};
    if ((st = okv_model_positive(m, "rope.scaling.yarn_beta_fast", &y->beta_fast, err))) return st;
    if ((st = okv_model_positive(m, "rope.scaling.yarn_beta_slow", &y->beta_slow, err))) return st;
    for (int32_t i = 0; i < m->n_layer; i++) m->layer[i].rope_pos_scale = 1.0f / factor;
    return OKV_OK;
}

static okv_status bind_bias(okv_model *m, okv_weight *w, int32_t il, const char *name, int64_t n, okv_error *err) {
    char full[96];
    snprintf(full, sizeof full, "blk.%d.%s", (int)il, name);
    return okv_model_bind(m, w, full, n, 0, false, err);
}

okv_status okv_gpt_oss_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_windows(m, 2, false, err))) return st;
    if ((st = read_yarn(m, err))) return st;
    if ((st = okv_model_read_moe(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_params *p = &m->layer[il];
        okv_layer_weights *w = &m->w[il];
        p->attn_scale = 1.0f / sqrtf((float)p->n_rot); /* llama.cpp scales by n_rot */
        const int64_t nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->attn_post_norm, "post_attention_norm", m->n_embd, 0},
            {&w->attn_sinks, "attn_sinks", p->n_head, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err))) return st;
        if ((st = bind_bias(m, &w->bq, il, "attn_q.bias", nq, err)) ||
            (st = bind_bias(m, &w->bk, il, "attn_k.bias", nkv, err)) ||
            (st = bind_bias(m, &w->bv, il, "attn_v.bias", nkv, err)) ||
            (st = bind_bias(m, &w->bo, il, "attn_output.bias", m->n_embd, err)))
            return st;
        if ((st = okv_model_bind_moe(m, il, true, err))) return st;
    }
    m->forward = gpt_oss_forward;
    return OKV_OK;
}

static okv_status gpt_oss_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        const okv_layer_weights *w = &m->w[il];
        const int64_t nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;

        /* attention: biased projections, YaRN NEOX RoPE, sinks (okv_fwd_attend
         * passes w->attn_sinks), biased output */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
        if ((st = okv_fwd_qkv(f, il, NULL, NULL))) return st;
        okv_fwd_add_bias(f->q, &w->bq, n, nq);
        okv_fwd_add_bias(f->k, &w->bk, n, nkv);
        okv_fwd_add_bias(f->v, &w->bv, n, nkv);
        okv_fwd_rope(f, p, true);
        if ((st = okv_fwd_attend(f, il, p))) return st;
        if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
        okv_fwd_add_bias(f->xb2, &w->bo, n, E);
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);

        /* mixture of experts, normed by post_attention_norm */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_post_norm, m->norm_eps);
        if ((st = okv_fwd_moe(f, il, OKV_MOE_TOPK_SOFTMAX, OKV_MOE_SWIGLU_OAI))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);
    }
    okv_fwd_norm_rows(f, f->x, f->x, E, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
