/* Shared command-line helpers.  Every message names the subcommand, the
 * flag and the value, so a script's log says what to fix. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

bool cli_is(const char *a, const char *b1, const char *b2) {
    return strcmp(a, b1) == 0 || (b2 && strcmp(a, b2) == 0);
}

void cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "offkv %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_error(cmd, "flag %s needs a value (see offkv %s --help)", argv[*i], cmd);
        return NULL;
    }
    return argv[++*i];
}

bool cli_int(const char *cmd, const char *flag, const char *v, long long lo, long long hi, int32_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        cli_error(cmd, "bad value '%s' for %s: expected an integer in %lld..%lld", v, flag, lo, hi);
        return false;
    }
    *out = (int32_t)x;
    return true;
}

bool cli_u64(const char *cmd, const char *flag, const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    /* strtoull accepts "-1" and wraps it; a seed of -1 is not what anyone means. */
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || strchr(v, '-')) {
        cli_error(cmd, "bad value '%s' for %s: expected an unsigned integer", v, flag);
        return false;
    }
    *out = (uint64_t)x;
    return true;
}

bool cli_float(const char *cmd, const char *flag, const char *v, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi) {
        cli_error(cmd, "bad value '%s' for %s: expected a number in %g..%g", v, flag, lo, hi);
        return false;
    }
    *out = (float)x;
    return true;
}

bool cli_choice(const char *cmd, const char *flag, const char *v, const char *const *choices, int *out) {
    for (int i = 0; choices[i]; i++) {
        if (strcmp(v, choices[i]) == 0) {
            *out = i;
            return true;
        }
    }
    char list[256] = "";
    for (int i = 0; choices[i]; i++) {
        if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, choices[i], sizeof list - strlen(list) - 1);
    }
    cli_error(cmd, "bad value '%s' for %s: expected one of %s", v, flag, list);
    return false;
}

int cli_unknown(const char *cmd, const char *flag) {
    cli_error(cmd, "unknown flag '%s' (see offkv %s --help)", flag, cmd);
    return CLI_USAGE;
}

bool cli_model_file_ok(const char *cmd, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        cli_error(cmd, "model file '%s' not found: %s", path, strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        cli_error(cmd, "model file '%s' is not a regular file", path);
        return false;
    }
    return true;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *cli_bytes(size_t n, char *buf, size_t cap) {
    if (n >= (size_t)1 << 30) snprintf(buf, cap, "%.2f GiB", (double)n / (double)(1u << 30));
    else if (n >= (size_t)1 << 20) snprintf(buf, cap, "%.2f MiB", (double)n / (double)(1u << 20));
    else if (n >= (size_t)1 << 10) snprintf(buf, cap, "%.2f KiB", (double)n / 1024.0);
    else snprintf(buf, cap, "%zu B", n);
    return buf;
}
