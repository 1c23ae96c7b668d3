/* Mixture-of-experts feed-forward (qwen3moe, gpt-oss): a router picks
 * n_expert_used of n_expert expert FFNs for each row; the row's output is
 * their weighted sum.
 *
 * Rows are grouped by expert: every expert the batch routes to multiplies
 * all of its rows at once, so its weights are read once per batch (prefill,
 * batched decode), and experts no row picked are not read at all (decode
 * costs the active parameters, not the total).  A row's product does not
 * depend on the other rows of a matrix product, and each row sums its
 * experts' outputs in its own slot order (best expert first, as ggml's
 * build_moe_ffn adds them), so a row's result is the same whatever else is
 * in the batch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/ops.h"
#include "kernels/wtype.h"
#include "model/model_impl.h"

okv_status okv_model_read_moe(okv_model *m, okv_error *err) {
    uint32_t n = 0, used = 0, ff = 0;
    okv_status st;
    if ((st = okv_model_u32(m, "expert_count", &n, true, err))) return st;
    if ((st = okv_model_u32(m, "expert_used_count", &used, true, err))) return st;
    if ((st = okv_model_u32(m, "expert_feed_forward_length", &ff, true, err))) return st;
    if (n < 1 || n > 512)
        return okv_fail(err, OKV_ERR_FORMAT, "model: %s.expert_count = %u is outside 1..512", m->arch_name, n);
    if (used < 1 || used > n)
        return okv_fail(err, OKV_ERR_FORMAT, "model: %s.expert_used_count = %u is outside 1..expert_count %u",
                        m->arch_name, used, n);
    if (ff < 1 || ff > 1u << 20)
        return okv_fail(err, OKV_ERR_FORMAT, "model: %s.expert_feed_forward_length = %u is out of range",
                        m->arch_name, ff);
    m->n_expert = (int32_t)n;
    m->n_expert_used = (int32_t)used;
    m->n_ff_exp = (int32_t)ff;
    /* Every layer of these architectures is experts, so no tensor has the
     * dense feed_forward_length's shape (read, as llama.cpp reads it) and it
     * must not size anything: a hostile value made each batch allocate
     * rows x 4M floats. */
    m->n_ff = 0;
    m->moe = calloc((size_t)m->n_layer, sizeof *m->moe);
    if (!m->moe) return okv_fail(err, OKV_ERR_NOMEM, "model: out of memory");
    return OKV_OK;
}

/* Binds blk.il.name.weight, a 3-D [ne0, ne1, n_expert] tensor of a type the
 * kernels run. */
static okv_status bind_experts(okv_model *m, okv_experts *x, int32_t il, const char *name, int64_t ne0,
                               int64_t ne1, okv_error *err) {
    char full[96];
    snprintf(full, sizeof full, "blk.%d.%s.weight", (int)il, name);
    memset(x, 0, sizeof *x);
    const int64_t i = okv_gguf_find_tensor(m->file, full);
    if (i < 0) return okv_fail(err, OKV_ERR_FORMAT, "model: tensor '%s' is missing", full);
    const okv_gguf_tensor *t = okv_gguf_tensor_at(m->file, i);
    m->used[i] = 1;
    const bool extra = t->n_dims >= 4 && t->ne[3] != 1;
    if (t->n_dims < 3 || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != m->n_expert || extra)
        return okv_fail(err, OKV_ERR_FORMAT,
                        "model: tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld, %d]", full,
                        (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 0),
                        (long long)(t->n_dims > 2 ? t->ne[2] : 0), (long long)ne0, (long long)ne1,
                        (int)m->n_expert);
    if (!okv_wtype_runnable(t->type))
        return okv_fail(err, OKV_ERR_UNSUPPORTED, "model: tensor '%s' has type %s, which offkv does not run", full,
                        okv_ggml_type_name(t->type));
    if (ne0 % okv_ggml_block_size(t->type) != 0)
        return okv_fail(err, OKV_ERR_FORMAT, "model: tensor '%s': row of %lld is not whole %s blocks", full,
                        (long long)ne0, okv_ggml_type_name(t->type));
    okv_status st = okv_model_check_align(t, err);
    if (st) return st;
    x->w = (okv_weight){.type = t->type, .data = t->data, .ne0 = ne0, .ne1 = ne1};
    x->n = m->n_expert;
    x->stride = okv_ggml_row_size(t->type, ne0) * (size_t)ne1;
    m->weight_bytes += t->n_bytes;
    return OKV_OK;
}

/* Binds blk.il.name.bias: F32 [width, n_expert] (per_expert), or a vector
 * of width (the router's). */
static okv_status bind_bias(okv_model *m, okv_weight *w, int32_t il, const char *name, int64_t width,
                            bool per_expert, okv_error *err) {
    char full[96];
    snprintf(full, sizeof full, "blk.%d.%s.bias", (int)il, name);
    okv_status st = okv_model_bind(m, w, full, width, per_expert ? m->n_expert : 0, false, err);
    if (st) return st;
    if (w->type != OKV_GGML_F32)
        return okv_fail(err, OKV_ERR_FORMAT, "model: bias '%s' has type %s, expected F32", full,
                        okv_ggml_type_name(w->type));
    return OKV_OK;
}

okv_status okv_model_bind_moe(okv_model *m, int32_t il, bool biases, okv_error *err) {
    okv_moe_weights *x = &m->moe[il];
    const int64_t E = m->n_embd, F = m->n_ff_exp;
    char name[96];
    okv_status st;
    /* A file without a router cannot route: say which tensor is missing. */
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", (int)il);
    if (okv_gguf_find_tensor(m->file, name) < 0)
        return okv_fail(err, OKV_ERR_FORMAT, "model: %s is a mixture of experts, but its router '%s' is missing",
                        m->arch_name, name);
    if ((st = okv_model_bind(m, &x->gate_inp, name, E, m->n_expert, false, err))) return st;
    if ((st = bind_experts(m, &x->gate, il, "ffn_gate_exps", E, F, err))) return st;
    if ((st = bind_experts(m, &x->up, il, "ffn_up_exps", E, F, err))) return st;
    if ((st = bind_experts(m, &x->down, il, "ffn_down_exps", F, E, err))) return st;
    if (!biases) return OKV_OK;
    if ((st = bind_bias(m, &x->gate_inp_b, il, "ffn_gate_inp", m->n_expert, false, err))) return st;
    if ((st = bind_bias(m, &x->gate_b, il, "ffn_gate_exps", F, true, err))) return st;
    if ((st = bind_bias(m, &x->up_b, il, "ffn_up_exps", F, true, err))) return st;
    return bind_bias(m, &x->down_b, il, "ffn_down_exps", E, true, err);
}

/* ggml's soft_max of one row in place: exp(x - max), summed in double, then
 * multiplied by the f32 reciprocal. */
static void softmax_row(float *x, int32_t n) {
    float mx = x[0];
    for (int32_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int32_t i = 0; i < n; i++) x[i] *= inv;
}

/* Row t's experts and weights from its router scores s (n_expert values). */
static void route_row(float *s, int32_t n_expert, int32_t k, okv_moe_gating gating, float w_scale, int32_t *ids,
                      float *w) {
    if (gating == OKV_MOE_SOFTMAX_NORM) softmax_row(s, n_expert);
    /* top k, best first; a tie goes to the lower expert */
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int32_t i = 0; i < j && !taken; i++) taken = ids[i] == e;
            if (!taken && (best < 0 || s[e] > s[best])) best = e;
        }
        ids[j] = best;
        w[j] = s[best];
    }
    if (gating == OKV_MOE_TOPK_SOFTMAX) {
        softmax_row(w, k);
    } else {
        /* renormalised to sum 1 (ggml: the sum in double, clamped below at 2^-14) */
        double sum = 0.0;
        for (int32_t j = 0; j < k; j++) sum += (double)w[j];
        float fs = (float)sum;
        if (fs < 6.103515625e-5f) fs = 6.103515625e-5f;
        for (int32_t j = 0; j < k; j++) w[j] /= fs;
    }
    if (w_scale != 0.0f && w_scale != 1.0f)
        for (int32_t j = 0; j < k; j++) w[j] *= w_scale;
}

/* The k-th largest of s minus the (k+1)-th (k < n). */
static float kth_gap(const float *s, int32_t n, int32_t k) {
    float top[2] = {-INFINITY, -INFINITY};
    for (int32_t j = 0; j <= k; j++) {
        /* the j-th largest, by counting what beats it */
        float best = -INFINITY;
        for (int32_t e = 0; e < n; e++) {
            int32_t above = 0;
            for (int32_t i = 0; i < n; i++) above += s[i] > s[e] || (s[i] == s[e] && i < e);
            if (above == j) best = s[e];
        }
        if (j >= k - 1) top[j - (k - 1)] = best;
    }
    return top[0] - top[1];
}

/* Expert e's matrix of a 3-D tensor. */
static okv_weight expert(const okv_experts *x, int32_t e) {
    okv_weight w = x->w;
    w.data = (const char *)x->w.data + (size_t)e * x->stride;
    return w;
}

/* Expert e's column of a [width][n_expert] bias, or NULL. */
static const float *expert_bias(const okv_weight *b, int32_t e) {
    return b->data ? (const float *)b->data + (size_t)e * b->ne0 : NULL;
}

static void add_rows(float *y, const float *b, int32_t n, int64_t width) {
    if (!b) return;
    for (int32_t t = 0; t < n; t++) okv_add(y + (size_t)t * width, y + (size_t)t * width, b, width);
}

/* ggml's swiglu_oai with alpha 1.702 and limit 7 (gpt-oss's constants). */
static void swiglu_oai(float *y, const float *g, const float *u, int64_t n) {
    const float alpha = 1.702f, limit = 7.0f;
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i] < limit ? g[i] : limit;
        const float up = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        y[i] = x / (1.0f + expf(alpha * -x)) * (up + 1.0f);
    }
}

/* Gate and up of f->hb / f->hb2 rows (n of F each) to the activation, in place in f->hb. */
static void activate(okv_fwd *f, const okv_moe_weights *x, int32_t e, okv_moe_act act, float *g, float *u, int32_t n) {
    const int32_t F = f->m->n_ff_exp;
    add_rows(g, expert_bias(&x->gate_b, e), n, F);
    add_rows(u, expert_bias(&x->up_b, e), n, F);
    if (act == OKV_MOE_SWIGLU_OAI) swiglu_oai(g, g, u, (int64_t)n * F);
    else okv_swiglu(g, g, u, (int64_t)n * F);
}

/* The one row of a decode step.  Every chosen expert's gate and up take
 * the same input: one quantization of it and one fork-join for all of them
 * (OKV_MM_MAX_OPS / 2 experts a call); the down products, each of its own
 * expert's activation, take one more.  Three fork-joins a layer with the
 * router's, where one per product cost a few percent of a token.  Each
 * product of a row is the same whatever else is computed with it, so this
 * gives the bits of the grouped path. */
static okv_status one_row(okv_fwd *f, const okv_moe_weights *x, okv_moe_act act) {
    enum { PAIRS = OKV_MM_MAX_OPS / 2 };
    const int32_t K = f->m->n_expert_used, F = f->m->n_ff_exp;
    const size_t E = (size_t)f->m->n_embd;
    okv_weight w[OKV_MM_MAX_OPS];
    const okv_weight *ws[OKV_MM_MAX_OPS];
    float *ys[OKV_MM_MAX_OPS];
    okv_status st;
    for (int32_t j = 0; j < K; j += PAIRS) {
        const int32_t c = K - j < PAIRS ? K - j : PAIRS;
        for (int32_t i = 0; i < c; i++) {
            const int32_t e = f->moe_ids[j + i];
            w[2 * i] = expert(&x->gate, e);
            w[2 * i + 1] = expert(&x->up, e);
            ys[2 * i] = f->hb + (size_t)(j + i) * F;
            ys[2 * i + 1] = f->hb2 + (size_t)(j + i) * F;
        }
        for (int32_t i = 0; i < 2 * c; i++) ws[i] = &w[i];
        if ((st = okv_fwd_matmuls(f, f->xb, 1, 2 * c, ws, ys))) return st;
    }
    for (int32_t j = 0; j < K; j++)
        activate(f, x, f->moe_ids[j], act, f->hb + (size_t)j * F, f->hb2 + (size_t)j * F, 1);
    for (int32_t j = 0; j < K; j += OKV_MM_MAX_OPS) {
        const int32_t c = K - j < OKV_MM_MAX_OPS ? K - j : OKV_MM_MAX_OPS;
        for (int32_t i = 0; i < c; i++) {
            w[i] = expert(&x->down, f->moe_ids[j + i]);
            ws[i] = &w[i];
            ys[i] = f->moe_out + (size_t)(j + i) * E;
        }
        if ((st = okv_fwd_matmul_each(f, f->hb + (size_t)j * F, c, ws, ys))) return st;
    }
    for (int32_t j = 0; j < K; j++) {
        float *y = f->moe_out + (size_t)j * E;
        add_rows(y, expert_bias(&x->down_b, f->moe_ids[j]), 1, (int64_t)E);
        okv_scale(y, y, f->moe_w[j], (int64_t)E);
    }
    return OKV_OK;
}

okv_status okv_fwd_moe(okv_fwd *f, int32_t il, okv_moe_gating gating, okv_moe_act act) {
    const okv_model *m = f->m;
    const okv_moe_weights *x = &m->moe[il];
    const int32_t n = f->n, NE = m->n_expert, K = m->n_expert_used;
    const size_t E = (size_t)m->n_embd;
    okv_status st;

    /* route every row */
    if ((st = okv_fwd_matmul(f, &x->gate_inp, f->xb, n, f->moe_logits))) return st;
    if (x->gate_inp_b.data) add_rows(f->moe_logits, x->gate_inp_b.data, n, NE);
    for (int32_t t = 0; t < n && m->moe_probe && K < NE; t++)
        m->moe_probe(m->moe_probe_ctx, il, f->pos[t], kth_gap(f->moe_logits + (size_t)t * NE, NE, K));
    for (int32_t t = 0; t < n; t++)
        route_row(f->moe_logits + (size_t)t * NE, NE, K, gating, m->expert_weights_scale, f->moe_ids + (size_t)t * K,
                  f->moe_w + (size_t)t * K);

    /* each expert over the rows routed to it (one row: one_row) */
    if (n == 1 && (st = one_row(f, x, act))) return st;
    for (int32_t e = 0; e < NE && n > 1; e++) {
        int32_t cnt = 0;
        for (int32_t t = 0; t < n; t++)
            for (int32_t j = 0; j < K; j++)
                if (f->moe_ids[(size_t)t * K + j] == e) f->moe_rows[cnt++] = t * K + j; /* row and slot */
        if (cnt == 0) continue;
        for (int32_t i = 0; i < cnt; i++)
            memcpy(f->moe_x + (size_t)i * E, f->xb + (size_t)(f->moe_rows[i] / K) * E, E * sizeof(float));
        const okv_weight wg = expert(&x->gate, e), wu = expert(&x->up, e), wd = expert(&x->down, e);
        const okv_weight *ws[] = {&wg, &wu};
        float *const ys[] = {f->hb, f->hb2};
        if ((st = okv_fwd_matmuls(f, f->moe_x, cnt, 2, ws, ys))) return st;
        activate(f, x, e, act, f->hb, f->hb2, cnt);
        if ((st = okv_fwd_matmul(f, &wd, f->hb, cnt, f->moe_y))) return st;
        add_rows(f->moe_y, expert_bias(&x->down_b, e), cnt, (int64_t)E);
        for (int32_t i = 0; i < cnt; i++)
            okv_scale(f->moe_out + (size_t)f->moe_rows[i] * E, f->moe_y + (size_t)i * E,
                      f->moe_w[f->moe_rows[i]], (int64_t)E);
    }

    /* each row's experts summed best first */
    for (int32_t t = 0; t < n; t++) {
        float *y = f->xb2 + (size_t)t * E;
        const float *o = f->moe_out + (size_t)t * K * E;
        memcpy(y, o, E * sizeof(float));
        for (int32_t j = 1; j < K; j++) okv_add(y, y, o + (size_t)j * E, (int64_t)E);
    }
    return OKV_OK;
}
