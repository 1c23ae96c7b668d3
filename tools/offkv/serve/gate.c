/* The door before libmicrohttpd.  One thread accepts every connection and
 * holds it, without a thread of its own, until the request's head (the
 * request line and the header lines) has arrived whole; it reads the head
 * with MSG_PEEK, so the bytes stay in the socket for libmicrohttpd, which
 * gets the connection only then (MHD_add_connection).  So:
 *   - a client that sends half a head, or trickles it, costs a slot in a
 *     list, not a thread, and is dropped with a 408 once --timeout passes;
 *     one address holds at most max_per_client such slots (a new one
 *     drops its oldest), so /health and other clients stay answered; one
 *     that shuts down its side before the head is whole gets a 400 then;
 *   - a head that cannot be HTTP (binary garbage, a bad Content-Length,
 *     an unknown Transfer-Encoding) gets its OpenAI-shaped JSON error at
 *     once, here: libmicrohttpd's own answers to those are HTML, and for a
 *     bad Content-Length it sent its status line and headers twice;
 *   - an address with max_per_client requests already being answered gets
 *     a 503 for the next one.
 * The answers send "Connection: close", so every request passes here. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve.h"

/* ---- the head ---- */

static bool tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c);
}

static int refuse(srv_fail *f, int status, const char *type, const char *fmt, const char *what, size_t n) {
    char shown[48];
    size_t k = 0;
    for (; k < n && k < sizeof shown - 1; k++) shown[k] = (unsigned char)what[k] < 0x20 || (unsigned char)what[k] >= 0x7f ? '.' : what[k];
    shown[k] = '\0';
    srv_fail_set(f, status, type, NULL, fmt, shown);
    return -1;
}

/* A Content-Length value: digits only, at most 19 of them. */
static int content_length(const char *v, size_t n, size_t max_body, uint64_t *out, srv_fail *f) {
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    if (n == 0) return refuse(f, 400, "invalid_request_error", "the Content-Length '%s' is empty", v, n);
    for (size_t i = 0; i < n; i++)
        if (v[i] < '0' || v[i] > '9')
            return refuse(f, 400, "invalid_request_error", "the Content-Length '%s' is not a number of bytes", v, n);
    if (n > 19)
        return refuse(f, 413, "invalid_request_error", "the Content-Length '%s' is larger than the server takes (--max-body)",
                      v, n);
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) x = x * 10 + (uint64_t)(v[i] - '0');
    if (x > max_body)
        return refuse(f, 413, "invalid_request_error", "the Content-Length '%s' is larger than the server takes (--max-body)",
                      v, n);
    *out = x;
    return 0;
}

static int head_check(const char *buf, size_t n, size_t max_head, size_t max_body, srv_fail *f) {
    const unsigned char *b = (const unsigned char *)buf;
    size_t i = 0;
    /* The request line: METHOD SP TARGET SP HTTP/1.x CRLF; a wrong byte is
     * refused as soon as it arrives. */
    size_t m = 0;
    while (i < n && b[i] != ' ') {
        if (!tchar(b[i]) || ++m > 32) return refuse(f, 400, "invalid_request_error", "the request line '%s' is not HTTP", buf, n);
        i++;
    }
    if (i < n && m == 0) return refuse(f, 400, "invalid_request_error", "the request line '%s' is not HTTP", buf, n);
    if (i++ >= n) return n > max_head ? refuse(f, 431, "invalid_request_error", "the request head '%s...' is too large", buf, n) : 0;
    const size_t target = i;
    while (i < n && b[i] != ' ') {
        if (b[i] <= 0x20 || b[i] >= 0x7f)
            return refuse(f, 400, "invalid_request_error", "the request target '%s' holds a byte that is not visible ASCII",
                          buf + target, i + 1 - target);
        if (i - target > 8192)
            return refuse(f, 414, "invalid_request_error", "the request target '%s...' is longer than 8192 bytes", buf + target, 40);
        i++;
    }
    if (i < n && i == target) return refuse(f, 400, "invalid_request_error", "the request line '%s' has no target", buf, i);
    if (i++ >= n) return 0;
    static const char version[] = "HTTP/1.";
    for (size_t k = 0; k < 7; k++, i++) {
        if (i >= n) return 0;
        if (b[i] != (unsigned char)version[k])
            return refuse(f, 400, "invalid_request_error", "the request line '%s' is not HTTP", buf, i + 1);
    }
    if (i >= n) return 0;
    if (b[i] != '0' && b[i] != '1')
        return refuse(f, 505, "invalid_request_error", "the HTTP version '%s' is not served (1.0 and 1.1 are)", buf + i - 7, 8);
    i++;
    if (i < n && b[i] == '\r') i++;
    if (i >= n) return 0;
    if (b[i] != '\n') return refuse(f, 400, "invalid_request_error", "the request line '%s' does not end after its version", buf, i + 1);
    i++;
    /* The header lines, up to the empty one. */
    bool have_length = false, chunked = false;
    uint64_t length = 0;
    int n_headers = 0;
    for (;;) {
        if (i >= n) break;
        if (b[i] == '\r' && i + 1 >= n) break;
        if (b[i] == '\n' || (b[i] == '\r' && b[i + 1] == '\n')) {
            if (have_length && chunked)
                return refuse(f, 400, "invalid_request_error", "the request has both a Content-Length and a Transfer-Encoding%s", "", 0);
            return 1;
        }
        /* libmicrohttpd keeps each header in its per-connection pool: a few
         * hundred short ones ran it out, and it answered in HTML. */
        if (++n_headers > SRV_MAX_HEADERS)
            return refuse(f, 431, "invalid_request_error", "the request has more than %s header lines", SRV_MAX_HEADERS_TEXT,
                          strlen(SRV_MAX_HEADERS_TEXT));
        const size_t name = i;
        while (i < n && b[i] != ':') {
            if (!tchar(b[i])) return refuse(f, 400, "invalid_request_error", "the header line '%s' is not 'Name: value'", buf + name, i + 1 - name);
            i++;
        }
        if (i >= n) break;
        if (i == name) return refuse(f, 400, "invalid_request_error", "the header line '%s' has no name", buf + name, i + 1 - name);
        const size_t name_len = i - name;
        i++;
        while (i < n && (b[i] == ' ' || b[i] == '\t')) i++;
        const size_t value = i;
        while (i < n && b[i] != '\r' && b[i] != '\n') {
            if ((b[i] < 0x20 && b[i] != '\t') || b[i] == 0x7f)
                return refuse(f, 400, "invalid_request_error", "the header '%s' holds a control byte", buf + name, i + 1 - name);
            i++;
        }
        if (i >= n) break;
        const size_t value_len = i - value;
        if (b[i] == '\r') {
            if (i + 1 >= n) break;
            if (b[i + 1] != '\n') return refuse(f, 400, "invalid_request_error", "the header '%s' holds a bare CR", buf + name, i - name);
            i++;
        }
        i++;
        if (name_len == 14 && strncasecmp(buf + name, "Content-Length", 14) == 0) {
            uint64_t x = 0;
            if (content_length(buf + value, value_len, max_body, &x, f) < 0) return -1;
            if (have_length && x != length)
                return refuse(f, 400, "invalid_request_error", "the request has two different Content-Lengths%s", "", 0);
            have_length = true;
            length = x;
        } else if (name_len == 17 && strncasecmp(buf + name, "Transfer-Encoding", 17) == 0) {
            size_t vl = value_len;
            while (vl && (buf[value + vl - 1] == ' ' || buf[value + vl - 1] == '\t')) vl--;
            if (!(vl == 7 && strncasecmp(buf + value, "chunked", 7) == 0))
                return refuse(f, 501, "invalid_request_error", "the Transfer-Encoding '%s' is not served (chunked is)", buf + value, vl);
            chunked = true;
        }
    }
    return n > max_head ? refuse(f, 431, "invalid_request_error", "the request head '%s...' is too large", buf, 40) : 0;
}

int srv_head_check(const char *buf, size_t n, size_t max_head, size_t max_body, srv_fail *f) {
    const int v = head_check(buf, n, max_head, max_body, f);
    if (v < 0) {
        /* a refusal in the shape of the target's API: the path after the
         * method (or after an absolute-form target's host) */
        const char *sp = memchr(buf, ' ', n), *end = buf + n;
        const char *t = sp ? sp + 1 : end;
        if (end - t > 8 && (strncasecmp(t, "http://", 7) == 0 || strncasecmp(t, "https://", 8) == 0)) {
            const char *slash = memchr(t + 8, '/', (size_t)(end - t - 8));
            t = slash ? slash : end;
        }
        f->api = end - t >= 12 && memcmp(t, "/v1/messages", 12) == 0 ? SRV_API_ANTHROPIC : SRV_API_OPENAI;
    }
    return v;
}

bool srv_send_error_raw(int fd, const srv_fail *f) {
    char *body = f->api == SRV_API_ANTHROPIC ? srv_anthropic_error_json(f) : srv_error_json(f);
    if (!body) return false;
    static const struct { int status; const char *reason; } reasons[] = {
        {400, "Bad Request"},  {408, "Request Timeout"},        {413, "Content Too Large"},
        {414, "URI Too Long"}, {431, "Request Header Fields Too Large"}, {501, "Not Implemented"},
        {503, "Service Unavailable"}, {505, "HTTP Version Not Supported"}};
    const char *reason = "Error";
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].status == f->status) reason = reasons[i].reason;
    char head[256];
    const size_t len = strlen(body);
    const int hn = snprintf(head, sizeof head,
                            "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s"
                            "Connection: close\r\n\r\n",
                            f->status, reason, len, f->status == 503 ? "Retry-After: 2\r\n" : "");
    bool ok = send(fd, head, (size_t)hn, MSG_NOSIGNAL | MSG_DONTWAIT) == hn &&
              send(fd, body, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len;
    free(body);
    return ok;
}

/* ---- the gate's thread ---- */

typedef struct waiting {
    int fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    double deadline;
    bool closing;           /* answered: reading what is left until the client closes, then closed */
} waiting;

struct srv_gate {
    srv_gate_config cfg;
    srv_gate_pass_fn pass;
    srv_gate_count_fn count;
    void *cls;
    int ep, wake[2];
    waiting *w;
    int n_w;
    char *peek;
    pthread_t thread;
    bool started;
    double accept_paused_until; /* out of file descriptors: the listen socket is out of the poll until then */
};

bool srv_same_client(const struct sockaddr *a, const struct sockaddr *b) {
    if (a->sa_family != b->sa_family) return false;
    if (a->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr, &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
    return true;
}

static void drop(srv_gate *g, int k) {
    epoll_ctl(g->ep, EPOLL_CTL_DEL, g->w[k].fd, NULL);
    close(g->w[k].fd);
    g->w[k] = g->w[--g->n_w];
}

/* Answers the k-th waiting connection with an error, then reads what the
 * client still sends for a moment before closing (closing with unread
 * bytes would send a reset that can destroy the answer in flight). */
static void answer(srv_gate *g, int k, const srv_fail *f) {
    if (g->count) g->count(g->cls, f, (const struct sockaddr *)&g->w[k].addr, (unsigned)g->w[k].addr_len);
    if (!srv_send_error_raw(g->w[k].fd, f)) {
        drop(g, k);
        return;
    }
    shutdown(g->w[k].fd, SHUT_WR);
    g->w[k].closing = true;
    g->w[k].deadline = srv_now() + 2.0;
}

static void timed_out(srv_gate *g, int k) {
    srv_fail f;
    srv_fail_set(&f, 408, "timeout_error", NULL,
                 "the request's head did not arrive within the server's %.0f s (--timeout)", g->cfg.timeout);
    answer(g, k, &f);
}

/* Out of file descriptors, a level-triggered listen socket would wake the
 * poll at once, forever (a core spinning while /health waits): it leaves
 * the poll for a moment, while slots time out or are handed on. */
static void pause_accepting(srv_gate *g) {
    if (g->accept_paused_until > 0) return;
    epoll_ctl(g->ep, EPOLL_CTL_DEL, g->cfg.listen_fd, NULL);
    g->accept_paused_until = srv_now() + 0.1;
}

static void resume_accepting(srv_gate *g) {
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = g->cfg.listen_fd};
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, g->cfg.listen_fd, &lev) == 0) g->accept_paused_until = 0;
    else g->accept_paused_until = srv_now() + 0.1;
}

static void admit_new(srv_gate *g) {
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        const int fd = accept4(g->cfg.listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) pause_accepting(g);
            return; /* else EAGAIN, or a connection that went away */
        }
        /* Room: one address holds at most max_per_client waiting slots, all
         * addresses max_waiting; past that the oldest waiting one goes. */
        int oldest_same = -1, same = 0, oldest = -1;
        for (int k = 0; k < g->n_w; k++) {
            if (g->w[k].closing) continue;
            if (oldest < 0 || g->w[k].deadline < g->w[oldest].deadline) oldest = k;
            if (srv_same_client((struct sockaddr *)&g->w[k].addr, (struct sockaddr *)&addr)) {
                same++;
                if (oldest_same < 0 || g->w[k].deadline < g->w[oldest_same].deadline) oldest_same = k;
            }
        }
        if (same >= g->cfg.max_per_client && oldest_same >= 0) timed_out(g, oldest_same);
        if (g->n_w >= g->cfg.max_waiting) {
            /* The list is full: an answered connection finishing goes first
             * (one address's flood of them left every other client closed
             * without an answer), else the oldest waiting one is answered. */
            int first_closing = -1;
            for (int k = 0; k < g->n_w; k++)
                if (g->w[k].closing && (first_closing < 0 || g->w[k].deadline < g->w[first_closing].deadline))
                    first_closing = k;
            if (first_closing >= 0) drop(g, first_closing);
            else if (oldest >= 0) timed_out(g, oldest);
        }
        if (g->n_w >= g->cfg.max_waiting) {
            close(fd); /* every slot was waiting: the oldest got its 408, this one no room */
            continue;
        }
        waiting *w = &g->w[g->n_w];
        *w = (waiting){.fd = fd, .addr = addr, .addr_len = len, .deadline = srv_now() + g->cfg.timeout};
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd};
        if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            continue;
        }
        g->n_w++; /* bytes that came with it: epoll reports them as the first event */
    }
}

/* New bytes on a waiting connection, or its end (hup: the client shut
 * down its side): look at its head so far. */
static void look(srv_gate *g, int k, bool hup) {
    waiting *w = &g->w[k];
    if (w->closing) {
        char sink[4096];
        ssize_t r;
        while ((r = recv(w->fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {
        }
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) drop(g, k);
        return;
    }
    const ssize_t r = recv(w->fd, g->peek, g->cfg.max_head + 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop(g, k); /* gone before its head was whole */
        return;
    }
    if (r < 0) return;
    srv_fail f;
    const int verdict = srv_head_check(g->peek, (size_t)r, g->cfg.max_head, g->cfg.max_body, &f);
    if (verdict == 0 && hup) {
        /* MSG_PEEK never reads the end after the bytes, so without this a
         * client that sent part of a head and shut down its side waited
         * out --timeout for the 408 of a head that could never come */
        srv_fail_set(&f, 400, "invalid_request_error", NULL,
                     "the client closed its side of the connection before the request's head was whole");
        answer(g, k, &f);
    } else if (verdict < 0) {
        answer(g, k, &f);
    } else if (verdict > 0) {
        /* Handed on: the socket is libmicrohttpd's now. */
        epoll_ctl(g->ep, EPOLL_CTL_DEL, w->fd, NULL);
        const int fd = w->fd;
        const struct sockaddr_storage addr = w->addr;
        const socklen_t len = w->addr_len;
        g->w[k] = g->w[--g->n_w];
        g->pass(g->cls, fd, (const struct sockaddr *)&addr, len);
    }
}

static void *gate_main(void *arg) {
    srv_gate *g = arg;
    struct epoll_event evs[64];
    for (;;) {
        double next = 1e300;
        const double now = srv_now();
        for (int k = 0; k < g->n_w;) {
            if (g->w[k].deadline <= now) {
                if (g->w[k].closing) {
                    drop(g, k);
                    continue;
                }
                timed_out(g, k);
            }
            if (g->w[k].deadline < next) next = g->w[k].deadline;
            k++;
        }
        if (g->accept_paused_until > 0) {
            if (g->accept_paused_until <= now) resume_accepting(g);
            if (g->accept_paused_until > 0 && g->accept_paused_until < next) next = g->accept_paused_until;
        }
        int ms = -1; /* nothing waiting: until a connection comes */
        if (next < 1e299) ms = next <= now ? 0 : (int)((next - now) * 1000.0) + 1;
        const int n = epoll_wait(g->ep, evs, 64, ms);
        for (int e = 0; e < n; e++) {
            const int fd = evs[e].data.fd;
            if (fd == g->wake[0]) return NULL;
            if (fd == g->cfg.listen_fd) {
                admit_new(g);
                continue;
            }
            for (int k = 0; k < g->n_w; k++)
                if (g->w[k].fd == fd) {
                    look(g, k, (evs[e].events & (EPOLLRDHUP | EPOLLHUP)) != 0);
                    break;
                }
        }
    }
}

srv_gate *srv_gate_start(const srv_gate_config *cfg, srv_gate_pass_fn pass, srv_gate_count_fn count, void *cls) {
    srv_gate *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = *cfg;
    g->pass = pass;
    g->count = count;
    g->cls = cls;
    g->wake[0] = g->wake[1] = -1;
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->w = calloc((size_t)cfg->max_waiting + 1, sizeof *g->w);
    g->peek = malloc(cfg->max_head + 1);
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = cfg->listen_fd};
    struct epoll_event wev = {.events = EPOLLIN};
    if (g->ep < 0 || !g->w || !g->peek || pipe2(g->wake, O_CLOEXEC) != 0) goto fail;
    wev.data.fd = g->wake[0];
    if (fcntl(cfg->listen_fd, F_SETFL, fcntl(cfg->listen_fd, F_GETFL) | O_NONBLOCK) != 0 ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, cfg->listen_fd, &lev) != 0 || epoll_ctl(g->ep, EPOLL_CTL_ADD, g->wake[0], &wev) != 0 ||
        pthread_create(&g->thread, NULL, gate_main, g) != 0)
        goto fail;
    g->started = true;
    return g;
fail:
    srv_gate_stop(g);
    return NULL;
}

void srv_gate_stop(srv_gate *g) {
    if (!g) return;
    if (g->started) {
        const char c = 0;
        if (write(g->wake[1], &c, 1) != 1) perror("offkv serve: stopping the gate");
        pthread_join(g->thread, NULL);
    }
    for (int k = 0; k < g->n_w; k++) close(g->w[k].fd);
    if (g->wake[0] >= 0) close(g->wake[0]);
    if (g->wake[1] >= 0) close(g->wake[1]);
    if (g->ep >= 0) close(g->ep);
    free(g->w);
    free(g->peek);
    free(g);
}
