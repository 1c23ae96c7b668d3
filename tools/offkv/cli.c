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
#include "offkv/prompt_cache.h"
#include "offkv/chat.h"
#include "offkv/gguf.h"

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

int32_t *cli_tokenize(const char *cmd, const okv_tokenizer *tok, const char *text, unsigned flags, size_t *n) {
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

static size_t utf8_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    unsigned cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

void cli_json_string(FILE *f, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    putc('"', f);
    for (size_t i = 0; i < n;) {
        const unsigned char c = u[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c);
        else {
            const size_t len = utf8_len(u + i, n - i);
            if (len == 0) fputs("\\ufffd", f), i++;
            else fwrite(u + i, 1, len, f), i += len;
            continue;
        }
        i++;
    }
    putc('"', f);
}

/* A prompt of several chunks shows its progress: a long one takes minutes. */
int32_t cli_prefill(const char *cmd, okv_context *ctx, const int32_t *ids, int32_t from, int32_t n, int32_t chunk,
                    int32_t *pos, float *logits, const volatile sig_atomic_t *stop) {
    const bool show = n - from > chunk;
    int32_t start = from;
    for (; start < n && !(stop && *stop); start += chunk) {
        int32_t len = n - start < chunk ? n - start : chunk;
        for (int32_t i = 0; i < len; i++) pos[i] = start + i;
        if (show) cli_status("offkv %s: prompt: %d of %d tokens evaluated", cmd, (int)(start - from), (int)(n - from));
        okv_error err = {0};
        /* Only the last chunk's last row is needed: skip the output layer before it. */
        if (okv_context_eval_last(ctx, ids + start, pos, len, start + len == n ? logits : NULL, &err) != OKV_OK) {
            if (show) cli_status_clear();
            cli_error(cmd, "prompt eval of positions %d..%d: %s", (int)start, (int)(start + len - 1), err.message);
            return -1;
        }
    }
    if (show) cli_status_clear();
    return start < n ? start : n;
}

bool cli_put_text(const char *cmd, const char *text, size_t n) {
    if (n && fwrite(text, 1, n, stdout) != n) {
        cli_error(cmd, "writing standard output: %s", strerror(errno));
        return false;
    }
    return cli_flush_stdout(cmd);
}

bool cli_emit(const char *cmd, const okv_tokenizer *tok, okv_detok_stream *us, int32_t id) {
    char small[256], *buf = small;
    size_t n = 0;
    okv_error err = {0};
    okv_status st = okv_tokenizer_token_to_piece(tok, id, 0, buf, sizeof small, &n, &err);
    if (st != OKV_OK && n > sizeof small && (buf = malloc(n))) /* a piece longer than most */
        st = okv_tokenizer_token_to_piece(tok, id, 0, buf, n, &n, &err);
    if (st != OKV_OK || !buf) {
        cli_error(cmd, "token %d: %s", (int)id, buf ? err.message : "out of memory for its text");
        if (buf != small) free(buf);
        return false;
    }
    char out_small[3 * (sizeof small + 4)]; /* OKV_DETOK_ROOM(sizeof small) */
    char *out = n <= sizeof small ? out_small : malloc(OKV_DETOK_ROOM(n));
    bool ok = out != NULL;
    if (ok) ok = cli_put_text(cmd, out, okv_detok_stream_feed(us, buf, n, out));
    else cli_error(cmd, "token %d: out of memory for its text", (int)id);
    if (out != out_small) free(out);
    if (buf != small) free(buf);
    return ok;
}

bool cli_is_sampling_flag(const char *a) { return cli_is(a, "--temp", "--top-k") || cli_is(a, "--top-p", "--seed"); }

okv_sampler_params cli_sampling_defaults(void) {
    return (okv_sampler_params){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 0};
}

void cli_sampling_seed(okv_sampler_params *sp, bool seed_given) {
    if (!seed_given) sp->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

bool cli_sampling_flag(const char *cmd, const char *a, const char *v, okv_sampler_params *sp, bool *seed_given) {
    if (cli_is(a, "--temp", NULL)) return cli_float(cmd, a, v, 0.0, 1e6, &sp->temperature);
    if (cli_is(a, "--top-k", NULL)) return cli_int(cmd, a, v, 0, 1 << 24, &sp->top_k);
    if (cli_is(a, "--seed", NULL)) return *seed_given = cli_u64(cmd, a, v, &sp->seed);
    char *end;
    const double p = strtod(v, &end);
    /* (float)p > 0: a p that rounds to 0 would silently mean something else */
    if (end != v && !*end && p > 0.0 && p <= 1.0 && (float)p > 0.0f) {
        sp->top_p = (float)p;
        return true;
    }
    cli_error(cmd, "bad value '%s' for --top-p: expected a number in (0, 1] that does not round to 0", v);
    return false;
}

okv_chat_template *cli_chat_template(const char *cmd, const char *model, const char *tfile, const char *how) {
    okv_error err;
    okv_chat_template *t = NULL;
    if (tfile) {
        size_t n;
        char *text = cli_read_text(cmd, how, tfile, &n);
        if (!text) return NULL;
        t = okv_chat_template_parse(text, n, &err);
        free(text);
        if (!t) cli_error(cmd, "%s: %s", tfile, err.message);
        return t;
    }
    if (!cli_model_file_ok(cmd, model)) return NULL;
    okv_gguf *g = okv_gguf_open(model, &err);
    if (g) t = okv_chat_template_from_gguf(g, &err);
    okv_gguf_close(g);
    if (!t && err.status == OKV_ERR_NOT_FOUND)
        cli_error(cmd, "%s has no chat template (tokenizer.chat_template): give one with %s", model, how);
    else if (!t)
        cli_error(cmd, "%s: %s", model, err.message);
    return t;
}

const char *const cli_kv_types[] = {"f16", "f32", "q8_0", NULL};

bool cli_prompt_cache_path_ok(const char *cmd, const char *path) {
    if (!path[0]) {
        cli_error(cmd, "--prompt-cache: the path is empty");
        return false;
    }
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) {
            cli_error(cmd, "--prompt-cache '%s': not a regular file", path);
            return false;
        }
        if (access(path, R_OK) != 0) {
            cli_error(cmd, "--prompt-cache '%s': %s", path, strerror(errno));
            return false;
        }
    } else if (errno != ENOENT) {
        cli_error(cmd, "--prompt-cache '%s': %s", path, strerror(errno));
        return false;
    }
    /* Its folder: what comes before the last '/' ("/" itself for "/x"). */
    const char *slash = strrchr(path, '/');
    char folder[4096];
    if (!slash) snprintf(folder, sizeof folder, ".");
    else if ((size_t)(slash - path) >= sizeof folder) {
        cli_error(cmd, "--prompt-cache: the path is longer than %zu bytes", sizeof folder);
        return false;
    } else snprintf(folder, sizeof folder, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (stat(folder, &sb) != 0) {
        cli_error(cmd, "--prompt-cache '%s': the folder '%s' %s", path, folder,
                  errno == ENOENT ? "does not exist" : strerror(errno));
        return false;
    }
    if (!S_ISDIR(sb.st_mode)) {
        cli_error(cmd, "--prompt-cache '%s': '%s' is not a folder", path, folder);
        return false;
    }
    if (access(folder, W_OK | X_OK) != 0) {
        cli_error(cmd, "--prompt-cache '%s': cannot write in the folder '%s': %s", path, folder, strerror(errno));
        return false;
    }
    return true;
}

volatile sig_atomic_t cli_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    cli_interrupted = 1;
}

void cli_sigint_catch(bool once, struct sigaction *old) {
    cli_interrupted = 0;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sa.sa_flags = once ? SA_RESETHAND : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, old);
}

void cli_sigint_release(const struct sigaction *old) { sigaction(SIGINT, old, NULL); }

bool cli_prompt_cache_save(const char *cmd, const okv_cache *cache, const char *path, uint64_t fingerprint,
                           const int32_t *tokens, int32_t n) {
    okv_error err;
    if (okv_cache_save(cache, path, fingerprint, tokens, n, &err) == OKV_OK) return true;
    cli_error(cmd, "--prompt-cache: the cache was not saved: %s", err.message);
    return false;
}
