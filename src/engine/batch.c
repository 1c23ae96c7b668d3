/* Batches: the working memory of one forward pass over several sequences.
 * Everything is allocated at creation for max_rows rows, so an eval
 * allocates nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/engine_impl.h"
#include "kernels/matmul.h"
#include "model/model_impl.h"
#include "offkv/batch.h"

/* Rows of last-token logits computed together (okv_fwd_head). */
enum { HEAD_ROWS = 16 };

struct okv_batch {
    const okv_model *model;
    int32_t max_rows;
    okv_fwd fwd;
    okv_fwd_seg *seg;          /* max_rows */
    int32_t *tokens, *pos;     /* max_rows */
    void *block;               /* one allocation behind every float buffer */
};

okv_status okv_engine_cache_fits(const okv_model *m, const okv_cache *c, const char *name, okv_error *err) {
    if (okv_cache_n_layers(c) != m->n_layer)
        return okv_fail(err, OKV_ERR_INVALID, "%s has %d layers, the model %d", name, (int)okv_cache_n_layers(c),
                        (int)m->n_layer);
    for (int32_t i = 0; i < m->n_layer; i++) {
        okv_layer_geometry a, b;
        okv_cache_layer_geometry(c, i, &a);
        okv_model_layer_geometry(m, i, &b);
        if (a.n_kv_heads != b.n_kv_heads || a.head_dim != b.head_dim || a.window != b.window ||
            a.kv_from != b.kv_from)
            return okv_fail(err, OKV_ERR_INVALID,
                            "%s layer %d is (kv heads %d, head dim %d, window %d, kv_from %d), the model needs "
                            "(%d, %d, %d, %d)",
                            name, (int)i, (int)a.n_kv_heads, (int)a.head_dim, (int)a.window, (int)a.kv_from,
                            (int)b.n_kv_heads, (int)b.head_dim, (int)b.window, (int)b.kv_from);
    }
    return OKV_OK;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static size_t scratch_for(const okv_weight *w, int32_t n) {
    return w->data ? okv_matmul_scratch_bytes(w->type, w->ne0, n) : 0;
}

/* Carves every float buffer out of one allocation, 64-byte aligned each. */
static okv_status alloc_buffers(okv_batch *b, okv_error *err) {
    const okv_model *m = b->model;
    const size_t T = (size_t)b->max_rows;
    const int32_t head_rows = b->max_rows < HEAD_ROWS ? b->max_rows : HEAD_ROWS;
    size_t q_w = 0, kv_w = 0;
    for (int32_t i = 0; i < m->n_layer; i++) {
        q_w = max_size(q_w, (size_t)m->layer[i].n_head * m->layer[i].head_dim);
        kv_w = max_size(kv_w, (size_t)m->layer[i].n_head_kv * m->layer[i].head_dim);
    }
    const size_t wide = max_size((size_t)m->n_embd, q_w);
    size_t scratch = scratch_for(&m->output, b->max_rows);
    for (int32_t i = 0; i < m->n_layer; i++) {
        const okv_layer_weights *w = &m->w[i];
        const okv_weight *all[] = {&w->wq, &w->wk, &w->wv, &w->wqkv, &w->wo, &w->attn_gate,
                                   &w->ffn_gate, &w->ffn_up, &w->ffn_down};
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            scratch = max_size(scratch, scratch_for(all[j], b->max_rows));
        if (m->moe) {
            const okv_moe_weights *x = &m->moe[i];
            const okv_weight *moe[] = {&x->gate_inp, &x->gate.w, &x->up.w, &x->down.w};
            for (size_t j = 0; j < sizeof moe / sizeof moe[0]; j++)
                scratch = max_size(scratch, scratch_for(moe[j], b->max_rows));
            /* a decode row's down products quantize one column per expert (moe.c one_row) */
            const int32_t K = m->n_expert_used < OKV_MM_MAX_OPS ? m->n_expert_used : OKV_MM_MAX_OPS;
            scratch = max_size(scratch, scratch_for(&x->down.w, K));
        }
    }
    const size_t NE = (size_t)m->n_expert, K = (size_t)m->n_expert_used;
    /* a decode row's experts keep their gate and up side by side (moe.c one_row) */
    const size_t ff = max_size(max_size((size_t)m->n_ff, (size_t)m->n_ff_exp), (T > 0 ? (K * m->n_ff_exp + T - 1) / T : 0));
    const size_t floats[] = {
        T * m->n_embd,                      /* x */
        T * wide,                           /* xb */
        T * wide,                           /* xb2 */
        T * q_w,                            /* q */
        T * kv_w,                           /* k */
        T * kv_w,                           /* v */
        T * q_w,                            /* att */
        T * q_w,                            /* gate */
        T * (q_w + 2 * kv_w),               /* qkv */
        T * ff,                             /* hb */
        T * ff,                             /* hb2 */
        (size_t)head_rows * m->n_embd,      /* head_x */
        (size_t)head_rows * m->n_vocab,     /* head_y */
        T * NE,                             /* moe_logits */
        T * K,                              /* moe_ids (int32) */
        T * K,                              /* moe_w */
        T * K,                              /* moe_rows (int32) */
        NE ? T * m->n_embd : 0,             /* moe_x */
        NE ? T * m->n_embd : 0,             /* moe_y */
        T * K * m->n_embd,                  /* moe_out */
    };
    const size_t n_buf = sizeof floats / sizeof floats[0];
    size_t total = (scratch + 63) & ~(size_t)63;
    for (size_t i = 0; i < n_buf; i++) total += (floats[i] * sizeof(float) + 63) & ~(size_t)63;
    b->block = aligned_alloc(64, total ? total : 64);
    b->seg = malloc(T * sizeof *b->seg);
    b->tokens = malloc(T * sizeof *b->tokens);
    b->pos = malloc(T * sizeof *b->pos);
    if (!b->block || !b->seg || !b->tokens || !b->pos)
        return okv_fail(err, OKV_ERR_NOMEM, "batch: out of memory for %zu bytes of buffers (%d rows)", total,
                        (int)b->max_rows);
    okv_fwd *f = &b->fwd;
    char *p = b->block;
    float *ids, *rows; /* int32 buffers, carved as the float ones */
    float **dst[] = {&f->x, &f->xb, &f->xb2, &f->q, &f->k, &f->v, &f->att, &f->gate, &f->qkv, &f->hb, &f->hb2,
                     &f->head_x, &f->head_y, &f->moe_logits, &ids, &f->moe_w, &rows, &f->moe_x, &f->moe_y, &f->moe_out};
    for (size_t i = 0; i < n_buf; i++) {
        *dst[i] = (float *)p;
        p += (floats[i] * sizeof(float) + 63) & ~(size_t)63;
    }
    f->moe_ids = (int32_t *)(void *)ids;
    f->moe_rows = (int32_t *)(void *)rows;
    f->mm_scratch = p;
    f->head_rows = head_rows;
    return OKV_OK;
}

okv_batch *okv_batch_create(const okv_model *model, int32_t max_rows, okv_threadpool *pool, okv_error *err) {
    if (!model) {
        okv_fail(err, OKV_ERR_INVALID, "batch: model is NULL");
        return NULL;
    }
    if (max_rows < 1) {
        okv_fail(err, OKV_ERR_INVALID, "batch: max_rows %d < 1", (int)max_rows);
        return NULL;
    }
    okv_batch *b = calloc(1, sizeof *b);
    if (!b) {
        okv_fail(err, OKV_ERR_NOMEM, "batch: out of memory");
        return NULL;
    }
    b->model = model;
    b->max_rows = max_rows;
    if (alloc_buffers(b, err) != OKV_OK) {
        okv_batch_free(b);
        return NULL;
    }
    b->fwd.m = model;
    b->fwd.pool = pool;
    b->fwd.seg = b->seg;
    b->fwd.tokens = b->tokens;
    b->fwd.pos = b->pos;
    okv_error_clear(err);
    return b;
}

void okv_batch_free(okv_batch *b) {
    if (!b) return;
    free(b->block);
    free(b->seg);
    free(b->tokens);
    free(b->pos);
    free(b);
}

int32_t okv_batch_max_rows(const okv_batch *b) { return b ? b->max_rows : 0; }

/* Every check that needs no cache change, before any step begins. */
static okv_status check_seqs(const okv_batch *b, const okv_batch_seq *seqs, int32_t n_seqs, okv_error *err) {
    const okv_model *m = b->model;
    int64_t rows = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        const okv_batch_seq *s = &seqs[i];
        if (!s->cache || !s->tokens || !s->positions)
            return okv_fail(err, OKV_ERR_INVALID, "batch: sequence %d: NULL cache, tokens or positions", (int)i);
        if (s->n_tokens < 1)
            return okv_fail(err, OKV_ERR_INVALID, "batch: sequence %d: n_tokens %d < 1", (int)i, (int)s->n_tokens);
        for (int32_t t = 0; t < s->n_tokens; t++)
            if (s->tokens[t] < 0 || s->tokens[t] >= m->n_vocab)
                return okv_fail(err, OKV_ERR_INVALID,
                                "batch: sequence %d: token %d at index %d is outside the vocabulary (%d)", (int)i,
                                (int)s->tokens[t], (int)t, (int)m->n_vocab);
        for (int32_t j = 0; j < i; j++)
            if (seqs[j].cache == s->cache)
                return okv_fail(err, OKV_ERR_INVALID, "batch: sequences %d and %d are the same cache", (int)j,
                                (int)i);
        char name[48];
        snprintf(name, sizeof name, "batch: sequence %d's cache", (int)i);
        okv_status st = okv_engine_cache_fits(m, s->cache, name, err);
        if (st) return st;
        rows += s->n_tokens;
    }
    if (rows > b->max_rows)
        return okv_fail(err, OKV_ERR_INVALID, "batch: %lld rows exceed the batch's max_rows %d", (long long)rows,
                        (int)b->max_rows);
    return OKV_OK;
}

okv_status okv_batch_eval(okv_batch *b, const okv_batch_seq *seqs, int32_t n_seqs, okv_error *err) {
    if (!b || !seqs) return okv_fail(err, OKV_ERR_INVALID, "batch: NULL batch or sequences");
    if (n_seqs < 1) return okv_fail(err, OKV_ERR_INVALID, "batch: n_seqs %d < 1", (int)n_seqs);
    okv_status st = check_seqs(b, seqs, n_seqs, err);
    if (st) return st;

    /* Open every step before anything is written, so a refused sequence
     * leaves all of them as they were. */
    okv_fwd *f = &b->fwd;
    int32_t row = 0, opened = 0;
    for (; opened < n_seqs; opened++) {
        const okv_batch_seq *s = &seqs[opened];
        okv_fwd_seg *g = &b->seg[opened];
        g->step = okv_step_begin(s->cache, s->positions, s->n_tokens, f->pool, err);
        if (!g->step) {
            st = err ? err->status : OKV_ERR_INVALID;
            if (err && n_seqs > 1) { /* say which; one sequence's error stands as it is */
                char msg[sizeof err->message];
                snprintf(msg, sizeof msg, "batch: sequence %d: %.200s", (int)opened, err->message);
                memcpy(err->message, msg, sizeof msg);
            }
            break;
        }
        g->row0 = row;
        g->n_rows = s->n_tokens;
        g->logits = s->logits;
        g->all_logits = s->all_logits;
        okv_cache_config cc;
        g->n_ctx = okv_cache_get_config(s->cache, &cc) ? cc.capacity : 0;
        memcpy(b->tokens + row, s->tokens, (size_t)s->n_tokens * sizeof *b->tokens);
        memcpy(b->pos + row, s->positions, (size_t)s->n_tokens * sizeof *b->pos);
        row += s->n_tokens;
    }
    if (opened == n_seqs) {
        f->n_seg = n_seqs;
        f->n = row;
        f->err = err;
        st = b->model->forward(f);
        /* Every layer of every step was attended when the pass succeeded,
         * so commits cannot be refused; should one be, the rest are ended
         * unwritten rather than left open. */
        int32_t committed = 0;
        while (st == OKV_OK && committed < n_seqs)
            if ((st = okv_step_commit(b->seg[committed].step, err)) == OKV_OK) committed++;
        if (st == OKV_OK) {
            okv_error_clear(err);
            return OKV_OK;
        }
        for (int32_t i = committed; i < n_seqs; i++) okv_step_abort(b->seg[i].step);
        return st;
    }
    for (int32_t i = 0; i < opened; i++) okv_step_abort(b->seg[i].step);
    return st;
}
