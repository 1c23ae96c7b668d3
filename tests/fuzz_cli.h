/* Test support for the CLI fuzz tests: runs $OKV_BIN/offkv as a user runs it
 * (posix_spawn, stdout and stderr captured to files in a scratch folder)
 * with a time limit, so a crash (a signal) and a hang are told apart from
 * an error exit. */
#ifndef OKV_TESTS_FUZZ_CLI_H
#define OKV_TESTS_FUZZ_CLI_H

#include <fcntl.h>
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

static char fc_bin[4096], fc_dir[4096];
static char fc_out[1 << 16], fc_err[1 << 16];

enum { FC_SIGNAL = -1, FC_TIMEOUT = -2, FC_NOSPAWN = -3 };

/* Sets up bin and a scratch folder; false (after printing why) to skip. */
static inline bool fc_init(const char *name) {
    const char *b = getenv("OKV_BIN");
    if (!b) {
        printf("skipped: OKV_BIN not set (ctest sets it to the build folder)\n");
        return false;
    }
    snprintf(fc_bin, sizeof fc_bin, "%s/offkv", b);
    snprintf(fc_dir, sizeof fc_dir, "%s/%s-XXXXXX", b, name);
    if (!mkdtemp(fc_dir)) {
        printf("skipped: cannot make a scratch folder under %s\n", b);
        return false;
    }
    return true;
}

static inline void fc_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", fc_dir, name); }

static inline void fc_slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

/* Runs offkv with argv[0..] (NULL-terminated, without the program) for at
 * most limit_s seconds: the exit code, FC_SIGNAL, or FC_TIMEOUT. */
static inline int fc_runv(double limit_s, const char *const *args) {
    const char *argv[128];
    int n = 0;
    argv[n++] = fc_bin;
    for (int i = 0; args[i] && n < 127; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char o[4200], e[4200];
    fc_path(o, sizeof o, "out.txt");
    fc_path(e, sizeof e, "err.txt");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, fc_bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    fc_out[0] = fc_err[0] = '\0';
    if (rc != 0) return FC_NOSPAWN;
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
    fc_slurp(o, fc_out, sizeof fc_out);
    fc_slurp(e, fc_err, sizeof fc_err);
    if (timed_out) return FC_TIMEOUT;
    return WIFEXITED(status) ? WEXITSTATUS(status) : FC_SIGNAL;
}

static inline int fc_run(double limit_s, const char *first, ...) {
    const char *args[128];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 127; a = va_arg(ap, const char *)) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return fc_runv(limit_s, args);
}

/* Whether the last run crashed: a signal, or a sanitizer report (the
 * sanitizer build exits 1 after one). */
static inline bool fc_crashed(int rc) {
    return rc == FC_SIGNAL || strstr(fc_err, "AddressSanitizer") || strstr(fc_err, "LeakSanitizer") ||
           strstr(fc_err, "runtime error:");
}

static inline bool fc_copy(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    bool ok = a && b;
    char buf[1 << 16];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

#endif
