/* The offkv program, run as a user runs it (posix_spawn of $OKV_BIN/offkv,
 * stdout and stderr captured): help and flag errors, synth's determinism
 * and file contents, and tokenize / logits / run / bench on a synthetic
 * model, cross-checked against each other and against the file. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "cli_run.h"
#include "gguf_copy.h"
#include "golden.h"
#include "kernels/quant.h"
#include "offkv/tokenizer.h"
#include "offkv/offkv.h"

/* offkv(args..., NULL): runs the program for at most two minutes (a run
 * that blocks is killed and reported, not left to hang the suite). */
#define offkv(...) cli_run(120.0, __VA_ARGS__)

static bool same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = golden_read(a, &na), *y = golden_read(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}


#define CHECK_ERR_HAS(needle) \
    CHECK(strstr(cli_err, (needle)) != NULL, "stderr lacks '%s': %s", (needle), cli_err)

static void test_help_and_flags(void) {
    CHECK(offkv("--help", NULL) == 0, "offkv --help: %s", cli_err);
    CHECK(strstr(cli_out, "synth") && strstr(cli_out, "bench"), "help lists commands: %s", cli_out);
    static const char *const cmds[] = {"run", "logits", "tokenize", "synth", "bench", "chat"};
    static const char *const flag[] = {"--top-p", "--tokens", "-p, --prompt", "--n-head-kv", "--n-depth",
                                       "--chat-template-file"};
    for (int i = 0; i < 6; i++) {
        CHECK(offkv(cmds[i], "--help", NULL) == 0, "%s --help exits 0", cmds[i]);
        CHECK(strstr(cli_out, flag[i]) != NULL, "%s --help lacks %s", cmds[i], flag[i]);
        CHECK(offkv(cmds[i], "--no-such-flag", NULL) == 2, "%s with a bad flag exits 2", cmds[i]);
        CHECK_ERR_HAS("--no-such-flag");
    }
    CHECK(offkv("frobnicate", NULL) == 2, "unknown command");
    CHECK_ERR_HAS("frobnicate");
    CHECK(offkv(NULL) == 2, "no command");

    char p[4200];
    cli_path(p, sizeof p, "x.gguf");
    CHECK(offkv("synth", "--n-embd", "sixty", "-o", p, NULL) == 2, "bad --n-embd");
    CHECK_ERR_HAS("--n-embd");
    CHECK_ERR_HAS("sixty");
    CHECK(offkv("synth", "--type", "q5_k", "-o", p, NULL) == 2, "bad --type");
    CHECK_ERR_HAS("q5_k");
    CHECK(offkv("synth", "--n-head", "3", "-o", p, NULL) == 2, "n_embd 64 over 3 heads");
    CHECK_ERR_HAS("--n-head");
    CHECK(offkv("synth", "--seed", NULL) == 2, "flag without a value");
    CHECK_ERR_HAS("--seed");
    CHECK(offkv("run", "-m", "/nonexistent/model.gguf", NULL) == 1, "missing model");
    CHECK_ERR_HAS("/nonexistent/model.gguf");
    CHECK_ERR_HAS("not found");
    CHECK(offkv("run", "-m", "x", "--temp", "-1", NULL) == 2, "negative temperature");
    CHECK_ERR_HAS("--temp");
    CHECK(offkv("run", "-m", "x", "--kv-type", "q8", NULL) == 2, "bad kv type");
    CHECK_ERR_HAS("'q8'");
    CHECK(offkv("logits", "-m", "x", "--tokens", "1,,2", "-o", p, NULL) == 2, "bad token list");
    CHECK_ERR_HAS("--tokens");
}

/* A string token's id in the file's vocabulary, or -1. */
static int32_t vocab_id(const okv_gguf *g, const char *s) {
    uint64_t n = 0;
    okv_gguf_get_array(g, "tokenizer.ggml.tokens", NULL, &n, NULL);
    for (uint64_t i = 0; i < n; i++) {
        const char *t;
        size_t len;
        if (okv_gguf_array_str(g, "tokenizer.ggml.tokens", i, &t, &len, NULL) == OKV_OK && len == strlen(s) &&
            memcmp(t, s, len) == 0)
            return (int32_t)i;
    }
    return -1;
}

static const okv_gguf_tensor *tensor(const okv_gguf *g, const char *name) {
    return okv_gguf_tensor_at(g, okv_gguf_find_tensor(g, name));
}

static void test_synth(const char *f32_path) {
    char a[4200], b[4200], q8[4200], q4[4200];
    cli_path(a, sizeof a, "synth-a.gguf");
    cli_path(b, sizeof b, "synth-b.gguf");
    cli_path(q8, sizeof q8, "synth-q8.gguf");
    cli_path(q4, sizeof q4, "synth-q4.gguf");
    CHECK(offkv("synth", "--seed", "5", "-o", a, NULL) == 0, "synth: %s", cli_err);
    CHECK(offkv("synth", "--seed", "5", "-t", "1", "-o", b, NULL) == 0, "synth: %s", cli_err);
    CHECK(same_bytes(a, b), "same seed, different thread counts: files differ");
    CHECK(same_bytes(a, f32_path), "same seed twice: files differ");
    CHECK(offkv("synth", "--seed", "6", "-o", b, NULL) == 0, "synth: %s", cli_err);
    CHECK(!same_bytes(a, b), "seeds 5 and 6 gave the same file");
    CHECK(offkv("synth", "--seed", "5", "--type", "q8_0", "-o", q8, NULL) == 0, "synth q8_0: %s", cli_err);
    CHECK(offkv("synth", "--seed", "5", "--type", "q4_0", "-o", q4, NULL) == 0, "synth q4_0: %s", cli_err);

    okv_error err;
    okv_gguf *g = okv_gguf_open(a, &err);
    okv_gguf *g8 = okv_gguf_open(q8, &err);
    okv_gguf *g4 = okv_gguf_open(q4, &err);
    CHECK(g && g8 && g4, "open synth files: %s", err.message);
    if (!g || !g8 || !g4) goto out;
    char arch[32] = "";
    okv_gguf_get_str_buf(g, "general.architecture", arch, sizeof arch, &err);
    CHECK(strcmp(arch, "llama") == 0, "arch '%s'", arch);
    CHECK(okv_gguf_version(g) == 3, "version %u", okv_gguf_version(g));
    uint32_t u = 0;
    CHECK(okv_gguf_get_u32(g, "llama.attention.head_count_kv", &u, &err) == OKV_OK && u == 2, "head_count_kv %u", u);
    CHECK(okv_gguf_get_u32(g8, "general.file_type", &u, &err) == OKV_OK && u == 7, "q8_0 file_type %u", u);
    const okv_gguf_tensor *te = tensor(g, "token_embd.weight");
    CHECK(te && te->ne[0] == 64 && te->ne[1] == 512 && te->type == OKV_GGML_F32, "token_embd shape");
    const okv_gguf_tensor *tk = tensor(g, "blk.1.attn_k.weight");
    CHECK(tk && tk->ne[0] == 64 && tk->ne[1] == 32, "attn_k [64, 32]");
    const okv_gguf_tensor *td = tensor(g, "blk.1.ffn_down.weight");
    CHECK(td && td->ne[0] == 172 && td->ne[1] == 64, "ffn_down [172, 64]");
    CHECK(tensor(g, "output.weight") && tensor(g, "output_norm.weight") && tensor(g, "blk.0.ffn_norm.weight"),
          "output, output_norm, ffn_norm present");
    CHECK(!tensor(g, "blk.2.attn_q.weight"), "only 2 layers");
    /* ffn_down's 172-wide rows cannot be 32-blocks: llama.cpp keeps them f16 */
    const okv_gguf_tensor *q8d = tensor(g8, "blk.0.ffn_down.weight");
    CHECK(q8d && q8d->type == OKV_GGML_F16, "q8_0 file: ffn_down type %d", q8d ? (int)q8d->type : -1);
    const okv_gguf_tensor *q8n = tensor(g8, "blk.0.attn_norm.weight");
    CHECK(q8n && q8n->type == OKV_GGML_F32, "norms stay f32");

    /* The quantized files hold the f32 file's values, quantized: each
     * dequantized value is within one quantization step of its source. */
    const okv_gguf_tensor *f = tensor(g, "blk.0.ffn_gate.weight");
    const okv_gguf_tensor *t8 = tensor(g8, "blk.0.ffn_gate.weight"), *t4 = tensor(g4, "blk.0.ffn_gate.weight");
    CHECK(t8 && t8->type == OKV_GGML_Q8_0 && t4 && t4->type == OKV_GGML_Q4_0, "quantized ffn_gate types");
    if (f && t8 && t4 && t8->type == OKV_GGML_Q8_0 && t4->type == OKV_GGML_Q4_0) {
        const float *src = f->data;
        float row[64];
        double worst8 = 0, worst4 = 0, amax = 0;
        for (int64_t r = 0; r < f->ne[1]; r++) {
            okv_dequantize_row_q8_0((const block_q8_0 *)t8->data + r * 2, row, 64);
            for (int i = 0; i < 64; i++) worst8 = fmax(worst8, fabs(row[i] - src[r * 64 + i]));
            okv_dequantize_row_q4_0((const block_q4_0 *)t4->data + r * 2, row, 64);
            for (int i = 0; i < 64; i++) {
                worst4 = fmax(worst4, fabs(row[i] - src[r * 64 + i]));
                amax = fmax(amax, fabs(src[r * 64 + i]));
            }
        }
        CHECK(amax > 0.02 && amax < 0.04, "weights uniform in +-0.0346: max |w| %g", amax);
        CHECK(worst8 <= amax / 127.0, "q8_0 error %g > step %g", worst8, amax / 127.0);
        CHECK(worst4 <= amax / 8.0 && worst4 > worst8, "q4_0 error %g (q8_0 %g, step %g)", worst4, worst8, amax / 8.0);
    }

    /* vocabulary: specials, byte tokens, then pieces */
    const char *t;
    size_t len;
    int64_t ty = -1;
    CHECK(okv_gguf_array_str(g, "tokenizer.ggml.tokens", 3, &t, &len, &err) == OKV_OK && len == 6 &&
              memcmp(t, "<0x00>", 6) == 0, "token 3 is <0x00>");
    CHECK(okv_gguf_array_i64(g, "tokenizer.ggml.token_type", 258, &ty, &err) == OKV_OK && ty == 6, "token 258 type %lld",
          (long long)ty);
    CHECK(okv_gguf_array_str(g, "tokenizer.ggml.tokens", 258, &t, &len, &err) == OKV_OK && len == 6 &&
              memcmp(t, "<0xFF>", 6) == 0, "token 258 is <0xFF>");
    CHECK(vocab_id(g, "\xe2\x96\x81Once") > 258, "'\xe2\x96\x81Once' is a piece");
    uint64_t nv = 0;
    okv_gguf_get_array(g, "tokenizer.ggml.tokens", NULL, &nv, &err);
    CHECK(nv == 512, "512 tokens, got %llu", (unsigned long long)nv);
    CHECK(okv_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &u, &err) == OKV_OK && u == 2, "eos 2");
out:
    okv_gguf_close(g);
    okv_gguf_close(g8);
    okv_gguf_close(g4);
}

static void test_synth_archs(void) {
    char p[4200];
    cli_path(p, sizeof p, "synth-muse.gguf");
    CHECK(offkv("synth", "--arch", "muse-glimmer", "--n-layer", "4", "--sliding-window-pattern", "1110",
                "--softcap", "15", "--head-dim", "16", "-o", p, NULL) == 0, "synth muse-glimmer: %s", cli_err);
    okv_error err;
    okv_gguf *g = okv_gguf_open(p, &err);
    CHECK(g != NULL, "open: %s", err.message);
    if (!g) return;
    bool b = true;
    CHECK(okv_gguf_array_bool(g, "muse-glimmer.attention.sliding_window_pattern", 3, &b, &err) == OKV_OK && !b,
          "pattern[3] is global");
    float c = 0;
    CHECK(okv_gguf_get_f32(g, "muse-glimmer.final_logit_softcapping", &c, &err) == OKV_OK && c == 15.0f, "softcap");
    CHECK(okv_gguf_find_tensor(g, "blk.3.attn_gate.weight") >= 0, "attn_gate present");
    CHECK(okv_gguf_find_tensor(g, "blk.3.post_ffw_norm.weight") >= 0, "post_ffw_norm present");
    okv_gguf_close(g);
    CHECK(offkv("synth", "--arch", "muse-glimmer", "--n-layer", "4", "--sliding-window-pattern", "111", "-o", p,
                NULL) == 2, "3 pattern entries for 4 layers");
    CHECK_ERR_HAS("--sliding-window-pattern");
}

/* The mixture-of-experts architectures: expert tensors of three dimensions,
 * MXFP4_MOE's types, presets overridden by flags, and errors. */
static void test_synth_moe(void) {
    char p[4200];
    cli_path(p, sizeof p, "synth-gpt-oss.gguf");
    CHECK(offkv("synth", "--arch", "gpt-oss", "--type", "mxfp4_moe", "-o", p, NULL) == 0, "synth gpt-oss: %s",
          cli_err);
    okv_error err;
    okv_gguf *g = okv_gguf_open(p, &err);
    CHECK(g != NULL, "open: %s", err.message);
    if (g) {
        int64_t i = okv_gguf_find_tensor(g, "blk.1.ffn_down_exps.weight");
        const okv_gguf_tensor *t = i >= 0 ? okv_gguf_tensor_at(g, i) : NULL;
        CHECK(t && t->type == OKV_GGML_MXFP4 && t->n_dims == 3 && t->ne[0] == 64 && t->ne[2] == 8,
              "experts in MXFP4, 3-D");
        i = okv_gguf_find_tensor(g, "blk.1.attn_q.weight");
        CHECK(i >= 0 && okv_gguf_tensor_at(g, i)->type == OKV_GGML_Q8_0, "attention in Q8_0");
        i = okv_gguf_find_tensor(g, "blk.1.ffn_gate_inp.weight");
        CHECK(i >= 0 && okv_gguf_tensor_at(g, i)->type == OKV_GGML_F32, "router in F32");
        CHECK(okv_gguf_find_tensor(g, "blk.1.attn_sinks.weight") >= 0 &&
                  okv_gguf_find_tensor(g, "blk.1.ffn_down_exps.bias") >= 0, "sinks and expert biases");
        uint32_t u = 0;
        CHECK(okv_gguf_get_u32(g, "gpt-oss.expert_count", &u, &err) == OKV_OK && u == 8, "expert_count");
        okv_gguf_close(g);
    }
    CHECK(offkv("run", "-m", p, "-p", "Once upon a time", "-n", "4", "--temp", "0", NULL) == 0, "run gpt-oss: %s",
          cli_err);
    /* a preset's shape, with flags overriding it (small enough to write) */
    cli_path(p, sizeof p, "synth-qwen3moe.gguf");
    CHECK(offkv("synth", "--n-layer", "1", "--preset", "qwen3-30b-a3b", "--n-expert", "4", "--n-expert-used", "2", "--n-vocab", "600",
                "--n-ff-exp", "256", "--type", "q8_0", "-o", p, NULL) == 0, "synth preset: %s", cli_err);
    g = okv_gguf_open(p, &err);
    CHECK(g != NULL, "open: %s", err.message);
    if (g) {
        uint32_t u[5] = {0};
        okv_gguf_get_u32(g, "qwen3moe.embedding_length", &u[0], &err);
        okv_gguf_get_u32(g, "qwen3moe.block_count", &u[1], &err);
        okv_gguf_get_u32(g, "qwen3moe.expert_count", &u[2], &err);
        okv_gguf_get_u32(g, "qwen3moe.expert_used_count", &u[3], &err);
        okv_gguf_get_u32(g, "qwen3moe.attention.key_length", &u[4], &err);
        CHECK(u[0] == 2048 && u[1] == 1 && u[2] == 4 && u[3] == 2 && u[4] == 128,
              "preset and overrides: %u %u %u %u %u", u[0], u[1], u[2], u[3], u[4]);
        okv_gguf_close(g);
    }
    CHECK(offkv("synth", "--preset", "gpt-oss-200b", "-o", p, NULL) == 2, "unknown preset");
    CHECK_ERR_HAS("gpt-oss-200b");
    CHECK(offkv("synth", "--arch", "qwen3moe", "--n-expert", "4", "--n-expert-used", "5", "-o", p, NULL) == 2,
          "more used than experts");
    CHECK_ERR_HAS("--n-expert-used");
    CHECK(offkv("synth", "--n-expert", "4", "-o", p, NULL) == 2, "experts on llama");
    CHECK_ERR_HAS("--n-expert");
}

/* Reads n x n_vocab floats. */
static float *read_logits(const char *path, size_t want) {
    size_t size = 0;
    float *x = (float *)golden_read(path, &size);
    if (x && size != want * sizeof(float)) {
        free(x);
        return NULL;
    }
    return x;
}

static void test_model_commands(const char *model) {
    /* tokenize: BOS, then the story words are whole pieces */
    okv_error err;
    okv_gguf *g = okv_gguf_open(model, &err);
    if (!g) {
        CHECK(0, "open %s: %s", model, err.message);
        return;
    }
    int32_t want[5] = {1, vocab_id(g, "\xe2\x96\x81Once"), vocab_id(g, "\xe2\x96\x81upon"),
                       vocab_id(g, "\xe2\x96\x81" "a"), vocab_id(g, "\xe2\x96\x81time")};
    okv_gguf_close(g);
    char expect[128];
    snprintf(expect, sizeof expect, "%d %d %d %d %d\n", want[0], want[1], want[2], want[3], want[4]);
    int rc = offkv("tokenize", "-m", model, "-p", "Once upon a time", NULL);
    CHECK(rc == 0, "tokenize exit %d: %s", rc, cli_err);
    if (rc != 0) {
        fprintf(stderr, "note: the model commands need the model code; skipping the rest\n");
        return;
    }
    CHECK(strcmp(cli_out, expect) == 0, "tokenize: '%s', want '%s'", cli_out, expect);
    CHECK(offkv("tokenize", "-m", model, "-p", "Once upon a time", "--no-bos", NULL) == 0 &&
              strcmp(cli_out, expect + 2) == 0, "tokenize --no-bos: '%s'", cli_out);
    /* tokenize reads the vocabulary alone: a vocabulary-only file (no
     * tensors, which no model load accepts) gives llama.cpp's ids for it */
    const char *shared = check_shared_dir();
    if (shared) {
        char vocab[4096];
        snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-gpt-2.gguf", shared);
        rc = offkv("tokenize", "-m", vocab, "-p", "Hello world", "--no-bos", NULL);
        CHECK(rc == 0 && !strcmp(cli_out, "15496 995\n"), "tokenize a vocabulary-only file: rc %d, '%s' (%s)", rc,
              cli_out, cli_err);
    } else {
        printf("skipped (tokenize of a vocabulary-only file): ../shared not found\n");
    }

    /* logits: chunked and whole agree; two runs are bitwise equal */
    const char *toks = "1,300,17,42,511,2,99,260,261,7,8,9,10";
    const size_t n = 13, nv = 512;
    char l1[4200], l2[4200], l3[4200];
    cli_path(l1, sizeof l1, "l1.f32");
    cli_path(l2, sizeof l2, "l2.f32");
    cli_path(l3, sizeof l3, "l3.f32");
    CHECK(offkv("logits", "-m", model, "--tokens", toks, "--chunk", "4", "--kv-type", "f32", "-o", l1, NULL) == 0,
          "logits: %s", cli_err);
    CHECK(offkv("logits", "-m", model, "--tokens", toks, "--chunk", "4", "--kv-type", "f32", "-o", l2, NULL) == 0,
          "logits: %s", cli_err);
    CHECK(same_bytes(l1, l2), "logits twice: files differ");
    CHECK(offkv("logits", "-m", model, "--tokens", toks, "--kv-type", "f32", "-t", "2", "-o", l3, NULL) == 0,
          "logits: %s", cli_err);
    float *x = read_logits(l1, n * nv), *y = read_logits(l3, n * nv);
    CHECK(x && y, "logits files hold %zu x %zu floats", n, nv);
    if (x && y) {
        double diff = 0, amax = 0;
        bool finite = true;
        for (size_t i = 0; i < n * nv; i++) {
            finite &= isfinite(x[i]) != 0;
            diff = fmax(diff, fabs(x[i] - y[i]));
            amax = fmax(amax, fabs(x[i]));
        }
        CHECK(finite, "non-finite logits");
        CHECK(amax > 0, "all logits zero");
        CHECK(diff <= 1e-4 * fmax(1.0, amax), "chunk 4 vs 13: max diff %g", diff);
        /* rows differ: the model sees the sequence, not one token */
        CHECK(memcmp(x, x + nv, nv * sizeof *x) != 0, "rows 0 and 1 identical");
    }
    CHECK(offkv("logits", "-m", model, "--tokens", "1,512", "-o", l2, NULL) == 2, "token out of range");
    CHECK_ERR_HAS("512");

    /* run, greedy: the text equals the argmax chain computed with logits,
     * one call per step over the growing sequence (this also checks the
     * positions run gives generated tokens) */
    g = okv_gguf_open(model, &err);
    char seq[512], expect_text[1024];
    snprintf(seq, sizeof seq, "%d,%d,%d,%d,%d", want[0], want[1], want[2], want[3], want[4]);
    snprintf(expect_text, sizeof expect_text, "Once upon a time");
    size_t n_seq = 5;
    enum { STEPS = 6 };
    for (int step = 0; step < STEPS && g; step++) {
        CHECK(offkv("logits", "-m", model, "--tokens", seq, "-o", l2, NULL) == 0, "logits: %s", cli_err);
        float *z = read_logits(l2, n_seq * nv);
        if (!z) {
            CHECK(0, "logits of %zu tokens", n_seq);
            break;
        }
        int32_t am = 0;
        for (size_t i = 1; i < nv; i++)
            if (z[(n_seq - 1) * nv + i] > z[(n_seq - 1) * nv + (size_t)am]) am = (int32_t)i;
        free(z);
        if (am == 2) break; /* EOS */
        /* the piece as token_to_piece gives it: "▁" is a space, <0xXX> a byte */
        const char *t;
        size_t len, o = strlen(expect_text);
        okv_gguf_array_str(g, "tokenizer.ggml.tokens", (uint64_t)am, &t, &len, &err);
        unsigned byte;
        if (am < 3) {
        } else if (len == 6 && sscanf(t, "<0x%2X>", &byte) == 1) {
            expect_text[o++] = (char)byte;
        } else {
            for (size_t i = 0; i < len && o < sizeof expect_text - 1; i++) {
                if (i + 2 < len && memcmp(t + i, "\xe2\x96\x81", 3) == 0) {
                    expect_text[o++] = ' ';
                    i += 2;
                } else {
                    expect_text[o++] = t[i];
                }
            }
        }
        expect_text[o] = '\0';
        size_t sl = strlen(seq);
        snprintf(seq + sl, sizeof seq - sl, ",%d", (int)am);
        n_seq++;
    }
    okv_gguf_close(g);
    /* run streams valid UTF-8 only (okv_detok_stream, tested on its own in
     * test_utf8_stream): the byte tokens of this random model pass through it. */
    {
        static char shown[sizeof expect_text * 3 + 16];
        okv_detok_stream us = {0};
        size_t n = okv_detok_stream_feed(&us, expect_text, strlen(expect_text), shown);
        n += okv_detok_stream_finish(&us, shown + n);
        shown[n++] = '\n';
        CHECK(n < sizeof expect_text, "expected text of %zu bytes", n);
        if (n >= sizeof expect_text) n = sizeof expect_text - 1;
        memcpy(expect_text, shown, n);
        expect_text[n] = '\0';
    }
    rc = offkv("run", "-m", model, "-p", "Once upon a time", "-n", "6", "--temp", "0", NULL);
    CHECK(rc == 0, "run: %s", cli_err);
    CHECK(strcmp(cli_out, expect_text) == 0, "greedy run '%s', logits argmax chain says '%s'", cli_out, expect_text);
    CHECK_ERR_HAS("tokens/s");
    CHECK_ERR_HAS("cache");
    free(x);
    free(y);

    /* seeded sampling is reproducible; warmup and chunking do not change it */
    CHECK(offkv("run", "-m", model, "-p", "Once upon a time", "-n", "12", "--seed", "9", "--temp", "1.5",
                "--no-display-prompt", NULL) == 0, "run: %s", cli_err);
    static char first[sizeof cli_out];
    snprintf(first, sizeof first, "%s", cli_out);
    CHECK(offkv("run", "-m", model, "-p", "Once upon a time", "-n", "12", "--seed", "9", "--temp", "1.5",
                "--no-display-prompt", "--warmup", "--chunk", "2", "--kv-type", "f32", NULL) == 0, "run: %s", cli_err);
    CHECK_ERR_HAS("warmup");
    /* f32 vs f16 KV may move a sampled token in principle; on this model
     * with these seeds it does not, and any divergence would be loud */
    CHECK(strcmp(first, cli_out) == 0, "seeded runs differ: '%s' vs '%s'", first, cli_out);

    /* a window makes ring layers, which the cache report shows */
    CHECK(offkv("run", "-m", model, "-p", "Once upon a time", "-n", "40", "--temp", "0", "--sliding-window", "4",
                "--chunk", "2", "-c", "64", NULL) == 0, "run with a window: %s", cli_err);
    CHECK_ERR_HAS("0 flat layers");
    CHECK_ERR_HAS("2 ring layers");
    /* window 4 + max_write 2 - 1 = 5 rows x 2 kv heads x 16 x f16 x K,V x 2 layers */
    CHECK_ERR_HAS("1.25 KiB");

    CHECK(offkv("bench", "-m", model, "-p", "16", "-n", "4", "-r", "2", "-t", "1", NULL) == 0, "bench: %s", cli_err);
    CHECK(strstr(cli_out, "pp16") && strstr(cli_out, "tg4") && strstr(cli_out, "t/s"), "bench table: %s", cli_out);

    /* -d: the tests start from a filled cache; the test column says so, as
     * llama-bench's does.  Depth 600 fills in two chunks (512 + 88), and
     * the tg test's runs rewind to it past the first chunk. */
    CHECK(offkv("bench", "-m", model, "-p", "8", "-n", "4", "-d", "600", "-r", "2", "-t", "1", NULL) == 0,
          "bench -d: %s", cli_err);
    CHECK(strstr(cli_out, " pp8 @ d600 |") && strstr(cli_out, " tg4 @ d600 |"), "bench -d table: %s",
          cli_out);
    CHECK_ERR_HAS("depth 600 filled");
    CHECK(offkv("bench", "-m", model, "-p", "0", "-n", "2", "-d", "3", "-r", "1", NULL) == 0 &&
              strstr(cli_out, "tg2 @ d3") && !strstr(cli_out, "pp"), "bench -p 0 -d 3: %s%s", cli_out, cli_err);
    CHECK(offkv("bench", "-m", model, "-d", "-1", NULL) == 2, "bench -d -1 exits 2");
    CHECK_ERR_HAS("'-1' for -d");
    CHECK(offkv("bench", "-m", model, "--n-depth", "4k", NULL) == 2, "bench --n-depth 4k exits 2");
    CHECK_ERR_HAS("'4k' for --n-depth");
    CHECK(offkv("bench", "-m", model, "-d", NULL) == 2, "bench -d without a value exits 2");
    /* --verify K: a row of evals of K tokens (N / K of them: 2 of 5 for N 12,
     * from depth 3: positions 3 .. 12 must fit the context) and its cost in
     * decode steps */
    CHECK(offkv("bench", "-m", model, "-p", "0", "-n", "12", "-d", "3", "--verify", "5", "-r", "1", "-t", "1", NULL) == 0,
          "bench --verify: %s", cli_err);
    CHECK(strstr(cli_out, " verify5 @ d3 |") && strstr(cli_out, "verify5: one eval of 5 tokens") &&
              strstr(cli_out, "single decode steps"),
          "bench --verify table: %s", cli_out);
    CHECK(offkv("bench", "-m", model, "-p", "8", "-n", "0", "--verify", "5", NULL) == 2, "bench --verify -n 0 exits 2");
    CHECK_ERR_HAS("needs the tg test");
    CHECK(offkv("bench", "-m", model, "--verify", "0", NULL) == 2, "bench --verify 0 exits 2");
    CHECK_ERR_HAS("'0' for --verify");

    /* --turns: one line on stdin per run (warm-ups included), each run's t/s
     * on stderr; stdin ending early is a failure, not a hang */
    char go[4200];
    cli_path(go, sizeof go, "turns.txt");
    FILE *gf = fopen(go, "w");
    if (gf) {
        fputs("\n\n\n\n\n\n", gf);
        fclose(gf);
    }
    cli_stdin = go;
    CHECK(offkv("bench", "-m", model, "-p", "8", "-n", "4", "-r", "2", "-d", "5", "--turns", NULL) == 0,
          "bench --turns: %s", cli_err);
    CHECK_ERR_HAS("pp8 @ d5 warm-up: ");
    CHECK_ERR_HAS("pp8 @ d5 run 2: ");
    CHECK_ERR_HAS("tg4 @ d5 warm-up: ");
    CHECK(offkv("bench", "-m", model, "-p", "8", "-n", "4", "-r", "3", "--turns", NULL) == 1, "bench --turns, 6 lines for 8 runs");
    CHECK_ERR_HAS("stdin ended");
    cli_stdin = NULL;
}

/* offkv logits as the acceptance checks run it, against llama.cpp's goldens:
 * every shared model, 121 tokens in chunks of 16 and of 121, default (f32)
 * and f16 KV, with the tolerances. */
static void test_logits_goldens(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped (logits goldens): ../shared not found\n"); return; }
    const char *models[] = {"stories260K", "tiny-llama", "tiny-gemma3", "tiny-gemma3-allswa", "tiny-muse-glimmer"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        for (int c = 0; c < 2; c++) {
            for (int kv = 0; kv < 2; kv++) {
                const int chunk = c ? 121 : 16;
                char json_path[4200], f32_path[4200], model[4200], out[4200], chunk_s[16];
                const char *kvname = kv ? "kvf16_faauto" : "kvf32_faoff";
                snprintf(json_path, sizeof json_path, "%s/golden/%s.seq121.seed42.chunk%d.%s.json", shared, models[i], chunk, kvname);
                snprintf(f32_path, sizeof f32_path, "%s/golden/%s.seq121.seed42.chunk%d.%s.f32", shared, models[i], chunk, kvname);
                snprintf(model, sizeof model, "%s/models/%s.gguf", shared, models[i]);
                cli_path(out, sizeof out, "golden-logits.f32");
                snprintf(chunk_s, sizeof chunk_s, "%d", chunk);
                char *json = golden_read(json_path, NULL);
                size_t ref_bytes = 0;
                float *ref = (float *)golden_read(f32_path, &ref_bytes);
                int ids[200];
                int n = json ? golden_ints(json, "tokens", ids, 200) : -1;
                static char list[4096];
                size_t at = 0;
                for (int t = 0; t < n && at < sizeof list - 16; t++) at += (size_t)snprintf(list + at, sizeof list - at, t ? ",%d" : "%d", ids[t]);
                int rc = n == 121 ? (kv ? offkv("logits", "-m", model, "--tokens", list, "--chunk", chunk_s, "--kv-type", "f16", "-o", out, NULL)
                                        : offkv("logits", "-m", model, "--tokens", list, "--chunk", chunk_s, "-o", out, NULL))
                                  : -1;
                size_t got_bytes = 0;
                float *got = rc == 0 ? (float *)golden_read(out, &got_bytes) : NULL;
                CHECK(got && ref && got_bytes == ref_bytes, "%s chunk %d %s: logits failed (%d): %s", models[i], chunk, kvname, rc, cli_err);
                if (got && ref && got_bytes == ref_bytes) {
                    golden_cmp g = golden_compare(got, ref, 121, (int)(ref_bytes / sizeof(float) / 121));
                    double tol = kv ? 0.1 : 1e-3 * (g.max_abs > 1 ? g.max_abs : 1);
                    CHECK(g.max_diff <= tol && g.argmax_mismatch == 0, "%s chunk %d %s: max diff %g (tolerance %g), %d argmax mismatches",
                          models[i], chunk, kvname, g.max_diff, tol, g.argmax_mismatch);
                }
                free(got);
                free(ref);
                free(json);
            }
        }
    }
}

/* A chunked 37-token prompt with --warmup on every family of the shared
 * models: the warm-up evaluates the prompt, clears the cache, and the real
 * run then says and generates exactly what a run without warm-up does. */
static void test_warmup_families(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped (warm-up on real models): ../shared not found\n"); return; }
    const char *models[] = {"stories260K", "tiny-llama", "tiny-gemma3", "tiny-gemma3-allswa", "tiny-muse-glimmer"};
    const char *words = "Once upon a time there was a little girl named Lily who loved to play outside in the "
                        "park with her big red ball and her friend Tom every sunny day of the long warm summer";
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[4200], prompt[512];
        snprintf(path, sizeof path, "%s/models/%s.gguf", shared, models[i]);
        okv_error err;
        okv_model *m = okv_model_load(path, NULL, &err);
        if (!m) { CHECK(0, "load %s: %s", path, err.message); continue; }
        /* the shortest prefix of words that tokenizes to 37 ids, BOS included */
        size_t n = 0, best = 0;
        for (size_t len = 1; len <= strlen(words) && !best; len++) {
            okv_tokenizer_encode(okv_model_tokenizer(m), words, len, OKV_TOKENIZE_ADD_SPECIAL, NULL, 0, &n, &err);
            if (n == 37) best = len;
        }
        CHECK(best > 0, "%s: no prefix of the text is 37 tokens", models[i]);
        okv_model_free(m);
        snprintf(prompt, sizeof prompt, "%.*s", (int)best, words);
        CHECK(offkv("run", "-m", path, "-p", prompt, "-n", "8", "--temp", "0", "--chunk", "8", "-c", "128",
                    "--no-display-prompt", NULL) == 0, "%s run: %s", models[i], cli_err);
        static char plain[sizeof cli_out];
        snprintf(plain, sizeof plain, "%s", cli_out);
        CHECK(offkv("run", "-m", path, "-p", prompt, "-n", "8", "--temp", "0", "--chunk", "8", "-c", "128",
                    "--no-display-prompt", "--warmup", NULL) == 0, "%s run --warmup: %s", models[i], cli_err);
        const char *line = strstr(cli_err, "offkv run: prompt");
        int n_prompt = 0;
        CHECK(line && sscanf(line, "offkv run: prompt %d tokens", &n_prompt) == 1 && n_prompt == 37,
              "%s: prompt is not 37 tokens: %s", models[i], cli_err);
        CHECK(strstr(cli_err, "warmup") != NULL, "%s: no word of the warm-up: %s", models[i], cli_err);
        CHECK(strcmp(plain, cli_out) == 0, "%s: --warmup changed the text: '%s' vs '%s'", models[i], plain, cli_out);
    }
}

/* synth --vocab: the model tokenizes as the vocabulary file's own
 * tokenizer does (the reference: okv_tokenizer_from_gguf on that file),
 * with as many rows as it has tokens; a disagreeing --n-vocab is refused. */
/* A file's tokenizer.ggml.eot_token_id ends run's generation: the same
 * model with eot_token_id set to the token greedy decoding writes first
 * (found here in-process: the argmax of the prompt's logits) writes
 * nothing and says why; without the key it writes that token on. */
static void test_file_eot(const char *model, okv_model *m) {
    const okv_tokenizer *tok = okv_model_tokenizer(m);
    okv_error err;
    int32_t ids[16], pos[16];
    size_t n = 0;
    okv_context *ctx = okv_context_create(m, NULL, NULL, &err);
    float *logits = malloc((size_t)okv_model_n_vocab(m) * sizeof *logits);
    bool ok = ctx && logits && okv_tokenizer_encode(tok, "Once", 4, OKV_TOKENIZE_ADD_SPECIAL, ids, 16, &n, &err) == OKV_OK;
    for (size_t i = 0; ok && i < n; i++) pos[i] = (int32_t)i;
    ok = ok && okv_context_eval_last(ctx, ids, pos, (int32_t)n, logits, &err) == OKV_OK;
    int32_t first = 0;
    for (int32_t i = 1; ok && i < okv_model_n_vocab(m); i++)
        if (logits[i] > logits[first]) first = i;
    free(logits);
    okv_context_free(ctx);
    CHECK(ok && !okv_tokenizer_is_eog(tok, first), "greedy's first token %d (not an end without the key): %s",
          (int)first, err.message);
    if (!ok) return;
    char with_eot[4200];
    cli_path(with_eot, sizeof with_eot, "synth-qwen3-eot.gguf");
    okv_gguf *g = okv_gguf_open(model, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    static const char *const skip[] = {"tokenizer.ggml.eot_token_id", "tokenizer.chat_template", NULL};
    ok = g && w && copy_metadata_except(g, w, skip) && copy_tensors(g, w) &&
         okv_gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)first, &err) == OKV_OK &&
         okv_gguf_writer_write(w, with_eot, &err) == OKV_OK;
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    CHECK(ok, "writing %s: %s", with_eot, err.message);
    int rc = offkv("run", "-m", model, "-p", "Once", "-n", "3", "--temp", "0", "--no-display-prompt", NULL);
    CHECK(rc == 0 && strlen(cli_out) > 1 && strstr(cli_err, "stopped: n reached"),
          "without the key: three tokens: exit %d, '%s' (%s)", rc, cli_out, cli_err);
    rc = offkv("run", "-m", with_eot, "-p", "Once", "-n", "3", "--temp", "0", "--no-display-prompt", NULL);
    CHECK(rc == 0 && strcmp(cli_out, "\n") == 0 && strstr(cli_err, "stopped: end of generation"),
          "eot_token_id %d: nothing, and why: exit %d, '%s' (%s)", (int)first, rc, cli_out, cli_err);
    remove(with_eot);
}

static void test_synth_vocab(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped (synth --vocab): ../shared not found\n"); return; }
    char vocab[4200], model[4200];
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-qwen3.gguf", shared);
    cli_path(model, sizeof model, "synth-qwen3-vocab.gguf");
    CHECK(offkv("synth", "--type", "q8_0", "--vocab", vocab, "-o", model, NULL) == 0, "synth --vocab: %s", cli_err);
    CHECK(offkv("synth", "--n-vocab", "512", "--vocab", vocab, "-o", model, NULL) != 0 && strstr(cli_err, "--n-vocab 512"),
          "--n-vocab against --vocab: %s", cli_err);
    okv_error err;
    okv_gguf *gv = okv_gguf_open(vocab, &err);
    okv_tokenizer *ref = gv ? okv_tokenizer_from_gguf(gv, &err) : NULL;
    okv_model *m = okv_model_load(model, NULL, &err);
    CHECK(ref && m, "load: %s", err.message);
    if (ref && m) {
        const okv_tokenizer *tok = okv_model_tokenizer(m);
        CHECK(okv_tokenizer_n_vocab(tok) == okv_tokenizer_n_vocab(ref) && okv_tokenizer_n_vocab(ref) > 150000,
              "vocabulary %d, want %d", (int)okv_tokenizer_n_vocab(tok), (int)okv_tokenizer_n_vocab(ref));
        CHECK(okv_tokenizer_eos(tok) == okv_tokenizer_eos(ref), "eos %d, want %d", (int)okv_tokenizer_eos(tok),
              (int)okv_tokenizer_eos(ref));
        static const char text[] = "Hello, world! \xe4\xbd\xa0\xe5\xa5\xbd {\"a\": [1, 2.5]}\n\tdone";
        int32_t a[128], b[128];
        size_t na = 0, nb = 0;
        okv_tokenizer_encode(tok, text, strlen(text), 0, a, 128, &na, &err);
        okv_tokenizer_encode(ref, text, strlen(text), 0, b, 128, &nb, &err);
        CHECK(na > 0 && na == nb && memcmp(a, b, na * sizeof *a) == 0, "tokens: %zu vs %zu", na, nb);
        test_file_eot(model, m);
    }
    okv_model_free(m);
    okv_tokenizer_free(ref);
    okv_gguf_close(gv);

    /* Control tokens' text in a prompt is those tokens, as llama.cpp reads a
     * prompt (Qwen's <|im_start|> is 151644, <|im_end|> 151645 in its
     * tokenizer_config.json); --no-parse-special keeps it text. */
    static const char chatml[] = "<|im_start|>user hi<|im_end|>";
    int rc = offkv("tokenize", "-m", vocab, "-p", chatml, NULL);
    int ids[16], n = 0;
    for (char *p = cli_out, *end; n < 16 && (ids[n] = (int)strtol(p, &end, 10), end != p); p = end) n++;
    CHECK(rc == 0 && n == 4 && ids[0] == 151644 && ids[3] == 151645, "tokenize a ChatML line: '%s' (%s)", cli_out, cli_err);
    rc = offkv("tokenize", "-m", vocab, "-p", chatml, "--no-parse-special", NULL);
    n = 0;
    bool control = false;
    for (char *p = cli_out, *end; n < 16 && (ids[n] = (int)strtol(p, &end, 10), end != p); p = end) control |= ids[n++] >= 151643;
    CHECK(rc == 0 && n > 4 && !control, "tokenize --no-parse-special: '%s' (%s)", cli_out, cli_err);
    CHECK(offkv("run", "-m", model, "-p", chatml, "-n", "1", "--temp", "0", NULL) == 0 &&
              strstr(cli_err, "offkv run: 4 prompt tokens"),
          "run reads <|im_start|> as one token: %s", cli_err);
    CHECK(offkv("run", "-m", model, "-p", chatml, "-n", "1", "--temp", "0", "--no-parse-special", NULL) == 0 &&
              strstr(cli_err, "offkv run: 4 prompt tokens") == NULL && strstr(cli_err, " prompt tokens"),
          "run --no-parse-special: %s", cli_err);

    /* A prompt that starts with BOS's text, in a vocabulary that adds BOS:
     * two BOS, as llama.cpp gives, and a warning. */
    char spm[4200];
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
    cli_path(spm, sizeof spm, "synth-spm.gguf");
    CHECK(offkv("synth", "--arch", "llama", "--type", "q8_0", "--vocab", vocab, "-o", spm, NULL) == 0, "synth: %s", cli_err);
    CHECK(offkv("run", "-m", spm, "-p", "<s>Hello", "-n", "1", "--temp", "0", NULL) == 0 &&
              strstr(cli_err, "offkv run: 3 prompt tokens") && strstr(cli_err, "the model sees two"),
          "run -p '<s>Hello': %s", cli_err);
    CHECK(offkv("run", "-m", spm, "-p", "Hello", "-n", "1", "--temp", "0", NULL) == 0 &&
              !strstr(cli_err, "the model sees two"),
          "run -p 'Hello' warns of nothing: %s", cli_err);
}

/* A model whose output norm holds NaN computes NaN logits: run says so and
 * fails, greedy, sampling, speculating over it or drafting with it, rather
 * than printing tokens drawn from noise. */
static void test_nan_model(const char *model) {
    size_t size = 0;
    unsigned char *bytes = (unsigned char *)golden_read(model, &size);
    okv_error err;
    okv_gguf *g = bytes ? okv_gguf_open_memory(bytes, size, &err) : NULL;
    const okv_gguf_tensor *t = g ? tensor(g, "output_norm.weight") : NULL;
    CHECK(t && t->type == OKV_GGML_F32, "the synthetic model's output_norm.weight (f32)");
    if (!t) {
        okv_gguf_close(g);
        free(bytes);
        return;
    }
    const size_t at = (size_t)((const unsigned char *)t->data - bytes);
    okv_gguf_close(g);
    const float nan = NAN;
    memcpy(bytes + at, &nan, sizeof nan);
    char broken[4200];
    cli_path(broken, sizeof broken, "nan-model.gguf");
    FILE *f = fopen(broken, "wb");
    CHECK(f && fwrite(bytes, 1, size, f) == size && fclose(f) == 0, "write %s", broken);
    free(bytes);

    static const char *const temps[] = {"0", "0.8"};
    for (int i = 0; i < 2; i++) {
        int rc = offkv("run", "-m", broken, "-p", "Once upon a time", "-n", "4", "--seed", "1", "--temp", temps[i],
                       "--no-display-prompt", NULL);
        CHECK(rc == 1 && strstr(cli_err, "NaN") && cli_out[0] == '\0',
              "run --temp %s on NaN logits: exit %d, stdout '%s', stderr %s", temps[i], rc, cli_out, cli_err);
        rc = offkv("run", "-m", broken, "-p", "Once upon a time Once upon a", "-n", "4", "--seed", "1", "--temp",
                   temps[i], "--lookup", "2", "--no-display-prompt", NULL);
        CHECK(rc == 1 && strstr(cli_err, "NaN"), "run --lookup --temp %s on NaN logits: exit %d, stderr %s",
              temps[i], rc, cli_err);
        rc = offkv("run", "-m", model, "-p", "Once upon a time", "-n", "8", "--seed", "1", "--temp", temps[i],
                   "--draft", broken, "--draft-p-min", "0", "--no-display-prompt", NULL);
        CHECK(rc == 1 && strstr(cli_err, "draft model's logits") && strstr(cli_err, "NaN"),
              "run --draft (NaN) --temp %s: exit %d, stderr %s", temps[i], rc, cli_err);
    }
}

/* --grammar-file and --json-schema constrain run's output (checked against
 * the grammar's few strings, not against offkv's own matcher); the file is
 * read to its end, from a pipe too; a NUL byte or a directory is an error
 * saying so, not a grammar cut at the NUL. */
static void test_grammar_flags(const char *model) {
    char yn[4200], nul[4200], fifo[4200];
    cli_path(yn, sizeof yn, "yn.gbnf");
    cli_path(nul, sizeof nul, "nul.gbnf");
    cli_path(fifo, sizeof fifo, "grammar.fifo");
    static const char gbnf[] = "root ::= \"yes\" | \"no\"\n";
    static const char with_nul[] = "root ::= \"yes\"\n\0 junk ((( ::=\n";
    CHECK(cli_write_file(yn, gbnf, sizeof gbnf - 1) && cli_write_file(nul, with_nul, sizeof with_nul - 1), "grammar files");
    for (int seed = 1; seed <= 3; seed++) {
        char sd[8];
        snprintf(sd, sizeof sd, "%d", seed);
        int rc = offkv("run", "-m", model, "-p", "Once", "-n", "6", "--seed", sd, "--grammar-file", yn,
                       "--no-display-prompt", NULL);
        CHECK(rc == 0 && (strcmp(cli_out, "yes\n") == 0 || strcmp(cli_out, "no\n") == 0),
              "--grammar-file seed %d: exit %d, '%s' (%s)", seed, rc, cli_out, cli_err);
        rc = offkv("run", "-m", model, "-p", "Once", "-n", "6", "--seed", sd, "--json-schema", "{\"type\": \"boolean\"}",
                   "--no-display-prompt", NULL);
        size_t end = strlen(cli_out); /* JSON may end in white space (llama.cpp's grammars allow it) */
        while (end > 0 && strchr(" \t\n", cli_out[end - 1])) cli_out[--end] = '\0';
        CHECK(rc == 0 && (strcmp(cli_out, "true") == 0 || strcmp(cli_out, "false") == 0),
              "--json-schema boolean seed %d: exit %d, '%s' (%s)", seed, rc, cli_out, cli_err);
    }
    int rc = offkv("run", "-m", model, "-p", "Once", "-n", "6", "--grammar-file", nul, NULL);
    CHECK(rc == 1 && strstr(cli_err, "NUL byte at offset 15"), "a NUL in the grammar file: exit %d, %s", rc, cli_err);
    rc = offkv("run", "-m", model, "-p", "Once", "-n", "6", "--grammar-file", cli_dir, NULL);
    CHECK(rc == 1 && strstr(cli_err, "Is a directory"), "a directory as the grammar file: exit %d, %s", rc, cli_err);

    /* A pipe cannot be sized by seeking: a writer feeds it while run reads. */
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    pid_t w = fork();
    if (w == 0) {
        int fd = open(fifo, O_WRONLY);
        ssize_t put = fd >= 0 ? write(fd, gbnf, sizeof gbnf - 1) : -1;
        _exit(put == (ssize_t)(sizeof gbnf - 1) ? 0 : 1);
    }
    rc = offkv("run", "-m", model, "-p", "Once", "-n", "6", "--grammar-file", fifo, "--no-display-prompt", NULL);
    int wst = 0;
    if (w > 0) {
        if (rc != 0) kill(w, SIGKILL); /* run never opened the pipe: the writer would block */
        waitpid(w, &wst, 0);
    }
    CHECK(rc == 0 && (strcmp(cli_out, "yes\n") == 0 || strcmp(cli_out, "no\n") == 0),
          "--grammar-file from a pipe: exit %d, '%s' (%s)", rc, cli_out, cli_err);
}

int main(void) {
    if (!cli_init("test-cli")) return CHECK_SKIP;
    test_help_and_flags();
    char model[4200];
    cli_path(model, sizeof model, "model.gguf");
    CHECK(offkv("synth", "--seed", "5", "-o", model, NULL) == 0, "synth: %s", cli_err);
    test_synth(model);
    test_synth_archs();
    test_synth_moe();
    test_synth_vocab();
    test_model_commands(model);
    test_nan_model(model);
    test_grammar_flags(model);
    test_warmup_families();
    test_logits_goldens();
    return cli_done();
}
