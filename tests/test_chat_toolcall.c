/* The answer parsers of offkv/chat.h on literal model outputs of each
 * family (as their templates print tool calls in history, see
 * ../shared/templates/expected/NAME.tool-result.txt): content, reasoning and
 * tool calls; a call whose JSON does not parse stays content; and every
 * prefix of each output, parsed as partial, extends the one before
 * (content, reasoning, names and arguments only grow), ending in the final
 * parse, which is what streaming relies on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "offkv/chat.h"

typedef struct want_call {
    const char *name, *arguments;
} want_call;

typedef struct tcase {
    const char *what;
    okv_chat_syntax syn;
    const char *text;
    const char *content, *reasoning; /* reasoning NULL: none */
    want_call calls[3];
} tcase;

/* A case named "... broken ..." has a call that turns out not to parse:
 * streaming had shown it, so only its content and reasoning are
 * prefix-checked, not its calls. */

#define S(fmt, think, open) {OKV_CHAT_FORMAT_##fmt, think, open}

static const tcase cases[] = {
    {"hermes call", S(HERMES, false, false),
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"hermes text then two calls", S(HERMES, false, false),
     "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2.5, {\"y\": null}]}}\n</tool_call>\n"
     "<tool_call>\n{\"arguments\": {}, \"name\": \"b\"}\n</tool_call>",
     "Let me check.", NULL, {{"a", "{\"x\": [1, 2.5, {\"y\": null}]}"}, {"b", "{}"}}},
    {"hermes calls without a close between", S(HERMES, false, false),
     "<tool_call>{\"name\": \"a\", \"arguments\": {}}\n<tool_call>{\"name\": \"b\", \"arguments\": {\"k\": 1}}</tool_call>", "", NULL,
     {{"a", "{}"}, {"b", "{\"k\": 1}"}}},
    {"hermes arguments as a string", S(HERMES, false, false),
     "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"k\\\": \\\"v\\\"}\"}</tool_call>", "", NULL, {{"f", "{\"k\": \"v\"}"}}},
    {"hermes text after a call, on a line of its own", S(HERMES, false, false),
     "Let me check.\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nDone, waiting.", "Let me check.\nDone, waiting.",
     NULL, {{"a", "{}"}}},
    {"hermes text between calls", S(HERMES, false, false),
     "Before.<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>Middle. <tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>After.",
     "Before.\nMiddle.\nAfter.", NULL, {{"a", "{}"}, {"b", "{}"}}},
    {"hermes broken JSON stays content", S(HERMES, false, false),
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": }}\n</tool_call>",
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": }}\n</tool_call>", NULL, {{0}}},
    {"hermes no calls", S(HERMES, false, false), "Just text with <b>tags</b>.", "Just text with <b>tags</b>.", NULL, {{0}}},
    {"qwen3 thinking and a call", S(HERMES, true, false),
     "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
     "", "The user wants weather.", {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"qwen3 thinking then text", S(HERMES, true, false), "<think>\nhmm\n</think>\n\nIt is 18 \303\251C.", "It is 18 \303\251C.", "hmm", {{0}}},
    {"deepseek r1 forced open", S(CONTENT, true, true), "First, 7 x 13 = 91.\n</think>\n\nNo, 91 = 7 x 13.",
     "No, 91 = 7 x 13.", "First, 7 x 13 = 91.", {{0}}},
    {"llama 3.1 JSON call", S(LLAMA3, false, false), "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"llama 3.2 two calls", S(LLAMA3, false, false),
     "{\"name\": \"a\", \"parameters\": {\"n\": 1}}; {\"name\": \"b\", \"parameters\": {\"n\": 2}}", "", NULL,
     {{"a", "{\"n\": 1}"}, {"b", "{\"n\": 2}"}}},
    {"llama 3 JSON that is no call", S(LLAMA3, false, false), "{\"answer\": 42}", "{\"answer\": 42}", NULL, {{0}}},
    {"llama 3 python_tag JSON", S(LLAMA3, false, false), "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
     "", NULL, {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"llama 3 built-in tool", S(LLAMA3, false, false), "<|python_tag|>brave_search.call(query=\"weather in Paris\")", "", NULL,
     {{"brave_search", "{\"query\": \"weather in Paris\"}"}}},
    {"llama 3 python code", S(LLAMA3, false, false), "<|python_tag|>print(6 * 7)", "", NULL, {{"python", "{\"code\": \"print(6 * 7)\"}"}}},
    {"functionary v3.1", S(LLAMA3, false, false), "<function=get_weather>{\"city\": \"Paris\"}</function>", "", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"llama 3 python_tag after a call object is content", S(LLAMA3, false, false),
     "{\"name\": \"a\", \"parameters\": {}} <|python_tag|>print(1)", "<|python_tag|>print(1)", NULL, {{"a", "{}"}}},
    {"mistral nemo", S(MISTRAL, false, false),
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}]", "", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"mistral small 3.2 / devstral", S(MISTRAL, false, false),
     "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]add[ARGS]{\"a\": 1, \"b\": 2}", "", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}, {"add", "{\"a\": 1, \"b\": 2}"}}},
    {"mistral text", S(MISTRAL, false, false), "Paris is sunny [today].", "Paris is sunny [today].", NULL, {{0}}},
    {"gpt-oss call after analysis", S(GPT_OSS, false, false),
     "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
     "<|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
     "", "Need the weather.", {{"get_weather", "{\"city\":\"Paris\"}"}}},
    {"gpt-oss recipient before the channel", S(GPT_OSS, false, false),
     " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>", "", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"gpt-oss final answer", S(GPT_OSS, false, false),
     "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>It is 18 C.<|return|>", "It is 18 C.",
     "Simple.", {{0}}},
    {"gpt-oss text before the first header", S(GPT_OSS, false, false),
     "Sure. <|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is 18 C.<|return|>",
     "Sure. It is 18 C.", "Easy.", {{0}}},
    {"gpt-oss text with a token that is not harmony's", S(GPT_OSS, false, false), "a <|x|> b", "a <|x|> b", NULL, {{0}}},
    {"qwen3-coder XML", S(QWEN3_CODER, false, false),
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
     "", NULL, {{"get_weather", "{\"city\": \"Paris\", \"days\": 3}"}}},
    {"qwen3-coder values kept as written", S(QWEN3_CODER, false, false),
     "<tool_call>\n<function=f>\n<parameter=n>\n12345678901234567890123\n</parameter>\n<parameter=x>\n1e999\n</parameter>\n"
     "<parameter=s>\n  two  spaces \n</parameter>\n<parameter=o>\n{\"k\": [1, 2.50]}\n</parameter>\n<parameter=n>\n7\n</parameter>\n"
     "</function>\n</tool_call>",
     "", NULL, {{"f", "{\"n\": 7, \"x\": 1e999, \"s\": \"  two  spaces \", \"o\": {\"k\": [1, 2.50]}}"}}},
    {"hermes numbers past a double", S(HERMES, false, false),
     "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": 12345678901234567890123, \"x\": 1e999}}</tool_call>", "", NULL,
     {{"f", "{\"n\": 12345678901234567890123, \"x\": 1e999}"}}},
    {"deepseek v3.1", S(DEEPSEEK, false, false),
     "<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>get_weather"
     "<\357\275\234tool\342\226\201sep\357\275\234>{\"city\": \"Paris\"}<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>"
     "<\357\275\234tool\342\226\201calls\342\226\201end\357\275\234>",
     "", NULL, {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"deepseek r1", S(DEEPSEEK, false, false),
     "<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function"
     "<\357\275\234tool\342\226\201sep\357\275\234>get_weather\n```json\n{\"city\": \"Paris\"}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>"
     "<\357\275\234tool\342\226\201calls\342\226\201end\357\275\234>",
     "", NULL, {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"deepseek broken call keeps its openers", S(DEEPSEEK, false, false),
     "Checking. <\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>f"
     "<\357\275\234tool\342\226\201sep\357\275\234>{\"city\": }<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>",
     "Checking. <\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>f"
     "<\357\275\234tool\342\226\201sep\357\275\234>{\"city\": }<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>",
     NULL, {{0}}},
    {"granite 3.3", S(GRANITE, false, false), "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", "",
     NULL, {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"command r7b", S(COMMAND_R, false, false),
     "<|START_THINKING|>I will look it up.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", "
     "\"parameters\": {\"city\": \"Paris\"}}\n]<|END_ACTION|>",
     "", "I will look it up.", {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"command r7b answer", S(COMMAND_R, false, false), "<|START_THINKING|>Easy.<|END_THINKING|><|START_RESPONSE|>18 C in Paris.<|END_RESPONSE|>",
     "18 C in Paris.", "Easy.", {{0}}},
    {"apertus", S(APERTUS, false, false), "<|tools_prefix|>[{\"get_weather\": {\"city\": \"Paris\"}}]<|tools_suffix|>", "", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"lfm2 pythonic", S(PYTHONIC, false, false),
     "<|tool_call_start|>[get_weather(city=\"Paris\", days=3), note(text='it\\'s', tags=['a', \"b\"], on=True, x=None, f=1.5)]<|tool_call_end|>Checking.",
     "Checking.", NULL, {{"get_weather", "{\"city\": \"Paris\", \"days\": 3}"}, {"note", "{\"text\": \"it's\", \"tags\": [\"a\", \"b\"], \"on\": true, \"x\": null, \"f\": 1.5}"}}},
    {"lfm2 pythonic number past 64 bits stays text", S(PYTHONIC, false, false),
     "<|tool_call_start|>[f(n=123456789012345678901234)]<|tool_call_end|>",
     "<|tool_call_start|>[f(n=123456789012345678901234)]<|tool_call_end|>", NULL, {{0}}},
    {"lfm2 pythonic infinite float stays text", S(PYTHONIC, false, false), "<|tool_call_start|>[f(x=1e999)]<|tool_call_end|>",
     "<|tool_call_start|>[f(x=1e999)]<|tool_call_end|>", NULL, {{0}}},
    {"generic tool_calls", S(GENERIC, false, false),
     "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]}", "", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}},
    {"generic response", S(GENERIC, false, false), "{\"response\": \"Hello!\"}", "Hello!", NULL, {{0}}},
    {"generic bare call", S(GENERIC, false, false), "{\"name\": \"f\", \"arguments\": {\"q\": \"\\u00e9\"}}", "", NULL,
     {{"f", "{\"q\": \"\\u00e9\"}"}}},
    {"generic plain text", S(GENERIC, false, false), "Hello there.", "Hello there.", NULL, {{0}}},
    {"generic text after the answer", S(GENERIC, false, false), "{\"response\": \"Hi.\"}\n\nAnything else?", "Hi.\nAnything else?",
     NULL, {{0}}},
    {"generic text after a call", S(GENERIC, false, false), "{\"tool_call\": {\"name\": \"f\", \"arguments\": {}}} then more", "then more",
     NULL, {{"f", "{}"}}},
    {"content only keeps markup", S(CONTENT, false, false), "<tool_call>{\"name\": \"f\"}</tool_call>",
     "<tool_call>{\"name\": \"f\"}</tool_call>", NULL, {{0}}},
};

static bool prefix_of(const char *a, const char *b) { return strncmp(a, b, strlen(a)) == 0; }

/* Streaming: parses every prefix of text, partial, and checks that each
 * keeps the content and reasoning of the one before and stays a prefix of
 * the final parse fin's; with calls, also that calls only grow (names
 * fixed, arguments extended) toward fin's.  This is what a stream's deltas
 * rely on.  Reports at most `limit` failures and returns how many. */
static int check_prefixes(const char *what, const okv_chat_syntax *syn, const char *text, const okv_chat_msg *fin, bool calls, int limit) {
    const size_t len = strlen(text);
    const char *fin_r = fin->reasoning_content ? fin->reasoning_content : "";
    okv_chat_msg prev = {0};
    int bad = 0;
    for (size_t k = 0; k <= len && bad < limit; k++) {
        okv_chat_msg cur;
        okv_error err;
        if (okv_chat_parse(syn, text, k, true, &cur, &err) != OKV_OK) {
            CHECK(false, "%s: '%s' partial %zu: %s", what, text, k, err.message);
            bad++;
            break;
        }
        const char *prev_c = prev.content ? prev.content : "", *prev_r = prev.reasoning_content ? prev.reasoning_content : "";
        const char *cur_r = cur.reasoning_content ? cur.reasoning_content : "";
        bool ok = prefix_of(prev_c, cur.content) && prefix_of(cur.content, fin->content) && prefix_of(prev_r, cur_r) &&
                  prefix_of(cur_r, fin_r);
        if (calls) {
            ok &= cur.n_tool_calls >= prev.n_tool_calls && cur.n_tool_calls <= fin->n_tool_calls;
            for (int i = 0; ok && i < cur.n_tool_calls; i++) {
                const okv_chat_tool_call *t = &cur.tool_calls[i];
                ok &= t->name != NULL && strcmp(t->name, fin->tool_calls[i].name) == 0;
                ok &= prefix_of(t->arguments, fin->tool_calls[i].arguments);
                if (i < prev.n_tool_calls) ok &= prefix_of(prev.tool_calls[i].arguments, t->arguments);
            }
        }
        if (!ok) {
            bad++;
            CHECK(false, "%s: '%s': the partial parse of %zu bytes has content '%s' reasoning '%s', %d calls (before: '%s', '%s', %d calls; "
                         "final: '%s', '%s', %d calls)", what, text, k, cur.content, cur_r, cur.n_tool_calls, prev_c, prev_r,
                  prev.n_tool_calls, fin->content, fin_r, fin->n_tool_calls);
        }
        okv_chat_msg_free(&prev);
        prev = cur;
    }
    okv_chat_msg_free(&prev);
    return bad;
}

static void check_case(const tcase *c) {
    okv_chat_msg m;
    okv_error err;
    size_t len = strlen(c->text);
    if (okv_chat_parse(&c->syn, c->text, len, false, &m, &err) != OKV_OK) {
        CHECK(false, "%s: %s", c->what, err.message);
        return;
    }
    CHECK(strcmp(m.content, c->content) == 0, "%s: content '%s', want '%s'", c->what, m.content, c->content);
    CHECK(c->reasoning ? m.reasoning_content && strcmp(m.reasoning_content, c->reasoning) == 0 : !m.reasoning_content,
          "%s: reasoning '%s', want '%s'", c->what, m.reasoning_content ? m.reasoning_content : "(none)", c->reasoning ? c->reasoning : "(none)");
    int want_n = 0;
    while (want_n < 3 && c->calls[want_n].name) want_n++;
    CHECK(m.n_tool_calls == want_n, "%s: %d calls, want %d", c->what, m.n_tool_calls, want_n);
    /* the lazy grammar's trigger opens every call of the format */
    const char *opener = okv_chat_tool_call_opener(c->syn.format);
    if (want_n && c->syn.format != OKV_CHAT_FORMAT_LLAMA3 && !strstr(c->what, "recipient before"))
        CHECK(opener && strstr(c->text, opener), "%s: opener '%s' not in the call", c->what, opener ? opener : "(null)");
    for (int i = 0; i < m.n_tool_calls && i < want_n; i++) {
        CHECK(m.tool_calls[i].complete, "%s: call %d incomplete", c->what, i);
        CHECK(m.tool_calls[i].name && strcmp(m.tool_calls[i].name, c->calls[i].name) == 0, "%s: call %d name '%s'", c->what, i,
              m.tool_calls[i].name ? m.tool_calls[i].name : "");
        CHECK(strcmp(m.tool_calls[i].arguments, c->calls[i].arguments) == 0, "%s: call %d arguments '%s', want '%s'", c->what, i,
              m.tool_calls[i].arguments, c->calls[i].arguments);
    }
    check_prefixes(c->what, &c->syn, c->text, &m, !strstr(c->what, "broken"), 3);
    okv_chat_msg_free(&m);
}

static void check_syntax(void) {
    okv_error err;
    struct {
        const char *tmpl;
        okv_chat_format fmt;
        bool think;
    } t[] = {
        {"{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}<tool_call>{{ tools }}</tool_call><think>", OKV_CHAT_FORMAT_HERMES, true},
        {"[AVAILABLE_TOOLS]{{ tools|tojson }}[TOOL_CALLS]", OKV_CHAT_FORMAT_MISTRAL, false},
        {"<|start|>assistant<|channel|>final<|message|>", OKV_CHAT_FORMAT_GPT_OSS, false},
        {"<|start_header_id|>{{ '<|python_tag|>' }}", OKV_CHAT_FORMAT_LLAMA3, false},
        {"{% if tools %}{{ tools|tojson }}{% endif %}", OKV_CHAT_FORMAT_GENERIC, false},
        {"{{ messages[0].content }}", OKV_CHAT_FORMAT_CONTENT, false},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        okv_chat_template *tp = okv_chat_template_parse(t[i].tmpl, strlen(t[i].tmpl), &err);
        okv_chat_syntax s = okv_chat_template_syntax(tp, "<|im_start|>assistant\n<think>\n");
        CHECK(s.format == t[i].fmt && s.think_tags == t[i].think && s.think_open == t[i].think, "syntax of '%s': %s think %d open %d",
              t[i].tmpl, okv_chat_format_name(s.format), s.think_tags, s.think_open);
        okv_chat_template_free(tp);
    }
}

/* Random texts of each format's markup, text and JSON pieces (a fixed
 * seed): every prefix's partial parse keeps the content and reasoning of
 * the one before and stays a prefix of the final parse's, which is what a
 * stream's deltas need (calls may still vanish: a call that turns out
 * broken, as above).  Found before: gpt-oss text before its first header,
 * a Functionary call next to <|python_tag|>, text before DeepSeek's
 * opener, each shown and then cut. */
static void check_random_texts(void) {
    static const char *const common[] = {"Hi", " there", "\n", " ", "{", "}", "[", "]", "\"name\"", ": ", "\"f\"", ", ",
                                         "\"arguments\"", "{\"a\": 1}", "<", ">", "|", "<think>", "</think>", "\"x\"", "=", "(", ")"};
    static const struct {
        okv_chat_format format;
        const char *pieces[10];
    } sets[] = {
        {OKV_CHAT_FORMAT_CONTENT, {NULL}},
        {OKV_CHAT_FORMAT_GENERIC, {"{\"tool_calls\": [", "{\"response\": ", "\"tool_calls\"", NULL}},
        {OKV_CHAT_FORMAT_HERMES, {"<tool_call>", "</tool_call>", "{\"name\": \"f\", \"arguments\": {}}", NULL}},
        {OKV_CHAT_FORMAT_QWEN3_CODER, {"<tool_call>", "</tool_call>", "<function=f>", "</function>", "<parameter=a>", "</parameter>", NULL}},
        {OKV_CHAT_FORMAT_LLAMA3, {"<|python_tag|>", "<function=f>", "</function>", "{\"name\": \"f\", \"parameters\": {}}", NULL}},
        {OKV_CHAT_FORMAT_MISTRAL, {"[TOOL_CALLS]", "[ARGS]", "f", "[{\"name\": \"f\", \"arguments\": {}}]", NULL}},
        {OKV_CHAT_FORMAT_GPT_OSS, {"<|channel|>", "analysis", "final", "<|message|>", "<|end|>", "<|start|>assistant", "<|return|>",
                                   "<|call|>", " to=functions.f", "<|constrain|>json"}},
        {OKV_CHAT_FORMAT_DEEPSEEK, {"<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581begin\uff5c>",
                                    "<\uff5ctool\u2581sep\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>", "function", "```json\n", "```", NULL}},
        {OKV_CHAT_FORMAT_GRANITE, {"<|tool_call|>", "[{\"name\": \"f\", \"arguments\": {}}]", NULL}},
        {OKV_CHAT_FORMAT_COMMAND_R, {"<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>", "<|END_ACTION|>", "<|START_RESPONSE|>",
                                     "<|END_RESPONSE|>", "[{\"tool_name\": \"f\", \"parameters\": {}}]", NULL}},
        {OKV_CHAT_FORMAT_APERTUS, {"<|tools_prefix|>", "<|tools_suffix|>", "[{\"f\": {\"a\": 1}}]", NULL}},
        {OKV_CHAT_FORMAT_PYTHONIC, {"<|tool_call_start|>", "<|tool_call_end|>", "[f(a=\"x\", b=1)]", "f(", NULL}},
    };
    const size_t n_common = sizeof common / sizeof common[0];
    srand(1);
    for (size_t f = 0; f < sizeof sets / sizeof sets[0]; f++)
        for (int think = 0; think < 3; think++) { /* none, <think> tags, the think block already open */
            const okv_chat_syntax syn = {sets[f].format, think > 0, think == 2};
            size_t n_own = 0;
            while (n_own < 10 && sets[f].pieces[n_own]) n_own++;
            int bad = 0;
            for (int t = 0; t < 2000 && bad < 2; t++) {
                char text[1024] = "";
                for (int k = 1 + rand() % 10; k > 0; k--) {
                    /* the format's own pieces twice as likely as each common one */
                    const size_t r = (size_t)rand() % (n_common + 2 * n_own);
                    strcat(text, r < n_common ? common[r] : sets[f].pieces[(r - n_common) / 2]);
                }
                const size_t len = strlen(text);
                okv_chat_msg fin;
                okv_error err;
                if (okv_chat_parse(&syn, text, len, false, &fin, &err) != OKV_OK) {
                    CHECK(false, "%s: '%s': %s", okv_chat_format_name(syn.format), text, err.message);
                    bad++;
                    continue;
                }
                char what[64];
                snprintf(what, sizeof what, "%s (think %d)", okv_chat_format_name(syn.format), think);
                bad += check_prefixes(what, &syn, text, &fin, false, 1);
                okv_chat_msg_free(&fin);
            }
        }
}

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    check_syntax();
    check_random_texts();
    okv_chat_msg m;
    okv_error err;
    CHECK(okv_chat_parse(NULL, "x", 1, false, &m, &err) == OKV_ERR_INVALID, "NULL syntax");
    for (int f = OKV_CHAT_FORMAT_CONTENT; f <= OKV_CHAT_FORMAT_PYTHONIC; f++) {
        const char *name = okv_chat_format_name((okv_chat_format)f);
        CHECK(name[0] >= 'a' && name[0] <= 'z' && strcmp(name, "unknown"), "format %d's name '%s'", f, name);
        for (int g = 0; g < f; g++) CHECK(strcmp(name, okv_chat_format_name((okv_chat_format)g)), "formats %d and %d share '%s'", f, g, name);
    }
    return check_done();
}
