/* The grammars that keep tool calls valid (serve/toolgrammar.c): for each
 * call format offkv constrains, texts written the way the family's
 * template renders a call are accepted or refused as they should be, from
 * the answer's start (tool_choice "required" / named) and lazily from the
 * format's opener (tool_choice "auto": free text first, then a call);
 * parallel_tool_calls false allows exactly one call, true one or more;
 * a forced call after a prompt that ends inside <think> comes after the
 * reasoning and "</think>" (else the parser reads it as reasoning), and an
 * opener written while reasoning does not start the lazy grammar;
 * arguments outside the tool's schema are refused; and every text the
 * grammar accepts, the format's parser (okv_chat_parse, the reference)
 * reads as the same calls. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/chat.h"
#include "offkv/grammar.h"
#include "serve/serve.h"

static const char *TOOLS =
    ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"enum\": [\"Paris\", \"Lima\"]}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\", "
    "\"days\"], \"additionalProperties\": false}}}, {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}]";

#define W "{\"city\": \"Paris\", \"days\": 3}"
#define BAD "{\"city\": \"Rome\", \"days\": 3}"

typedef struct gcase {
    okv_chat_format fmt;
    int mode;   /* 0 forced, 1 lazy */
    bool par;   /* parallel_tool_calls */
    const char *text;
    bool ok;    /* a whole sentence */
    int calls;  /* what the parser reads when ok */
} gcase;

#define DS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"
#define DS_CEND "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define HERMES(a) "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " a "}\n</tool_call>"
#define HERMES_T "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>"
#define OSS "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" W

static const gcase CASES[] = {
    {OKV_CHAT_FORMAT_HERMES, 0, true, HERMES(W), true, 1},
    {OKV_CHAT_FORMAT_HERMES, 0, true, HERMES(W) "\n" HERMES_T, true, 2},
    {OKV_CHAT_FORMAT_HERMES, 0, false, HERMES(W) "\n" HERMES_T, false, 0},
    {OKV_CHAT_FORMAT_HERMES, 0, false, HERMES(W), true, 1},
    {OKV_CHAT_FORMAT_HERMES, 0, true, HERMES(BAD), false, 0},
    {OKV_CHAT_FORMAT_HERMES, 0, true, "Sure. " HERMES(W), false, 0},
    {OKV_CHAT_FORMAT_HERMES, 1, true, "Sure. " HERMES(W), true, 1},
    {OKV_CHAT_FORMAT_HERMES, 1, true, "Sure. " HERMES(BAD), false, 0},
    {OKV_CHAT_FORMAT_HERMES, 1, true, "Just text, no call.", true, 0},
    {OKV_CHAT_FORMAT_HERMES, 1, false, "Sure. " HERMES(W) "\n" HERMES_T, false, 0},
    {OKV_CHAT_FORMAT_HERMES, 1, true, "Sure. " HERMES(W) " and more text", false, 0},
    {OKV_CHAT_FORMAT_GENERIC, 0, false, "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": " W "}}", true, 1},
    {OKV_CHAT_FORMAT_GENERIC, 0, true,
     "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": " W "}, {\"name\": \"get_time\", \"arguments\": {}}]}", true, 2},
    {OKV_CHAT_FORMAT_GENERIC, 1, true, "{\"response\": \"It is \\\"sunny\\\".\"}", true, 0},
    {OKV_CHAT_FORMAT_GENERIC, 1, true, "Plain text.", true, 0},
    {OKV_CHAT_FORMAT_GENERIC, 1, false, " {\"tool_call\": {\"name\": \"get_weather\", \"arguments\": " BAD "}}", false, 0},
    {OKV_CHAT_FORMAT_LLAMA3, 0, true, "{\"name\": \"get_weather\", \"parameters\": " W "}", true, 1},
    {OKV_CHAT_FORMAT_LLAMA3, 1, true, "{\"name\": \"get_weather\", \"parameters\": " BAD "}", false, 0},
    {OKV_CHAT_FORMAT_MISTRAL, 0, true,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " W "}, {\"name\": \"get_time\", \"arguments\": {}}]", true, 2},
    {OKV_CHAT_FORMAT_MISTRAL, 0, false,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " W "}, {\"name\": \"get_time\", \"arguments\": {}}]", false, 0},
    {OKV_CHAT_FORMAT_MISTRAL, 0, true, "[TOOL_CALLS]get_weather[ARGS]" W "[TOOL_CALLS]get_time[ARGS]{}", true, 2},
    {OKV_CHAT_FORMAT_MISTRAL, 1, false, "Let me see.[TOOL_CALLS]get_weather[ARGS]" W, true, 1},
    {OKV_CHAT_FORMAT_MISTRAL, 1, false, "Let me see.[TOOL_CALLS]get_weather[ARGS]" BAD, false, 0},
    {OKV_CHAT_FORMAT_GPT_OSS, 0, true, OSS "<|call|>", true, 1},
    {OKV_CHAT_FORMAT_GPT_OSS, 0, true, OSS, true, 1},
    {OKV_CHAT_FORMAT_GPT_OSS, 1, true,
     "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant" OSS "<|call|>", true, 1},
    {OKV_CHAT_FORMAT_GPT_OSS, 1, true, "<|channel|>commentary to=functions.get_weather<|channel|>commentary json<|message|>" W,
     true, 1},
    {OKV_CHAT_FORMAT_GPT_OSS, 1, true, "<|channel|>final<|message|>No call.", true, 0},
    {OKV_CHAT_FORMAT_GPT_OSS, 1, true, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" BAD,
     false, 0},
    {OKV_CHAT_FORMAT_GRANITE, 0, true, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": " W "}]", true, 1},
    {OKV_CHAT_FORMAT_GRANITE, 1, true, "Ok <|tool_call|>[{\"name\": \"get_wether\", \"arguments\": " W "}]", false, 0},
    {OKV_CHAT_FORMAT_DEEPSEEK, 0, true,
     DS_BEGIN DS_CALL "get_weather" DS_SEP W DS_CEND DS_CALL "get_time" DS_SEP "{}" DS_CEND DS_END, true, 2},
    {OKV_CHAT_FORMAT_DEEPSEEK, 1, false, "Sure" DS_BEGIN DS_CALL "get_weather" DS_SEP W DS_CEND DS_END, true, 1},
};

/* After a prompt that ends inside <think> (QwQ, DeepSeek R1). */
static const gcase THINK_CASES[] = {
    {OKV_CHAT_FORMAT_HERMES, 0, true, "Paris, 3 days. <b>x</b> </thin k <</think>\n\n" HERMES(W), true, 1},
    {OKV_CHAT_FORMAT_HERMES, 0, true, "</think>" HERMES(W), true, 1},
    {OKV_CHAT_FORMAT_HERMES, 0, true, HERMES(W), false, 0},
    {OKV_CHAT_FORMAT_HERMES, 0, true, "a</think>b</think>" HERMES(W), false, 0},
    {OKV_CHAT_FORMAT_HERMES, 0, true, "Hmm.</think>" HERMES(BAD), false, 0},
    {OKV_CHAT_FORMAT_DEEPSEEK, 0, false, "Hmm.</think>\n" DS_BEGIN DS_CALL "get_weather" DS_SEP W DS_CEND DS_END, true, 1},
    /* auto: an opener written while reasoning is not a call */
    {OKV_CHAT_FORMAT_HERMES, 1, true, "I could write <tool_call> here.</think>\n\n" HERMES(W), true, 1},
    {OKV_CHAT_FORMAT_HERMES, 1, true, "Maybe <tool_call>{\"bad\"", true, 0},
    {OKV_CHAT_FORMAT_HERMES, 1, true, "Hmm.</think>" HERMES(BAD), false, 0},
};

/* After a prompt that leaves the model free to open <think> itself (Qwen 3). */
static const gcase THINK_TAG_CASES[] = {
    {OKV_CHAT_FORMAT_HERMES, 1, true, "<think>Use <tool_call> for it.</think>\n" HERMES(W), true, 1},
    {OKV_CHAT_FORMAT_HERMES, 1, true, "<think>Use <tool_call> for it.</think>\n" HERMES(BAD), false, 0},
    {OKV_CHAT_FORMAT_HERMES, 1, true, HERMES(W), true, 1},
    {OKV_CHAT_FORMAT_HERMES, 1, true, "Sure. " HERMES(BAD), false, 0},
    {OKV_CHAT_FORMAT_GENERIC, 1, false, "<think>{ maybe }</think>\n{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": " W "}}", true, 1},
};

static void check_case(size_t i, const gcase *c, bool think, bool think_open) {
    char extra[2048];
    snprintf(extra, sizeof extra, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]%s, \"parallel_tool_calls\": %s}",
             TOOLS, c->par ? "true" : "false");
    srv_request r;
    srv_fail f;
    CHECK(srv_request_parse(SRV_CHAT, extra, strlen(extra), &r, &f), "request: %s", f.message);
    srv_trigger trig = {0};
    const okv_chat_syntax syn = {.format = c->fmt, .think_tags = think, .think_open = think_open};
    char *gbnf = srv_tool_call_grammar(&r, &syn, c->mode == 1, &trig, &f);
    CHECK(gbnf != NULL, "case %zu (%s): grammar: %s", i, okv_chat_format_name(c->fmt), f.message);
    okv_error err;
    okv_grammar *g = gbnf ? okv_grammar_parse(gbnf, strlen(gbnf), NULL, &err) : NULL;
    CHECK(!gbnf || g, "case %zu: the grammar does not parse: %s\n%s", i, err.message, gbnf);
    if (g) {
        okv_grammar_matcher *m = c->mode ? okv_grammar_matcher_create_lazy(g, trig.text, strlen(trig.text), trig.anchored, &err)
                                         : okv_grammar_matcher_create(g, &err);
        const okv_chat_reasoning_markup rm = okv_chat_reasoning(&syn);
        if (rm.open && rm.leading && (c->mode || rm.starts_inside)) /* as the server's scheduler does */
            CHECK_STATUS(okv_grammar_matcher_skip_block(m, rm.open, rm.close, rm.starts_inside, &err), OKV_OK, err);
        const bool ok = okv_grammar_matcher_accept_bytes(m, c->text, strlen(c->text)) && okv_grammar_matcher_can_end(m);
        CHECK(ok == c->ok, "case %zu (%s %s%s%s): want %s: %s", i, okv_chat_format_name(c->fmt), c->mode ? "lazy" : "forced",
              c->par ? " parallel" : "", think_open ? " think-open" : think ? " think" : "", c->ok ? "accepted" : "refused", c->text);
        if (ok) {
            okv_chat_msg msg;
            CHECK(okv_chat_parse(&syn, c->text, strlen(c->text), false, &msg, &err) == OKV_OK, "parse: %s", err.message);
            CHECK(msg.n_tool_calls == c->calls, "case %zu: the parser reads %d calls, want %d: %s", i, msg.n_tool_calls, c->calls,
                  c->text);
            for (int k = 0; k < msg.n_tool_calls; k++)
                CHECK(msg.tool_calls[k].complete && msg.tool_calls[k].name &&
                          (!strcmp(msg.tool_calls[k].name, "get_weather") || !strcmp(msg.tool_calls[k].name, "get_time")),
                      "case %zu: call %d", i, k);
            okv_chat_msg_free(&msg);
        }
        okv_grammar_matcher_free(m);
    }
    okv_grammar_free(g);
    free(gbnf);
    srv_request_clear(&r);
}

int main(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) check_case(i, &CASES[i], false, false);
    for (size_t i = 0; i < sizeof THINK_CASES / sizeof *THINK_CASES; i++) check_case(i, &THINK_CASES[i], true, true);
    for (size_t i = 0; i < sizeof THINK_TAG_CASES / sizeof *THINK_TAG_CASES; i++)
        check_case(i, &THINK_TAG_CASES[i], true, false);
    /* formats without JSON arguments: free with "auto", a 400 when forced */
    char body[2048];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]%s}", TOOLS);
    srv_request r;
    srv_fail f;
    CHECK(srv_request_parse(SRV_CHAT, body, strlen(body), &r, &f), "request: %s", f.message);
    srv_trigger trig = {0};
    const okv_chat_syntax py = {.format = OKV_CHAT_FORMAT_PYTHONIC};
    CHECK(srv_tool_call_grammar(&r, &py, true, &trig, &f) == NULL && f.status == 0, "pythonic, auto: no grammar, no error");
    CHECK(srv_tool_call_grammar(&r, &py, false, NULL, &f) == NULL && f.status == 400 &&
              strstr(f.message, "pythonic"),
          "pythonic, forced: a 400 naming the format");
    srv_request_clear(&r);
    /* A call grammar the converter makes but the parser or the matcher
     * refuses (here past the parser's million elements: each pattern's
     * {0,10000} is written out) is a 400 naming the tools, at once: it was
     * a 500 "out of memory" when the job was made. */
    {
        char big[8192];
        size_t k = (size_t)snprintf(big, sizeof big,
                                    "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": [{\"type\": "
                                    "\"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
                                    "\"properties\": {");
        for (int p = 0; p < 30; p++)
            k += (size_t)snprintf(big + k, sizeof big - k, "%s\"p%d\": {\"type\": \"string\", \"pattern\": "
                                  "\"^(abcdefgh){0,10000}$\"}", p ? ", " : "", p);
        snprintf(big + k, sizeof big - k, "}}}}]}");
        CHECK(srv_request_parse(SRV_CHAT, big, strlen(big), &r, &f), "request: %s", f.message);
        const okv_chat_syntax hermes = {.format = OKV_CHAT_FORMAT_HERMES};
        for (int lazy = 0; lazy < 2; lazy++) {
            char *g = srv_tool_call_grammar(&r, &hermes, lazy, lazy ? &trig : NULL, &f);
            CHECK(g == NULL && f.status == 400 && !strcmp(f.param, "tools") && strstr(f.message, "cannot use"),
                  "a grammar the parser refuses (%s): %d %s", lazy ? "auto" : "forced", f.status, f.message);
            free(g);
        }
        srv_request_clear(&r);
    }
    /* A schema the converter refuses names its tool: a property called
     * "tool-7" was taken for the converter's rule name (tool '(unknown)'). */
    {
        static const struct { const char *tools, *tool, *where; } cases[] = {
            {"[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
             "\"properties\": {\"tool-7\": {\"type\": \"string\", \"format\": \"email\"}}}}}]",
             "'get_weather'", "#/properties/tool-7"},
            {"[{\"type\": \"function\", \"function\": {\"name\": \"a\"}}, {\"type\": \"function\", \"function\": {\"name\": "
             "\"b\", \"parameters\": {\"type\": \"object\", \"properties\": {\"tool-0\": {\"format\": \"email\", \"type\": "
             "\"string\"}}}}}]",
             "'b'", "#/properties/tool-0"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            char body[1024];
            snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": %s}",
                     cases[i].tools);
            CHECK(srv_request_parse(SRV_CHAT, body, strlen(body), &r, &f), "request: %s", f.message);
            const okv_chat_syntax hermes = {.format = OKV_CHAT_FORMAT_HERMES};
            char *g = srv_tool_call_grammar(&r, &hermes, false, NULL, &f);
            CHECK(g == NULL && f.status == 400 && strstr(f.message, cases[i].tool) && strstr(f.message, cases[i].where),
                  "refused schema %zu names %s at %s: %s", i, cases[i].tool, cases[i].where, f.message);
            free(g);
            srv_request_clear(&r);
        }
    }
    return check_done();
}
