/* The gate before libmicrohttpd (serve/gate.c) under pressure:
 *  - one address that keeps opening half-sent requests fills the list with
 *    connections it has answered (408) and is closing: a request from
 *    another address is still taken (it was closed unanswered);
 *  - out of file descriptors, the gate does not spin on its listen socket
 *    (a core at 100% while nothing could be accepted), and takes the
 *    waiting connections once descriptors are back. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "serve/serve.h"

static atomic_int passed;

static void on_pass(void *cls, int fd, const struct sockaddr *addr, unsigned addr_len) {
    (void)cls, (void)addr, (void)addr_len;
    atomic_fetch_add(&passed, 1);
    close(fd);
}

static int listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 256) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &n) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

/* A connection from local address from (127.0.0.x) that sends text. */
static int client(int port, const char *from, const char *text) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, from, &me.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof me) != 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    if (text && send(fd, text, strlen(text), MSG_NOSIGNAL) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static const char HALF[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
static const char WHOLE[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

static void test_flood(void) {
    int port, lfd = listener(&port);
    CHECK(lfd >= 0, "listen");
    srv_gate_config cfg = {.listen_fd = lfd, .timeout = 10, .max_per_client = 4, .max_waiting = 8, .max_head = 4096,
                           .max_body = 1 << 20};
    srv_gate *g = srv_gate_start(&cfg, on_pass, NULL, NULL);
    CHECK(g != NULL, "gate");
    int flood[40], n_flood = 0;
    for (int i = 0; i < 40; i++) {
        flood[n_flood] = client(port, "127.0.0.1", HALF);
        if (flood[n_flood] >= 0) n_flood++;
        sleep_ms(2);
    }
    CHECK(n_flood == 40, "40 half-sent requests from 127.0.0.1 (%d)", n_flood);
    sleep_ms(100);
    atomic_store(&passed, 0);
    int other = client(port, "127.0.0.2", WHOLE);
    for (int i = 0; i < 100 && atomic_load(&passed) == 0; i++) sleep_ms(10);
    CHECK(atomic_load(&passed) == 1, "another address's whole request is taken past one address's flood (%d)",
          atomic_load(&passed));
    close(other);
    for (int i = 0; i < n_flood; i++) close(flood[i]);
    srv_gate_stop(g);
    close(lfd);
}

static void test_out_of_descriptors(void) {
    int port, lfd = listener(&port);
    srv_gate_config cfg = {.listen_fd = lfd, .timeout = 10, .max_per_client = 8, .max_waiting = 64, .max_head = 4096,
                           .max_body = 1 << 20};
    srv_gate *g = srv_gate_start(&cfg, on_pass, NULL, NULL);
    CHECK(g != NULL, "gate");
    atomic_store(&passed, 0);
    /* Three requests connect while no descriptor is left to accept them. */
    int c[3];
    struct rlimit was, low;
    getrlimit(RLIMIT_NOFILE, &was);
    int fds[3];
    for (int i = 0; i < 3; i++) fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    int top = 0;
    for (int i = 0; i < 3; i++) top = fds[i] > top ? fds[i] : top;
    low = was;
    low.rlim_cur = (rlim_t)top + 1; /* every descriptor up to top in use: none free */
    for (int i = 0; i < 3; i++) close(fds[i]);
    for (int i = 0; i < 3; i++) c[i] = client(port, "127.0.0.1", WHOLE);
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "lower the descriptor limit");
    /* fill what is left below the limit */
    int filler[64], n_fill = 0;
    while (n_fill < 64 && (filler[n_fill] = dup(0)) >= 0) n_fill++;
    int more = client(port, "127.0.0.1", NULL); /* no descriptor: fails */
    if (more >= 0) close(more);
    const double cpu0 = cpu_seconds();
    sleep_ms(500);
    const double spent = cpu_seconds() - cpu0;
    CHECK(spent < 0.2, "out of descriptors, the gate waits, not spins (%.2f s of CPU in 0.5 s)", spent);
    for (int i = 0; i < n_fill; i++) close(filler[i]);
    setrlimit(RLIMIT_NOFILE, &was);
    for (int i = 0; i < 100 && atomic_load(&passed) < 3; i++) sleep_ms(10);
    CHECK(atomic_load(&passed) == 3, "descriptors back: the three waiting requests are taken (%d)", atomic_load(&passed));
    for (int i = 0; i < 3; i++)
        if (c[i] >= 0) close(c[i]);
    srv_gate_stop(g);
    close(lfd);
}

int main(void) {
    test_flood();
    test_out_of_descriptors();
    return check_done();
}
