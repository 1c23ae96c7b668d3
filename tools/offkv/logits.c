/* offkv logits: the logits after every token of a sequence, as a raw file
 * (n x n_vocab float32, little-endian) that tests compare with llama.cpp's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "offkv/outfile.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv logits -m MODEL --tokens ID,ID,... -o FILE [flags]\n"
            "Evaluates the tokens at positions 0..n-1, CHUNK tokens per eval, and writes n x n_vocab\n"
            "float32 little-endian to FILE: row i = the logits after token i.\n\n"
            "  -m, --model FILE      GGUF model\n"
            "  --tokens LIST         comma-separated token ids\n"
            "  -o, --output FILE     file to write\n"
            "  --chunk N             tokens per eval (default 512; the cache's max_write)\n"
            "  --kv-type T           K/V cache storage: f32 (default: exact, for comparisons), f16 or q8_0\n"
            "  -t, --threads N       threads (default 1)\n"
            "  --sliding-window N    give every layer of a llama model a window of N positions\n"
            "  -h, --help            this help\n");
}

static int32_t *parse_tokens(const char *cmd, const char *s, int32_t *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return NULL;
    *n = 0;
    const char *p = s;
    for (;;) {
        /* Digits only: strtol alone would take " 1", "+1" and "-0". */
        char *end;
        errno = 0;
        long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : (end = (char *)p, 0);
        if (end == p || (*end && *end != ',')) {
            cli_error(cmd, "bad value '%s' for --tokens: expected comma-separated ids, digits only (at '%.20s')", s,
                      p);
            free(ids);
            return NULL;
        }
        if (errno || v > INT32_MAX) {
            cli_error(cmd, "bad value '%s' for --tokens: id '%.*s' is out of range", s, (int)(end - p), p);
            free(ids);
            return NULL;
        }
        ids[(*n)++] = (int32_t)v;
        if (!*end) break;
        p = end + 1;
    }
    return ids;
}

/* The file format is little-endian whatever the host is. */
static int write_le_f32(FILE *f, const float *x, size_t n) {
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe == 1) return fwrite(x, sizeof *x, n, f) == n;
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4], le[4];
        memcpy(b, &x[i], 4);
        for (int k = 0; k < 4; k++) le[k] = b[3 - k];
        if (fwrite(le, 1, 4, f) != 4) return 0;
    }
    return 1;
}

int cmd_logits(int argc, char **argv) {
    const char *cmd = "logits", *model = NULL, *tokens_arg = NULL, *out_path = NULL, *v;
    int32_t chunk = 512, threads = 1, window = 0;
    int kv = 0;
    static const char *const kv_types[] = {"f32", "f16", "q8_0", NULL};
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        if (!(cli_is(a, "-m", "--model") || cli_is(a, "--tokens", NULL) || cli_is(a, "-o", "--output") ||
              cli_is(a, "--chunk", "--kv-type") || cli_is(a, "-t", "--threads") || cli_is(a, "--sliding-window", NULL)))
            return cli_unknown(cmd, a);
        if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
        bool ok = true;
        if (cli_is(a, "-m", "--model")) model = v;
        else if (cli_is(a, "--tokens", NULL)) tokens_arg = v;
        else if (cli_is(a, "-o", "--output")) out_path = v;
        else if (cli_is(a, "--chunk", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 20, &chunk);
        else if (cli_is(a, "--kv-type", NULL)) ok = cli_choice(cmd, a, v, kv_types, &kv);
        else if (cli_is(a, "-t", "--threads")) ok = cli_int(cmd, a, v, 1, 1024, &threads);
        else ok = cli_int(cmd, a, v, 1, 1 << 24, &window);
        if (!ok) return CLI_USAGE;
    }
    if (!model || !tokens_arg || !out_path) {
        cli_error(cmd, "%s is required (see offkv logits --help)",
                  !model ? "-m MODEL" : !tokens_arg ? "--tokens LIST" : "-o FILE");
        return CLI_USAGE;
    }
    if (!out_path[0]) {
        cli_error(cmd, "bad value '' for -o: an empty path names no file");
        return CLI_USAGE;
    }
    /* Writing over the model would truncate the file its weights are mapped from. */
    struct stat model_st, out_st;
    if (stat(model, &model_st) == 0 && stat(out_path, &out_st) == 0 && model_st.st_dev == out_st.st_dev &&
        model_st.st_ino == out_st.st_ino) {
        cli_error(cmd, "bad value '%s' for -o: it is the model file itself", out_path);
        return CLI_USAGE;
    }
    int32_t n = 0;
    int32_t *ids = parse_tokens(cmd, tokens_arg, &n);
    if (!ids) return CLI_USAGE;

    int rc = CLI_FAIL;
    okv_context *ctx = NULL;
    float *logits = NULL;
    int32_t *pos = NULL;
    okv_outfile out = {0};
    okv_model *m = cli_load_model(cmd, model, window, threads, &rc);
    if (!m) goto done;
    rc = CLI_FAIL;
    const int32_t n_vocab = okv_model_n_vocab(m);
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] >= n_vocab) {
            cli_error(cmd, "bad value '%d' in --tokens (position %d): the vocabulary has %d tokens", (int)ids[i],
                      (int)i, (int)n_vocab);
            rc = CLI_USAGE;
            goto done;
        }
    }
    if (chunk > n) chunk = n;
    cli_ctx_opts o = {.n_threads = threads, .capacity = n, .max_write = chunk, .kv_type = kv_types[kv]};
    if (!(ctx = cli_context(cmd, m, &o))) goto done;
    logits = malloc((size_t)chunk * (size_t)n_vocab * sizeof *logits);
    pos = malloc((size_t)chunk * sizeof *pos);
    if (!logits || !pos) {
        cli_error(cmd, "out of memory for %d x %d logits", (int)chunk, (int)n_vocab);
        goto done;
    }
    okv_error oerr = {0};
    if (okv_outfile_open(&out, out_path, &oerr) != OKV_OK) {
        cli_error(cmd, "%s", oerr.message);
        goto done;
    }
    for (int32_t start = 0; start < n; start += chunk) {
        int32_t len = n - start < chunk ? n - start : chunk;
        for (int32_t i = 0; i < len; i++) pos[i] = start + i;
        okv_error err = {0};
        if (okv_context_eval(ctx, ids + start, pos, len, logits, &err) != OKV_OK) {
            cli_error(cmd, "eval of positions %d..%d: %s", (int)start, (int)(start + len - 1), err.message);
            goto done;
        }
        if (!write_le_f32(out.f, logits, (size_t)len * (size_t)n_vocab)) {
            cli_error(cmd, "writing '%s': %s", out_path, strerror(errno));
            goto done;
        }
    }
    if (okv_outfile_commit(&out, &oerr) != OKV_OK) {
        cli_error(cmd, "%s", oerr.message);
        goto done;
    }
    fprintf(stderr, "offkv logits: wrote %d x %d logits to %s (chunks of %d, %s KV)\n", (int)n, (int)n_vocab, out_path,
            (int)chunk, kv_types[kv]);
    rc = CLI_OK;
done:
    okv_outfile_discard(&out); /* a partial file would pass for a short sequence */
    free(pos);
    free(logits);
    okv_context_free(ctx);
    okv_model_free(m);
    free(ids);
    return rc;
}
