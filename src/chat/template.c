/* offkv/chat.h: parsing a template once, rendering it per conversation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja.h"
#include "core/error.h"
#include "offkv/chat.h"

struct okv_chat_template {
    jarena arena; /* the tokens and the tree */
    jnode **body;
    int n_body;
    char *source, *bos, *eos;
};

enum { PARSE_BUDGET = 64 << 20 };

okv_chat_template *okv_chat_template_parse(const char *text, size_t len, okv_error *err) {
    if (!text) {
        okv_fail(err, OKV_ERR_INVALID, "chat template: NULL text");
        return NULL;
    }
    okv_chat_template *t = calloc(1, sizeof *t);
    if (!t || !(t->source = malloc(len + 1)) || !(t->bos = strdup("")) || !(t->eos = strdup(""))) {
        okv_chat_template_free(t);
        okv_fail(err, OKV_ERR_NOMEM, "chat template: out of memory for %zu bytes", len);
        return NULL;
    }
    memcpy(t->source, text, len);
    t->source[len] = '\0';
    okv_jarena_init(&t->arena, PARSE_BUDGET);
    jfail f;
    memset(&f.err, 0, sizeof f.err);
    if (setjmp(f.env)) {
        if (f.err.line)
            okv_fail(err, OKV_ERR_FORMAT, "chat template: line %d, column %d: %s", f.err.line, f.err.column, f.err.message);
        else
            okv_fail(err, OKV_ERR_FORMAT, "chat template: %s", f.err.message);
        okv_chat_template_free(t);
        return NULL;
    }
    size_t n_tok;
    jtok *toks = okv_jinja_lex(&t->arena, &f, t->source, len, &n_tok);
    okv_jinja_parse(&t->arena, &f, toks, n_tok, &t->n_body, &t->body);
    okv_error_clear(err);
    return t;
}

static char *token_text(const okv_gguf *g, const char *id_key) {
    uint32_t id;
    const char *s;
    size_t n;
    if (okv_gguf_get_u32(g, id_key, &id, NULL) != OKV_OK ||
        okv_gguf_array_str(g, "tokenizer.ggml.tokens", id, &s, &n, NULL) != OKV_OK)
        return strdup("");
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

okv_chat_template *okv_chat_template_from_gguf(const okv_gguf *g, okv_error *err) {
    const char *text;
    size_t len;
    if (!g) {
        okv_fail(err, OKV_ERR_INVALID, "chat template: NULL file");
        return NULL;
    }
    if (okv_gguf_find_key(g, "tokenizer.chat_template") < 0) {
        okv_fail(err, OKV_ERR_NOT_FOUND, "the file has no tokenizer.chat_template");
        return NULL;
    }
    if (okv_gguf_get_str(g, "tokenizer.chat_template", &text, &len, err) != OKV_OK) return NULL;
    okv_chat_template *t = okv_chat_template_parse(text, len, err);
    if (!t) return NULL;
    char *bos = token_text(g, "tokenizer.ggml.bos_token_id"), *eos = token_text(g, "tokenizer.ggml.eos_token_id");
    okv_status st = bos && eos ? okv_chat_template_set_tokens(t, bos, eos, err)
                               : okv_fail(err, OKV_ERR_NOMEM, "chat template: out of memory");
    free(bos);
    free(eos);
    if (st != OKV_OK) {
        okv_chat_template_free(t);
        return NULL;
    }
    return t;
}

void okv_chat_template_free(okv_chat_template *t) {
    if (!t) return;
    okv_jarena_free(&t->arena);
    free(t->source);
    free(t->bos);
    free(t->eos);
    free(t);
}

okv_status okv_chat_template_set_tokens(okv_chat_template *t, const char *bos_token, const char *eos_token,
                                        okv_error *err) {
    if (!t) return okv_fail(err, OKV_ERR_INVALID, "chat template: NULL template");
    char *bos = strdup(bos_token ? bos_token : ""), *eos = strdup(eos_token ? eos_token : "");
    if (!bos || !eos) {
        free(bos);
        free(eos);
        return okv_fail(err, OKV_ERR_NOMEM, "chat template: out of memory");
    }
    free(t->bos);
    free(t->eos);
    t->bos = bos;
    t->eos = eos;
    okv_error_clear(err);
    return OKV_OK;
}

const char *okv_chat_template_source(const okv_chat_template *t) { return t ? t->source : NULL; }
const char *okv_chat_template_bos(const okv_chat_template *t) { return t ? t->bos : NULL; }
const char *okv_chat_template_eos(const okv_chat_template *t) { return t ? t->eos : NULL; }

/* "YYYY-MM-DDTHH:MM:SS" (or with a space) to a struct tm. */
static bool parse_now(const char *s, struct tm *tm) {
    int y, mo, d, h, mi, se;
    char sep;
    if (sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo, &d, &sep, &h, &mi, &se) != 7 || (sep != 'T' && sep != ' ') ||
        mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60)
        return false;
    memset(tm, 0, sizeof *tm);
    tm->tm_year = y - 1900;
    tm->tm_mon = mo - 1;
    tm->tm_mday = d;
    tm->tm_hour = h;
    tm->tm_min = mi;
    tm->tm_sec = se;
    tm->tm_isdst = -1;
    /* timegm fills the weekday and day of the year (%A, %j) without a time zone */
    time_t t = timegm(tm);
    struct tm back;
    if (t == (time_t)-1 || !gmtime_r(&t, &back)) return false;
    *tm = back;
    return true;
}

okv_status okv_chat_template_render(const okv_chat_template *t, const okv_chat_input *in, char **out,
                                    size_t *out_len, okv_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !in || !out || !in->messages_json)
        return okv_fail(err, OKV_ERR_INVALID, "chat template render: NULL %s",
                        !t ? "template" : !in ? "input" : !out ? "out" : "messages_json");
    okv_chat_limits lim = {16u << 20, 1000000, 100, 256u << 20, 10.0};
    if (in->limits) {
        if (in->limits->max_output) lim.max_output = in->limits->max_output;
        if (in->limits->max_iterations) lim.max_iterations = in->limits->max_iterations;
        if (in->limits->max_depth > 0) lim.max_depth = in->limits->max_depth;
        if (in->limits->max_memory) lim.max_memory = in->limits->max_memory;
        if (in->limits->max_seconds > 0) lim.max_seconds = in->limits->max_seconds;
    }
    struct tm now;
    if (in->now) {
        if (!parse_now(in->now, &now))
            return okv_fail(err, OKV_ERR_INVALID, "chat template render: now '%.40s' is not YYYY-MM-DDTHH:MM:SS", in->now);
    } else {
        time_t tt = time(NULL);
        if (!localtime_r(&tt, &now)) return okv_fail(err, OKV_ERR_INVALID, "chat template render: no local time");
    }
    jarena arena;
    okv_jarena_init(&arena, lim.max_memory);
    jfail f;
    memset(&f.err, 0, sizeof f.err);
    /* The input is JSON the caller gave: a failure there is the caller's
     * (INVALID); after it, the template's (FORMAT). */
    volatile bool in_template = false;
    if (setjmp(f.env)) {
        okv_status st = in_template ? OKV_ERR_FORMAT : OKV_ERR_INVALID;
        if (f.err.line)
            okv_fail(err, st, "line %d: %s", f.err.line, f.err.message);
        else
            okv_fail(err, st, "%s", f.err.message);
        okv_jarena_free(&arena);
        return st;
    }
    jv messages = okv_jinja_json_parse(&arena, &f, in->messages_json, strlen(in->messages_json), "messages");
    if (messages.kind != JV_LIST) okv_jinja_fail(&f, 0, "messages: expected a JSON array, got %s", okv_jv_type_name(messages));
    for (size_t i = 0; i < messages.u.l->n; i++)
        if (messages.u.l->v[i].kind != JV_DICT) okv_jinja_fail(&f, 0, "messages[%zu]: expected an object", i);
    jctx c = {.a = &arena, .f = &f};
    c.lim.max_output = lim.max_output;
    c.lim.max_iterations = lim.max_iterations;
    c.lim.max_depth = lim.max_depth;
    c.now = &now;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c.max_seconds = lim.max_seconds;
    c.deadline = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + lim.max_seconds;
    jscope *root = okv_jalloc(&arena, &f, sizeof *root);
    if (in->extra_json) {
        jv extra = okv_jinja_json_parse(&arena, &f, in->extra_json, strlen(in->extra_json), "extra variables");
        if (extra.kind != JV_DICT) okv_jinja_fail(&f, 0, "extra variables: expected a JSON object");
        for (size_t i = 0; i < extra.u.d->n; i++)
            okv_jscope_set(&c, root, okv_jstrdup(&arena, &f, extra.u.d->k[i].u.s.p, extra.u.d->k[i].u.s.n), extra.u.d->v[i]);
    }
    okv_jscope_set(&c, root, "messages", messages);
    if (in->tools_json) {
        jv tools = okv_jinja_json_parse(&arena, &f, in->tools_json, strlen(in->tools_json), "tools");
        if (tools.kind != JV_LIST && tools.kind != JV_NONE) okv_jinja_fail(&f, 0, "tools: expected a JSON array");
        okv_jscope_set(&c, root, "tools", tools);
    }
    okv_jscope_set(&c, root, "add_generation_prompt", okv_jv_bool(in->add_generation_prompt));
    okv_jscope_set(&c, root, "bos_token", okv_jv_cstr(t->bos));
    okv_jscope_set(&c, root, "eos_token", okv_jv_cstr(t->eos));
    in_template = true;
    jbuf buf = {0};
    okv_jbuf_put(&arena, &f, &buf, "", 0);
    c.out = &buf;
    okv_jinja_render(&c, t->body, t->n_body, root);
    char *text = malloc(buf.n + 1);
    if (!text) {
        okv_jarena_free(&arena);
        return okv_fail(err, OKV_ERR_NOMEM, "chat template render: out of memory for %zu bytes", buf.n);
    }
    memcpy(text, buf.p, buf.n);
    text[buf.n] = '\0';
    *out = text;
    if (out_len) *out_len = buf.n;
    okv_jarena_free(&arena);
    okv_error_clear(err);
    return OKV_OK;
}
