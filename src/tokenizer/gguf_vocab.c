/* okv_tokenizer_from_gguf: the tokenizer.ggml.* keys of a GGUF file read
 * into an okv_vocab_desc, with llama.cpp's defaults and leniencies. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/internal.h"

#define KEY(k) "tokenizer.ggml." k

/* Reads an optional special-token id: absent, or outside the vocabulary
 * (llama.cpp warns and keeps its default), leaves *id alone. */
static okv_status read_id(const okv_gguf *g, const char *key, int32_t n, int32_t *id,
                          okv_error *err) {
    if (*id >= n) *id = -1;
    if (okv_gguf_find_key(g, key) < 0) return OKV_OK;
    int64_t v;
    okv_status st = okv_gguf_get_i64(g, key, &v, err);
    if (st) return st;
    if (v >= 0 && v < n) *id = (int32_t)v;
    return OKV_OK;
}

static okv_status read_flag(const okv_gguf *g, const char *key, int *flag, okv_error *err) {
    if (okv_gguf_find_key(g, key) < 0) return OKV_OK;
    bool b;
    okv_status st = okv_gguf_get_bool(g, key, &b, err);
    if (st == OKV_OK) *flag = b;
    return st;
}

/* A string array as pointers into the file.  *n_out gets its length. */
static okv_status read_strings(const okv_gguf *g, const char *key, const char ***s, size_t **lens,
                               int32_t *n_out, okv_error *err) {
    okv_gguf_type et;
    uint64_t n;
    okv_status st = okv_gguf_get_array(g, key, &et, &n, err);
    if (st) return st;
    if (et != OKV_GGUF_STRING)
        return okv_fail(err, OKV_ERR_FORMAT, "%s is an array of %s, want strings", key,
                        okv_gguf_type_name(et));
    if (n > INT32_MAX)
        return okv_fail(err, OKV_ERR_FORMAT, "%s has %llu entries, more than an id can count",
                        key, (unsigned long long)n);
    *s = malloc((n ? n : 1) * sizeof **s);
    *lens = malloc((n ? n : 1) * sizeof **lens);
    if (!*s || !*lens) return okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
    for (uint64_t i = 0; i < n; i++)
        if ((st = okv_gguf_array_str(g, key, i, &(*s)[i], &(*lens)[i], err))) return st;
    *n_out = (int32_t)n;
    return OKV_OK;
}

/* The number of entries of an optional per-token array (0 when absent),
 * after checking that it has at least n of an accepted element type. */
static okv_status per_token_array(const okv_gguf *g, const char *key, int32_t n, bool floats_ok,
                                  uint64_t *count, okv_gguf_type *et, okv_error *err) {
    *count = 0;
    if (okv_gguf_find_key(g, key) < 0) return OKV_OK;
    okv_status st = okv_gguf_get_array(g, key, et, count, err);
    if (st) return st;
    bool ok = *et == OKV_GGUF_I32 || (floats_ok && *et == OKV_GGUF_F32);
    if (!ok)
        return okv_fail(err, OKV_ERR_FORMAT, "%s is an array of %s, want %s", key,
                        okv_gguf_type_name(*et), floats_ok ? "f32 or i32" : "i32");
    if (*count < (uint64_t)n)
        return okv_fail(err, OKV_ERR_FORMAT, "%s has %llu entries for %d tokens", key,
                        (unsigned long long)*count, (int)n);
    return OKV_OK;
}

okv_tokenizer *okv_tokenizer_from_gguf(const okv_gguf *g, okv_error *err) {
    okv_error_clear(err);
    okv_error local;
    if (!err) err = &local; /* the getters' messages decide what we return */
    if (!g) {
        okv_fail(err, OKV_ERR_INVALID, "tokenizer_from_gguf: file is NULL");
        return NULL;
    }
    okv_tokenizer *t = NULL;
    okv_vocab_desc d = {.bos_id = -1, .eos_id = -1, .unk_id = -1, .pad_id = -1,
                        .add_bos = -1, .add_eos = -1, .add_space_prefix = -1};
    const char **tokens = NULL, **merges = NULL;
    size_t *token_lens = NULL, *merge_lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    char model[32], pre[128];
    okv_status st;

    if (okv_gguf_find_key(g, KEY("model")) < 0) {
        okv_fail(err, OKV_ERR_NOT_FOUND, "tokenizer: the file has no " KEY("model"));
        return NULL;
    }
    if ((st = okv_gguf_get_str_buf(g, KEY("model"), model, sizeof model, err))) {
        if (st == OKV_ERR_INVALID)
            okv_fail(err, OKV_ERR_UNSUPPORTED, "tokenizer: " KEY("model") " is too long to be one we know");
        return NULL;
    }
    d.model = model;
    bool spm = strcmp(model, "llama") == 0;
    if (okv_gguf_find_key(g, KEY("pre")) >= 0) {
        if ((st = okv_gguf_get_str_buf(g, KEY("pre"), pre, sizeof pre, err))) {
            if (st == OKV_ERR_INVALID)
                okv_fail(err, OKV_ERR_UNSUPPORTED, "tokenizer: " KEY("pre") " is too long to be one we know");
            return NULL;
        }
        d.pre = pre;
    }

    if (okv_gguf_find_key(g, KEY("tokens")) < 0) {
        okv_fail(err, OKV_ERR_NOT_FOUND, "tokenizer: the file has no " KEY("tokens"));
        return NULL;
    }
    if ((st = read_strings(g, KEY("tokens"), &tokens, &token_lens, &d.n_tokens, err))) goto done;
    d.tokens = tokens;
    d.token_lens = token_lens;
    int32_t n = d.n_tokens;

    uint64_t count;
    okv_gguf_type et;
    if ((st = per_token_array(g, KEY("scores"), n, true, &count, &et, err))) goto done;
    if (count) {
        scores = malloc((size_t)n * sizeof *scores);
        if (!scores) goto nomem;
        for (int32_t i = 0; i < n; i++) {
            if (et == OKV_GGUF_F32) {
                st = okv_gguf_array_f32(g, KEY("scores"), (uint64_t)i, &scores[i], err);
            } else {
                int64_t v = 0;
                st = okv_gguf_array_i64(g, KEY("scores"), (uint64_t)i, &v, err);
                scores[i] = (float)v;
            }
            if (st) goto done;
        }
        d.scores = scores;
    }
    if ((st = per_token_array(g, KEY("token_type"), n, false, &count, &et, err))) goto done;
    if (count) {
        types = malloc((size_t)n * sizeof *types);
        if (!types) goto nomem;
        for (int32_t i = 0; i < n; i++) {
            int64_t v;
            if ((st = okv_gguf_array_i64(g, KEY("token_type"), (uint64_t)i, &v, err))) goto done;
            types[i] = v >= OKV_TOKEN_UNDEFINED && v <= OKV_TOKEN_BYTE ? (int32_t)v : OKV_TOKEN_UNDEFINED;
        }
        d.types = types;
    }
    if (!spm && strcmp(model, "gpt2") == 0) {
        if (okv_gguf_find_key(g, KEY("merges")) < 0) {
            st = okv_fail(err, OKV_ERR_FORMAT, "tokenizer: a gpt2 vocabulary needs " KEY("merges"));
            goto done;
        }
        if ((st = read_strings(g, KEY("merges"), &merges, &merge_lens, &d.n_merges, err))) goto done;
        d.merges = merges;
        d.merge_lens = merge_lens;
    }

    /* llama.cpp's defaults for the ids, then the file's. */
    d.bos_id = spm ? 1 : 11;
    d.eos_id = spm ? 2 : 11;
    d.unk_id = spm ? 0 : -1;
    if ((st = read_id(g, KEY("bos_token_id"), n, &d.bos_id, err)) ||
        (st = read_id(g, KEY("eos_token_id"), n, &d.eos_id, err)) ||
        (st = read_id(g, KEY("unknown_token_id"), n, &d.unk_id, err)) ||
        (st = read_id(g, KEY("padding_token_id"), n, &d.pad_id, err)) ||
        (st = read_flag(g, KEY("add_bos_token"), &d.add_bos, err)) ||
        (st = read_flag(g, KEY("add_eos_token"), &d.add_eos, err)) ||
        (st = read_flag(g, KEY("add_space_prefix"), &d.add_space_prefix, err)))
        goto done;
    /* The ends besides EOS that the file names (llama.cpp's keys). */
    static const char *const eog_keys[] = {KEY("eot_token_id"), KEY("eom_token_id"), KEY("fim_pad_token_id"),
                                           KEY("fim_rep_token_id"), KEY("fim_sep_token_id")};
    int32_t eog[sizeof eog_keys / sizeof *eog_keys];
    for (size_t k = 0; k < sizeof eog_keys / sizeof *eog_keys; k++) {
        int32_t id = -1;
        if ((st = read_id(g, eog_keys[k], n, &id, err))) goto done;
        if (id >= 0) eog[d.n_eog_ids++] = id;
    }
    d.eog_ids = eog;
    /* The fill-in-the-middle ids it names (the older prefix/suffix/middle
     * keys where the new ones are absent). */
    static const char *const fim_keys[OKV_FIM_N] = {KEY("fim_pre_token_id"), KEY("fim_suf_token_id"),
                                                    KEY("fim_mid_token_id"), KEY("fim_pad_token_id"),
                                                    KEY("fim_rep_token_id"), KEY("fim_sep_token_id")};
    static const char *const old_keys[3] = {KEY("prefix_token_id"), KEY("suffix_token_id"), KEY("middle_token_id")};
    int32_t fim[OKV_FIM_N];
    for (int r = 0; r < OKV_FIM_N; r++) {
        fim[r] = -1;
        if ((st = read_id(g, fim_keys[r], n, &fim[r], err))) goto done;
        if (fim[r] < 0 && r < 3 && (st = read_id(g, old_keys[r], n, &fim[r], err))) goto done;
    }
    d.fim_ids = fim;

    t = okv_tokenizer_create(&d, err);
    goto done;
nomem:
    okv_fail(err, OKV_ERR_NOMEM, "tokenizer: out of memory");
done:
    free(tokens);
    free(token_lens);
    free(merges);
    free(merge_lens);
    free(scores);
    free(types);
    return t;
}
