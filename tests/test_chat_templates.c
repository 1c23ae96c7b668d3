/* The 24 real chat templates of ../shared/templates over its 8
 * conversations: every render byte-identical to what Python's jinja2
 * rendered (expected/NAME.CASE.txt), and a raise wherever Python raised
 * (expected/NAME.CASE.error, whose message must be the template's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "check.h"
#include "offkv/chat.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) p[len] = '\0';
    if (n) *n = (size_t)len;
    return p;
}

static const char *field(jv obj, const char *key) {
    jv *v = okv_jv_dict_get(obj, key, strlen(key));
    return v && v->kind == JV_STR ? v->u.s.p : NULL;
}

/* JSON text of v (the reader below is the library's; the expected files
 * are Python's, so a reader bug shows as a mismatch, not a pass). */
static char *to_json(jarena *a, jv v) {
    jfail f;
    memset(&f.err, 0, sizeof f.err);
    if (setjmp(f.env)) return NULL;
    json_style st = {NULL, ", ", ": ", false};
    jbuf b = {0};
    okv_jinja_json_dump(a, &f, &b, v, &st, 0);
    return b.p;
}

static bool read_json(jarena *a, const char *text, jv *out) {
    jfail f;
    memset(&f.err, 0, sizeof f.err);
    if (setjmp(f.env)) {
        fprintf(stderr, "reading the test data: %s\n", f.err.message);
        return false;
    }
    *out = okv_jinja_json_parse(a, &f, text, strlen(text), "test data");
    return true;
}

/* The tool-call format each family's answers are read in (their model
 * cards and the calls their templates print in history). */
static const struct {
    const char *prefix, *format;
} formats[] = {
    {"Apertus", "apertus"},        {"CohereForAI", "command-r"},     {"HuggingFaceTB-SmolLM3", "content"},
    {"LFM2", "pythonic"},           {"Mistral-Small", "mistral"},     {"NousResearch", "hermes"},
    {"Qwen-QwQ", "hermes"},        {"Qwen-Qwen2.5", "hermes"},       {"Qwen-Qwen3-0.6B", "hermes"},
    {"Qwen3-Coder", "qwen3-coder"}, {"deepseek-ai", "deepseek"},     {"google-gemma-2", "content"},
    {"google-gemma-4", "generic"}, {"ibm-granite", "granite"},       {"meetkai-functionary", "llama3"},
    {"meta-llama", "llama3"},      {"microsoft-Phi", "content"},     {"mistralai", "mistral"},
    {"openai-gpt-oss", "gpt-oss"}, {"unsloth-mistral", "mistral"},
};

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("SKIP: ../shared is absent (set OKV_SHARED); the template renders were not checked\n");
        return CHECK_SKIP;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/templates/expected/index.json", shared);
    char *index_text = slurp(path, NULL);
    snprintf(path, sizeof path, "%s/templates/conversations.json", shared);
    char *conv_text = slurp(path, NULL);
    if (!index_text || !conv_text) {
        printf("SKIP: %s/templates is incomplete\n", shared);
        return CHECK_SKIP;
    }
    jarena a;
    okv_jarena_init(&a, (size_t)1 << 30);
    jv index, conv;
    if (!read_json(&a, index_text, &index) || !read_json(&a, conv_text, &conv)) return 1;
    jv cases = *okv_jv_dict_get(conv, "cases", 5), specials = *okv_jv_dict_get(conv, "specials", 8);
    int identical = 0, raised = 0, total = 0;
    const char *only = getenv("OKV_TEMPLATE_ONLY");
    for (size_t i = 0; i < index.u.l->n; i++) {
        jv e = index.u.l->v[i];
        const char *name = field(e, "template"), *case_name = field(e, "case"), *outcome = field(e, "outcome");
        if (only && !strstr(name, only)) continue;
        total++;
        jv cs = okv_jv_none();
        for (size_t k = 0; k < cases.u.l->n; k++)
            if (strcmp(field(cases.u.l->v[k], "name"), case_name) == 0) cs = cases.u.l->v[k];
        CHECK(cs.kind == JV_DICT, "case %s not in conversations.json", case_name);
        if (cs.kind != JV_DICT) continue;
        /* bos / eos: the longest matching prefix of specials */
        const char *bos = "<s>", *eos = "</s>";
        size_t best = 0;
        for (size_t k = 0; k < specials.u.d->n; k++) {
            jv key = specials.u.d->k[k];
            if (key.u.s.n > best && strncmp(name, key.u.s.p, key.u.s.n) == 0) {
                best = key.u.s.n;
                bos = specials.u.d->v[k].u.l->v[0].u.s.p;
                eos = specials.u.d->v[k].u.l->v[1].u.s.p;
            }
        }
        snprintf(path, sizeof path, "%s/templates/src/%s.jinja", shared, name);
        size_t src_n;
        char *src = slurp(path, &src_n);
        CHECK(src != NULL, "no %s", path);
        if (!src) continue;
        okv_error err;
        okv_chat_template *t = okv_chat_template_parse(src, src_n, &err);
        CHECK(t != NULL, "%s: %s", name, err.message);
        free(src);
        if (!t) continue;
        okv_chat_template_set_tokens(t, bos, eos, NULL);
        if (strcmp(case_name, "user") == 0) {
            const char *want_fmt = NULL;
            for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++)
                if (strncmp(name, formats[k].prefix, strlen(formats[k].prefix)) == 0) want_fmt = formats[k].format;
            const char *got_fmt = okv_chat_format_name(okv_chat_template_syntax(t, NULL).format);
            CHECK(want_fmt && strcmp(got_fmt, want_fmt) == 0, "%s: answers read as %s, want %s", name, got_fmt, want_fmt ? want_fmt : "?");
        }
        jv *tools = okv_jv_dict_get(cs, "tools", 5), *agp = okv_jv_dict_get(cs, "add_generation_prompt", 21);
        okv_chat_input in = {
            .messages_json = to_json(&a, *okv_jv_dict_get(cs, "messages", 8)),
            .tools_json = tools ? to_json(&a, *tools) : NULL,
            .add_generation_prompt = agp ? agp->u.b : true,
            .now = "2026-12-01T09:30:00",
        };
        char *out = NULL;
        size_t out_n = 0;
        okv_status st = okv_chat_template_render(t, &in, &out, &out_n, &err);
        snprintf(path, sizeof path, "%s/templates/expected/%s.%s.%s", shared, name, case_name,
                 strcmp(outcome, "ok") == 0 ? "txt" : "error");
        size_t want_n;
        char *want = slurp(path, &want_n);
        CHECK(want != NULL, "no %s", path);
        if (strcmp(outcome, "ok") == 0) {
            bool same = st == OKV_OK && want && out_n == want_n && memcmp(out, want, want_n) == 0;
            if (same) identical++;
            else if (st != OKV_OK)
                CHECK(false, "%s.%s: %s", name, case_name, err.message);
            else {
                size_t d = 0;
                while (d < out_n && d < want_n && out[d] == want[d]) d++;
                CHECK(false, "%s.%s: differs at byte %zu of %zu (want %zu): got '%.60s' want '%.60s'", name, case_name, d,
                      out_n, want_n, out + d, want ? want + d : "");
            }
        } else {
            /* "TemplateError: MESSAGE" */
            const char *msg = want ? strstr(want, ": ") : NULL;
            msg = msg ? msg + 2 : "";
            if (want && want_n && want[want_n - 1] == '\n') want[want_n - 1] = '\0';
            bool ok = st == OKV_ERR_FORMAT && strstr(err.message, msg) != NULL;
            if (ok) raised++;
            CHECK(ok, "%s.%s: want the raise '%s', got %s '%s'", name, case_name, msg, okv_status_name(st),
                  st == OKV_OK ? "(rendered)" : err.message);
        }
        free(want);
        free(out);
        okv_chat_template_free(t);
    }
    printf("%d of %d renders byte-identical, %d raised as Python did\n", identical, total, raised);
    okv_jarena_free(&a);
    free(index_text);
    free(conv_text);
    return check_done();
}
