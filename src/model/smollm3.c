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
        const okv_layer_params *p = &m->layer[il];
        const int64_t nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
            {&w->ffn_norm, "ffn_norm", m->n_embd, 0},
            {&w->ffn_gate, "ffn_gate", m->n_embd, m->n_ff},
            {&w->ffn_up, "ffn_up", m->n_embd, m->n_ff},
            {&w->ffn_down, "ffn_down", m->n_ff, m->n_embd},
        };
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err))) return st;
        if ((st = okv_model_bind_bias(m, &w->bq, il, "attn_q", nq, true, err)) ||
            (st = okv_model_bind_bias(m, &w->bk, il, "attn_k", nkv, true, err)) ||
            (st = okv_model_bind_bias(m, &w->bv, il, "attn_v", nkv, true, err)) ||
            (st = okv_model_bind_bias(m, &w->bo, il, "attn_output", m->n_embd, true, err)))
            return st;
    }
    m->forward = smollm3_forward;
    return OKV_OK;
}

static okv_status smollm3_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        const okv_layer_params *p = &m->layer[il];
        const okv_layer_weights *w = &m->w[il];
        const int64_t nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;

        /* attention */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
        if ((st = okv_fwd_qkv(f, il, NULL, NULL))) return st;
        okv_fwd_add_bias(f->q, &w->bq, n, nq); /* none in SmolLM3's own files */
        okv_fwd_add_bias(f->k, &w->bk, n, nkv);
        okv_fwd_add_bias(f->v, &w->bv, n, nkv);
        okv_fwd_rope(f, p, false); /* SmolLM3: a no-op on the NoPE layers */
        if ((st = okv_fwd_attend(f, il, p))) return st;
        if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
        okv_fwd_add_bias(f->xb2, &w->bo, n, E);
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);

        /* SwiGLU feed-forward */
        okv_fwd_norm_rows(f, f->xb, f->x, E, &w->ffn_norm, m->norm_eps);
        if ((st = okv_fwd_gate_up(f, w))) return st;
        okv_swiglu(f->hb, f->hb, f->hb2, (int64_t)n * m->n_ff);
        if ((st = okv_fwd_matmul(f, &w->ffn_down, f->hb, n, f->xb2))) return st;
        okv_add(f->x, f->x, f->xb2, (int64_t)n * E);
    }
    okv_fwd_norm_rows(f, f->x, f->x, E, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
