/* anthropic.c without a model or a socket: Anthropic requests against the
 * OpenAI chat bodies they mean (written out here), and answers from
 * OpenAI's pieces — a whole message and a stream of deltas — against the
 * blocks and events Anthropic's API sends, including what the end-to-end
 * test cannot make a random model write: tool-call arguments that are no
 * JSON object (kept as text, never an input a client cannot parse, and no
 * stop_reason "tool_use" without a tool_use block). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "same_json.h"
#include "serve/serve.h"

static void request_is(const char *body, bool count, const char *want) {
    srv_fail f = {0};
    char *got = srv_anthropic_request(body, strlen(body), count, &f);
    CHECK(got && same_json(got, want), "%s\n  got  %s\n  want %s", body, got ? got : f.message, want);
    free(got);
}

static void refused(const char *body, const char *words) {
    srv_fail f = {0};
    char *got = srv_anthropic_request(body, strlen(body), false, &f);
    CHECK(!got && f.status == 400 && strstr(f.message, words), "%s: want a 400 naming %s, got %s", body, words,
          got ? got : f.message);
    free(got);
    char *e = got ? NULL : srv_anthropic_error_json(&f);
    CHECK(!got && e && strstr(e, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"),
          "the error body %s", e ? e : "(none)");
    free(e);
}

int main(void) {
    /* requests */
    request_is("{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", false,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5,"
               "\"chat_template_kwargs\":{\"enable_thinking\":false}}");
    request_is("{\"model\":\"m\",\"max_tokens\":5,\"temperature\":0.5,\"top_k\":3,\"top_p\":0.9,\"stream\":true,"
               "\"stop_sequences\":[\"x\"],\"metadata\":{\"user_id\":\"u\"},\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":9},"
               "\"system\":[{\"type\":\"text\",\"text\":\"a\",\"cache_control\":{\"type\":\"ephemeral\"}},{\"type\":\"text\",\"text\":\"b\"}],"
               "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"q\"}]},"
               "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"s\"},"
               "{\"type\":\"redacted_thinking\",\"data\":\"zz\"},{\"type\":\"text\",\"text\":\"ok\"},"
               "{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"f\",\"input\":{\"a\":1}}]},"
               "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"c1\",\"content\":\"r\"},"
               "{\"type\":\"tool_result\",\"tool_use_id\":\"c2\",\"content\":[{\"type\":\"text\",\"text\":\"x\"},{\"type\":\"text\",\"text\":\"y\"}]},"
               "{\"type\":\"text\",\"text\":\"more\"}]}],"
               "\"tools\":[{\"name\":\"f\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}}],"
               "\"tool_choice\":{\"type\":\"tool\",\"name\":\"f\",\"disable_parallel_tool_use\":true}}",
               false,
               "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"\\n\"},"
               "{\"type\":\"text\",\"text\":\"b\"}]},"
               "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"q\"}]},"
               "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"reasoning_content\":\"t\","
               "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
               "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"name\":\"f\",\"content\":[{\"type\":\"text\",\"text\":\"r\"}]},"
               "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":[{\"type\":\"text\",\"text\":\"x\"},{\"type\":\"text\",\"text\":\"\\n\"},"
               "{\"type\":\"text\",\"text\":\"y\"}]},"
               "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"more\"}]}],"
               "\"max_tokens\":5,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":3,\"stream\":true,\"model\":\"m\",\"stop\":[\"x\"],"
               "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}}],"
               "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},\"parallel_tool_calls\":false,"
               "\"thinking_budget_tokens\":9,\"chat_template_kwargs\":{\"enable_thinking\":true}}");
    /* an assistant turn of only calls: content "" (Qwen3's template calls string methods on it) */
    request_is("{\"max_tokens\":1,\"tool_choice\":{\"type\":\"any\"},\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
               "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"i\",\"name\":\"g\",\"input\":{}}]},"
               "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"i\"}]}],\"thinking\":{\"type\":\"disabled\"}}",
               false,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":[],"
               "\"tool_calls\":[{\"id\":\"i\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]},"
               "{\"role\":\"tool\",\"tool_call_id\":\"i\",\"name\":\"g\",\"content\":[]}],\"max_tokens\":1,"
               "\"tool_choice\":\"required\",\"chat_template_kwargs\":{\"enable_thinking\":false}}");
    /* count_tokens: no max_tokens, nothing of generation kept */
    request_is("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,\"stop_sequences\":[\"s\"]}", true,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template_kwargs\":{\"enable_thinking\":false}}");

    /* structured output (output_config.format, or the beta's output_format), and a plain-text document */
    request_is("{\"max_tokens\":2,\"output_config\":{\"effort\":\"low\",\"format\":{\"type\":\"json_schema\",\"schema\":"
               "{\"type\":\"object\"}}},\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"title\":\"T\","
               "\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\",\"data\":\"body\"}},{\"type\":\"text\",\"text\":\"q\"}]}]}",
               false,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"T\"},{\"type\":\"text\",\"text\":\"\\n\"},"
               "{\"type\":\"text\",\"text\":\"body\"},{\"type\":\"text\",\"text\":\"\\n\"},{\"type\":\"text\",\"text\":\"q\"}]}],"
               "\"max_tokens\":2,\"chat_template_kwargs\":{\"enable_thinking\":false,\"reasoning_effort\":\"low\"},"
               "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"object\"}}}}");
    /* effort: the template's reasoning_effort (gpt-oss's "Reasoning: ..."), beside thinking's switch */
    request_is("{\"max_tokens\":2,\"thinking\":{\"type\":\"adaptive\"},\"output_config\":{\"effort\":\"max\"},"
               "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
               false,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":2,\"chat_template_kwargs\":"
               "{\"enable_thinking\":true,\"reasoning_effort\":\"max\"}}");
    refused("{\"max_tokens\":1,\"output_config\":{\"effort\":\"extreme\"},\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "'output_config.effort' must be one of");
    refused("{\"max_tokens\":1,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":-1},\"messages\":[{\"role\":\"user\","
            "\"content\":\"q\"}]}", "'thinking.budget_tokens' must be an integer");
    refused("{\"max_tokens\":1,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":\"9\"},\"messages\":[{\"role\":\"user\","
            "\"content\":\"q\"}]}", "'thinking.budget_tokens' must be an integer");
    refused("{\"max_tokens\":1,\"output_config\":{\"effort\":3},\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
            "'output_config.effort' must be one of");
    request_is("{\"max_tokens\":2,\"output_format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"array\"}},"
               "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
               false,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":2,\"chat_template_kwargs\":"
               "{\"enable_thinking\":false},\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
               "{\"type\":\"array\"}}}}");
    refused("{\"max_tokens\":1,\"output_config\":{\"format\":{\"type\":\"xml\"}},\"messages\":[{\"role\":\"user\","
            "\"content\":\"q\"}]}",
            "json_schema");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":"
            "{\"type\":\"base64\",\"media_type\":\"application/pdf\",\"data\":\"AA==\"}}]}]}",
            "'document' block");

    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "max_tokens");
    refused("{\"max_tokens\":null,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "max_tokens");
    refused("{\"max_tokens\":1,\"messages\":[]}", "at least one");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"system\",\"content\":\"hi\"}]}", "top-level 'system'");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":{}}]}]}",
            "'document' block");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"a\","
            "\"content\":[{\"type\":\"image\"}]}]}]}",
            "content[0].content[0] is an 'image' block");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"a\"}]}]}",
            "'tool_result' block cannot be in an assistant turn");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"bash_20250124\","
            "\"name\":\"bash\"}]}",
            "'bash_20250124'");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"auto\"}", "tool_choice");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"thinking\":{\"type\":\"sometimes\"}}", "thinking");
    refused("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop_sequences\":[\"\"]}", "non-empty");

    /* a whole answer: a call whose arguments are no object stays text, and
     * only a tool_use block makes tool_uses */
    const srv_usage u = {.input = 10, .cached = 4, .output = 3};
    cJSON *msg = cJSON_Parse("{\"role\":\"assistant\",\"content\":\"hi\",\"reasoning_content\":\"hm\",\"tool_calls\":["
                             "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}},"
                             "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"[1,2]\"}}]}");
    int uses = -1;
    cJSON *m = srv_anthropic_message(msg, "msg_1", "mod", &u, &uses);
    CHECK(m && srv_anthropic_set_stop(m, "tool_use", NULL), "a message");
    char *text = m ? cJSON_PrintUnformatted(m) : NULL;
    CHECK(uses == 1 && text &&
              same_json(text, "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"mod\",\"content\":["
                              "{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"\"},{\"type\":\"text\",\"text\":\"hi\"},"
                              "{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"f\",\"input\":{\"a\":1}},"
                              "{\"type\":\"text\",\"text\":\"[1,2]\"}],\"stop_reason\":\"tool_use\",\"stop_sequence\":null,"
                              "\"usage\":{\"input_tokens\":6,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":4,"
                              "\"output_tokens\":3}}"),
          "the message (%d tool uses): %s", uses, text ? text : "(none)");
    free(text);
    cJSON_Delete(m);
    cJSON_Delete(msg);

    /* a stream of OpenAI deltas */
    char *out = NULL;
    size_t n = 0, cap = 0;
    srv_anthropic_stream st = {.out = &out, .n = &n, .cap = &cap};
    CHECK(srv_anthropic_start(&st, "msg_2", "mod", &u), "start");
    static const char *const deltas[] = {
        "{\"reasoning_content\":\"r\"}",
        "{\"content\":\"He\"}",
        "{\"content\":\"llo\"}",
        "{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}",
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\":\"}}]}",
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}",
        "{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"oops\"}}]}",
    };
    for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
        cJSON *d = cJSON_Parse(deltas[i]);
        CHECK(srv_anthropic_delta(&st, d), "delta %zu", i);
        cJSON_Delete(d);
    }
    CHECK(srv_anthropic_finish(&st) && st.tool_uses == 1, "finish: %d tool uses", st.tool_uses);
    CHECK(srv_anthropic_end(&st, "tool_use", NULL, &u), "end");
    static const char *const want[] = {
        "message_start", "content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\"",
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"r\"}", "\"index\":0,\"delta\":{\"type\":\"signature_delta\"",
        "{\"type\":\"content_block_stop\",\"index\":0}", "\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}",
        "\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"He\"}", "\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"llo\"}",
        "{\"type\":\"content_block_stop\",\"index\":1}",
        "\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"f\",\"input\":{}}",
        "\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}",
        "{\"type\":\"content_block_stop\",\"index\":2}", "\"index\":3,\"content_block\":{\"type\":\"text\",\"text\":\"\"}",
        "\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"oops\"}", "{\"type\":\"content_block_stop\",\"index\":3}",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null}",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    };
    const char *at = out ? out : "";
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *p = strstr(at, want[i]);
        CHECK(p != NULL, "event %zu '%s' in order, in:\n%s", i, want[i], out ? out : "");
        if (p) at = p + strlen(want[i]);
    }
    CHECK(out && !strstr(out, "\"partial_json\":\"oops\""), "no input_json_delta of text that is no object");
    srv_anthropic_stream_free(&st);
    free(out);
    return check_done();
}
