/* The server's gate (tools/offkv/serve/gate.c) and request parser on what
 * a hostile client sends (issue 15), without a socket:
 *  - srv_head_check: every prefix of a valid head asks for more (0) and the
 *    whole head passes (1); binary garbage, a bad request line, a bad
 *    Content-Length (too large, -1, 10abc, empty, two different ones), an
 *    unknown Transfer-Encoding, a header without a name or with a control
 *    byte, an obs-fold, an oversized head are refused (-1) with the status
 *    and an OpenAI-shaped JSON body -- garbage as soon as its first bad byte
 *    is in, not when a line ends;
 *  - srv_request_parse: an escaped \u0000 in any string is refused naming
 *    the top-level field (cJSON cut the text there), an escaped backslash
 *    followed by "u0000" is text; a key given twice in any object is
 *    refused naming it; bad UTF-8 anywhere in the body is refused. */
#include <cjson/cJSON.h>

#include "check.h"
#include "serve/serve.h"

static bool openai_shaped(const srv_fail *f) {
    char *e = srv_error_json(f);
    cJSON *j = e ? cJSON_Parse(e) : NULL;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
    const bool ok = err && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "message")) &&
                    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "type")) &&
                    cJSON_GetObjectItemCaseSensitive(err, "param") && cJSON_GetObjectItemCaseSensitive(err, "code");
    cJSON_Delete(j);
    free(e);
    return ok;
}

static void head_ok(const char *h) {
    const size_t n = strlen(h);
    srv_fail f;
    for (size_t k = 0; k < n; k++) {
        const int v = srv_head_check(h, k, 16384, 1 << 20, &f);
        CHECK(v == 0, "the first %zu bytes of a valid head: %d (%s)", k, v, v < 0 ? f.message : "");
        if (v) break;
    }
    CHECK(srv_head_check(h, n, 16384, 1 << 20, &f) == 1, "a valid head not passed: %.60s", h);
}

static void head_bad(const char *h, size_t n, int status, const char *needle) {
    srv_fail f;
    memset(&f, 0, sizeof f);
    const int v = srv_head_check(h, n, 16384, 1 << 20, &f);
    CHECK(v == -1 && f.status == status && strstr(f.message, needle) && openai_shaped(&f),
          "head %.50s: verdict %d, status %d (want %d), '%s' (want '%s')", h, v, f.status, status, f.message, needle);
}

static void parse_bad(srv_kind kind, const char *body, const char *param, const char *needle) {
    srv_request r;
    srv_fail f;
    memset(&f, 0, sizeof f);
    const bool ok = srv_request_parse(kind, body, strlen(body), &r, &f);
    if (ok) srv_request_clear(&r);
    CHECK(!ok && f.status == 400 && strcmp(f.param, param) == 0 && strstr(f.message, needle),
          "%s: accepted %d, param '%s' (want '%s'), '%s'", body, ok, f.param, param, f.message);
}

int main(void) {
    head_ok("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    head_ok("POST /v1/completions HTTP/1.0\r\nContent-Length: 12\r\nContent-Type: application/json\r\n\r\n");
    head_ok("POST http://127.0.0.1:8080/v1/chat/completions HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n");
    head_ok("GET /v1/completions%00 HTTP/1.1\r\nX-Empty:\r\nUser-Agent: curl/8 \xc3\xa9\r\n\r\n");
    head_ok("POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n");
    /* Binary garbage is refused at its first byte, not at a line's end. */
    const char tls[] = "\x16\x03\x01\x02\x00\x01\x00";
    head_bad(tls, 1, 400, "not HTTP");
    head_bad("GET\x01", 4, 400, "not HTTP");
    head_bad("GET /a\x7f", 7, 400, "not visible ASCII");
    head_bad("GET  /x HTTP/1.1\r\n", 18, 400, "no target");
    head_bad(" GET", 4, 400, "not HTTP");
    head_bad("GET /x HTTX", 11, 400, "not HTTP");
    head_bad("GET /x HTTP/2.0\r\n", 17, 400, "not HTTP");
    head_bad("GET /x HTTP/1.9\r\n", 17, 505, "1.0 and 1.1");
    const char *cls[][3] = {{"99999999999999999999999", "413", "larger"}, {"-1", "400", "not a number"},
                            {"10abc", "400", "not a number"},           {"", "400", "empty"},
                            {"2000000", "413", "larger"},               {"1 2", "400", "not a number"}};
    for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++) {
        char h[256];
        snprintf(h, sizeof h, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n", cls[i][0]);
        head_bad(h, strlen(h), atoi(cls[i][1]), cls[i][2]);
    }
    const char two[] = "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
    head_bad(two, strlen(two), 400, "two different");
    const char te[] = "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n";
    head_bad(te, strlen(te), 501, "gzip");
    const char both[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
    head_bad(both, strlen(both), 400, "both");
    const char noname[] = "GET / HTTP/1.1\r\n: x\r\n\r\n";
    head_bad(noname, strlen(noname), 400, "no name");
    const char fold[] = "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n";
    head_bad(fold, strlen(fold), 400, "not 'Name: value'");
    const char ctl[] = "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n";
    head_bad(ctl, strlen(ctl), 400, "control byte");
    const char cr[] = "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n";
    head_bad(cr, strlen(cr), 400, "bare CR");
    /* A head that never ends. */
    char *big = malloc(20000);
    int k = snprintf(big, 20000, "GET / HTTP/1.1\r\n");
    while (k < 19000) k += snprintf(big + k, 20000 - (size_t)k, "X-Pad: %0100d\r\n", 0);
    srv_fail f;
    CHECK(srv_head_check(big, (size_t)k, 16384, 1 << 20, &f) == -1 && f.status == 431, "an endless head: 431 (%d)",
          f.status);
    free(big);
    /* More than SRV_MAX_HEADERS header lines, short ones (libmicrohttpd ran
     * out of its pool on some 450 and answered in HTML). */
    char many[8192];
    k = snprintf(many, sizeof many, "GET / HTTP/1.1\r\n");
    for (int h = 0; h <= SRV_MAX_HEADERS; h++) k += snprintf(many + k, sizeof many - (size_t)k, "X-%d: v\r\n", h);
    k += snprintf(many + k, sizeof many - (size_t)k, "\r\n");
    CHECK(srv_head_check(many, (size_t)k, 16384, 1 << 20, &f) == -1 && f.status == 431 && strstr(f.message, "100 header lines"),
          "101 header lines: 431 (%d %s)", f.status, f.message);
    k = snprintf(many, sizeof many, "GET / HTTP/1.1\r\n");
    for (int h = 0; h < SRV_MAX_HEADERS; h++) k += snprintf(many + k, sizeof many - (size_t)k, "X-%d: v\r\n", h);
    k += snprintf(many + k, sizeof many - (size_t)k, "\r\n");
    CHECK(srv_head_check(many, (size_t)k, 16384, 1 << 20, &f) == 1, "100 header lines: whole (%s)", f.message);

    /* NUL and duplicate keys in bodies. */
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"Once\\u0000 upon a time\"}", "prompt", "NUL");
    parse_bad(SRV_COMPLETION, "{\"prompt\":[\"a\",\"b\\u0000\"]}", "prompt", "NUL");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\\u0000\"}]}", "messages", "NUL");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"stop\":[\"\\u0000\"]}", "stop", "NUL");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"user\":\"a\\u0000\"}", "user", "NUL");
    parse_bad(SRV_COMPLETION, "{\"pro\\u0000mpt\":\"x\"}", "", "NUL");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":2,\"max_tokens\":-5}", "max_tokens", "twice");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"role\":\"system\"}]}", "role", "twice");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\"1\":2,\"1\":3}}", "1", "twice");
    /* token ids are digits: strtol took " 5" and "+5" */
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\" 5\":2}}", "logit_bias", "not a token id");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\"+5\":2}}", "logit_bias", "not a token id");
    /* Bad UTF-8 anywhere, a key included (the template's reader refuses it
     * later, after the request was accepted), is refused naming the byte. */
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"cont\xffnt\":\"hi\"}]}", "", "byte 33");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"caf\xc3\"}", "", "UTF-8");
    /* Raw control bytes in strings (JSON allows none): a raw NUL cut the
     * text at it. */
    static const char raw_nul[] = "{\"prompt\":\"Once\0 upon\"}";
    srv_request rn;
    CHECK(srv_request_parse(SRV_COMPLETION, raw_nul, sizeof raw_nul - 1, &rn, &f) == false && f.status == 400 &&
              strstr(f.message, "0x00") && strstr(f.message, "byte 15"),
          "a raw NUL: %s", f.message);
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"a\tb\"}", "", "0x09");
    /* A grammar that parses but whose matcher cannot start (its start
     * expands past the matcher's bounds): a 400 naming it, not a 500
     * "out of memory" when the job is made. */
    {
        char g[2048] = "{\"prompt\":\"x\",\"grammar\":\"root ::= a20 \\\"z\\\"\\n";
        for (int l = 20; l > 0; l--) snprintf(g + strlen(g), sizeof g - strlen(g), "a%d ::= a%d a%d\\n", l, l - 1, l - 1);
        snprintf(g + strlen(g), sizeof g - strlen(g), "a0 ::= \\\"x\\\" | \\\"\\\"\"}");
        parse_bad(SRV_COMPLETION, g, "grammar", "matcher");
    }
    /* A stop string past SRV_MAX_STOP_BYTES (each token is checked against
     * its tail in the decode thread all sequences share). */
    {
        char body[SRV_MAX_STOP_BYTES + 64];
        int at = snprintf(body, sizeof body, "{\"prompt\":\"x\",\"stop\":[\"a\",\"");
        memset(body + at, 'z', SRV_MAX_STOP_BYTES + 1);
        snprintf(body + at + SRV_MAX_STOP_BYTES + 1, sizeof body - (size_t)at - SRV_MAX_STOP_BYTES - 1, "\"]}");
        parse_bad(SRV_COMPLETION, body, "stop", "4097 bytes");
    }
    srv_request r;
    const char *fine = "{\"prompt\":\"a \\\\u0000 b\",\"stop\":\"\\u0001\",\"logit_bias\":{\"1\":2,\"2\":3}}";
    const bool parsed = srv_request_parse(SRV_COMPLETION, fine, strlen(fine), &r, &f);
    CHECK(parsed, "refused: %s", f.message);
    if (parsed) {
        CHECK(r.n_prompts == 1 && strcmp(r.prompts[0], "a \\u0000 b") == 0, "an escaped backslash: '%s'",
              r.n_prompts ? r.prompts[0] : "");
        srv_request_clear(&r);
    }
    /* Many keys in one object: refused or not, quickly (sorted, not pairwise). */
    size_t cap = 4u << 20, n = 0;
    char *body = malloc(cap);
    n += (size_t)snprintf(body + n, cap - n, "{\"prompt\":\"x\",\"logit_bias\":{");
    for (int i = 0; i < 100000; i++) n += (size_t)snprintf(body + n, cap - n, "%s\"%d\":1", i ? "," : "", i);
    n += (size_t)snprintf(body + n, cap - n, ",\"77\":2}}");
    CHECK(!srv_request_parse(SRV_COMPLETION, body, n, &r, &f) && strcmp(f.param, "77") == 0,
          "a duplicate among 100000 keys: '%s'", f.message);
    free(body);
    return check_done();
}
