/* /infill's prompt: code completion in the model's fill-in-the-middle
 * tokens, as llama.cpp's server builds it, so that editors made for it
 * (llama.vim, llama.vscode) get the completions they get there.
 *
 *   [extra context] [BOS] PRE prefix prompt SUF suffix MID
 *
 * The prefix keeps its last 3/4 of a window of SRV_FIM_WINDOW tokens, the
 * suffix its first quarter less the prompt; the other files (input_extra)
 * fill what the context leaves beside the window and twice the tokens to
 * generate, their last tokens kept.  With repository tokens (Qwen 2.5
 * Coder's) the context is a repository:
 *
 *   REPO myproject\n  SEP name\n text ... SEP filename\n
 *
 * else each file's text follows a "--- snippet ---" line. */
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* llama.cpp's default batch, which sizes its window. */
enum { SRV_FIM_WINDOW = 2048 };

typedef struct toks {
    int32_t *v;
    size_t n, cap;
    bool oom;
} toks;

static void put(toks *t, const int32_t *ids, size_t n) {
    if (t->oom || !n) return;
    if (t->n + n > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->n + n) cap *= 2;
        int32_t *v = realloc(t->v, cap * sizeof *v);
        if (!v) {
            t->oom = true;
            return;
        }
        t->v = v;
        t->cap = cap;
    }
    memcpy(t->v + t->n, ids, n * sizeof *ids);
    t->n += n;
}

static void put1(toks *t, int32_t id) { put(t, &id, 1); }

/* Appends text's tokens: plain text (a control token's spelling in code
 * stays text), no BOS. */
static void put_text(toks *t, const okv_tokenizer *tok, const char *text) {
    if (t->oom) return;
    okv_error err;
    size_t n = 0;
    okv_tokenizer_encode(tok, text, strlen(text), 0, NULL, 0, &n, &err);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids || okv_tokenizer_encode(tok, text, strlen(text), 0, ids, n, &n, &err) != OKV_OK) t->oom = true;
    else put(t, ids, n);
    free(ids);
}

int32_t *srv_infill_prompt(const okv_tokenizer *tok, const srv_request *r, int32_t n_ctx, size_t *n_out, srv_fail *f) {
    const int32_t pre = okv_tokenizer_fim(tok, OKV_FIM_PREFIX), suf = okv_tokenizer_fim(tok, OKV_FIM_SUFFIX),
                  mid = okv_tokenizer_fim(tok, OKV_FIM_MIDDLE), repo = okv_tokenizer_fim(tok, OKV_FIM_REPO),
                  sep = okv_tokenizer_fim(tok, OKV_FIM_FILE_SEP);
    *n_out = 0;
    if (pre < 0 || suf < 0 || mid < 0) {
        srv_fail_set(f, 501, "not_supported_error", NULL,
                     "this model's vocabulary has no fill-in-the-middle %s token: /infill needs a code model's "
                     "(<|fim_prefix|>, <fim_prefix>, <PRE>, ...)",
                     pre < 0 ? "prefix" : suf < 0 ? "suffix" : "middle");
        return NULL;
    }
    toks extra = {0}, prefix = {0}, suffix = {0}, prompt = {0}, out = {0};
    if (repo >= 0) {
        put1(&extra, repo);
        put_text(&extra, tok, "myproject\n");
    }
    for (int i = 0; i < r->n_extra; i++) {
        if (sep >= 0) {
            /* the name and its line end tokenized together, as llama.cpp does */
            const size_t len = strlen(r->extra_names[i]);
            char *line = malloc(len + 2);
            if (!line) {
                extra.oom = true;
                break;
            }
            memcpy(line, r->extra_names[i], len);
            memcpy(line + len, "\n", 2);
            put1(&extra, sep);
            put_text(&extra, tok, line);
            free(line);
        } else {
            put_text(&extra, tok, "\n\n--- snippet ---\n\n");
        }
        put_text(&extra, tok, r->extra_texts[i]);
    }
    if (sep >= 0) {
        put1(&extra, sep);
        put_text(&extra, tok, "filename\n");
    }
    put_text(&prefix, tok, r->input_prefix);
    put_text(&suffix, tok, r->input_suffix);
    put_text(&prompt, tok, r->prompts[0]);

    const int64_t window = n_ctx < SRV_FIM_WINDOW ? n_ctx : SRV_FIM_WINDOW, quarter = window / 4;
    const int64_t take_prefix = (int64_t)prefix.n < 3 * quarter ? (int64_t)prefix.n : 3 * quarter;
    int64_t take_suffix = quarter - (2 + (int64_t)prompt.n);
    if (take_suffix < 0) take_suffix = 0;
    if (take_suffix > (int64_t)suffix.n) take_suffix = (int64_t)suffix.n;
    int64_t take_extra = (int64_t)n_ctx - window - 2 * (int64_t)(r->max_tokens > 0 ? r->max_tokens : 0);
    if (take_extra < 0) take_extra = 0;
    if (take_extra > (int64_t)extra.n) take_extra = (int64_t)extra.n;

    if (take_extra) put(&out, extra.v + (extra.n - (size_t)take_extra), (size_t)take_extra);
    if (okv_tokenizer_adds_bos(tok) && okv_tokenizer_bos(tok) >= 0) put1(&out, okv_tokenizer_bos(tok));
    put1(&out, pre);
    if (take_prefix) put(&out, prefix.v + (prefix.n - (size_t)take_prefix), (size_t)take_prefix);
    put(&out, prompt.v, prompt.n);
    put1(&out, suf);
    put(&out, suffix.v, (size_t)take_suffix);
    put1(&out, mid);
    const bool oom = extra.oom || prefix.oom || suffix.oom || prompt.oom || out.oom;
    free(extra.v);
    free(prefix.v);
    free(suffix.v);
    free(prompt.v);
    if (oom) {
        free(out.v);
        srv_fail_set(f, 500, "server_error", NULL, "out of memory for the infill prompt");
        return NULL;
    }
    *n_out = out.n;
    return out.v;
}
