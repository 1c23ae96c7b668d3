/* The server's request parser under random and mutated bodies: thousands
 * of them, from valid requests bent byte by byte, spliced, truncated and
 * retyped, plus pure noise.  Whatever comes in, the parser either yields a
 * request whose every field is in range or an error whose body is JSON of
 * OpenAI's shape; nothing crashes or leaks (the sanitizer build runs it
 * under ASan and UBSan).  Accepted chat requests are also rendered through
 * the named templates.  The gate's head check (gate.c) gets the same
 * treatment: mutated request heads (bad Content-Lengths, binary garbage,
 * cut lines) get a verdict, and every refusal is a 4xx/5xx of OpenAI's
 * shape.  Anthropic's Messages bodies (anthropic.c) likewise: mutated,
 * each is translated into an OpenAI chat body that the parser takes, or
 * refused with a 400 in Anthropic's error shape; Responses API bodies
 * (responses.c) the same, refused in OpenAI's.  OKV_FUZZ_SECONDS=N runs
 * rounds for N seconds instead of the fixed count (make check-deep: 600). */
#include <time.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "serve/serve.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

static const char *const seeds[] = {
    "{\"prompt\":\"Once upon a time\",\"max_tokens\":16,\"temperature\":0}",
    "{\"prompt\":[\"a\",\"b\"],\"stop\":[\"x\",\"y\"],\"top_p\":0.5,\"top_k\":3,\"seed\":42,\"stream\":true,"
    "\"stream_options\":{\"include_usage\":true}}",
    "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hi\"}],"
    "\"max_completion_tokens\":5,\"n\":1}",
    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi \"},{\"type\":\"text\",\"text\":\"there\"}]},"
    "{\"role\":\"assistant\",\"content\":null},{\"role\":\"developer\",\"content\":\"\\u00e9\\ud83d\\ude00\"}],\"stop\":\"\\n\"}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
    "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"2\"}],\"tools\":[{\"type\":\"function\",\"function\":"
    "{\"name\":\"f\",\"parameters\":{}}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
    "\"parallel_tool_calls\":false,\"chat_template_kwargs\":{\"x\":1}}",
    "{\"prompt\":\"x\",\"temperature\":2,\"top_p\":1,\"max_tokens\":1073741824,\"seed\":-5,\"presence_penalty\":0.5,"
    "\"logit_bias\":{\"1\":2},\"user\":\"u\"}",
    /* issue 15: a NUL, an escaped backslash before u0000, duplicate keys (the first two are refused) */
    "{\"prompt\":\"Once\\u0000 upon a time\",\"max_tokens\":2}",
    "{\"prompt\":\"x\",\"max_tokens\":2,\"max_tokens\":-5}",
    "{\"prompt\":\"a \\\\u0000 b\",\"stop\":[\"\\u0001\"]}",
    /* /infill: every part, a file without a name */
    "{\"input_prefix\":\"def f():\\n\",\"input_suffix\":\"\\nf()\",\"prompt\":\"x = \",\"input_extra\":"
    "[{\"filename\":\"a.py\",\"text\":\"A = 1\"},{\"text\":\"b\"}],\"n_predict\":16,\"stream\":true}",
};
/* How many of the seeds above parse (the rest are refused on purpose). */
static const bool seed_parses[] = {true, true, true, true, true, true, false, false, true, true};

/* Anthropic Messages bodies: blocks of every kind offkv takes, and two it
 * refuses (an image, a server tool). */
static const char *const anthropic_seeds[] = {
    "{\"model\":\"m\",\"max_tokens\":8,\"system\":\"be brief\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
    "\"stop_sequences\":[\"x\"],\"temperature\":0.5,\"top_k\":4,\"stream\":true,\"metadata\":{\"user_id\":\"u\"}}",
    "{\"max_tokens\":8,\"system\":[{\"type\":\"text\",\"text\":\"s\"}],\"messages\":[{\"role\":\"user\",\"content\":"
    "[{\"type\":\"text\",\"text\":\"w?\"}]},{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
    "\"t\",\"signature\":\"s\"},{\"type\":\"redacted_thinking\",\"data\":\"x\"},{\"type\":\"tool_use\",\"id\":\"a\","
    "\"name\":\"f\",\"input\":{\"q\":1}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
    "\"a\",\"content\":[{\"type\":\"text\",\"text\":\"2\"}],\"is_error\":false},{\"type\":\"text\",\"text\":\"ok\"}]}],"
    "\"tools\":[{\"name\":\"f\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}}],"
    "\"tool_choice\":{\"type\":\"tool\",\"name\":\"f\",\"disable_parallel_tool_use\":true},\"thinking\":{\"type\":"
    "\"enabled\",\"budget_tokens\":1024}}",
    "{\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"Tell\"},{\"role\":\"assistant\",\"content\":"
    "[{\"type\":\"text\",\"text\":\"Once \"}]}]}",
    "{\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{}}]}]}",
    "{\"max_tokens\":8,\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"s\"}],\"messages\":[{\"role\":\"user\","
    "\"content\":\"x\"}],\"tool_choice\":{\"type\":\"any\"}}",
};
static const bool anthropic_seed_parses[] = {true, true, true, false, false};

/* Responses API bodies: items of every kind offkv takes, and ones it
 * refuses (a stored response, an image, a built-in tool). */
static const char *const responses_seeds[] = {
    "{\"model\":\"m\",\"input\":\"hi\",\"max_output_tokens\":5,\"temperature\":0,\"store\":false}",
    "{\"instructions\":\"be brief\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"q\"}]},"
    "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"t\"}]},{\"type\":\"function_call\","
    "\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"},{\"type\":\"function_call_output\",\"call_id\":"
    "\"c1\",\"output\":\"r\"}],\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}],"
    "\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"},\"stream\":true,\"parallel_tool_calls\":false}",
    "{\"input\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\"}]},"
    "{\"role\":\"developer\",\"content\":\"x\"}],\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"s\","
    "\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}},\"reasoning\":{\"effort\":\"low\"}}",
    "{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}",
    "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"u\"}]}]}",
    "{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}",
};
static const bool responses_seed_parses[] = {true, true, true, false, false, false};

/* Request heads for the gate: valid ones and the hostile ones of issue 15. */
static const char *const heads[] = {
    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 42\r\n\r\n",
    "GET /health HTTP/1.0\r\n\r\n",
    "POST http://h:1/v1/chat/completions HTTP/1.1\nTransfer-Encoding: chunked\n\n",
    "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    "POST /v1/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    "POST /v1/completions HTTP/1.1\r\nContent-Length: 10abc\r\n\r\n",
    "POST /v1/completions%00 HTTP/1.1\r\nAuthorization: bearer k\r\n\r\n",
    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le",
    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
};

static const char *const fragments[] = {
    "null", "true", "false", "0", "-1", "1e309", "-0", "0.5", "3", "1e-400", "\"\"", "\"\\u0000\"", "\"\\ud800\"",
    "\"\xff\xfe\"", "\"\xc3\"", "[]", "{}", "[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]", "\"prompt\"", "\"messages\"",
    "\"role\"", "\"content\"", "\"stop\"", "\"stream\"", ",", ":", "{", "}", "[", "]", "\"", "\\", "9007199254740993",
    "[\"a\",\"b\",\"c\",\"d\",\"e\"]", "{\"role\":\"user\"}", "{\"type\":\"image\"}",
    "{\"type\":\"tool_use\",\"id\":\"i\",\"name\":\"f\",\"input\":{}}", "{\"type\":\"tool_result\",\"tool_use_id\":\"i\"}",
    "{\"type\":\"thinking\",\"thinking\":\"t\"}", "\"assistant\"", "{\"type\":\"none\"}",
};

/* Checks one body; returns false when the outcome breaks the contract. */
/* A small vocabulary with fill-in-the-middle tokens (3 to 7), for /infill's
 * prompt; made once, freed at exit. */
static okv_tokenizer *fim_tok;
static const okv_tokenizer *fim_vocab(void) {
    if (!fim_tok) {
        static const char *const tokens[] = {"<unk>", "<s>", "</s>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                                             "<|repo_name|>", "<|file_sep|>", "a", "b", "x", " ", "\xe2\x96\x81"};
        const int32_t types[] = {2, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1};
        okv_vocab_desc d = {.model = "llama", .n_tokens = 13, .tokens = tokens, .types = types, .bos_id = 1,
                            .eos_id = 2, .unk_id = 0, .pad_id = -1, .add_bos = -1, .add_eos = -1, .add_space_prefix = -1};
        okv_error err;
        fim_tok = okv_tokenizer_create(&d, &err);
        if (!fim_tok) fprintf(stderr, "fim vocabulary: %s\n", err.message);
    }
    return fim_tok;
}

static bool probe(srv_kind kind, const char *body, size_t len) {
    srv_request r;
    srv_fail f;
    memset(&f, 0, sizeof f);
    if (srv_request_parse(kind, body, len, &r, &f)) {
        bool ok = r.kind == kind && (r.max_tokens == -1 || r.max_tokens >= 1) && r.temperature >= 0 &&
                  r.temperature <= 2 && r.top_p > 0 && r.top_p <= 1 && r.top_k >= 0 && r.n_stops >= 0 &&
                  r.n_stops <= SRV_MAX_STOPS;
        if (kind == SRV_CHAT) {
            ok = ok && r.n_msgs >= 1;
            ok = ok && r.messages_json != NULL;
            static const char *const names[] = {"chatml", "llama2-sys", "mistral-v3", "mistral-v7", "llama3", "gemma"};
            for (size_t t = 0; ok && t < sizeof names / sizeof names[0]; t++) {
                char err[256];
                srv_chat *c = srv_chat_load(NULL, NULL, names[t], NULL, err, sizeof err);
                srv_fail rf = {0};
                char *p = c ? srv_chat_render(c, &r, true, &rf) : NULL;
                /* (a template that does not show a prefill as given cannot continue it: a 400 naming that) */
                ok = p != NULL || (c && rf.status == 400 && !strcmp(rf.param, "continue_final_message"));
                free(p);
                srv_chat_free(c);
            }
        } else {
            ok = ok && r.n_prompts >= 1 && r.n_prompts <= SRV_MAX_PROMPTS;
            for (int i = 0; ok && i < r.n_prompts; i++) ok = r.prompts[i] != NULL;
        }
        if (kind == SRV_INFILL) {
            /* its prompt in FIM tokens, of a small vocabulary: the window's
             * bounds hold, it ends asking for the middle */
            ok = ok && r.input_prefix && r.input_suffix && r.n_prompts == 1 && r.n_extra >= 0 &&
                 r.n_extra <= SRV_MAX_INFILL_EXTRA;
            for (int i = 0; ok && i < r.n_extra; i++) ok = r.extra_names[i] && r.extra_texts[i];
            size_t n = 0;
            srv_fail ff;
            int32_t *ids = ok ? srv_infill_prompt(fim_vocab(), &r, 512, &n, &ff) : NULL;
            size_t n_prompt = 0;
            okv_error err;
            okv_tokenizer_encode(fim_vocab(), r.prompts[0], strlen(r.prompts[0]), 0, NULL, 0, &n_prompt, &err);
            ok = ok && ids && n >= 4 && n <= 1 + 3 + 384 + 128 + n_prompt && ids[n - 1] == 5;
            free(ids);
        }
        for (int i = 0; ok && i < r.n_stops; i++) ok = r.stops[i] && r.stops[i][0];
        srv_request_clear(&r);
        return ok;
    }
    if (f.status != 400) return false;
    char *e = srv_error_json(&f);
    if (!e) return false;
    cJSON *j = cJSON_Parse(e);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
    bool ok = err && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "message")) &&
              cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "type")) &&
              cJSON_GetObjectItemCaseSensitive(err, "param") && cJSON_GetObjectItemCaseSensitive(err, "code");
    cJSON_Delete(j);
    free(e);
    return ok;
}

/* An Anthropic body: an OpenAI chat body the parser takes (a request in
 * range, as probe checks), or a 400 / 500 in Anthropic's error shape. */
/* A translator's chat body o (freed): in range as probe checks, and
 * *accepted when the parser takes it (else its refusal is a 400). */
static bool probe_translated(char *o, bool *accepted) {
    srv_fail f;
    memset(&f, 0, sizeof f);
    bool ok = probe(SRV_CHAT, o, strlen(o));
    srv_request r;
    if ((*accepted = srv_request_parse(SRV_CHAT, o, strlen(o), &r, &f))) srv_request_clear(&r);
    else ok = ok && f.status == 400;
    free(o);
    return ok;
}

static bool probe_anthropic(const char *body, size_t len, bool *accepted) {
    srv_fail f;
    memset(&f, 0, sizeof f);
    char *o = srv_anthropic_request(body, len, (len & 1) != 0, &f);
    *accepted = false;
    if (o) return probe_translated(o, accepted);
    if (f.status != 400 && f.status != 500) return false;
    char *e = srv_anthropic_error_json(&f);
    cJSON *j = e ? cJSON_Parse(e) : NULL;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error"), *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    const bool ok = cJSON_IsString(type) && !strcmp(type->valuestring, "error") &&
                    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "message")) &&
                    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "type"));
    cJSON_Delete(j);
    free(e);
    return ok;
}

/* A Responses API body: an OpenAI chat body the parser takes (a request in
 * range, as probe checks), or a 400 / 500 in OpenAI's error shape. */
static bool probe_responses(const char *body, size_t len, bool *accepted) {
    srv_fail f;
    memset(&f, 0, sizeof f);
    char *o = srv_responses_request(body, len, &f);
    *accepted = false;
    if (o) return probe_translated(o, accepted);
    if ((f.status != 400 && f.status != 500) || !f.message[0]) return false;
    char *e = srv_error_json(&f);
    cJSON *j = e ? cJSON_Parse(e) : NULL;
    const bool ok = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message"));
    cJSON_Delete(j);
    free(e);
    return ok;
}

/* One head through the gate's check: a verdict, and a refusal that says why. */
static bool probe_head(const char *h, size_t n) {
    srv_fail f;
    memset(&f, 0, sizeof f);
    const int v = srv_head_check(h, n, 1024, 1 << 20, &f);
    if (v == 0 || v == 1) return n <= 1024 || v == 1;
    if (v != -1 || f.status < 400 || f.status > 505 || !f.message[0]) return false;
    char *e = srv_error_json(&f);
    cJSON *j = e ? cJSON_Parse(e) : NULL;
    const bool ok = cJSON_GetObjectItemCaseSensitive(j, "error") != NULL;
    cJSON_Delete(j);
    free(e);
    return ok;
}

/* A copy of seed in buf (cap bytes), bent: bytes flipped, fragments
 * spliced in, runs cut out, truncated, or pure noise; its length. */
static size_t mutate(char *buf, const char *seed, size_t cap) {
    size_t n = strlen(seed);
    memcpy(buf, seed, n);
    const int mode = (int)below(5);
    const int edits = 1 + (int)below(6);
    for (int e = 0; e < edits; e++) {
        switch (mode == 4 ? 4 : (int)below(4)) {
        case 0: /* flip a byte */
            if (n) buf[below(n)] = (char)next();
            break;
        case 1: { /* splice a fragment in */
            const char *fr = fragments[below(sizeof fragments / sizeof fragments[0])];
            const size_t k = strlen(fr), at = below(n + 1);
            if (n + k < cap) {
                memmove(buf + at + k, buf + at, n - at);
                memcpy(buf + at, fr, k);
                n += k;
            }
            break;
        }
        case 2: /* cut a run out */
            if (n) {
                const size_t at = below(n), k = 1 + below(n - at);
                memmove(buf + at, buf + at + k, n - at - k);
                n -= k;
            }
            break;
        case 3: /* truncate */
            n = below(n + 1);
            break;
        default: /* noise */
            n = below(256);
            for (size_t i = 0; i < n; i++) buf[i] = (char)next();
        }
    }
    return n;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
    enum { ROUNDS = 6000, CAP = 4096 };
    const char *dur = getenv("OKV_FUZZ_SECONDS");
    const double limit = dur ? atof(dur) : 0, t_start = seconds();
    static char buf[CAP];
    int accepted = 0, refused = 0, bad = 0, anthropic_accepted = 0, responses_accepted = 0;
    int round = 0;
    for (; limit > 0 ? seconds() - t_start < limit : round < ROUNDS; round++) {
        const char *seed = seeds[below(sizeof seeds / sizeof seeds[0])];
        size_t n = mutate(buf, seed, CAP);
        for (int k = SRV_CHAT; k <= SRV_INFILL; k++) {
            /* The body is not NUL-terminated for the parser: copy it exactly
             * so that ASan sees any read past its end. */
            char *exact = malloc(n ? n : 1);
            memcpy(exact, buf, n);
            bool ok = probe((srv_kind)k, exact, n);
            srv_request r;
            srv_fail f;
            if (srv_request_parse((srv_kind)k, exact, n, &r, &f)) {
                accepted++;
                srv_request_clear(&r);
            } else {
                refused++;
            }
            free(exact);
            if (!ok && bad++ < 5) {
                fprintf(stderr, "contract broken for body (%zu bytes): %.*s\n", n, (int)n, buf);
            }
            CHECK(ok, "round %d", round);
        }
        /* An Anthropic body and a Responses API body, bent the same ways. */
        for (int api = 0; api < 2; api++) {
            const char *seed2 = api ? responses_seeds[below(sizeof responses_seeds / sizeof responses_seeds[0])]
                                    : anthropic_seeds[below(sizeof anthropic_seeds / sizeof anthropic_seeds[0])];
            const size_t an = mutate(buf, seed2, CAP);
            char *exact = malloc(an ? an : 1);
            memcpy(exact, buf, an);
            bool taken;
            const bool aok = api ? probe_responses(exact, an, &taken) : probe_anthropic(exact, an, &taken);
            free(exact);
            if (taken) ++*(api ? &responses_accepted : &anthropic_accepted);
            if (!aok && bad++ < 5)
                fprintf(stderr, "%s contract broken (%zu bytes): %.*s\n", api ? "responses" : "anthropic", an, (int)an, buf);
            CHECK(aok, "%s round %d", api ? "responses" : "anthropic", round);
        }
        /* A head, bent the same ways (bytes flipped, runs cut, truncated). */
        const char *hs = heads[below(sizeof heads / sizeof heads[0])];
        size_t hn = strlen(hs);
        memcpy(buf, hs, hn);
        for (int e = 0, k = 1 + (int)below(4); e < k; e++) {
            const int op = (int)below(3);
            if (op == 0 && hn) buf[below(hn)] = (char)next();
            else if (op == 1 && hn) {
                const size_t at = below(hn), cut = 1 + below(hn - at);
                memmove(buf + at, buf + at + cut, hn - at - cut);
                hn -= cut;
            } else hn = below(hn + 1);
        }
        if (below(4) == 0) { /* an endless head */
            while (hn + 8 < 2000) memcpy(buf + hn, "X: y\r\n", 6), hn += 6;
        }
        char *exact = malloc(hn ? hn : 1);
        memcpy(exact, buf, hn);
        const bool hok = probe_head(exact, hn);
        free(exact);
        if (!hok && bad++ < 5) fprintf(stderr, "head contract broken (%zu bytes): %.*s\n", hn, (int)hn, buf);
        CHECK(hok, "head round %d", round);
    }
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) CHECK(probe_head(heads[i], strlen(heads[i])), "head seed %zu", i);
    /* The seeds themselves parse (a parser refusing everything would pass the rest). */
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        srv_request r;
        srv_fail f;
        const srv_kind k = strstr(seeds[i], "messages") ? SRV_CHAT : strstr(seeds[i], "input_prefix") ? SRV_INFILL : SRV_COMPLETION;
        const bool parsed = srv_request_parse(k, seeds[i], strlen(seeds[i]), &r, &f);
        CHECK(parsed == seed_parses[i], "seed %zu: parsed %d: %s", i, parsed, parsed ? "" : f.message);
        if (parsed) srv_request_clear(&r);
    }
    for (size_t i = 0; i < sizeof anthropic_seeds / sizeof anthropic_seeds[0] + sizeof responses_seeds / sizeof responses_seeds[0]; i++) {
        const size_t na = sizeof anthropic_seeds / sizeof anthropic_seeds[0];
        const char *seed = i < na ? anthropic_seeds[i] : responses_seeds[i - na];
        bool taken;
        CHECK(i < na ? probe_anthropic(seed, strlen(seed), &taken) : probe_responses(seed, strlen(seed), &taken), "seed %s", seed);
        CHECK(taken == (i < na ? anthropic_seed_parses[i] : responses_seed_parses[i - na]), "seed %s: taken %d", seed, taken);
    }
    printf("%d rounds in %.1f s: %d bodies accepted, %d refused; %d Anthropic and %d Responses bodies accepted\n", round,
           seconds() - t_start, accepted, refused, anthropic_accepted, responses_accepted);
    CHECK(responses_accepted > 20, "the Responses mutations reach acceptance (%d)", responses_accepted);
    CHECK(anthropic_accepted > 20, "the Anthropic mutations reach acceptance (%d)", anthropic_accepted);
    CHECK(accepted > 100 && refused > 1000, "the mutations reach both outcomes (%d, %d)", accepted, refused);
    okv_tokenizer_free(fim_tok);
    return check_done();
}
