/* SmolLM3: llama's decoder in which every fourth layer (3, 7, 11, ...) uses
 * no positional rotation at all ("NoPE"), a step named below.  As in
 * llama.cpp the period is fixed (4), not read from the file.  Rotation is
 * llama's (adjacent pairs); the output is tied to the embeddings; Q/K/V/O
 * biases are used when the file has them. */
#include "core/error.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

enum { NO_ROPE_EVERY = 4 };

static okv_status smollm3_forward(okv_fwd *f);

okv_status okv_smollm3_load(okv_model *m, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_rope_scaling(m, err))) return st;
    /* SmolLM3: layer il is not rotated when (il + 1) is a multiple of 4 (a
     * rope base of 0 makes okv_fwd_rope leave it alone) */
    for (int32_t il = 0; il < m->n_layer; il++)
        if ((il + 1) % NO_ROPE_EVERY == 0) m->layer[il].rope_base = 0.0f;
    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err)) ||
            (st = okv_model_bind_ffn(m, il, err)))
            return st;
        if ((st = okv_model_bind_attn_biases(m, il, true, true, err))) return st; /* those the file has */
    }
    m->forward = smollm3_forward;
    return OKV_OK;
}

static okv_status smollm3_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        /* biases when the file has them (none in SmolLM3's own); adjacent-pair
         * rotation, a no-op on the NoPE layers (rope_base 0) */
        if ((st = okv_fwd_attention(f, il, (okv_attn_opts){.biases = true}))) return st;
        if ((st = okv_fwd_ffn(f, il, (okv_ffn_opts){0}))) return st; /* SwiGLU */
    }
    okv_fwd_norm_rows(f, f->x, f->x, m->n_embd, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
