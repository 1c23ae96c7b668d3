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
        /* Qwen's converter always writes the three biases: one missing is a damaged file. */
        if ((st = okv_model_bind_bias(m, &w->bq, il, "attn_q", nq, false, err)) ||
            (st = okv_model_bind_bias(m, &w->bk, il, "attn_k", nkv, false, err)) ||
            (st = okv_model_bind_bias(m, &w->bv, il, "attn_v", nkv, false, err)))
            return st;
    }
    m->forward = qwen2_forward;
    return OKV_OK;
}

static okv_status qwen2_forward(okv_fwd *f) {
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
        /* Qwen: the Q, K and V biases */
        okv_fwd_add_bias(f->q, &w->bq, n, nq);
        okv_fwd_add_bias(f->k, &w->bk, n, nkv);
        okv_fwd_add_bias(f->v, &w->bv, n, nkv);
        /* Qwen: NEOX rotation */
        okv_fwd_rope(f, p, true);
        if ((st = okv_fwd_attend(f, il, p))) return st;
        if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
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
