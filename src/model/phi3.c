/* Phi-3, Phi-3.5, Phi-4: llama's decoder with, as named steps below, Q, K
 * and V in one fused attn_qkv matrix (rows Q, then K, then V), the
 * feed-forward's gate and up in one fused ffn_up of 2 n_ff rows (gate
 * first), NEOX RoPE, and LongRoPE on the 128k-context models: per-frequency
 * divisors rope_factors_short / rope_factors_long, the long ones when a
 * sequence's context exceeds rope.scaling.original_context_length (as
 * llama.cpp chooses, by the context, not the position), and cos and sin
 * multiplied by rope.scaling.attn_factor.  Sliding windows, which some
 * Phi-3 files declare, are ignored as llama.cpp ignores them. */
#include "core/error.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/model_impl.h"

static okv_status phi3_forward(okv_fwd *f);

okv_status okv_phi3_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_rope_scaling(m, err))) return st;

    /* Phi-3: LongRoPE's divisors and attention factor, when the file has them */
    const int32_t n_rot = m->layer[0].n_rot;
    okv_weight fs, fl;
    if ((st = okv_model_bind(m, &fs, "rope_factors_short.weight", n_rot / 2, 0, true, err)) ||
        (st = okv_model_bind(m, &fl, "rope_factors_long.weight", n_rot / 2, 0, true, err)))
        return st;
    m->rope_freqs = fs.data;
    m->rope_long = fl.data;
    uint32_t orig = (uint32_t)m->n_ctx_train;
    if ((st = okv_model_u32(m, "rope.scaling.original_context_length", &orig, false, err))) return st;
    m->n_ctx_orig = orig > (1u << 30) ? 1 << 30 : (int32_t)orig;
    if ((st = okv_model_positive(m, "rope.scaling.attn_factor", &m->rope_attn_factor, err))) return st;

    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        okv_weight up2;
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->ffn_norm, "ffn_norm", m->n_embd, 0},
            {&up2, "ffn_up", m->n_embd, 2 * (int64_t)m->n_ff},
            {&w->ffn_down, "ffn_down", m->n_ff, m->n_embd},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err))) return st;
        /* Phi-3: the fused ffn_up is gate (rows 0 .. n_ff-1) then up (the
         * next n_ff rows); two views into it multiply as separate matrices */
        const size_t half = okv_ggml_row_size(up2.type, up2.ne0) * (size_t)m->n_ff;
        w->ffn_gate = (okv_weight){.type = up2.type, .data = up2.data, .ne0 = up2.ne0, .ne1 = m->n_ff};
        w->ffn_up = (okv_weight){.type = up2.type, .data = (const char *)up2.data + half, .ne0 = up2.ne0,
                                 .ne1 = m->n_ff};
    }
    m->forward = phi3_forward;
    return OKV_OK;
}

static okv_status phi3_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        const okv_layer_weights *w = &m->w[il];

        /* attention: fused QKV (split by okv_fwd_qkv), NEOX rotation with
         * LongRoPE's divisors and factor (okv_fwd_rope reads them) */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
        if ((st = okv_fwd_qkv(f, il, NULL, NULL))) return st;
        okv_fwd_rope(f, p, true);
        if ((st = okv_fwd_attend(f, il, p))) return st;
        if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);

        /* SwiGLU feed-forward from the two halves of the fused ffn_up */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->ffn_norm, m->norm_eps);
        if ((st = okv_fwd_gate_up(f, w))) return st;
        okv_swiglu(f->hb, f->hb, f->hb2, (int64_t)n * m->n_ff);
        if ((st = okv_fwd_matmul(f, &w->ffn_down, f->hb, n, f->xb2))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);
    }
    okv_fwd_norm_rows(f, f->x, f->x, E, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
