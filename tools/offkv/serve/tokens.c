/* Token-level answers: OpenAI's logprobs objects, and llama.cpp's
 * /tokenize, /detokenize and /props, shaped as those servers shape them.
 * Kept apart from openai.c, which only routes to them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "offkv/tokenizer.h"
#include "serve.h"

/* A token's bytes (special: control tokens' text too; else they are
 * empty), in small or, for a longer piece, in memory of its own. */
typedef struct tpiece {
    char small[256];
    char *p;
    size_t n;
} tpiece;

static void piece_get(tpiece *t, const okv_tokenizer *tok, int32_t id, bool special) {
    okv_error err = {0};
    t->p = t->small;
    if (okv_tokenizer_token_to_piece(tok, id, special, t->small, sizeof t->small, &t->n, &err) == OKV_OK) return;
    if (t->n > sizeof t->small && (t->p = malloc(t->n)) &&
        okv_tokenizer_token_to_piece(tok, id, special, t->p, t->n, &t->n, &err) == OKV_OK)
        return;
    if (t->p != t->small) free(t->p);
    t->p = t->small;
    t->n = 0; /* out of memory: the piece shows empty */
}

static void piece_free(tpiece *t) {
    if (t->p != t->small) free(t->p);
}

/* The piece as a JSON string's text (srv_utf8_clean); "" when out of memory. */
static cJSON *piece_string(const tpiece *t) {
    const size_t cap = 3 * t->n + 8;
    char *c = malloc(cap);
    if (c) srv_utf8_clean(t->p, t->n, c, cap);
    cJSON *s = cJSON_CreateString(c ? c : "");
    free(c);
    return s;
}

/* {"token", "logprob", "bytes"} of one token (chat's shape). */
static cJSON *token_entry(const okv_tokenizer *tok, int32_t id, float lp, bool special) {
    tpiece t;
    piece_get(&t, tok, id, special);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddItemToObject(e, "token", piece_string(&t));
    cJSON_AddNumberToObject(e, "logprob", isfinite(lp) ? lp : -9999.0);
    cJSON *b = cJSON_AddArrayToObject(e, "bytes");
    for (size_t i = 0; i < t.n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)t.p[i]));
    piece_free(&t);
    return e;
}

cJSON *srv_logprobs_json(const okv_tokenizer *tok, srv_kind kind, bool special, const srv_logprob *lp, size_t n,
                         size_t *text_offset) {
    cJSON *r = cJSON_CreateObject();
    if (kind == SRV_CHAT) {
        cJSON *content = cJSON_AddArrayToObject(r, "content");
        for (size_t i = 0; i < n; i++) {
            cJSON *e = token_entry(tok, lp[i].id, lp[i].logprob, special);
            cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int32_t k = 0; k < lp[i].n_top; k++)
                cJSON_AddItemToArray(top, token_entry(tok, lp[i].top_ids[k], lp[i].top_logprobs[k], special));
            cJSON_AddItemToArray(content, e);
        }
        cJSON_AddNullToObject(r, "refusal");
        return r;
    }
    /* The legacy completions shape: parallel arrays. */
    cJSON *tokens = cJSON_AddArrayToObject(r, "tokens"), *lps = cJSON_AddArrayToObject(r, "token_logprobs"),
          *tops = cJSON_AddArrayToObject(r, "top_logprobs"), *offs = cJSON_AddArrayToObject(r, "text_offset");
    for (size_t i = 0; i < n; i++) {
        tpiece tp;
        piece_get(&tp, tok, lp[i].id, special);
        const size_t len = tp.n;
        cJSON_AddItemToArray(tokens, piece_string(&tp));
        piece_free(&tp);
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(isfinite(lp[i].logprob) ? lp[i].logprob : -9999.0));
        cJSON *t = cJSON_CreateObject();
        for (int32_t k = 0; k < lp[i].n_top; k++) {
            piece_get(&tp, tok, lp[i].top_ids[k], special);
            cJSON *key = piece_string(&tp);
            piece_free(&tp);
            const char *c2 = key && key->valuestring ? key->valuestring : "";
            if (!cJSON_GetObjectItemCaseSensitive(t, c2))
                cJSON_AddNumberToObject(t, c2, isfinite(lp[i].top_logprobs[k]) ? lp[i].top_logprobs[k] : -9999.0);
            cJSON_Delete(key);
        }
        cJSON_AddItemToArray(tops, t);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*text_offset));
        *text_offset += len;
    }
    return r;
}

static bool bad(srv_fail *f, const char *param, const char *msg) {
    srv_fail_set(f, 400, "invalid_request_error", param, "%s", msg);
    return false;
}

/* POST /tokenize {"content", "add_special", "parse_special", "with_pieces"}
 * -> {"tokens": [ids]} or, with pieces, [{"id", "piece"}] (llama.cpp). */
char *srv_tokenize_answer(const okv_tokenizer *tok, const char *body, size_t len, srv_fail *f) {
    cJSON *root = srv_body_parse(body, len, f);
    if (!root) return NULL;
    char *out = NULL;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    const char *flags[] = {"add_special", "parse_special", "with_pieces"};
    bool fl[3] = {false, true, false}; /* llama.cpp parses special tokens' text by default */
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, flags[i]);
        if (!v || cJSON_IsNull(v)) continue;
        if (!cJSON_IsBool(v)) {
            char m[80];
            snprintf(m, sizeof m, "'%s' must be true or false", flags[i]);
            bad(f, flags[i], m);
            goto out;
        }
        fl[i] = cJSON_IsTrue(v);
    }
    if (!cJSON_IsString(content)) {
        bad(f, "content", "'content' must be a string");
        goto out;
    }
    const char *text = content->valuestring;
    const unsigned fls = (fl[0] ? OKV_TOKENIZE_ADD_SPECIAL : 0u) | (fl[1] ? OKV_TOKENIZE_PARSE_SPECIAL : 0u);
    size_t need = 0;
    okv_error err = {0};
    okv_tokenizer_encode(tok, text, strlen(text), fls, NULL, 0, &need, &err);
    int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    size_t n = 0;
    if (!ids || okv_tokenizer_encode(tok, text, strlen(text), fls, ids, need, &n, &err) != OKV_OK) {
        free(ids);
        srv_fail_set(f, 500, "server_error", NULL, "cannot tokenize: %s", err.message);
        goto out;
    }
    cJSON *r = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(r, "tokens");
    for (size_t i = 0; i < n; i++) {
        if (!fl[2]) {
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
            continue;
        }
        tpiece tp;
        piece_get(&tp, tok, ids[i], true);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", ids[i]);
        cJSON_AddItemToObject(e, "piece", piece_string(&tp));
        piece_free(&tp);
        cJSON_AddItemToArray(arr, e);
    }
    free(ids);
    out = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    if (!out) srv_fail_set(f, 500, "server_error", NULL, "out of memory");
out:
    cJSON_Delete(root);
    return out;
}

/* POST /detokenize {"tokens": [ids]} -> {"content": text} (llama.cpp). */
char *srv_detokenize_answer(const okv_tokenizer *tok, const char *body, size_t len, srv_fail *f) {
    cJSON *root = srv_body_parse(body, len, f);
    if (!root) return NULL;
    char *out = NULL, *text = NULL;
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsArray(tokens)) {
        bad(f, "tokens", "'tokens' must be an array of token ids");
        goto out;
    }
    const int32_t n_vocab = okv_tokenizer_n_vocab(tok);
    size_t n = 0, cap = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tokens) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 || t->valuedouble >= n_vocab) {
            char m[120];
            snprintf(m, sizeof m, "'tokens' must hold token ids from 0 to %d", (int)n_vocab - 1);
            bad(f, "tokens", m);
            goto out;
        }
        tpiece tp;
        piece_get(&tp, tok, (int32_t)t->valuedouble, false);
        const size_t k = tp.n;
        if (n + k + 1 > cap) {
            size_t c = cap ? cap * 2 : 256;
            while (c < n + k + 1) c *= 2;
            char *p = realloc(text, c);
            if (!p) {
                piece_free(&tp);
                srv_fail_set(f, 500, "server_error", NULL, "out of memory");
                goto out;
            }
            text = p;
            cap = c;
        }
        memcpy(text + n, tp.p, k);
        piece_free(&tp);
        n += k;
    }
    char *clean = malloc(n * 3 + 8);
    if (!clean) {
        srv_fail_set(f, 500, "server_error", NULL, "out of memory");
        goto out;
    }
    srv_utf8_clean(text ? text : "", n, clean, n * 3 + 8);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "content", clean);
    free(clean);
    out = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    if (!out) srv_fail_set(f, 500, "server_error", NULL, "out of memory");
out:
    free(text);
    cJSON_Delete(root);
    return out;
}

/* GET /props: llama.cpp's fields a client reads (slots, context, the
 * template and its capabilities, the special tokens). */
char *srv_props_answer(const srv_props *p) {
    cJSON *r = cJSON_CreateObject();
    cJSON *d = cJSON_AddObjectToObject(r, "default_generation_settings");
    cJSON_AddNumberToObject(d, "n_ctx", p->n_ctx);
    cJSON *params = cJSON_AddObjectToObject(d, "params");
    cJSON_AddNumberToObject(params, "temperature", 1.0);
    cJSON_AddNumberToObject(params, "top_k", 0);
    cJSON_AddNumberToObject(params, "top_p", 1.0);
    cJSON_AddNumberToObject(params, "min_p", 0.0);
    cJSON_AddNumberToObject(params, "repeat_last_n", 64);
    cJSON_AddNumberToObject(params, "repeat_penalty", 1.0);
    cJSON_AddNumberToObject(params, "presence_penalty", 0.0);
    cJSON_AddNumberToObject(params, "frequency_penalty", 0.0);
    cJSON_AddNumberToObject(params, "n_predict", -1);
    cJSON_AddNumberToObject(r, "total_slots", p->total_slots);
    cJSON_AddStringToObject(r, "model_path", p->model_path);
    cJSON_AddStringToObject(r, "model_alias", p->model_name);
    cJSON_AddStringToObject(r, "chat_template", p->chat_template ? p->chat_template : "");
    cJSON *caps = cJSON_AddObjectToObject(r, "chat_template_caps");
    /* What the template's text shows it handles, as llama.cpp's caps say. */
    const char *src = p->chat_template ? p->chat_template : "";
    cJSON_AddBoolToObject(caps, "supports_tools", strstr(src, "tools") != NULL);
    cJSON_AddBoolToObject(caps, "supports_tool_calls", strstr(src, "tool_calls") != NULL);
    cJSON_AddBoolToObject(caps, "supports_system_role", strstr(src, "system") != NULL);
    cJSON_AddBoolToObject(caps, "supports_parallel_tool_calls", strstr(src, "tool_calls") != NULL);
    cJSON *mod = cJSON_AddObjectToObject(r, "modalities");
    cJSON_AddBoolToObject(mod, "vision", false);
    cJSON_AddBoolToObject(mod, "audio", false);
    const int32_t special[2] = {okv_tokenizer_bos(p->tok), okv_tokenizer_eos(p->tok)};
    for (int i = 0; i < 2; i++) {
        tpiece t = {.n = 0};
        t.p = t.small;
        if (special[i] >= 0) piece_get(&t, p->tok, special[i], true);
        cJSON_AddItemToObject(r, i ? "eos_token" : "bos_token", piece_string(&t));
        piece_free(&t);
    }
    cJSON_AddStringToObject(r, "build_info", p->build_info);
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}
