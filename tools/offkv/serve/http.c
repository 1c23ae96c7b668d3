/* The wire: libmicrohttpd with a thread per connection.  A request's
 * thread reads the body, parses it, tokenizes the prompt, submits a job to
 * the scheduler and then waits on it: for a plain answer until the end, for
 * a stream inside the content reader, which turns each new piece of text
 * into one Server-Sent Event.  Waiting threads wake at least every 50 ms to
 * look at their socket, so a client that goes away frees its sequence even
 * while it waits in the queue. */
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
#include "serve.h"

enum { N_STATUS = 10 };
static const int counted_status[N_STATUS] = {200, 400, 401, 404, 405, 408, 413, 500, 503, 0};

typedef struct server {
    const srv_config *cfg;
    struct MHD_Daemon *daemon;
    okv_model *model;
    srv_sched *sched;
    srv_chat *chat;
    char model_name[256];
    atomic_bool ready;
    atomic_uint_fast64_t next_id;
    atomic_int n_calls;             /* completions being answered */
    pthread_mutex_t mu;             /* the counters below */
    uint64_t by_status[N_STATUS];   /* the last: any other status */
    double t_start;
    srv_gate *gate;
    /* Requests being answered, by client address (under mu): one address
     * gets at most cfg->max_per_client at a time. */
    struct client_count {
        struct sockaddr_storage addr;
        int n;
    } *clients;
    int n_clients, cap_clients;
} server;

/* One HTTP request: its body as it arrives. */
typedef struct conn_ctx {
    char *body;
    size_t n, cap;
    bool too_big;
    double t0;                      /* when its head was read: the body has cfg->timeout from then */
    bool counted;                   /* in srv->clients under addr */
    struct sockaddr_storage addr;
} conn_ctx;

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

static void count_status(server *srv, int status) {
    int i = 0;
    while (counted_status[i] && counted_status[i] != status) i++;
    pthread_mutex_lock(&srv->mu);
    srv->by_status[i]++;
    pthread_mutex_unlock(&srv->mu);
}

/* Restarts the connection's idle clock (libmicrohttpd's timeout counts
 * from the last byte moved, and a long generation moves none): the
 * timeout then measures only the client's own stalls. */
static void touch(server *srv, struct MHD_Connection *c) {
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)(srv->cfg->timeout + 0.999));
}

static enum MHD_Result send_owned(server *srv, struct MHD_Connection *c, int status, const char *type, char *body,
                                  size_t n) {
    struct MHD_Response *r = MHD_create_response_from_buffer(n, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    touch(srv, c);
    MHD_add_response_header(r, "Content-Type", type);
    /* One request per connection: every request's head passes the gate
     * (gate.c), which libmicrohttpd's keep-alive would let a second one skip. */
    MHD_add_response_header(r, "Connection", "close");
    if (status == 503) MHD_add_response_header(r, "Retry-After", "2");
    if (status == 405) {
        MHD_add_response_header(r, "Allow", "GET, POST");
    }
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    count_status(srv, status);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(server *srv, struct MHD_Connection *c, int status, cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!s) return MHD_NO;
    return send_owned(srv, c, status, "application/json", s, strlen(s));
}

static enum MHD_Result send_error(server *srv, struct MHD_Connection *c, const srv_fail *f) {
    char *s = srv_error_json(f);
    if (!s) return MHD_NO;
    return send_owned(srv, c, f->status, "application/json", s, strlen(s));
}

static enum MHD_Result fail(server *srv, struct MHD_Connection *c, int status, const char *type, const char *param,
                            const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static enum MHD_Result fail(server *srv, struct MHD_Connection *c, int status, const char *type, const char *param,
                            const char *fmt, ...) {
    srv_fail f = {.status = status};
    snprintf(f.type, sizeof f.type, "%s", type);
    snprintf(f.param, sizeof f.param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f.message, sizeof f.message, fmt, ap);
    va_end(ap);
    return send_error(srv, c, &f);
}

/* True when the connection broke or is closed both ways.  A client that
 * only shut its sending side (shutdown(SHUT_WR) after the request, as some
 * clients and proxies do) still waits for the answer: its end of file
 * (POLLRDHUP) is not a cancel.  (A fully closed client of a plain answer
 * is then noticed when the answer cannot be written; a stream's next
 * write fails sooner.) */
static bool client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* ---- completions ---- */

/* What one request runs: a job per prompt (chat: one). */
typedef struct call {
    server *srv;
    struct MHD_Connection *conn;
    srv_kind kind;
    bool include_usage;
    char id[48];
    long long created;
    int n;
    srv_job *jobs[SRV_MAX_PROMPTS];
    size_t consumed[SRV_MAX_PROMPTS];
    srv_finish fin[SRV_MAX_PROMPTS];
    char *text[SRV_MAX_PROMPTS];    /* plain answers: the whole text */
    size_t n_text[SRV_MAX_PROMPTS];
    /* streams: bytes ready to go */
    char *out;
    size_t n_out, off, cap;
    bool role_sent[SRV_MAX_PROMPTS], done;
    srv_chat_stream cs; /* chat: the answer's parse (tool calls, reasoning) */
} call;

static void call_free(call *k) {
    for (int i = 0; i < k->n; i++) {
        srv_job_release(k->srv->sched, k->jobs[i]);
        free(k->text[i]);
    }
    free(k->out);
    srv_chat_stream_free(&k->cs);
    atomic_fetch_sub(&k->srv->n_calls, 1);
    free(k);
}

static const char *finish_name(srv_finish f) { return f == SRV_FINISH_LENGTH ? "length" : "stop"; }

static cJSON *usage_json(call *k) {
    int64_t p = 0, g = 0, cached = 0;
    for (int i = 0; i < k->n; i++) {
        srv_job_usage u;
        srv_job_usage_get(k->srv->sched, k->jobs[i], &u);
        p += u.prompt_tokens;
        g += u.completion_tokens;
        cached += u.cached_tokens;
    }
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)p);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)g);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(p + g));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    if (d) cJSON_AddNumberToObject(d, "cached_tokens", (double)cached);
    return u;
}

static cJSON *head_json(call *k, const char *object) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", k->id);
    cJSON_AddStringToObject(r, "object", object);
    cJSON_AddNumberToObject(r, "created", (double)k->created);
    cJSON_AddStringToObject(r, "model", k->srv->model_name);
    cJSON_AddStringToObject(r, "system_fingerprint", "offkv");
    return r;
}

/* The first job that failed, or -1. */
static int failed_job(call *k, char *msg, size_t cap) {
    for (int i = 0; i < k->n; i++)
        if (k->fin[i] == SRV_FINISH_ERROR) {
            srv_job_usage u;
            srv_job_usage_get(k->srv->sched, k->jobs[i], &u);
            snprintf(msg, cap, "generation failed: %s", u.error);
            return i;
        }
    return -1;
}

/* The first job a shutdown cut off (or refused), or -1; *admitted says
 * whether any of the call's jobs had started. */
static int shutdown_job(call *k, int32_t *made, bool *admitted) {
    int first = -1;
    *made = 0;
    *admitted = false;
    for (int i = 0; i < k->n; i++) {
        srv_job_usage u;
        srv_job_usage_get(k->srv->sched, k->jobs[i], &u);
        *admitted |= u.admitted;
        if (k->fin[i] == SRV_FINISH_SHUTDOWN && first < 0) {
            first = i;
            *made = u.completion_tokens;
        }
    }
    return first;
}

static bool append_text(char **buf, size_t *n, size_t *cap, const char *s, size_t len) {
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

/* Waits for every job to end, then answers with the whole text. */
static enum MHD_Result answer_plain(call *k) {
    server *srv = k->srv;
    struct MHD_Connection *conn = k->conn;
    size_t cap[SRV_MAX_PROMPTS] = {0};
    for (;;) {
        bool all = true;
        for (int i = 0; i < k->n; i++) {
            if (k->fin[i] != SRV_RUNNING) continue;
            char *t;
            size_t nt;
            k->fin[i] = srv_job_poll(srv->sched, k->jobs[i], &k->consumed[i], &t, &nt, all ? 50 : 0);
            if (t && !append_text(&k->text[i], &k->n_text[i], &cap[i], t, nt)) {
                free(t);
                call_free(k);
                return fail(srv, conn, 500, "server_error", NULL, "out of memory for the answer");
            }
            free(t);
            if (k->fin[i] == SRV_RUNNING) all = false;
        }
        if (all) break;
        if (client_gone(k->conn)) {
            call_free(k); /* cancels the jobs */
            return MHD_NO;
        }
    }
    char msg[320];
    if (failed_job(k, msg, sizeof msg) >= 0) {
        call_free(k);
        return fail(srv, conn, 500, "server_error", NULL, "%s", msg);
    }
    /* A shutdown: the answer is cut off (or never began), so no 200 that
     * would read as a natural end; the client may retry elsewhere. */
    int32_t made;
    bool admitted;
    if (shutdown_job(k, &made, &admitted) >= 0) {
        call_free(k);
        return fail(srv, conn, 503, "server_shutting_down", NULL,
                    admitted ? "the server is shutting down: the answer was cut off after %d tokens; try again"
                             : "the server is shutting down: the request was not started; try again",
                    (int)made);
    }
    cJSON *r = head_json(k, k->kind == SRV_CHAT ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(r, "choices");
    for (int i = 0; i < k->n; i++) {
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddNumberToObject(ch, "index", i);
        bool called = false;
        if (k->kind == SRV_CHAT) {
            cJSON *m = srv_chat_message(&k->cs, k->text[i] ? k->text[i] : "", &called);
            if (m) cJSON_AddItemToObject(ch, "message", m);
        } else {
            cJSON_AddStringToObject(ch, "text", k->text[i] ? k->text[i] : "");
        }
        cJSON_AddNullToObject(ch, "logprobs");
        cJSON_AddStringToObject(ch, "finish_reason", called ? "tool_calls" : finish_name(k->fin[i]));
        cJSON_AddItemToArray(choices, ch);
    }
    cJSON_AddItemToObject(r, "usage", usage_json(k));
    call_free(k);
    return send_json(srv, conn, 200, r);
}

/* Appends "data: JSON\n\n" to the stream's output. */
static bool sse(call *k, cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) return false;
    bool ok = append_text(&k->out, &k->n_out, &k->cap, "data: ", 6) && append_text(&k->out, &k->n_out, &k->cap, s, strlen(s)) &&
              append_text(&k->out, &k->n_out, &k->cap, "\n\n", 2);
    free(s);
    return ok;
}

/* One chunk: text (may be NULL) and/or the finish of choice i.  A chat
 * answer's text goes through its parse (srv_chat_stream_feed): a piece
 * that adds nothing yet (the start of a tool call's markup) sends no chunk. */
static bool chunk(call *k, int i, const char *text, size_t n_text, srv_finish fin) {
    cJSON *r = head_json(k, k->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(r, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", i);
    if (k->kind == SRV_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(ch, "delta");
        bool any = false;
        if (!srv_chat_stream_feed(&k->cs, text ? text : "", text ? n_text : 0, fin != SRV_RUNNING, d, &any)) {
            cJSON_Delete(ch);
            cJSON_Delete(r);
            return false;
        }
        if (!any && fin == SRV_RUNNING && k->role_sent[i]) {
            cJSON_Delete(ch);
            cJSON_Delete(r);
            return true;
        }
        if (!k->role_sent[i]) {
            cJSON_AddStringToObject(d, "role", "assistant");
            k->role_sent[i] = true;
        }
    } else {
        cJSON_AddStringToObject(ch, "text", text ? text : "");
    }
    cJSON_AddNullToObject(ch, "logprobs");
    if (fin == SRV_RUNNING) cJSON_AddNullToObject(ch, "finish_reason");
    else
        cJSON_AddStringToObject(ch, "finish_reason",
                                k->kind == SRV_CHAT && srv_chat_stream_called(&k->cs) ? "tool_calls" : finish_name(fin));
    cJSON_AddItemToArray(choices, ch);
    if (k->include_usage) cJSON_AddNullToObject(r, "usage");
    return sse(k, r);
}

/* Fills the stream's output with what the jobs have made; waits up to
 * 50 ms when they have made nothing.  False when the stream must stop
 * (out of memory). */
static bool produce(call *k) {
    bool any = false, all = true;
    for (int i = 0; i < k->n; i++) {
        if (k->fin[i] != SRV_RUNNING) continue;
        char *t;
        size_t nt;
        k->fin[i] = srv_job_poll(k->srv->sched, k->jobs[i], &k->consumed[i], &t, &nt, 0);
        if (t) {
            any = true;
            bool ok = chunk(k, i, t, nt, SRV_RUNNING);
            free(t);
            if (!ok) return false;
        }
        if (k->fin[i] != SRV_RUNNING) {
            any = true;
            if (k->fin[i] != SRV_FINISH_ERROR && k->fin[i] != SRV_FINISH_SHUTDOWN && !chunk(k, i, NULL, 0, k->fin[i]))
                return false;
        } else {
            all = false;
        }
    }
    if (all) {
        char msg[320];
        int32_t made;
        bool admitted;
        const bool failed = failed_job(k, msg, sizeof msg) >= 0;
        const bool cut = !failed && shutdown_job(k, &made, &admitted) >= 0;
        if (failed || cut) {
            /* An error event instead of a finish_reason: a stream cut off by
             * a shutdown must not read as one that ended. */
            srv_fail f;
            if (failed) srv_fail_set(&f, 500, "server_error", NULL, "%s", msg);
            else
                srv_fail_set(&f, 503, "server_shutting_down", NULL,
                             "the server is shutting down: the answer was cut off after %d tokens", (int)made);
            char *e = srv_error_json(&f);
            bool ok = e && append_text(&k->out, &k->n_out, &k->cap, "data: ", 6) &&
                      append_text(&k->out, &k->n_out, &k->cap, e, strlen(e)) &&
                      append_text(&k->out, &k->n_out, &k->cap, "\n\n", 2);
            free(e);
            if (!ok) return false;
        } else if (k->include_usage) {
            cJSON *r = head_json(k, k->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(r, "choices");
            cJSON_AddItemToObject(r, "usage", usage_json(k));
            if (!sse(k, r)) return false;
        }
        if (!append_text(&k->out, &k->n_out, &k->cap, "data: [DONE]\n\n", 14)) return false;
        k->done = true;
        return true;
    }
    if (!any) {
        /* Nothing new: sleep on the first running job until it makes something. */
        for (int i = 0; i < k->n; i++)
            if (k->fin[i] == SRV_RUNNING) {
                char *t;
                size_t nt;
                size_t before = k->consumed[i];
                srv_finish f = srv_job_poll(k->srv->sched, k->jobs[i], &before, &t, &nt, 50);
                (void)f;
                free(t); /* not consumed: the next produce() reads it again */
                break;
            }
    }
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    call *k = cls;
    while (k->off == k->n_out) {
        if (k->done) return MHD_CONTENT_READER_END_OF_STREAM;
        k->off = k->n_out = 0;
        if (!produce(k)) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (k->off == k->n_out && client_gone(k->conn)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = k->n_out - k->off;
    if (n > max) n = max;
    touch(k->srv, k->conn);
    memcpy(buf, k->out + k->off, n);
    k->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) { call_free(cls); }

static enum MHD_Result answer_stream(call *k) {
    /* The status line waits until every job has a sequence: a request still
     * queued when the server shuts down gets a 503 it can retry, not a
     * 200 stream that ends at once. */
    for (int i = 0; i < k->n; i++)
        while (!srv_job_wait_admitted(k->srv->sched, k->jobs[i], 50))
            if (client_gone(k->conn)) {
                call_free(k);
                return MHD_NO;
            }
    int32_t made;
    bool admitted;
    for (int i = 0; i < k->n; i++) {
        char *t;
        size_t nt;
        size_t at = 0;
        const srv_finish f = srv_job_poll(k->srv->sched, k->jobs[i], &at, &t, &nt, 0);
        free(t);
        k->fin[i] = f == SRV_FINISH_SHUTDOWN ? f : SRV_RUNNING;
    }
    if (shutdown_job(k, &made, &admitted) >= 0 && !admitted) {
        server *srv = k->srv;
        struct MHD_Connection *c = k->conn;
        call_free(k);
        return fail(srv, c, 503, "server_shutting_down", NULL,
                    "the server is shutting down: the request was not started; try again");
    }
    for (int i = 0; i < k->n; i++) k->fin[i] = SRV_RUNNING;
    touch(k->srv, k->conn);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, k, stream_free);
    if (!r) {
        server *srv = k->srv;
        struct MHD_Connection *c = k->conn;
        call_free(k);
        return fail(srv, c, 500, "server_error", NULL, "cannot create the stream");
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Connection", "close");
    count_status(k->srv, 200);
    enum MHD_Result ret = MHD_queue_response(k->conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* Tokenizes text for a job, once, into at most cap ids (the context):
 * chat text parses the template's control tokens.  A text that needs more
 * is given up as soon as that is certain (its cost is bounded by cap, not
 * by its size): NULL with *n above cap.  NULL with *n 0 when it cannot be
 * tokenized. */
static int32_t *tokenize(server *srv, const char *text, bool special, size_t cap, size_t *n) {
    const okv_tokenizer *tok = okv_model_tokenizer(srv->model);
    unsigned flags = OKV_TOKENIZE_ADD_SPECIAL | (special ? OKV_TOKENIZE_PARSE_SPECIAL : 0u);
    okv_error err = {0};
    *n = 0;
    int32_t *ids = malloc((cap ? cap : 1) * sizeof *ids);
    if (ids && okv_tokenizer_encode_max(tok, text, strlen(text), flags, ids, cap, n, &err) != OKV_OK) {
        free(ids);
        ids = NULL;
        if (*n <= cap) *n = 0;
    }
    return ids;
}

static enum MHD_Result completions(server *srv, struct MHD_Connection *c, srv_kind kind, const conn_ctx *cc) {
    srv_request req;
    srv_fail f;
    if (!srv_request_parse(kind, cc->body ? cc->body : "", cc->n, &req, &f)) return send_error(srv, c, &f);
    call *k = calloc(1, sizeof *k);
    if (!k) {
        srv_request_clear(&req);
        return fail(srv, c, 500, "server_error", NULL, "out of memory");
    }
    atomic_fetch_add(&srv->n_calls, 1);
    k->srv = srv;
    k->conn = c;
    k->kind = kind;
    k->include_usage = req.stream && req.include_usage;
    k->created = (long long)time(NULL);
    const uint64_t id = atomic_fetch_add(&srv->next_id, 1);
    snprintf(k->id, sizeof k->id, "%s-%" PRIx64 "%06" PRIx64, kind == SRV_CHAT ? "chatcmpl" : "cmpl",
             (uint64_t)k->created, id);
    const int n_texts = kind == SRV_CHAT ? 1 : req.n_prompts;
    const char *param = kind == SRV_CHAT ? "messages" : "prompt";
    int status = 0;
    for (int i = 0; i < n_texts && !status; i++) {
        char *rendered = NULL;
        const char *text;
        if (kind == SRV_CHAT) {
            srv_fail rf;
            if (!(rendered = srv_chat_render(srv->chat, &req, true, &rf))) {
                status = send_error(srv, c, &rf) == MHD_YES ? 1 : -1;
                break;
            }
            okv_chat_syntax syn = srv_chat_syntax(srv->chat, rendered);
            srv_chat_stream_init(&k->cs, &syn, &req, (uint64_t)k->created * 0x9e3779b97f4a7c15ull ^ atomic_load(&srv->next_id));
            text = srv_chat_model_text(srv->chat, rendered);
        } else {
            text = req.prompts[i];
        }
        size_t n = 0;
        const int32_t cap = srv_sched_capacity(srv->sched);
        int32_t *ids = tokenize(srv, text, kind == SRV_CHAT, (size_t)cap, &n);
        free(rendered);
        if (!ids && n > (size_t)cap)
            status = fail(srv, c, 400, "invalid_request_error", param,
                          "the prompt has more than %d tokens (at least %zu), more than the context's %d positions (-c)",
                          (int)cap, n, (int)cap) == MHD_YES ? 1 : -1;
        else if (!ids) status = fail(srv, c, 500, "server_error", NULL, "cannot tokenize the prompt") == MHD_YES ? 1 : -1;
        else if (n == 0)
            status = fail(srv, c, 400, "invalid_request_error", param,
                          "the prompt is empty and the vocabulary adds no BOS: nothing to evaluate") == MHD_YES ? 1 : -1;
        if (status) {
            free(ids);
            break;
        }
        static atomic_uint_fast64_t seed_counter;
        srv_job_params p = {
            .prompt = ids,
            .n_prompt = (int32_t)n,
            .max_tokens = req.max_tokens,
            .sampling = {.temperature = req.temperature, .top_k = req.top_k, .top_p = req.top_p,
                         .seed = req.has_seed ? req.seed + (uint64_t)i
                                              : (uint64_t)time(NULL) * 6364136223846793005ull +
                                                    atomic_fetch_add(&seed_counter, 1)},
            .stops = req.stops,
            .n_stops = req.n_stops,
            .ignore_eos = req.ignore_eos,
            .special = kind == SRV_CHAT && srv_chat_needs_special(&k->cs),
            /* The hook for constrained tool calls (the grammar's part of
             * issue 17): with req.tool_choice REQUIRED or NAMED, a grammar
             * of the call format (okv_chat_tool_call_opener(k->cs.syn.format))
             * with req.tools_json's schemas as arguments goes here, forced
             * from the first token; with AUTO, lazily from the opener on. */
        };
        bool busy = false;
        k->jobs[i] = srv_submit(srv->sched, &p, &busy);
        free(ids);
        if (!k->jobs[i]) {
            status = (busy ? fail(srv, c, 503, "server_busy", NULL,
                                  "every sequence is busy and the queue is full: try again later")
                           : fail(srv, c, 500, "server_error", NULL, "out of memory for the request")) == MHD_YES
                         ? 1
                         : -1;
            break;
        }
        k->n = i + 1;
    }
    const bool stream = req.stream;
    srv_request_clear(&req);
    if (status) {
        call_free(k);
        return status > 0 ? MHD_YES : MHD_NO;
    }
    return stream ? answer_stream(k) : answer_plain(k);
}

/* ---- the other endpoints ---- */

/* POST /apply-template (llama.cpp's): {messages, tools?, add_generation_prompt?,
 * chat_template_kwargs?} -> {"prompt": the text the template renders}. */
static enum MHD_Result apply_template(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    srv_request req;
    srv_fail f;
    if (!srv_request_parse(SRV_CHAT, cc->body ? cc->body : "", cc->n, &req, &f)) return send_error(srv, c, &f);
    char *text = srv_chat_render(srv->chat, &req, false, &f);
    srv_request_clear(&req);
    if (!text) return send_error(srv, c, &f);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "prompt", text);
    free(text);
    return send_json(srv, c, 200, r);
}

static enum MHD_Result models(server *srv, struct MHD_Connection *c) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(r, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", srv->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)(long long)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "offkv");
    cJSON_AddItemToArray(data, m);
    return send_json(srv, c, 200, r);
}

static enum MHD_Result metrics(server *srv, struct MHD_Connection *c) {
    srv_sched_stats st;
    srv_sched_stats_get(srv->sched, &st);
    uint64_t by[N_STATUS];
    pthread_mutex_lock(&srv->mu);
    memcpy(by, srv->by_status, sizeof by);
    pthread_mutex_unlock(&srv->mu);
    char *b = NULL;
    size_t n = 0, cap = 0;
    char line[256];
#define OUT(...)                                                      \
    do {                                                              \
        int k_ = snprintf(line, sizeof line, __VA_ARGS__);            \
        if (!append_text(&b, &n, &cap, line, (size_t)k_)) goto nomem; \
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
    OUT("# HELP offkv_sequences_max Sequences (--parallel).\n# TYPE offkv_sequences_max gauge\n");
    OUT("offkv_sequences_max %d\n", (int)st.n_parallel);
    OUT("# HELP offkv_cache_bytes K/V cache storage held, by layer kind.\n# TYPE offkv_cache_bytes gauge\n");
    OUT("offkv_cache_bytes{kind=\"flat\"} %zu\n", st.cache_flat_bytes);
    OUT("offkv_cache_bytes{kind=\"ring\"} %zu\n", st.cache_ring_bytes);
#undef OUT
    return send_owned(srv, c, 200, "text/plain; version=0.0.4", b, n);
nomem:
    free(b);
    return fail(srv, c, 500, "server_error", NULL, "out of memory for the metrics");
}

/* Compares without stopping at the first difference, so the time an answer
 * takes says nothing about how much of the key was right. */
static bool key_ok(const char *got, const char *want) {
    const size_t ng = strlen(got), nw = strlen(want);
    unsigned char d = ng != nw;
    for (size_t i = 0; i < nw; i++) d |= (unsigned char)(want[i] ^ (i < ng ? got[i] : 0));
    return d == 0;
}

static enum MHD_Result route(server *srv, struct MHD_Connection *c, const char *url, const char *method,
                             const conn_ctx *cc) {
    const bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0, post = strcmp(method, "POST") == 0;
    static const struct {
        const char *path;
        bool post;
    } routes[] = {{"/", false},        {"/health", false},          {"/metrics", false},
                  {"/v1/models", false}, {"/v1/chat/completions", true}, {"/v1/completions", true},
                  {"/apply-template", true}};
    /* An absolute-form target (RFC 9112 3.2.2, "POST http://host/v1/..."),
     * as proxies send, names the same resource as its path. */
    if (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) {
        const char *path = strchr(strstr(url, "://") + 3, '/');
        url = path ? path : "/";
    }
    int r = -1;
    for (int i = 0; i < (int)(sizeof routes / sizeof routes[0]); i++)
        if (strcmp(url, routes[i].path) == 0) r = i;
    if (r < 0) return fail(srv, c, 404, "not_found_error", NULL, "no endpoint at this path (see GET /v1/models)");
    if (routes[r].post ? !post : !get)
        return fail(srv, c, 405, "invalid_request_error", NULL, "%s takes %s", routes[r].path,
                    routes[r].post ? "POST" : "GET");
    if (r == 1) {
        cJSON *h = cJSON_CreateObject();
        cJSON_AddStringToObject(h, "status", atomic_load(&srv->ready) ? "ok" : "loading");
        return send_json(srv, c, atomic_load(&srv->ready) ? 200 : 503, h);
    }
    if (r == 0) {
        char *page = strdup(srv_page_html);
        if (!page) return MHD_NO;
        return send_owned(srv, c, 200, "text/html; charset=utf-8", page, strlen(page));
    }
    if (!atomic_load(&srv->ready))
        return fail(srv, c, 503, "server_busy", NULL, "the model is still loading: try again shortly");
    if (r == 2) return metrics(srv, c);
    if (srv->cfg->api_key) {
        /* The scheme's name is case-insensitive (RFC 7235): "bearer KEY" too. */
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        if (auth && strncasecmp(auth, "Bearer ", 7) == 0)
            for (auth += 7; *auth == ' ';) auth++;
        else auth = NULL;
        if (!auth || !key_ok(auth, srv->cfg->api_key))
            return fail(srv, c, 401, "authentication_error", NULL,
                        "a missing or wrong API key: send 'Authorization: Bearer KEY' with the server's --api-key");
    }
    if (r == 3) return models(srv, c);
    if (cc->too_big)
        return fail(srv, c, 413, "invalid_request_error", NULL, "the body is larger than the server's %zu bytes (--max-body)",
                    srv->cfg->max_body);
    if (r == 6) return apply_template(srv, c, cc);
    return completions(srv, c, r == 4 ? SRV_CHAT : SRV_COMPLETION, cc);
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
        if (!client_in(srv, c, cc)) {
            cc->too_big = true; /* its body, if any, is not kept */
            return fail(srv, c, 503, "server_busy", NULL,
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
                return fail(srv, c, 413, "invalid_request_error", NULL,
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
            if (ci) srv_send_error_raw(ci->connect_fd, &f);
            count_status(srv, 408);
            return MHD_NO;
        }
        if (!cc->too_big) {
            if (cc->n + *upload_size > srv->cfg->max_body) {
                cc->too_big = true;
                free(cc->body);
                cc->body = NULL;
                cc->n = cc->cap = 0;
            } else if (!append_text(&cc->body, &cc->n, &cc->cap, upload, *upload_size)) {
                return MHD_NO;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return route(srv, c, url, method, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    (void)c, (void)t;
    conn_ctx *cc = *con_cls;
    if (cc) {
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

static void gate_count(void *cls, int status) { count_status(cls, status); }

/* The listening socket, made here so that the gate accepts on it. */
static int listen_on(const struct addrinfo *ai, int *port) {
    const int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_storage got;
    socklen_t len = sizeof got;
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 512) != 0 ||
        getsockname(fd, (struct sockaddr *)&got, &len) != 0) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                            : ((struct sockaddr_in *)&got)->sin_port);
    return fd;
}

/* The model's name in answers: its file name without folders. */
static void set_model_name(server *srv, const char *path) {
    const char *b = strrchr(path, '/');
    snprintf(srv->model_name, sizeof srv->model_name, "%s", b ? b + 1 : path);
}

/* The template (--chat-template-file, --chat-template, the file's
 * tokenizer.chat_template, else ChatML), parsed before the model loads:
 * false after saying why (a syntax error names its line and column). */
static bool choose_template(server *srv) {
    char err[512];
    srv->chat = srv_chat_load(srv->cfg->model_path, NULL, srv->cfg->chat_template, srv->cfg->chat_template_file, err,
                              sizeof err);
    if (!srv->chat) fprintf(stderr, "offkv serve: error: %s\n", err);
    return srv->chat != NULL;
}

int srv_run(const srv_config *cfg) {
    /* Signals are taken by sigwait below: block them before any thread
     * starts, so that every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A thread per connection would otherwise give glibc's malloc up to
     * 8 arenas per core, each keeping the memory its threads freed: the
     * server's footprint would creep up with every new connection thread
     * for a long while.  Two arenas are plenty: the requests' allocations
     * are small and brief, and the decode loop allocates nothing per step. */
    mallopt(M_ARENA_MAX, 2);

    server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        fprintf(stderr, "offkv serve: error: out of memory\n");
        return 1;
    }
    srv->cfg = cfg;
    srv->t_start = srv_now();
    pthread_mutex_init(&srv->mu, NULL);
    set_model_name(srv, cfg->model_path);
    int rc = 1, listen_fd = -1;

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, port_s, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "offkv serve: error: bad --host '%s': %s (give a numeric address such as 127.0.0.1)\n",
                cfg->host, gai_strerror(gai));
        goto done;
    }
    int port = cfg->port;
    listen_fd = listen_on(ai, &port);
    freeaddrinfo(ai);
    if (listen_fd < 0) {
        fprintf(stderr, "offkv serve: error: cannot listen on %s:%d: %s\n", cfg->host, cfg->port, strerror(errno));
        goto done;
    }
    /* libmicrohttpd gets its connections from the gate (gate.c), which
     * accepts them and waits for their heads. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET;
    srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
                                   MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                                   MHD_OPTION_UNESCAPE_CALLBACK, unescape_none, srv,
                                   MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(cfg->timeout + 0.999),
                                   MHD_OPTION_END);
    const srv_gate_config gc = {.listen_fd = listen_fd, .timeout = cfg->timeout, .max_per_client = cfg->max_per_client,
                                .max_waiting = 1024, .max_head = 16384, .max_body = cfg->max_body};
    if (!srv->daemon || !(srv->gate = srv_gate_start(&gc, gate_pass, gate_count, srv))) {
        fprintf(stderr, "offkv serve: error: cannot start the HTTP server on %s:%d: %s\n", cfg->host, port,
                strerror(errno));
        goto done;
    }

    /* /health says 503 while this runs. */
    okv_error err = {0};
    if (!choose_template(srv)) goto done;
    if (!(srv->model = okv_model_load(cfg->model_path, cfg->model_options, &err))) {
        fprintf(stderr, "offkv serve: error: cannot load %s: %s\n", cfg->model_path, err.message);
        goto done;
    }
    if (!(srv->sched = srv_sched_create(srv->model, &cfg->sched, &err))) {
        fprintf(stderr, "offkv serve: error: %s\n", err.message);
        goto done;
    }
    srv_chat_use_tokenizer(srv->chat, okv_model_tokenizer(srv->model));
    fprintf(stderr, "offkv serve: %s\n", okv_model_describe(srv->model));
    fprintf(stderr, "offkv serve: %d sequences of %d positions, chat template %s, %s KV, %d threads\n",
            (int)cfg->sched.n_parallel, (int)srv_sched_capacity(srv->sched), srv_chat_describe(srv->chat),
            cfg->sched.kv_type, (int)cfg->sched.n_threads);
    atomic_store(&srv->ready, true);
    const bool v6 = strchr(cfg->host, ':') != NULL;
    printf("listening on http://%s%s%s:%d\n", v6 ? "[" : "", cfg->host, v6 ? "]" : "", port);
    fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "offkv serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
done:
    /* Stop accepting (connections still waiting for their heads are
     * closed), end every request (queued ones get a 503, running streams an
     * error event and [DONE]), then wait for the connections' threads. */
    srv_gate_stop(srv->gate);
    if (listen_fd >= 0) close(listen_fd);
    if (srv->daemon) {
        if (srv->sched) srv_sched_stop(srv->sched);
        /* Closing the connections now would cut the streams short of their
         * last chunk: let the answers go out first (each ends within a
         * poll interval once its job has ended), for at most 10 s. */
        for (int i = 0; i < 1000 && atomic_load(&srv->n_calls) > 0; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        MHD_stop_daemon(srv->daemon);
    }
    srv_sched_free(srv->sched);
    okv_model_free(srv->model);
    srv_chat_free(srv->chat);
    pthread_mutex_destroy(&srv->mu);
    free(srv->clients);
    free(srv);
    if (rc == 0) fprintf(stderr, "offkv serve: stopped\n");
    return rc;
}
