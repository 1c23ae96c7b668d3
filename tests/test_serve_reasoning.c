/* Following an answer's reasoning as it is generated (serve/reasoning.c,
 * okv_chat_reasoning): the scheduler counts reasoning tokens and ends
 * reasoning at a budget by it, so it must agree with the parser.
 *  - inside or not after every piece, pieces cut at random places (a tag
 *    split across tokens), against a plain whole-text reference written
 *    here from the parser's rules: <think> / <|START_THINKING|> only at the
 *    answer's start, after white space, or from the start when the prompt
 *    left <think> open; gpt-oss's analysis messages wherever they come;
 *  - each format's force text, appended to unfinished reasoning, makes an
 *    answer that okv_chat_parse (tested on real models' answers elsewhere)
 *    splits into exactly that reasoning and the content after it;
 *  - formats without reasoning markup are never inside;
 *  - whether an answer may open a block its prompt did not
 *    (srv_reasoning_may_open), on real vocabularies. */
#include <stdint.h>

#include "check.h"
#include "serve/serve.h"
#include "tokenizer_util.h"

static bool ws_only(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') return false;
    return true;
}

/* Whether the answer's first n bytes end inside reasoning: the rules,
 * read off the whole prefix at once. */
static bool ref_inside(const okv_chat_reasoning_markup *m, const char *s, size_t n) {
    if (!m->open) return false;
    char *p = strndup(s, n);
    bool in = false;
    if (m->starts_inside) {
        in = !strstr(p, m->close);
    } else if (m->leading) {
        const char *o = strstr(p, m->open);
        in = o && ws_only(p, (size_t)(o - p)) && !strstr(o + strlen(m->open), m->close);
    } else {
        const char *last = NULL;
        for (const char *o = strstr(p, m->open); o; o = strstr(o + 1, m->open)) last = o;
        in = last && !strstr(last + strlen(m->open), m->close);
    }
    free(p);
    return in;
}

static void check_follow(const char *what, const okv_chat_syntax *syn, const char *answer) {
    const okv_chat_reasoning_markup m = okv_chat_reasoning(syn);
    const size_t n = strlen(answer);
    uint32_t rng = 12345;
    for (int round = 0; round < 20; round++) {
        srv_reasoning r;
        srv_reasoning_init(&r, &m);
        int bad = 0;
        size_t at = 0, bad_at = 0;
        CHECK(r.inside == ref_inside(&m, answer, 0), "%s: at the start inside %d", what, r.inside);
        while (at < n) {
            rng = rng * 1103515245u + 12345u;
            size_t k = 1 + (rng >> 16) % (round == 0 ? 1 : 6);
            if (k > n - at) k = n - at;
            srv_reasoning_feed(&r, answer + at, k);
            at += k;
            if (r.inside != ref_inside(&m, answer, at) && !bad++) bad_at = at;
        }
        CHECK(!bad, "%s (round %d): %d pieces disagree with the reference, first after %zu bytes", what, round, bad,
              bad_at);
    }
}

/* prefix (reasoning so far, its opener included unless the prompt opened
 * it) + the force text + tail parses into that reasoning and tail: with
 * tools, force_tools and a get_weather call in the format's markup (the
 * tools' force leaves a call possible), else force and the content. */
static void check_force(const char *what, const okv_chat_syntax *syn, bool tools, const char *prefix,
                        const char *reasoning, const char *tail) {
    const okv_chat_reasoning_markup m = okv_chat_reasoning(syn);
    const char *f = tools ? m.force_tools : m.force;
    CHECK(f != NULL, "%s: a force text%s", what, tools ? " for tools" : "");
    if (!f) return;
    srv_reasoning r;
    srv_reasoning_init(&r, &m);
    srv_reasoning_feed(&r, prefix, strlen(prefix));
    CHECK(r.inside, "%s: inside after '%s'", what, prefix);
    srv_reasoning_feed(&r, f, strlen(f));
    CHECK(!r.inside, "%s: the force text ends reasoning", what);
    char text[512];
    snprintf(text, sizeof text, "%s%s%s", prefix, f, tail);
    okv_chat_msg msg = {0};
    okv_error err = {0};
    CHECK_STATUS(okv_chat_parse(syn, text, strlen(text), false, &msg, &err), OKV_OK, err);
    CHECK(msg.reasoning_content && !strcmp(msg.reasoning_content, reasoning), "%s: reasoning '%s', want '%s'", what,
          msg.reasoning_content ? msg.reasoning_content : "(none)", reasoning);
    if (tools)
        CHECK(msg.n_tool_calls == 1 && !strcmp(msg.tool_calls[0].name, "get_weather") &&
                  !strcmp(msg.tool_calls[0].arguments, "{\"city\":\"Paris\"}"),
              "%s: one call after force_tools (%d)", what, msg.n_tool_calls);
    else
        CHECK(msg.content && !strcmp(msg.content, tail), "%s: content '%s', want '%s'", what,
              msg.content ? msg.content : "(null)", tail);
    okv_chat_msg_free(&msg);
}

int main(void) {
    const okv_chat_syntax qwen3 = {.format = OKV_CHAT_FORMAT_HERMES, .think_tags = true};
    const okv_chat_syntax qwq = {.format = OKV_CHAT_FORMAT_HERMES, .think_tags = true, .think_open = true};
    const okv_chat_syntax r1 = {.format = OKV_CHAT_FORMAT_DEEPSEEK, .think_tags = true, .think_open = true};
    const okv_chat_syntax harmony = {.format = OKV_CHAT_FORMAT_GPT_OSS};
    const okv_chat_syntax command_r = {.format = OKV_CHAT_FORMAT_COMMAND_R};
    const okv_chat_syntax llama3 = {.format = OKV_CHAT_FORMAT_LLAMA3};
    const okv_chat_syntax plain = {.format = OKV_CHAT_FORMAT_CONTENT};

    check_follow("qwen3", &qwen3, " \n<think>\nThe user greets.\n</think>\n\nHello! <think>not reasoning</think>");
    check_follow("qwen3, no reasoning", &qwen3, "Hello <think> there </think> and on");
    check_follow("qwen3, a near miss", &qwen3, "<thin k><think>x</think>");
    check_follow("qwen3, unclosed", &qwen3, "\n\n<think>still going <thin</thi");
    check_follow("qwq: the prompt opened it", &qwq, "Let me see.\n</think>\n\nHi <think> again");
    check_follow("deepseek r1", &r1, "ok </think><\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>");
    check_follow("gpt-oss", &harmony,
                 "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                 "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>");
    check_follow("gpt-oss, two analyses", &harmony,
                 "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|end|>"
                 "<|start|>assistant<|channel|>analysis<|message|>c <|channel|");
    check_follow("command-r", &command_r,
                 "<|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>Hi<|START_THINKING|><|END_RESPONSE|>");
    check_follow("llama3: no reasoning markup", &llama3, "<think>x</think>{\"name\": \"f\", \"parameters\": {}}");
    check_follow("content: no reasoning markup", &plain, "<think>x");
    CHECK(!okv_chat_reasoning(&llama3).open && !okv_chat_reasoning(&plain).open && !okv_chat_reasoning(NULL).open,
          "formats without reasoning markup have none");

    check_force("qwen3", &qwen3, false, "<think>\nThe user greets", "The user greets", "Hello!");
    check_force("qwq", &qwq, false, "Let me think", "Let me think", "Hi.");
    check_force("deepseek r1", &r1, false, "\nhmm,", "hmm,", "Answer");
    check_force("gpt-oss", &harmony, false, "<|channel|>analysis<|message|>Need to answer", "Need to answer", "Sure.");
    check_force("command-r", &command_r, false, "<|START_THINKING|>plan it", "plan it", "");
    const okv_chat_syntax hermes3 = {.format = OKV_CHAT_FORMAT_HERMES, .think_tags = true};
    check_force("gpt-oss", &harmony, true, "<|channel|>analysis<|message|>Need weather", "Need weather",
                      "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>");
    check_force("qwen3 hermes", &hermes3, true, "<think>\nNeed weather", "Need weather",
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>");
    const okv_chat_reasoning_markup mh0 = okv_chat_reasoning(&harmony), mq0 = okv_chat_reasoning(&qwen3),
                                     mc0 = okv_chat_reasoning(&command_r);
    CHECK(strcmp(mh0.force_tools, mh0.force) != 0 && mq0.force_tools == mq0.force && mc0.force_tools == mc0.force &&
              !okv_chat_reasoning(&plain).force_tools,
          "force_tools differs from force for gpt-oss only (none without reasoning markup)");

    /* Whether the answer may open a block its prompt did not: prompts as
     * the shared templates render them with thinking on and off (Qwen 3's
     * enable_thinking, SmolLM3's /no_think), and vocabularies with and
     * without <think> as one token (Qwen 3's; Llama 3's has none). */
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("SKIP: srv_reasoning_may_open needs ../shared's vocabularies (OKV_SHARED)\n");
        return check_done();
    }
    okv_tokenizer *tq = tu_shared_vocab(shared, "qwen3"), *tl = tu_shared_vocab(shared, "llama3");
    const okv_chat_reasoning_markup mq = okv_chat_reasoning(&qwen3), mqq = okv_chat_reasoning(&qwq),
                                     mh = okv_chat_reasoning(&harmony), mp = okv_chat_reasoning(&plain);
    CHECK(srv_reasoning_may_open(&mq, "<|im_start|>assistant\n", tq), "qwen3 thinking on: the answer may open <think>");
    CHECK(!srv_reasoning_may_open(&mq, "<|im_start|>assistant\n<think>\n\n</think>\n\n", tq),
          "qwen3 thinking off: closed, no block");
    CHECK(!srv_reasoning_may_open(&mq, "<|im_start|>assistant\n<think>\n\n</think>\n", tq), "smollm3 /no_think: closed");
    CHECK(srv_reasoning_may_open(&mq, "</think>x", tq), "text after a close: not closed");
    CHECK(!srv_reasoning_may_open(&mq, "<|im_start|>assistant\n", tl), "a vocabulary without a <think> token: no block");
    CHECK(!srv_reasoning_may_open(&mqq, "<|im_start|>assistant\n<think>\n", tq),
          "qwq: the prompt opened the block (none to open)");
    CHECK(!srv_reasoning_may_open(&mh, "<|start|>assistant", tq), "gpt-oss: reasoning anywhere, not a leading block");
    CHECK(!srv_reasoning_may_open(&mp, "x", tq) && !srv_reasoning_may_open(NULL, "x", tq) &&
              !srv_reasoning_may_open(&mq, NULL, tq) && !srv_reasoning_may_open(&mq, "x", NULL),
          "no markup, NULL markup, prompt or tokenizer: no block");
    okv_tokenizer_free(tq);
    okv_tokenizer_free(tl);
    return check_done();
}
