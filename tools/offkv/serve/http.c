/* The wire (libmicrohttpd, a thread per connection, fed by the gate): the
 * route table and the checks before a handler, the connections' bodies
 * and per-client counts, sending answers and errors, /health, /metrics and
 * the page.  What the handlers answer is openai.c's; starting and stopping
 * is lifecycle.c's (server.h says what each part offers). */
#include <arpa/inet.h>
#include <malloc.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "offkv/gguf.h"
#include "offkv/tokenizer.h"
#include "server.h"

static const int counted_status[N_STATUS] = {200, 400, 401, 404, 405, 408, 413, 500, 503, 0};

/* Counts a request of c's client in; false when that client already has
 * its share of requests being answered. */
static bool client_in(server *srv, struct MHD_Connection *c, conn_ctx *cc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return true;
    const struct sockaddr *a = ci->client_addr;
    const size_t len = a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    pthread_mutex_lock(&srv->mu);
    int k = 0;
    while (k < srv->n_clients && !srv_same_client((struct sockaddr *)&srv->clients[k].addr, a)) k++;
    bool ok = true;
    if (k < srv->n_clients && srv->clients[k].n >= srv->cfg->max_per_client) {
        ok = false;
    } else if (k == srv->n_clients) {
        if (srv->n_clients == srv->cap_clients) {
            const int cap = srv->cap_clients ? 2 * srv->cap_clients : 16;
            struct client_count *p = realloc(srv->clients, (size_t)cap * sizeof *p);
            if (p) {
                srv->clients = p;
                srv->cap_clients = cap;
            }
        }
        if (srv->n_clients < srv->cap_clients) {
            memset(&srv->clients[k], 0, sizeof srv->clients[k]);
            memcpy(&srv->clients[k].addr, a, len);
            srv->n_clients++;
        }
    }
    if (ok && k < srv->n_clients) {
        srv->clients[k].n++;
        memcpy(&cc->addr, a, len);
        cc->counted = true;
    }
    pthread_mutex_unlock(&srv->mu);
    return ok;
}

static void client_out(server *srv, conn_ctx *cc) {
    if (!cc->counted) return;
    pthread_mutex_lock(&srv->mu);
    for (int k = 0; k < srv->n_clients; k++)
        if (srv_same_client((struct sockaddr *)&srv->clients[k].addr, (struct sockaddr *)&cc->addr)) {
            if (--srv->clients[k].n == 0) srv->clients[k] = srv->clients[--srv->n_clients];
            break;
        }
    pthread_mutex_unlock(&srv->mu);
    cc->counted = false;
}

/* The numeric address at sa into buf, or "?". */
static void addr_name(const struct sockaddr *sa, socklen_t len, char *buf, size_t cap) {
    if (!sa || getnameinfo(sa, len, buf, (socklen_t)cap, NULL, 0, NI_NUMERICHOST) != 0) snprintf(buf, cap, "?");
}

void wire_client_name(struct MHD_Connection *c, char *buf, size_t cap) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    addr_name(sa, sa && sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in), buf, cap);
}

void wire_log(server *srv, const char *client, const char *fmt, ...) {
    if (srv->cfg->quiet) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* a client's words (a parameter's name) must not make lines of their own */
    for (char *p = line; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '.';
    fprintf(stderr, "offkv serve: %s %s\n", client, line);
}

void wire_count_status(server *srv, int status) {
    int i = 0;
    while (counted_status[i] && counted_status[i] != status) i++;
    pthread_mutex_lock(&srv->mu);
    srv->by_status[i]++;
    pthread_mutex_unlock(&srv->mu);
}

/* Restarts the connection's idle clock (libmicrohttpd's timeout counts
 * from the last byte moved, and a long generation moves none): the
 * timeout then measures only the client's own stalls. */
void wire_touch(server *srv, struct MHD_Connection *c) {
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)(srv->cfg->timeout + 0.999));
}

/* wire_send_owned, with a 405's Allow header. */
static enum MHD_Result send_owned(server *srv, struct MHD_Connection *c, int status, const char *type, char *body,
                                  size_t n, const char *allow) {
    struct MHD_Response *r = MHD_create_response_from_buffer(n, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    wire_touch(srv, c);
    MHD_add_response_header(r, "Content-Type", type);
    /* One request per connection: every request's head passes the gate
     * (gate.c), which libmicrohttpd's keep-alive would let a second one skip. */
    MHD_add_response_header(r, "Connection", "close");
    if (status == 503) MHD_add_response_header(r, "Retry-After", "2");
    if (status == 405 && allow) MHD_add_response_header(r, "Allow", allow);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    wire_count_status(srv, status);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result wire_send_owned(server *srv, struct MHD_Connection *c, int status, const char *type, char *body,
                                size_t n) {
    return send_owned(srv, c, status, type, body, n, NULL);
}

enum MHD_Result wire_send_json(server *srv, struct MHD_Connection *c, int status, cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!s) return MHD_NO;
    return wire_send_owned(srv, c, status, "application/json", s, strlen(s));
}

/* An error answer's line in the log: status, type (param), message. */
static void log_fail_at(server *srv, const char *client, const srv_fail *f) {
    wire_log(srv, client, "%d %s%s%s%s: %s", f->status, f->type, f->param[0] ? " (" : "", f->param,
             f->param[0] ? ")" : "", f->message);
}

static void log_fail(server *srv, struct MHD_Connection *c, const srv_fail *f) {
    char client[64];
    wire_client_name(c, client, sizeof client);
    log_fail_at(srv, client, f);
}

enum MHD_Result wire_send_error_as(server *srv, struct MHD_Connection *c, srv_api api, const srv_fail *f) {
    log_fail(srv, c, f);
    char *s = api == SRV_API_ANTHROPIC ? srv_anthropic_error_json(f) : srv_error_json(f);
    if (!s) return MHD_NO;
    return send_owned(srv, c, f->status, "application/json", s, strlen(s), f->allow);
}

enum MHD_Result wire_send_error(server *srv, struct MHD_Connection *c, const srv_fail *f) {
    return wire_send_error_as(srv, c, SRV_API_OPENAI, f);
}

static enum MHD_Result vfail(server *srv, struct MHD_Connection *c, srv_api api, int status, const char *type,
                             const char *param, const char *fmt, va_list ap) {
    srv_fail f = {.status = status};
    snprintf(f.type, sizeof f.type, "%s", type);
    snprintf(f.param, sizeof f.param, "%s", param ? param : "");
    vsnprintf(f.message, sizeof f.message, fmt, ap);
    return wire_send_error_as(srv, c, api, &f);
}

enum MHD_Result wire_fail_as(server *srv, struct MHD_Connection *c, srv_api api, int status, const char *type,
                             const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const enum MHD_Result r = vfail(srv, c, api, status, type, param, fmt, ap);
    va_end(ap);
    return r;
}

enum MHD_Result wire_fail(server *srv, struct MHD_Connection *c, int status, const char *type, const char *param,
                          const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const enum MHD_Result r = vfail(srv, c, SRV_API_OPENAI, status, type, param, fmt, ap);
    va_end(ap);
    return r;
}

/* True when the connection broke or is closed both ways.  A client that
 * only shut its sending side (shutdown(SHUT_WR) after the request, as some
 * clients and proxies do) still waits for the answer, and its end of file
 * (POLLRDHUP) looks the same as a close (a cancelled call, a client's
 * timeout) until something is written.  So once, with *probed false before
 * any answer began, an end of file gets an interim "100 Continue" (which
 * HTTP/1.1 clients skip before the answer): a closed socket answers it with
 * a reset, seen here at once or on the next call.  probed NULL: no probe
 * (an answer is being written: its own writes fail). */
bool wire_client_gone(struct MHD_Connection *c, bool *probed) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    if (!(p.revents & POLLRDHUP) || !probed || *probed) return false;
    *probed = true;
    static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    const ssize_t w = send(ci->connect_fd, probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    return w < 0 && (errno == EPIPE || errno == ECONNRESET);
}

bool wire_append_text(char **buf, size_t *n, size_t *cap, const char *s, size_t len) {
    if (*n + len + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *n + len + 1) c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return false;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *n, s, len);
    *n += len;
    (*buf)[*n] = '\0';
    return true;
}

bool wire_sse_event(char **out, size_t *n, size_t *cap, const char *name, cJSON *data) {
    char *s = data ? cJSON_PrintUnformatted(data) : NULL;
    bool ok = s && wire_append_text(out, n, cap, "event: ", 7) && wire_append_text(out, n, cap, name, strlen(name)) &&
              wire_append_text(out, n, cap, "\ndata: ", 7) && wire_append_text(out, n, cap, s, strlen(s)) &&
              wire_append_text(out, n, cap, "\n\n", 2);
    free(s);
    cJSON_Delete(data); /* last: name may be one of its strings */
    return ok;
}

static enum MHD_Result metrics(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    (void)cc;
    srv_sched_stats st;
    srv_sched_stats_get(srv->sched, &st);
    uint64_t by[N_STATUS];
    pthread_mutex_lock(&srv->mu);
    memcpy(by, srv->by_status, sizeof by);
    pthread_mutex_unlock(&srv->mu);
    char *b = NULL;
    size_t n = 0, cap = 0;
    char line[1024]; /* room for the longest line: a model_label (520) and a HELP text */
#define OUT(...)                                                      \
    do {                                                              \
        int k_ = snprintf(line, sizeof line, __VA_ARGS__);            \
        if (!wire_append_text(&b, &n, &cap, line, (size_t)k_)) goto nomem; \
    } while (0)
    OUT("# HELP offkv_requests_total HTTP requests answered, by status code.\n# TYPE offkv_requests_total counter\n");
    for (int i = 0; i < N_STATUS; i++)
        if (counted_status[i]) OUT("offkv_requests_total{status=\"%d\"} %" PRIu64 "\n", counted_status[i], by[i]);
        else OUT("offkv_requests_total{status=\"other\"} %" PRIu64 "\n", by[i]);
    OUT("# HELP offkv_prompt_tokens_total Prompt tokens submitted.\n# TYPE offkv_prompt_tokens_total counter\n");
    OUT("offkv_prompt_tokens_total %" PRIu64 "\n", st.prompt_tokens);
    OUT("# HELP offkv_prompt_tokens_cached_total Prompt tokens reused from a sequence's cache.\n"
        "# TYPE offkv_prompt_tokens_cached_total counter\n");
    OUT("offkv_prompt_tokens_cached_total %" PRIu64 "\n", st.cached_tokens);
    OUT("# HELP offkv_generated_tokens_total Tokens generated.\n# TYPE offkv_generated_tokens_total counter\n");
    OUT("offkv_generated_tokens_total %" PRIu64 "\n", st.generated_tokens);
    OUT("# HELP offkv_tokens_per_second Generated tokens per second of evaluation, all sequences together.\n"
        "# TYPE offkv_tokens_per_second gauge\n");
    OUT("offkv_tokens_per_second %.3f\n", st.decode_seconds > 0 ? (double)st.generated_tokens / st.decode_seconds : 0.0);
    OUT("# HELP offkv_last_request_tokens_per_second Decode speed of the last finished request.\n"
        "# TYPE offkv_last_request_tokens_per_second gauge\n");
    OUT("offkv_last_request_tokens_per_second %.3f\n", st.last_tokens_per_second);
    OUT("# HELP offkv_eval_steps_total Batched evaluation steps.\n# TYPE offkv_eval_steps_total counter\n");
    OUT("offkv_eval_steps_total %" PRIu64 "\n", st.steps);
    OUT("# HELP offkv_eval_seconds_total Time spent evaluating (okv_batch_eval).\n"
        "# TYPE offkv_eval_seconds_total counter\n");
    OUT("offkv_eval_seconds_total %.6f\n", st.decode_seconds);
    OUT("# HELP offkv_sequences_active Sequences generating now.\n# TYPE offkv_sequences_active gauge\n");
    OUT("offkv_sequences_active %d\n", (int)st.active);
    OUT("# HELP offkv_sequences_queued Requests waiting for a sequence.\n# TYPE offkv_sequences_queued gauge\n");
    OUT("offkv_sequences_queued %d\n", (int)st.queued);
    OUT("# HELP offkv_prompt_tokens_pending Prompt tokens submitted and not yet read into a cache (a queued "
        "request counts its whole prompt).\n# TYPE offkv_prompt_tokens_pending gauge\n");
    OUT("offkv_prompt_tokens_pending %lld\n", (long long)st.prompt_pending);
    OUT("# HELP offkv_sequences_max Sequences (--parallel).\n# TYPE offkv_sequences_max gauge\n");
    OUT("offkv_sequences_max %d\n", (int)st.n_parallel);
    OUT("# HELP offkv_cache_bytes K/V cache storage held, by layer kind.\n# TYPE offkv_cache_bytes gauge\n");
    OUT("offkv_cache_bytes{kind=\"flat\"} %zu\n", st.cache_flat_bytes);
    OUT("offkv_cache_bytes{kind=\"ring\"} %zu\n", st.cache_ring_bytes);
    /* What a router reads (the Gateway API Inference Extension's model-server
     * protocol: requests waiting, requests running, K/V cache utilisation
     * 0-1), under the names its endpoint picker reads from vLLM and from
     * llama.cpp's server, so either setting finds them. */
    const double kv_use = st.kv_total > 0 ? (double)st.kv_used / (double)st.kv_total : 0.0;
    OUT("# HELP offkv_kv_cache_usage_ratio K/V positions held by running requests, of all sequences' capacity (0-1).\n"
        "# TYPE offkv_kv_cache_usage_ratio gauge\n");
    OUT("offkv_kv_cache_usage_ratio %.6f\n", kv_use);
    OUT("# HELP vllm:num_requests_waiting Requests waiting for a sequence (as offkv_sequences_queued).\n"
        "# TYPE vllm:num_requests_waiting gauge\n");
    OUT("vllm:num_requests_waiting{model_name=\"%s\"} %d\n", srv->model_label, (int)st.queued);
    OUT("# HELP vllm:num_requests_running Requests being decoded (as offkv_sequences_active).\n"
        "# TYPE vllm:num_requests_running gauge\n");
    OUT("vllm:num_requests_running{model_name=\"%s\"} %d\n", srv->model_label, (int)st.active);
    OUT("# HELP vllm:kv_cache_usage_perc K/V cache usage, 1 is 100 percent (as offkv_kv_cache_usage_ratio).\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n");
    OUT("vllm:kv_cache_usage_perc{model_name=\"%s\"} %.6f\n", srv->model_label, kv_use);
    OUT("# HELP llamacpp:requests_deferred Requests waiting for a sequence.\n# TYPE llamacpp:requests_deferred gauge\n");
    OUT("llamacpp:requests_deferred %d\n", (int)st.queued);
    OUT("# HELP llamacpp:requests_processing Requests being decoded.\n# TYPE llamacpp:requests_processing gauge\n");
    OUT("llamacpp:requests_processing %d\n", (int)st.active);
    OUT("# HELP llamacpp:kv_cache_usage_ratio K/V cache usage (0-1).\n# TYPE llamacpp:kv_cache_usage_ratio gauge\n");
    OUT("llamacpp:kv_cache_usage_ratio %.6f\n", kv_use);
#undef OUT
    return wire_send_owned(srv, c, 200, "text/plain; version=0.0.4", b, n);
nomem:
    free(b);
    return wire_fail(srv, c, 500, "server_error", NULL, "out of memory for the metrics");
}

/* Compares without stopping at the first difference, so the time an answer
 * takes says nothing about how much of the key was right. */
static bool key_ok(const char *got, const char *want) {
    const size_t ng = strlen(got), nw = strlen(want);
    unsigned char d = ng != nw;
    for (size_t i = 0; i < nw; i++) d |= (unsigned char)(want[i] ^ (i < ng ? got[i] : 0));
    return d == 0;
}

static enum MHD_Result page(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    (void)cc;
    char *text = strdup(srv_page_html);
    if (!text) return MHD_NO;
    return wire_send_owned(srv, c, 200, "text/html; charset=utf-8", text, strlen(text));
}

static enum MHD_Result health(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    (void)cc;
    const bool ready = atomic_load(&srv->ready);
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "status", ready ? "ok" : "loading");
    return wire_send_json(srv, c, ready ? 200 : 503, h);
}

/* A route's handler answers a request that passed the route's checks. */
typedef enum MHD_Result (*handler)(server *srv, struct MHD_Connection *c, const conn_ctx *cc);

/* What the wire checks before a handler runs, in this order: the method;
 * unless LOADING, that the model is loaded (else 503); unless NO_KEY, the
 * API key (else 401); with BODY, that the body was not over --max-body
 * (else 413).  Refusals take the shape of the path's API (api_of). */
enum { LOADING = 1, NO_KEY = 2, BODY = 4 };

static const struct route {
    const char *path;
    bool post;      /* else GET (or HEAD) */
    unsigned checks;
    handler fn;
} routes[] = {
    {"/", false, LOADING | NO_KEY, page},
    {"/health", false, LOADING | NO_KEY, health},
    {"/metrics", false, NO_KEY, metrics},
    {"/v1/models", false, 0, openai_models},
    {"/v1/chat/completions", true, BODY, openai_chat_completions},
    {"/v1/completions", true, BODY, openai_completions},
    {"/infill", true, BODY, llama_infill},
    {"/completion", true, BODY, llama_completion},
    {"/completions", true, BODY, llama_completion},
    {"/v1/responses", true, BODY, openai_responses},
    {"/v1/responses/input_tokens", true, BODY, openai_responses_input_tokens},
    {"/v1/messages", true, BODY, anthropic_messages},
    {"/v1/messages/count_tokens", true, BODY, anthropic_count_tokens},
    {"/apply-template", true, BODY, openai_apply_template},
    {"/tokenize", true, BODY, openai_tokenize},
    {"/detokenize", true, BODY, openai_detokenize},
    /* (a GET: BODY only keeps the 413 its index-based route gave a GET
     * announcing a body over --max-body) */
    {"/props", false, BODY, openai_props},
};

/* The path of a request target: an absolute-form target (RFC 9112 3.2.2,
 * "POST http://host/v1/..."), as proxies send, names the same resource as
 * its path. */
static const char *path_of(const char *url) {
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) {
        const char *path = strchr(strstr(url, "://") + 3, '/');
        return path ? path : "/";
    }
    return url;
}

/* The API whose error shape a refusal at this target takes: Anthropic's
 * under /v1/messages (its routes, and paths beside them a client of that
 * API may try), OpenAI's elsewhere. */
static srv_api api_of(const char *url) {
    return strncmp(path_of(url), "/v1/messages", 12) == 0 ? SRV_API_ANTHROPIC : SRV_API_OPENAI;
}

static enum MHD_Result route(server *srv, struct MHD_Connection *c, const char *url, const char *method,
                             const conn_ctx *cc) {
    const bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0, post = strcmp(method, "POST") == 0;
    const srv_api api = api_of(url);
    url = path_of(url);
    const struct route *r = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(url, routes[i].path) == 0) r = &routes[i];
    if (!r)
        return wire_fail_as(srv, c, api, 404, "not_found_error", NULL, "no endpoint at this path (see GET /v1/models)");
    if (r->post ? !post : !get) {
        srv_fail f = {.status = 405, .type = "invalid_request_error", .allow = r->post ? "POST" : "GET, HEAD"};
        snprintf(f.message, sizeof f.message, "%s takes %s", r->path, r->post ? "POST" : "GET");
        return wire_send_error_as(srv, c, api, &f);
    }
    if (!(r->checks & LOADING) && !atomic_load(&srv->ready))
        return wire_fail_as(srv, c, api, 503, "server_busy", NULL, "the model is still loading: try again shortly");
    if (!(r->checks & NO_KEY) && srv->cfg->api_key) {
        /* The scheme's name is case-insensitive (RFC 7235): "bearer KEY" too.
         * Anthropic's clients send the key as x-api-key instead. */
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
        if (auth && strncasecmp(auth, "Bearer ", 7) == 0)
            for (auth += 7; *auth == ' ';) auth++;
        else auth = NULL;
        if (!(auth && key_ok(auth, srv->cfg->api_key)) && !(xkey && key_ok(xkey, srv->cfg->api_key)))
            return wire_fail_as(srv, c, api, 401, "authentication_error", NULL,
                                "a missing or wrong API key: send 'Authorization: Bearer KEY' (or 'x-api-key: KEY') "
                                "with the server's --api-key");
    }
    if ((r->checks & BODY) && cc->too_big)
        return wire_fail_as(srv, c, api, 413, "invalid_request_error", NULL,
                            "the body is larger than the server's %zu bytes (--max-body)", srv->cfg->max_body);
    return r->fn(srv, c, cc);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    server *srv = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) {
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        *con_cls = cc;
        cc->t0 = srv_now();
        cc->api = api_of(url);
        if (!client_in(srv, c, cc)) {
            cc->too_big = true; /* its body, if any, is not kept */
            cc->answered = true;
            return wire_fail_as(srv, c, cc->api, 503, "server_busy", NULL,
                        "this client address already has %d requests being answered (--max-per-client): try again "
                        "when one ends",
                        srv->cfg->max_per_client);
        }
        /* A declared length over the limit is refused before the body is read. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || end == cl || n > srv->cfg->max_body) {
                cc->too_big = true;
                cc->answered = true;
                return wire_fail_as(srv, c, cc->api, 413, "invalid_request_error", NULL,
                            "the body is larger than the server's %zu bytes (--max-body)", srv->cfg->max_body);
            }
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (srv_now() - cc->t0 > srv->cfg->timeout) {
            /* A body trickled in slower than --timeout allows: answered and
             * closed here (libmicrohttpd takes no answer mid-body). */
            const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
            srv_fail f;
            srv_fail_set(&f, 408, "timeout_error", NULL, "the request's body did not arrive within the server's %.0f s (--timeout)",
                         srv->cfg->timeout);
            f.api = cc->api;
            if (ci) srv_send_error_raw(ci->connect_fd, &f);
            log_fail(srv, c, &f);
            wire_count_status(srv, 408);
            cc->answered = true;
            return MHD_NO;
        }
        if (!cc->too_big) {
            if (cc->n + *upload_size > srv->cfg->max_body) {
                cc->too_big = true;
                free(cc->body);
                cc->body = NULL;
                cc->n = cc->cap = 0;
            } else if (!wire_append_text(&cc->body, &cc->n, &cc->cap, upload, *upload_size)) {
                return MHD_NO;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    cc->answered = true;
    cc->routed = true;
    atomic_fetch_add(&srv->n_answering, 1);
    return route(srv, c, url, method, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    server *srv = cls;
    conn_ctx *cc = *con_cls;
    if (cc && t == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED && !cc->answered) {
        /* A body that stopped coming: libmicrohttpd's idle timeout closes
         * the connection without a word, so say it here, as a body that
         * trickles too slowly is told (above). */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        srv_fail f;
        srv_fail_set(&f, 408, "timeout_error", NULL,
                     "the request's body stopped arriving for the server's %.0f s (--timeout)", srv->cfg->timeout);
        f.api = cc->api;
        if (ci) srv_send_error_raw(ci->connect_fd, &f);
        log_fail(srv, c, &f);
        wire_count_status(srv, 408);
    }
    if (cc) {
        if (cc->routed) atomic_fetch_sub(&srv->n_answering, 1);
        client_out(cls, cc);
        free(cc->body);
        free(cc);
        *con_cls = NULL;
    }
}

/* ---- start and stop ---- */

/* URLs are taken as sent: libmicrohttpd's unescaping would turn
 * "/v1/completions%00" into "/v1/completions" (cut at the NUL) and serve it;
 * no endpoint's path has an escape, so an escaped one is simply not found. */
static size_t unescape_none(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls, (void)c;
    return strlen(s);
}

/* The gate hands over a connection whose head is whole. */
static void gate_pass(void *cls, int fd, const struct sockaddr *addr, unsigned len) {
    server *srv = cls;
    /* On failure (its connection limit) libmicrohttpd closes fd itself. */
    if (MHD_add_connection(srv->daemon, fd, addr, (socklen_t)len) != MHD_YES)
        fprintf(stderr, "offkv serve: a connection refused: %s\n", strerror(errno));
}

static void gate_count(void *cls, const srv_fail *f, const struct sockaddr *addr, unsigned addr_len) {
    char client[64];
    addr_name(addr, (socklen_t)addr_len, client, sizeof client);
    log_fail_at(cls, client, f);
    wire_count_status(cls, f->status);
}

bool wire_start(server *srv) {
    const srv_config *cfg = srv->cfg;
    /* libmicrohttpd gets its connections from the gate (gate.c), which
     * accepts them and waits for their heads. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET;
    srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
                                   MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                                   MHD_OPTION_UNESCAPE_CALLBACK, unescape_none, srv,
                                   MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
                                   /* above what the gate lets through (a 16 KiB head of 100
                                    * headers, the body apart): its own refusals are HTML */
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(cfg->timeout + 0.999),
                                   MHD_OPTION_END);
    const srv_gate_config gc = {.listen_fd = srv->listen_fd, .timeout = cfg->timeout,
                                .max_per_client = cfg->max_per_client, .max_waiting = 1024, .max_head = 16384,
                                .max_body = cfg->max_body};
    return srv->daemon && (srv->gate = srv_gate_start(&gc, gate_pass, gate_count, srv)) != NULL;
}
