/* Llama (Llama 2/3, TinyLlama, Mistral, TinyStories): pre-norm decoder with
 * RMSNorm, rotary position embedding on adjacent pairs, grouped-query
 * attention through the off-graph cache, and a SwiGLU feed-forward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"
#include "kernels/ops.h"
#include "model/model_impl.h"

static okv_status llama_forward(okv_fwd *f);

okv_status okv_llama_load(okv_model *m, const char *const *options, okv_error *err) {
    okv_status st;
    if ((st = okv_model_read_rope_scaling(m, err))) return st;

    /* A window makes every layer slide (Mistral 7B v0.1); the option wins
     * over the file so files that lack the key can still be served so. */
    uint32_t window = 0;
    if ((st = okv_model_u32(m, "attention.sliding_window", &window, false, err))) return st;
    int32_t opt_window = -1;
    if ((st = okv_option_int(options, "sliding_window", 1, 1 << 30, &opt_window, err))) return st;
    if (opt_window > 0) window = (uint32_t)opt_window;
    if (window > (1u << 30)) return okv_fail(err, OKV_ERR_FORMAT, "model: sliding window %u is out of range", window);
    for (int32_t i = 0; i < m->n_layer; i++) m->layer[i].window = (int32_t)window;

    if ((st = okv_model_read_kv_sharing(m, err))) return st;
    okv_weight freqs; /* one factor per rotated pair, as phi3's */
    if ((st = okv_model_bind(m, &freqs, "rope_freqs.weight", m->layer[0].n_rot / 2, 0, true, err))) return st;
    m->rope_freqs = freqs.data;

    for (int32_t il = 0; il < m->n_layer; il++) {
        okv_layer_weights *w = &m->w[il];
        const okv_bind_spec specs[] = {
            {&w->attn_norm, "attn_norm", m->n_embd, 0},
        };
        /* Attention biases, where the file has them (llama.cpp's llama
         * takes them too); FFN biases offkv does not run, so such a file
         * is refused as holding unused tensors. */
        if ((st = okv_model_bind_layer(m, il, specs, sizeof specs / sizeof specs[0], err)) ||
            (st = okv_model_bind_attn_biases(m, il, true, true, err)) || (st = okv_model_bind_ffn(m, il, err)))
            return st;
    }
    m->forward = llama_forward;
    return OKV_OK;
}

static okv_status llama_forward(okv_fwd *f) {
    const okv_model *m = f->m;
    okv_status st;
    okv_fwd_embed(f);
    for (int32_t il = 0; il < m->n_layer; il++) {
        /* attention: RMSNorm, Q/K/V (plus the biases the file has), RoPE on
         * adjacent pairs, attention over the cache, output projection, added
         * to the residual stream */
        if ((st = okv_fwd_attention(f, il, (okv_attn_opts){.biases = true}))) return st;
        /* feed-forward: RMSNorm, silu(gate) up, down, added */
        if ((st = okv_fwd_ffn(f, il, (okv_ffn_opts){0}))) return st;
    }
    okv_fwd_norm_rows(f, f->x, f->x, m->n_embd, &m->output_norm, m->norm_eps);
    return okv_fwd_head(f);
}
