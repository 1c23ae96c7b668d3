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
#include <unistd.h>

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
    if (x != 0.0 && (float)x == 0.0f) {
        /* It would silently mean 0, which is something else (greedy, for --temp). */
        cli_error(cmd, "bad value '%s' for %s: too small, it rounds to 0 in single precision", v, flag);
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

char *cli_read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *p = malloc(cap);
    int e = p ? 0 : ENOMEM;
    while (p) {
        len += fread(p + len, 1, cap - len - 1, f);
        if (ferror(f)) {
            e = errno ? errno : EIO;
            break;
        }
        if (feof(f)) break;
        char *q = cap <= SIZE_MAX / 2 ? realloc(p, cap * 2) : NULL;
        if (!q) {
            e = ENOMEM;
            break;
        }
        p = q;
        cap *= 2;
    }
    fclose(f);
    if (e) {
        free(p);
        errno = e;
        return NULL;
    }
    p[len] = '\0';
    if (n) *n = len;
    return p;
}

char *cli_read_text(const char *cmd, const char *what, const char *path, size_t *n) {
    size_t len = 0;
    char *p = cli_read_all(path, &len);
    if (!p) {
        cli_error(cmd, "%s '%s': %s", what, path, strerror(errno));
        return NULL;
    }
    if (strlen(p) != len) {
        cli_error(cmd, "%s '%s' holds a NUL byte at offset %zu", what, path, strlen(p));
        free(p);
        return NULL;
    }
    if (n) *n = len;
    return p;
}

bool cli_flush_stdout(const char *cmd) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(cmd, "writing standard output: %s", strerror(errno));
        return false;
    }
    return true;
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

bool cli_status_on(void) { return isatty(STDERR_FILENO); }

void cli_status(const char *fmt, ...) {
    if (!cli_status_on()) return;
    va_list ap;
    va_start(ap, fmt);
    fputc('\r', stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\033[K", stderr);
    fflush(stderr);
}

void cli_status_clear(void) {
    if (!cli_status_on()) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
}

static void print_progress(void *user, const char *stage, uint64_t done, uint64_t total) {
    char a[32], b[32];
    cli_status("offkv %s: %s the weights: %3d %% (%s of %s)", (const char *)user, stage, total ? (int)(100 * done / total) : 100,
               cli_bytes(done, a, sizeof a), cli_bytes(total, b, sizeof b));
    if (done == total) cli_status_clear();
}

okv_model_progress cli_load_progress(void) { return cli_status_on() ? print_progress : NULL; }

okv_model *cli_load_model(const char *cmd, const char *path, int32_t sliding_window, int32_t n_threads, int *rc) {
    *rc = CLI_FAIL;
    if (!cli_model_file_ok(cmd, path)) return NULL;
    char sw[16], nt[16];
    snprintf(sw, sizeof sw, "%d", (int)sliding_window);
    snprintf(nt, sizeof nt, "%d", (int)n_threads);
    const char *opts[] = {"n_threads", nt, "sliding_window", sw, NULL};
    if (sliding_window <= 0) opts[2] = NULL;
    okv_error err = {0};
    okv_model *m = okv_model_load_progress(path, opts, cli_load_progress(), (void *)cmd, &err);
    if (!m && sliding_window > 0 && err.status == OKV_ERR_INVALID) {
        /* The file is fine; the flag does not apply to it: a usage error. */
        cli_error(cmd, "bad value '%d' for --sliding-window: %s", (int)sliding_window, err.message);
        *rc = CLI_USAGE;
    } else if (!m) {
        cli_error(cmd, "cannot load model '%s': %s", path, err.message);
    }
    return m;
}

/* Short flags and their long names, so that -m and --model count as one
 * (NULL: every command; the first match wins). */
static const char *const flag_aliases[][3] = {
    {"bench", "-p", "--n-prompt"}, {"bench", "-n", "--n-gen"},
    {NULL, "-m", "--model"}, {NULL, "-p", "--prompt"}, {NULL, "-n", "--n-predict"}, {NULL, "-t", "--threads"},
    {NULL, "-c", "--ctx-size"}, {NULL, "-o", "--output"}, {NULL, "-r", "--repetitions"}, {NULL, "-d", "--n-depth"},
};

bool cli_once(cli_seen *seen, const char *cmd, const char *flag) {
    const char *name = flag;
    for (size_t i = 0; i < sizeof flag_aliases / sizeof flag_aliases[0]; i++) {
        const char *const *al = flag_aliases[i];
        if ((!al[0] || strcmp(al[0], cmd) == 0) && strcmp(flag, al[1]) == 0) {
            name = al[2];
            break;
        }
    }
    for (int i = 0; i < seen->n; i++) {
        if (strcmp(seen->names[i], name) == 0) {
            cli_error(cmd, "flag %s is given twice (as %s the second time): which one is meant?", name, flag);
            return false;
        }
    }
    if (seen->n < (int)(sizeof seen->names / sizeof seen->names[0])) seen->names[seen->n++] = name;
    return true;
}

bool cli_given(const cli_seen *seen, const char *flag) {
    for (int i = 0; i < seen->n; i++)
        if (strcmp(seen->names[i], flag) == 0) return true;
    return false;
}

okv_context *cli_context(const char *cmd, okv_model *m, const cli_ctx_opts *o) {
    char nt[16], cap[16], mw[16], ic[16];
    const char *opts[16];
    int k = 0;
#define OPT(key, buf, v)                          \
    do {                                          \
        if ((v) > 0) {                            \
            snprintf(buf, sizeof buf, "%d", (int)(v)); \
            opts[k++] = key;                      \
            opts[k++] = buf;                      \
        }                                         \
    } while (0)
    OPT("n_threads", nt, o->n_threads);
    OPT("capacity", cap, o->capacity);
    OPT("max_write", mw, o->max_write);
    OPT("initial_capacity", ic, o->initial_capacity);
#undef OPT
    if (o->kv_type) {
        opts[k++] = "kv_type";
        opts[k++] = o->kv_type;
    }
    opts[k] = NULL;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0 && o->n_threads > cores && !o->draft)
        fprintf(stderr,
                "offkv %s: warning: -t %d is more threads than this machine's %ld cores: they will wait on "
                "each other, and decode can run many times slower than with -t %ld\n",
                cmd, (int)o->n_threads, cores, cores);
    const int32_t trained = okv_model_n_ctx_train(m);
    if (trained > 0 && o->capacity > trained)
        fprintf(stderr,
                "offkv %s: warning: a context of %d positions exceeds the %smodel's training context of %d: past "
                "it the %smodel runs on positions it never learned, and its output may degrade\n",
                cmd, (int)o->capacity, o->draft ? "draft " : "", (int)trained, o->draft ? "draft " : "");
    okv_error err = {0};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    if (!ctx) cli_error(cmd, "cannot create a context: %s", err.message);
    return ctx;
}

int32_t *cli_tokenize(const char *cmd, const okv_tokenizer *tok, const char *text, bool add_special, size_t *n) {
    unsigned flags = add_special ? OKV_TOKENIZE_ADD_SPECIAL : 0;
    okv_error err = {0};
    size_t need = 0;
    if (okv_tokenizer_encode(tok, text, strlen(text), flags, NULL, 0, &need, &err) != OKV_OK && need == 0) {
        cli_error(cmd, "cannot tokenize the prompt: %s", err.message);
        return NULL;
    }
    int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    if (!ids) {
        cli_error(cmd, "out of memory for %zu tokens", need);
        return NULL;
    }
    if (okv_tokenizer_encode(tok, text, strlen(text), flags, ids, need, n, &err) != OKV_OK) {
        cli_error(cmd, "cannot tokenize the prompt: %s", err.message);
        free(ids);
        return NULL;
    }
    return ids;
}

void cli_cache_bytes_by_kind(const okv_cache *c, cli_cache_kinds *k) {
    memset(k, 0, sizeof *k);
    for (int32_t l = 0; l < okv_cache_n_layers(c); l++) {
        okv_layer_geometry g;
        okv_cache_layer_geometry(c, l, &g);
        if (g.kv_from > 0) {
            /* what it would hold with its own K/V: what its donor holds */
            k->saved += okv_cache_layer_bytes(c, g.kv_from - 1);
            k->n_shared++;
        } else if (g.window > 0) {
            k->ring += okv_cache_layer_bytes(c, l);
            k->n_ring++;
        } else {
            k->flat += okv_cache_layer_bytes(c, l);
            k->n_flat++;
        }
    }
}

const char *cli_cache_line(const okv_cache *c, char *buf, size_t cap) {
    cli_cache_kinds k;
    cli_cache_bytes_by_kind(c, &k);
    char b0[32], b1[32], b2[32], b3[32];
    int n = snprintf(buf, cap, "cache %s for %d positions: %d flat layers %s, %d ring layers %s",
                     cli_bytes(okv_cache_bytes(c), b0, sizeof b0), (int)okv_cache_length(c), k.n_flat,
                     cli_bytes(k.flat, b1, sizeof b1), k.n_ring, cli_bytes(k.ring, b2, sizeof b2));
    if (k.n_shared && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ", %d layers sharing K/V (%s saved)", k.n_shared,
                 cli_bytes(k.saved, b3, sizeof b3));
    return buf;
}

int32_t cli_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int32_t)n;
}
