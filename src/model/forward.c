/* Pieces of the forward pass that every architecture shares. */
#include <string.h>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/model_impl.h"

okv_status okv_fwd_matmul(okv_fwd *f, const okv_weight *w, const float *x, int32_t n, float *y) {
    return okv_matmul_with(f->m->isa, f->pool, w->type, w->data, w->ne1, w->ne0, x, n, y, f->mm_scratch, f->err);
}

okv_status okv_fwd_matmuls(okv_fwd *f, const float *x, int32_t n, int count, const okv_weight *const *ws,
                           float *const *ys) {
    okv_mm_op ops[OKV_MM_MAX_OPS];
    if (count < 1 || count > OKV_MM_MAX_OPS)
        return okv_fail(f->err, OKV_ERR_INVALID, "forward: %d products in a group", count);
    for (int i = 0; i < count; i++) {
        if (ws[i]->ne0 != ws[0]->ne0)
            return okv_fail(f->err, OKV_ERR_INVALID, "forward: grouped products differ in width");
        ops[i] = (okv_mm_op){.wtype = ws[i]->type, .w = ws[i]->data, .rows = ws[i]->ne1, .y = ys[i]};
    }
    return okv_matmul_multi_with(f->m->isa, f->pool, ops, count, ws[0]->ne0, x, n, f->mm_scratch, f->err);
}

okv_status okv_fwd_matmul_each(okv_fwd *f, const float *x, int count, const okv_weight *const *ws,
                               float *const *ys) {
    okv_mm_op ops[OKV_MM_MAX_OPS];
    if (count < 1 || count > OKV_MM_MAX_OPS)
        return okv_fail(f->err, OKV_ERR_INVALID, "forward: %d products in a group", count);
    for (int i = 0; i < count; i++) {
        if (ws[i]->ne0 != ws[0]->ne0)
            return okv_fail(f->err, OKV_ERR_INVALID, "forward: grouped products differ in width");
        ops[i] = (okv_mm_op){.wtype = ws[i]->type, .w = ws[i]->data, .rows = ws[i]->ne1, .y = ys[i]};
    }
    return okv_matmul_each_with(f->m->isa, f->pool, ops, count, ws[0]->ne0, x, f->mm_scratch, f->err);
}

okv_status okv_fwd_qkv(okv_fwd *f, int32_t il, const okv_weight *extra, float *extra_y) {
    const okv_layer_params *p = &f->m->layer[il];
    const okv_layer_weights *w = &f->m->w[il];
    okv_status st;
    if (p->kv_from && !w->wqkv.data) { /* it reads its donor's K/V */
        const okv_weight *ws[] = {&w->wq, extra};
        float *const ys[] = {f->q, extra_y};
        return okv_fwd_matmuls(f, f->xb, f->n, extra ? 2 : 1, ws, ys);
    }
    if (!w->wqkv.data) {
        const okv_weight *ws[] = {&w->wq, &w->wk, &w->wv, extra};
        float *const ys[] = {f->q, f->k, f->v, extra_y};
        return okv_fwd_matmuls(f, f->xb, f->n, extra ? 4 : 3, ws, ys);
    }
    /* Fused rows are Q then K then V for each token: split them apart. */
    {
        const okv_weight *ws[] = {&w->wqkv, extra};
        float *const ys[] = {f->qkv, extra_y};
        if ((st = okv_fwd_matmuls(f, f->xb, f->n, extra ? 2 : 1, ws, ys))) return st;
    }
    const size_t nq = (size_t)p->n_head * p->head_dim, nkv = (size_t)p->n_head_kv * p->head_dim;
    for (int32_t t = 0; t < f->n; t++) {
        const float *row = f->qkv + (size_t)t * (nq + 2 * nkv);
        memcpy(f->q + t * nq, row, nq * sizeof(float));
        memcpy(f->k + t * nkv, row + nq, nkv * sizeof(float));
        memcpy(f->v + t * nkv, row + nq + nkv, nkv * sizeof(float));
    }
    return OKV_OK;
}

void okv_fwd_rope_cs(const okv_model *m, const okv_layer_params *p, int32_t n_ctx, int32_t pos, float *cs) {
    const okv_model_yarn *my = &m->yarn;
    okv_yarn yarn = {.ext_factor = my->ext_factor, .attn_factor = my->attn_factor};
    if (my->ext_factor != 0.0f)
        okv_yarn_corr_dims(p->n_rot, my->orig_ctx, p->rope_base, my->beta_fast, my->beta_slow, yarn.corr_dims);
    /* LongRoPE (phi3) picks its divisors by the context, as llama.cpp
     * does: the long ones when the sequence may grow past the context the
     * short ones were trained for. */
    const bool long_ctx = m->rope_long && n_ctx > m->n_ctx_orig;
    const okv_rope rope = {.n_rot = p->n_rot, .freq_base = p->rope_base, .freq_scale = p->rope_pos_scale,
                           .freq_factors = long_ctx ? m->rope_long : m->rope_freqs,
                           .yarn = my->ext_factor != 0.0f ? &yarn : NULL};
    okv_rope_cache(&rope, pos, cs);
    /* ggml scales cos and sin by the attention factor (rope.scaling.attn_factor) */
    if (m->rope_attn_factor != 1.0f) okv_scale(cs, cs, m->rope_attn_factor, p->n_rot);
}

void okv_fwd_rope(okv_fwd *f, const okv_layer_params *p, bool neox) {
    float cs[512];
    if (p->rope_base == 0.0f) return;
    for (int32_t i = 0; i < f->n_seg; i++) {
        const okv_fwd_seg *s = &f->seg[i];
        for (int32_t t = s->row0; t < s->row0 + s->n_rows; t++) {
            okv_fwd_rope_cs(f->m, p, s->n_ctx, f->pos[t], cs);
            float *q = f->q + (size_t)t * p->n_head * p->head_dim;
            float *k = f->k + (size_t)t * p->n_head_kv * p->head_dim;
            if (neox) {
                okv_rope_neox(q, p->n_head, p->head_dim, p->n_rot, cs);
                okv_rope_neox(k, p->n_head_kv, p->head_dim, p->n_rot, cs);
            } else {
                okv_rope_normal(q, p->n_head, p->head_dim, p->n_rot, cs);
                okv_rope_normal(k, p->n_head_kv, p->head_dim, p->n_rot, cs);
            }
        }
    }
}

/* The row-wise and element-wise steps of a step of at least PAR_TOKENS
 * tokens are spread over the pool (one token's stay on the caller's thread,
 * where waking the workers costs more than the work): per row (rmsnorm) or
 * per element (the GLUs, whose vector kernels give every element the same
 * bits wherever a chunk starts: test_ops), so any split gives the same
 * bits.  On one thread they took 6 % of a Gemma-3-1B-shaped prefill
 * (rmsnorm 2.2 %, the GEGLU 3.5 %: perf, Zen 5, 2 threads). */
enum { PAR_TOKENS = 8 };

typedef struct norm_job {
    float *y;
    const float *x, *g;
    int64_t width, rows;
    float eps;
} norm_job;

static void norm_job_fn(void *arg, int32_t ith, int32_t nth) {
    const norm_job *j = arg;
    for (int64_t t = j->rows * ith / nth; t < j->rows * (ith + 1) / nth; t++)
        okv_rmsnorm(j->y + (size_t)t * j->width, j->x + (size_t)t * j->width, j->width, j->g, j->eps);
}

void okv_fwd_norm_rows(okv_fwd *f, float *y, const float *x, int64_t width, const okv_weight *gain, float eps) {
    norm_job j = {.y = y, .x = x, .g = gain && gain->data ? gain->data : NULL, .width = width, .rows = f->n, .eps = eps};
    if (f->n >= PAR_TOKENS) okv_parallel(f->pool, norm_job_fn, &j);
    else norm_job_fn(&j, 0, 1);
}

typedef struct glu_job {
    float *y;
    const float *gate, *up;
    int64_t n;
    const okv_f16 *gelu_table; /* GELU (llama.cpp's table), else SiLU */
} glu_job;

static void glu_job_fn(void *arg, int32_t ith, int32_t nth) {
    const glu_job *j = arg;
    const int64_t a = j->n * ith / nth, b = j->n * (ith + 1) / nth;
    if (j->gelu_table) okv_geglu_ggml(j->y + a, j->gate + a, j->up + a, b - a, j->gelu_table);
    else okv_swiglu(j->y + a, j->gate + a, j->up + a, b - a);
}

void okv_fwd_glu(okv_fwd *f, float *y, const float *gate, const float *up, int64_t n, const okv_f16 *gelu_table) {
    glu_job j = {.y = y, .gate = gate, .up = up, .n = n, .gelu_table = gelu_table};
    if (f->n >= PAR_TOKENS) okv_parallel(f->pool, glu_job_fn, &j);
    else glu_job_fn(&j, 0, 1);
}

okv_status okv_fwd_gate_up(okv_fwd *f, const okv_layer_weights *w) {
    const okv_weight *ws[] = {&w->ffn_gate, &w->ffn_up};
    float *const ys[] = {f->hb, f->hb2};
    return okv_fwd_matmuls(f, f->xb, f->n, 2, ws, ys);
}

void okv_fwd_embed(okv_fwd *f) {
    const okv_model *m = f->m;
    const size_t row_bytes = okv_ggml_row_size(m->tok_embd.type, m->n_embd);
    for (int32_t t = 0; t < f->n; t++) {
        float *x = f->x + (size_t)t * m->n_embd;
        okv_dequantize_row(m->tok_embd.type, (const char *)m->tok_embd.data + (size_t)f->tokens[t] * row_bytes, x,
                           m->n_embd);
        if (m->embd_scale != 1.0f) okv_scale(x, x, m->embd_scale, m->n_embd);
    }
}

okv_status okv_fwd_attend(okv_fwd *f, int32_t il, const okv_layer_params *p) {
    const size_t nq = (size_t)p->n_head * p->head_dim, nkv = (size_t)p->n_head_kv * p->head_dim;
    for (int32_t i = 0; i < f->n_seg; i++) {
        const okv_fwd_seg *s = &f->seg[i];
        const size_t r = (size_t)s->row0;
        const bool own = p->kv_from == 0; /* a sharer passes no K/V */
        /* gpt-oss's sinks; else NULL */
        const okv_attend_opts opts = {.scale = p->attn_scale, .softcap = p->attn_softcap,
                                      .sinks = f->m->w[il].attn_sinks.data};
        okv_status st = okv_update_and_attend_opts(s->step, il, f->q + r * nq, p->n_head, own ? f->k + r * nkv : NULL,
                                                   own ? f->v + r * nkv : NULL, OKV_F32, &opts, f->att + r * nq,
                                                   f->err);
        if (st) return st;
    }
    return OKV_OK;
}

/* Final scaling and soft-capping of rows of logits. */
static void finish_logits(const okv_model *m, float *logits, int32_t rows) {
    const int64_t n = (int64_t)rows * m->n_vocab;
    if (m->logit_scale != 1.0f) okv_scale(logits, logits, m->logit_scale, n);
    if (m->final_softcap > 0.0f) okv_softcap(logits, logits, n, m->final_softcap);
}

okv_status okv_fwd_head(okv_fwd *f) {
    const okv_model *m = f->m;
    const size_t E = (size_t)m->n_embd, V = (size_t)m->n_vocab;
    okv_status st;
    /* Sequences that want every row: straight into their buffer. */
    for (int32_t i = 0; i < f->n_seg; i++) {
        const okv_fwd_seg *s = &f->seg[i];
        if (!s->logits || !s->all_logits) continue;
        if ((st = okv_fwd_matmul(f, &m->output, f->x + (size_t)s->row0 * E, s->n_rows, s->logits))) return st;
        finish_logits(m, s->logits, s->n_rows);
    }
    /* Last rows: gathered, so the output weights are read once per
     * head_rows sequences rather than once per sequence (the product of a
     * row does not depend on its neighbours). */
    for (int32_t i = 0; i < f->n_seg;) {
        int32_t took[64], k = 0;
        for (; i < f->n_seg && k < f->head_rows && k < 64; i++) {
            const okv_fwd_seg *s = &f->seg[i];
            if (!s->logits || s->all_logits) continue;
            memcpy(f->head_x + (size_t)k * E, f->x + (size_t)(s->row0 + s->n_rows - 1) * E, E * sizeof(float));
            took[k++] = i;
        }
        if (k == 0) continue;
        if ((st = okv_fwd_matmul(f, &m->output, f->head_x, k, f->head_y))) return st;
        finish_logits(m, f->head_y, k);
        for (int32_t j = 0; j < k; j++) memcpy(f->seg[took[j]].logits, f->head_y + (size_t)j * V, V * sizeof(float));
    }
    return OKV_OK;
}

void okv_fwd_add_bias(float *y, const okv_weight *bias, int32_t n, int64_t width) {
    if (!bias || !bias->data) return;
    const float *b = bias->data;
    for (int32_t t = 0; t < n; t++) okv_add(y + (size_t)t * width, y + (size_t)t * width, b, width);
}

void okv_fwd_qk_norm(okv_fwd *f, const okv_layer_params *p, const okv_weight *qn, const okv_weight *kn, float eps) {
    for (int32_t t = 0; t < f->n; t++) {
        float *q = f->q + (size_t)t * p->n_head * p->head_dim;
        float *k = f->k + (size_t)t * p->n_head_kv * p->head_dim;
        okv_rmsnorm_heads(q, q, p->n_head, p->head_dim, qn->data, eps);
        okv_rmsnorm_heads(k, k, p->n_head_kv, p->head_dim, kn->data, eps);
    }
}

okv_status okv_fwd_attention(okv_fwd *f, int32_t il, okv_attn_opts o) {
    const okv_model *m = f->m;
    const okv_layer_params *p = &m->layer[il];
    const okv_layer_weights *w = &m->w[il];
    const int32_t n = f->n, E = m->n_embd;
    const int64_t nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;
    okv_status st;
    okv_fwd_norm_rows(f, f->xb, f->x, E, &w->attn_norm, m->norm_eps);
    if ((st = okv_fwd_qkv(f, il, NULL, NULL))) return st;
    if (o.biases) {
        okv_fwd_add_bias(f->q, &w->bq, n, nq);
        okv_fwd_add_bias(f->k, &w->bk, n, nkv);
        okv_fwd_add_bias(f->v, &w->bv, n, nkv);
    }
    if (o.qk_norm) okv_fwd_qk_norm(f, p, &w->attn_q_norm, &w->attn_k_norm, m->norm_eps);
    okv_fwd_rope(f, p, o.neox); /* a layer of rope_base 0 is not rotated */
    /* soft cap (p->attn_softcap) and sinks (w->attn_sinks) are okv_fwd_attend's */
    if ((st = okv_fwd_attend(f, il, p))) return st;
    if ((st = okv_fwd_matmul(f, &w->wo, f->att, n, f->xb2))) return st;
    if (o.biases) okv_fwd_add_bias(f->xb2, &w->bo, n, E);
    if (o.post_norm) okv_fwd_norm_rows(f, f->xb2, f->xb2, E, &w->attn_post_norm, m->norm_eps);
    okv_add(f->x, f->x, f->xb2, (int64_t)n * E);
    return OKV_OK;
}

okv_status okv_fwd_ffn(okv_fwd *f, int32_t il, okv_ffn_opts o) {
    const okv_model *m = f->m;
    const okv_layer_weights *w = &m->w[il];
    const int32_t n = f->n, E = m->n_embd;
    okv_status st;
    okv_fwd_norm_rows(f, f->xb, f->x, E, &w->ffn_norm, m->norm_eps);
    if ((st = okv_fwd_gate_up(f, w))) return st;
    okv_fwd_glu(f, f->hb, f->hb, f->hb2, (int64_t)n * m->n_ff, o.gelu ? m->gelu_table : NULL);
    if ((st = okv_fwd_matmul(f, &w->ffn_down, f->hb, n, f->xb2))) return st;
    if (o.post_norm)
        okv_fwd_norm_rows(f, f->xb2, f->xb2, E, &w->ffn_post_norm, o.post_norm_eps > 0 ? o.post_norm_eps : m->norm_eps);
    okv_add(f->x, f->x, f->xb2, (int64_t)n * E);
    return OKV_OK;
}
