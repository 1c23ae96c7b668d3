/* The grammar that makes a forced tool call valid (issue 17): with
 * tool_choice "required" or a named function, the answer is exactly one
 * call in the template's own call format, its arguments following the
 * tool's "parameters" schema (offkv/grammar.h okv_json_schemas_to_gbnf,
 * one start rule per allowed tool).  A schema the converter cannot honour
 * is a 400 naming the tool and the keyword, never an unconstrained call. */
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

/* The call's text before the JSON-quoted name (head), between it and the
 * arguments (mid) and after them (tail), as the family's parser
 * (src/chat/toolcall.c) reads it; head NULL for a format offkv cannot
 * force yet. */
static void call_frame(okv_chat_format f, const char **head, const char **mid, const char **tail) {
    *head = NULL;
    *mid = ", \"arguments\": ";
    *tail = "}";
    switch (f) {
    case OKV_CHAT_FORMAT_HERMES:
        *head = "<tool_call>\n{\"name\": ";
        *tail = "}\n</tool_call>";
        break;
    case OKV_CHAT_FORMAT_GENERIC:
        *head = "{\"tool_call\": {\"name\": ";
        *tail = "}}";
        break;
    case OKV_CHAT_FORMAT_LLAMA3:
        *head = "{\"name\": ";
        *mid = ", \"parameters\": ";
        break;
    default: break;
    }
}

char *srv_tool_call_grammar(const srv_request *r, okv_chat_format format, srv_fail *f) {
    const char *head, *mid, *tail;
    call_frame(format, &head, &mid, &tail);
    if (!head) {
        srv_fail_set(f, 400, "invalid_request_error", "tool_choice",
                     "'tool_choice' forces a call, but offkv cannot constrain the template's '%s' call format yet "
                     "(hermes, generic and llama3 it can)",
                     okv_chat_format_name(format));
        return NULL;
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
    if (!oom && !(prims = okv_json_schemas_to_gbnf(k, (const char *const *)schemas, lens, (const char *const *)names, &err))) {
        if (err.status == OKV_ERR_NOMEM) oom = true;
        else {
            /* err names the keyword and its place, which begins with our
             * rule's name tool-K when there are several schemas (only "#"
             * for one): the tool is named instead, the rule name dropped. */
            char *t = strstr(err.message, "tool-");
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
    /* root ::= call-0 | call-1 ...; call-K ::= head tool-K tail */
    oom = oom || !put(&out, &n, &cap, "root ::=", 8);
    for (int i = 0; i < k && !oom; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%s call-%d", i ? " |" : "", i);
        oom = !put(&out, &n, &cap, buf, strlen(buf));
    }
    for (int i = 0; i < k && !oom; i++) {
        cJSON *js = cJSON_CreateString(fn[i]);
        char *quoted = js ? cJSON_PrintUnformatted(js) : NULL, buf[64];
        cJSON_Delete(js);
        snprintf(buf, sizeof buf, "\ncall-%d ::= \"", i);
        oom = !quoted || !put(&out, &n, &cap, buf, strlen(buf)) || !put_lit(&out, &n, &cap, head) ||
              !put_lit(&out, &n, &cap, quoted) || !put_lit(&out, &n, &cap, mid);
        snprintf(buf, sizeof buf, "\" tool-%d \"", i);
        oom = oom || !put(&out, &n, &cap, buf, strlen(buf)) || !put_lit(&out, &n, &cap, tail) ||
              !put(&out, &n, &cap, "\"", 1);
        free(quoted);
    }
    oom = oom || !put(&out, &n, &cap, "\n", 1) || !put(&out, &n, &cap, prims, strlen(prims));
    if (oom) {
        free(out);
        out = NULL;
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
