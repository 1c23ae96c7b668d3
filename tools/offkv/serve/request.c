/* Request bodies, parsed by cJSON and checked field by field.  Whatever a
 * client sends ends here as either a complete srv_request or a 400 that
 * names the field; fields offkv does not know (user, metadata, ...) are
 * ignored, as OpenAI ignores them and the official clients send some by
 * default.  Constrained output (response_format, llama.cpp's grammar and
 * json_schema) becomes GBNF here, so a schema offkv cannot honour is a 400
 * naming the keyword before anything runs. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "offkv/grammar.h"
#include "serve.h"

void srv_utf8_clean(const char *s, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap;) {
        const unsigned char c = (unsigned char)s[i];
        int k = c == 0 ? -1 : c < 0x80 ? 0 : (c >= 0xC2 && c <= 0xDF) ? 1 : (c >= 0xE0 && c <= 0xEF) ? 2 : (c >= 0xF0 && c <= 0xF4) ? 3 : -1;
        bool ok = k >= 0 && i + (size_t)k < n;
        for (int j = 1; ok && j <= k; j++) ok = ((unsigned char)s[i + (size_t)j] & 0xC0) == 0x80;
        if (ok && k == 2) ok = !(c == 0xE0 && (unsigned char)s[i + 1] < 0xA0) && !(c == 0xED && (unsigned char)s[i + 1] > 0x9F);
        if (ok && k == 3) ok = !(c == 0xF0 && (unsigned char)s[i + 1] < 0x90) && !(c == 0xF4 && (unsigned char)s[i + 1] > 0x8F);
        if (!ok) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, s + i, (size_t)k + 1);
        o += (size_t)k + 1;
        i += (size_t)k + 1;
    }
    out[o] = '\0';
}

void srv_fail_set(srv_fail *f, int status, const char *type, const char *param, const char *fmt, ...) {
    f->status = status;
    f->allow = NULL;
    f->api = SRV_API_OPENAI;
    snprintf(f->type, sizeof f->type, "%s", type);
    snprintf(f->param, sizeof f->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
}

bool srv_bad(srv_fail *f, const char *param, const char *fmt, ...) {
    f->status = 400;
    f->allow = NULL;
    f->api = SRV_API_OPENAI;
    snprintf(f->type, sizeof f->type, "invalid_request_error");
    snprintf(f->param, sizeof f->param, "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    return false;
}

char *srv_error_json(const srv_fail *f) {
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    if (!e) {
        cJSON_Delete(root);
        return NULL;
    }
    /* A client's text quoted with %.Ns, or cut by the fields' sizes, may end
     * inside a character: the body must be UTF-8, so such bytes go out as
     * U+FFFD (the fields are C strings: no NUL inside). */
    char message[3 * sizeof f->message + 8], param[3 * sizeof f->param + 8];
    srv_utf8_clean(f->message, strlen(f->message), message, sizeof message);
    srv_utf8_clean(f->param, strlen(f->param), param, sizeof param);
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", f->type);
    if (param[0]) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

void srv_request_clear(srv_request *r) {
    for (int i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
    }
    free(r->msgs);
    for (int i = 0; i < r->n_prompts; i++) free(r->prompts[i]);
    free(r->prompts);
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->bias_ids);
    free(r->bias);
    free(r->grammar);
    free(r->think_message);
    free(r->input_prefix);
    free(r->input_suffix);
    for (int i = 0; i < r->n_extra; i++) {
        free(r->extra_names[i]);
        free(r->extra_texts[i]);
    }
    free(r->extra_names);
    free(r->extra_texts);
    srv_chat_request_clear(r);
    memset(r, 0, sizeof *r);
}

/* The length of the valid UTF-8 that starts s (at most len bytes): all of
 * it when s is valid.  Strings reach the tokenizer and come back inside our
 * JSON, and keys reach the template's reader, which refuses bad UTF-8, so
 * the whole body must be UTF-8 (as RFC 8259 asks of JSON text): cJSON
 * copies raw bytes as they are. */
static size_t utf8_prefix(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s, *e = p + len;
    while (p < e) {
        unsigned c = *p;
        int n;
        unsigned min;
        if (c < 0x80) { p++; continue; }
        if (c >= 0xC2 && c <= 0xDF) n = 1, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) n = 2, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) n = 3, min = 0x10000;
        else break;
        if (e - p <= n) break;
        unsigned cp = c & (0x3F >> n);
        bool cont = true;
        for (int i = 1; i <= n && cont; i++) {
            cont = (p[i] & 0xC0) == 0x80;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if (!cont || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) break;
        p += n + 1;
    }
    return (size_t)(p - (const unsigned char *)s);
}

static bool valid_utf8(const char *s) {
    const size_t n = strlen(s);
    return utf8_prefix(s, n) == n;
}

/* A string copy that must be valid UTF-8.  (An escaped \u0000 would end
 * cJSON's copy there and silently cut the text: no_nul refuses those
 * before any field is read.) */
static bool take_string(const cJSON *v, const char *param, char **out, srv_fail *f) {
    if (!cJSON_IsString(v) || !v->valuestring) return srv_bad(f, param, "'%s' must be a string", param);
    if (!valid_utf8(v->valuestring)) return srv_bad(f, param, "'%s' is not valid UTF-8", param);
    if (!(*out = strdup(v->valuestring))) return srv_bad(f, param, "out of memory for '%s'", param);
    return true;
}

/* An optional number in [lo, hi]; integral when integer is set.  A null
 * value means absent (the OpenAI clients send null for unset fields). */
static bool get_number(const cJSON *root, const char *param, double lo, double hi, bool integer, bool *given,
                       double *out, srv_fail *f) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, param);
    *given = false;
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v)) return srv_bad(f, param, "'%s' must be a number", param);
    const double x = v->valuedouble;
    if (!isfinite(x) || (integer && x != floor(x)))
        return srv_bad(f, param, "'%s' must be %s", param, integer ? "an integer" : "a finite number");
    if (x < lo || x > hi) return srv_bad(f, param, "'%s' is %g, outside %g..%g", param, x, lo, hi);
    *given = true;
    *out = x;
    return true;
}

static bool get_bool(const cJSON *root, const char *param, bool *out, srv_fail *f) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, param);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) return srv_bad(f, param, "'%s' must be true or false", param);
    *out = cJSON_IsTrue(v);
    return true;
}

/* A message's content: a string, null (an assistant turn without text), or
 * an array of parts of which only {"type":"text","text":...} carry text. */
static bool take_content(const cJSON *c, char **out, srv_fail *f) {
    if (!c || cJSON_IsNull(c)) return (*out = strdup("")) ? true : srv_bad(f, "messages", "out of memory");
    if (cJSON_IsString(c)) return take_string(c, "messages", out, f);
    if (!cJSON_IsArray(c)) return srv_bad(f, "messages", "a message's 'content' must be a string or an array of text parts");
    size_t n = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type"),
                    *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 ||
            !cJSON_IsString(text))
            return srv_bad(f, "messages", "a content part must be {\"type\": \"text\", \"text\": \"...\"}; offkv serves text only");
        if (!valid_utf8(text->valuestring)) return srv_bad(f, "messages", "a content part's 'text' is not valid UTF-8");
        n += strlen(text->valuestring);
    }
    char *s = malloc(n + 1);
    if (!s) return srv_bad(f, "messages", "out of memory");
    size_t at = 0;
    cJSON_ArrayForEach(part, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t k = strlen(t);
        memcpy(s + at, t, k);
        at += k;
    }
    s[at] = '\0';
    *out = s;
    return true;
}

static bool parse_messages(const cJSON *root, srv_request *r, srv_fail *f) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!ms) return srv_bad(f, "messages", "'messages' is required");
    if (!cJSON_IsArray(ms)) return srv_bad(f, "messages", "'messages' must be an array");
    const int n = cJSON_GetArraySize(ms);
    if (n < 1) return srv_bad(f, "messages", "'messages' must hold at least one message");
    if (n > 100000) return srv_bad(f, "messages", "'messages' holds %d messages, more than 100000", n);
    if (!(r->msgs = calloc((size_t)n, sizeof *r->msgs))) return srv_bad(f, "messages", "out of memory");
    const cJSON *m;
    cJSON_ArrayForEach(m, ms) {
        if (!cJSON_IsObject(m)) return srv_bad(f, "messages", "messages[%d] must be an object", r->n_msgs);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role))
            return srv_bad(f, "messages", "messages[%d].role must be a string", r->n_msgs);
        static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", NULL};
        int k = 0;
        while (roles[k] && strcmp(roles[k], role->valuestring) != 0) k++;
        if (!roles[k])
            return srv_bad(f, "messages", "messages[%d].role must be system, developer, user, assistant or tool",
                       r->n_msgs);
        /* "developer" is OpenAI's newer name for the system turn. */
        srv_message *out = &r->msgs[r->n_msgs++];
        if (!(out->role = strdup(k == 1 ? "system" : roles[k]))) return srv_bad(f, "messages", "out of memory");
        if (!take_content(cJSON_GetObjectItemCaseSensitive(m, "content"), &out->content, f)) return false;
    }
    return true;
}

static bool parse_prompt(const cJSON *root, srv_request *r, srv_fail *f) {
    /* OpenAI's suffix: the text after the completion, which then fills the
     * middle (each prompt the text before it, as /infill's input_prefix);
     * "" is none, as null (clients send it for "no suffix") */
    const cJSON *sx = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (sx && !cJSON_IsNull(sx) && !(cJSON_IsString(sx) && !sx->valuestring[0]) &&
        !take_string(sx, "suffix", &r->input_suffix, f))
        return false;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!p) return srv_bad(f, "prompt", "'prompt' is required");
    if (cJSON_IsString(p)) {
        if (!(r->prompts = calloc(1, sizeof *r->prompts))) return srv_bad(f, "prompt", "out of memory");
        if (!take_string(p, "prompt", &r->prompts[0], f)) return false;
        r->n_prompts = 1;
        return true;
    }
    if (!cJSON_IsArray(p)) return srv_bad(f, "prompt", "'prompt' must be a string or an array of strings");
    const int n = cJSON_GetArraySize(p);
    if (n < 1 || n > SRV_MAX_PROMPTS)
        return srv_bad(f, "prompt", "'prompt' holds %d strings; offkv takes 1 to %d", n, SRV_MAX_PROMPTS);
    if (!(r->prompts = calloc((size_t)n, sizeof *r->prompts))) return srv_bad(f, "prompt", "out of memory");
    const cJSON *s;
    cJSON_ArrayForEach(s, p) {
        if (!cJSON_IsString(s)) return srv_bad(f, "prompt", "'prompt' must be a string or an array of strings");
        if (!take_string(s, "prompt", &r->prompts[r->n_prompts], f)) return false;
        r->n_prompts++;
    }
    return true;
}

/* /infill (llama.cpp's): input_prefix and input_suffix, strings, required;
 * prompt, a string added after the prefix (the cursor's line so far;
 * default ""); input_extra, an array of {"filename": string, "text":
 * string} (filename default "tmp", as llama.cpp's). */
static bool parse_infill(const cJSON *root, srv_request *r, srv_fail *f) {
    static const char *const need[2] = {"input_prefix", "input_suffix"};
    char **dest[2] = {&r->input_prefix, &r->input_suffix};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, need[i]);
        if (!v || cJSON_IsNull(v)) return srv_bad(f, need[i], "'%s' is required", need[i]);
        if (!take_string(v, need[i], dest[i], f)) return false;
    }
    if (!(r->prompts = calloc(1, sizeof *r->prompts))) return srv_bad(f, "prompt", "out of memory");
    r->n_prompts = 1;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (p && !cJSON_IsNull(p)) {
        if (!take_string(p, "prompt", &r->prompts[0], f)) return false;
    } else if (!(r->prompts[0] = strdup(""))) {
        return srv_bad(f, "prompt", "out of memory");
    }
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "input_extra");
    if (!x || cJSON_IsNull(x)) return true;
    const char *shape = "'input_extra' must be an array of {\"filename\": string, \"text\": string}";
    if (!cJSON_IsArray(x)) return srv_bad(f, "input_extra", "%s", shape);
    const int n = cJSON_GetArraySize(x);
    if (n > SRV_MAX_INFILL_EXTRA)
        return srv_bad(f, "input_extra", "'input_extra' holds %d files, more than %d", n, SRV_MAX_INFILL_EXTRA);
    if (n == 0) return true;
    r->extra_names = calloc((size_t)n, sizeof *r->extra_names);
    r->extra_texts = calloc((size_t)n, sizeof *r->extra_texts);
    if (!r->extra_names || !r->extra_texts) return srv_bad(f, "input_extra", "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, x) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "filename"),
                    *text = cJSON_GetObjectItemCaseSensitive(e, "text");
        if (!cJSON_IsObject(e) || !cJSON_IsString(text) || (name && !cJSON_IsNull(name) && !cJSON_IsString(name)))
            return srv_bad(f, "input_extra", "%s (input_extra[%d] is not)", shape, r->n_extra);
        const int i = r->n_extra++;
        if (!take_string(text, "input_extra", &r->extra_texts[i], f)) return false;
        if (cJSON_IsString(name)) {
            if (!take_string(name, "input_extra", &r->extra_names[i], f)) return false;
        } else if (!(r->extra_names[i] = strdup("tmp"))) {
            return srv_bad(f, "input_extra", "out of memory");
        }
    }
    return true;
}

/* A stop string no longer than SRV_MAX_STOP_BYTES, into *out. */
static bool take_stop(const cJSON *s, char **out, srv_fail *f) {
    const size_t n = strlen(s->valuestring);
    if (n > SRV_MAX_STOP_BYTES)
        return srv_bad(f, "stop", "a 'stop' string is %zu bytes, more than %d", n, (int)SRV_MAX_STOP_BYTES);
    return take_string(s, "stop", out, f);
}

static bool parse_stop(const cJSON *root, srv_request *r, srv_fail *f) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (!s || cJSON_IsNull(s)) return true;
    if (cJSON_IsString(s)) {
        if (!s->valuestring[0]) return true;  /* "" stops nothing */
        if (!take_stop(s, &r->stops[0], f)) return false;
        r->n_stops = 1;
        return true;
    }
    if (!cJSON_IsArray(s)) return srv_bad(f, "stop", "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(s) > SRV_MAX_STOPS)
        return srv_bad(f, "stop", "'stop' holds %d strings, more than %d", cJSON_GetArraySize(s), SRV_MAX_STOPS);
    const cJSON *e;
    cJSON_ArrayForEach(e, s) {
        if (!cJSON_IsString(e)) return srv_bad(f, "stop", "'stop' must be a string or an array of strings");
        if (!e->valuestring[0]) continue;
        if (!take_stop(e, &r->stops[r->n_stops], f)) return false;
        r->n_stops++;
    }
    return true;
}

/* logit_bias: {"token id": bias, ...} (OpenAI), a bias false bans the
 * token (llama.cpp). */
static bool parse_logit_bias(const cJSON *root, srv_request *r, srv_fail *f) {
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    if (!lb || cJSON_IsNull(lb)) return true;
    if (!cJSON_IsObject(lb)) return srv_bad(f, "logit_bias", "'logit_bias' must be an object of token ids to numbers");
    const int n = cJSON_GetArraySize(lb);
    if (n > 1024) return srv_bad(f, "logit_bias", "'logit_bias' holds %d entries, more than 1024", n);
    if (n == 0) return true;
    r->bias_ids = malloc((size_t)n * sizeof *r->bias_ids);
    r->bias = malloc((size_t)n * sizeof *r->bias);
    if (!r->bias_ids || !r->bias) return srv_bad(f, "logit_bias", "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, lb) {
        char *end = NULL;
        /* digits only: strtol took " 5" and "+5" */
        const long id = e->string && e->string[0] >= '0' && e->string[0] <= '9' ? strtol(e->string, &end, 10) : -1;
        if (!e->string || !e->string[0] || id < 0 || *end || id > INT32_MAX)
            return srv_bad(f, "logit_bias", "'logit_bias' key '%.40s' is not a token id", e->string ? e->string : "");
        float b;
        if (cJSON_IsFalse(e)) b = -INFINITY;
        else if (cJSON_IsNumber(e) && isfinite(e->valuedouble) && e->valuedouble >= -100 && e->valuedouble <= 100)
            b = (float)e->valuedouble;
        else return srv_bad(f, "logit_bias", "'logit_bias' of token %ld must be a number in -100..100 (or false)", id);
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = b;
    }
    return true;
}

/* cJSON turns an escaped \u0000 into a NUL that ends its C string, so a
 * text holding one would be cut there without a word.  This scan of the
 * (already parsed, so well-formed) body finds such an escape in any string
 * and names the top-level field it is in.  It also refuses a raw control
 * byte in a string, which JSON forbids and cJSON takes (a raw NUL cut the
 * text the same way). */
static bool no_nul(const char *body, size_t len, srv_fail *f) {
    int depth = 0;
    bool in_str = false, expect_key = false, is_key = false;
    const char *key = "", *str_start = NULL;
    size_t key_len = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = body[i];
        if (in_str) {
            if (c == '\\') {
                if (i + 5 < len && body[i + 1] == 'u' && memcmp(body + i + 2, "0000", 4) == 0) {
                    char field[48] = "";
                    if (!(depth == 1 && is_key))
                        snprintf(field, sizeof field, "%.*s", (int)(key_len < 47 ? key_len : 47), key);
                    if (!field[0]) return srv_bad(f, "", "a key of the body holds a NUL character (\\u0000)");
                    return srv_bad(f, field, "'%s' holds a NUL character (\\u0000); offkv refuses it rather than cut the text "
                               "there", field);
                }
                i++; /* the escaped character (the four hex digits of a \u escape are plain) */
            } else if ((unsigned char)c < 0x20) {
                return srv_bad(f, "", "the body is not valid JSON: a raw control byte 0x%02X in a string (byte %zu); write it as "
                           "\\u%04X", (unsigned)(unsigned char)c, i, (unsigned)(unsigned char)c);
            } else if (c == '"') {
                in_str = false;
                if (depth == 1 && is_key) {
                    key = str_start;
                    key_len = (size_t)(body + i - str_start);
                }
            }
            continue;
        }
        if (c == '"') {
            in_str = true;
            is_key = depth == 1 && expect_key;
            expect_key = false;
            str_start = body + i + 1;
        } else if (c == '{' || c == '[') {
            depth++;
            expect_key = depth == 1 && c == '{';
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == ',' && depth == 1) {
            expect_key = true;
        }
    }
    return true;
}

/* Keeps GBNF text as the request's grammar, after checking that it parses
 * and that its matcher can start (a start past the matcher's bounds was a
 * 500 "out of memory" when the job was made); param names the field it
 * came from. */
bool srv_grammar_usable(const char *gbnf, size_t len, okv_error *err) {
    okv_grammar *g = okv_grammar_parse(gbnf, len, NULL, err);
    okv_grammar_matcher *m = g ? okv_grammar_matcher_create(g, err) : NULL;
    okv_grammar_matcher_free(m);
    okv_grammar_free(g);
    return m != NULL;
}

static bool set_grammar(srv_request *r, char *gbnf, const char *param, srv_fail *f) {
    if (!gbnf) return srv_bad(f, param, "out of memory");
    okv_error err;
    if (!srv_grammar_usable(gbnf, strlen(gbnf), &err)) {
        free(gbnf);
        return srv_bad(f, param, "'%s': %s", param, err.message);
    }
    r->grammar = gbnf;
    return true;
}

static bool schema_grammar(srv_request *r, const cJSON *schema, const char *param, srv_fail *f) {
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema)) return srv_bad(f, param, "'%s' must be a JSON Schema object", param);
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return srv_bad(f, param, "out of memory");
    okv_error err;
    char *gbnf = okv_json_schema_to_gbnf(text, strlen(text), &err);
    free(text);
    if (!gbnf) return srv_bad(f, param, "'%s': %s", param, err.message);
    return set_grammar(r, gbnf, param, f);
}

/* response_format, llama.cpp's grammar and json_schema: at most one. */
static bool parse_constraint(const cJSON *root, srv_request *r, srv_fail *f) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format"),
                *gr = cJSON_GetObjectItemCaseSensitive(root, "grammar"),
                *js = cJSON_GetObjectItemCaseSensitive(root, "json_schema");
    if (rf && cJSON_IsNull(rf)) rf = NULL;
    if (gr && cJSON_IsNull(gr)) gr = NULL;
    if (js && cJSON_IsNull(js)) js = NULL;
    if (!!rf + !!gr + !!js > 1) {
        /* A "text" response_format constrains nothing, so it may come with a grammar. */
        const cJSON *t = rf ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (!(rf && cJSON_IsString(t) && strcmp(t->valuestring, "text") == 0 && !!gr + !!js == 1))
            return srv_bad(f, gr ? "grammar" : "json_schema", "give at most one of 'response_format', 'grammar' and 'json_schema'");
        rf = NULL;
    }
    if (gr) {
        if (!cJSON_IsString(gr)) return srv_bad(f, "grammar", "'grammar' must be a string (GBNF)");
        char *g = NULL;
        if (!take_string(gr, "grammar", &g, f)) return false;
        if (!g[0]) {
            free(g);
            return true;
        }
        return set_grammar(r, g, "grammar", f);
    }
    if (js) return schema_grammar(r, js, "json_schema", f);
    if (!rf) return true;
    if (!cJSON_IsObject(rf)) return srv_bad(f, "response_format", "'response_format' must be an object");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsString(type)) return srv_bad(f, "response_format", "'response_format.type' must be a string");
    if (strcmp(type->valuestring, "text") == 0) return true;
    if (strcmp(type->valuestring, "json_object") == 0) {
        /* llama.cpp also takes a schema here. */
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(rf, "schema");
        if (sc && !cJSON_IsNull(sc)) return schema_grammar(r, sc, "response_format", f);
        return set_grammar(r, strdup(okv_gbnf_json_object()), "response_format", f);
    }
    if (strcmp(type->valuestring, "json_schema") == 0) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
        if (!cJSON_IsObject(o)) return srv_bad(f, "response_format", "'response_format.json_schema' must be an object");
        const cJSON *strict = cJSON_GetObjectItemCaseSensitive(o, "strict");
        if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict))
            return srv_bad(f, "response_format", "'response_format.json_schema.strict' must be true or false");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "schema");
        /* strict or not, the output follows the schema: offkv has no looser mode. */
        if (!sc || cJSON_IsNull(sc)) {
            cJSON *any = cJSON_CreateObject();
            bool ok = any && schema_grammar(r, any, "response_format", f);
            cJSON_Delete(any);
            return any ? ok : srv_bad(f, "response_format", "out of memory");
        }
        return schema_grammar(r, sc, "response_format", f);
    }
    return srv_bad(f, "response_format", "'response_format.type' must be text, json_object or json_schema, not '%.40s'",
               type->valuestring);
}

/* Sampling controls beyond temperature / top_k / top_p. */
static bool parse_controls(const cJSON *root, srv_request *r, srv_fail *f) {
    bool given;
    double x;
    r->controls.penalty_last_n = 64; /* llama.cpp server's repeat_last_n */
    if (!get_number(root, "presence_penalty", -2, 2, false, &given, &x, f)) return false;
    if (given) r->controls.presence_penalty = (float)x;
    if (!get_number(root, "frequency_penalty", -2, 2, false, &given, &x, f)) return false;
    if (given) r->controls.frequency_penalty = (float)x;
    if (!get_number(root, "repeat_penalty", 0, 100, false, &given, &x, f)) return false;
    if (given) r->controls.repeat_penalty = (float)x;
    if (!get_number(root, "repeat_last_n", -1, 1 << 30, true, &given, &x, f)) return false;
    if (given) r->controls.penalty_last_n = (int32_t)x;
    if (!get_number(root, "min_p", 0, 1, false, &given, &x, f)) return false;
    if (given) r->controls.min_p = (float)x;
    if (!parse_logit_bias(root, r, f)) return false;
    /* logprobs: chat takes true / false and top_logprobs 0..20; the legacy
     * completions endpoint takes the number of alternatives, 0..5. */
    r->top_logprobs = -1;
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
    if (lp && !cJSON_IsNull(lp)) {
        if (r->kind == SRV_CHAT) {
            if (!cJSON_IsBool(lp)) return srv_bad(f, "logprobs", "'logprobs' must be true or false");
            if (cJSON_IsTrue(lp)) r->top_logprobs = 0;
        } else {
            if (!get_number(root, "logprobs", 0, 5, true, &given, &x, f)) return false;
            r->top_logprobs = (int32_t)x;
        }
    }
    if (r->kind == SRV_CHAT) {
        if (!get_number(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, true, &given, &x, f)) return false;
        if (given) {
            if (r->top_logprobs < 0) return srv_bad(f, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
            r->top_logprobs = (int32_t)x;
        }
    }
    return parse_constraint(root, r, f);
}

/* A key given twice in one object: cJSON keeps both and lookups see the
 * first, so {"max_tokens":2,"max_tokens":-5} would pass with 2.  Refused,
 * naming the key.  Objects with many keys are checked after a sort, so a
 * body of 100 000 keys costs no more than its parse. */
static int name_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool no_duplicate_keys(const cJSON *node, srv_fail *f) {
    for (const cJSON *c = node->child; c; c = c->next)
        if ((cJSON_IsObject(c) || cJSON_IsArray(c)) && !no_duplicate_keys(c, f)) return false;
    if (!cJSON_IsObject(node)) return true;
    const int n = cJSON_GetArraySize(node);
    if (n < 2) return true;
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names) return srv_bad(f, "", "out of memory checking the body's keys");
    int k = 0;
    for (const cJSON *c = node->child; c; c = c->next) names[k++] = c->string ? c->string : "";
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    bool ok = true;
    for (int i = 1; i < n && ok; i++)
        if (strcmp(names[i - 1], names[i]) == 0) {
            char field[48];
            snprintf(field, sizeof field, "%s", names[i]);
            ok = srv_bad(f, field, "the key '%s' is given twice in one object; give it once", field);
        }
    free(names);
    return ok;
}

cJSON *srv_body_parse(const char *body, size_t len, srv_fail *f) {
    const char *end = NULL;
    const size_t good = utf8_prefix(body, len);
    if (good < len) {
        srv_bad(f, "", "the body is not valid UTF-8 (byte %zu)", good);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        srv_bad(f, "", "the body is not valid JSON (near byte %zu)",
            end && end >= body && end <= body + len ? (size_t)(end - body) : (size_t)0);
        return NULL;
    }
    /* cJSON stops after the first value: anything but white space after it is a malformed body. */
    for (const char *p = end; p && p < body + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            srv_bad(f, "", "the body has bytes after its JSON value (at byte %zu)", (size_t)(p - body));
            cJSON_Delete(root);
            return NULL;
        }
    if (!cJSON_IsObject(root)) srv_bad(f, "", "the body must be a JSON object");
    else if (no_nul(body, len, f) && no_duplicate_keys(root, f)) return root;
    cJSON_Delete(root);
    return NULL;
}

bool srv_request_parse(srv_kind kind, const char *body, size_t len, srv_request *r, srv_fail *f) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    cJSON *root = srv_body_parse(body, len, f);
    bool ok = false;
    if (!root) goto out;
    if (kind == SRV_CHAT     ? !parse_messages(root, r, f) || !srv_chat_request(root, r, f)
        : kind == SRV_INFILL ? !parse_infill(root, r, f)
                             : !parse_prompt(root, r, f))
        goto out;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model)) {
        srv_bad(f, "model", "'model' must be a string");
        goto out;
    }
    bool given, given2;
    double x, y;
    if (!get_number(root, "max_tokens", 1, 1 << 30, true, &given, &x, f)) goto out;
    if (!get_number(root, "max_completion_tokens", 1, 1 << 30, true, &given2, &y, f)) goto out;
    /* max_completion_tokens is the newer name; when both are sent it wins. */
    if (given2) r->max_tokens = (int32_t)y;
    else if (given) r->max_tokens = (int32_t)x;
    /* llama.cpp's name of it, -1 for no limit */
    if (!get_number(root, "n_predict", -1, 1 << 30, true, &given, &x, f)) goto out;
    if (given && x == 0) {
        srv_bad(f, "n_predict", "'n_predict' is 0; give -1 (no limit) or a count of 1 or more");
        goto out;
    }
    if (given) r->max_tokens = (int32_t)x;
    if (!get_number(root, "t_max_predict_ms", 0, 1e9, false, &given, &x, f)) goto out;
    if (given) r->max_predict_ms = x;
    /* llama.cpp's per-request reasoning budget (chat: the template's markup
     * says where reasoning is); -1 lifts the server's --reasoning-budget */
    r->think_budget = -2;
    if (kind == SRV_CHAT) {
        if (!get_number(root, "thinking_budget_tokens", -1, 1 << 30, true, &given, &x, f)) goto out;
        if (given) r->think_budget = (int32_t)x;
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(root, "thinking_budget_message");
        if (msg && !cJSON_IsNull(msg)) {
            if (!take_string(msg, "thinking_budget_message", &r->think_message, f)) goto out;
            if (strlen(r->think_message) > SRV_MAX_THINK_MESSAGE) {
                srv_bad(f, "thinking_budget_message", "'thinking_budget_message' is %zu bytes, more than %d",
                        strlen(r->think_message), SRV_MAX_THINK_MESSAGE);
                goto out;
            }
        }
    }
    if (!get_number(root, "temperature", 0, 2, false, &given, &x, f)) goto out;
    if (given) r->temperature = (float)x;
    if (!get_number(root, "top_p", 0, 1, false, &given, &x, f)) goto out;
    if (given) {
        if ((float)x <= 0.0f) {
            srv_bad(f, "top_p", "'top_p' is %g; it must be above 0 (and at most 1)", x);
            goto out;
        }
        r->top_p = (float)x;
    }
    if (!get_number(root, "top_k", 0, 1 << 30, true, &given, &x, f)) goto out;
    if (given) r->top_k = (int32_t)x;
    /* Seeds are integers as JSON numbers carry them: exact up to 2^53. */
    if (!get_number(root, "seed", -9007199254740992.0, 9007199254740992.0, true, &given, &x, f)) goto out;
    if (given) {
        r->has_seed = true;
        r->seed = (uint64_t)(int64_t)x;
    }
    r->n = 1;
    if (!get_number(root, "n", 1, SRV_MAX_PROMPTS, true, &given, &x, f)) goto out;
    if (given) r->n = (int32_t)x;
    if (r->n * (kind == SRV_CHAT ? 1 : r->n_prompts) > SRV_MAX_PROMPTS) {
        srv_bad(f, "n", "'n' %d times %d prompts is more than %d choices", (int)r->n, r->n_prompts, SRV_MAX_PROMPTS);
        goto out;
    }
    if (!parse_controls(root, r, f)) goto out;
    if (!parse_stop(root, r, f)) goto out;
    if (!get_bool(root, "stream", &r->stream, f)) goto out;
    if (!get_bool(root, "ignore_eos", &r->ignore_eos, f)) goto out;
    if (!get_bool(root, "return_progress", &r->return_progress, f)) goto out;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) {
            srv_bad(f, "stream_options", "'stream_options' must be an object");
            goto out;
        }
        if (!get_bool(so, "include_usage", &r->include_usage, f)) {
            snprintf(f->param, sizeof f->param, "stream_options.include_usage");
            goto out;
        }
    }
    ok = true;
out:
    cJSON_Delete(root);
    if (!ok) srv_request_clear(r);
    return ok;
}
