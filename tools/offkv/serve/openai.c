/* OpenAI's API over the wire: a request's thread parses the body,
 * tokenizes the prompt, submits a job to the scheduler and then waits on
 * it: for a plain answer until the end, for a stream inside the content
 * reader, which turns each new piece of text into one Server-Sent Event.
 * Waiting threads wake at least every 50 ms to look at their socket, so a
 * client that goes away frees its sequence even while it waits in the
 * queue. */
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

/* ---- completions ---- */

/* What one request runs: a job per prompt (chat: one). */
typedef struct call {
    server *srv;
    struct MHD_Connection *conn;
    srv_kind kind;
    bool include_usage;
    bool return_progress;           /* streams: prompt_progress chunks (llama.cpp's extension) */
    char id[48];
    long long created;
    int n;
    int per_prompt;                 /* n: the choices of each prompt, jobs[i * per_prompt ..] */
    srv_job *jobs[SRV_MAX_PROMPTS];
    size_t consumed[SRV_MAX_PROMPTS];
    srv_finish fin[SRV_MAX_PROMPTS];
    char *text[SRV_MAX_PROMPTS];    /* plain answers: the whole text */
    size_t n_text[SRV_MAX_PROMPTS];
    /* streams: bytes ready to go */
    char *out;
    size_t n_out, off, cap;
    bool role_sent[SRV_MAX_PROMPTS], done;
    bool probed;                    /* wire_client_gone's one probe, before the answer */
    int32_t top_logprobs;           /* -1: no logprobs */
    size_t lp_consumed[SRV_MAX_PROMPTS], lp_offset[SRV_MAX_PROMPTS];
    srv_chat_stream cs[SRV_MAX_PROMPTS]; /* chat: each choice's answer's parse (tool calls, reasoning) */
    uint32_t progress_seen[SRV_MAX_PROMPTS];
    char client[64];                /* the peer's address, for the log */
} call;

static void call_free(call *k) {
    for (int i = 0; i < k->n; i++) {
        srv_job_release(k->srv->sched, k->jobs[i]);
        free(k->text[i]);
    }
    free(k->out);
    for (int i = 0; i < SRV_MAX_PROMPTS; i++) srv_chat_stream_free(&k->cs[i]);
    free(k);
}

/* The call's line in the server's log once its answer went out (or the
 * client left): how, then what was read and made for all its choices
 * (each prompt counted once, as in usage), how the choices ended, and the
 * times since it was submitted: its first token and its end, with the
 * generation's rate between them. */
static void log_call(call *k, const char *how) {
    int64_t p = 0, cached = 0, g = 0;
    double first = -1, done = 0;
    int ends[5] = {0}; /* running (left), stop, length, error, shutdown: srv_finish's order */
    for (int i = 0; i < k->n; i++) {
        srv_job_usage u;
        srv_job_usage_get(k->srv->sched, k->jobs[i], &u);
        if (i % k->per_prompt == 0) {
            p += u.prompt_tokens;
            cached += u.cached_tokens;
        }
        g += u.completion_tokens;
        if (u.completion_tokens > 0 && (first < 0 || u.t_first < first)) first = u.t_first;
        if (u.t_done > done) done = u.t_done;
        ends[k->fin[i] >= SRV_RUNNING && k->fin[i] <= SRV_FINISH_SHUTDOWN ? k->fin[i] : 0]++;
    }
    static const char *const end_names[5] = {"cancelled", "stop", "length", "error", "shutdown"};
    char how_ended[96] = "";
    for (int e = 0, at = 0; e < 5; e++)
        if (ends[e] && at < (int)sizeof how_ended)
            at += k->n > 1 ? snprintf(how_ended + at, sizeof how_ended - (size_t)at, "%s%s x%d", at ? ", " : "",
                                      end_names[e], ends[e])
                           : snprintf(how_ended + at, sizeof how_ended - (size_t)at, "%s", end_names[e]);
    char times[96] = "";
    if (first >= 0 && done > first)
        snprintf(times, sizeof times, "; first token %.3f s, done %.3f s (%.1f t/s)", first, done,
                 (double)(g - (k->n < g ? k->n : g)) / (done - first));
    else if (done > 0) snprintf(times, sizeof times, "; done %.3f s", done);
    wire_log(k->srv, k->client, "%s %s: %d choice%s, prompt %lld tokens (%lld cached), %lld generated, %s%s", how,
             k->kind == SRV_CHAT ? "chat" : "completion", k->n, k->n == 1 ? "" : "s", (long long)p,
             (long long)cached, (long long)g, how_ended, times);
}

/* OpenAI's finish_reason: a cut answer is "length" even inside a call
 * (whose arguments are then incomplete), else "tool_calls" when it called. */
static const char *finish_name(srv_finish f, bool called) {
    return f == SRV_FINISH_LENGTH ? "length" : called ? "tool_calls" : "stop";
}

/* OpenAI's usage: each prompt counted once however many choices (n) it
 * has, as OpenAI bills it; the completions of every choice. */
static cJSON *usage_json(call *k) {
    int64_t p = 0, g = 0, cached = 0;
    for (int i = 0; i < k->n; i++) {
        srv_job_usage u;
        srv_job_usage_get(k->srv->sched, k->jobs[i], &u);
        if (i % k->per_prompt == 0) {
            p += u.prompt_tokens;
            cached += u.cached_tokens;
        }
        g += u.completion_tokens;
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

/* Choice i's logprobs made since the last call (JSON null when not asked). */
static cJSON *choice_logprobs(call *k, int i) {
    if (k->top_logprobs < 0) return cJSON_CreateNull();
    srv_logprob *lp = NULL;
    const size_t n = srv_job_logprobs(k->srv->sched, k->jobs[i], k->consumed[i], &k->lp_consumed[i], &lp);
    cJSON *j = srv_logprobs_json(okv_model_tokenizer(k->srv->model), k->kind, lp, n, &k->lp_offset[i]);
    free(lp);
    return j ? j : cJSON_CreateNull();
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
            if (t && !wire_append_text(&k->text[i], &k->n_text[i], &cap[i], t, nt)) {
                free(t);
                call_free(k);
                return wire_fail(srv, conn, 500, "server_error", NULL, "out of memory for the answer");
            }
            free(t);
            if (k->fin[i] == SRV_RUNNING) all = false;
        }
        if (all) break;
        if (wire_client_gone(k->conn, &k->probed)) {
            log_call(k, "-");
            call_free(k); /* cancels the jobs */
            return MHD_NO;
        }
    }
    char msg[320];
    if (failed_job(k, msg, sizeof msg) >= 0) {
        call_free(k);
        return wire_fail(srv, conn, 500, "server_error", NULL, "%s", msg);
    }
    /* A shutdown: the answer is cut off (or never began), so no 200 that
     * would read as a natural end; the client may retry elsewhere. */
    int32_t made;
    bool admitted;
    if (shutdown_job(k, &made, &admitted) >= 0) {
        call_free(k);
        return wire_fail(srv, conn, 503, "server_shutting_down", NULL,
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
            cJSON *m = srv_chat_message(&k->cs[i], k->text[i] ? k->text[i] : "", &called);
            if (m) cJSON_AddItemToObject(ch, "message", m);
        } else {
            cJSON_AddStringToObject(ch, "text", k->text[i] ? k->text[i] : "");
        }
        cJSON_AddItemToObject(ch, "logprobs", choice_logprobs(k, i));
        cJSON_AddStringToObject(ch, "finish_reason", finish_name(k->fin[i], called));
        cJSON_AddItemToArray(choices, ch);
    }
    cJSON_AddItemToObject(r, "usage", usage_json(k));
    log_call(k, "200");
    call_free(k);
    return wire_send_json(srv, conn, 200, r);
}

/* Appends "data: JSON\n\n" to the stream's output. */
static bool sse(call *k, cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) return false;
    bool ok = wire_append_text(&k->out, &k->n_out, &k->cap, "data: ", 6) && wire_append_text(&k->out, &k->n_out, &k->cap, s, strlen(s)) &&
              wire_append_text(&k->out, &k->n_out, &k->cap, "\n\n", 2);
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
        if (!srv_chat_stream_feed(&k->cs[i], text ? text : "", text ? n_text : 0, fin != SRV_RUNNING, d, &any)) {
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
    cJSON_AddItemToObject(ch, "logprobs", choice_logprobs(k, i));
    if (fin == SRV_RUNNING) cJSON_AddNullToObject(ch, "finish_reason");
    else
        cJSON_AddStringToObject(ch, "finish_reason",
                                finish_name(fin, k->kind == SRV_CHAT && srv_chat_stream_called(&k->cs[i])));
    cJSON_AddItemToArray(choices, ch);
    if (k->include_usage) cJSON_AddNullToObject(r, "usage");
    return sse(k, r);
}

/* A chunk of no choice that says how far prompt i's reading has got, as
 * llama.cpp's server sends it when a stream asks (return_progress):
 * {"prompt_progress": {total, cache, processed, time_ms}}, with the index
 * of the prompt's first choice.  Sent for the prompt's first job only: its
 * other choices (n) fork from its cache. */
static bool progress_chunk(call *k, int i) {
    srv_job_progress p;
    if (!k->return_progress || i % k->per_prompt != 0 ||
        !srv_job_progress_get(k->srv->sched, k->jobs[i], &k->progress_seen[i], &p))
        return true;
    cJSON *r = head_json(k, k->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(r, "choices");
    cJSON *o = cJSON_AddObjectToObject(r, "prompt_progress");
    if (!o) {
        cJSON_Delete(r);
        return false;
    }
    cJSON_AddNumberToObject(o, "index", i);
    cJSON_AddNumberToObject(o, "total", p.total);
    cJSON_AddNumberToObject(o, "cache", p.cache);
    cJSON_AddNumberToObject(o, "processed", p.processed);
    cJSON_AddNumberToObject(o, "time_ms", (double)(int64_t)(p.time_ms + 0.5));
    if (k->include_usage) cJSON_AddNullToObject(r, "usage");
    return sse(k, r);
}

/* Fills the stream's output with what the jobs have made; waits up to
 * 50 ms when they have made nothing.  False when the stream must stop
 * (out of memory). */
static bool produce(call *k) {
    bool any = false, all = true;
    /* The text first, then the progress: the worker moves a prompt's
     * progress before it adds the text that step made, so progress looked
     * at after the text is at least that new, and its last report goes out
     * before the prompt's first token (its forks' too). */
    char *t[SRV_MAX_PROMPTS] = {0};
    size_t nt[SRV_MAX_PROMPTS] = {0};
    bool was_running[SRV_MAX_PROMPTS];
    for (int i = 0; i < k->n; i++)
        if ((was_running[i] = k->fin[i] == SRV_RUNNING))
            k->fin[i] = srv_job_poll(k->srv->sched, k->jobs[i], &k->consumed[i], &t[i], &nt[i], 0);
    bool good = true;
    for (int i = 0; i < k->n && good; i++) {
        const size_t out_before = k->n_out;
        good = !was_running[i] || progress_chunk(k, i);
        any |= k->n_out != out_before;
    }
    for (int i = 0; i < k->n; i++) {
        if (t[i] && good) {
            any = true;
            good = chunk(k, i, t[i], nt[i], SRV_RUNNING);
        }
        free(t[i]);
    }
    if (!good) return false;
    for (int i = 0; i < k->n; i++) {
        if (!was_running[i]) continue;
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
            bool ok = e && wire_append_text(&k->out, &k->n_out, &k->cap, "data: ", 6) &&
                      wire_append_text(&k->out, &k->n_out, &k->cap, e, strlen(e)) &&
                      wire_append_text(&k->out, &k->n_out, &k->cap, "\n\n", 2);
            free(e);
            if (!ok) return false;
        } else if (k->include_usage) {
            cJSON *r = head_json(k, k->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(r, "choices");
            cJSON_AddItemToObject(r, "usage", usage_json(k));
            if (!sse(k, r)) return false;
        }
        if (!wire_append_text(&k->out, &k->n_out, &k->cap, "data: [DONE]\n\n", 14)) return false;
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
        if (k->off == k->n_out && wire_client_gone(k->conn, NULL)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = k->n_out - k->off;
    if (n > max) n = max;
    wire_touch(k->srv, k->conn);
    memcpy(buf, k->out + k->off, n);
    k->off += n;
    return (ssize_t)n;
}

/* The stream's end: all of it sent, or the client gone (cancelling what runs). */
static void stream_free(void *cls) {
    call *k = cls;
    log_call(k, k->done ? "200 stream" : "200 stream (cut: the client went away)");
    call_free(k);
}

static enum MHD_Result answer_stream(call *k) {
    /* The status line waits until the first job has a sequence: a request
     * still queued when the server shuts down gets a 503 it can retry, not
     * a 200 stream that ends at once.  Not for every job: with n above
     * --parallel the later choices wait for the first ones to end, and a
     * stream silent that long is cut by proxies and client timeouts (a
     * shutdown then ends it with an error event, as a running one). */
    while (!srv_job_wait_admitted(k->srv->sched, k->jobs[0], 50))
        if (wire_client_gone(k->conn, &k->probed)) {
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
        return wire_fail(srv, c, 503, "server_shutting_down", NULL,
                    "the server is shutting down: the request was not started; try again");
    }
    for (int i = 0; i < k->n; i++) k->fin[i] = SRV_RUNNING;
    wire_touch(k->srv, k->conn);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, k, stream_free);
    if (!r) {
        server *srv = k->srv;
        struct MHD_Connection *c = k->conn;
        call_free(k);
        return wire_fail(srv, c, 500, "server_error", NULL, "cannot create the stream");
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Connection", "close");
    wire_count_status(k->srv, 200);
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
    if (!srv_request_parse(kind, cc->body ? cc->body : "", cc->n, &req, &f)) return wire_send_error(srv, c, &f);
    /* Answers that could never all have a sequence or a place in the queue
     * at once: a 503 would say "try again", which never helps. */
    const int64_t n_answers = (int64_t)req.n * (kind == SRV_CHAT ? 1 : req.n_prompts);
    const int64_t room = (int64_t)srv->cfg->sched.n_parallel + srv->cfg->sched.n_queue;
    if (n_answers > room) {
        const char *param = req.n > 1 ? "n" : "prompt";
        srv_request_clear(&req);
        return wire_fail(srv, c, 400, "invalid_request_error", param,
                         "the request asks for %lld answers; this server holds at most %lld at once (--parallel %d, "
                         "--queue %d)",
                         (long long)n_answers, (long long)room, (int)srv->cfg->sched.n_parallel, (int)srv->cfg->sched.n_queue);
    }
    call *k = calloc(1, sizeof *k);
    if (!k) {
        srv_request_clear(&req);
        return wire_fail(srv, c, 500, "server_error", NULL, "out of memory");
    }
    k->srv = srv;
    k->conn = c;
    wire_client_name(c, k->client, sizeof k->client);
    k->kind = kind;
    k->include_usage = req.stream && req.include_usage;
    k->return_progress = req.stream && req.return_progress;
    k->per_prompt = req.n;
    k->created = (long long)time(NULL);
    const uint64_t id = atomic_fetch_add(&srv->next_id, 1);
    snprintf(k->id, sizeof k->id, "%s-%" PRIx64 "%06" PRIx64, kind == SRV_CHAT ? "chatcmpl" : "cmpl",
             (uint64_t)k->created, id);
    const int n_texts = kind == SRV_CHAT ? 1 : req.n_prompts;
    const char *param = kind == SRV_CHAT ? "messages" : "prompt";
    int status = 0;
    k->top_logprobs = req.top_logprobs;
    const int32_t n_vocab = okv_model_n_vocab(srv->model);
    for (int32_t b = 0; b < req.n_bias && !status; b++)
        if (req.bias_ids[b] >= n_vocab)
            status = wire_fail(srv, c, 400, "invalid_request_error", "logit_bias",
                          "'logit_bias' names token %d; the vocabulary has %d tokens", (int)req.bias_ids[b],
                          (int)n_vocab) == MHD_YES ? 1 : -1;
    srv_trigger trigger = {0};
    for (int i = 0; i < n_texts && !status; i++) {
        char *rendered = NULL;
        const char *text;
        if (kind == SRV_CHAT) {
            srv_fail rf = {0};
            if (!(rendered = srv_chat_render(srv->chat, &req, true, &rf))) {
                status = wire_send_error(srv, c, &rf) == MHD_YES ? 1 : -1;
                break;
            }
            okv_chat_syntax syn = srv_chat_syntax(srv->chat, rendered);
            /* tool_choice "required" or named: the answer is calls in the
             * template's format, arguments per the tool's schema, forced
             * from the first token (a grammar of the client's would fight it).
             * "auto": the same grammar, lazy: on from the format's opener, so
             * a call the model starts is valid (a client's grammar wins). */
            const bool forced = req.tool_choice == SRV_TOOLS_REQUIRED || req.tool_choice == SRV_TOOLS_NAMED;
            if (forced && req.grammar) {
                srv_fail_set(&rf, 400, "invalid_request_error", "tool_choice",
                             "'tool_choice' forces a tool call; it cannot come with 'response_format', 'grammar' or 'json_schema'");
                free(rendered);
                status = wire_send_error(srv, c, &rf) == MHD_YES ? 1 : -1;
                break;
            }
            if (forced || (req.tool_choice == SRV_TOOLS_AUTO && req.tools_json && !req.grammar)) {
                req.grammar = srv_tool_call_grammar(&req, &syn, !forced, forced ? NULL : &trigger, &rf);
                if (!req.grammar && rf.status) {
                    free(rendered);
                    status = wire_send_error(srv, c, &rf) == MHD_YES ? 1 : -1;
                    break;
                }
                if (!req.grammar) trigger.text = NULL; /* a format offkv cannot constrain: free */
            }
            /* One parse per choice: n answers stream side by side. */
            for (int c2 = 0; c2 < req.n && c2 < SRV_MAX_PROMPTS; c2++)
                srv_chat_stream_init(&k->cs[c2], &syn, &req,
                                     ((uint64_t)k->created * 0x9e3779b97f4a7c15ull ^ atomic_load(&srv->next_id)) + (uint64_t)c2);
            text = srv_chat_model_text(srv->chat, rendered);
        } else {
            text = req.prompts[i];
        }
        size_t n = 0;
        const int32_t cap = srv_sched_capacity(srv->sched);
        int32_t *ids = tokenize(srv, text, kind == SRV_CHAT, (size_t)cap, &n);
        free(rendered);
        if (!ids && n > (size_t)cap)
            status = wire_fail(srv, c, 400, "invalid_request_error", param,
                          "the prompt has more than %d tokens (at least %zu), more than the context's %d positions (-c)",
                          (int)cap, n, (int)cap) == MHD_YES ? 1 : -1;
        else if (!ids) status = wire_fail(srv, c, 500, "server_error", NULL, "cannot tokenize the prompt") == MHD_YES ? 1 : -1;
        else if (n == 0)
            status = wire_fail(srv, c, 400, "invalid_request_error", param,
                          "the prompt is empty and the vocabulary adds no BOS: nothing to evaluate") == MHD_YES ? 1 : -1;
        if (status) {
            free(ids);
            break;
        }
        static atomic_uint_fast64_t seed_counter;
        const int nf = req.n;
        srv_job_params p = {
            .prompt = ids,
            .n_prompt = (int32_t)n,
            .max_tokens = req.max_tokens,
            .sampling = {.temperature = req.temperature, .top_k = req.top_k, .top_p = req.top_p,
                         .seed = req.has_seed ? req.seed + (uint64_t)i * (uint64_t)nf
                                              : (uint64_t)time(NULL) * 6364136223846793005ull +
                                                    atomic_fetch_add(&seed_counter, (uint64_t)nf)},
            .stops = req.stops,
            .n_stops = req.n_stops,
            .ignore_eos = req.ignore_eos,
            .controls = req.controls,
            .bias_ids = req.bias_ids,
            .bias = req.bias,
            .n_bias = req.n_bias,
            .grammar = req.grammar,
            .trigger = trigger.text,
            .trigger_anchored = trigger.anchored,
            .trigger_think = trigger.think,
            .trigger_think_open = trigger.think_open,
            .top_logprobs = req.top_logprobs,
            .special = kind == SRV_CHAT && srv_chat_needs_special(&k->cs[0]),
        };
        bool busy = false;
        okv_error serr = {0};
        const bool ok = srv_submit_forks(srv->sched, &p, nf, &k->jobs[i * nf], &busy, &serr);
        free(ids);
        if (!ok) {
            status = (busy ? wire_fail(srv, c, 503, "server_busy", NULL,
                                  "every sequence is busy and the queue is full: try again later")
                     : serr.status == OKV_ERR_NOMEM
                         ? wire_fail(srv, c, 500, "server_error", NULL, "%s", serr.message)
                         : wire_fail(srv, c, 400, "invalid_request_error", NULL, "the request cannot start: %s", serr.message)) ==
                             MHD_YES
                         ? 1
                         : -1;
            break;
        }
        k->n = (i + 1) * nf;
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
enum MHD_Result openai_apply_template(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    srv_request req;
    srv_fail f;
    if (!srv_request_parse(SRV_CHAT, cc->body ? cc->body : "", cc->n, &req, &f)) return wire_send_error(srv, c, &f);
    char *text = srv_chat_render(srv->chat, &req, false, &f);
    srv_request_clear(&req);
    if (!text) return wire_send_error(srv, c, &f);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "prompt", text);
    free(text);
    return wire_send_json(srv, c, 200, r);
}

enum MHD_Result openai_models(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    (void)cc;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(r, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", srv->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)(long long)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "offkv");
    cJSON_AddItemToArray(data, m);
    return wire_send_json(srv, c, 200, r);
}

/* llama.cpp's /tokenize, /detokenize and /props, shaped in tokens.c. */
enum MHD_Result openai_tokenize(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    srv_fail f = {0};
    char *answer = srv_tokenize_answer(okv_model_tokenizer(srv->model), cc->body ? cc->body : "", cc->n, &f);
    if (!answer) return wire_send_error(srv, c, &f);
    return wire_send_owned(srv, c, 200, "application/json", answer, strlen(answer));
}

enum MHD_Result openai_detokenize(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    srv_fail f = {0};
    char *answer = srv_detokenize_answer(okv_model_tokenizer(srv->model), cc->body ? cc->body : "", cc->n, &f);
    if (!answer) return wire_send_error(srv, c, &f);
    return wire_send_owned(srv, c, 200, "application/json", answer, strlen(answer));
}

enum MHD_Result openai_props(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    (void)cc;
    const srv_props p = {.tok = okv_model_tokenizer(srv->model), .model_path = srv->cfg->model_path,
                         .model_name = srv->model_name, .chat_template = srv_chat_source(srv->chat),
                         .build_info = "offkv", .n_ctx = srv_sched_capacity(srv->sched),
                         .total_slots = srv->cfg->sched.n_parallel};
    char *answer = srv_props_answer(&p);
    if (!answer) return wire_fail(srv, c, 500, "server_error", NULL, "out of memory");
    return wire_send_owned(srv, c, 200, "application/json", answer, strlen(answer));
}

enum MHD_Result openai_chat_completions(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    return completions(srv, c, SRV_CHAT, cc);
}

enum MHD_Result openai_completions(server *srv, struct MHD_Connection *c, const conn_ctx *cc) {
    return completions(srv, c, SRV_COMPLETION, cc);
}
