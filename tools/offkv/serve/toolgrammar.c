/* The grammar that makes a forced tool call valid (issue 17): with
 * tool_choice "required" or a named function, the answer is exactly one
 * call in the template's own call format, its arguments following the
 * tool's "parameters" schema (offkv/grammar.h okv_json_schemas_to_gbnf,
 * one start rule per allowed tool).  A schema the converter cannot honour
 * is a 400 naming the tool and the keyword, never an unconstrained call.
 * Under tool_choice "auto" (a lazy grammar, which only keeps a call the
 * model starts well-formed) a keyword or string format the converter does
 * not know is taken as no constraint instead (okv_json_schemas_to_gbnf_loose),
 * and said in trig->skipped: agents' tool schemas (MCP servers, Claude
 * Code's) use such keywords, and refusing them refused every request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "offkv/grammar.h"
#include "serve.h"

/* Appends s to b (cap grows); false when out of memory. */
static bool put(char **b, size_t *n, size_t *cap, const char *s, size_t len) {
    if (*n + len + 1 > *cap) {
        size_t c = (*cap ? *cap * 2 : 256) + len;
        char *nb = realloc(*b, c);
        if (!nb) return false;
        *b = nb;
        *cap = c;
    }
    memcpy(*b + *n, s, len);
    *n += len;
    (*b)[*n] = 0;
    return true;
}

/* Appends text as the inside of a GBNF literal: '"' and '\' escaped, other
 * bytes below 0x20 as \xHH (a JSON-escaped name has none, but a name is
 * the client's). */
static bool put_lit(char **b, size_t *n, size_t *cap, const char *s) {
    for (; *s; s++) {
        char e[8];
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20) snprintf(e, sizeof e, "\\x%02X", c);
        else e[0] = (char)c, e[1] = 0;
        if (!put(b, n, cap, e, strlen(e))) return false;
    }
    return true;
}

/* One way a format writes its calls, as its parser (src/chat/toolcall.c)
 * reads them: open, then calls joined by sep, then close; a call is head,
 * the tool's name (JSON-quoted, or bare), mid, the arguments, tail.  Plain
 * text, except mid_gbnf and tail_gbnf, GBNF fragments added after mid and
 * tail where the format allows several spellings. */
typedef struct frame {
    const char *open, *head, *mid, *tail, *sep, *close, *mid_gbnf, *tail_gbnf;
    bool bare;  /* the name as is, not a JSON string */
    bool multi; /* several calls may follow one another (parallel_tool_calls) */
} frame;

#define JSON_CALL .head = "{\"name\": ", .mid = ", \"arguments\": ", .tail = "}"

/* The frames of format f (up to 2, the model picks one), for a grammar from
 * the answer's start (lazy false) or from the format's opener (lazy true);
 * 0 for a format offkv cannot constrain. */
static int call_frames(okv_chat_format f, bool lazy, bool parallel, frame fr[2]) {
    memset(fr, 0, 2 * sizeof *fr);
    switch (f) {
    case OKV_CHAT_FORMAT_HERMES:
        fr[0] = (frame){.head = "<tool_call>\n{\"name\": ", .mid = ", \"arguments\": ", .tail = "}\n</tool_call>",
                        .sep = "\n", .multi = true};
        return 1;
    case OKV_CHAT_FORMAT_GENERIC:
        fr[0] = parallel ? (frame){JSON_CALL, .open = "{\"tool_calls\": [", .sep = ", ", .close = "]}", .multi = true}
                         : (frame){JSON_CALL, .open = "{\"tool_call\": ", .close = "}"};
        return 1;
    case OKV_CHAT_FORMAT_LLAMA3:
        fr[0] = (frame){.head = "{\"name\": ", .mid = ", \"parameters\": ", .tail = "}"};
        return 1;
    case OKV_CHAT_FORMAT_MISTRAL:
        /* Nemo's JSON array, and Small 3.x / Devstral's NAME[ARGS]{...} */
        fr[0] = (frame){JSON_CALL, .open = "[TOOL_CALLS][", .sep = ", ", .close = "]", .multi = true};
        fr[1] = (frame){.head = "[TOOL_CALLS]", .mid = "[ARGS]", .bare = true, .multi = true};
        return 2;
    case OKV_CHAT_FORMAT_GRANITE:
        fr[0] = (frame){JSON_CALL, .open = "<|tool_call|>[", .sep = ", ", .close = "]", .multi = true};
        return 1;
    case OKV_CHAT_FORMAT_DEEPSEEK:
        fr[0] = (frame){.open = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>",
                        .head = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>",
                        .mid = "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>",
                        .tail = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>",
                        .close = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
                        .bare = true, .multi = true};
        return 1;
    case OKV_CHAT_FORMAT_GPT_OSS:
        /* One call per message: <|call|> ends the turn.  The recipient comes
         * in the channel's header (from the start) or after it (lazy, from
         * the opener " to=functions." wherever the model writes it). */
        fr[0] = (frame){.head = lazy ? " to=functions." : "<|channel|>commentary to=functions.", .bare = true,
                        .mid_gbnf = "( \" <|constrain|>json\" | \"<|channel|>commentary\" ( \" <|constrain|>json\" | "
                                    "\" json\" )? )? \"<|message|>\"",
                        .tail_gbnf = "\"<|call|>\"?"};
        return 1;
    default: return 0;
    }
}

/* Appends a GBNF literal of s ("" for an empty s adds nothing). */
static bool put_text(char **b, size_t *n, size_t *cap, const char *s) {
    if (!s || !*s) return true;
    return put(b, n, cap, " \"", 2) && put_lit(b, n, cap, s) && put(b, n, cap, "\"", 1);
}

/* A JSON string, for the generic format's {"response": ...} (auto). */
static const char RESPONSE_RULES[] =
    "\nresponse ::= \"{\\\"response\\\": \\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt] | "
    "\"\\\\u\" [0-9a-fA-F]{4} )* \"\\\"}\"\n";

/* The converter's skipped list with each rule name tool-K# (several
 * schemas) as the tool's own name, and a single schema's # as its name. */
static void name_tools(const char *in, const char *const *fn, int k, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < cap;) {
        const bool start = p == in || (p[-1] == ' ' && p >= in + 2 && p[-2] == ',');
        int t = -1;
        const char *rest = p;
        if (start && k > 1 && strncmp(p, "tool-", 5) == 0) {
            char *e;
            t = (int)strtol(p + 5, &e, 10);
            rest = e;
        } else if (start && k == 1 && *p == '#') {
            t = 0;
        }
        if (t >= 0 && t < k && *rest == '#') {
            o += (size_t)snprintf(out + o, cap - o, "%.60s", fn[t]);
            if (o >= cap) o = cap - 1;
            p = rest;
        }
        out[o++] = *p++;
    }
    out[o < cap ? o : cap - 1] = '\0';
}

char *srv_tool_call_grammar(const srv_request *r, const okv_chat_syntax *syn, bool lazy, srv_trigger *trig, srv_fail *f) {
    const okv_chat_format format = syn->format;
    frame fr[2];
    const int n_fr = call_frames(format, lazy, r->parallel_tool_calls, fr);
    f->status = 0;
    if (!n_fr) {
        if (!lazy)
            srv_fail_set(f, 400, "invalid_request_error", "tool_choice",
                         "'tool_choice' forces a call, but offkv cannot constrain the template's '%s' call format yet "
                         "(hermes, llama3, mistral, gpt-oss, deepseek, granite and generic it can)",
                         okv_chat_format_name(format));
        return NULL;
    }
    if (trig) {
        const char *op = okv_chat_tool_call_opener(format);
        /* a bare JSON call (Llama 3, generic) opens the answer */
        trig->anchored = !op || !*op;
        trig->text = trig->anchored ? "{" : op;
    }
    cJSON *tools = r->tools_json ? cJSON_Parse(r->tools_json) : NULL;
    int nt = cJSON_GetArraySize(tools), k = 0;
    char **schemas = calloc((size_t)nt + 1, sizeof *schemas), **names = calloc((size_t)nt + 1, sizeof *names);
    size_t *lens = calloc((size_t)nt + 1, sizeof *lens);
    const char **fn = calloc((size_t)nt + 1, sizeof *fn);
    char *out = NULL, *prims = NULL;
    size_t n = 0, cap = 0;
    okv_error err = {0};
    bool oom = !schemas || !names || !lens || !fn;
    for (int i = 0; i < nt && !oom; i++) {
        const cJSON *fun = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tools, i), "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fun, "name");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fun, "parameters");
        if (!cJSON_IsString(name)) continue; /* never: template.c refuses a tool without a name */
        if (r->tool_choice == SRV_TOOLS_NAMED && strcmp(name->valuestring, r->tool_choice_name) != 0) continue;
        /* No parameters: the call takes an object of anything. */
        schemas[k] = params ? cJSON_PrintUnformatted(params) : strdup("{\"type\": \"object\"}");
        names[k] = malloc(24);
        if (!schemas[k] || !names[k]) oom = true;
        else {
            snprintf(names[k], 24, "tool-%d", k);
            lens[k] = strlen(schemas[k]);
            fn[k] = name->valuestring;
        }
        k++;
    }
    if (!oom && k == 0) {
        srv_fail_set(f, 400, "invalid_request_error", "tools", "'tool_choice' forces a call, but no tool in 'tools' has a name");
        goto out;
    }
    if (!oom && lazy) trig->skipped[0] = '\0';
    char raw_skipped[sizeof trig->skipped];
    if (!oom && !(prims = lazy ? okv_json_schemas_to_gbnf_loose(k, (const char *const *)schemas, lens,
                                                               (const char *const *)names, raw_skipped,
                                                               sizeof raw_skipped, &err)
                               : okv_json_schemas_to_gbnf(k, (const char *const *)schemas, lens,
                                                          (const char *const *)names, &err))) {
        if (err.status == OKV_ERR_NOMEM) oom = true;
        else {
            /* err names the keyword and its place, which begins with our
             * rule's name tool-K when there are several schemas (only "#"
             * for one): the tool is named instead, the rule name dropped
             * (there only: a property may be called "tool-7"). */
            static const char at_[] = "JSON schema at ";
            char *t = k > 1 && strncmp(err.message, at_, sizeof at_ - 1) == 0 &&
                              strncmp(err.message + sizeof at_ - 1, "tool-", 5) == 0
                          ? err.message + sizeof at_ - 1
                          : NULL;
            int at = t ? atoi(t + 5) : k == 1 ? 0 : -1;
            if (t) {
                char *e = t + 5;
                while (*e >= '0' && *e <= '9') e++;
                memmove(t, e, strlen(e) + 1);
            }
            srv_fail_set(f, 400, "invalid_request_error", "tools", "the parameters of tool '%.60s' cannot constrain a call: %.150s",
                         at >= 0 && at < k ? fn[at] : "(unknown)", err.message);
            goto out;
        }
    }
    if (prims && lazy && raw_skipped[0]) name_tools(raw_skipped, fn, k, trig->skipped, sizeof trig->skipped);
    /* root ::= form-0 | form-1 [| response]; form-F ::= open call-F (sep call-F)* close;
     * call-F ::= call-F-0 | call-F-1 ...; call-F-K ::= head NAME mid tool-K tail */
    char buf[96];
    const char *root = "root ::= form-0";
    oom = oom || !put(&out, &n, &cap, root, strlen(root)) || (n_fr > 1 && !put(&out, &n, &cap, " | form-1", 9)) ||
          (lazy && format == OKV_CHAT_FORMAT_GENERIC && !put(&out, &n, &cap, " | response", 11));
    for (int F = 0; F < n_fr && !oom; F++) {
        const frame *w = &fr[F];
        const bool many = w->multi && r->parallel_tool_calls;
        snprintf(buf, sizeof buf, "\nform-%d ::=", F);
        oom = !put(&out, &n, &cap, buf, strlen(buf)) || !put_text(&out, &n, &cap, w->open);
        snprintf(buf, sizeof buf, " call-%d", F);
        oom = oom || !put(&out, &n, &cap, buf, strlen(buf));
        if (many) {
            oom = oom || !put(&out, &n, &cap, " (", 2) || !put_text(&out, &n, &cap, w->sep) ||
                  !put(&out, &n, &cap, buf, strlen(buf)) || !put(&out, &n, &cap, ")*", 2);
        }
        oom = oom || !put_text(&out, &n, &cap, w->close);
        snprintf(buf, sizeof buf, "\ncall-%d ::=", F);
        oom = oom || !put(&out, &n, &cap, buf, strlen(buf));
        for (int i = 0; i < k && !oom; i++) {
            snprintf(buf, sizeof buf, "%s call-%d-%d", i ? " |" : "", F, i);
            oom = !put(&out, &n, &cap, buf, strlen(buf));
        }
        for (int i = 0; i < k && !oom; i++) {
            cJSON *js = w->bare ? NULL : cJSON_CreateString(fn[i]);
            char *quoted = js ? cJSON_PrintUnformatted(js) : NULL;
            cJSON_Delete(js);
            snprintf(buf, sizeof buf, "\ncall-%d-%d ::=", F, i);
            oom = (!w->bare && !quoted) || !put(&out, &n, &cap, buf, strlen(buf)) || !put_text(&out, &n, &cap, w->head) ||
                  !put_text(&out, &n, &cap, w->bare ? fn[i] : quoted) ||
                  !put_text(&out, &n, &cap, w->mid) ||
                  (w->mid_gbnf && (!put(&out, &n, &cap, " ", 1) || !put(&out, &n, &cap, w->mid_gbnf, strlen(w->mid_gbnf))));
            snprintf(buf, sizeof buf, " tool-%d", i);
            oom = oom || !put(&out, &n, &cap, buf, strlen(buf)) || !put_text(&out, &n, &cap, w->tail) ||
                  (w->tail_gbnf && (!put(&out, &n, &cap, " ", 1) || !put(&out, &n, &cap, w->tail_gbnf, strlen(w->tail_gbnf))));
            free(quoted);
        }
    }
    if (lazy && format == OKV_CHAT_FORMAT_GENERIC) oom = oom || !put(&out, &n, &cap, RESPONSE_RULES, strlen(RESPONSE_RULES));
    oom = oom || !put(&out, &n, &cap, "\n", 1) || !put(&out, &n, &cap, prims, strlen(prims));
    if (oom) {
        free(out);
        out = NULL;
    } else {
        /* What the scheduler will do with it, now: a grammar the converter
         * made but the parser or the matcher refuses (past the parser's
         * million elements, say) is the client's 400, not a failed job. */
        if (!srv_grammar_usable(out, n, &err)) {
            free(out);
            out = NULL;
            if (err.status == OKV_ERR_NOMEM) oom = true;
            else
                srv_fail_set(f, 400, "invalid_request_error", "tools", "the tools' parameters make a call grammar offkv cannot use: %.180s",
                             err.message);
        }
    }
out:
    if (!out && oom) srv_fail_set(f, 500, "server_error", "", "out of memory for the tool-call grammar");
    for (int i = 0; i < nt; i++) {
        if (schemas) free(schemas[i]);
        if (names) free(names[i]);
    }
    free(schemas);
    free(names);
    free(lens);
    free(fn);
    free(prims);
    cJSON_Delete(tools);
    return out;
}
