/* libFuzzer target: the chat-template interpreter and the answer parsers
 * (offkv/chat.h).
 *
 * Input: a template, optionally followed by a NUL byte and the messages
 * as JSON text (else a fixed conversation with tools, a tool call and
 * reasoning is used).  Small limits keep each run short.  Checked: parsing
 * and rendering either succeed or fail with a status and a message, never
 * crash, hang or leak; a successful render's length agrees with its text's
 * terminator; a parsed template renders the same text twice.  The template
 * bytes are also read as a model's answer by every format's parser, whole
 * and partial: every call it returns has a name, and a complete one
 * arguments that are a JSON object. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offkv/chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CONVERSATION[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Weather in Paris? \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"call it\", \"tool_calls\": [{\"id\": \"call_1\","
    " \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"{\\\"temp\\\": 18}\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"thanks\"}]}]";
static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\", \"parameters\":"
    " {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]";

static void abort_with(const char *what) {
    fprintf(stderr, "fuzz_jinja: %s\n", what);
    abort();
}

static void parse_answers(const char *text, size_t n) {
    for (int fmt = OKV_CHAT_FORMAT_CONTENT; fmt <= OKV_CHAT_FORMAT_PYTHONIC; fmt++)
        for (int flags = 0; flags < 8; flags++) {
            okv_chat_syntax syn = {(okv_chat_format)fmt, flags & 1, (flags & 2) != 0};
            okv_chat_msg m;
            okv_error err;
            if (okv_chat_parse(&syn, text, n, flags & 4, &m, &err) != OKV_OK) abort_with("a parse failed");
            if (!m.content) abort_with("a parse without content");
            for (int i = 0; i < m.n_tool_calls; i++) {
                const okv_chat_tool_call *c = &m.tool_calls[i];
                if (!c->arguments || (!(flags & 4) && (!c->name || !c->complete || c->arguments[0] != '{')))
                    abort_with("a complete parse returned an incomplete call");
            }
            okv_chat_msg_free(&m);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *messages = NULL;
    if (nul) {
        size_t mlen = size - tlen - 1;
        messages = malloc(mlen + 1);
        if (!messages) return 0;
        memcpy(messages, nul + 1, mlen);
        messages[mlen] = '\0';
    }
    parse_answers((const char *)data, tlen);
    okv_error err;
    okv_chat_template *t = okv_chat_template_parse((const char *)data, tlen, &err);
    if (!t) {
        if (err.status == OKV_OK || !err.message[0]) abort_with("a parse failure without a status or message");
        free(messages);
        return 0;
    }
    okv_chat_template_set_tokens(t, "<s>", "</s>", NULL);
    okv_chat_limits lim = {.max_output = 1 << 20, .max_iterations = 20000, .max_depth = 20, .max_memory = 32 << 20,
                           .max_seconds = 2};
    okv_chat_input in = {.messages_json = messages ? messages : CONVERSATION, .tools_json = messages ? NULL : TOOLS,
                         .add_generation_prompt = true, .now = "2026-12-01T09:30:00", .limits = &lim};
    char *out = NULL, *again = NULL;
    size_t n = 0, n2 = 0;
    okv_status st = okv_chat_template_render(t, &in, &out, &n, &err);
    if (st == OKV_OK) {
        if (!out || out[n] != '\0') abort_with("a render whose length disagrees with its text");
        if (okv_chat_template_render(t, &in, &again, &n2, &err) != OKV_OK || n2 != n || memcmp(out, again, n) != 0) {
            /* only the clock may differ between two runs */
            if (err.status != OKV_ERR_FORMAT || !strstr(err.message, "longer than")) abort_with("two renders differ");
        }
    } else if (!err.message[0] || out)
        abort_with("a failed render without a message, or with text");
    free(out);
    free(again);
    free(messages);
    okv_chat_template_free(t);
    return 0;
}
