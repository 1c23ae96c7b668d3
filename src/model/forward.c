/* Pieces of the forward pass that every architecture shares. */
#include <string.h>

#include "kernels/matmul.h"
#include "model/model_impl.h"

okv_status okv_fwd_matmul(okv_fwd *f, const okv_weight *w, const float *x, int32_t n, float *y) {
    return okv_matmul(f->pool, w->type, w->data, w->ne1, w->ne0, x, n, y, f->mm_scratch, f->err);
}

okv_status okv_fwd_qkv(okv_fwd *f, int32_t il) {
    const okv_layer_params *p = &f->m->layer[il];
    const okv_layer_weights *w = &f->m->w[il];
    okv_status st;
    if (!w->wqkv.data) {
        if ((st = okv_fwd_matmul(f, &w->wq, f->xb, f->n, f->q))) return st;
        if ((st = okv_fwd_matmul(f, &w->wk, f->xb, f->n, f->k))) return st;
        return okv_fwd_matmul(f, &w->wv, f->xb, f->n, f->v);
    }
    /* Fused rows are Q then K then V for each token: split them apart. */
    if ((st = okv_fwd_matmul(f, &w->wqkv, f->xb, f->n, f->qkv))) return st;
    const size_t nq = (size_t)p->n_head * p->head_dim, nkv = (size_t)p->n_head_kv * p->head_dim;
    for (int32_t t = 0; t < f->n; t++) {
        const float *row = f->qkv + (size_t)t * (nq + 2 * nkv);
        memcpy(f->q + t * nq, row, nq * sizeof(float));
        memcpy(f->k + t * nkv, row + nq, nkv * sizeof(float));
        memcpy(f->v + t * nkv, row + nq + nkv, nkv * sizeof(float));
    }
    return OKV_OK;
}
