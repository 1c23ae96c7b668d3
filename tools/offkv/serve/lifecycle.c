/* The server's life: listen first (/health answers 503 while the model
 * loads), load, serve until SIGINT or SIGTERM, then drain: stop accepting,
 * end every request, let the answers go out, free. */
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
    /* The same as a Prometheus label value: \, " and newlines escaped. */
    size_t k = 0;
    for (const char *p = srv->model_name; *p && k + 3 < sizeof srv->model_label; p++) {
        if (*p == '\\' || *p == '"') srv->model_label[k++] = '\\';
        if (*p == '\n') {
            srv->model_label[k++] = '\\';
            srv->model_label[k++] = 'n';
        } else {
            srv->model_label[k++] = *p;
        }
    }
    srv->model_label[k] = 0;
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

/* The process's side: signals and the arena count, set before any thread
 * starts (every thread inherits the signal mask). */
static void process_setup(sigset_t *sigs) {
    /* Signals are taken by sigwait in srv_run: block them before any thread
     * starts, so that every thread inherits the mask. */
    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A thread per connection would otherwise give glibc's malloc up to
     * 8 arenas per core, each keeping the memory its threads freed: the
     * server's footprint would creep up with every new connection thread
     * for a long while.  Two arenas are plenty: the requests' allocations
     * are small and brief, and the decode loop allocates nothing per step. */
    mallopt(M_ARENA_MAX, 2);
}

srv_server *srv_start(const srv_config *cfg) {
    server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        fprintf(stderr, "offkv serve: error: out of memory\n");
        return NULL;
    }
    srv->cfg = cfg;
    srv->t_start = srv_now();
    srv->listen_fd = -1;
    pthread_mutex_init(&srv->mu, NULL);
    set_model_name(srv, cfg->model_path);

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, port_s, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "offkv serve: error: bad --host '%s': %s (give a numeric address such as 127.0.0.1)\n",
                cfg->host, gai_strerror(gai));
        goto fail;
    }
    srv->port = cfg->port;
    srv->listen_fd = listen_on(ai, &srv->port);
    freeaddrinfo(ai);
    if (srv->listen_fd < 0) {
        fprintf(stderr, "offkv serve: error: cannot listen on %s:%d: %s\n", cfg->host, cfg->port, strerror(errno));
        goto fail;
    }
    if (!wire_start(srv)) {
        fprintf(stderr, "offkv serve: error: cannot start the HTTP server on %s:%d: %s\n", cfg->host, srv->port,
                strerror(errno));
        goto fail;
    }
    return srv;
fail:
    srv_stop(srv);
    return NULL;
}

int srv_port(const srv_server *srv) { return srv->port; }

bool srv_load(srv_server *srv) {
    const srv_config *cfg = srv->cfg;
    okv_error err = {0};
    if (!choose_template(srv)) return false;
    if (!(srv->model = okv_model_load_progress(cfg->model_path, cfg->model_options, cfg->load_progress, cfg->load_progress_user,
                                               &err))) {
        fprintf(stderr, "offkv serve: error: cannot load %s: %s\n", cfg->model_path, err.message);
        return false;
    }
    if (!(srv->sched = srv_sched_create(srv->model, &cfg->sched, &err))) {
        fprintf(stderr, "offkv serve: error: %s\n", err.message);
        return false;
    }
    srv_chat_use_tokenizer(srv->chat, okv_model_tokenizer(srv->model));
    fprintf(stderr, "offkv serve: %s\n", okv_model_describe(srv->model));
    fprintf(stderr, "offkv serve: %d sequences of %d positions, chat template %s, %s KV, %d threads\n",
            (int)cfg->sched.n_parallel, (int)srv_sched_capacity(srv->sched), srv_chat_describe(srv->chat),
            cfg->sched.kv_type, (int)cfg->sched.n_threads);
    atomic_store(&srv->ready, true);
    return true;
}

void srv_stop(srv_server *srv) {
    if (!srv) return;
    /* Stop accepting (connections still waiting for their heads are
     * closed), end every request (queued ones get a 503, running streams an
     * error event and [DONE]), then wait for the connections' threads. */
    srv_gate_stop(srv->gate);
    if (srv->listen_fd >= 0) close(srv->listen_fd);
    if (srv->daemon) {
        if (srv->sched) srv_sched_stop(srv->sched);
        /* Closing the connections now would cut the streams short of their
         * last chunk and drop the queued requests' 503s: let every answer go
         * out first (each ends within a poll interval once its job has
         * ended), for at most 10 s.  Counted until libmicrohttpd reports the
         * request complete, not until the handler returns: a plain answer is
         * only queued then, and a count that ended with the handler let the
         * daemon stop before the 503 was written (hostile.test.mjs, once,
         * under TSan). */
        for (int i = 0; i < 1000 && atomic_load(&srv->n_answering) > 0; i++) {
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
}

int srv_run(const srv_config *cfg) {
    sigset_t sigs;
    process_setup(&sigs);
    /* Listening comes first: while the model loads, /health answers 503
     * {"status":"loading"} (and every other endpoint but the page 503), so
     * that a load balancer or a readiness probe can tell loading from
     * dead. */
    srv_server *srv = srv_start(cfg);
    if (!srv) return 1;
    const bool v6 = strchr(cfg->host, ':') != NULL;
    fprintf(stderr, "offkv serve: loading %s; http://%s%s%s:%d/health answers 503 until it is ready\n",
            cfg->model_path, v6 ? "[" : "", cfg->host, v6 ? "]" : "", srv->port);
    if (!srv_load(srv)) {
        srv_stop(srv);
        return 1;
    }
    printf("listening on http://%s%s%s:%d\n", v6 ? "[" : "", cfg->host, v6 ? "]" : "", srv->port);
    fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "offkv serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv_stop(srv);
    fprintf(stderr, "offkv serve: stopped\n");
    return 0;
}
