/* Loading a model: the parts every architecture shares. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/hugemem.h"
#include "core/options.h"
#include "kernels/matmul.h"
#include "kernels/mxfp4x16.h"
#include "kernels/ops.h"
#include "kernels/q4_0x16.h"
#include "kernels/q4_Kx16.h"
#include "kernels/q5_0x16.h"
#include "kernels/q6_Kx16.h"
#include "kernels/q8_0x16.h"
#include "kernels/wtype.h"
#include "kernels/x16mm.h"
#include "offkv/threads.h"
#include "model/model_impl.h"

static void key_of(const okv_model *m, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", m->arch_name, suffix);
}

bool okv_model_has(const okv_model *m, const char *suffix) {
    char key[160];
    key_of(m, suffix, key, sizeof key);
    return okv_gguf_find_key(m->file, key) >= 0;
}

/* Resolves "{arch}.{suffix}" into key; OKV_OK with *present telling whether
 * the file has it, or an error when it is required and missing. */
static okv_status lookup(const okv_model *m, const char *suffix, bool required, char *key, size_t cap,
                         bool *present, okv_error *err) {
    key_of(m, suffix, key, cap);
    *present = okv_gguf_find_key(m->file, key) >= 0;
    if (!*present && required) return okv_fail(err, OKV_ERR_FORMAT, "model: required key '%s' is missing", key);
    return OKV_OK;
}

/* Restates a getter's failure as a format error naming the key. */
static okv_status bad_value(const char *key, okv_error *err) {
    char why[sizeof err->message];
    snprintf(why, sizeof why, "%s", err ? err->message : "");
    return okv_fail(err, OKV_ERR_FORMAT, "model: key '%s': %s", key, why);
}

okv_status okv_model_u32(const okv_model *m, const char *suffix, uint32_t *out, bool required,
                         okv_error *err) {
    char key[160];
    bool present;
    okv_status st = lookup(m, suffix, required, key, sizeof key, &present, err);
    if (st || !present) return st;
    if (okv_gguf_get_u32(m->file, key, out, err)) return bad_value(key, err);
    return OKV_OK;
}

okv_status okv_model_f32(const okv_model *m, const char *suffix, float *out, bool required,
                         okv_error *err) {
    char key[160];
    bool present;
    okv_status st = lookup(m, suffix, required, key, sizeof key, &present, err);
    if (st || !present) return st;
    if (okv_gguf_get_f32(m->file, key, out, err)) return bad_value(key, err);
    if (!isfinite(*out)) return okv_fail(err, OKV_ERR_FORMAT, "model: key '%s' is not finite", key);
    return OKV_OK;
}

okv_status okv_model_positive(const okv_model *m, const char *suffix, float *out, okv_error *err) {
    float v = *out;
    okv_status st = okv_model_f32(m, suffix, &v, false, err);
    if (st) return st;
    if (!(v > 0.0f))
        return okv_fail(err, OKV_ERR_FORMAT, "model: key '%s.%s' = %g must be positive", m->arch_name, suffix, v);
    *out = v;
    return OKV_OK;
}

/* A head count may be one number or one per layer. */
static okv_status per_layer_u32(okv_model *m, const char *suffix, uint32_t dflt, bool required,
                                int32_t *dst, size_t stride, okv_error *err) {
    char key[160];
    key_of(m, suffix, key, sizeof key);
    int64_t idx = okv_gguf_find_key(m->file, key);
    for (int32_t i = 0; i < m->n_layer; i++) *(int32_t *)((char *)dst + i * stride) = (int32_t)dflt;
    if (idx < 0) {
        if (required) return okv_fail(err, OKV_ERR_FORMAT, "model: required key '%s' is missing", key);
        return OKV_OK;
    }
    if (okv_gguf_kv_type(m->file, idx) == OKV_GGUF_ARRAY) {
        okv_gguf_type et;
        uint64_t n;
        if (okv_gguf_get_array(m->file, key, &et, &n, err) != OKV_OK) return OKV_ERR_FORMAT;
        if (n != (uint64_t)m->n_layer)
            return okv_fail(err, OKV_ERR_FORMAT, "model: '%s' has %llu entries for %d layers", key,
                            (unsigned long long)n, (int)m->n_layer);
        for (int32_t i = 0; i < m->n_layer; i++) {
            int64_t v;
            if (okv_gguf_array_i64(m->file, key, (uint64_t)i, &v, err) != OKV_OK)
                return okv_fail(err, OKV_ERR_FORMAT, "model: '%s'[%d] is not an integer", key, (int)i);
            if (v < 0 || v > 1 << 20)
                return okv_fail(err, OKV_ERR_FORMAT, "model: '%s'[%d] = %lld is out of range", key, (int)i,
                                (long long)v);
            *(int32_t *)((char *)dst + i * stride) = (int32_t)v;
        }
        return OKV_OK;
    }
    uint32_t v = dflt;
    okv_status st = okv_model_u32(m, suffix, &v, required, err);
    if (st != OKV_OK) return st;
    if (v > 1u << 20) return okv_fail(err, OKV_ERR_FORMAT, "model: '%s' = %u is out of range", key, v);
    for (int32_t i = 0; i < m->n_layer; i++) *(int32_t *)((char *)dst + i * stride) = (int32_t)v;
    return OKV_OK;
}

okv_status okv_model_read_windows(okv_model *m, uint32_t default_period, bool required, okv_error *err) {
    char wkey[160], pkey[160];
    key_of(m, "attention.sliding_window", wkey, sizeof wkey);
    key_of(m, "attention.sliding_window_pattern", pkey, sizeof pkey);
    uint32_t window = 0;
    if (okv_gguf_find_key(m->file, wkey) < 0) {
        if (required)
            return okv_fail(err, OKV_ERR_FORMAT, "model: %s needs a window, but key '%s' is missing",
                            m->arch_name, wkey);
        return OKV_OK;
    }
    okv_status st = okv_model_u32(m, "attention.sliding_window", &window, true, err);
    if (st != OKV_OK) return st;
    int64_t pidx = okv_gguf_find_key(m->file, pkey);
    if (pidx < 0 && required)
        return okv_fail(err, OKV_ERR_FORMAT, "model: %s needs a window layout, but key '%s' is missing",
                        m->arch_name, pkey);
    if (window == 0) {
        /* offkv's own rule for such architectures: a window is required, and 0 is none */
        if (required)
            return okv_fail(err, OKV_ERR_FORMAT, "model: '%s' = 0, but %s needs a window of at least 1", wkey,
                            m->arch_name);
        return OKV_OK;
    }
    if (window > (1u << 30)) return okv_fail(err, OKV_ERR_FORMAT, "model: '%s' = %u is out of range", wkey, window);
    if (pidx >= 0 && okv_gguf_kv_type(m->file, pidx) == OKV_GGUF_ARRAY) {
        okv_gguf_type et;
        uint64_t n;
        if (okv_gguf_get_array(m->file, pkey, &et, &n, err) != OKV_OK) return OKV_ERR_FORMAT;
        if (n != (uint64_t)m->n_layer || et != OKV_GGUF_BOOL)
            return okv_fail(err, OKV_ERR_FORMAT, "model: '%s' must be %d bools (got %llu of type %s)", pkey,
                            (int)m->n_layer, (unsigned long long)n, okv_gguf_type_name(et));
        for (int32_t i = 0; i < m->n_layer; i++) {
            bool b = false;
            if (okv_gguf_array_bool(m->file, pkey, (uint64_t)i, &b, err) != OKV_OK) return OKV_ERR_FORMAT;
            m->layer[i].window = b ? (int32_t)window : 0;
        }
        return OKV_OK;
    }
    uint32_t period = default_period;
    if (pidx >= 0 && (st = okv_model_u32(m, "attention.sliding_window_pattern", &period, true, err)) != OKV_OK)
        return st;
    /* Period n: layer i slides iff n == 0 or i mod n < n - 1. */
    for (int32_t i = 0; i < m->n_layer; i++)
        m->layer[i].window = (period == 0 || (uint32_t)i % period < period - 1) ? (int32_t)window : 0;
    return OKV_OK;
}

okv_status okv_model_check_align(const okv_gguf_tensor *t, okv_error *err) {
    const size_t a = t->type == OKV_GGML_F32 ? 4 : t->type == OKV_GGML_MXFP4 ? 1 : 2;
    if ((uintptr_t)t->data % a == 0) return OKV_OK;
    return okv_fail(err, OKV_ERR_FORMAT, "model: tensor '%.80s' (%s) starts at data offset %llu, not a multiple of %zu",
                    t->name, okv_ggml_type_name(t->type), (unsigned long long)t->offset, a);
}

void okv_model_leave(okv_model *m, const char *name) {
    const int64_t i = okv_gguf_find_tensor(m->file, name);
    if (i >= 0) m->used[i] = 1;
}

/* A tensor no binding took would be silently left out of the computation
 * (a llama file's FFN biases, a qwen3moe file's shared expert): llama.cpp
 * refuses such a file ("wrong number of tensors"), and so does offkv,
 * naming it. */
static okv_status check_all_used(const okv_model *m, okv_error *err) {
    int64_t n_left = 0, first = -1;
    for (int64_t i = 0; i < okv_gguf_n_tensors(m->file); i++)
        if (!m->used[i] && n_left++ == 0) first = i;
    if (!n_left) return OKV_OK;
    return okv_fail(err, OKV_ERR_UNSUPPORTED,
                    "model: tensor '%.80s'%s is not used by offkv's %s architecture: running without it would not "
                    "compute what the file describes",
                    okv_gguf_tensor_at(m->file, first)->name, n_left > 1 ? " (and others)" : "", m->arch_name);
}

okv_status okv_model_bind(okv_model *m, okv_weight *w, const char *name, int64_t ne0, int64_t ne1,
                          bool optional, okv_error *err) {
    memset(w, 0, sizeof *w);
    int64_t i = okv_gguf_find_tensor(m->file, name);
    if (i < 0) {
        if (optional) return OKV_OK;
        return okv_fail(err, OKV_ERR_FORMAT, "model: tensor '%s' is missing", name);
    }
    const okv_gguf_tensor *t = okv_gguf_tensor_at(m->file, i);
    m->used[i] = 1;
    const int32_t want_dims = ne1 > 0 ? 2 : 1;
    int64_t got1 = t->n_dims >= 2 ? t->ne[1] : 0;
    bool extra = (t->n_dims >= 3 && t->ne[2] != 1) || (t->n_dims >= 4 && t->ne[3] != 1);
    if (t->ne[0] != ne0 || got1 != ne1 || extra || (want_dims == 1 && t->n_dims != 1))
        return okv_fail(err, OKV_ERR_FORMAT,
                        "model: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
                        (long long)t->ne[0], (long long)got1, (long long)ne0, (long long)ne1);
    if (ne1 > 0 && !okv_wtype_runnable(t->type))
        return okv_fail(err, OKV_ERR_UNSUPPORTED, "model: tensor '%s' has type %s, which offkv does not run",
                        name, okv_ggml_type_name(t->type));
    if (ne1 == 0 && t->type != OKV_GGML_F32)
        return okv_fail(err, OKV_ERR_FORMAT, "model: vector '%s' has type %s, expected F32", name,
                        okv_ggml_type_name(t->type));
    if (ne1 > 0 && ne0 % okv_ggml_block_size(t->type) != 0)
        return okv_fail(err, OKV_ERR_FORMAT, "model: tensor '%s': row of %lld is not whole %s blocks",
                        name, (long long)ne0, okv_ggml_type_name(t->type));
    okv_status st = okv_model_check_align(t, err);
    if (st) return st;
    w->type = t->type;
    w->data = t->data;
    w->ne0 = ne0;
    w->ne1 = ne1 > 0 ? ne1 : 1;
    m->weight_bytes += t->n_bytes;
    return OKV_OK;
}

/* Binds blk.{il}.{name}.weight for each of the n specs. */
static okv_status bind_specs(okv_model *m, int32_t il, const okv_bind_spec *specs, size_t n, okv_error *err) {
    char name[96];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "blk.%d.%s.weight", (int)il, specs[i].name);
        okv_status st = okv_model_bind(m, specs[i].w, name, specs[i].ne0, specs[i].ne1, false, err);
        if (st) return st;
    }
    return OKV_OK;
}

okv_status okv_model_bind_layer(okv_model *m, int32_t il, const okv_bind_spec *specs, size_t n,
                                okv_error *err) {
    okv_status st = bind_specs(m, il, specs, n, err);
    return st ? st : okv_model_bind_attention(m, il, err);
}

okv_status okv_model_bind_ffn(okv_model *m, int32_t il, okv_error *err) {
    okv_layer_weights *w = &m->w[il];
    const okv_bind_spec specs[] = {
        {&w->ffn_norm, "ffn_norm", m->n_embd, 0},
        {&w->ffn_gate, "ffn_gate", m->n_embd, m->n_ff},
        {&w->ffn_up, "ffn_up", m->n_embd, m->n_ff},
        {&w->ffn_down, "ffn_down", m->n_ff, m->n_embd},
    };
    return bind_specs(m, il, specs, sizeof specs / sizeof specs[0], err);
}

okv_status okv_model_gelu_table(okv_model *m, okv_error *err) {
    m->gelu_table = malloc(sizeof(okv_f16) * 65536);
    if (!m->gelu_table) return okv_fail(err, OKV_ERR_NOMEM, "model: out of memory for the GELU table");
    okv_gelu_table_init(m->gelu_table);
    return OKV_OK;
}

/* RoPE scaling as llama.cpp reads it for every architecture (its
 * load_hparams and llama_context): the type defaults to "linear"; the
 * factor is rope.scaling.factor, or the older rope.scale_linear; positions
 * are divided by it unless the type is "none"; rope.scaling.attn_factor
 * multiplies cos and sin whatever the type.  "yarn" also mixes, dimension
 * pair by pair, the divided angle with the original one (ggml's rope with
 * ext_factor 1, llama.cpp's default for a YaRN file) over the original
 * context, and scales cos and sin by 1 + 0.1 ln(factor) (ggml's
 * correction; llama.cpp's attention factor of 1 leaves it at that).
 * yarn_beta_fast / yarn_beta_slow are read when present (llama.cpp reads
 * them for a few architectures only and keeps 32 / 1 elsewhere; Hugging
 * Face applies a config's betas to every YaRN model). */
okv_status okv_model_read_rope_scaling(okv_model *m, okv_error *err) {
    okv_status st;
    char key[160];
    key_of(m, "rope.scaling.type", key, sizeof key);
    const char *type = "linear";
    size_t len = 6;
    if (okv_gguf_find_key(m->file, key) >= 0 && okv_gguf_get_str(m->file, key, &type, &len, err))
        return okv_fail(err, OKV_ERR_FORMAT, "model: '%s' is not a string", key);
#define TYPE_IS(s) (len == sizeof(s) - 1 && memcmp(type, s, len) == 0)
    const bool none = TYPE_IS("none"), yarn = TYPE_IS("yarn");
    /* "longrope" (phi3) divides by the factor as "linear"; its divisors are
     * tensors the architecture binds */
    if (!none && !yarn && !TYPE_IS("linear") && !TYPE_IS("longrope"))
        return okv_fail(err, OKV_ERR_UNSUPPORTED,
                        "model: %s rope scaling type '%.*s' is not supported (none, linear, yarn, longrope)",
                        m->arch_name, (int)len, type);
#undef TYPE_IS
    float factor = 1.0f;
    const char *fkey = okv_model_has(m, "rope.scaling.factor") ? "rope.scaling.factor" : "rope.scale_linear";
    if ((st = okv_model_positive(m, fkey, &factor, err))) return st;
    uint32_t orig = (uint32_t)m->n_ctx_train;
    if ((st = okv_model_u32(m, "rope.scaling.original_context_length", &orig, false, err))) return st;
    if (orig < 1 || orig > (1u << 30))
        return okv_fail(err, OKV_ERR_FORMAT, "model: %s.rope.scaling.original_context_length = %u is out of range",
                        m->arch_name, orig);
    m->n_ctx_orig = (int32_t)orig;
    if ((st = okv_model_positive(m, "rope.scaling.attn_factor", &m->rope_attn_factor, err))) return st;
    if (yarn) {
        /* below 1 YaRN would compress the high frequencies it exists to keep */
        if (factor < 1.0f)
            return okv_fail(err, OKV_ERR_FORMAT, "model: %s.%s = %g: a YaRN factor must be at least 1", m->arch_name,
                            fkey, factor);
        okv_model_yarn *y = &m->yarn;
        *y = (okv_model_yarn){.ext_factor = 1.0f, .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f,
                              .orig_ctx = (int32_t)orig};
        if ((st = okv_model_positive(m, "rope.scaling.yarn_beta_fast", &y->beta_fast, err))) return st;
        if ((st = okv_model_positive(m, "rope.scaling.yarn_beta_slow", &y->beta_slow, err))) return st;
    }
    if (!none && factor != 1.0f)
        for (int32_t i = 0; i < m->n_layer; i++) m->layer[i].rope_pos_scale = 1.0f / factor;
    return OKV_OK;
}

okv_status okv_model_bind_bias(okv_model *m, okv_weight *w, int32_t il, const char *name, int64_t ne0,
                               bool optional, okv_error *err) {
    char full[96];
    snprintf(full, sizeof full, "blk.%d.%s.bias", (int)il, name);
    return okv_model_bind(m, w, full, ne0, 0, optional, err);
}

okv_status okv_model_bind_attn_biases(okv_model *m, int32_t il, bool output, bool optional, okv_error *err) {
    const okv_layer_params *p = &m->layer[il];
    okv_layer_weights *w = &m->w[il];
    const int64_t nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;
    okv_status st;
    if ((st = okv_model_bind_bias(m, &w->bq, il, "attn_q", nq, optional, err)) ||
        (st = okv_model_bind_bias(m, &w->bk, il, "attn_k", nkv, optional, err)) ||
        (st = okv_model_bind_bias(m, &w->bv, il, "attn_v", nkv, optional, err)))
        return st;
    return output ? okv_model_bind_bias(m, &w->bo, il, "attn_output", m->n_embd, optional, err) : OKV_OK;
}

okv_status okv_model_read_kv_sharing(okv_model *m, okv_error *err) {
    uint32_t n = 0;
    okv_status st = okv_model_u32(m, "attention.shared_kv_layers", &n, false, err);
    if (st) return st;
    if (n == 0) return OKV_OK;
    if (n >= (uint32_t)m->n_layer)
        return okv_fail(err, OKV_ERR_FORMAT, "model: %s.attention.shared_kv_layers = %u leaves no layer of %d to share",
                        m->arch_name, n, (int)m->n_layer);
    const int32_t first = m->n_layer - (int32_t)n;
    for (int32_t i = first; i < m->n_layer; i++) {
        /* the last layer before the shared ones of the same kind (sliding or global) */
        int32_t d = first - 1;
        while (d >= 0 && (m->layer[d].window > 0) != (m->layer[i].window > 0)) d--;
        if (d < 0)
            return okv_fail(err, OKV_ERR_FORMAT,
                            "model: %s.attention.shared_kv_layers = %u: layer %d is %s, and no earlier layer of that "
                            "kind has K/V to share",
                            m->arch_name, n, (int)i, m->layer[i].window > 0 ? "sliding" : "global");
        const okv_layer_params *a = &m->layer[i], *b = &m->layer[d];
        if (a->n_head_kv != b->n_head_kv || a->head_dim != b->head_dim || a->window != b->window)
            return okv_fail(err, OKV_ERR_FORMAT,
                            "model: %s.attention.shared_kv_layers: layer %d (kv heads %d, head dim %d, window %d) "
                            "cannot read layer %d's K/V (%d, %d, %d)",
                            m->arch_name, (int)i, (int)a->n_head_kv, (int)a->head_dim, (int)a->window, (int)d,
                            (int)b->n_head_kv, (int)b->head_dim, (int)b->window);
        m->layer[i].kv_from = d + 1;
    }
    return OKV_OK;
}

okv_status okv_model_bind_attention(okv_model *m, int32_t il, okv_error *err) {
    const okv_layer_params *p = &m->layer[il];
    okv_layer_weights *w = &m->w[il];
    const int64_t nq = (int64_t)p->n_head * p->head_dim, nkv = (int64_t)p->n_head_kv * p->head_dim;
    char name[96];
    okv_status st;
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", (int)il);
    if (okv_gguf_find_tensor(m->file, name) >= 0) {
        if ((st = okv_model_bind(m, &w->wqkv, name, m->n_embd, nq + 2 * nkv, false, err))) return st;
    } else {
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", (int)il);
        if ((st = okv_model_bind(m, &w->wq, name, m->n_embd, nq, false, err))) return st;
        /* A layer reading another's K/V computes none: its K/V weights, if
         * the file has them, are not used. */
        if (p->kv_from) {
            snprintf(name, sizeof name, "blk.%d.attn_k.weight", (int)il);
            okv_model_leave(m, name);
            snprintf(name, sizeof name, "blk.%d.attn_v.weight", (int)il);
            okv_model_leave(m, name);
            goto out;
        }
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", (int)il);
        if ((st = okv_model_bind(m, &w->wk, name, m->n_embd, nkv, false, err))) return st;
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", (int)il);
        if ((st = okv_model_bind(m, &w->wv, name, m->n_embd, nkv, false, err))) return st;
    }
out:
    snprintf(name, sizeof name, "blk.%d.attn_output.weight", (int)il);
    return okv_model_bind(m, &w->wo, name, nq, m->n_embd, false, err);
}

/* A block_count below the blocks the tensors hold would run a truncated
 * model and ignore the rest (llama.cpp refuses such a file too); too high a
 * count shows up as a missing tensor when binding. */
static okv_status check_block_tensors(const okv_model *m, okv_error *err) {
    for (int64_t i = 0; i < okv_gguf_n_tensors(m->file); i++) {
        const char *name = okv_gguf_tensor_at(m->file, i)->name;
        char *end;
        if (strncmp(name, "blk.", 4) != 0) continue;
        long b = strtol(name + 4, &end, 10);
        if (end == name + 4 || *end != '.') continue;
        if (b >= m->n_layer)
            return okv_fail(err, OKV_ERR_FORMAT,
                            "model: %s.block_count is %d but the file has tensors of block %ld ('%.80s')",
                            m->arch_name, (int)m->n_layer, b, name);
    }
    return OKV_OK;
}

/* Hyperparameters every architecture reads the same way. */
static okv_status read_common(okv_model *m, okv_error *err) {
    uint32_t u = 0;
    okv_status st;
    if ((st = okv_model_u32(m, "block_count", &u, true, err))) return st;
    if (u < 1 || u > 4096) return okv_fail(err, OKV_ERR_FORMAT, "model: block_count %u is out of range", u);
    m->n_layer = (int32_t)u;
    if ((st = check_block_tensors(m, err))) return st;
    if ((st = okv_model_u32(m, "embedding_length", &u, true, err))) return st;
    if (u < 1 || u > 1u << 20) return okv_fail(err, OKV_ERR_FORMAT, "model: embedding_length %u is out of range", u);
    m->n_embd = (int32_t)u;
    u = 0;
    if ((st = okv_model_u32(m, "feed_forward_length", &u, true, err))) return st;
    if (u < 1 || u > 1u << 22) return okv_fail(err, OKV_ERR_FORMAT, "model: feed_forward_length %u is out of range", u);
    m->n_ff = (int32_t)u;
    u = 2048;
    if ((st = okv_model_u32(m, "context_length", &u, false, err))) return st;
    m->n_ctx_train = u > 0 && u < (1u << 30) ? (int32_t)u : 2048;
    m->norm_eps = 1e-5f;
    if ((st = okv_model_f32(m, "attention.layer_norm_rms_epsilon", &m->norm_eps, false, err))) return st;
    if (m->norm_eps < 0.0f)
        return okv_fail(err, OKV_ERR_FORMAT, "model: attention.layer_norm_rms_epsilon %g is negative", m->norm_eps);

    m->layer = calloc((size_t)m->n_layer, sizeof *m->layer);
    m->w = calloc((size_t)m->n_layer, sizeof *m->w);
    if (!m->layer || !m->w) return okv_fail(err, OKV_ERR_NOMEM, "model: out of memory");
    if ((st = per_layer_u32(m, "attention.head_count", 0, true, &m->layer[0].n_head, sizeof *m->layer, err)))
        return st;
    for (int32_t i = 0; i < m->n_layer; i++) m->layer[i].n_head_kv = m->layer[i].n_head;
    /* head_count_kv defaults to head_count, layer by layer */
    char key[160];
    key_of(m, "attention.head_count_kv", key, sizeof key);
    if (okv_gguf_find_key(m->file, key) >= 0 &&
        (st = per_layer_u32(m, "attention.head_count_kv", 0, true, &m->layer[0].n_head_kv, sizeof *m->layer, err)))
        return st;
    float base = 10000.0f;
    if ((st = okv_model_positive(m, "rope.freq_base", &base, err))) return st;
    for (int32_t i = 0; i < m->n_layer; i++) {
        okv_layer_params *p = &m->layer[i];
        if (p->n_head < 1 || p->n_head_kv < 1 || p->n_head % p->n_head_kv != 0)
            return okv_fail(err, OKV_ERR_FORMAT, "model: layer %d: %d heads, %d kv heads (need a positive multiple)",
                            (int)i, (int)p->n_head, (int)p->n_head_kv);
        p->rope_base = base;
        p->rope_pos_scale = 1.0f;
        p->attn_scale = 0; /* set below, once head_dim is known */
    }
    uint32_t kl = (uint32_t)(m->n_embd / m->layer[0].n_head), vl = 0;
    if ((st = okv_model_u32(m, "attention.key_length", &kl, false, err))) return st;
    vl = kl;
    if ((st = okv_model_u32(m, "attention.value_length", &vl, false, err))) return st;
    if (kl != vl)
        return okv_fail(err, OKV_ERR_UNSUPPORTED, "model: key_length %u differs from value_length %u", kl, vl);
    if (kl < 1) /* a corrupt file (no key_length, more heads than embedding), not a shape offkv lacks */
        return okv_fail(err, OKV_ERR_FORMAT, "model: head dim %u (key_length, or embedding_length / head_count)", kl);
    if (kl > 512) return okv_fail(err, OKV_ERR_UNSUPPORTED, "model: head dim %u is beyond offkv's 512", kl);
    /* RoPE may rotate only the first dimensions of each head. */
    uint32_t n_rot = kl;
    if ((st = okv_model_u32(m, "rope.dimension_count", &n_rot, false, err))) return st;
    if (n_rot < 2 || n_rot > kl || n_rot % 2)
        return okv_fail(err, OKV_ERR_FORMAT, "model: rope.dimension_count %u must be even and in 2..head dim %u",
                        n_rot, kl);
    for (int32_t i = 0; i < m->n_layer; i++) {
        m->layer[i].head_dim = (int32_t)kl;
        m->layer[i].n_rot = (int32_t)n_rot;
        m->layer[i].attn_scale = 1.0f / sqrtf((float)kl);
    }
    return OKV_OK;
}

static okv_status load_tokenizer(okv_model *m, okv_error *err) {
    m->tok = okv_tokenizer_from_gguf(m->file, err);
    if (!m->tok) return err ? err->status : OKV_ERR_FORMAT;
    m->n_vocab = okv_tokenizer_n_vocab(m->tok);
    return OKV_OK;
}

/* The layout w is copied into: a sixteen-wide one (kernels/q4_0x16.h,
 * q8_0x16.h, q4_Kx16.h, q6_Kx16.h, mxfp4x16.h, x16mm.h), or a float
 * matrix's own (repack_weights copies it as it is, for huge pages; the
 * other types' kernels did not measure faster so: Q5_0 decode, TinyLlama
 * shape, Zen 5, before Q5_0 had a layout), or -1: stays in the file's
 * pages.  Every row of whole blocks is repacked: Q4_0, Q5_0, Q8_0 and MXFP4
 * rows end in a compact group (ggml's bytes exactly), Q4_K and Q5_K rows
 * in a half group where they need one (768 values: Qwen3-MoE's experts;
 * 3 % more than ggml's bytes). */
static int32_t repacked_type(const okv_model *m, const okv_weight *w) {
    if (!w->data) return -1;
    /* Where the products run at I8MM (the model's isa), Q4_0, Q8_0 and Q4_K
     * take SMMLA's layouts (kernels/x16mm.h: the same bits as the
     * sixteen-wide ones, half the multiply instructions from two columns
     * on) when rows are whole quartets of blocks; the other levels have
     * only their scalar kernel */
    const int mm = m->isa == OKV_ISA_I8MM;
    if (mm && w->type == OKV_GGML_Q4_0 && okv_wtype_row_size(OKV_WT_Q4_0X16MM, w->ne0)) return OKV_WT_Q4_0X16MM;
    if (mm && w->type == OKV_GGML_Q8_0 && okv_wtype_row_size(OKV_WT_Q8_0X16MM, w->ne0)) return OKV_WT_Q8_0X16MM;
    if (mm && w->type == OKV_GGML_Q4_K) return OKV_WT_Q4_KX16MM; /* any whole super-blocks, 768 too */
    int32_t t = -1;
    switch (w->type) {
    case OKV_GGML_Q6_K: return OKV_WT_Q6_KX16; /* no padding: groups are super-blocks */
    case OKV_GGML_Q4_0: t = OKV_WT_Q4_0X16; break;
    case OKV_GGML_Q8_0: t = OKV_WT_Q8_0X16; break;
    case OKV_GGML_Q4_K: t = OKV_WT_Q4_KX16; break;
    case OKV_GGML_Q5_K: t = OKV_WT_Q5_KX16; break;
    case OKV_GGML_Q5_0: t = OKV_WT_Q5_0X16; break;
    case OKV_GGML_MXFP4: t = OKV_WT_MXFP4X16; break;
    case OKV_GGML_F16:
    case OKV_GGML_BF16:
    case OKV_GGML_F32: return w->type;
    default: return -1;
    }
    return okv_wtype_row_size(t, w->ne0) ? t : -1;
}

/* The bytes of one repacked matrix of w's shape in layout t, 64-aligned. */
static size_t packed_bytes(int32_t t, const okv_weight *w) {
    return (okv_wtype_row_size(t, w->ne0) * (size_t)w->ne1 + 63) / 64 * 64;
}

static void repack_into(uint8_t *dst, int32_t t, const okv_weight *w) {
    if (t == OKV_WT_Q4_0X16) okv_repack_q4_0x16(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_Q8_0X16) okv_repack_q8_0x16(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_Q6_KX16) okv_repack_q6_Kx16(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_Q5_KX16) okv_repack_q5_Kx16(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_Q5_0X16) okv_repack_q5_0x16(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_MXFP4X16) okv_repack_mxfp4x16(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_Q4_0X16MM) okv_repack_q4_0x16mm(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_Q8_0X16MM) okv_repack_q8_0x16mm(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_Q4_KX16MM) okv_repack_q4_Kx16mm(dst, w->data, w->ne1, w->ne0);
    else if (t == OKV_WT_Q4_KX16) okv_repack_q4_Kx16(dst, w->data, w->ne1, w->ne0);
    else memcpy(dst, w->data, okv_wtype_row_size(t, w->ne0) * (size_t)w->ne1); /* t is w's own type */
}

/* Hands back the file's pages of bytes at p: the copy is what is read now. */
static void release_pages(const void *p, size_t bytes) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + bytes) / page * page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* The experts of a mixture-of-experts layer: every expert's matrix is a
 * matrix like any other, repacked one after another at a fixed stride. */
static okv_experts *expert_tensor(okv_model *m, size_t i) {
    if (!m->moe || i >= (size_t)m->n_layer * 3) return NULL;
    okv_moe_weights *x = &m->moe[i / 3];
    return i % 3 == 0 ? &x->gate : i % 3 == 1 ? &x->up : &x->down;
}

/* A stage of a load as the caller's progress function sees it. */
typedef struct load_progress {
    okv_model_progress fn;
    void *user;
    const char *stage;
    uint64_t done, total, next;
} load_progress;

static void progress_start(load_progress *p, const char *stage, uint64_t total) {
    p->stage = stage;
    p->done = p->next = 0;
    p->total = total;
}

/* bytes more of the stage done: reported about every 1 % and at its end. */
static void progress_add(load_progress *p, uint64_t bytes) {
    if (!p->fn) return;
    p->done += bytes;
    if (p->done >= p->next || p->done == p->total) {
        p->fn(p->user, p->stage, p->done, p->total);
        p->next = p->done + p->total / 100 + 1;
    }
}

/* The stage has done bytes in all (a parallel stage's running total). */
static void progress_to(load_progress *p, uint64_t done) {
    if (done > p->done) progress_add(p, done - p->done);
}

/* A piece of a load's stage: bytes of the file to read (t < 0), or rows
 * of one matrix (or one expert's) to repack at offset dst of the buffer,
 * whose file pages are handed back once copied. */
typedef struct load_piece {
    size_t dst;
    const uint8_t *src;
    int32_t t, src_type;
    int64_t rows, k;
    size_t src_bytes;
} load_piece;

/* Rows a repack piece takes at most: about 4 MiB of the file, so that a
 * 4 GB model's thousand pieces keep every thread busy to the end. */
static int64_t piece_rows(int32_t src_type, int64_t k) {
    const int64_t r = ((int64_t)4 << 20) / (int64_t)okv_wtype_row_size(src_type, k);
    return r < 1 ? 1 : r;
}

/* Appends matrix w's repack pieces (its rows in layout t at offset dst of
 * the buffer) to pc (NULL: counts them). */
static size_t add_pieces(load_piece *pc, size_t n, size_t dst, int32_t t, const okv_weight *w) {
    const size_t src_row = okv_wtype_row_size(w->type, w->ne0), dst_row = okv_wtype_row_size(t, w->ne0);
    const int64_t step = piece_rows(w->type, w->ne0);
    for (int64_t r = 0; r < w->ne1; r += step, n++) {
        const int64_t rows = w->ne1 - r < step ? w->ne1 - r : step;
        if (pc)
            pc[n] = (load_piece){dst + (size_t)r * dst_row, (const uint8_t *)w->data + (size_t)r * src_row, t, w->type,
                                 rows, w->ne0, (size_t)rows * src_row};
    }
    return n;
}

typedef struct load_job {
    uint8_t *buf;
    const load_piece *pc;
    size_t n;
    atomic_size_t next;
    atomic_uint_fast64_t done; /* bytes of the file read or copied */
    pthread_t loader;          /* the thread that reports progress */
    load_progress *p;
} load_job;

/* Reads bytes at b, a byte a page (the kernel reads ahead: madvise). */
static void read_piece(const uint8_t *b, size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)b / page * page;
    madvise((void *)lo, (uintptr_t)b + bytes - lo, MADV_WILLNEED);
    unsigned sum = 0;
    for (size_t q = 0; q < bytes; q += page) sum += b[q];
    /* the reads are the point: keep them */
    __asm__ volatile("" : : "r"(sum));
}

/* Every thread takes the next piece until none is left; the loading thread
 * reports the running total (okv_model_progress promises its thread). */
static void load_job_fn(void *arg, int32_t ith, int32_t nth) {
    (void)ith, (void)nth;
    load_job *j = arg;
    const bool reports = pthread_equal(pthread_self(), j->loader);
    for (size_t i; (i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n;) {
        const load_piece *pc = &j->pc[i];
        if (pc->t < 0) {
            read_piece(pc->src, pc->src_bytes);
        } else {
            const okv_weight w = {.data = pc->src, .type = pc->src_type, .ne0 = pc->k, .ne1 = pc->rows};
            repack_into(j->buf + pc->dst, pc->t, &w);
            release_pages(pc->src, pc->src_bytes);
        }
        const uint64_t done = atomic_fetch_add_explicit(&j->done, pc->src_bytes, memory_order_relaxed) + pc->src_bytes;
        if (reports) progress_to(j->p, done);
    }
}

/* Runs a stage's n pieces on n_threads threads (a pool that cannot start
 * its workers leaves them to this thread: slower, the same bytes), its
 * progress going from 0 to total. */
static void run_pieces(const char *stage, uint8_t *buf, const load_piece *pc, size_t n, uint64_t total,
                       int32_t n_threads, load_progress *p) {
    okv_threadpool *pool = n_threads > 1 ? okv_threadpool_create(n_threads, NULL) : NULL;
    progress_start(p, stage, total);
    load_job job = {.buf = buf, .pc = pc, .n = n, .loader = pthread_self(), .p = p};
    atomic_init(&job.next, 0);
    atomic_init(&job.done, 0);
    okv_parallel(pool, load_job_fn, &job);
    okv_threadpool_free(pool);
    progress_to(p, total);
}

/* Reads every tensor of the file (a loaded model uses them all:
 * check_all_used) in pieces of at most 16 MiB on n_threads threads, the
 * progress reported about every 1 % (a 4.6 GB file from the page cache:
 * 1.15 s on one thread of a Zen 5 VM, a third of its load).  Without
 * memory for the list of pieces, tensor by tensor on this thread. */
static void read_weights(okv_model *m, load_progress *p, int32_t n_threads) {
    const int64_t n = okv_gguf_n_tensors(m->file);
    const size_t chunk = (size_t)16 << 20;
    uint64_t total = 0;
    size_t n_pieces = 0;
    for (int64_t i = 0; i < n; i++) {
        const size_t bytes = okv_gguf_tensor_at(m->file, i)->n_bytes;
        total += bytes;
        n_pieces += (bytes + chunk - 1) / chunk;
    }
    load_piece *pc = malloc((n_pieces ? n_pieces : 1) * sizeof *pc);
    if (!pc) {
        progress_start(p, "reading", total);
        for (int64_t i = 0; i < n; i++) {
            const okv_gguf_tensor *t = okv_gguf_tensor_at(m->file, i);
            if (t->n_bytes) read_piece(t->data, t->n_bytes);
            progress_add(p, t->n_bytes);
        }
        return;
    }
    size_t np = 0;
    for (int64_t i = 0; i < n; i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(m->file, i);
        for (size_t o = 0; o < t->n_bytes; o += chunk)
            pc[np++] = (load_piece){.src = (const uint8_t *)t->data + o, .t = -1,
                                    .src_bytes = t->n_bytes - o < chunk ? t->n_bytes - o : chunk};
    }
    run_pieces("reading", NULL, pc, np, total, n_threads, p);
    free(pc);
}

/* Copies the model's matrices into one buffer of their own: in the
 * sixteen-wide layouts, which multiply several tokens at once two to three
 * times as fast (a server's batched decode, prefill) and one token no
 * slower, and float matrices byte for byte, for the huge pages below.  The
 * embedding table stays in the file (rows are read one at a time); a tied
 * output matrix is copied, the table not.  The file's pages of what was
 * copied are handed back (a tied table's too: lookups fault in the rows
 * they read), so resident memory does not double.
 * Without the memory the model keeps the file's pages: slower, never wrong.
 * On n_threads threads, pieces of rows each: most of a load's time is the
 * kernel zeroing each new page of the buffer as it is first written (83 %
 * of a 4.6 GB Qwen3-MoE-shaped load's samples on a Zen 5 VM), which runs on
 * the thread that writes it, so it spreads over the threads too. */
static void repack_weights(okv_model *m, load_progress *p, int32_t n_threads) {
    const size_t n = (size_t)m->n_layer * (sizeof(okv_layer_weights) / sizeof(okv_weight));
    const size_t n_exps = m->moe ? (size_t)m->n_layer * 3 : 0;
    size_t total = 0, n_pieces = 0;
    uint64_t file_bytes = 0;
    /* pass 0 sizes the buffer and counts the pieces, pass 1 lays them out */
    load_piece *pc = NULL;
    for (int pass = 0; pass < 2; pass++) {
        size_t dst = 0, np = 0;
        for (size_t i = 0; i <= n; i++) {
            const okv_weight *w = i < n ? (const okv_weight *)m->w + i : &m->output;
            const int32_t t = repacked_type(m, w);
            if (t < 0) continue;
            if (pass == 0) total += packed_bytes(t, w), file_bytes += okv_wtype_row_size(w->type, w->ne0) * (size_t)w->ne1;
            np = add_pieces(pc, np, dst, t, w);
            dst += packed_bytes(t, w);
        }
        for (size_t i = 0; i < n_exps; i++) {
            const okv_experts *x = expert_tensor(m, i);
            const int32_t t = repacked_type(m, &x->w);
            if (t < 0) continue;
            const size_t stride = packed_bytes(t, &x->w);
            if (pass == 0) total += stride * (size_t)x->n, file_bytes += x->stride * (size_t)x->n;
            for (int32_t e = 0; e < x->n; e++) {
                okv_weight one = x->w;
                one.data = (const char *)x->w.data + (size_t)e * x->stride;
                np = add_pieces(pc, np, dst + (size_t)e * stride, t, &one);
            }
            dst += stride * (size_t)x->n;
        }
        if (pass == 1) break;
        n_pieces = np;
        if (total == 0) return;
        /* Huge pages where the system gives them on request (transparent huge
         * pages "madvise"): decode reads a mixture of experts' matrices at
         * scattered places, a few hundred kilobytes each, and with 4 KiB pages
         * nearly every page of them misses the TLB; an F16 row of 2048 values
         * is a page of its own.  F16 TinyLlama-1.1B shape, 2 threads of a Zen 5,
         * decode: 12.4-13.7 t/s from the file's pages, 14.4-19.3 copied here. */
        if (!(pc = malloc(n_pieces * sizeof *pc))) return; /* the file's pages, then */
        if (!(m->packed = okv_huge_alloc(total))) {
            free(pc);
            return;
        }
    }
    run_pieces("repacking", m->packed, pc, n_pieces, file_bytes, n_threads, p);
    free(pc);
    /* point the weights at their copies; the file's pages that straddled two
     * pieces go back too (a tied table's as well: the embedding reads back
     * one row a token) */
    uint8_t *dst = m->packed;
    for (size_t i = 0; i <= n; i++) {
        okv_weight *w = i < n ? (okv_weight *)m->w + i : &m->output;
        const int32_t t = repacked_type(m, w);
        if (t < 0) continue;
        release_pages(w->data, okv_wtype_row_size(w->type, w->ne0) * (size_t)w->ne1);
        w->data = dst;
        w->type = t;
        dst += packed_bytes(t, w);
    }
    for (size_t i = 0; i < n_exps; i++) {
        okv_experts *x = expert_tensor(m, i);
        const int32_t t = repacked_type(m, &x->w);
        if (t < 0) continue;
        const size_t stride = packed_bytes(t, &x->w);
        release_pages(x->w.data, x->stride * (size_t)x->n);
        x->w.data = dst;
        x->w.type = t;
        x->stride = stride;
        dst += stride * (size_t)x->n;
    }
}

okv_model *okv_model_load(const char *path, const char *const *options, okv_error *err) {
    return okv_model_load_progress(path, options, NULL, NULL, err);
}

okv_model *okv_model_load_progress(const char *path, const char *const *options, okv_model_progress fn, void *user,
                                   okv_error *err) {
    if (!path) { okv_fail(err, OKV_ERR_INVALID, "model: path is NULL"); return NULL; }
    static const char *const known[] = {"sliding_window", "repack", "isa", "n_threads", NULL};
    if (okv_options_check(options, known, "model", err) != OKV_OK) return NULL;
    int32_t n_threads = 1;
    if (okv_option_int(options, "n_threads", 1, 1024, &n_threads, err) != OKV_OK) return NULL;
    const char *repack = okv_option_get(options, "repack");
    if (repack && strcmp(repack, "on") != 0 && strcmp(repack, "off") != 0) {
        okv_fail(err, OKV_ERR_INVALID, "model option repack = '%s': expected on or off", repack);
        return NULL;
    }
    const char *isa_name = okv_option_get(options, "isa");
    okv_isa isa = okv_cpu_best_isa();
    if (isa_name && strcmp(isa_name, "auto") != 0) {
        isa = okv_isa_from_name(isa_name);
        if (isa == OKV_ISA_COUNT) {
            okv_fail(err, OKV_ERR_INVALID,
                     "model option isa = '%s': expected auto, scalar, avx2, avxvnni, avx512, avx512vnni, neon, "
                     "dotprod or i8mm", isa_name);
            return NULL;
        }
        if (!okv_cpu_has_isa(isa)) {
            okv_fail(err, OKV_ERR_UNSUPPORTED, "model option isa = '%s': this processor cannot run it (best: %s)",
                     isa_name, okv_isa_name(okv_cpu_best_isa()));
            return NULL;
        }
    }
    okv_model *m = calloc(1, sizeof *m);
    if (!m) { okv_fail(err, OKV_ERR_NOMEM, "model: out of memory"); return NULL; }
    m->isa = isa;
    m->embd_scale = 1.0f;
    m->logit_scale = 1.0f;
    m->rope_attn_factor = 1.0f;
    m->file = okv_gguf_open(path, err);
    okv_status st = OKV_OK;
    if (!m->file) goto fail;
    const char *arch;
    size_t arch_len;
    if (okv_gguf_get_str(m->file, "general.architecture", &arch, &arch_len, err) != OKV_OK) {
        okv_fail(err, OKV_ERR_FORMAT, "model: general.architecture is missing or not a string");
        goto fail;
    }
    if (arch_len >= sizeof m->arch_name) arch_len = sizeof m->arch_name - 1;
    memcpy(m->arch_name, arch, arch_len);
    m->arch_name[arch_len] = '\0';
    /* The architectures offkv runs: llama.cpp's names, one file each in src/model/. */
    static const struct { const char *name; okv_arch arch; } archs[] = {
        {"llama", OKV_ARCH_LLAMA},     {"gemma3", OKV_ARCH_GEMMA3}, {"muse-glimmer", OKV_ARCH_MUSE_GLIMMER},
        {"qwen2", OKV_ARCH_QWEN2},     {"qwen3", OKV_ARCH_QWEN3},   {"smollm3", OKV_ARCH_SMOLLM3},
        {"gemma2", OKV_ARCH_GEMMA2},   {"phi3", OKV_ARCH_PHI3},     {"qwen3moe", OKV_ARCH_QWEN3MOE},
        {"gpt-oss", OKV_ARCH_GPT_OSS},
    };
    size_t ai = 0;
    while (ai < sizeof archs / sizeof archs[0] && strcmp(m->arch_name, archs[ai].name) != 0) ai++;
    if (ai == sizeof archs / sizeof archs[0]) {
        okv_fail(err, OKV_ERR_UNSUPPORTED,
                 "model: architecture '%s' is not supported (llama, gemma3, muse-glimmer, qwen2, qwen3, smollm3, "
                 "gemma2, phi3, qwen3moe, gpt-oss)",
                 m->arch_name);
        goto fail;
    }
    m->arch = archs[ai].arch;
    if (m->arch != OKV_ARCH_LLAMA && okv_option_get(options, "sliding_window")) {
        okv_fail(err, OKV_ERR_INVALID,
                 "model option sliding_window applies to llama models; %s takes its windows from the file",
                 m->arch_name);
        goto fail;
    }
    if (!(m->used = calloc((size_t)okv_gguf_n_tensors(m->file) + 1, 1))) {
        st = okv_fail(err, OKV_ERR_NOMEM, "model: out of memory");
        goto fail;
    }
    if ((st = read_common(m, err)) || (st = load_tokenizer(m, err))) goto fail;
    if ((st = okv_model_bind(m, &m->tok_embd, "token_embd.weight", m->n_embd, m->n_vocab, false, err))) goto fail;
    if ((st = okv_model_bind(m, &m->output_norm, "output_norm.weight", m->n_embd, 0, false, err))) goto fail;
    if ((st = okv_model_bind(m, &m->output, "output.weight", m->n_embd, m->n_vocab, true, err))) goto fail;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    switch (m->arch) {
    case OKV_ARCH_LLAMA: st = okv_llama_load(m, options, err); break;
    case OKV_ARCH_GEMMA3: st = okv_gemma3_load(m, err); break;
    case OKV_ARCH_MUSE_GLIMMER: st = okv_muse_glimmer_load(m, err); break;
    case OKV_ARCH_QWEN2: st = okv_qwen2_load(m, err); break;
    case OKV_ARCH_QWEN3: st = okv_qwen3_load(m, err); break;
    case OKV_ARCH_SMOLLM3: st = okv_smollm3_load(m, err); break;
    case OKV_ARCH_GEMMA2: st = okv_gemma2_load(m, err); break;
    case OKV_ARCH_PHI3: st = okv_phi3_load(m, err); break;
    case OKV_ARCH_QWEN3MOE: st = okv_qwen3moe_load(m, err); break;
    case OKV_ARCH_GPT_OSS: st = okv_gpt_oss_load(m, err); break;
    }
    if (st || (st = check_all_used(m, err))) goto fail;
    free(m->used);
    m->used = NULL;
    if (m->moe)
        snprintf(m->desc, sizeof m->desc,
                 "%s: %d layers, n_embd %d, %d heads / %d kv, head_dim %d, %d experts (%d used) of ffn %d, vocab %d, "
                 "%s experts, products at %s",
                 m->arch_name, (int)m->n_layer, (int)m->n_embd, (int)m->layer[0].n_head, (int)m->layer[0].n_head_kv,
                 (int)m->layer[0].head_dim, (int)m->n_expert, (int)m->n_expert_used, (int)m->n_ff_exp,
                 (int)m->n_vocab, okv_ggml_type_name(m->moe[0].down.w.type), okv_isa_name(m->isa));
    else
        snprintf(m->desc, sizeof m->desc,
                 "%s: %d layers, n_embd %d, %d heads / %d kv, head_dim %d, ffn %d, vocab %d, %s weights, products at %s",
                 m->arch_name,
                 (int)m->n_layer, (int)m->n_embd, (int)m->layer[0].n_head, (int)m->layer[0].n_head_kv,
                 (int)m->layer[0].head_dim, (int)m->n_ff, (int)m->n_vocab, okv_ggml_type_name(m->w[0].ffn_down.type),
                 okv_isa_name(m->isa));
    load_progress progress = {.fn = fn, .user = user};
    if (fn) read_weights(m, &progress, n_threads);
    if (!repack || strcmp(repack, "on") == 0) repack_weights(m, &progress, n_threads);
    okv_error_clear(err);
    return m;
fail:
    okv_model_free(m);
    return NULL;
}

void okv_model_free(okv_model *m) {
    if (!m) return;
    okv_tokenizer_free(m->tok);
    free(m->gelu_table);
    okv_gguf_close(m->file);
    free(m->used);
    free(m->packed);
    free(m->layer);
    free(m->w);
    free(m->moe);
    free(m);
}

const char *okv_model_arch(const okv_model *m) { return m ? m->arch_name : ""; }
int32_t okv_model_n_vocab(const okv_model *m) { return m ? m->n_vocab : 0; }
int32_t okv_model_n_layers(const okv_model *m) { return m ? m->n_layer : 0; }
int32_t okv_model_n_embd(const okv_model *m) { return m ? m->n_embd : 0; }
int32_t okv_model_n_ctx_train(const okv_model *m) { return m ? m->n_ctx_train : 0; }
const okv_tokenizer *okv_model_tokenizer(const okv_model *m) { return m ? m->tok : NULL; }
size_t okv_model_weight_bytes(const okv_model *m) { return m ? m->weight_bytes : 0; }
const char *okv_model_describe(const okv_model *m) { return m ? m->desc : ""; }

bool okv_model_layer_geometry(const okv_model *m, int32_t i, okv_layer_geometry *out) {
    if (!m || !out || i < 0 || i >= m->n_layer) return false;
    out->n_kv_heads = m->layer[i].n_head_kv;
    out->head_dim = m->layer[i].head_dim;
    out->window = m->layer[i].window;
    out->kv_from = m->layer[i].kv_from;
    return true;
}
