/* OpenAI's Responses API (POST /v1/responses) over the chat endpoint's
 * machinery, as anthropic.c carries Anthropic's: a request becomes the
 * body of an OpenAI chat request — instructions as a system turn, message
 * items as turns, function_call items as an assistant's tool_calls,
 * function_call_output items as tool turns, reasoning items as the next
 * assistant turn's reasoning_content, tools, tool_choice and text.format in
 * the chat shapes — which request.c and template.c parse as they parse
 * every chat request; an answer's OpenAI pieces (srv_chat_message,
 * srv_chat_stream_feed's deltas) become output items and the Responses
 * stream's events here.  So one conversation renders to one prompt
 * whichever API carried it.
 *
 * offkv keeps no responses and runs no tools: previous_response_id,
 * conversation, item references, stored prompts and background runs are
 * refused, and so are built-in tools (web search, file search, ...) and
 * image, file and audio inputs, each naming the field.  Fields that change
 * nothing here (store, metadata, include, truncation, user, service_tier,
 * prompt_cache_key, ...) are ignored, as the chat endpoint ignores fields
 * it does not know. */
#include <inttypes.h>
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

/* ---- requests ---- */

typedef struct named_call {
    const char *id, *name;
} named_call;

/* The chat turns being built, and what joins the next assistant turn. */
typedef struct conv {
    cJSON *turns;
    cJSON *asst;          /* the last turn, an assistant's that a function_call item joins (NULL: none) */
    char *reasoning;      /* reasoning items' text since the last assistant turn */
    size_t n_reasoning, cap_reasoning;
    named_call *calls;    /* the input's function calls, by id: a tool turn is named after its call */
    size_t n_calls;
} conv;

static int by_call_id(const void *a, const void *b) { return strcmp(((const named_call *)a)->id, ((const named_call *)b)->id); }

static bool item_is(const cJSON *item, const char *type) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(item, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* Sorts the function_call items' call_ids and names once, so that naming
 * n tool turns costs n log n. */
static bool index_calls(const cJSON *input, conv *cv, srv_fail *f) {
    const cJSON *it;
    size_t n = 0;
    cJSON_ArrayForEach(it, input) n++;
    if (!(cv->calls = malloc(n * sizeof *cv->calls + 1))) return oom(f);
    cJSON_ArrayForEach(it, input) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id"), *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (item_is(it, "function_call") && cJSON_IsString(id) && cJSON_IsString(name))
            cv->calls[cv->n_calls++] = (named_call){id->valuestring, name->valuestring};
    }
    qsort(cv->calls, cv->n_calls, sizeof *cv->calls, by_call_id);
    return true;
}

static const char *call_name(const conv *cv, const char *call_id) {
    const named_call key = {call_id, NULL};
    const named_call *hit = cv->calls ? bsearch(&key, cv->calls, cv->n_calls, sizeof *cv->calls, by_call_id) : NULL;
    return hit ? hit->name : NULL;
}

/* A text part: {"type": type, "text": text} (output_text's with its
 * annotations and logprobs, empty). */
static cJSON *part_json(const char *type, const char *text) {
    cJSON *p = srv_typed(type);
    bool ok = srv_put_str(p, "text", text);
    if (ok && !strcmp(type, "output_text"))
        ok = srv_put(p, "annotations", cJSON_CreateArray()) && srv_put(p, "logprobs", cJSON_CreateArray());
    if (ok) return p;
    cJSON_Delete(p);
    return NULL;
}

/* A message's or a call output's content as chat content parts: a string,
 * or input_text / output_text / refusal parts (joined as the chat
 * endpoint joins parts). */
static cJSON *content_parts(const cJSON *c, const char *where, int i, srv_fail *f) {
    cJSON *parts = cJSON_CreateArray();
    if (!parts) {
        oom(f);
        return NULL;
    }
    bool ok = true;
    if (cJSON_IsString(c)) {
        if (!(ok = srv_push(parts, part_json("text", c->valuestring)))) oom(f);
    } else if (!cJSON_IsArray(c)) {
        ok = srv_bad(f, "input", "input[%d].%s must be a string or an array of content parts", i, where);
    } else {
        const cJSON *part;
        int j = 0;
        cJSON_ArrayForEach(part, c) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
            const char *t = cJSON_IsString(type) ? type->valuestring : "";
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, !strcmp(t, "refusal") ? "refusal" : "text");
            if (!strcmp(t, "input_image") || !strcmp(t, "input_file") || !strcmp(t, "input_audio")) {
                ok = srv_bad(f, "input", "input[%d].%s[%d] is an '%s' part; offkv serves text only", i, where, j, t);
            } else if (!(strcmp(t, "input_text") == 0 || strcmp(t, "output_text") == 0 || strcmp(t, "refusal") == 0 ||
                         strcmp(t, "text") == 0) ||
                       !cJSON_IsString(text)) {
                ok = srv_bad(f, "input", "input[%d].%s[%d] must be {\"type\": \"input_text\", \"text\": ...} (or "
                             "output_text, refusal)", i, where, j);
            } else {
                if (!(ok = srv_push(parts, part_json("text", text->valuestring)))) oom(f);
            }
            if (!ok) break;
            j++;
        }
    }
    if (ok) return parts;
    cJSON_Delete(parts);
    return NULL;
}

/* A new turn of role with content (taken).  The reasoning gathered so
 * far goes with it when it is an assistant's, and is dropped before any
 * other (it thought towards an answer that never came: carried on, it
 * would show as a later answer's). */
static cJSON *add_turn(conv *cv, const char *role, cJSON *content, srv_fail *f) {
    cJSON *t = cJSON_CreateObject();
    bool ok = srv_put_str(t, "role", role) && srv_put(t, "content", content);
    content = NULL;
    if (ok && cv->reasoning) {
        if (!strcmp(role, "assistant")) ok = srv_put_str(t, "reasoning_content", cv->reasoning);
        free(cv->reasoning);
        cv->reasoning = NULL;
        cv->n_reasoning = cv->cap_reasoning = 0;
    }
    if (!ok) cJSON_Delete(t);
    if (!ok || !srv_push(cv->turns, t)) {
        oom(f);
        return NULL;
    }
    return t;
}

static bool message_item(conv *cv, const cJSON *it, int i, srv_fail *f) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
    static const char *const roles[] = {"user", "system", "developer", "assistant", NULL};
    int k = 0;
    while (cJSON_IsString(role) && roles[k] && strcmp(roles[k], role->valuestring) != 0) k++;
    if (!cJSON_IsString(role) || !roles[k])
        return srv_bad(f, "input", "input[%d].role must be \"user\", \"system\", \"developer\" or \"assistant\"", i);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
    if (!c) return srv_bad(f, "input", "input[%d].content is required", i);
    cJSON *parts = content_parts(c, "content", i, f);
    if (!parts) return false;
    cJSON *t = add_turn(cv, roles[k], parts, f);
    cv->asst = t && !strcmp(roles[k], "assistant") ? t : NULL;
    return t != NULL;
}

static bool call_item(conv *cv, const cJSON *it, int i, srv_fail *f) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id"), *name = cJSON_GetObjectItemCaseSensitive(it, "name"),
                *args = cJSON_GetObjectItemCaseSensitive(it, "arguments");
    if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsString(args))
        return srv_bad(f, "input", "input[%d] must be {\"type\": \"function_call\", \"call_id\", \"name\", \"arguments\": "
                       "\"...\"} (strings)", i);
    /* calls join the assistant turn before them, unless reasoning came
     * between (the model thought again: a turn of its own) */
    if (!cv->asst || cv->reasoning) {
        cJSON *empty = cJSON_CreateString(""); /* "": templates call string methods on it */
        if (!(cv->asst = add_turn(cv, "assistant", empty, f))) return false;
    }
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(cv->asst, "tool_calls");
    if (!calls && !(calls = cJSON_AddArrayToObject(cv->asst, "tool_calls"))) return oom(f);
    cJSON *c = cJSON_CreateObject(), *fn = c ? cJSON_AddObjectToObject(c, "function") : NULL;
    if (!(fn && srv_put_str(c, "id", id->valuestring) && srv_put_str(c, "type", "function") &&
          srv_put_str(fn, "name", name->valuestring) && srv_put_str(fn, "arguments", args->valuestring))) {
        cJSON_Delete(c);
        return oom(f);
    }
    return srv_push(calls, c) || oom(f);
}

static bool output_item(conv *cv, const cJSON *it, int i, srv_fail *f) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id"), *out = cJSON_GetObjectItemCaseSensitive(it, "output");
    if (!cJSON_IsString(id)) return srv_bad(f, "input", "input[%d].call_id must be a string", i);
    if (!out) return srv_bad(f, "input", "input[%d].output is required", i);
    cJSON *parts = content_parts(out, "output", i, f);
    if (!parts) return false;
    cJSON *t = add_turn(cv, "tool", parts, f);
    if (!t) return false;
    cv->asst = NULL;
    const char *name = call_name(cv, id->valuestring);
    return (srv_put_str(t, "tool_call_id", id->valuestring) && (!name || srv_put_str(t, "name", name))) || oom(f);
}

/* A reasoning item's text: its reasoning_text parts, else its summary's
 * (encrypted_content, another engine's, is nothing a template can show). */
static bool reasoning_item(conv *cv, const cJSON *it, int i, srv_fail *f) {
    const char *keys[2] = {"content", "summary"};
    for (int k = 0; k < 2; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(it, keys[k]), *p;
        if (a && !cJSON_IsNull(a) && !cJSON_IsArray(a))
            return srv_bad(f, "input", "input[%d].%s must be an array of text parts", i, keys[k]);
        bool any = false;
        cJSON_ArrayForEach(p, a) {
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
            if (!cJSON_IsString(text)) return srv_bad(f, "input", "input[%d].%s holds a part with no 'text'", i, keys[k]);
            if ((cv->n_reasoning && !wire_append_text(&cv->reasoning, &cv->n_reasoning, &cv->cap_reasoning, "\n\n", 2)) ||
                !wire_append_text(&cv->reasoning, &cv->n_reasoning, &cv->cap_reasoning, text->valuestring,
                                  strlen(text->valuestring)))
                return oom(f);
            any = true;
        }
        if (any) break;
    }
    return true;
}

static bool one_item(conv *cv, const cJSON *it, int i, srv_fail *f) {
    if (!cJSON_IsObject(it)) return srv_bad(f, "input", "input[%d] must be an object", i);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
    if (type && !cJSON_IsString(type)) return srv_bad(f, "input", "input[%d].type must be a string", i);
    const char *t = type ? type->valuestring : "message"; /* {"role", "content"} alone is a message */
    if (!strcmp(t, "message")) return message_item(cv, it, i, f);
    if (!strcmp(t, "function_call")) return call_item(cv, it, i, f);
    if (!strcmp(t, "function_call_output")) return output_item(cv, it, i, f);
    if (!strcmp(t, "reasoning")) return reasoning_item(cv, it, i, f);
    if (!strcmp(t, "item_reference"))
        return srv_bad(f, "input", "input[%d] is an item_reference; offkv keeps no items: send the item itself", i);
    return srv_bad(f, "input", "input[%d] is a '%.60s' item; offkv takes message, function_call, function_call_output "
                   "and reasoning items (it runs no tools itself)", i, t);
}

/* Copies src's fields of the NULL-ended keys that are there and not null
 * into dst; false when out of memory. */
static bool copy_keys(cJSON *dst, const cJSON *src, const char *const *keys) {
    for (int k = 0; keys[k]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, keys[k]);
        if (v && !cJSON_IsNull(v) && !srv_put(dst, keys[k], cJSON_Duplicate(v, true))) return false;
    }
    return true;
}

/* tools and tool_choice in the chat shapes. */
static bool tools_to_chat(const cJSON *root, cJSON *o, srv_fail *f) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) return srv_bad(f, "tools", "'tools' must be an array");
        cJSON *out = cJSON_AddArrayToObject(o, "tools");
        if (!out) return oom(f);
        const cJSON *t;
        int i = 0;
        cJSON_ArrayForEach(t, tools) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type"), *name = cJSON_GetObjectItemCaseSensitive(t, "name");
            if (!cJSON_IsObject(t) || !cJSON_IsString(type))
                return srv_bad(f, "tools", "tools[%d] must be {\"type\": \"function\", \"name\": ..., \"parameters\": {...}}", i);
            if (strcmp(type->valuestring, "function") != 0)
                return srv_bad(f, "tools", "tools[%d] is a '%.60s' tool; offkv runs no tools itself: declare functions "
                               "({\"type\": \"function\", \"name\": ...})", i, type->valuestring);
            if (!cJSON_IsString(name)) return srv_bad(f, "tools", "tools[%d].name must be a string", i);
            cJSON *ot = cJSON_CreateObject(), *fn = ot ? cJSON_AddObjectToObject(ot, "function") : NULL;
            static const char *const keys[] = {"name", "description", "parameters", "strict", NULL};
            if (!(fn && srv_put_str(ot, "type", "function") && copy_keys(fn, t, keys))) {
                cJSON_Delete(ot);
                return oom(f);
            }
            if (!srv_push(out, ot)) return oom(f);
            i++;
        }
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (!tc || cJSON_IsNull(tc)) return true;
    static const char shape[] = "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                                "\"name\": ...}";
    if (cJSON_IsString(tc)) {
        if (strcmp(tc->valuestring, "auto") != 0 && strcmp(tc->valuestring, "none") != 0 &&
            strcmp(tc->valuestring, "required") != 0)
            return srv_bad(f, "tool_choice", shape);
        return srv_put_str(o, "tool_choice", tc->valuestring) || oom(f);
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type"), *name = cJSON_GetObjectItemCaseSensitive(tc, "name");
    if (!cJSON_IsObject(tc) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 || !cJSON_IsString(name))
        return srv_bad(f, "tool_choice", shape);
    cJSON *c = cJSON_AddObjectToObject(o, "tool_choice"), *fn = c ? cJSON_AddObjectToObject(c, "function") : NULL;
    return (fn && srv_put_str(c, "type", "function") && srv_put_str(fn, "name", name->valuestring)) || oom(f);
}

/* text.format as the chat response_format. */
static bool format_to_chat(const cJSON *root, cJSON *o, srv_fail *f) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text");
    if (!text || cJSON_IsNull(text)) return true;
    if (!cJSON_IsObject(text)) return srv_bad(f, "text", "'text' must be an object");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(text, "format");
    if (!fmt || cJSON_IsNull(fmt)) return true;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(fmt, "type");
    static const char shape[] = "'text.format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                                "{\"type\": \"json_schema\", \"name\": ..., \"schema\": {...}}";
    if (!cJSON_IsObject(fmt) || !cJSON_IsString(type)) return srv_bad(f, "text", shape);
    const char *t = type->valuestring;
    if (!strcmp(t, "text")) return true;
    cJSON *rf = srv_typed(t);
    if (!strcmp(t, "json_object")) return srv_put(o, "response_format", rf) || oom(f);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(fmt, "schema");
    if (strcmp(t, "json_schema") != 0 || !cJSON_IsObject(schema)) {
        cJSON_Delete(rf);
        return srv_bad(f, "text", shape);
    }
    cJSON *js = rf ? cJSON_AddObjectToObject(rf, "json_schema") : NULL;
    static const char *const keys[] = {"name", "description", "schema", "strict", NULL};
    if (!(js && copy_keys(js, fmt, keys))) {
        cJSON_Delete(rf);
        return oom(f);
    }
    return srv_put(o, "response_format", rf) || oom(f);
}

/* What a stateless server cannot do, refused by name. */
static bool stateless(const cJSON *root, srv_fail *f) {
    static const char *const kept[][2] = {
        {"previous_response_id", "send the whole conversation in 'input'"},
        {"conversation", "send the whole conversation in 'input'"},
        {"prompt", "send the instructions and input themselves"},
    };
    for (size_t k = 0; k < sizeof kept / sizeof kept[0]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, kept[k][0]);
        if (v && !cJSON_IsNull(v))
            return srv_bad(f, kept[k][0], "'%s' is not supported: offkv keeps no responses; %s", kept[k][0], kept[k][1]);
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "background")))
        return srv_bad(f, "background", "'background' is not supported: offkv keeps no responses to poll; stream instead");
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(root, "top_logprobs");
    if (lp && !cJSON_IsNull(lp) && !(cJSON_IsNumber(lp) && lp->valuedouble == 0))
        return srv_bad(f, "top_logprobs", "'top_logprobs' is not supported on /v1/responses; /v1/chat/completions "
                       "returns logprobs");
    return true;
}

char *srv_responses_request(const char *body, size_t len, srv_fail *f) {
    cJSON *root = srv_body_parse(body, len, f);
    if (!root) return NULL;
    cJSON *o = cJSON_CreateObject();
    conv cv = {.turns = o ? cJSON_AddArrayToObject(o, "messages") : NULL};
    char *text = NULL;
    bool ok = cv.turns != NULL;
    if (!ok) oom(f);
    if (ok) ok = stateless(root, f);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(root, "instructions");
    if (ok && ins && !cJSON_IsNull(ins)) {
        if (!cJSON_IsString(ins)) ok = srv_bad(f, "instructions", "'instructions' must be a string");
        else ok = add_turn(&cv, "system", cJSON_CreateString(ins->valuestring), f) != NULL;
    }
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (ok && cJSON_IsString(input)) {
        ok = add_turn(&cv, "user", cJSON_CreateString(input->valuestring), f) != NULL;
    } else if (ok && !cJSON_IsArray(input)) {
        ok = srv_bad(f, "input", input ? "'input' must be a string or an array of items" : "'input' is required");
    } else if (ok && !input->child) {
        ok = srv_bad(f, "input", "'input' must hold at least one item");
    } else if (ok && (ok = index_calls(input, &cv, f))) {
        const cJSON *it;
        int i = 0;
        cJSON_ArrayForEach(it, input) {
            if (!(ok = one_item(&cv, it, i++, f))) break;
        }
        /* reasoning after the last assistant turn has no turn to go with:
         * templates show reasoning only as an assistant's */
    }
    static const char *const same[] = {"model", "temperature", "top_p", "stream", "parallel_tool_calls", NULL};
    for (int k = 0; ok && same[k]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, same[k]);
        if (v && !srv_put(o, same[k], cJSON_Duplicate(v, true))) ok = oom(f);
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "max_output_tokens");
    if (ok && mt && !cJSON_IsNull(mt)) {
        if (!cJSON_IsNumber(mt) || mt->valuedouble < 1 || mt->valuedouble > (1 << 30) ||
            mt->valuedouble != (double)(int64_t)mt->valuedouble)
            ok = srv_bad(f, "max_output_tokens", "'max_output_tokens' must be a whole number from 1 to %d", 1 << 30);
        else if (!srv_put_num(o, "max_completion_tokens", mt->valuedouble)) ok = oom(f);
    }
    if (ok) ok = tools_to_chat(root, o, f);
    if (ok) ok = format_to_chat(root, o, f);
    /* reasoning.effort: the chat endpoint's reasoning_effort, which
     * gpt-oss's template reads (template.c) */
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "reasoning");
    const cJSON *effort = cJSON_GetObjectItemCaseSensitive(rs, "effort");
    if (ok && rs && !cJSON_IsNull(rs) && !cJSON_IsObject(rs)) ok = srv_bad(f, "reasoning", "'reasoning' must be an object");
    else if (ok && effort && !cJSON_IsNull(effort)) {
        if (!cJSON_IsString(effort) || !srv_effort_ok(effort->valuestring))
            ok = srv_bad(f, "reasoning", "'reasoning.effort' must be one of %s", SRV_EFFORTS);
        else if (!srv_put_str(o, "reasoning_effort", effort->valuestring)) ok = oom(f);
    }
    if (ok && !(text = cJSON_PrintUnformatted(o))) oom(f);
    cJSON_Delete(o);
    cJSON_Delete(root);
    free(cv.reasoning);
    free(cv.calls);
    return text;
}

/* ---- answers ----
 *
 * Every builder checks each add and gives up (NULL, false) rather than
 * send an object or an event a field short (jsonput.h). */

static const char *const kind_prefix[] = {"rs", "msg", "fc"};

static void item_id(const srv_responses *r, int i, char *out, size_t cap) {
    const char *tail = strncmp(r->id, "resp_", 5) == 0 ? r->id + 5 : r->id;
    snprintf(out, cap, "%s_%s_%d", kind_prefix[r->items[i].kind], tail, i);
}

static srv_responses_item *new_item(srv_responses *r, int kind) {
    if (r->n_items == r->cap_items) {
        const int cap = r->cap_items ? 2 * r->cap_items : 4;
        srv_responses_item *p = realloc(r->items, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        r->items = p;
        r->cap_items = cap;
    }
    srv_responses_item *it = &r->items[r->n_items++];
    *it = (srv_responses_item){.kind = kind};
    return it;
}

static bool add_text(srv_responses_item *it, const char *s) { return wire_append_text(&it->text, &it->n, &it->cap, s, strlen(s)); }

/* Item i as JSON: whole when done, else as output_item.added shows it
 * (no text yet). */
static cJSON *item_json(const srv_responses *r, int i, bool done) {
    const srv_responses_item *it = &r->items[i];
    char id[80];
    item_id(r, i, id, sizeof id);
    const char *text = done && it->text ? it->text : "";
    static const char *const types[] = {"reasoning", "message", "function_call"};
    cJSON *o = srv_typed(types[it->kind]);
    bool ok = srv_put_str(o, "id", id) && srv_put_str(o, "status", done ? "completed" : "in_progress");
    if (ok && it->kind == SRV_ITEM_CALL) {
        ok = srv_put_str(o, "call_id", it->call_id) && srv_put_str(o, "name", it->name) && srv_put_str(o, "arguments", text);
    } else if (ok) {
        cJSON *content = cJSON_CreateArray();
        if (done) ok = srv_push(content, part_json(it->kind == SRV_ITEM_MESSAGE ? "output_text" : "reasoning_text", text));
        ok = srv_put(o, "content", content) && ok;
        if (ok && it->kind == SRV_ITEM_MESSAGE) ok = srv_put_str(o, "role", "assistant");
        if (ok && it->kind == SRV_ITEM_REASONING) ok = srv_put(o, "summary", cJSON_CreateArray());
    }
    if (ok) return o;
    cJSON_Delete(o);
    return NULL;
}

static cJSON *usage_json(const srv_usage *u) {
    cJSON *o = cJSON_CreateObject(), *d;
    if (srv_put_num(o, "input_tokens", (double)u->input) && (d = cJSON_AddObjectToObject(o, "input_tokens_details")) &&
        srv_put_num(d, "cached_tokens", (double)u->cached) && srv_put_num(o, "output_tokens", (double)u->output) &&
        (d = cJSON_AddObjectToObject(o, "output_tokens_details")) &&
        srv_put_num(d, "reasoning_tokens", (double)u->reasoning) &&
        srv_put_num(o, "total_tokens", (double)(u->input + u->output)))
        return o;
    cJSON_Delete(o);
    return NULL;
}

/* The response object: status "in_progress" (no usage yet, and no output
 * when not done), "completed" or "incomplete" (length). */
static cJSON *response_json(const srv_responses *r, const char *status, const srv_usage *u) {
    cJSON *o = cJSON_CreateObject(), *out = cJSON_CreateArray();
    bool ok = srv_put_str(o, "id", r->id) && srv_put_str(o, "object", "response") &&
              srv_put_num(o, "created_at", (double)r->created) && srv_put_str(o, "status", status) &&
              srv_put(o, "error", cJSON_CreateNull()) && srv_put_str(o, "model", r->model);
    cJSON *inc = NULL;
    if (ok && !strcmp(status, "incomplete")) {
        inc = cJSON_CreateObject();
        ok = srv_put_str(inc, "reason", "max_output_tokens") || (cJSON_Delete(inc), inc = NULL, false);
    }
    ok = ok && srv_put(o, "incomplete_details", inc ? inc : cJSON_CreateNull());
    const bool done = strcmp(status, "in_progress") != 0;
    for (int i = 0; ok && done && i < r->n_items; i++) ok = srv_push(out, item_json(r, i, true));
    ok = srv_put(o, "output", out) && ok;
    ok = ok && srv_put(o, "usage", done && u ? usage_json(u) : cJSON_CreateNull());
    if (ok) return o;
    cJSON_Delete(o);
    return NULL;
}

cJSON *srv_responses_object(srv_responses *r, const cJSON *msg, bool length, const srv_usage *u) {
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(msg, "reasoning_content"),
                *text = cJSON_GetObjectItemCaseSensitive(msg, "content"), *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"),
                *c;
    srv_responses_item *it;
    if (cJSON_IsString(reasoning) && reasoning->valuestring[0] &&
        !((it = new_item(r, SRV_ITEM_REASONING)) && add_text(it, reasoning->valuestring)))
        return NULL;
    /* a message item unless the answer is calls alone: "" is an answer */
    if (((cJSON_IsString(text) && text->valuestring[0]) || !cJSON_GetArraySize(calls)) &&
        !((it = new_item(r, SRV_ITEM_MESSAGE)) && add_text(it, cJSON_IsString(text) ? text->valuestring : "")))
        return NULL;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function"), *id = cJSON_GetObjectItemCaseSensitive(c, "id"),
                    *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!(it = new_item(r, SRV_ITEM_CALL)) ||
            !(it->call_id = strdup(cJSON_IsString(id) ? id->valuestring : "")) ||
            !(it->name = strdup(cJSON_IsString(name) ? name->valuestring : "")) ||
            !add_text(it, cJSON_IsString(args) ? args->valuestring : ""))
            return NULL;
    }
    return response_json(r, length ? "incomplete" : "completed", u);
}

/* ---- the stream ---- */

/* An event of type (its name too) with its sequence_number. */
static cJSON *ev(srv_responses *r, const char *type) {
    cJSON *e = srv_typed(type);
    if (srv_put_num(e, "sequence_number", (double)r->seq++)) return e;
    cJSON_Delete(e);
    return NULL;
}

/* An event about item i (its id, its output_index; content_index 0 for
 * the text of a message or reasoning). */
static cJSON *item_ev(srv_responses *r, const char *type, int i) {
    char id[80];
    item_id(r, i, id, sizeof id);
    cJSON *e = ev(r, type);
    if (srv_put_str(e, "item_id", id) && srv_put_num(e, "output_index", i) &&
        (r->items[i].kind == SRV_ITEM_CALL || srv_put_num(e, "content_index", 0)))
        return e;
    cJSON_Delete(e);
    return NULL;
}

static bool emit(srv_responses *r, cJSON *e) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
    return e && wire_sse_event(r->out, r->n, r->cap, type->valuestring, e);
}

/* e with key: v added (taken), or NULL. */
static cJSON *with(cJSON *e, const char *key, cJSON *v) {
    if (srv_put(e, key, v)) return e;
    cJSON_Delete(e);
    return NULL;
}

static cJSON *with_str(cJSON *e, const char *key, const char *s) { return with(e, key, cJSON_CreateString(s)); }

static bool output_item_ev(srv_responses *r, const char *type, int i, bool done) {
    cJSON *e = ev(r, type);
    if (!srv_put_num(e, "output_index", i)) {
        cJSON_Delete(e);
        e = NULL;
    }
    return emit(r, with(e, "item", item_json(r, i, done)));
}

static const char *text_type(int kind) { return kind == SRV_ITEM_MESSAGE ? "output_text" : "reasoning_text"; }

static bool close_item(srv_responses *r) {
    if (!r->open) return true;
    r->open = false;
    const int i = r->n_items - 1;
    const srv_responses_item *it = &r->items[i];
    const char *text = it->text ? it->text : "";
    bool ok;
    if (it->kind == SRV_ITEM_CALL) {
        ok = emit(r, with_str(with_str(item_ev(r, "response.function_call_arguments.done", i), "name", it->name),
                              "arguments", text));
    } else {
        const bool msg = it->kind == SRV_ITEM_MESSAGE;
        cJSON *done = with_str(item_ev(r, msg ? "response.output_text.done" : "response.reasoning_text.done", i), "text", text);
        if (msg) done = with(done, "logprobs", cJSON_CreateArray());
        ok = emit(r, done) &&
             emit(r, with(item_ev(r, "response.content_part.done", i), "part", part_json(text_type(it->kind), text)));
    }
    return ok && output_item_ev(r, "response.output_item.done", i, true);
}

/* Opens an item of kind (a call's: its id and name), closing the open one. */
static bool open_item(srv_responses *r, int kind, const char *call_id, const char *name) {
    srv_responses_item *it = close_item(r) ? new_item(r, kind) : NULL;
    if (!it || (call_id && !((it->call_id = strdup(call_id)) && (it->name = strdup(name))))) return false;
    r->open = true;
    const int i = r->n_items - 1;
    if (!output_item_ev(r, "response.output_item.added", i, false)) return false;
    return kind == SRV_ITEM_CALL ||
           emit(r, with(item_ev(r, "response.content_part.added", i), "part", part_json(text_type(kind), "")));
}

/* A delta event of the open item, its text grown by s. */
static bool grow(srv_responses *r, const char *s) {
    srv_responses_item *it = &r->items[r->n_items - 1];
    static const char *const types[] = {"response.reasoning_text.delta", "response.output_text.delta",
                                        "response.function_call_arguments.delta"};
    cJSON *e = with_str(item_ev(r, types[it->kind], r->n_items - 1), "delta", s);
    if (it->kind == SRV_ITEM_MESSAGE) e = with(e, "logprobs", cJSON_CreateArray());
    return add_text(it, s) && emit(r, e);
}

bool srv_responses_start(srv_responses *r) {
    return emit(r, with(ev(r, "response.created"), "response", response_json(r, "in_progress", NULL))) &&
           emit(r, with(ev(r, "response.in_progress"), "response", response_json(r, "in_progress", NULL)));
}

static bool open_kind(const srv_responses *r, int kind) { return r->open && r->items[r->n_items - 1].kind == kind; }

bool srv_responses_delta(srv_responses *r, const cJSON *d) {
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content"),
                *text = cJSON_GetObjectItemCaseSensitive(d, "content"), *calls = cJSON_GetObjectItemCaseSensitive(d, "tool_calls");
    if (cJSON_IsString(reasoning) && reasoning->valuestring[0] &&
        !((open_kind(r, SRV_ITEM_REASONING) || open_item(r, SRV_ITEM_REASONING, NULL, NULL)) &&
          grow(r, reasoning->valuestring)))
        return false;
    if (cJSON_IsString(text) && text->valuestring[0] &&
        !((open_kind(r, SRV_ITEM_MESSAGE) || open_item(r, SRV_ITEM_MESSAGE, NULL, NULL)) && grow(r, text->valuestring)))
        return false;
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id"), *name = cJSON_GetObjectItemCaseSensitive(fn, "name"),
                    *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (cJSON_IsString(id) && !open_item(r, SRV_ITEM_CALL, id->valuestring, cJSON_IsString(name) ? name->valuestring : ""))
            return false; /* (a call's first piece: an item of its own) */
        if (open_kind(r, SRV_ITEM_CALL) && cJSON_IsString(args) && args->valuestring[0] && !grow(r, args->valuestring))
            return false;
    }
    return true;
}

bool srv_responses_end(srv_responses *r, bool length, const srv_usage *u) {
    /* an answer of nothing is a message of "", as srv_responses_object's */
    if (!close_item(r) || (r->n_items == 0 && !(open_item(r, SRV_ITEM_MESSAGE, NULL, NULL) && close_item(r)))) return false;
    const char *type = length ? "response.incomplete" : "response.completed";
    return emit(r, with(ev(r, type), "response", response_json(r, length ? "incomplete" : "completed", u)));
}

bool srv_responses_error_event(srv_responses *r, const srv_fail *f) {
    char message[3 * sizeof f->message + 8];
    srv_utf8_clean(f->message, strlen(f->message), message, sizeof message);
    cJSON *e = with_str(with_str(ev(r, "error"), "code", f->type), "message", message);
    return emit(r, with(e, "param", f->param[0] ? cJSON_CreateString(f->param) : cJSON_CreateNull()));
}

void srv_responses_free(srv_responses *r) {
    for (int i = 0; i < r->n_items; i++) {
        free(r->items[i].call_id);
        free(r->items[i].name);
        free(r->items[i].text);
    }
    free(r->items);
    r->items = NULL;
    r->n_items = r->cap_items = 0;
}
