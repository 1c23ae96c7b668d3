/* The assistant's answer as OpenAI shapes it: the generated text parsed by
 * the template's format (offkv/chat.h okv_chat_parse) into content,
 * reasoning_content and tool_calls, whole (a plain answer) or as deltas
 * (a stream: each new piece of text re-parses the answer so far, and only
 * what grew is sent). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve.h"

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A call's id: Mistral's templates want 9 letters or digits; others get
 * OpenAI's "call_" shape. */
static void make_id(const srv_chat_stream *st, int i, char *out, size_t cap) {
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    bool mistral = st->syn.format == OKV_CHAT_FORMAT_MISTRAL;
    size_t k = 0, len = mistral ? 9 : 24;
    if (!mistral) k = (size_t)snprintf(out, cap, "call_");
    uint64_t x = st->id_seed + (uint64_t)i * 0x100000001b3ull;
    for (size_t j = 0; j < len && k + 1 < cap; j++) {
        x = mix(x);
        out[k++] = alnum[x % 62];
    }
    out[k] = '\0';
}

static bool valid_id(const okv_chat_syntax *syn, const char *id) {
    if (!id || !id[0]) return false;
    size_t n = strlen(id);
    if (syn->format == OKV_CHAT_FORMAT_MISTRAL && n != 9) return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '_' || id[i] == '-'))
            return false;
    return n <= 64;
}

void srv_chat_stream_init(srv_chat_stream *st, const okv_chat_syntax *syn, const srv_request *r, uint64_t seed) {
    memset(st, 0, sizeof *st);
    st->syn = *syn;
    /* calls are parsed only when tools are offered; gpt-oss's channels
     * always (its analysis is reasoning), but a call to functions.* that no
     * offered tool allows is not returned: a client that gave no tools
     * must never be handed one to run */
    st->calls = r->tool_choice != SRV_TOOLS_NONE && r->tools_json;
    if (!st->calls && st->syn.format != OKV_CHAT_FORMAT_GPT_OSS) st->syn.format = OKV_CHAT_FORMAT_CONTENT;
    st->parse = st->syn.format != OKV_CHAT_FORMAT_CONTENT || st->syn.think_tags;
    st->parallel = r->parallel_tool_calls;
    st->id_seed = seed;
}

void srv_chat_stream_free(srv_chat_stream *st) {
    free(st->acc);
    for (int i = 0; i < st->n_ids; i++) free(st->ids[i]);
    free(st->ids);
    free(st->args_sent);
    memset(st, 0, sizeof *st);
}

static bool grow_calls(srv_chat_stream *st, int n) {
    if (n <= st->n_ids) return true;
    char **ids = realloc(st->ids, (size_t)n * sizeof *ids);
    if (!ids) return false;
    st->ids = ids;
    size_t *sent = realloc(st->args_sent, (size_t)n * sizeof *sent);
    if (!sent) return false;
    st->args_sent = sent;
    for (int i = st->n_ids; i < n; i++) {
        ids[i] = NULL;
        sent[i] = 0;
    }
    st->n_ids = n;
    return true;
}

/* The id of call i (kept once made). */
static const char *call_id(srv_chat_stream *st, int i, const okv_chat_tool_call *c) {
    if (!st->ids[i]) {
        char buf[64];
        if (valid_id(&st->syn, c->id)) snprintf(buf, sizeof buf, "%s", c->id);
        else make_id(st, i, buf, sizeof buf);
        st->ids[i] = strdup(buf);
    }
    return st->ids[i] ? st->ids[i] : "call_0";
}

static cJSON *call_json(srv_chat_stream *st, int i, const okv_chat_tool_call *c, const char *args, bool with_head) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "index", i);
    if (with_head) {
        cJSON_AddStringToObject(o, "id", call_id(st, i, c));
        cJSON_AddStringToObject(o, "type", "function");
    }
    cJSON *fn = cJSON_AddObjectToObject(o, "function");
    if (with_head) cJSON_AddStringToObject(fn, "name", c->name);
    cJSON_AddStringToObject(fn, "arguments", args);
    return o;
}

bool srv_chat_stream_feed(srv_chat_stream *st, const char *text, size_t n, bool final, cJSON *delta, bool *any) {
    *any = false;
    if (!st->parse) {
        if (n) {
            char *s = strndup(text, n);
            if (!s) return false;
            cJSON_AddStringToObject(delta, "content", s);
            free(s);
            *any = true;
        }
        return true;
    }
    if (st->n + n + 1 > st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 1024;
        while (cap < st->n + n + 1) cap *= 2;
        char *p = realloc(st->acc, cap);
        if (!p) return false;
        st->acc = p;
        st->cap = cap;
    }
    memcpy(st->acc + st->n, text, n);
    st->n += n;
    st->acc[st->n] = '\0';
    okv_chat_msg m;
    if (okv_chat_parse(&st->syn, st->acc, st->n, !final, &m, NULL) != OKV_OK) return false;
    bool ok = true;
    /* reasoning, content: what grew (a final parse that disagrees with what
     * was sent, a call that turned out broken, cannot be taken back) */
    if (m.reasoning_content && strlen(m.reasoning_content) > st->reasoning_sent) {
        cJSON_AddStringToObject(delta, "reasoning_content", m.reasoning_content + st->reasoning_sent);
        st->reasoning_sent = strlen(m.reasoning_content);
        *any = true;
    }
    if (strlen(m.content) > st->content_sent) {
        cJSON_AddStringToObject(delta, "content", m.content + st->content_sent);
        st->content_sent = strlen(m.content);
        *any = true;
    }
    int n_calls = !st->calls ? 0 : st->parallel ? m.n_tool_calls : (m.n_tool_calls > 0 ? 1 : 0);
    cJSON *calls = NULL;
    if (n_calls > 0 && grow_calls(st, n_calls)) {
        for (int i = 0; i < n_calls; i++) {
            const okv_chat_tool_call *c = &m.tool_calls[i];
            if (!c->name) break;
            bool head = i >= st->calls_started;
            size_t have = strlen(c->arguments);
            if (!head && have <= st->args_sent[i]) continue;
            if (!calls && !(calls = cJSON_AddArrayToObject(delta, "tool_calls"))) {
                ok = false;
                break;
            }
            cJSON *o = call_json(st, i, c, head ? c->arguments : c->arguments + st->args_sent[i], head);
            if (!o) {
                ok = false;
                break;
            }
            cJSON_AddItemToArray(calls, o);
            st->args_sent[i] = have;
            if (head) st->calls_started = i + 1;
            *any = true;
        }
    }
    okv_chat_msg_free(&m);
    return ok;
}

bool srv_chat_stream_called(const srv_chat_stream *st) { return st->calls_started > 0; }

bool srv_chat_needs_special(const srv_chat_stream *st) {
    return st->syn.format == OKV_CHAT_FORMAT_GPT_OSS || st->syn.format == OKV_CHAT_FORMAT_LLAMA3 ||
           st->syn.format == OKV_CHAT_FORMAT_MISTRAL || st->syn.format == OKV_CHAT_FORMAT_DEEPSEEK ||
           st->syn.format == OKV_CHAT_FORMAT_GRANITE || st->syn.format == OKV_CHAT_FORMAT_COMMAND_R ||
           st->syn.format == OKV_CHAT_FORMAT_APERTUS || st->syn.format == OKV_CHAT_FORMAT_PYTHONIC;
}

cJSON *srv_chat_message(srv_chat_stream *st, const char *text, bool *called) {
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    cJSON_AddStringToObject(m, "role", "assistant");
    *called = false;
    if (!st->parse) {
        cJSON_AddStringToObject(m, "content", text);
        return m;
    }
    okv_chat_msg msg;
    if (okv_chat_parse(&st->syn, text, strlen(text), false, &msg, NULL) != OKV_OK) {
        cJSON_Delete(m);
        return NULL;
    }
    int n_calls = !st->calls ? 0 : st->parallel ? msg.n_tool_calls : (msg.n_tool_calls > 0 ? 1 : 0);
    /* OpenAI: content is null when the answer is only calls */
    if (n_calls && !msg.content[0]) cJSON_AddNullToObject(m, "content");
    else cJSON_AddStringToObject(m, "content", msg.content);
    if (msg.reasoning_content) cJSON_AddStringToObject(m, "reasoning_content", msg.reasoning_content);
    if (n_calls && grow_calls(st, n_calls)) {
        cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
        for (int i = 0; i < n_calls; i++) {
            cJSON *o = call_json(st, i, &msg.tool_calls[i], msg.tool_calls[i].arguments, true);
            if (o) {
                cJSON_DeleteItemFromObject(o, "index");
                cJSON_AddItemToArray(calls, o);
            }
        }
        *called = true;
    }
    okv_chat_msg_free(&msg);
    return m;
}
