/* okv_model_fingerprint: what a saved sequence is checked against.  It
 * hashes what decides the K/V a model writes (architecture, hyperparameters,
 * attention parameters, vocabulary, tensor table) and samples the weights
 * (first and last 4 KiB of each tensor), so it costs little even for a large
 * model yet tells apart files that differ only in their weights. */
#include <string.h>

#include "model/model_impl.h"
#include "offkv/prompt_cache.h"

static uint64_t mix(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#define MIX(h, x) mix((h), &(x), sizeof(x))

uint64_t okv_model_fingerprint(const okv_model *m) {
    if (!m) return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, m->arch_name, strlen(m->arch_name) + 1);
    h = MIX(h, m->n_vocab);
    h = MIX(h, m->n_embd);
    h = MIX(h, m->n_layer);
    h = MIX(h, m->n_ff);
    h = MIX(h, m->norm_eps);
    h = MIX(h, m->embd_scale);
    h = MIX(h, m->logit_scale);
    h = MIX(h, m->final_softcap);
    /* what only the metadata says of a mixture of experts and of YaRN */
    h = MIX(h, m->n_expert_used);
    h = MIX(h, m->expert_weights_scale);
    h = MIX(h, m->yarn.ext_factor);
    h = MIX(h, m->yarn.attn_factor);
    h = MIX(h, m->yarn.beta_fast);
    h = MIX(h, m->yarn.beta_slow);
    h = MIX(h, m->yarn.orig_ctx);
    /* okv_layer_params is int32 and float fields only (no padding) and
     * calloc'd. */
    h = mix(h, m->layer, sizeof *m->layer * (size_t)m->n_layer);
    for (int32_t i = 0; i < m->n_vocab; i++) {
        size_t len = 0;
        const char *t = okv_tokenizer_token_text(m->tok, i, &len);
        if (t) h = mix(h, t, len);
        h = MIX(h, len);
    }
    const int64_t nt = okv_gguf_n_tensors(m->file);
    for (int64_t i = 0; i < nt; i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(m->file, i);
        h = mix(h, t->name, strlen(t->name) + 1);
        h = MIX(h, t->type);
        h = mix(h, t->ne, sizeof t->ne);
        h = MIX(h, t->n_bytes);
        const size_t part = t->n_bytes < 4096 ? t->n_bytes : 4096;
        h = mix(h, t->data, part);
        h = mix(h, (const char *)t->data + t->n_bytes - part, part);
    }
    return h;
}
