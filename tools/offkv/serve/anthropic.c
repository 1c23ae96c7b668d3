/* Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
 * over the chat endpoint's machinery.  A request becomes the body of an
 * OpenAI chat request — system as a system turn, tool_use blocks as an
 * assistant's tool_calls, tool_result blocks as tool turns, thinking blocks
 * as reasoning_content, tools and tool_choice in OpenAI's shape — which
 * request.c and template.c then parse as they parse every chat request; an
 * answer's OpenAI pieces (srv_chat_message, srv_chat_stream_feed's deltas)
 * become Anthropic's content blocks and stream events here.  So one
 * conversation renders to one prompt whichever API carried it.
 *
 * What offkv cannot honour is refused, naming the block or field: image and
 * document blocks (it serves text), server tools (web search, code
 * execution: it runs no tools itself).  Fields that change nothing here
 * (metadata, cache_control, service_tier, a thinking block's signature)
 * are ignored, as the OpenAI endpoints ignore fields they do not know. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonput.h"
#include "server.h"

static bool oom(srv_fail *f) {
    srv_fail_set(f, 500, "server_error", NULL, "out of memory for the request");
    return false;
}

static bool add_part(cJSON *parts, const char *text, srv_fail *f) {
    cJSON *p = cJSON_CreateObject();
    if (!p || !cJSON_AddStringToObject(p, "type", "text") || !cJSON_AddStringToObject(p, "text", text) ||
        !cJSON_AddItemToArray(parts, p)) {
        cJSON_Delete(p);
        return oom(f);
    }
    return true;
}

/* Appends text to an OpenAI content-part array, after a "\n" when parts
 * has text already: Anthropic's blocks are separate pieces (Claude Code
 * sends a reminder block, then the user's words), which OpenAI's parts,
 * joined as they are, would run together. */
static bool add_text(cJSON *parts, const char *text, srv_fail *f) {
    /* (child, not cJSON_GetArraySize, which walks the list: a turn of n blocks would cost n squared) */
    return (!parts->child || add_part(parts, "\n", f)) && add_part(parts, text, f);
}

/* A tool_result's content: a string, or text blocks (joined). */
static bool result_text(const cJSON *c, int i, int j, cJSON *parts, srv_fail *f) {
    if (!c || cJSON_IsNull(c)) return true;
    if (cJSON_IsString(c)) return add_text(parts, c->valuestring, f);
    if (!cJSON_IsArray(c))
        return srv_bad(f, "messages", "messages[%d].content[%d].content must be a string or an array of text blocks", i, j);
    const cJSON *b;
    int k = 0;
    cJSON_ArrayForEach(b, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type"), *text = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (cJSON_IsString(type) && (!strcmp(type->valuestring, "image") || !strcmp(type->valuestring, "document")))
            return srv_bad(f, "messages", "messages[%d].content[%d].content[%d] is an '%s' block; offkv serves text only", i,
                           j, k, type->valuestring);
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(text))
            return srv_bad(f, "messages", "messages[%d].content[%d].content[%d] must be {\"type\": \"text\", \"text\": ...}",
                           i, j, k);
        if (!result_text(text, i, j, parts, f)) return false;
        k++;
    }
    return true;
}

/* Whether a document block holds plain text: {"source": {"type": "text",
 * "data": "..."}} (PDFs and URLs it cannot read). */
static bool plain_document(const cJSON *b) {
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(b, "source");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(src, "type"), *data = cJSON_GetObjectItemCaseSensitive(src, "data");
    return cJSON_IsString(type) && !strcmp(type->valuestring, "text") && cJSON_IsString(data);
}

/* The tool_use blocks of the turn before a user turn (where Anthropic's
 * API puts the calls its tool_result blocks answer), sorted by id: a
 * result's tool turn is named after its call, which templates that name a
 * tool turn's function want.  Sorted once a turn, so that a turn of many
 * results costs n log n, not n squared (40 000 results took 30 s). */
typedef struct call_name {
    const char *id, *name;
} call_name;

static int by_id(const void *a, const void *b) { return strcmp(((const call_name *)a)->id, ((const call_name *)b)->id); }

/* The index of prev's tool_use blocks (malloc'd, *n of them; NULL with *n
 * 0 when none, or out of memory: then no turn is named). */
static call_name *call_index(const cJSON *prev, size_t *n) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(prev, "content"), *b;
    *n = 0;
    if (!cJSON_IsArray(c)) return NULL;
    call_name *x = malloc((size_t)cJSON_GetArraySize(c) * sizeof *x + 1);
    cJSON_ArrayForEach(b, c) {
        const cJSON *bid = cJSON_GetObjectItemCaseSensitive(b, "id"), *bn = cJSON_GetObjectItemCaseSensitive(b, "name");
        if (x && cJSON_IsString(bid) && cJSON_IsString(bn)) x[(*n)++] = (call_name){bid->valuestring, bn->valuestring};
    }
    if (x) qsort(x, *n, sizeof *x, by_id);
    return x;
}

static const char *tool_name(const call_name *x, size_t n, const char *id) {
    const call_name key = {id, NULL}, *hit = n ? bsearch(&key, x, n, sizeof *x, by_id) : NULL;
    return hit ? hit->name : NULL;
}

/* Message i (role user or assistant; prev: the one before it, or NULL) as
 * OpenAI turns appended to out. */
static bool one_message(const cJSON *prev, const cJSON *m, int i, cJSON *out, srv_fail *f) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsObject(m)) return srv_bad(f, "messages", "messages[%d] must be an object", i);
    if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") != 0 && strcmp(role->valuestring, "assistant") != 0))
        return srv_bad(f, "messages", "messages[%d].role must be \"user\" or \"assistant\" (the system prompt is the "
                   "top-level 'system')", i);
    const bool user = role->valuestring[0] == 'u';
    if (!content) return srv_bad(f, "messages", "messages[%d].content is required", i);
    cJSON *turn = cJSON_CreateObject();
    if (!turn || !cJSON_AddStringToObject(turn, "role", role->valuestring)) {
        cJSON_Delete(turn);
        return oom(f);
    }
    if (cJSON_IsString(content)) {
        if (srv_put(turn, "content", cJSON_CreateString(content->valuestring)) && srv_push(out, turn)) return true;
        return oom(f); /* push freed turn */
    }
    if (!cJSON_IsArray(content)) {
        cJSON_Delete(turn);
        return srv_bad(f, "messages", "messages[%d].content must be a string or an array of content blocks", i);
    }
    cJSON *parts = cJSON_CreateArray(), *calls = cJSON_CreateArray();
    call_name *index = NULL;
    size_t n_index = 0;
    bool calls_indexed = false;
    char *thinking = NULL;
    size_t n_thinking = 0, cap_thinking = 0;
    bool ok = parts && calls;
    if (!ok) oom(f);
    const cJSON *b;
    int j = 0;
    cJSON_ArrayForEach(b, content) {
        if (!ok) break;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : "";
        if (!cJSON_IsObject(b) || !t[0]) {
            ok = srv_bad(f, "messages", "messages[%d].content[%d] must be a block with a 'type'", i, j);
        } else if (!strcmp(t, "text")) {
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(text)) ok = srv_bad(f, "messages", "messages[%d].content[%d].text must be a string", i, j);
            else ok = result_text(text, i, j, parts, f);
        } else if (!strcmp(t, "tool_use") && !user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id"), *name = cJSON_GetObjectItemCaseSensitive(b, "name"),
                        *input = cJSON_GetObjectItemCaseSensitive(b, "input");
            if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsObject(input)) {
                ok = srv_bad(f, "messages", "messages[%d].content[%d] must be {\"type\": \"tool_use\", \"id\", \"name\", \"input\": {...}}",
                         i, j);
                break;
            }
            char *args = cJSON_PrintUnformatted(input);
            cJSON *c = cJSON_CreateObject(), *fn = c ? cJSON_AddObjectToObject(c, "function") : NULL;
            ok = args && fn && cJSON_AddStringToObject(c, "id", id->valuestring) && cJSON_AddStringToObject(c, "type", "function") &&
                 cJSON_AddStringToObject(fn, "name", name->valuestring) && cJSON_AddStringToObject(fn, "arguments", args);
            free(args);
            if (ok) ok = srv_push(calls, c) || oom(f);
            else {
                cJSON_Delete(c);
                oom(f);
            }
        } else if (!strcmp(t, "tool_result") && user) {
            /* A tool turn of its own, before the user's text: Anthropic puts
             * results first in a user turn, OpenAI's templates after the call. */
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id");
            if (!cJSON_IsString(id)) {
                ok = srv_bad(f, "messages", "messages[%d].content[%d].tool_use_id must be a string", i, j);
                break;
            }
            cJSON *tr = cJSON_CreateObject(), *tparts = cJSON_CreateArray();
            if (!calls_indexed) {
                index = call_index(prev, &n_index);
                calls_indexed = true;
            }
            const char *name = tool_name(index, n_index, id->valuestring);
            ok = tr && tparts && cJSON_AddStringToObject(tr, "role", "tool") &&
                 cJSON_AddStringToObject(tr, "tool_call_id", id->valuestring) &&
                 (!name || cJSON_AddStringToObject(tr, "name", name));
            if (!ok) oom(f);
            else ok = result_text(cJSON_GetObjectItemCaseSensitive(b, "content"), i, j, tparts, f);
            if (ok) {
                if (!srv_put(tr, "content", tparts)) { /* put freed tparts */
                    cJSON_Delete(tr);
                    ok = oom(f);
                } else if (!srv_push(out, tr)) { /* push freed tr */
                    ok = oom(f);
                }
            } else {
                cJSON_Delete(tparts);
                cJSON_Delete(tr);
            }
        } else if (!strcmp(t, "thinking") && !user) {
            const cJSON *th = cJSON_GetObjectItemCaseSensitive(b, "thinking");
            if (!cJSON_IsString(th)) ok = srv_bad(f, "messages", "messages[%d].content[%d].thinking must be a string", i, j);
            else if (!wire_append_text(&thinking, &n_thinking, &cap_thinking, th->valuestring, strlen(th->valuestring)))
                ok = oom(f);
        } else if (!strcmp(t, "redacted_thinking") && !user) {
            /* another engine's encrypted reasoning: nothing a template can show */
        } else if (!strcmp(t, "document") && plain_document(b)) {
            /* a plain-text document: its title, then its text */
            const cJSON *title = cJSON_GetObjectItemCaseSensitive(b, "title");
            ok = (!cJSON_IsString(title) || !title->valuestring[0] || add_text(parts, title->valuestring, f)) &&
                 add_text(parts, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "source"), "data")->valuestring, f);
        } else if (!strcmp(t, "image") || !strcmp(t, "document")) {
            ok = srv_bad(f, "messages", "messages[%d].content[%d] is an '%s' block; offkv serves text only", i, j, t);
        } else {
            ok = srv_bad(f, "messages", "messages[%d].content[%d]: a '%.60s' block cannot be in %s turn (offkv takes text, "
                     "thinking and tool_use from the assistant, text and tool_result from the user)",
                     i, j, t, user ? "a user" : "an assistant");
        }
        j++;
    }
    /* a user turn of only tool results has no text turn after them; an
     * assistant's without text has "" (templates such as Qwen3's call
     * string methods on the content: null would fail them) */
    if (ok && (!user || parts->child || j == 0)) {
        /* (put and push free what they cannot add) */
        bool added = srv_put(turn, "content", parts);
        parts = NULL;
        if (added && thinking) added = srv_put_str(turn, "reasoning_content", thinking);
        if (added && calls->child) added = srv_put(turn, "tool_calls", calls);
        else cJSON_Delete(calls);
        calls = NULL;
        if (!added) {
            cJSON_Delete(turn);
            ok = oom(f);
        } else if (!srv_push(out, turn)) {
            ok = oom(f);
        }
        turn = NULL;
    }
    cJSON_Delete(parts);
    cJSON_Delete(calls);
    cJSON_Delete(turn);
    free(thinking);
    free(index);
    return ok;
}

/* system: a string or text blocks, as the first turn. */
static bool system_turn(const cJSON *sys, cJSON *out, srv_fail *f) {
    if (!sys || cJSON_IsNull(sys)) return true;
    cJSON *turn = cJSON_CreateObject(), *parts = cJSON_CreateArray();
    bool ok = turn && parts && cJSON_AddStringToObject(turn, "role", "system");
    if (!ok) oom(f);
    else if (cJSON_IsString(sys)) ok = result_text(sys, 0, 0, parts, f);
    else if (!cJSON_IsArray(sys)) ok = srv_bad(f, "system", "'system' must be a string or an array of text blocks");
    else {
        const cJSON *b;
        int j = 0;
        cJSON_ArrayForEach(b, sys) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type"), *text = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(text)) {
                ok = srv_bad(f, "system", "system[%d] must be {\"type\": \"text\", \"text\": ...}", j);
                break;
            }
            if (!(ok = result_text(text, 0, 0, parts, f))) break;
            j++;
        }
    }
    if (!ok) {
        cJSON_Delete(parts);
        cJSON_Delete(turn);
    } else if (!srv_put(turn, "content", parts)) { /* put freed parts */
        cJSON_Delete(turn);
        ok = oom(f);
    } else if (!srv_push(out, turn)) { /* push freed turn */
        ok = oom(f);
    }
    return ok;
}

/* Structured output: output_config.format (or the older beta's
 * output_format), {"type": "json_schema", "schema": ...}, as OpenAI's
 * response_format, which the sampler's grammar then holds the answer to
 * (output_config.effort goes to the template: srv_anthropic_request). */
static bool format_to_openai(const cJSON *root, cJSON *o, srv_fail *f) {
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "output_config");
    if (cfg && !cJSON_IsNull(cfg) && !cJSON_IsObject(cfg)) return srv_bad(f, "output_config", "'output_config' must be an object");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(cfg, "format");
    const char *param = "output_config";
    if (!fmt || cJSON_IsNull(fmt)) {
        fmt = cJSON_GetObjectItemCaseSensitive(root, "output_format");
        param = "output_format";
    }
    if (!fmt || cJSON_IsNull(fmt)) return true;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(fmt, "type"), *schema = cJSON_GetObjectItemCaseSensitive(fmt, "schema");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "json_schema") != 0 || !cJSON_IsObject(schema))
        return srv_bad(f, param, "the output format must be {\"type\": \"json_schema\", \"schema\": {...}}");
    cJSON *rf = cJSON_CreateObject(), *js = rf ? cJSON_AddObjectToObject(rf, "json_schema") : NULL;
    cJSON *sc = cJSON_Duplicate(schema, true);
    if (!js || !sc || !cJSON_AddStringToObject(rf, "type", "json_schema") || !cJSON_AddItemToObject(js, "schema", sc)) {
        cJSON_Delete(sc);
        cJSON_Delete(rf);
        return oom(f);
    }
    if (!cJSON_AddItemToObject(o, "response_format", rf)) {
        cJSON_Delete(rf);
        return oom(f);
    }
    return true;
}

/* tools and tool_choice in OpenAI's shape. */
static bool tools_to_openai(const cJSON *root, cJSON *o, srv_fail *f) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) return srv_bad(f, "tools", "'tools' must be an array");
        cJSON *out = cJSON_AddArrayToObject(o, "tools");
        if (!out) return oom(f);
        const cJSON *t;
        int i = 0;
        cJSON_ArrayForEach(t, tools) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type"), *name = cJSON_GetObjectItemCaseSensitive(t, "name"),
                        *desc = cJSON_GetObjectItemCaseSensitive(t, "description"),
                        *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
            if (cJSON_IsString(type) && strcmp(type->valuestring, "custom") != 0)
                return srv_bad(f, "tools", "tools[%d] is Anthropic's server tool '%.60s'; offkv runs no tools itself (give a "
                           "client tool: {\"name\", \"description\", \"input_schema\"})", i, type->valuestring);
            if (!cJSON_IsObject(t) || !cJSON_IsString(name) || !cJSON_IsObject(schema) || (desc && !cJSON_IsString(desc)))
                return srv_bad(f, "tools", "tools[%d] must be {\"name\", \"description\", \"input_schema\": {...}}", i);
            cJSON *ot = cJSON_CreateObject(), *fn = ot ? cJSON_AddObjectToObject(ot, "function") : NULL;
            cJSON *sc = cJSON_Duplicate(schema, true);
            if (!fn || !sc || !cJSON_AddStringToObject(ot, "type", "function") || !cJSON_AddStringToObject(fn, "name", name->valuestring) ||
                (desc && !cJSON_AddStringToObject(fn, "description", desc->valuestring))) {
                cJSON_Delete(sc);
                cJSON_Delete(ot);
                return oom(f);
            }
            if (!srv_put(fn, "parameters", sc)) { /* put freed sc */
                cJSON_Delete(ot);
                return oom(f);
            }
            if (!srv_push(out, ot)) return oom(f); /* push freed ot */
            i++;
        }
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (!tc || cJSON_IsNull(tc)) return true;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type"), *name = cJSON_GetObjectItemCaseSensitive(tc, "name"),
                *dp = cJSON_GetObjectItemCaseSensitive(tc, "disable_parallel_tool_use");
    static const char shape[] = "'tool_choice' must be {\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"none\"} or "
                                "{\"type\": \"tool\", \"name\": ...}";
    if (!cJSON_IsObject(tc) || !cJSON_IsString(type)) return srv_bad(f, "tool_choice", shape);
    const char *t = type->valuestring;
    bool ok = true;
    if (!strcmp(t, "auto") || !strcmp(t, "none")) ok = cJSON_AddStringToObject(o, "tool_choice", t) != NULL;
    else if (!strcmp(t, "any")) ok = cJSON_AddStringToObject(o, "tool_choice", "required") != NULL;
    else if (!strcmp(t, "tool")) {
        if (!cJSON_IsString(name)) return srv_bad(f, "tool_choice", "'tool_choice' of type \"tool\" needs the tool's 'name'");
        cJSON *c = cJSON_AddObjectToObject(o, "tool_choice"), *fn = c ? cJSON_AddObjectToObject(c, "function") : NULL;
        ok = fn && cJSON_AddStringToObject(c, "type", "function") && cJSON_AddStringToObject(fn, "name", name->valuestring);
    } else return srv_bad(f, "tool_choice", shape);
    if (!ok) return oom(f);
    if (dp && !cJSON_IsNull(dp)) {
        if (!cJSON_IsBool(dp)) return srv_bad(f, "tool_choice", "'tool_choice.disable_parallel_tool_use' must be true or false");
        if (!cJSON_AddBoolToObject(o, "parallel_tool_calls", !cJSON_IsTrue(dp))) return oom(f);
    }
    return true;
}

char *srv_anthropic_request(const char *body, size_t len, bool count, srv_fail *f) {
    cJSON *root = srv_body_parse(body, len, f);
    if (!root) return NULL;
    cJSON *o = cJSON_CreateObject(), *turns = o ? cJSON_AddArrayToObject(o, "messages") : NULL;
    char *text = NULL;
    bool ok = turns != NULL;
    if (!ok) oom(f);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (ok && !cJSON_IsArray(ms)) ok = srv_bad(f, "messages", ms ? "'messages' must be an array" : "'messages' is required");
    if (ok && cJSON_GetArraySize(ms) == 0) ok = srv_bad(f, "messages", "'messages' must hold at least one message");
    if (ok) ok = system_turn(cJSON_GetObjectItemCaseSensitive(root, "system"), turns, f);
    const cJSON *m, *prev = NULL;
    int i = 0;
    cJSON_ArrayForEach(m, ms) {
        if (!ok) break;
        ok = one_message(prev, m, i++, turns, f);
        prev = m;
    }
    /* a final assistant turn is a prefill: the answer continues its text */
    const cJSON *last_role = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ms, cJSON_GetArraySize(ms) - 1), "role");
    if (ok && cJSON_IsString(last_role) && strcmp(last_role->valuestring, "assistant") == 0 &&
        !cJSON_AddBoolToObject(o, "continue_final_message", true))
        ok = oom(f);
    /* max_tokens: required by Anthropic's API (not by count_tokens); the
     * numbers' ranges are request.c's, under the same names */
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "max_tokens");
    if (ok && !count && (!mt || cJSON_IsNull(mt))) ok = srv_bad(f, "max_tokens", "'max_tokens' is required");
    static const char *const same[] = {"max_tokens", "temperature", "top_p", "top_k", "stream", "model", NULL};
    for (int k = 0; ok && same[k] && !count; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, same[k]);
        cJSON *d = v ? cJSON_Duplicate(v, true) : NULL;
        if (v && !srv_put(o, same[k], d)) ok = oom(f);
    }
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(root, "stop_sequences");
    if (ok && ss && !cJSON_IsNull(ss) && !count) {
        if (!cJSON_IsArray(ss)) ok = srv_bad(f, "stop_sequences", "'stop_sequences' must be an array of strings");
        else if (cJSON_GetArraySize(ss) > SRV_MAX_STOPS)
            ok = srv_bad(f, "stop_sequences", "'stop_sequences' holds %d strings; offkv takes at most %d",
                     cJSON_GetArraySize(ss), SRV_MAX_STOPS);
        else {
            const cJSON *s;
            cJSON_ArrayForEach(s, ss) {
                if (ok && (!cJSON_IsString(s) || !s->valuestring[0]))
                    ok = srv_bad(f, "stop_sequences", "'stop_sequences' must hold non-empty strings");
                else if (ok && strlen(s->valuestring) > SRV_MAX_STOP_BYTES)
                    ok = srv_bad(f, "stop_sequences", "a stop sequence is %zu bytes, more than %d", strlen(s->valuestring),
                             (int)SRV_MAX_STOP_BYTES);
            }
            if (ok && !srv_put(o, "stop", cJSON_Duplicate(ss, true))) ok = oom(f);
        }
    }
    if (ok) ok = tools_to_openai(root, o, f);
    if (ok && !count) ok = format_to_openai(root, o, f);
    /* thinking: the templates' common switch (Qwen3, SmolLM3, DeepSeek
     * V3.1 read enable_thinking), off when not asked for, as Anthropic's
     * API thinks only when asked; budget_tokens: llama.cpp's
     * thinking_budget_tokens (the scheduler ends reasoning there; any
     * count from 0, where Anthropic asks for 1024 or more).
     * output_config.effort: OpenAI's reasoning_effort, the variable
     * gpt-oss's template reads (template.c) */
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "thinking");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(th, "type");
    const char *t = !th || cJSON_IsNull(th) ? "disabled" : cJSON_IsString(type) ? type->valuestring : "";
    const cJSON *effort = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "output_config"), "effort");
    if (cJSON_IsNull(effort)) effort = NULL;
    if (ok && strcmp(t, "enabled") != 0 && strcmp(t, "disabled") != 0 && strcmp(t, "adaptive") != 0)
        ok = srv_bad(f, "thinking", "'thinking' must be {\"type\": \"enabled\"}, {\"type\": \"adaptive\"} or {\"type\": \"disabled\"}");
    else if (ok && effort && !(cJSON_IsString(effort) && srv_effort_ok(effort->valuestring)))
        ok = srv_bad(f, "output_config", "'output_config.effort' must be one of %s", SRV_EFFORTS);
    const cJSON *budget = cJSON_GetObjectItemCaseSensitive(th, "budget_tokens");
    if (ok && !strcmp(t, "enabled") && budget && !cJSON_IsNull(budget)) {
        if (!cJSON_IsNumber(budget) || budget->valuedouble != floor(budget->valuedouble) || budget->valuedouble < 0 ||
            budget->valuedouble > (double)(1 << 30))
            ok = srv_bad(f, "thinking", "'thinking.budget_tokens' must be an integer from 0 to %d", 1 << 30);
        else if (!srv_put_num(o, "thinking_budget_tokens", budget->valuedouble))
            ok = oom(f);
    }
    if (ok) {
        cJSON *kw = cJSON_AddObjectToObject(o, "chat_template_kwargs");
        if (!kw || !cJSON_AddBoolToObject(kw, "enable_thinking", strcmp(t, "disabled") != 0) ||
            (effort && !cJSON_AddStringToObject(kw, "reasoning_effort", effort->valuestring)))
            ok = oom(f);
    }
    if (ok && !(text = cJSON_PrintUnformatted(o))) oom(f);
    cJSON_Delete(o);
    cJSON_Delete(root);
    return text;
}

/* Anthropic's error types, by status. */
static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 408: return "timeout_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

char *srv_anthropic_error_json(const srv_fail *f) {
    cJSON *root = cJSON_CreateObject();
    cJSON *e = root && cJSON_AddStringToObject(root, "type", "error") ? cJSON_AddObjectToObject(root, "error") : NULL;
    char message[3 * sizeof f->message + 8];
    srv_utf8_clean(f->message, strlen(f->message), message, sizeof message);
    char *s = e && cJSON_AddStringToObject(e, "type", error_type(f->status)) &&
                      cJSON_AddStringToObject(e, "message", message)
                  ? cJSON_PrintUnformatted(root)
                  : NULL;
    cJSON_Delete(root);
    return s;
}

/* ---- answers ----
 *
 * A cJSON add that fails (out of memory) leaves its object a field short,
 * so every builder below checks each add and gives up (NULL, false) rather
 * than send a message or an event without one. */

static cJSON *usage_json(const srv_usage *u) {
    cJSON *o = cJSON_CreateObject();
    /* Anthropic counts cache reads apart: input_tokens is what was read anew */
    if (srv_put_num(o, "input_tokens", (double)(u->input - u->cached)) && srv_put_num(o, "cache_creation_input_tokens", 0) &&
        srv_put_num(o, "cache_read_input_tokens", (double)u->cached) && srv_put_num(o, "output_tokens", (double)u->output))
        return o;
    cJSON_Delete(o);
    return NULL;
}

/* A tool call's arguments as a tool_use block's input; NULL when they are
 * not a JSON object (or out of memory). */
static cJSON *call_input(const char *args) {
    cJSON *in = cJSON_Parse(args && args[0] ? args : "{}");
    if (cJSON_IsObject(in)) return in;
    cJSON_Delete(in);
    return NULL;
}

/* {"type": type, key: text} (a thinking block with its empty signature). */
static cJSON *text_block(const char *type, const char *key, const char *text) {
    cJSON *b = cJSON_CreateObject();
    if (srv_put_str(b, "type", type) && srv_put_str(b, key, text) && (strcmp(type, "thinking") != 0 || srv_put_str(b, "signature", "")))
        return b;
    cJSON_Delete(b);
    return NULL;
}

/* {"type": "tool_use", id, name, input} (input taken). */
static cJSON *tool_use_block(const char *id, const char *name, cJSON *input) {
    cJSON *b = cJSON_CreateObject();
    if (!srv_put_str(b, "type", "tool_use") || !srv_put_str(b, "id", id) || !srv_put_str(b, "name", name)) {
        cJSON_Delete(input);
        cJSON_Delete(b);
        return NULL;
    }
    if (srv_put(b, "input", input)) return b;
    cJSON_Delete(b);
    return NULL;
}

cJSON *srv_anthropic_message(const cJSON *msg, const char *id, const char *model, const srv_usage *u,
                             int *tool_uses) {
    cJSON *r = cJSON_CreateObject(), *content = NULL;
    bool ok = srv_put_str(r, "id", id) && srv_put_str(r, "type", "message") && srv_put_str(r, "role", "assistant") &&
              srv_put_str(r, "model", model) && srv_put(r, "content", content = cJSON_CreateArray());
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(msg, "reasoning_content"),
                *text = cJSON_GetObjectItemCaseSensitive(msg, "content"), *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    if (ok && cJSON_IsString(reasoning) && reasoning->valuestring[0])
        ok = srv_push(content, text_block("thinking", "thinking", reasoning->valuestring));
    if (ok && cJSON_IsString(text) && text->valuestring[0]) ok = srv_push(content, text_block("text", "text", text->valuestring));
    int uses = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        if (!ok) break;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *cid = cJSON_GetObjectItemCaseSensitive(c, "id"), *name = cJSON_GetObjectItemCaseSensitive(fn, "name"),
                    *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const char *a = cJSON_IsString(args) ? args->valuestring : "";
        cJSON *in = call_input(a);
        if (in) {
            ok = srv_push(content, tool_use_block(cJSON_IsString(cid) ? cid->valuestring : "",
                                              cJSON_IsString(name) ? name->valuestring : "", in));
            uses++;
        } else {
            /* arguments that are no object cannot be an input: kept as text, not lost */
            ok = srv_push(content, text_block("text", "text", a));
        }
    }
    ok = ok && srv_put(r, "stop_reason", cJSON_CreateNull()) && srv_put(r, "stop_sequence", cJSON_CreateNull()) &&
         srv_put(r, "usage", usage_json(u));
    if (!ok) {
        cJSON_Delete(r);
        return NULL;
    }
    if (tool_uses) *tool_uses = uses;
    return r;
}

bool srv_anthropic_set_stop(cJSON *message, const char *stop_reason, const char *stop_sequence) {
    return srv_replace(message, "stop_reason", cJSON_CreateString(stop_reason)) &&
           srv_replace(message, "stop_sequence", stop_sequence ? cJSON_CreateString(stop_sequence) : cJSON_CreateNull());
}

/* Appends "event: NAME\ndata: JSON\n\n" (deleting data; NULL: out of memory). */
static bool event(srv_anthropic_stream *st, const char *name, cJSON *data) {
    return wire_sse_event(st->out, st->n, st->cap, name, data);
}

static cJSON *indexed(const char *type, int index) {
    cJSON *o = srv_typed(type);
    if (srv_put_num(o, "index", index)) return o;
    cJSON_Delete(o);
    return NULL;
}

/* content_block_delta of the open block: {"type": dtype, key: text}. */
static bool delta_event(srv_anthropic_stream *st, const char *dtype, const char *key, const char *text) {
    cJSON *e = indexed("content_block_delta", st->index), *d = srv_typed(dtype);
    if (!srv_put_str(d, key, text)) {
        cJSON_Delete(d);
        d = NULL;
    }
    if (!srv_put(e, "delta", d)) {
        cJSON_Delete(e);
        e = NULL;
    }
    return event(st, "content_block_delta", e);
}

bool srv_anthropic_start(srv_anthropic_stream *st, const char *id, const char *model, const srv_usage *u) {
    st->open = SRV_BLOCK_NONE;
    st->index = -1;
    cJSON *e = srv_typed("message_start");
    if (!srv_put(e, "message", srv_anthropic_message(NULL, id, model, u, NULL))) {
        cJSON_Delete(e);
        e = NULL;
    }
    return event(st, "message_start", e);
}

static bool close_block(srv_anthropic_stream *st) {
    if (st->open == SRV_BLOCK_NONE) return true;
    /* no signature: offkv's reasoning is plain text, sent back as is */
    if (st->open == SRV_BLOCK_THINKING && !delta_event(st, "signature_delta", "signature", "")) return false;
    st->open = SRV_BLOCK_NONE;
    return event(st, "content_block_stop", indexed("content_block_stop", st->index));
}

/* Opens a block of kind with its start object (taken; NULL: out of
 * memory), closing the open one. */
static bool open_block(srv_anthropic_stream *st, int kind, cJSON *block) {
    if (!block || !close_block(st)) {
        cJSON_Delete(block);
        return false;
    }
    st->open = kind;
    st->index++;
    cJSON *e = indexed("content_block_start", st->index);
    if (!srv_put(e, "content_block", block)) {
        cJSON_Delete(e);
        e = NULL;
    }
    return event(st, "content_block_start", e);
}

/* The tool call read so far, once it is whole (another block begins, or
 * the answer ends): a tool_use block with its input in one
 * input_json_delta when its arguments are a JSON object, else (a format
 * offkv could not constrain) their text in a text block, so that no
 * client gets an input it cannot parse. */
static bool flush_call(srv_anthropic_stream *st) {
    if (!st->call_id) return true;
    cJSON *in = call_input(st->args);
    bool ok;
    if (in) {
        cJSON_Delete(in);
        ok = open_block(st, SRV_BLOCK_TOOL_USE, tool_use_block(st->call_id, st->call_name, cJSON_CreateObject())) &&
             (!st->n_args || delta_event(st, "input_json_delta", "partial_json", st->args));
        st->tool_uses++;
    } else {
        ok = (st->open == SRV_BLOCK_TEXT || open_block(st, SRV_BLOCK_TEXT, text_block("text", "text", ""))) &&
             delta_event(st, "text_delta", "text", st->args ? st->args : "");
    }
    free(st->call_id);
    free(st->call_name);
    st->call_id = st->call_name = NULL;
    st->n_args = 0;
    if (st->args) st->args[0] = '\0';
    return ok;
}

bool srv_anthropic_delta(srv_anthropic_stream *st, const cJSON *d) {
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content"),
                *text = cJSON_GetObjectItemCaseSensitive(d, "content"), *calls = cJSON_GetObjectItemCaseSensitive(d, "tool_calls");
    if (cJSON_IsString(reasoning) && reasoning->valuestring[0]) {
        if (!flush_call(st)) return false;
        if (st->open != SRV_BLOCK_THINKING && !open_block(st, SRV_BLOCK_THINKING, text_block("thinking", "thinking", "")))
            return false;
        if (!delta_event(st, "thinking_delta", "thinking", reasoning->valuestring)) return false;
    }
    if (cJSON_IsString(text) && text->valuestring[0]) {
        if (!flush_call(st)) return false;
        if (st->open != SRV_BLOCK_TEXT && !open_block(st, SRV_BLOCK_TEXT, text_block("text", "text", ""))) return false;
        if (!delta_event(st, "text_delta", "text", text->valuestring)) return false;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id"), *name = cJSON_GetObjectItemCaseSensitive(fn, "name"),
                    *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (cJSON_IsString(id)) { /* a call's first piece: the one before it is whole */
            if (!flush_call(st)) return false;
            st->call_id = strdup(id->valuestring);
            st->call_name = strdup(cJSON_IsString(name) ? name->valuestring : "");
            if (!st->call_id || !st->call_name) return false;
        }
        if (st->call_id && cJSON_IsString(args) &&
            !wire_append_text(&st->args, &st->n_args, &st->cap_args, args->valuestring, strlen(args->valuestring)))
            return false;
    }
    return true;
}

bool srv_anthropic_finish(srv_anthropic_stream *st) { return flush_call(st) && close_block(st); }

bool srv_anthropic_end(srv_anthropic_stream *st, const char *stop_reason, const char *stop_sequence,
                       const srv_usage *u) {
    if (!srv_anthropic_finish(st)) return false;
    cJSON *e = srv_typed("message_delta"), *d = cJSON_CreateObject();
    if (!srv_put_str(d, "stop_reason", stop_reason) ||
        !srv_put(d, "stop_sequence", stop_sequence ? cJSON_CreateString(stop_sequence) : cJSON_CreateNull())) {
        cJSON_Delete(d);
        d = NULL;
    }
    if (!srv_put(e, "delta", d) || !srv_put(e, "usage", usage_json(u))) {
        cJSON_Delete(e);
        e = NULL;
    }
    return event(st, "message_delta", e) && event(st, "message_stop", srv_typed("message_stop"));
}

bool srv_anthropic_ping(srv_anthropic_stream *st) { return event(st, "ping", srv_typed("ping")); }

bool srv_anthropic_error_event(srv_anthropic_stream *st, const srv_fail *f) {
    char *s = srv_anthropic_error_json(f);
    cJSON *data = s ? cJSON_Parse(s) : NULL;
    free(s);
    return event(st, "error", data);
}

void srv_anthropic_stream_free(srv_anthropic_stream *st) {
    free(st->call_id);
    free(st->call_name);
    free(st->args);
    st->call_id = st->call_name = st->args = NULL;
}
