/* responses.c without a model or a socket: Responses API requests against
 * the OpenAI chat bodies they mean (written out here by hand), refusals
 * naming the field, and answers from OpenAI's pieces — a whole message and
 * a stream of deltas — against the response object and the events the
 * Responses API sends: the items in order with their ids, a cut answer's
 * status "incomplete", every event's type as its name and its
 * sequence_number in order, and the stream's final response equal to the
 * plain answer's (the end-to-end test, responses.test.mjs, drives the real
 * server with OpenAI's client). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "same_json.h"
#include "serve/serve.h"

static void request_is(const char *body, const char *want) {
    srv_fail f = {0};
    char *got = srv_responses_request(body, strlen(body), &f);
    CHECK(got && same_json(got, want), "%s\n  got  %s\n  want %s", body, got ? got : f.message, want);
    free(got);
}

static void refused(const char *body, const char *param, const char *words) {
    srv_fail f = {0};
    char *got = srv_responses_request(body, strlen(body), &f);
    CHECK(!got && f.status == 400 && !strcmp(f.param, param) && strstr(f.message, words),
          "%s: want a 400 on %s naming %s, got %s (%s)", body, param, words, got ? got : f.message, f.param);
    free(got);
}

/* A response's state for id resp_abc, its stream into *out. */
static srv_responses fresh(char **out, size_t *n, size_t *cap) {
    srv_responses r = {.id = "resp_abc", .model = "m", .created = 7, .out = out, .n = n, .cap = cap};
    return r;
}

static char *object_text(const char *msg, bool length, const srv_usage *u) {
    srv_responses r = fresh(NULL, NULL, NULL);
    cJSON *m = cJSON_Parse(msg);
    cJSON *o = srv_responses_object(&r, m, length, u);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    cJSON_Delete(m);
    srv_responses_free(&r);
    return s;
}

static void object_is(const char *msg, bool length, const char *want) {
    const srv_usage u = {.input = 10, .cached = 4, .output = 3, .reasoning = 2};
    char *got = object_text(msg, length, &u);
    CHECK(got && same_json(got, want), "%s\n  got  %s\n  want %s", msg, got ? got : "(null)", want);
    free(got);
}

#define USAGE "\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":4},\"output_tokens\":3," \
              "\"output_tokens_details\":{\"reasoning_tokens\":2},\"total_tokens\":13}"
#define HEAD "\"id\":\"resp_abc\",\"object\":\"response\",\"created_at\":7,\"error\":null,\"model\":\"m\","

static void requests(void) {
    request_is("{\"model\":\"m\",\"input\":\"hi\",\"max_output_tokens\":5,\"temperature\":0.5,\"top_p\":0.9,\"stream\":true,"
               "\"store\":false,\"metadata\":{\"a\":\"b\"},\"truncation\":\"disabled\",\"include\":[],\"user\":\"u\"}",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"model\":\"m\",\"temperature\":0.5,\"top_p\":0.9,"
               "\"stream\":true,\"max_completion_tokens\":5}");
    /* an agent's conversation: instructions, parts, reasoning before an
     * answer and its calls, outputs named after their calls */
    request_is("{\"instructions\":\"Be terse.\",\"input\":["
               "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Weather \"},{\"type\":\"input_text\",\"text\":\"in Lima?\"}]},"
               "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"s\"}],"
               "\"content\":[{\"type\":\"reasoning_text\",\"text\":\"Call it.\"}],\"encrypted_content\":null},"
               "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Looking.\"}]},"
               "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Lima\\\"}\"},"
               "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"get_time\",\"arguments\":\"{}\"},"
               "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":\"noon\"},"
               "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":[{\"type\":\"input_text\",\"text\":\"Fog\"}]},"
               "{\"role\":\"developer\",\"content\":\"Use Celsius.\"}]}",
               "{\"messages\":[{\"role\":\"system\",\"content\":\"Be terse.\"},"
               "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Weather \"},{\"type\":\"text\",\"text\":\"in Lima?\"}]},"
               "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Looking.\"}],\"reasoning_content\":\"Call it.\","
               "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Lima\\\"}\"}},"
               "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"}}]},"
               "{\"role\":\"tool\",\"content\":[{\"type\":\"text\",\"text\":\"noon\"}],\"tool_call_id\":\"c2\",\"name\":\"get_time\"},"
               "{\"role\":\"tool\",\"content\":[{\"type\":\"text\",\"text\":\"Fog\"}],\"tool_call_id\":\"c1\",\"name\":\"get_weather\"},"
               "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Use Celsius.\"}]}]}");
    /* calls alone make an assistant turn of ""; reasoning between two calls
     * starts a turn of its own (the summary when there is no content); an
     * output whose call is not in the input has no name */
    request_is("{\"input\":[{\"role\":\"user\",\"content\":\"q\"},"
               "{\"type\":\"function_call\",\"call_id\":\"a\",\"name\":\"f\",\"arguments\":\"1\"},"
               "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"x\"},{\"type\":\"summary_text\",\"text\":\"y\"}]},"
               "{\"type\":\"function_call\",\"call_id\":\"b\",\"name\":\"g\",\"arguments\":\"2\"},"
               "{\"type\":\"function_call_output\",\"call_id\":\"zz\",\"output\":\"?\"}]}",
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"q\"}]},"
               "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"1\"}}]},"
               "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"x\\n\\ny\",\"tool_calls\":[{\"id\":\"b\",\"type\":\"function\","
               "\"function\":{\"name\":\"g\",\"arguments\":\"2\"}}]},"
               "{\"role\":\"tool\",\"content\":[{\"type\":\"text\",\"text\":\"?\"}],\"tool_call_id\":\"zz\"}]}");
    /* reasoning with no answer after it goes with no later one */
    request_is("{\"input\":[{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"lost\"}]},"
               "{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"a\"}]}",
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"q\"}]},"
               "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}]}");
    /* tools, tool_choice, text.format and reasoning.effort in the chat shapes */
    request_is("{\"input\":\"x\",\"parallel_tool_calls\":false,\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":\"d\","
               "\"parameters\":{\"type\":\"object\"},\"strict\":true}],\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"},"
               "\"reasoning\":{\"effort\":\"high\",\"summary\":\"auto\"}}",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"parallel_tool_calls\":false,\"tools\":[{\"type\":\"function\","
               "\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":{\"type\":\"object\"},\"strict\":true}}],"
               "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},\"reasoning_effort\":\"high\"}");
    request_is("{\"input\":\"x\",\"tool_choice\":\"required\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"s\","
               "\"schema\":{\"type\":\"object\"},\"strict\":true},\"verbosity\":\"low\"}}",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\",\"response_format\":{\"type\":"
               "\"json_schema\",\"json_schema\":{\"name\":\"s\",\"schema\":{\"type\":\"object\"},\"strict\":true}}}");
    request_is("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}}}",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}");
    request_is("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"text\"}},\"top_logprobs\":0,\"background\":false,"
               "\"previous_response_id\":null}",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");

    refused("{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id", "keeps no responses");
    refused("{\"input\":\"x\",\"conversation\":\"conv_1\"}", "conversation", "keeps no responses");
    refused("{\"input\":\"x\",\"prompt\":{\"id\":\"p\"}}", "prompt", "'prompt' is not supported");
    refused("{\"input\":\"x\",\"background\":true}", "background", "stream instead");
    refused("{\"input\":\"x\",\"top_logprobs\":3}", "top_logprobs", "/v1/chat/completions");
    refused("{\"model\":\"m\"}", "input", "'input' is required");
    refused("{\"input\":[]}", "input", "at least one item");
    refused("{\"input\":7}", "input", "a string or an array");
    refused("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"u\"}]}]}", "input",
            "input[0].content[0] is an 'input_image' part");
    refused("{\"input\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "input", "input[0].role");
    refused("{\"input\":[{\"role\":\"user\"}]}", "input", "input[0].content is required");
    refused("{\"input\":[\"x\"]}", "input", "input[0] must be an object");
    refused("{\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", "input", "item_reference");
    refused("{\"input\":[{\"type\":\"web_search_call\",\"id\":\"w\"}]}", "input", "'web_search_call' item");
    refused("{\"input\":[{\"type\":\"function_call\",\"call_id\":\"a\",\"name\":\"f\",\"arguments\":{}}]}", "input",
            "input[0] must be {\"type\": \"function_call\"");
    refused("{\"input\":[{\"type\":\"function_call_output\",\"output\":\"x\"}]}", "input", "input[0].call_id");
    refused("{\"input\":[{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\"}]}]}", "input", "no 'text'");
    refused("{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens", "whole number from 1");
    refused("{\"input\":\"x\",\"max_output_tokens\":2.5}", "max_output_tokens", "whole number from 1");
    refused("{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools", "tools[0] is a 'web_search' tool");
    refused("{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools", "tools[0].name");
    refused("{\"input\":\"x\",\"tool_choice\":\"any\"}", "tool_choice", "'tool_choice' must be");
    refused("{\"input\":\"x\",\"tool_choice\":{\"type\":\"file_search\"}}", "tool_choice", "'tool_choice' must be");
    refused("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\"}}}", "text", "'text.format' must be");
    refused("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"yaml\"}}}", "text", "'text.format' must be");
    refused("{\"input\":\"x\",\"reasoning\":{\"effort\":\"extreme\"}}", "reasoning", "'reasoning.effort' must be one of");
    refused("[1]", "", "");
}

static void answers(void) {
    object_is("{\"role\":\"assistant\",\"content\":\"Hi\",\"reasoning_content\":\"think\",\"tool_calls\":[{\"id\":\"c1\","
              "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]}",
              false,
              "{" HEAD "\"status\":\"completed\",\"incomplete_details\":null,\"output\":["
              "{\"type\":\"reasoning\",\"id\":\"rs_abc_0\",\"status\":\"completed\",\"content\":[{\"type\":\"reasoning_text\","
              "\"text\":\"think\"}],\"summary\":[]},"
              "{\"type\":\"message\",\"id\":\"msg_abc_1\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":"
              "\"output_text\",\"text\":\"Hi\",\"annotations\":[],\"logprobs\":[]}]},"
              "{\"type\":\"function_call\",\"id\":\"fc_abc_2\",\"status\":\"completed\",\"call_id\":\"c1\",\"name\":\"f\","
              "\"arguments\":\"{\\\"a\\\":1}\"}]," USAGE "}");
    /* a cut answer; calls alone have no message item; nothing is a message of "" */
    object_is("{\"role\":\"assistant\",\"content\":\"Once\"}", true,
              "{" HEAD "\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"output\":["
              "{\"type\":\"message\",\"id\":\"msg_abc_0\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":"
              "\"output_text\",\"text\":\"Once\",\"annotations\":[],\"logprobs\":[]}]}]," USAGE "}");
    object_is("{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":"
              "{\"name\":\"g\",\"arguments\":\"{}\"}}]}", false,
              "{" HEAD "\"status\":\"completed\",\"incomplete_details\":null,\"output\":["
              "{\"type\":\"function_call\",\"id\":\"fc_abc_0\",\"status\":\"completed\",\"call_id\":\"c\",\"name\":\"g\","
              "\"arguments\":\"{}\"}]," USAGE "}");
    object_is("{\"role\":\"assistant\",\"content\":null}", false,
              "{" HEAD "\"status\":\"completed\",\"incomplete_details\":null,\"output\":["
              "{\"type\":\"message\",\"id\":\"msg_abc_0\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":"
              "\"output_text\",\"text\":\"\",\"annotations\":[],\"logprobs\":[]}]}]," USAGE "}");
}

/* The stream of deltas (JSON texts), its events against want (their
 * names, in order), and its final response against the plain answer to
 * msg, the same answer whole. */
static void stream_is(const char *const *deltas, int n_deltas, bool length, const char *const *want, int n_want,
                      const char *msg) {
    char *out = NULL;
    size_t n = 0, cap = 0;
    srv_responses r = fresh(&out, &n, &cap);
    const srv_usage u = {.input = 10, .cached = 4, .output = 3, .reasoning = 2};
    bool ok = srv_responses_start(&r);
    for (int i = 0; ok && i < n_deltas; i++) {
        cJSON *d = cJSON_Parse(deltas[i]);
        ok = d && srv_responses_delta(&r, d);
        cJSON_Delete(d);
    }
    ok = ok && srv_responses_end(&r, length, &u);
    CHECK(ok, "%s: the stream was built", msg);
    /* the events: "event: NAME\ndata: JSON\n\n" each */
    int k = 0;
    char *last = NULL;
    for (char *at = out; ok && at && *at; k++) {
        char *nl = strstr(at, "\ndata: "), *end = nl ? strstr(nl, "\n\n") : NULL;
        const bool framed = !strncmp(at, "event: ", 7) && nl && end;
        CHECK(framed, "%s: event %d is framed: %.60s", msg, k, at);
        if (!framed) break;
        *nl = *end = '\0';
        const char *name = at + 7;
        cJSON *e = cJSON_Parse(nl + 7);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type"), *seq = cJSON_GetObjectItemCaseSensitive(e, "sequence_number");
        CHECK(k < n_want && !strcmp(name, want[k]), "%s: event %d is %s, want %s", msg, k, name, k < n_want ? want[k] : "none");
        CHECK(cJSON_IsString(type) && !strcmp(type->valuestring, name), "%s: event %d's type is its name", msg, k);
        CHECK(cJSON_IsNumber(seq) && seq->valuedouble == k, "%s: event %d's sequence_number", msg, k);
        if (!strcmp(name, "response.completed") || !strcmp(name, "response.incomplete")) {
            free(last);
            last = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(e, "response"));
        }
        cJSON_Delete(e);
        at = end + 2;
    }
    CHECK(k == n_want, "%s: %d events, want %d", msg, k, n_want);
    char *plain = object_text(msg, length, &u);
    CHECK(last && plain && same_json(last, plain), "%s: the stream's response\n  %s\n  the plain one\n  %s", msg,
          last ? last : "(none)", plain ? plain : "(none)");
    free(plain);
    free(last);
    free(out);
    srv_responses_free(&r);
}

static void streams(void) {
    static const char *const deltas[] = {
        "{\"reasoning_content\":\"thi\"}", "{\"reasoning_content\":\"nk\"}", "{\"content\":\"H\"}", "{\"content\":\"i\"}",
        "{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}",
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]}",
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}",
        "{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}",
        "{}",
    };
    static const char *const want[] = {
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
        "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed",
    };
    stream_is(deltas, 9, false, want, 26,
              "{\"role\":\"assistant\",\"content\":\"Hi\",\"reasoning_content\":\"think\",\"tool_calls\":["
              "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}},"
              "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}");
    /* nothing at all: a message of "", as the plain answer's; cut: incomplete */
    static const char *const empty_want[] = {
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete",
    };
    stream_is(deltas + 8, 1, true, empty_want, 8, "{\"role\":\"assistant\",\"content\":\"\"}");

    /* an error in place of the end: OpenAI's fields, and the param */
    char *out = NULL;
    size_t n = 0, cap = 0;
    srv_responses r = fresh(&out, &n, &cap);
    srv_fail f = {0};
    srv_fail_set(&f, 503, "server_shutting_down", NULL, "the server is shutting down");
    CHECK(srv_responses_start(&r) && srv_responses_error_event(&r, &f), "an error event");
    const char *e = out ? strstr(out, "event: error\ndata: ") : NULL;
    CHECK(e && same_json(e + 19, "{\"type\":\"error\",\"sequence_number\":2,\"code\":\"server_shutting_down\","
                                  "\"message\":\"the server is shutting down\",\"param\":null}"),
          "the error event: %s", e ? e : "(none)");
    free(out);
    srv_responses_free(&r);
}

int main(void) {
    requests();
    answers();
    streams();
    return check_done();
}
