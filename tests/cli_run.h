/* Test support for the tests of the offkv program: runs $OKV_BIN/offkv as a
 * user runs it (posix_spawn, stdout and stderr captured to files in a
 * scratch folder, stdin from a file when cli_stdin names one) with a time
 * limit, so a crash (a signal) and a hang are told apart from an error
 * exit. */
#ifndef OKV_TESTS_CLI_RUN_H
#define OKV_TESTS_CLI_RUN_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

extern char **environ;

static char cli_bin[4096], cli_dir[4096];
static char cli_out[1 << 17], cli_err[1 << 16];
static size_t cli_out_len;   /* bytes in cli_out (a render may hold NULs) */
static const char *cli_stdin; /* when set, the program's stdin reads this file */

enum { CLI_SIGNAL = -1, CLI_TIMEOUT = -2, CLI_NOSPAWN = -3 };

/* Sets up bin and a scratch folder; false (after printing why) to skip. */
static inline bool cli_init(const char *name) {
    const char *b = getenv("OKV_BIN");
    if (!b) {
        printf("skipped: OKV_BIN not set (ctest sets it to the build folder)\n");
        return false;
    }
    snprintf(cli_bin, sizeof cli_bin, "%s/offkv", b);
    snprintf(cli_dir, sizeof cli_dir, "%s/%s-XXXXXX", b, name);
    if (!mkdtemp(cli_dir)) {
        printf("skipped: cannot make a scratch folder under %s\n", b);
        return false;
    }
    return true;
}

static inline void cli_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", cli_dir, name); }

/* Reads up to cap - 1 bytes of a file, NUL-terminated; returns how many. */
static inline size_t cli_slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    return n;
}

/* Writes n bytes to path (created or truncated). */
static inline bool cli_write_file(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(bytes, 1, n, f) == n;
    if (f) ok &= fclose(f) == 0;
    return ok;
}

/* Runs offkv with argv[0..] (NULL-terminated, without the program) for at
 * most limit_s seconds: the exit code, CLI_SIGNAL, or CLI_TIMEOUT. */
static inline int cli_runv(double limit_s, const char *const *args) {
    const char *argv[128];
    int n = 0;
    argv[n++] = cli_bin;
    for (int i = 0; args[i] && n < 127; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char o[4200], e[4200];
    cli_path(o, sizeof o, "out.txt");
    cli_path(e, sizeof e, "err.txt");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (cli_stdin) posix_spawn_file_actions_addopen(&fa, 0, cli_stdin, O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, cli_bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    cli_out[0] = cli_err[0] = '\0';
    cli_out_len = 0;
    if (rc != 0) return CLI_NOSPAWN;
    int status = 0;
    struct timespec nap = {0, 5 * 1000 * 1000};
    bool timed_out = false;
    for (double waited = 0;; waited += 0.005) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (waited > limit_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = true;
            break;
        }
        nanosleep(&nap, NULL);
    }
    cli_out_len = cli_slurp(o, cli_out, sizeof cli_out);
    cli_slurp(e, cli_err, sizeof cli_err);
    if (timed_out) return CLI_TIMEOUT;
    return WIFEXITED(status) ? WEXITSTATUS(status) : CLI_SIGNAL;
}

static inline int cli_run(double limit_s, const char *first, ...) {
    const char *args[128];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 127; a = va_arg(ap, const char *)) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return cli_runv(limit_s, args);
}

/* offkv running beside the test (a chat, a run to interrupt): its stdin a
 * pipe the test writes, its stdout a file (out), its stderr a
 * pseudo-terminal the test reads into err (so that offkv shows its
 * progress there, as to a user, and never blocks on it). */
typedef struct cli_proc {
    pid_t pid;
    int in, tty;
    char out[4200];
    char err[1 << 16];
    size_t err_len;
} cli_proc;

static inline bool cli_proc_start(cli_proc *p, const char *const *args) {
    const char *argv[64];
    int n = 0;
    argv[n++] = cli_bin;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    p->err_len = 0;
    p->err[0] = '\0';
    cli_path(p->out, sizeof p->out, "proc-out.txt");
    int in[2];
    if (pipe(in) != 0) return false;
    p->tty = posix_openpt(O_RDWR | O_NOCTTY);
    const char *slave = p->tty >= 0 && grantpt(p->tty) == 0 && unlockpt(p->tty) == 0 ? ptsname(p->tty) : NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addopen(&fa, 1, p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, slave ? slave : "/nonexistent", O_RDWR | O_NOCTTY, 0);
    if (p->tty >= 0) posix_spawn_file_actions_addclose(&fa, p->tty);
    const int rc = slave ? posix_spawn(&p->pid, cli_bin, &fa, NULL, (char *const *)argv, environ) : -1;
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    p->in = in[1];
    if (rc != 0) {
        close(p->in);
        if (p->tty >= 0) close(p->tty);
    }
    return rc == 0;
}

/* Reads what offkv wrote to its terminal for up to ms milliseconds. */
static inline void cli_proc_drain(cli_proc *p, int ms) {
    struct pollfd f = {p->tty, POLLIN, 0};
    if (poll(&f, 1, ms) <= 0) return;
    const ssize_t got = read(p->tty, p->err + p->err_len, sizeof p->err - 1 - p->err_len);
    if (got > 0) p->err_len += (size_t)got;
    p->err[p->err_len] = '\0';
}

/* Waits (at most 60 s) until offkv's terminal shows needle. */
static inline bool cli_proc_wait_err(cli_proc *p, const char *needle) {
    for (int i = 0; i < 6000 && !strstr(p->err, needle); i++) cli_proc_drain(p, 10);
    return strstr(p->err, needle) != NULL;
}

static inline bool cli_proc_write(cli_proc *p, const char *text) {
    const size_t n = strlen(text);
    return write(p->in, text, n) == (ssize_t)n;
}

/* Ends offkv's input and waits (at most 60 s) for it to exit: its exit
 * code, or -1 (killed: it did not end, or ended by a signal). */
static inline int cli_proc_finish(cli_proc *p) {
    close(p->in);
    int status = 0;
    bool done = false;
    for (int i = 0; i < 6000 && !(done = waitpid(p->pid, &status, WNOHANG) == p->pid); i++) cli_proc_drain(p, 10);
    if (!done) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &status, 0);
    }
    for (int i = 0; i < 100 && p->err_len < sizeof p->err - 1; i++) cli_proc_drain(p, 0); /* what is left */
    close(p->tty);
    return done && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether the last run crashed: a signal, or a sanitizer report (the
 * sanitizer build exits 1 after one). */
static inline bool cli_crashed(int rc) {
    return rc == CLI_SIGNAL || strstr(cli_err, "AddressSanitizer") || strstr(cli_err, "LeakSanitizer") ||
           strstr(cli_err, "runtime error:");
}

static inline bool cli_copy(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    bool ok = a && b;
    char buf[1 << 16];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

/* Removes the scratch folder when every check passed (a failure leaves it
 * for a look); returns check_done(). */
static inline int cli_done(void) {
    if (check_failed_ == 0) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cli_dir);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", cli_dir);
    }
    return check_done();
}

#endif
