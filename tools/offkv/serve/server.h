/* The HTTP server's three parts, and what they share (internal to
 * tools/offkv/serve/):
 *   http.c       the wire: the routes as a table of handlers and the
 *                checks before them (method, loading, API key, body size),
 *                the connections (per-client counts, bodies, timeouts),
 *                sending answers and errors, /health, /metrics, the page;
 *   openai.c     OpenAI's API: requests into jobs, answers and their
 *                Server-Sent Events, /v1/models; llama.cpp's
 *                /apply-template, /tokenize, /detokenize and /props;
 *                Anthropic's /v1/messages through the same jobs, its
 *                requests and answers shaped in anthropic.c;
 *   lifecycle.c  the process: listening, loading, SIGINT/SIGTERM, draining.
 */
#ifndef OFFKV_SERVE_SERVER_H
#define OFFKV_SERVE_SERVER_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "serve.h"

enum { N_STATUS = 10 }; /* the statuses /metrics counts, the last for any other */

typedef struct srv_server {
    const srv_config *cfg;
    int listen_fd, port;
    struct MHD_Daemon *daemon;
    okv_model *model;
    srv_sched *sched;
    srv_chat *chat;
    char model_name[256];
    char model_label[520];          /* model_name escaped as a Prometheus label value */
    atomic_bool ready;
    atomic_uint_fast64_t next_id;
    atomic_int n_answering;         /* requests routed whose answer has not gone out (on_completed) */
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
    bool answered;                  /* a response was queued (or refused): the wire is no longer idle */
    bool routed;                    /* counted in srv->n_answering until on_completed */
    srv_api api;                    /* the shape of its refusals (by its path) */
    struct sockaddr_storage addr;
} conn_ctx;

/* ---- the wire (http.c) ---- */

/* Starts libmicrohttpd (no listening socket of its own) and the gate on
 * srv->listen_fd; false when either cannot start (errno says why). */
bool wire_start(server *srv);

/* The connection's peer as a numeric address ("?" when unknown), into buf. */
void wire_client_name(struct MHD_Connection *c, char *buf, size_t cap);

/* One line on stderr, "offkv serve: CLIENT " and the formatted rest (its
 * control bytes as '.'), unless --quiet: the server's record of what it
 * answered (one fprintf a line, so lines from connections' threads never mix). */
void wire_log(server *srv, const char *client, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Counts an answer's status for /metrics. */
void wire_count_status(server *srv, int status);

/* Restarts the connection's idle clock (a long generation moves no byte). */
void wire_touch(server *srv, struct MHD_Connection *c);

/* Sends body (malloc'd, taken over) with status and its type; the headers
 * every answer carries (Connection: close, Retry-After on 503, ...). */
enum MHD_Result wire_send_owned(server *srv, struct MHD_Connection *c, int status, const char *type, char *body,
                                size_t n);
/* Sends root as JSON (deleting it). */
enum MHD_Result wire_send_json(server *srv, struct MHD_Connection *c, int status, cJSON *root);
/* Sends f in OpenAI's error shape. */
enum MHD_Result wire_send_error(server *srv, struct MHD_Connection *c, const srv_fail *f);
/* Sends an OpenAI-shaped error of status, type and param (may be NULL). */
enum MHD_Result wire_fail(server *srv, struct MHD_Connection *c, int status, const char *type, const char *param,
                          const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Whether the client broke or closed the connection both ways (a client
 * that only shut its sending side still waits for its answer).  Before an
 * answer begins, pass a flag (false at first): an end of file from the
 * client is then probed once with an interim 100 Continue, which a closed
 * socket refuses; NULL once the answer is being written. */
bool wire_client_gone(struct MHD_Connection *c, bool *probed);

/* Appends len bytes to a growing buffer (kept NUL-terminated); false when
 * out of memory. */
bool wire_append_text(char **buf, size_t *n, size_t *cap, const char *s, size_t len);

/* Appends a named Server-Sent Event, "event: NAME\ndata: JSON\n\n", to
 * such a buffer, deleting data (name may be one of its strings); false
 * when out of memory (data NULL: it could not be built). */
bool wire_sse_event(char **out, size_t *n, size_t *cap, const char *name, cJSON *data);

/* wire_send_error and wire_fail in api's error shape. */
enum MHD_Result wire_send_error_as(server *srv, struct MHD_Connection *c, srv_api api, const srv_fail *f);
enum MHD_Result wire_fail_as(server *srv, struct MHD_Connection *c, srv_api api, int status, const char *type,
                             const char *param, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* ---- OpenAI's endpoints (openai.c): the route table's handlers ---- */

enum MHD_Result openai_chat_completions(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
enum MHD_Result openai_completions(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
/* POST /completion (llama.cpp's own, also /completions): /v1/completions'
 * request, llama.cpp's answer shape (an array of them for several prompts). */
enum MHD_Result llama_completion(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
/* POST /infill (llama.cpp's): the middle between input_prefix and
 * input_suffix, in llama.cpp's answer shape (srv_infill_prompt). */
enum MHD_Result llama_infill(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
enum MHD_Result openai_models(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
enum MHD_Result openai_apply_template(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
/* llama.cpp's /tokenize, /detokenize and /props, shaped in tokens.c. */
enum MHD_Result openai_tokenize(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
enum MHD_Result openai_detokenize(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
enum MHD_Result openai_props(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
/* Anthropic's POST /v1/messages and /v1/messages/count_tokens. */
enum MHD_Result openai_responses(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
enum MHD_Result openai_responses_input_tokens(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
enum MHD_Result anthropic_messages(server *srv, struct MHD_Connection *c, const conn_ctx *cc);
enum MHD_Result anthropic_count_tokens(server *srv, struct MHD_Connection *c, const conn_ctx *cc);

#endif
