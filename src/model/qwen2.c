/* Qwen 2 / Qwen 2.5 (and DeepSeek-R1-Distill-Qwen): llama's decoder with
 * two differences, each a named step below: Q, K and V have biases, and
 * RoPE rotates NEOX pairs (dimension i with i + n_rot/2) rather than
 * adjacent ones.  Small models tie the output to the embeddings (no
 * output.weight; model.c handles that for every architecture). */
#include "core/error.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

static okv_status qwen2_forward(okv_fwd *f);

okv_status okv_qwen2_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_rope_scaling(m, err))) return st;
    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err)) ||
            (st = okv_model_bind_ffn(m, il, err)))
            return st;
        /* Qwen's converter always writes the three biases: one missing is a damaged file. */
        if ((st = okv_model_bind_attn_biases(m, il, false, false, err))) return st;
    }
    m->forward = qwen2_forward;
    return OKV_OK;
}

static okv_status qwen2_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        /* Qwen: the Q, K and V biases; NEOX rotation */
        if ((st = okv_fwd_attention(f, il, (okv_attn_opts){.biases = true, .neox = true}))) return st;
        if ((st = okv_fwd_ffn(f, il, (okv_ffn_opts){0}))) return st; /* SwiGLU */
    }
    okv_fwd_norm_rows(f, f->x, f->x, m->n_embd, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
