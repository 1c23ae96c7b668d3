/* offkv/chat.h's answer parsers: a model's generated text back into an
 * OpenAI message (content, reasoning_content, tool_calls), per family
 * markup.  JSON is checked with a scanner that also recognises a valid
 * prefix, so a partial parse (streaming) can return the call being written;
 * a complete call must parse as a whole, or its text stays content. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "core/error.h"
#include "offkv/chat.h"

/* ---- a growing message under construction ---- */

typedef struct pm {
    okv_chat_msg *m;
    jbuf content, reasoning;
    bool has_reasoning, failed;
    int cap;
    jarena *a;
    jfail *f;
} pm;

static void add_content(pm *p, const char *s, size_t n) { okv_jbuf_put(p->a, p->f, &p->content, s, n); }
/* Text after a call: a new line from the text before it (each piece comes
 * trimmed, so gluing them would join "check." and "Done" into one word). */
static void add_content_piece(pm *p, const char *s, size_t n) {
    if (p->content.n && n) add_content(p, "\n", 1);
    add_content(p, s, n);
}
static void add_reasoning(pm *p, const char *s, size_t n) {
    p->has_reasoning = true;
    okv_jbuf_put(p->a, p->f, &p->reasoning, s, n);
}

static char *dup_n(pm *p, const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) {
        p->failed = true;
        return NULL;
    }
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void add_call(pm *p, const char *id, size_t id_n, const char *name, size_t name_n, const char *args, size_t args_n,
                     bool complete) {
    okv_chat_msg *m = p->m;
    if (m->n_tool_calls == p->cap) {
        int cap = p->cap ? p->cap * 2 : 4;
        okv_chat_tool_call *c = realloc(m->tool_calls, (size_t)cap * sizeof *c);
        if (!c) {
            p->failed = true;
            return;
        }
        m->tool_calls = c;
        p->cap = cap;
    }
    okv_chat_tool_call *c = &m->tool_calls[m->n_tool_calls++];
    memset(c, 0, sizeof *c);
    c->id = id ? dup_n(p, id, id_n) : NULL;
    c->name = name ? dup_n(p, name, name_n) : NULL;
    c->arguments = dup_n(p, args ? args : "", args ? args_n : 0);
    c->complete = complete;
}

/* ---- text helpers ---- */

static bool ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static const char *find(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    return k <= n ? memmem(s, n, needle, k) : NULL;
}

static bool starts(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

/* The length of the longest suffix of s[0..n) that is a proper prefix of
 * one of markers: text that may become markup, held back while partial. */
static size_t held_suffix(const char *s, size_t n, const char *const *markers) {
    size_t best = 0;
    for (; *markers; markers++) {
        size_t k = strlen(*markers);
        for (size_t l = k - 1; l > best; l--)
            if (l <= n && memcmp(s + n - l, *markers, l) == 0) {
                best = l;
                break;
            }
    }
    return best;
}

static void trim(const char **s, size_t *n) {
    while (*n && ws(**s)) (*s)++, (*n)--;
    while (*n && ws((*s)[*n - 1])) (*n)--;
}

/* ---- JSON scanning ---- */

typedef enum { JS_DONE, JS_PARTIAL, JS_BAD } jscan;

static void skip_ws(const char *s, size_t n, size_t *i) {
    while (*i < n && ws(s[*i])) (*i)++;
}

static jscan scan_string(const char *s, size_t n, size_t *i) {
    (*i)++;
    while (*i < n) {
        unsigned char c = (unsigned char)s[*i];
        if (c == '"') {
            (*i)++;
            return JS_DONE;
        }
        if (c < 0x20) return JS_BAD;
        if (c == '\\') {
            if (++(*i) >= n) return JS_PARTIAL;
            char e = s[*i];
            if (e == 'u') {
                for (int k = 0; k < 4; k++) {
                    if (++(*i) >= n) return JS_PARTIAL;
                    char h = s[*i];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return JS_BAD;
                }
            } else if (!strchr("\"\\/bfnrt", e))
                return JS_BAD;
        }
        (*i)++;
    }
    return JS_PARTIAL;
}

static jscan scan_value(const char *s, size_t n, size_t *i, int depth) {
    if (depth > 64) return JS_BAD;
    skip_ws(s, n, i);
    if (*i >= n) return JS_PARTIAL;
    char c = s[*i];
    if (c == '"') return scan_string(s, n, i);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        (*i)++;
        skip_ws(s, n, i);
        if (*i >= n) return JS_PARTIAL;
        if (s[*i] == close) {
            (*i)++;
            return JS_DONE;
        }
        for (;;) {
            if (c == '{') {
                skip_ws(s, n, i);
                if (*i >= n) return JS_PARTIAL;
                if (s[*i] != '"') return JS_BAD;
                jscan k = scan_string(s, n, i);
                if (k != JS_DONE) return k;
                skip_ws(s, n, i);
                if (*i >= n) return JS_PARTIAL;
                if (s[(*i)++] != ':') return JS_BAD;
            }
            jscan v = scan_value(s, n, i, depth + 1);
            if (v != JS_DONE) return v;
            skip_ws(s, n, i);
            if (*i >= n) return JS_PARTIAL;
            if (s[*i] == ',') {
                (*i)++;
                continue;
            }
            if (s[*i] == close) {
                (*i)++;
                return JS_DONE;
            }
            return JS_BAD;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t start = *i;
        if (c == '-') (*i)++;
        if (*i >= n) return JS_PARTIAL;
        if (s[*i] < '0' || s[*i] > '9') return JS_BAD;
        if (s[*i] == '0') (*i)++;
        else
            while (*i < n && s[*i] >= '0' && s[*i] <= '9') (*i)++;
        if (*i < n && s[*i] == '.') {
            (*i)++;
            if (*i >= n) return JS_PARTIAL;
            if (s[*i] < '0' || s[*i] > '9') return JS_BAD;
            while (*i < n && s[*i] >= '0' && s[*i] <= '9') (*i)++;
        }
        if (*i < n && (s[*i] == 'e' || s[*i] == 'E')) {
            (*i)++;
            if (*i < n && (s[*i] == '+' || s[*i] == '-')) (*i)++;
            if (*i >= n) return JS_PARTIAL;
            if (s[*i] < '0' || s[*i] > '9') return JS_BAD;
            while (*i < n && s[*i] >= '0' && s[*i] <= '9') (*i)++;
        }
        (void)start;
        return *i >= n ? JS_PARTIAL : JS_DONE; /* digits may still come */
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t k = strlen(words[w]), avail = n - *i < k ? n - *i : k;
        if (memcmp(s + *i, words[w], avail) == 0) {
            *i += avail;
            return avail < k ? JS_PARTIAL : JS_DONE;
        }
    }
    return JS_BAD;
}

/* A complete JSON value at s[*i..]: its extent, or false (partial or bad). */
static jscan json_at(const char *s, size_t n, size_t *i, size_t *start) {
    skip_ws(s, n, i);
    *start = *i;
    return scan_value(s, n, i, 0);
}

/* The decoded text of a complete JSON string value. */
static char *json_string(pm *p, const char *s, size_t n) {
    jv v = okv_jinja_json_parse(p->a, p->f, s, n, "a tool call");
    return v.kind == JV_STR ? okv_jstrdup(p->a, p->f, v.u.s.p, v.u.s.n) : NULL;
}

/* ---- a call as a JSON object: {"name": ..., "arguments"/"parameters": {...}} ---- */

typedef struct obj_call {
    const char *name;   /* decoded, arena */
    const char *id;     /* decoded, arena, or NULL */
    const char *args;   /* raw JSON text of the arguments */
    size_t args_n;
    bool args_done;     /* the arguments value is complete */
} obj_call;

/* Reads the object at s[*i..] as a call.  JS_DONE: a complete call (the
 * object ends at *i); JS_PARTIAL: the object is a valid prefix (oc holds
 * what is known); JS_BAD: not a call. */
static jscan read_call_object(pm *p, const char *s, size_t n, size_t *i, obj_call *oc, int depth) {
    memset(oc, 0, sizeof *oc);
    skip_ws(s, n, i);
    if (*i >= n) return JS_PARTIAL;
    if (s[*i] != '{') return JS_BAD;
    size_t obj_start = *i;
    (*i)++;
    bool partial = false;
    for (bool first = true;; first = false) {
        skip_ws(s, n, i);
        if (*i >= n) {
            partial = true;
            break;
        }
        if (s[*i] == '}' && first) {
            (*i)++;
            break;
        }
        if (!first) {
            if (s[*i] == '}') {
                (*i)++;
                break;
            }
            if (s[*i] != ',') return JS_BAD;
            (*i)++;
            skip_ws(s, n, i);
            if (*i >= n) {
                partial = true;
                break;
            }
        }
        if (s[*i] != '"') return JS_BAD;
        size_t kstart = *i;
        jscan k = scan_string(s, n, i);
        if (k == JS_BAD) return JS_BAD;
        if (k == JS_PARTIAL) {
            partial = true;
            break;
        }
        const char *key = s + kstart + 1;
        size_t klen = *i - kstart - 2;
        skip_ws(s, n, i);
        if (*i >= n) {
            partial = true;
            break;
        }
        if (s[(*i)++] != ':') return JS_BAD;
        size_t vstart;
        jscan v = json_at(s, n, i, &vstart);
        if (v == JS_BAD) return JS_BAD;
        if (vstart >= n) { /* the value has not started */
            partial = true;
            break;
        }
        bool is_name = klen == 4 && !memcmp(key, "name", 4);
        bool is_args = (klen == 9 && !memcmp(key, "arguments", 9)) || (klen == 10 && !memcmp(key, "parameters", 10));
        bool is_id = klen == 2 && !memcmp(key, "id", 2);
        bool is_fn = klen == 8 && !memcmp(key, "function", 8);
        /* Any other key makes it an answer that happens to hold "name"
         * ({"name": "Bob", "age": 3} under a response_format), not a call
         * whose other keys would be lost. */
        if (!is_name && !is_args && !is_id && !is_fn && !(klen == 4 && !memcmp(key, "type", 4))) return JS_BAD;
        if (v == JS_DONE) {
            if ((is_name || is_id) && s[vstart] == '"') {
                char *str = json_string(p, s + vstart, *i - vstart);
                if (is_name) oc->name = str;
                else oc->id = str;
            } else if (is_args) {
                if (s[vstart] == '{') {
                    oc->args = s + vstart;
                    oc->args_n = *i - vstart;
                    oc->args_done = true;
                } else if (s[vstart] == '"') { /* arguments as a JSON string holding the object */
                    char *str = json_string(p, s + vstart, *i - vstart);
                    size_t k2 = 0, st2;
                    if (!str || str[0] != '{' || json_at(str, strlen(str), &k2, &st2) != JS_DONE) return JS_BAD;
                    skip_ws(str, strlen(str), &k2);
                    if (k2 != strlen(str)) return JS_BAD; /* '{"a": 1} trailing' is no object */
                    oc->args = str;
                    oc->args_n = strlen(str);
                    oc->args_done = true;
                } else
                    return JS_BAD;
            } else if (is_fn && s[vstart] == '{' && depth == 0) { /* OpenAI's {"function": {"name", "arguments"}} */
                size_t j = vstart;
                obj_call inner;
                if (read_call_object(p, s, *i, &j, &inner, 1) != JS_DONE) return JS_BAD;
                oc->name = inner.name;
                oc->args = inner.args;
                oc->args_n = inner.args_n;
                oc->args_done = inner.args_done;
            }
        } else { /* the value is being written */
            if (is_args && s[vstart] == '{') {
                oc->args = s + vstart;
                size_t end = n;
                while (end > vstart && ws(s[end - 1])) end--;
                oc->args_n = end - vstart;
            } else if (is_args && s[vstart] != '"')
                return JS_BAD;
            partial = true;
            break;
        }
    }
    if (partial) return JS_PARTIAL;
    /* a complete object: the whole must parse, and name a call */
    okv_jinja_json_parse(p->a, p->f, s + obj_start, *i - obj_start, "a tool call");
    if (!oc->name) return JS_BAD;
    if (!oc->args) {
        oc->args = "{}";
        oc->args_n = 2;
        oc->args_done = true;
    }
    return JS_DONE;
}

/* Parses an object as a call, failing (false) without a jump when the
 * JSON library rejects it. */
__attribute__((noinline)) static jscan call_object(pm *p, const char *s, size_t n, size_t *i, obj_call *oc) {
    jfail *const outer = p->f;
    jfail local;
    memset(&local.err, 0, sizeof local.err);
    p->f = &local;
    if (setjmp(local.env)) {
        p->f = outer;
        return JS_BAD;
    }
    jscan r = read_call_object(p, s, n, i, oc, 0);
    p->f = outer;
    return r;
}

/* okv_jinja_json_parse without a jump: false when s[0..n) is not JSON. */
__attribute__((noinline)) static bool try_json(pm *p, const char *s, size_t n, jv *out) {
    jfail *const outer = p->f;
    jfail local;
    memset(&local.err, 0, sizeof local.err);
    p->f = &local;
    if (setjmp(local.env)) {
        p->f = outer;
        return false;
    }
    *out = okv_jinja_json_parse(p->a, p->f, s, n, "a value");
    p->f = outer;
    return true;
}

static void emit_obj_call(pm *p, const obj_call *oc, bool complete) {
    add_call(p, oc->id, oc->id ? strlen(oc->id) : 0, oc->name, oc->name ? strlen(oc->name) : 0, oc->args,
             oc->args ? oc->args_n : 0, complete && oc->args_done);
}

/* The call object at *i of a list of them, which began at call_start: a
 * whole one is emitted (true: the list may go on); else the list ends
 * (false): a cut one is emitted as a call still being written (partial,
 * once its name is known and its arguments object has begun: before that
 * a key that makes it no call, {"name": "Bob", "age": 3}, may still come,
 * and a stream cannot take back a call it sent) or, in a finished answer,
 * kept with the rest as content, as a bad one is. */
static bool next_obj_call(pm *p, const char *s, size_t n, size_t *i, size_t call_start, bool partial) {
    obj_call oc;
    const jscan r = call_object(p, s, n, i, &oc);
    if (r == JS_DONE) {
        emit_obj_call(p, &oc, true);
        return true;
    }
    if (r == JS_PARTIAL && partial) {
        if (oc.name && oc.args) emit_obj_call(p, &oc, false);
    } else {
        add_content(p, s + call_start, n - call_start);
    }
    return false;
}

/* ---- reasoning in <think> tags ---- */

/* Splits off <think>...</think> (or, with think_open, text up to
 * </think>) into reasoning; returns the rest. */
static void split_think(pm *p, const okv_chat_syntax *syn, const char **s, size_t *n, bool partial) {
    const char *t = *s;
    size_t len = *n, k = 0;
    while (k < len && ws(t[k])) k++;
    bool open = syn->think_open;
    if (!open && starts(t + k, len - k, "<think>")) {
        open = true;
        t += k + 7;
        len -= k + 7;
    } else if (!open) {
        if (partial && k < len && len - k < 7 && memcmp(t + k, "<think>", len - k) == 0) *n = 0; /* may be <think> */
        return;
    }
    const char *end = find(t, len, "</think>");
    const char *r = t;
    size_t rn;
    if (end) {
        rn = (size_t)(end - t);
        *s = end + 8;
        *n = len - rn - 8;
        while (*n && ws(**s)) (*s)++, (*n)--;
    } else {
        static const char *const close[] = {"</think>", NULL};
        rn = len - (partial ? held_suffix(t, len, close) : 0);
        *s = t + len;
        *n = 0;
    }
    /* the reasoning without its framing newlines; while partial, only the
     * leading ones (trailing ones may be followed by more text) */
    while (rn && ws(*r)) r++, rn--;
    if (end || !partial)
        while (rn && ws(r[rn - 1])) rn--;
    add_reasoning(p, r, rn);
}

/* ---- formats ---- */

static void content_until(pm *p, const char *s, size_t n, bool partial, const char *const *markers) {
    size_t keep = partial ? n - held_suffix(s, n, markers) : n;
    add_content(p, s, keep);
}

/* Content, then calls each introduced by open and ended by close. */
static void parse_tagged_json(pm *p, const char *s, size_t n, bool partial, const char *open, const char *close) {
    const char *markers[] = {open, NULL};
    const char *at = find(s, n, open);
    if (!at) {
        content_until(p, s, n, partial, markers);
        return;
    }
    size_t pre = (size_t)(at - s);
    const char *body = s;
    size_t body_n = pre;
    while (body_n && ws(body[body_n - 1])) body_n--;
    add_content(p, body, body_n);
    size_t i = pre;
    while (i < n) {
        skip_ws(s, n, &i);
        if (i >= n) break;
        if (!starts(s + i, n - i, open)) {
            if (partial && n - i < strlen(open) && memcmp(s + i, open, n - i) == 0) break;
            /* text after a call: content again, up to the next call */
            const char *next = find(s + i, n - i, open);
            if (!next) {
                size_t keep = partial ? n - i - held_suffix(s + i, n - i, markers) : n - i;
                add_content_piece(p, s + i, keep);
                break;
            }
            size_t tn = (size_t)(next - (s + i));
            while (tn && ws(s[i + tn - 1])) tn--;
            add_content_piece(p, s + i, tn);
            i = (size_t)(next - s);
            continue;
        }
        size_t call_start = i;
        i += strlen(open);
        if (!next_obj_call(p, s, n, &i, call_start, partial)) break;
        skip_ws(s, n, &i);
        if (starts(s + i, n - i, close)) i += strlen(close);
        else if (i < n && partial && ((n - i < strlen(close) && memcmp(s + i, close, n - i) == 0) ||
                                      (n - i < strlen(open) && memcmp(s + i, open, n - i) == 0)))
            break; /* the close, or the next call, being written */
        /* else text (the loop's top reads it), the next call without a close
         * before it, or the end */
    }
}

/* Text after the generic answer's object (at i): content, not dropped. */
static void trailing_text(pm *p, const char *s, size_t n, size_t i) {
    skip_ws(s, n, &i);
    add_content_piece(p, s + i, n - i);
}

/* JSON call objects at the start (Llama 3's {"name", "parameters"} and the
 * generic form), separated by ; or whitespace. */
static bool parse_leading_objects(pm *p, const char *s, size_t n, bool partial, bool generic) {
    size_t i = 0;
    skip_ws(s, n, &i);
    if (i >= n || s[i] != '{') return false;
    if (generic) {
        /* {"tool_calls": [...]}, {"tool_call": {...}}, {"response": "..."} */
        size_t start = i, j = i;
        jscan r = json_at(s, n, &j, &start);
        if (r == JS_PARTIAL && partial) return true; /* hold it all back */
        jv v;
        if (r != JS_DONE || !try_json(p, s + start, j - start, &v) || v.kind != JV_DICT) return false;
        jv *resp = okv_jv_dict_get(v, "response", 8);
        if (resp && resp->kind == JV_STR && v.u.d->n == 1) {
            add_content(p, resp->u.s.p, resp->u.s.n);
            trailing_text(p, s, n, j);
            return true;
        }
        jv *calls = okv_jv_dict_get(v, "tool_calls", 10);
        jv *one = okv_jv_dict_get(v, "tool_call", 9);
        if (calls || one) {
            /* re-serialise each call's arguments, which sit inside the answer */
            jv list = calls ? *calls : okv_jv_none();
            size_t count = calls ? (calls->kind == JV_LIST ? calls->u.l->n : 0) : 1;
            if (calls && calls->kind != JV_LIST) return false;
            for (size_t k = 0; k < count; k++) {
                jv c = calls ? list.u.l->v[k] : *one;
                if (c.kind != JV_DICT) return false;
                jv *fn = okv_jv_dict_get(c, "function", 8);
                if (fn && fn->kind == JV_DICT) c = *fn;
                jv *name = okv_jv_dict_get(c, "name", 4), *args = okv_jv_dict_get(c, "arguments", 9);
                if (!args) args = okv_jv_dict_get(c, "parameters", 10);
                if (!name || name->kind != JV_STR || (args && args->kind != JV_DICT)) return false;
            }
            for (size_t k = 0; k < count; k++) {
                jv c = calls ? list.u.l->v[k] : *one;
                jv *fn = okv_jv_dict_get(c, "function", 8);
                if (fn && fn->kind == JV_DICT) c = *fn;
                jv *name = okv_jv_dict_get(c, "name", 4), *args = okv_jv_dict_get(c, "arguments", 9);
                if (!args) args = okv_jv_dict_get(c, "parameters", 10);
                jbuf b = {0};
                json_style st = {NULL, ", ", ": ", false};
                if (args) okv_jinja_json_dump(p->a, p->f, &b, *args, &st, 0);
                add_call(p, NULL, 0, name->u.s.p, name->u.s.n, args ? b.p : "{}", args ? b.n : 2, true);
            }
            trailing_text(p, s, n, j);
            return true;
        }
        /* else a bare call object, below */
    }
    size_t first = p->m->n_tool_calls;
    while (i < n) {
        obj_call oc;
        size_t call_start = i;
        jscan r = call_object(p, s, n, &i, &oc);
        if (r == JS_PARTIAL && partial) {
            if (oc.name && oc.args) emit_obj_call(p, &oc, false); /* as next_obj_call */
            return true;
        }
        if (r != JS_DONE) {
            if (p->m->n_tool_calls == (int)first) return false;
            add_content(p, s + call_start, n - call_start);
            return true;
        }
        emit_obj_call(p, &oc, true);
        skip_ws(s, n, &i);
        if (i < n && s[i] == ';') i++;
        skip_ws(s, n, &i);
    }
    return true;
}

/* name.call(key="value", ...) of Llama 3.1's built-in tools. */
static bool builtin_call(pm *p, const char *s, size_t n) {
    const char *dot = find(s, n, ".call(");
    if (!dot || s[n - 1] != ')') return false;
    const char *name = s;
    size_t name_n = (size_t)(dot - s);
    for (size_t k = 0; k < name_n; k++)
        if (!((name[k] >= 'a' && name[k] <= 'z') || (name[k] >= 'A' && name[k] <= 'Z') || (name[k] >= '0' && name[k] <= '9') || name[k] == '_'))
            return false;
    jv args = okv_jv_dict_new(p->a, p->f, 0);
    size_t i = (size_t)(dot - s) + 6, end = n - 1;
    while (i < end) {
        skip_ws(s, end, &i);
        size_t ks = i;
        while (i < end && s[i] != '=' && !ws(s[i])) i++;
        size_t kn = i - ks;
        skip_ws(s, end, &i);
        if (i >= end || s[i] != '=' || kn == 0) return false;
        i++;
        skip_ws(s, end, &i);
        if (i >= end || (s[i] != '"' && s[i] != '\'')) return false;
        char q = s[i++];
        size_t vs = i;
        while (i < end && s[i] != q) i += s[i] == '\\' ? 2 : 1;
        if (i >= end) return false;
        okv_jv_dict_set(p->a, p->f, args, okv_jv_str(okv_jstrdup(p->a, p->f, s + ks, kn), kn), okv_jv_str(okv_jstrdup(p->a, p->f, s + vs, i - vs), i - vs));
        i++;
        skip_ws(s, end, &i);
        if (i < end && s[i] == ',') i++;
    }
    jbuf b = {0};
    json_style st = {NULL, ", ", ": ", false};
    okv_jinja_json_dump(p->a, p->f, &b, args, &st, 0);
    add_call(p, NULL, 0, name, name_n, b.p, b.n, true);
    return true;
}

/* Llama 3.x: call objects at the start, or <|python_tag|> then a built-in
 * call, call objects or python code, or Functionary's <function=N>{...}.
 * The objects at the start are looked for first, then whichever tag comes
 * first, as while they were being written: a tag in the text after them
 * is content, so a stream's partial parses and the final one agree. */
static void parse_llama3(pm *p, const char *s, size_t n, bool partial) {
    static const char *const markers[] = {"<|python_tag|>", "<function=", NULL};
    if (parse_leading_objects(p, s, n, partial, false)) return;
    const char *tag = find(s, n, "<|python_tag|>"), *fn = find(s, n, "<function=");
    if (tag && fn && fn < tag) tag = NULL; /* the first one read decides, as it did while partial */
    if (tag) {
        size_t pre = (size_t)(tag - s);
        add_content(p, s, pre);
        const char *body = tag + 14;
        size_t bn = n - pre - 14;
        trim(&body, &bn);
        if (partial) return; /* built-in and python calls are sent whole */
        if (bn && body[0] == '{' && parse_leading_objects(p, body, bn, false, false)) return;
        if (bn && builtin_call(p, body, bn)) return;
        /* code for the python tool */
        jv args = okv_jv_dict_new(p->a, p->f, 1);
        okv_jv_dict_set(p->a, p->f, args, okv_jv_cstr("code"), okv_jv_str(body, bn));
        jbuf b = {0};
        json_style st = {NULL, ", ", ": ", false};
        okv_jinja_json_dump(p->a, p->f, &b, args, &st, 0);
        add_call(p, NULL, 0, "python", 6, b.p, b.n, true);
        return;
    }
    if (fn) { /* Functionary v3.1: <function=NAME>{...}</function> */
        size_t pre = (size_t)(fn - s);
        add_content(p, s, pre);
        size_t i = pre;
        while (i < n && starts(s + i, n - i, "<function=")) {
            size_t call_start = i;
            i += 10;
            const char *gt = memchr(s + i, '>', n - i);
            if (!gt) {
                if (!partial) add_content(p, s + call_start, n - call_start);
                return;
            }
            const char *name = s + i;
            size_t name_n = (size_t)(gt - name);
            i = (size_t)(gt - s) + 1;
            size_t start;
            jscan r = json_at(s, n, &i, &start);
            if (r == JS_PARTIAL && partial) {
                size_t end = n;
                while (end > start && ws(s[end - 1])) end--;
                add_call(p, NULL, 0, name, name_n, s + start, end - start, false);
                return;
            }
            if (r != JS_DONE || s[start] != '{') {
                /* content; while partial, not a <|python_tag|> being written */
                content_until(p, s + call_start, n - call_start, partial, markers);
                return;
            }
            add_call(p, NULL, 0, name, name_n, s + start, i - start, true);
            skip_ws(s, n, &i);
            if (starts(s + i, n - i, "</function>")) i += 11;
            else if (partial && n - i < 11 && memcmp(s + i, "</function>", n - i) == 0)
                return;
            skip_ws(s, n, &i);
        }
        if (i < n && !(partial && held_suffix(s + i, n - i, markers) == n - i)) add_content(p, s + i, n - i);
        return;
    }
    content_until(p, s, n, partial, markers);
}

static void parse_mistral(pm *p, const char *s, size_t n, bool partial) {
    static const char *const markers[] = {"[TOOL_CALLS]", NULL};
    const char *at = find(s, n, "[TOOL_CALLS]");
    if (!at) {
        content_until(p, s, n, partial, markers);
        return;
    }
    size_t pre = (size_t)(at - s), i = pre;
    size_t cn = pre;
    while (cn && ws(s[cn - 1])) cn--;
    add_content(p, s, cn);
    while (i < n) {
        skip_ws(s, n, &i);
        if (starts(s + i, n - i, "[TOOL_CALLS]")) i += 12;
        else if (i < n && partial && memcmp(s + i, "[TOOL_CALLS]", n - i < 12 ? n - i : 12) == 0)
            return;
        else if (i > pre) {
            if (i < n) add_content(p, s + i, n - i);
            return;
        }
        skip_ws(s, n, &i);
        if (i >= n) return;
        size_t call_start = i;
        if (s[i] == '[') { /* [{"name", "arguments", "id"}, ...] */
            i++;
            for (;;) {
                if (!next_obj_call(p, s, n, &i, call_start, partial)) return;
                skip_ws(s, n, &i);
                if (i < n && s[i] == ',') {
                    i++;
                    continue;
                }
                if (i < n && s[i] == ']') i++;
                break;
            }
            continue;
        }
        /* NAME[ARGS]{...} (or NAME[CALL_ID]ID[ARGS]{...}) */
        const char *args_at = find(s + i, n - i, "[ARGS]");
        if (!args_at) {
            if (!partial) add_content(p, s + call_start, n - call_start);
            return;
        }
        const char *name = s + i, *id = NULL;
        size_t name_n = (size_t)(args_at - name), id_n = 0;
        const char *cid = find(name, name_n, "[CALL_ID]");
        if (cid) {
            id = cid + 9;
            id_n = (size_t)(args_at - id);
            name_n = (size_t)(cid - name);
        }
        i = (size_t)(args_at - s) + 6;
        size_t start;
        jscan r = json_at(s, n, &i, &start);
        if (r == JS_PARTIAL && partial) {
            size_t end = n;
            while (end > start && ws(s[end - 1])) end--;
            add_call(p, id, id_n, name, name_n, s + start, end - start, false);
            return;
        }
        if (r != JS_DONE || s[start] != '{') {
            add_content(p, s + call_start, n - call_start);
            return;
        }
        add_call(p, id, id_n, name, name_n, s + start, i - start, true);
    }
}

static void parse_qwen3_coder(pm *p, const char *s, size_t n, bool partial) {
    static const char *const markers[] = {"<tool_call>", NULL};
    const char *at = find(s, n, "<tool_call>");
    if (!at) {
        content_until(p, s, n, partial, markers);
        return;
    }
    size_t pre = (size_t)(at - s);
    size_t cn = pre;
    while (cn && ws(s[cn - 1])) cn--;
    add_content(p, s, cn);
    size_t i = pre;
    while (i < n) {
        skip_ws(s, n, &i);
        if (i >= n) return;
        size_t call_start = i;
        const char *end = starts(s + i, n - i, "<tool_call>") ? find(s + i, n - i, "</tool_call>") : NULL;
        if (!end) { /* calls are sent once whole */
            if (!partial && i < n) add_content(p, s + i, n - i);
            return;
        }
        const char *b = s + i + 11;
        size_t bn = (size_t)(end - b);
        trim(&b, &bn);
        if (!starts(b, bn, "<function=")) {
            add_content(p, s + call_start, n - call_start);
            return;
        }
        const char *gt = memchr(b, '>', bn);
        if (!gt) {
            add_content(p, s + call_start, n - call_start);
            return;
        }
        const char *name = b + 10;
        size_t name_n = (size_t)(gt - name);
        jv args = okv_jv_dict_new(p->a, p->f, 0); /* name -> the value as JSON text */
        json_style st = {NULL, ", ", ": ", false};
        size_t k = (size_t)(gt - b) + 1;
        for (;;) {
            skip_ws(b, bn, &k);
            if (!starts(b + k, bn - k, "<parameter=")) break;
            k += 11;
            const char *pgt = memchr(b + k, '>', bn - k);
            const char *pend = pgt ? find(pgt, bn - (size_t)(pgt - b), "</parameter>") : NULL;
            if (!pend) break;
            const char *key = b + k;
            size_t key_n = (size_t)(pgt - key);
            const char *val = pgt + 1;
            size_t val_n = (size_t)(pend - val);
            if (val_n && val[0] == '\n') val++, val_n--;
            if (val_n && val[val_n - 1] == '\n') val_n--;
            /* a value that reads as JSON (a number, true, an object ...) is
             * that value, its text kept as written (1e999 or a 30-digit
             * integer stay exact; a double would make them Infinity or
             * round them); anything else is a string */
            const char *jt = val;
            size_t jn = val_n;
            trim(&jt, &jn);
            jv parsed;
            jbuf text = {0};
            if (jn && jt[0] != '"' && try_json(p, jt, jn, &parsed)) okv_jbuf_put(p->a, p->f, &text, jt, jn);
            else okv_jinja_json_dump(p->a, p->f, &text, okv_jv_str(val, val_n), &st, 0);
            okv_jv_dict_set(p->a, p->f, args, okv_jv_str(okv_jstrdup(p->a, p->f, key, key_n), key_n),
                            okv_jv_str(text.p, text.n));
            k = (size_t)(pend - b) + 12;
        }
        jbuf out = {0};
        okv_jbuf_putc(p->a, p->f, &out, '{');
        for (size_t e = 0; e < args.u.d->n; e++) {
            if (e) okv_jbuf_puts(p->a, p->f, &out, ", ");
            okv_jinja_json_dump(p->a, p->f, &out, args.u.d->k[e], &st, 0);
            okv_jbuf_puts(p->a, p->f, &out, ": ");
            okv_jbuf_put(p->a, p->f, &out, args.u.d->v[e].u.s.p, args.u.d->v[e].u.s.n);
        }
        okv_jbuf_putc(p->a, p->f, &out, '}');
        add_call(p, NULL, 0, name, name_n, out.p, out.n, true);
        i = (size_t)(end - s) + 12;
    }
}

static void parse_deepseek(pm *p, const char *s, size_t n, bool partial) {
    static const char *const markers[] = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", NULL};
    const char *at = find(s, n, "<｜tool▁call▁begin｜>");
    const char *calls_at = find(s, n, "<｜tool▁calls▁begin｜>");
    if (!at) {
        /* the calls' opener alone: while partial, the text before it is
         * shown whole (no marker is being written there) and what follows
         * waits for a call */
        if (calls_at && partial) add_content(p, s, (size_t)(calls_at - s));
        else content_until(p, s, n, partial, markers);
        return;
    }
    const char *pre_end = calls_at && calls_at < at ? calls_at : at;
    size_t cn = (size_t)(pre_end - s);
    while (cn && ws(s[cn - 1])) cn--;
    add_content(p, s, cn);
    /* a call that does not parse is content from here on: the text after
     * the last good call, or after the content (the openers included) */
    const char *from = s + cn;
    const char *cur = at;
    while (cur) {
        const char *b = cur + strlen("<｜tool▁call▁begin｜>");
        const char *end = find(b, n - (size_t)(b - s), "<｜tool▁call▁end｜>");
        if (!end) {
            if (!partial) add_content(p, from, n - (size_t)(from - s));
            return;
        }
        const char *sep = find(b, (size_t)(end - b), "<｜tool▁sep｜>");
        if (!sep) {
            add_content(p, from, n - (size_t)(from - s));
            return;
        }
        const char *name = b, *json = sep + strlen("<｜tool▁sep｜>");
        size_t name_n = (size_t)(sep - b), json_n = (size_t)(end - json);
        if (name_n == 8 && !memcmp(name, "function", 8)) { /* R1: function<sep>NAME\n```json\n{...}\n``` */
            const char *nl = memchr(json, '\n', json_n);
            if (!nl) {
                add_content(p, from, n - (size_t)(from - s));
                return;
            }
            name = json;
            name_n = (size_t)(nl - json);
            json = nl + 1;
            json_n = (size_t)(end - json);
            if (starts(json, json_n, "```json")) json += 7, json_n -= 7;
            trim(&json, &json_n);
            if (json_n >= 3 && !memcmp(json + json_n - 3, "```", 3)) json_n -= 3;
        }
        trim(&json, &json_n);
        trim(&name, &name_n);
        size_t j = 0, st;
        if (!json_n || json[0] != '{' || json_at(json, json_n, &j, &st) != JS_DONE || j != json_n) {
            add_content(p, from, n - (size_t)(from - s));
            return;
        }
        add_call(p, NULL, 0, name, name_n, json, json_n, true);
        from = end + strlen("<｜tool▁call▁end｜>");
        cur = find(end, n - (size_t)(end - s), "<｜tool▁call▁begin｜>");
    }
}

/* A marker, then a JSON array of calls, then (optionally) an end marker:
 * Granite [{"name", "arguments"}], Command R [{"tool_call_id",
 * "tool_name", "parameters"}], Apertus [{"NAME": {arguments}}].  Calls are
 * returned once the array is whole. */
static void parse_marked_array(pm *p, const char *s, size_t n, bool partial, const char *open, const char *close, int shape) {
    const char *markers[] = {open, NULL};
    const char *at = find(s, n, open);
    if (!at) {
        content_until(p, s, n, partial, markers);
        return;
    }
    size_t pre = (size_t)(at - s), cn = pre;
    while (cn && ws(s[cn - 1])) cn--;
    add_content(p, s, cn);
    size_t i = pre + strlen(open), start;
    jscan r = json_at(s, n, &i, &start);
    if (r == JS_PARTIAL && partial) return;
    jv arr;
    if (r != JS_DONE || !try_json(p, s + start, i - start, &arr) || arr.kind != JV_LIST) {
        add_content(p, s + pre, n - pre);
        return;
    }
    for (size_t k = 0; k < arr.u.l->n; k++) { /* every element must be a call */
        jv c = arr.u.l->v[k];
        if (c.kind != JV_DICT) goto not_calls;
        if (shape == 2) {
            if (c.u.d->n != 1 || c.u.d->k[0].kind != JV_STR || c.u.d->v[0].kind != JV_DICT) goto not_calls;
            continue;
        }
        jv *name = okv_jv_dict_get(c, shape == 1 ? "tool_name" : "name", shape == 1 ? 9 : 4);
        jv *args = okv_jv_dict_get(c, shape == 1 ? "parameters" : "arguments", shape == 1 ? 10 : 9);
        if (!name || name->kind != JV_STR || (args && args->kind != JV_DICT)) goto not_calls;
    }
    json_style st = {NULL, ", ", ": ", false};
    for (size_t k = 0; k < arr.u.l->n; k++) {
        jv c = arr.u.l->v[k], name, args;
        if (shape == 2) {
            name = c.u.d->k[0];
            args = c.u.d->v[0];
        } else {
            name = *okv_jv_dict_get(c, shape == 1 ? "tool_name" : "name", shape == 1 ? 9 : 4);
            jv *a = okv_jv_dict_get(c, shape == 1 ? "parameters" : "arguments", shape == 1 ? 10 : 9);
            args = a ? *a : okv_jv_dict_new(p->a, p->f, 0);
        }
        jbuf b = {0};
        okv_jinja_json_dump(p->a, p->f, &b, args, &st, 0);
        add_call(p, NULL, 0, name.u.s.p, name.u.s.n, b.p, b.n, true);
    }
    skip_ws(s, n, &i);
    if (close && starts(s + i, n - i, close)) i += strlen(close);
    skip_ws(s, n, &i);
    if (i < n && !(partial && close && n - i < strlen(close) && memcmp(s + i, close, n - i) == 0)) add_content(p, s + i, n - i);
    return;
not_calls:
    add_content(p, s + pre, n - pre);
}

/* A Python literal (a string in either quotes, a number, True / False /
 * None, a list, a dict) as a value; false when s[*i..] is not one. */
static bool py_value(pm *p, const char *s, size_t n, size_t *i, int depth, jv *out) {
    skip_ws(s, n, i);
    if (*i >= n || depth > 32) return false;
    char c = s[*i];
    if (c == '"' || c == '\'') {
        jbuf b = {0};
        okv_jbuf_put(p->a, p->f, &b, "", 0);
        for ((*i)++; *i < n && s[*i] != c; (*i)++) {
            char ch = s[*i];
            if (ch == '\\' && *i + 1 < n) {
                ch = s[++(*i)];
                ch = ch == 'n' ? '\n' : ch == 't' ? '\t' : ch == 'r' ? '\r' : ch;
            }
            okv_jbuf_putc(p->a, p->f, &b, ch);
        }
        if (*i >= n) return false;
        (*i)++;
        *out = okv_jv_str(b.p, b.n);
        return true;
    }
    if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        *out = c == '[' ? okv_jv_list_new(p->a, p->f, 0) : okv_jv_dict_new(p->a, p->f, 0);
        (*i)++;
        for (bool first = true;; first = false) {
            skip_ws(s, n, i);
            if (*i < n && s[*i] == close) {
                (*i)++;
                return true;
            }
            if (!first) {
                if (*i >= n || s[*i] != ',') return false;
                (*i)++;
                skip_ws(s, n, i);
                if (*i < n && s[*i] == close) continue; /* a trailing comma */
            }
            jv k, v;
            if (!py_value(p, s, n, i, depth + 1, &k)) return false;
            if (c == '[') {
                okv_jv_list_push(p->a, p->f, *out, k);
                continue;
            }
            skip_ws(s, n, i);
            if (*i >= n || s[*i] != ':') return false;
            (*i)++;
            if (!py_value(p, s, n, i, depth + 1, &v)) return false;
            okv_jv_dict_set(p->a, p->f, *out, k, v);
        }
    }
    static const char *const words[] = {"True", "False", "None"};
    for (int w = 0; w < 3; w++)
        if (starts(s + *i, n - *i, words[w])) {
            *i += strlen(words[w]);
            *out = w == 2 ? okv_jv_none() : okv_jv_bool(w == 0);
            return true;
        }
    size_t st = *i;
    if (*i < n && (s[*i] == '-' || s[*i] == '+')) (*i)++;
    bool is_float = false;
    while (*i < n && ((s[*i] >= '0' && s[*i] <= '9') || s[*i] == '.' || s[*i] == 'e' || s[*i] == 'E' ||
                      ((s[*i] == '-' || s[*i] == '+') && (s[*i - 1] == 'e' || s[*i - 1] == 'E')))) {
        if (s[*i] < '0' || s[*i] > '9') is_float = true;
        (*i)++;
    }
    if (*i == st || *i - st > 40) return false;
    char num[48];
    memcpy(num, s + st, *i - st);
    num[*i - st] = '\0';
    char *end;
    errno = 0;
    if (!is_float) {
        long long v = strtoll(num, &end, 10);
        if (errno == ERANGE) return false; /* past 64 bits: not clamped to LLONG_MAX, the call stays text */
        *out = okv_jv_int(v);
    } else {
        double d = strtod(num, &end);
        if (isinf(d)) return false; /* JSON has no Infinity */
        *out = okv_jv_float(d);
    }
    return *end == '\0';
}

/* LFM2's pythonic calls: <|tool_call_start|>[f(a="x", b=1), g()]<|tool_call_end|>. */
static void parse_pythonic(pm *p, const char *s, size_t n, bool partial) {
    static const char *const markers[] = {"<|tool_call_start|>", NULL};
    const char *at = find(s, n, "<|tool_call_start|>");
    if (!at) {
        content_until(p, s, n, partial, markers);
        return;
    }
    size_t pre = (size_t)(at - s), cn = pre;
    while (cn && ws(s[cn - 1])) cn--;
    add_content(p, s, cn);
    const char *end = find(at, n - pre, "<|tool_call_end|>");
    if (!end && partial) return; /* calls are returned whole */
    size_t stop = end ? (size_t)(end - s) : n, i = pre + 19;
    skip_ws(s, stop, &i);
    if (i >= stop || s[i] != '[') goto not_calls;
    i++;
    jv names = okv_jv_list_new(p->a, p->f, 0), args = okv_jv_list_new(p->a, p->f, 0);
    for (bool first = true;; first = false) {
        skip_ws(s, stop, &i);
        if (i < stop && s[i] == ']') {
            i++;
            break;
        }
        if (!first) {
            if (i >= stop || s[i] != ',') goto not_calls;
            i++;
            skip_ws(s, stop, &i);
        }
        size_t ns = i;
        while (i < stop && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                            s[i] == '_' || s[i] == '.' || s[i] == '-'))
            i++;
        if (i == ns || i >= stop || s[i] != '(') goto not_calls;
        okv_jv_list_push(p->a, p->f, names, okv_jv_str(s + ns, i - ns));
        i++;
        jv a = okv_jv_dict_new(p->a, p->f, 0);
        for (bool f2 = true;; f2 = false) {
            skip_ws(s, stop, &i);
            if (i < stop && s[i] == ')') {
                i++;
                break;
            }
            if (!f2) {
                if (i >= stop || s[i] != ',') goto not_calls;
                i++;
                skip_ws(s, stop, &i);
            }
            size_t ks = i;
            while (i < stop && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                i++;
            size_t kn = i - ks;
            skip_ws(s, stop, &i);
            if (!kn || i >= stop || s[i] != '=') goto not_calls;
            i++;
            jv v;
            if (!py_value(p, s, stop, &i, 0, &v)) goto not_calls;
            okv_jv_dict_set(p->a, p->f, a, okv_jv_str(s + ks, kn), v);
        }
        okv_jv_list_push(p->a, p->f, args, a);
    }
    skip_ws(s, stop, &i);
    if (i != stop) goto not_calls;
    json_style st = {NULL, ", ", ": ", false};
    for (size_t k = 0; k < names.u.l->n; k++) {
        jbuf b = {0};
        okv_jinja_json_dump(p->a, p->f, &b, args.u.l->v[k], &st, 0);
        add_call(p, NULL, 0, names.u.l->v[k].u.s.p, names.u.l->v[k].u.s.n, b.p, b.n, true);
    }
    if (end) {
        size_t after = (size_t)(end - s) + 17;
        skip_ws(s, n, &after);
        if (after < n) add_content(p, s + after, n - after);
    }
    return;
not_calls:
    add_content(p, s + pre, n - pre);
}

/* Command R7B: <|START_THINKING|>...<|END_THINKING|>, then
 * <|START_ACTION|>[calls]<|END_ACTION|> or <|START_RESPONSE|>...<|END_RESPONSE|>. */
static void parse_command_r(pm *p, const char *s, size_t n, bool partial) {
    static const char *const markers[] = {"<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>", "<|START_RESPONSE|>",
                                          "<|END_RESPONSE|>", NULL};
    size_t i = 0;
    skip_ws(s, n, &i);
    if (starts(s + i, n - i, "<|START_THINKING|>")) {
        i += 18;
        const char *end = find(s + i, n - i, "<|END_THINKING|>");
        size_t rn = end ? (size_t)(end - (s + i)) : n - i - (partial ? held_suffix(s + i, n - i, markers) : 0);
        const char *r = s + i;
        while (rn && ws(*r)) r++, rn--;
        if (end || !partial)
            while (rn && ws(r[rn - 1])) rn--;
        add_reasoning(p, r, rn);
        if (!end) return;
        i = (size_t)(end - s) + 16;
        skip_ws(s, n, &i);
    }
    if (starts(s + i, n - i, "<|START_RESPONSE|>")) {
        i += 18;
        const char *end = find(s + i, n - i, "<|END_RESPONSE|>");
        if (end) add_content(p, s + i, (size_t)(end - (s + i)));
        else content_until(p, s + i, n - i, partial, markers);
        return;
    }
    if (partial && n - i < 18 && held_suffix(s + i, n - i, markers) == n - i) return;
    parse_marked_array(p, s + i, n - i, partial, "<|START_ACTION|>", "<|END_ACTION|>", 1);
}

/* Where harmony's first header begins in s[0..n) (n: nowhere yet): at a
 * recipient that opens the answer, or at the first <|start|>, <|channel|>
 * or <|message|>. */
static size_t gpt_oss_first_header(const char *s, size_t n) {
    static const char *const heads[] = {"<|start|>", "<|channel|>", "<|message|>"};
    if (starts(s, n, " to=")) return 0;
    size_t at = n;
    for (int k = 0; k < 3; k++) {
        const char *h = find(s, n, heads[k]);
        if (h && (size_t)(h - s) < at) at = (size_t)(h - s);
    }
    return at;
}

/* gpt-oss's harmony messages: [<|start|>assistant][ to=R]<|channel|>C[ to=R][ <|constrain|>json]<|message|>BODY
 * ending <|end|>, <|call|> or <|return|>.  Text before the first header is
 * content, in the partial parses as in the final one: a stream had shown
 * it (held back, it made later content arrive cut, since a stream sends
 * only what grew). */
static void parse_gpt_oss(pm *p, const char *s, size_t n, bool partial) {
    static const char *const markers[] = {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>",
                                          "<|constrain|>", NULL};
    size_t i = gpt_oss_first_header(s, n);
    if (i == n) {
        /* no header yet: plain text, or the start of a recipient or marker */
        if (partial && n < 4 && memcmp(s, " to=", n) == 0) return;
        content_until(p, s, n, partial, markers);
        return;
    }
    add_content(p, s, i);
    while (i < n) {
        const char *msg = find(s + i, n - i, "<|message|>");
        if (!msg) {
            /* a header still being written */
            if (!partial) add_content(p, s + i, n - i);
            return;
        }
        const char *h = s + i;
        size_t hn = (size_t)(msg - h);
        const char *ch = find(h, hn, "<|channel|>");
        const char *chan = NULL;
        size_t chan_n = 0;
        if (ch) {
            chan = ch + 11;
            while (chan_n < hn - (size_t)(chan - h) && !ws(chan[chan_n]) && chan[chan_n] != '<') chan_n++;
        }
        const char *to = find(h, hn, "to=functions.");
        const char *name = NULL;
        size_t name_n = 0;
        if (to) {
            name = to + 13;
            while (name_n < hn - (size_t)(name - h) && !ws(name[name_n]) && name[name_n] != '<') name_n++;
        }
        const char *body = msg + 11;
        size_t rest = n - (size_t)(body - s), bn = rest;
        const char *ends[] = {"<|end|>", "<|call|>", "<|return|>"};
        size_t end_len = 0;
        for (int k = 0; k < 3; k++) {
            const char *e = find(body, rest, ends[k]);
            if (e && (size_t)(e - body) < bn) {
                bn = (size_t)(e - body);
                end_len = strlen(ends[k]);
            }
        }
        bool done = end_len != 0;
        size_t shown = bn;
        if (!done && partial) shown -= held_suffix(body, bn, markers);
        if (name) {
            const char *a = body;
            size_t an = shown;
            trim(&a, &an);
            size_t j = 0, st;
            jscan r = an ? json_at(a, an, &j, &st) : JS_PARTIAL;
            if (done || !partial) {
                if (r == JS_DONE && j == an && a[0] == '{') add_call(p, NULL, 0, name, name_n, a, an, true);
                else add_content(p, body, bn);
            } else if (r != JS_BAD && (!an || a[0] == '{'))
                add_call(p, NULL, 0, name, name_n, a, an, false);
        } else if (chan && chan_n == 8 && !memcmp(chan, "analysis", 8)) {
            add_reasoning(p, body, shown);
        } else {
            add_content(p, body, shown);
        }
        if (!done) return;
        i = (size_t)(body - s) + bn + end_len;
        if (starts(s + i, n - i, "<|start|>assistant")) i += 18;
        else if (starts(s + i, n - i, "<|start|>")) i += 9;
    }
}

okv_chat_reasoning_markup okv_chat_reasoning(const okv_chat_syntax *syntax) {
    okv_chat_reasoning_markup m = {0};
    if (!syntax) return m;
    if (syntax->format == OKV_CHAT_FORMAT_GPT_OSS) {
        /* parse_gpt_oss: each analysis message is reasoning, <|end|> ends a
         * message and the next header follows */
        m.open = "<|channel|>analysis<|message|>";
        m.close = "<|end|>";
        m.force = "<|end|><|start|>assistant<|channel|>final<|message|>";
        m.force_tools = "<|end|><|start|>assistant<|channel|>";
    } else if (syntax->think_tags) {
        /* split_think; the newlines are Qwen 3's and DeepSeek R1's own around
         * the tag, and the parser trims them */
        m.open = "<think>";
        m.leading = true;
        m.starts_inside = syntax->think_open;
        m.close = "</think>";
        m.force = "\n</think>\n\n";
    } else if (syntax->format == OKV_CHAT_FORMAT_COMMAND_R) {
        m.open = "<|START_THINKING|>"; /* parse_command_r */
        m.leading = true;
        m.close = "<|END_THINKING|>";
        m.force = "<|END_THINKING|>";
    }
    if (!m.force_tools) m.force_tools = m.force;
    return m;
}

const char *okv_chat_tool_call_opener(okv_chat_format f) {
    switch (f) {
    case OKV_CHAT_FORMAT_HERMES:
    case OKV_CHAT_FORMAT_QWEN3_CODER: return "<tool_call>";
    case OKV_CHAT_FORMAT_MISTRAL: return "[TOOL_CALLS]";
    case OKV_CHAT_FORMAT_GPT_OSS: return " to=functions.";
    case OKV_CHAT_FORMAT_DEEPSEEK: return "<｜tool▁calls▁begin｜>";
    case OKV_CHAT_FORMAT_GRANITE: return "<|tool_call|>";
    case OKV_CHAT_FORMAT_COMMAND_R: return "<|START_ACTION|>";
    case OKV_CHAT_FORMAT_APERTUS: return "<|tools_prefix|>";
    case OKV_CHAT_FORMAT_PYTHONIC: return "<|tool_call_start|>";
    case OKV_CHAT_FORMAT_LLAMA3:
    case OKV_CHAT_FORMAT_GENERIC: return "";
    default: return NULL;
    }
}

const char *okv_chat_format_name(okv_chat_format f) {
    switch (f) {
    case OKV_CHAT_FORMAT_CONTENT: return "content";
    case OKV_CHAT_FORMAT_GENERIC: return "generic";
    case OKV_CHAT_FORMAT_HERMES: return "hermes";
    case OKV_CHAT_FORMAT_QWEN3_CODER: return "qwen3-coder";
    case OKV_CHAT_FORMAT_LLAMA3: return "llama3";
    case OKV_CHAT_FORMAT_MISTRAL: return "mistral";
    case OKV_CHAT_FORMAT_GPT_OSS: return "gpt-oss";
    case OKV_CHAT_FORMAT_DEEPSEEK: return "deepseek";
    case OKV_CHAT_FORMAT_GRANITE: return "granite";
    case OKV_CHAT_FORMAT_COMMAND_R: return "command-r";
    case OKV_CHAT_FORMAT_APERTUS: return "apertus";
    case OKV_CHAT_FORMAT_PYTHONIC: return "pythonic";
    }
    return "unknown";
}

okv_chat_syntax okv_chat_template_syntax(const okv_chat_template *t, const char *prompt) {
    okv_chat_syntax syn = {OKV_CHAT_FORMAT_CONTENT, false, false};
    const char *src = t ? okv_chat_template_source(t) : NULL;
    if (!src) return syn;
#define HAS(x) (strstr(src, x) != NULL)
    if (HAS("<|channel|>")) syn.format = OKV_CHAT_FORMAT_GPT_OSS;
    else if (HAS("[TOOL_CALLS]")) syn.format = OKV_CHAT_FORMAT_MISTRAL;
    else if (HAS("<tool_call>") && HAS("<function=") && HAS("<parameter=")) syn.format = OKV_CHAT_FORMAT_QWEN3_CODER;
    else if (HAS("<tool_call>")) syn.format = OKV_CHAT_FORMAT_HERMES;
    else if (HAS("tool▁call▁begin")) syn.format = OKV_CHAT_FORMAT_DEEPSEEK;
    else if (HAS("<|tool_call|>")) syn.format = OKV_CHAT_FORMAT_GRANITE;
    else if (HAS("<|START_ACTION|>")) syn.format = OKV_CHAT_FORMAT_COMMAND_R;
    else if (HAS("<|tools_prefix|>")) syn.format = OKV_CHAT_FORMAT_APERTUS;
    else if (HAS("<|tool_list_start|>") || HAS("<|tool_call_start|>")) syn.format = OKV_CHAT_FORMAT_PYTHONIC;
    else if (HAS("<|python_tag|>") || HAS("<function=") || (HAS("<|start_header_id|>") && HAS("\"parameters\"")))
        syn.format = OKV_CHAT_FORMAT_LLAMA3;
    else if (HAS("tools")) syn.format = OKV_CHAT_FORMAT_GENERIC;
    syn.think_tags = HAS("<think>") || HAS("</think>");
#undef HAS
    if (syn.think_tags && prompt) {
        size_t n = strlen(prompt);
        while (n && ws(prompt[n - 1])) n--;
        syn.think_open = n >= 7 && memcmp(prompt + n - 7, "<think>", 7) == 0;
    }
    return syn;
}

void okv_chat_msg_free(okv_chat_msg *m) {
    if (!m) return;
    free(m->content);
    free(m->reasoning_content);
    for (int i = 0; i < m->n_tool_calls; i++) {
        free(m->tool_calls[i].id);
        free(m->tool_calls[i].name);
        free(m->tool_calls[i].arguments);
    }
    free(m->tool_calls);
    memset(m, 0, sizeof *m);
}

static void parse_into(pm *p, const okv_chat_syntax *syntax, const char *s, size_t n, bool partial) {
    okv_jbuf_put(p->a, p->f, &p->content, "", 0);
    if (syntax->think_tags && syntax->format != OKV_CHAT_FORMAT_GPT_OSS) split_think(p, syntax, &s, &n, partial);
    switch (syntax->format) {
    case OKV_CHAT_FORMAT_HERMES: parse_tagged_json(p, s, n, partial, "<tool_call>", "</tool_call>"); break;
    case OKV_CHAT_FORMAT_QWEN3_CODER: parse_qwen3_coder(p, s, n, partial); break;
    case OKV_CHAT_FORMAT_LLAMA3: parse_llama3(p, s, n, partial); break;
    case OKV_CHAT_FORMAT_MISTRAL: parse_mistral(p, s, n, partial); break;
    case OKV_CHAT_FORMAT_GPT_OSS: parse_gpt_oss(p, s, n, partial); break;
    case OKV_CHAT_FORMAT_DEEPSEEK: parse_deepseek(p, s, n, partial); break;
    case OKV_CHAT_FORMAT_GRANITE: parse_marked_array(p, s, n, partial, "<|tool_call|>", NULL, 0); break;
    case OKV_CHAT_FORMAT_COMMAND_R: parse_command_r(p, s, n, partial); break;
    case OKV_CHAT_FORMAT_APERTUS: parse_marked_array(p, s, n, partial, "<|tools_prefix|>", "<|tools_suffix|>", 2); break;
    case OKV_CHAT_FORMAT_PYTHONIC: parse_pythonic(p, s, n, partial); break;
    case OKV_CHAT_FORMAT_GENERIC:
        if (!parse_leading_objects(p, s, n, partial, true)) add_content(p, s, n);
        break;
    default: add_content(p, s, n);
    }
    if (partial) {
        /* Trailing whitespace waits for what follows: markup after it
         * strips it in the final parse, so showing it early would break
         * the partial parses' prefix property. */
        while (p->content.n && ws(p->content.p[p->content.n - 1])) p->content.n--;
        while (p->reasoning.n && ws(p->reasoning.p[p->reasoning.n - 1])) p->reasoning.n--;
    }
    p->m->content = dup_n(p, p->content.p, p->content.n);
    if (p->has_reasoning) p->m->reasoning_content = dup_n(p, p->reasoning.p, p->reasoning.n);
}

typedef struct parse_job {
    const okv_chat_syntax *syntax;
    const char *text;
    size_t len;
    bool partial;
} parse_job;

/* The parse under the failure jump; false when it jumped. */
__attribute__((noinline)) static bool guarded(pm *p, const parse_job *job) {
    if (setjmp(p->f->env)) return false;
    parse_into(p, job->syntax, job->text, job->len, job->partial);
    return true;
}

okv_status okv_chat_parse(const okv_chat_syntax *syntax, const char *text, size_t len, bool partial, okv_chat_msg *out,
                          okv_error *err) {
    if (!syntax || (!text && len) || !out) return okv_fail(err, OKV_ERR_INVALID, "chat parse: NULL argument");
    memset(out, 0, sizeof *out);
    jarena a;
    okv_jarena_init(&a, (size_t)64 << 20);
    jfail f;
    memset(&f.err, 0, sizeof f.err);
    pm p = {.m = out, .a = &a, .f = &f};
    parse_job job = {syntax, text ? text : "", len, partial};
    bool ok = guarded(&p, &job);
    okv_jarena_free(&a);
    if (!ok || p.failed) {
        okv_chat_msg_free(out);
        return okv_fail(err, OKV_ERR_NOMEM, "chat parse: %s", ok ? "out of memory" : f.err.message);
    }
    okv_error_clear(err);
    return OKV_OK;
}
