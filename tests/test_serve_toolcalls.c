/* The server's OpenAI shaping of answers (serve/toolcalls.c): a model's
 * literal output, whole or fed in pieces as a stream would, becomes
 * message.tool_calls (id, type, function.name, function.arguments as a
 * JSON string), reasoning_content and content; the stream's deltas,
 * concatenated as OpenAI's clients do, give the same message; ids are as
 * the templates want them (Mistral: 9 letters or digits); tool_choice
 * "none", parallel_tool_calls false and requests without tools behave.
 * With real vocabularies (../shared/vocab): gpt-oss's channel markup
 * survives detokenizing only with control tokens shown (the jobs' special
 * flag), and a bos_token the template prints is left to Llama 3's
 * tokenizer, which adds BOS itself. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "offkv/gguf.h"
#include "offkv/tokenizer.h"
#include "serve/serve.h"

static srv_request request(const char *extra) {
    char body[2048];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]%s}", extra);
    srv_request r;
    srv_fail f;
    bool ok = srv_request_parse(SRV_CHAT, body, strlen(body), &r, &f);
    CHECK(ok, "request %s: %s", body, f.message);
    return r;
}

static const char *TOOLS = ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {}}}]";

/* Streams text in pieces of step bytes and folds the deltas back together. */
static void stream(const okv_chat_syntax *syn, const srv_request *r, const char *text, size_t step, char *content,
                   char *reasoning, char names[4][64], char args[4][256], char ids[4][64], int *n_calls) {
    srv_chat_stream st;
    srv_chat_stream_init(&st, syn, r, 7);
    content[0] = reasoning[0] = '\0';
    *n_calls = 0;
    size_t n = strlen(text);
    for (size_t at = 0;; at += step) {
        size_t k = at >= n ? 0 : (n - at < step ? n - at : step);
        bool final = at + k >= n;
        cJSON *d = cJSON_CreateObject();
        bool any;
        CHECK(srv_chat_stream_feed(&st, text + at, k, final, d, &any), "feed");
        cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content"), *rc = cJSON_GetObjectItemCaseSensitive(d, "reasoning_content");
        if (cJSON_IsString(c)) strcat(content, c->valuestring);
        if (cJSON_IsString(rc)) strcat(reasoning, rc->valuestring);
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(d, "tool_calls"), *call;
        cJSON_ArrayForEach(call, calls) {
            int i = cJSON_GetObjectItemCaseSensitive(call, "index")->valueint;
            cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id"), *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
            if (cJSON_IsString(id)) {
                CHECK(i == *n_calls, "a new call's index %d, want %d", i, *n_calls);
                snprintf(ids[i], 64, "%s", id->valuestring);
                snprintf(names[i], 64, "%s", cJSON_IsString(name) ? name->valuestring : "");
                args[i][0] = '\0';
                (*n_calls)++;
            } else
                CHECK(i < *n_calls && !name, "a call's later delta names no new call");
            strcat(args[i], cJSON_GetObjectItemCaseSensitive(fn, "arguments")->valuestring);
        }
        cJSON_Delete(d);
        if (final) break;
    }
    srv_chat_stream_free(&st);
}

static void check_answer(const char *what, okv_chat_format fmt, bool think, const char *extra, const char *text,
                         const char *want_content, const char *want_reasoning, int want_calls, const char *name,
                         const char *arguments) {
    okv_chat_syntax syn = {fmt, think, false};
    srv_request r = request(extra);
    /* whole */
    srv_chat_stream st;
    srv_chat_stream_init(&st, &syn, &r, 7);
    bool called;
    cJSON *m = srv_chat_message(&st, text, &called);
    srv_chat_stream_free(&st);
    cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content"), *rc = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    CHECK(called == (want_calls > 0) && cJSON_GetArraySize(calls) == want_calls, "%s: %d calls", what, cJSON_GetArraySize(calls));
    if (want_calls) {
        CHECK(cJSON_IsNull(c) || (cJSON_IsString(c) && !strcmp(c->valuestring, want_content)), "%s: content", what);
        cJSON *c0 = cJSON_GetArrayItem(calls, 0), *fn = cJSON_GetObjectItemCaseSensitive(c0, "function");
        CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(c0, "type")->valuestring, "function"), "%s: type", what);
        CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring, name), "%s: name", what);
        CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(fn, "arguments")->valuestring, arguments), "%s: arguments %s", what,
              cJSON_GetObjectItemCaseSensitive(fn, "arguments")->valuestring);
        cJSON *parsed = cJSON_Parse(cJSON_GetObjectItemCaseSensitive(fn, "arguments")->valuestring);
        CHECK(cJSON_IsObject(parsed), "%s: the arguments parse as an object", what);
        cJSON_Delete(parsed);
        const char *id = cJSON_GetObjectItemCaseSensitive(c0, "id")->valuestring;
        if (fmt == OKV_CHAT_FORMAT_MISTRAL) CHECK(strlen(id) == 9, "%s: Mistral id '%s'", what, id);
        else CHECK(!strncmp(id, "call_", 5), "%s: id '%s'", what, id);
    } else
        CHECK(cJSON_IsString(c) && !strcmp(c->valuestring, want_content), "%s: content '%s'", what, cJSON_IsString(c) ? c->valuestring : "?");
    CHECK(want_reasoning ? cJSON_IsString(rc) && !strcmp(rc->valuestring, want_reasoning) : rc == NULL, "%s: reasoning", what);
    /* streamed, in pieces of 1, 3 and 7 bytes */
    for (size_t step = 1; step <= 7; step += 3) {
        char content[1024], reasoning[1024], names[4][64], args[4][256], ids[4][64];
        int n;
        stream(&syn, &r, text, step, content, reasoning, names, args, ids, &n);
        CHECK(n == want_calls, "%s (stream %zu): %d calls", what, step, n);
        CHECK(!strcmp(content, want_content), "%s (stream %zu): content '%s'", what, step, content);
        CHECK(!strcmp(reasoning, want_reasoning ? want_reasoning : ""), "%s (stream %zu): reasoning '%s'", what, step, reasoning);
        if (n && want_calls) {
            CHECK(!strcmp(names[0], name) && !strcmp(args[0], arguments), "%s (stream %zu): %s(%s)", what, step, names[0], args[0]);
            CHECK(!strcmp(ids[0], cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(calls, 0), "id")->valuestring),
                  "%s (stream %zu): the same id as the whole answer", what, step);
        }
    }
    cJSON_Delete(m);
    srv_request_clear(&r);
}

static okv_tokenizer *vocab(const char *shared, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s", shared, name);
    okv_gguf *g = okv_gguf_open(path, NULL);
    okv_tokenizer *t = g ? okv_tokenizer_from_gguf(g, NULL) : NULL;
    okv_gguf_close(g);
    return t;
}

/* text -> ids (markup parsed as control tokens) -> pieces, as the server's
 * jobs turn ids into text (special: control tokens shown). */
static char *round_trip(const okv_tokenizer *tok, const char *text, int special) {
    int32_t ids[1024];
    size_t n = 0;
    if (okv_tokenizer_encode(tok, text, strlen(text), OKV_TOKENIZE_PARSE_SPECIAL, ids, 1024, &n, NULL) != OKV_OK) return NULL;
    char *out = calloc(1, 8192);
    size_t at = 0;
    for (size_t i = 0; out && i < n; i++) {
        size_t k = 0;
        if (okv_tokenizer_token_to_piece(tok, ids[i], special, out + at, 8191 - at, &k, NULL) == OKV_OK) at += k;
    }
    return out;
}

static void check_vocabularies(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped (the vocabulary part): ../shared not found\n");
        return;
    }
    /* gpt-oss's channels are control tokens: its answers are read only
     * when the jobs show them (srv_job_params.special) */
    okv_tokenizer *oss = vocab(shared, "ggml-vocab-gpt-oss.gguf");
    CHECK(oss != NULL, "the gpt-oss vocabulary");
    if (oss) {
        const char *answer = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                             "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}";
        okv_chat_syntax syn = {OKV_CHAT_FORMAT_GPT_OSS, false, false};
        srv_request r = request(TOOLS);
        srv_chat_stream st;
        srv_chat_stream_init(&st, &syn, &r, 1);
        CHECK(srv_chat_needs_special(&st), "gpt-oss answers need control tokens as text");
        for (int special = 1; special >= 0; special--) {
            char *text = round_trip(oss, answer, special);
            bool called = false;
            cJSON *m = text ? srv_chat_message(&st, text, &called) : NULL;
            cJSON *rc = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
            if (special)
                CHECK(called && cJSON_IsString(rc) && !strcmp(rc->valuestring, "Need weather."), "gpt-oss call through its vocabulary: %s",
                      text ? text : "(no text)");
            else
                CHECK(!called, "without control tokens the markup is gone: %s", text ? text : "(no text)");
            cJSON_Delete(m);
            free(text);
        }
        srv_chat_stream_free(&st);
        srv_request_clear(&r);
        okv_tokenizer_free(oss);
    }
    okv_tokenizer *l3 = vocab(shared, "ggml-vocab-llama3.gguf");
    CHECK(l3 != NULL, "the llama3 vocabulary");
    if (l3) {
        CHECK(okv_tokenizer_adds_bos(l3), "Llama 3's tokenizer adds BOS");
        char err[256];
        srv_chat *c = srv_chat_load(NULL, l3, "{{ bos_token }}<|start_header_id|>user<|end_header_id|>", NULL, err, sizeof err);
        CHECK(c && !strcmp(srv_chat_model_text(c, "<|begin_of_text|>x"), "x"), "a printed bos_token is left to the tokenizer");
        CHECK(c && !strcmp(srv_chat_model_text(c, "y<|begin_of_text|>"), "y<|begin_of_text|>"), "only a leading one");
        srv_chat_free(c);
        okv_tokenizer_free(l3);
    }
}

/* DeepSeek R1's and V3.1's templates write DeepSeek's calls in the
 * history but list no tools: the model is told them in the layout of
 * V3.1's model card (Ollama's template of it has the same), and its calls
 * are read and constrained in DeepSeek's format, not the generic JSON. */
static void check_deepseek_tools(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped (DeepSeek's templates): ../shared not found\n");
        return;
    }
    static const char *const names[] = {"deepseek-ai-DeepSeek-V3.1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"};
    const char *body = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"w?\"}], "
                       "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather now.\", "
                       "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]}";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[4096], err[256];
        snprintf(path, sizeof path, "%s/templates/src/%s.jinja", shared, names[i]);
        srv_chat *c = srv_chat_load(NULL, NULL, NULL, path, err, sizeof err);
        CHECK(c, "%s: %s", names[i], err);
        if (!c) continue;
        srv_request q;
        srv_fail f;
        CHECK(srv_request_parse(SRV_CHAT, body, strlen(body), &q, &f), "request: %s", f.message);
        char *out = srv_chat_render(c, &q, true, &f);
        const char *want = "Be brief.\n\n## Tools\nYou have access to the following tools:\n\n### get_weather\n"
                           "Description: The weather now.\n\nParameters: {\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}\n\n"
                           "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
                           "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>tool_call_name<\uff5ctool\u2581sep\uff5c>"
                           "tool_call_arguments<\uff5ctool\u2581call\u2581end\uff5c>{{additional_tool_calls}}<\uff5ctool\u2581calls\u2581end\uff5c>";
        CHECK(out && strstr(out, want) && strstr(out, "<\uff5cUser\uff5c>w?") && strstr(out, want) < strstr(out, "<\uff5cUser\uff5c>w?") &&
                  !strstr(out, "{\"response\""),
              "%s: DeepSeek's tool section in the system turn: '%s'", names[i], out ? out : f.message);
        okv_chat_syntax syn = srv_chat_syntax(c, out ? out : "");
        CHECK(syn.format == OKV_CHAT_FORMAT_DEEPSEEK, "%s: read as %s, want deepseek", names[i], okv_chat_format_name(syn.format));
        /* auto: the lazy grammar waits for DeepSeek's opener */
        srv_trigger trig = {0};
        char *g = srv_tool_call_grammar(&q, &syn, true, &trig, &f);
        CHECK(g && trig.text && strstr(trig.text, "tool\u2581calls\u2581begin"), "%s: a lazy grammar from the calls' opener: %s", names[i],
              g ? (trig.text ? trig.text : "(no trigger)") : f.message);
        free(g);
        free(out);
        srv_request_clear(&q);
        srv_chat_free(c);
    }
}

int main(void) {
    check_vocabularies();
    check_answer("hermes", OKV_CHAT_FORMAT_HERMES, true, TOOLS,
                 "<think>\nweather, so call\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                 "", "weather, so call", 1, "get_weather", "{\"city\": \"Paris\"}");
    check_answer("hermes without tools in the request: text", OKV_CHAT_FORMAT_HERMES, false, "",
                 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
                 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>", NULL, 0, NULL, NULL);
    check_answer("tool_choice none: text", OKV_CHAT_FORMAT_HERMES, false, ", \"tool_choice\": \"none\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]",
                 "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
                 NULL, 0, NULL, NULL);
    check_answer("mistral", OKV_CHAT_FORMAT_MISTRAL, false, TOOLS, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "", NULL, 1,
                 "get_weather", "{\"city\": \"Paris\"}");
    check_answer("gpt-oss", OKV_CHAT_FORMAT_GPT_OSS, false, TOOLS,
                 "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
                 "<|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
                 "", "Need weather.", 1, "get_weather", "{\"city\":\"Paris\"}");
    check_answer("gpt-oss without tools still splits its analysis", OKV_CHAT_FORMAT_GPT_OSS, false, "",
                 "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>", "Hello!",
                 "Easy.", 0, NULL, NULL);
    check_answer("llama 3", OKV_CHAT_FORMAT_LLAMA3, false, TOOLS, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
                 NULL, 1, "get_weather", "{\"city\": \"Paris\"}");
    /* A call the request did not allow is never handed back: gpt-oss's
     * channels are read for its reasoning, its to=functions.* dropped. */
    static const char *oss_call = "<|channel|>analysis<|message|>Delete.<|end|><|start|>assistant<|channel|>commentary "
                                  "to=functions.rm_rf <|constrain|>json<|message|>{\"path\":\"/\"}<|call|>";
    check_answer("gpt-oss without tools: no call", OKV_CHAT_FORMAT_GPT_OSS, false, "", oss_call, "", "Delete.", 0, NULL, NULL);
    check_answer("gpt-oss with tool_choice none: no call", OKV_CHAT_FORMAT_GPT_OSS, false,
                 ", \"tool_choice\": \"none\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"rm_rf\"}}]", oss_call, "",
                 "Delete.", 0, NULL, NULL);
    /* An answer object with a "name" and other keys is an answer, not a
     * call to "Bob" with the rest lost. */
    check_answer("an answer holding a name", OKV_CHAT_FORMAT_LLAMA3, false, TOOLS, "{\"name\": \"Bob\", \"age\": 3}",
                 "{\"name\": \"Bob\", \"age\": 3}", NULL, 0, NULL, NULL);
    /* arguments given as a string must be exactly one object */
    check_answer("arguments string with trailing text", OKV_CHAT_FORMAT_HERMES, false, TOOLS,
                 "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"} trailing\"}</tool_call>",
                 "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"} trailing\"}</tool_call>", NULL, 0,
                 NULL, NULL);
    check_answer("plain text", OKV_CHAT_FORMAT_CONTENT, false, "", "Hello \303\251 world", "Hello \303\251 world", NULL, 0, NULL, NULL);
    /* parallel_tool_calls false: the first call only */
    okv_chat_syntax syn = {OKV_CHAT_FORMAT_HERMES, false, false};
    char extra[512];
    snprintf(extra, sizeof extra, "%s, \"parallel_tool_calls\": false", TOOLS);
    srv_request r = request(extra);
    srv_chat_stream st;
    srv_chat_stream_init(&st, &syn, &r, 1);
    bool called;
    cJSON *m = srv_chat_message(&st, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
                                &called);
    CHECK(called && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) == 1, "parallel_tool_calls false");
    cJSON_Delete(m);
    srv_chat_stream_free(&st);
    srv_request_clear(&r);
    /* requests: tool_choice naming an absent tool, bad tools */
    srv_fail f;
    const char *bad[] = {
        ("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a\"}}], "
         "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"b\"}}}"),
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"code\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"required\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"sometimes\"}",
        "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {}}]}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template_kwargs\": [1]}",
        /* OpenAI's names: gpt-oss wrote 'get weather' bare and read back 'get' */
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get weather\"}}]}",
        ("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a\"}}], "
         "\"tool_choice\": {\"type\": \"bogus\", \"function\": {\"name\": \"a\"}}}"),
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": 2}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": \"extreme\"}",
        /* both ways, disagreeing */
        ("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": \"high\", "
         "\"chat_template_kwargs\": {\"reasoning_effort\": \"low\"}}"),
    };
    const char *param[] = {"tool_choice", "tools", "tool_choice", "tool_choice", "messages", "chat_template_kwargs", "tools",
                           "tool_choice", "reasoning_effort", "reasoning_effort", "reasoning_effort"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        srv_request q;
        bool ok = srv_request_parse(SRV_CHAT, bad[i], strlen(bad[i]), &q, &f);
        CHECK(!ok && f.status == 400 && !strcmp(f.param, param[i]), "bad request %zu: %s (%s)", i, ok ? "accepted" : f.param, f.message);
        if (ok) srv_request_clear(&q);
    }
    /* reasoning_effort reaches the template as the variable gpt-oss's reads,
     * beside chat_template_kwargs (agreeing, or alone); absent, it is not
     * defined (gpt-oss's template then says medium) */
    const char *efforts[][2] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": \"high\", \"chat_template_kwargs\": {\"enable_thinking\": false}}", "high|False"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": \"low\", \"chat_template_kwargs\": {\"reasoning_effort\": \"low\"}}", "low|"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": null}", "undefined|"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", "undefined|"},
    };
    for (size_t i = 0; i < sizeof efforts / sizeof efforts[0]; i++) {
        srv_request q;
        char err[256];
        bool ok = srv_request_parse(SRV_CHAT, efforts[i][0], strlen(efforts[i][0]), &q, &f);
        CHECK(ok, "%s: %s", efforts[i][0], f.message);
        if (!ok) continue;
        srv_chat *c = srv_chat_load(NULL, NULL,
                                    "{{ reasoning_effort if reasoning_effort is defined else 'undefined' }}|"
                                    "{{ enable_thinking if enable_thinking is defined else '' }}",
                                    NULL, err, sizeof err);
        char *out = c ? srv_chat_render(c, &q, true, &f) : NULL;
        CHECK(out && !strcmp(out, efforts[i][1]), "%s: rendered '%s', want '%s'", efforts[i][0], out ? out : err, efforts[i][1]);
        free(out);
        srv_chat_free(c);
        srv_request_clear(&q);
    }
    /* arguments sent as a JSON string reach the template as an object */
    const char *hist = "{\"messages\": [{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c\", \"type\": \"function\", "
                       "\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]}]}";
    srv_request q;
    CHECK(srv_request_parse(SRV_CHAT, hist, strlen(hist), &q, &f), "history: %s", f.message);
    char err[256];
    srv_chat *c = srv_chat_load(NULL, NULL, "{{ messages[0].tool_calls[0].function.arguments.city }}|{{ messages[0].content }}", NULL, err, sizeof err);
    char *out = c ? srv_chat_render(c, &q, true, &f) : NULL;
    CHECK(out && !strcmp(out, "Paris|None"), "arguments as an object: '%s'", out ? out : err);
    free(out);
    srv_chat_free(c);
    srv_request_clear(&q);

    /* A template without a tool section (ChatML): the server tells the
     * model the tools and the JSON answer, and reads the answer so */
    const char *with_tools = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"w?\"}], "
                             "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]}";
    CHECK(srv_request_parse(SRV_CHAT, with_tools, strlen(with_tools), &q, &f), "tools: %s", f.message);
    c = srv_chat_load(NULL, NULL, "chatml", NULL, err, sizeof err);
    out = srv_chat_render(c, &q, true, &f);
    const char *head = "<|im_start|>system\nBe brief.\n\nYou can call any of the following tools";
    CHECK(out && !strncmp(out, head, strlen(head)) &&
              strstr(out, "\"name\":\"get_weather\"") && strstr(out, "{\"response\": "),
          "generic tools in the system turn: '%s'", out ? out : f.message);
    okv_chat_syntax gs = srv_chat_syntax(c, out);
    CHECK(gs.format == OKV_CHAT_FORMAT_GENERIC, "a template without tools is read as generic JSON: %s", okv_chat_format_name(gs.format));
    srv_chat_stream gst;
    srv_chat_stream_init(&gst, &gs, &q, 3);
    bool gcalled;
    cJSON *gm = srv_chat_message(&gst, "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}", &gcalled);
    cJSON *gc = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(gm, "tool_calls"), 0);
    CHECK(gcalled && gc && !strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(gc, "function"), "arguments")->valuestring,
                                   "{\"city\": \"Paris\"}"),
          "generic call");
    cJSON_Delete(gm);
    srv_chat_stream_free(&gst);
    free(out);
    srv_chat_free(c);
    srv_request_clear(&q);
    check_deepseek_tools();
    return check_done();
}
