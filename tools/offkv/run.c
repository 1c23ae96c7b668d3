/* offkv run: generate text.  The prompt is evaluated in chunks of at most
 * --chunk tokens (the cache's max_write), then one token per eval; text goes
 * to stdout as it is made, numbers to stderr, so `offkv run ... > out.txt`
 * keeps only the text. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "offkv/grammar.h"
#include "offkv/prompt_cache.h"
#include "offkv/sampler.h"
#include "offkv/speculative.h"
#include "offkv/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: offkv run -m MODEL [-p PROMPT] [flags]\n"
            "Generates text from PROMPT (BOS added as the vocabulary asks; control tokens' text in it,\n"
            "such as <|im_start|>, read as those tokens, as llama.cpp reads a prompt) and streams it to\n"
            "stdout;\n"
            "prompt and generation speed and cache bytes go to stderr.\n\n"
            "  -m, --model FILE        GGUF model\n"
            "  -p, --prompt TEXT       prompt (default: empty, BOS only)\n"
            "  -n, --n-predict N       tokens to generate at most (default 128); stops earlier at a token\n"
            "                          that ends a generation (EOS, <|im_end|>, <|eot_id|>, ...) or when\n"
            "                          the context is full\n"
            "  --temp T                temperature; 0 = greedy (default 0.8)\n"
            "  --top-k K               keep the K most likely tokens; 0 = all (default 40)\n"
            "  --top-p P               keep the smallest set reaching probability P; 1 = all (default 0.95)\n"
            "  --seed S                sampling seed (default: random, printed to stderr)\n"
            "  -t, --threads N         threads (default: this machine's cores, at most 8)\n"
            "  -c, --ctx-size N        positions the cache holds (default: the model's training context,\n"
            "                          at most 4096)\n"
            "  --chunk N               most prompt tokens per eval, the cache's max_write (default 512)\n"
            "  --kv-type T             K/V cache storage: f16 (default), f32, or q8_0 (8-bit blocks of 32:\n"
            "                          about half of f16's bytes)\n"
            "  --warmup                evaluate the prompt once, clear the cache, then run for real\n"
            "  --sliding-window N      give every layer of a llama model a window of N positions\n"
            "  --draft FILE            speculative decoding: a draft GGUF model with the same vocabulary\n"
            "                          proposes tokens, the model checks them in one eval (own cache)\n"
            "  --draft-n K             tokens proposed per step with --draft or --lookup, 1..64 (default 4)\n"
            "  --draft-p-min P         with --draft: stop proposing at a token the draft gives a probability\n"
            "                          below P, 0..1 (default 0.75; 0 always proposes K)\n"
            "  --lookup N              speculative decoding without a draft model: propose the tokens that\n"
            "                          followed the last earlier occurrence of the last N tokens\n"
            "                          (greedy output is the same as without either; with --temp > 0 it is\n"
            "                          distributed as without them)\n"
            "  --prompt-cache FILE     reuse the longest common prefix of FILE's saved sequence and the\n"
            "                          prompt (FILE must be from this model and cache config), evaluate\n"
            "                          the rest, and save the final sequence to FILE\n"
            "  --grammar-file FILE     constrain the output to FILE's GBNF grammar (llama.cpp's syntax)\n"
            "  --json-schema SCHEMA    constrain the output to JSON that validates against SCHEMA (JSON text)\n"
            "  --no-display-prompt     do not echo the prompt to stdout\n"
            "  --no-parse-special      control tokens' text in PROMPT stays text\n"
            "Ctrl-C ends the prompt's evaluation or the generation there: run reports what it did,\n"
            "saves --prompt-cache (a long prompt goes on where it stopped next time) and exits 130;\n"
            "a second Ctrl-C ends it at once.\n"
            "  -h, --help              this help\n");
}

/* --prompt-cache: the whole sequence (its tokens seq) saved, and said. */
static bool save_prompt_cache(const char *cmd, const okv_cache *cache, const char *path, uint64_t fingerprint,
                              const int32_t *seq) {
    const int32_t len = okv_cache_length(cache);
    if (!cli_prompt_cache_save(cmd, cache, path, fingerprint, seq, len)) return false;
    fprintf(stderr, "offkv run: prompt cache '%s': saved %d tokens\n", path, (int)len);
    return true;
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "run", *model = NULL, *prompt = "", *v;
    const char *draft_path = NULL, *cache_path = NULL, *grammar_file = NULL, *json_schema = NULL;
    int32_t n_predict = 128, threads = cli_default_threads(), ctx_size = 0, chunk = 512, window = 0;
    int32_t n_draft = 4, lookup_n = 0;
    bool draft_n_given = false, p_min_given = false;
    float p_min = 0.75f;
    okv_sampler_params sp = cli_sampling_defaults();
    bool seed_given = false, warmup = false, display_prompt = true, parse_special = true;
    int kv = 0;
    cli_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) { usage(stdout); return CLI_OK; }
        if (!cli_once(&seen, cmd, a)) return CLI_USAGE;
        if (cli_is(a, "--warmup", NULL)) { warmup = true; continue; }
        if (cli_is(a, "--no-display-prompt", NULL)) { display_prompt = false; continue; }
        if (cli_is(a, "--no-parse-special", NULL)) { parse_special = false; continue; }
        if (!(cli_is(a, "-m", "--model") || cli_is(a, "-p", "--prompt") || cli_is(a, "-n", "--n-predict") ||
              cli_is_sampling_flag(a) || cli_is(a, "-t", "--threads") ||
              cli_is(a, "-c", "--ctx-size") || cli_is(a, "--chunk", "--kv-type") || cli_is(a, "--sliding-window", NULL) ||
              cli_is(a, "--draft", "--draft-n") || cli_is(a, "--lookup", "--prompt-cache") ||
              cli_is(a, "--draft-p-min", NULL) || cli_is(a, "--grammar-file", "--json-schema")))
            return cli_unknown(cmd, a);
        if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
        bool ok = true;
        if (cli_is(a, "-m", "--model")) model = v;
        else if (cli_is(a, "-p", "--prompt")) prompt = v;
        else if (cli_is(a, "-n", "--n-predict")) ok = cli_int(cmd, a, v, 0, 1 << 24, &n_predict);
        else if (cli_is_sampling_flag(a)) ok = cli_sampling_flag(cmd, a, v, &sp, &seed_given);
        else if (cli_is(a, "-t", "--threads")) ok = cli_int(cmd, a, v, 1, 1024, &threads);
        else if (cli_is(a, "-c", "--ctx-size")) ok = cli_int(cmd, a, v, 1, 1 << 30, &ctx_size);
        else if (cli_is(a, "--chunk", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 20, &chunk);
        else if (cli_is(a, "--kv-type", NULL)) ok = cli_choice(cmd, a, v, cli_kv_types, &kv);
        else if (cli_is(a, "--draft", NULL)) draft_path = v;
        else if (cli_is(a, "--draft-n", NULL)) ok = draft_n_given = cli_int(cmd, a, v, 1, 64, &n_draft);
        else if (cli_is(a, "--draft-p-min", NULL)) ok = p_min_given = cli_float(cmd, a, v, 0.0, 1.0, &p_min);
        else if (cli_is(a, "--lookup", NULL)) ok = cli_int(cmd, a, v, 1, 1 << 16, &lookup_n);
        else if (cli_is(a, "--prompt-cache", NULL)) cache_path = v;
        else if (cli_is(a, "--grammar-file", NULL)) grammar_file = v;
        else if (cli_is(a, "--json-schema", NULL)) json_schema = v;
        else ok = cli_int(cmd, a, v, 1, 1 << 24, &window);
        if (!ok) return CLI_USAGE;
    }
    if (!model) {
        cli_error(cmd, "-m MODEL is required (see offkv run --help)");
        return CLI_USAGE;
    }
    if (draft_path && lookup_n > 0) {
        cli_error(cmd, "--draft and --lookup are two ways to propose tokens: give one");
        return CLI_USAGE;
    }
    if (p_min_given && !draft_path) {
        cli_error(cmd, "--draft-p-min %g needs --draft", (double)p_min);
        return CLI_USAGE;
    }
    if (draft_n_given && !draft_path && lookup_n == 0) {
        cli_error(cmd, "--draft-n %d needs --draft or --lookup", (int)n_draft);
        return CLI_USAGE;
    }
    if (cache_path && !cli_prompt_cache_path_ok(cmd, cache_path)) return cache_path[0] ? CLI_FAIL : CLI_USAGE;
    if (grammar_file && json_schema) {
        cli_error(cmd, "--grammar-file and --json-schema are two constraints: give one");
        return CLI_USAGE;
    }
    const bool spec = draft_path || lookup_n > 0;
    if (spec && (grammar_file || json_schema)) {
        cli_error(cmd, "%s is not supported with --draft or --lookup", grammar_file ? "--grammar-file" : "--json-schema");
        return CLI_USAGE;
    }
    cli_sampling_seed(&sp, seed_given);

    int rc = CLI_FAIL;
    okv_context *ctx = NULL, *dctx = NULL;
    okv_model *dm = NULL;
    okv_speculator *spc = NULL;
    okv_sampler *smp = NULL;
    okv_grammar *gram = NULL;
    okv_grammar_vocab *gvoc = NULL;
    okv_grammar_matcher *gmat = NULL;
    int32_t *ids = NULL, *pos = NULL, *seq = NULL, *out = NULL;
    float *logits = NULL;
    struct sigaction old_sigint;
    bool sigint_set = false;
    okv_model *m = cli_load_model(cmd, model, window, threads, &rc);
    if (!m) goto done;
    if (draft_path && !(dm = cli_load_model(cmd, draft_path, 0, threads, &rc))) goto done;
    rc = CLI_FAIL;
    const okv_tokenizer *tok = okv_model_tokenizer(m);
    size_t n_prompt_sz = 0;
    if (!(ids = cli_tokenize(cmd, tok, prompt,
                             OKV_TOKENIZE_ADD_SPECIAL | (parse_special ? OKV_TOKENIZE_PARSE_SPECIAL : 0), &n_prompt_sz))) goto done;
    const int32_t n_prompt = (int32_t)n_prompt_sz;
    if (n_prompt == 0) {
        cli_error(cmd, "the prompt is empty and the vocabulary adds no BOS: nothing to evaluate");
        rc = CLI_USAGE;
        goto done;
    }
    /* A prompt written in a template that prints BOS (a rendered chat) gets
     * a second one from the vocabulary, as in llama.cpp, which also warns:
     * models trained on one may answer worse. */
    const int32_t bos = okv_tokenizer_bos(tok);
    if (n_prompt >= 2 && bos >= 0 && okv_tokenizer_adds_bos(tok) && ids[0] == bos && ids[1] == bos)
        fprintf(stderr, "offkv run: warning: the prompt starts with the BOS token's text and the vocabulary adds BOS "
                        "too: the model sees two (leave it out of the prompt)\n");
    if (spec && ctx_size > 0 && ctx_size < n_draft + 1) {
        cli_error(cmd, "-c %d is too small for --draft-n %d: a step evaluates the last token and %d proposals at "
                       "once (give -c %d or more)",
                  (int)ctx_size, (int)n_draft, (int)n_draft, (int)n_draft + 1);
        rc = CLI_USAGE;
        goto done;
    }
    cli_ctx_opts o = {.n_threads = threads, .capacity = ctx_size, .max_write = chunk, .kv_type = cli_kv_types[kv]};
    if (ctx_size > 0 && chunk > ctx_size) o.max_write = ctx_size;
    /* The target evaluates the last token and K proposals at once, and its
     * rings (window + max_write - 1 rows) must keep what a rejection rewinds. */
    if (spec && o.max_write < n_draft + 1) o.max_write = n_draft + 1;
    if (!(ctx = cli_context(cmd, m, &o))) goto done;
    okv_cache *cache = okv_context_cache(ctx);
    okv_cache_config cfg;
    okv_cache_get_config(cache, &cfg);
    if (n_prompt > cfg.capacity) {
        cli_error(cmd, "the prompt has %d tokens, more than the context's %d (-c)", (int)n_prompt, (int)cfg.capacity);
        rc = CLI_USAGE;
        goto done;
    }
    const int32_t n_vocab = okv_model_n_vocab(m);
    const int32_t step = chunk < okv_context_max_write(ctx) ? chunk : okv_context_max_write(ctx);
    okv_error err = {0};
    if (dm) {
        /* The draft's own cache (its geometry is its model's), as long as the target's. */
        cli_ctx_opts dopt = o;
        dopt.capacity = cfg.capacity;
        dopt.draft = true;
        if (!(dctx = cli_context(cmd, dm, &dopt))) goto done;
    }
    if (spec) {
        const okv_spec_config scfg = {.n_draft = n_draft, .lookup_ngram = lookup_n, .sampling = sp, .p_min = p_min};
        if (!(spc = okv_speculator_create(ctx, dctx, &scfg, &err))) {
            cli_error(cmd, "%s", err.message);
            goto done;
        }
    }
    if (!(smp = okv_sampler_create(&sp, n_vocab, &err))) {
        cli_error(cmd, "sampler: %s", err.message);
        goto done;
    }
    if (grammar_file || json_schema) {
        /* The GBNF: the file's text, or the schema's conversion. */
        char *gbnf = NULL;
        if (grammar_file) {
            if (!(gbnf = cli_read_text(cmd, "--grammar-file", grammar_file, NULL))) goto done; /* like a model file */
        } else if (!(gbnf = okv_json_schema_to_gbnf(json_schema, strlen(json_schema), &err))) {
            cli_error(cmd, "--json-schema: %s", err.message);
            rc = CLI_USAGE;
            goto done;
        }
        gram = okv_grammar_parse(gbnf, strlen(gbnf), NULL, &err);
        free(gbnf);
        if (!gram) {
            cli_error(cmd, "%s: %s", grammar_file ? grammar_file : "--json-schema", err.message);
            rc = CLI_USAGE;
            goto done;
        }
        if (!(gvoc = okv_grammar_vocab_create(tok, NULL, 0, &err)) || !(gmat = okv_grammar_matcher_create(gram, &err)) ||
            okv_sampler_set_grammar(smp, gmat, gvoc, &err) != OKV_OK) {
            cli_error(cmd, "grammar: %s", err.message);
            goto done;
        }
    }
    logits = malloc((size_t)n_vocab * sizeof *logits);
    pos = malloc((size_t)okv_context_max_write(ctx) * sizeof *pos);
    /* The sequence: prompt, then every token sampled (the cache holds all but the last). */
    seq = malloc(((size_t)cfg.capacity + 1) * sizeof *seq);
    out = malloc((size_t)(n_draft + 1) * sizeof *out);
    if (!logits || !pos || !seq || !out) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    memcpy(seq, ids, (size_t)n_prompt * sizeof *ids);
    int32_t n_seq = n_prompt;
    fprintf(stderr, "offkv run: %s\n", okv_model_describe(m));
    if (dm) fprintf(stderr, "offkv run: draft %s\n", okv_model_describe(dm));
    fprintf(stderr, "offkv run: %d prompt tokens, chunk %d, capacity %d, %s KV, threads %d, seed %llu\n",
            (int)n_prompt, (int)step, (int)cfg.capacity, cli_kv_types[kv], (int)threads, (unsigned long long)sp.seed);

    if (warmup) {
        double w0 = cli_now();
        if (cli_prefill(cmd, ctx, ids, 0, n_prompt, step, pos, logits, NULL) < 0) goto done;
        if (okv_cache_clear(cache, &err) != OKV_OK) {
            cli_error(cmd, "clearing the cache after warmup: %s", err.message);
            goto done;
        }
        fprintf(stderr, "offkv run: warmup %.1f ms, cache cleared\n", (cli_now() - w0) * 1e3);
    }

    const uint64_t fingerprint = cache_path ? okv_model_fingerprint(m) : 0;
    int32_t reused = 0;
    if (cache_path && access(cache_path, F_OK) == 0) {
        int32_t n_saved = 0;
        /* seq has room for capacity + 1 tokens; the file holds at most capacity. */
        if (okv_cache_load(cache, cache_path, fingerprint, seq, cfg.capacity, &n_saved, &err) != OKV_OK) {
            cli_error(cmd, "--prompt-cache: %s", err.message);
            goto done;
        }
        int32_t common = 0;
        while (common < n_saved && common < n_prompt && seq[common] == ids[common]) common++;
        /* The last prompt token is evaluated again for its logits. */
        reused = common < n_prompt ? common : n_prompt - 1;
        /* Sliding-window layers hold only their last window + max_write - 1
         * positions: past those, the sequence cannot be cut back. */
        const bool rings_moved = !okv_cache_can_rewind(cache, reused);
        const int32_t could = reused;
        if (rings_moved) reused = 0;
        if (okv_cache_rewind(cache, reused, &err) != OKV_OK) {
            cli_error(cmd, "--prompt-cache: %s", err.message);
            goto done;
        }
        memcpy(seq, ids, (size_t)n_prompt * sizeof *ids);
        fprintf(stderr, "offkv run: prompt cache '%s': reused %d of %d prompt tokens (the file held %d", cache_path,
                (int)reused, (int)n_prompt, (int)n_saved);
        if (rings_moved)
            fprintf(stderr, "; %d are common, but its sliding-window layers no longer hold position %d", (int)could,
                    (int)could);
        fprintf(stderr, ")\n");
    } else if (cache_path) {
        fprintf(stderr, "offkv run: prompt cache '%s' does not exist yet: evaluating the whole prompt\n", cache_path);
    }

    /* Ctrl-C ends the work at the next chunk or token (a second one kills
     * as usual); run reports, saves --prompt-cache and exits 130. */
    cli_sigint_catch(true, &old_sigint);
    sigint_set = true;
    double t0 = cli_now();
    const int32_t got = cli_prefill(cmd, ctx, ids, reused, n_prompt, step, pos, logits, &cli_interrupted);
    if (got < 0) goto done;
    if (got < n_prompt) {
        fprintf(stderr, "offkv run: interrupted while evaluating the prompt: %d of %d tokens evaluated\n",
                (int)(got - reused), (int)(n_prompt - reused));
        rc = CLI_INTERRUPTED;
        if (cache_path) rc = save_prompt_cache(cmd, cache, cache_path, fingerprint, seq) ? rc : CLI_FAIL;
        goto done;
    }
    double t_prompt = cli_now() - t0;
    /* after the prompt's status line (on a terminal that shares stdout, the
     * line would overwrite the prompt's last line) */
    if (display_prompt && !cli_put_text(cmd, prompt, strlen(prompt))) goto done;

    int32_t n_gen = 0, p = n_prompt;
    const char *stop = "n reached";
    okv_detok_stream us = {0};
    t0 = cli_now();
    if (spc) {
        /* The first token comes from the prompt's logits; then each step
         * returns the kept proposals and the target's own next token. */
        int32_t n_out = 1;
        if ((out[0] = okv_sampler_sample(smp, logits)) < 0) {
            cli_error(cmd, "the model's logits at position %d hold NaN (broken weights or overflowed arithmetic)",
                      (int)p);
            goto done;
        }
        seq[n_seq++] = out[0];
        if (n_predict > 0 && okv_speculator_reset(spc, seq, n_seq, &err) != OKV_OK) {
            cli_error(cmd, "%s", err.message);
            goto done;
        }
        while (n_gen < n_predict) {
            if (cli_interrupted) {
                stop = "interrupted";
                break;
            }
            bool ended = false;
            for (int32_t i = 0; i < n_out && !ended; i++) {
                if (okv_tokenizer_is_eog(tok, out[i])) {
                    stop = "end of generation";
                    ended = true;
                    break;
                }
                n_gen++;
                if (!cli_emit(cmd, tok, &us, out[i])) goto done;
                if (n_gen == n_predict) ended = true;
            }
            if (ended) break;
            if (okv_cache_length(cache) >= cfg.capacity) {
                stop = "context full";
                break;
            }
            if (okv_speculator_step(spc, n_predict - n_gen, out, &n_out, &err) != OKV_OK) {
                cli_error(cmd, "speculative step at position %d: %s", (int)okv_cache_length(cache), err.message);
                goto done;
            }
            memcpy(seq + n_seq, out, (size_t)n_out * sizeof *out);
            n_seq += n_out;
        }
    } else {
        while (n_gen < n_predict) {
            if (cli_interrupted) {
                stop = "interrupted";
                break;
            }
            int32_t id = okv_sampler_sample(smp, logits);
            if (id == OKV_SAMPLE_NAN) {
                cli_error(cmd, "the model's logits at position %d hold NaN (broken weights or overflowed arithmetic)",
                          (int)p);
                goto done;
            }
            if (id < 0) {
                stop = "the grammar allows no token of the vocabulary here";
                break;
            }
            if (gmat && okv_sampler_accept(smp, id, &err) != OKV_OK) {
                cli_error(cmd, "grammar: %s", err.message);
                goto done;
            }
            seq[n_seq++] = id;
            if (okv_tokenizer_is_eog(tok, id)) {
                stop = "end of generation";
                break;
            }
            n_gen++;
            if (!cli_emit(cmd, tok, &us, id)) goto done;
            if (n_gen == n_predict) break;
            if (p >= cfg.capacity) {
                stop = "context full";
                break;
            }
            pos[0] = p;
            if (okv_context_eval_last(ctx, &id, pos, 1, logits, &err) != OKV_OK) {
                cli_error(cmd, "eval at position %d: %s", (int)p, err.message);
                goto done;
            }
            p++;
        }
    }
    double t_gen = cli_now() - t0;
    char tail[8];
    size_t n_tail = okv_detok_stream_finish(&us, tail);
    tail[n_tail++] = '\n';
    if (!cli_put_text(cmd, tail, n_tail)) goto done;

    char line[256];
    fprintf(stderr, "offkv run: stopped: %s\n", stop);
    fprintf(stderr, "offkv run: prompt     %5d tokens in %9.2f ms (%8.2f tokens/s)\n", (int)(n_prompt - reused),
            t_prompt * 1e3, t_prompt > 0 ? (n_prompt - reused) / t_prompt : 0.0);
    fprintf(stderr, "offkv run: generation %5d tokens in %9.2f ms (%8.2f tokens/s)\n", (int)n_gen, t_gen * 1e3,
            t_gen > 0 && n_gen > 0 ? n_gen / t_gen : 0.0);
    if (spc) {
        okv_spec_stats ss;
        okv_speculator_get_stats(spc, &ss);
        char how[64], rate[32];
        if (dm) snprintf(how, sizeof how, "draft model, %d per step, p-min %g", (int)n_draft, (double)p_min);
        else snprintf(how, sizeof how, "prompt lookup, %d per step", (int)n_draft);
        if (ss.drafted > 0) snprintf(rate, sizeof rate, "%.1f%%", 100.0 * (double)ss.accepted / (double)ss.drafted);
        else snprintf(rate, sizeof rate, "none drafted");
        fprintf(stderr,
                "offkv run: speculative (%s): drafted %lld, accepted %lld (acceptance %s), %lld target evals, "
                "%.2f tokens per eval\n",
                how, (long long)ss.drafted, (long long)ss.accepted, rate, (long long)ss.steps,
                ss.steps > 0 ? (double)ss.generated / (double)ss.steps : 0.0);
    }
    fprintf(stderr, "offkv run: %s\n", cli_cache_line(cache, line, sizeof line));
    rc = cli_interrupted ? CLI_INTERRUPTED : CLI_OK;
    if (cache_path) rc = save_prompt_cache(cmd, cache, cache_path, fingerprint, seq) ? rc : CLI_FAIL;
done:
    if (sigint_set) cli_sigint_release(&old_sigint);
    free(logits);
    free(pos);
    free(ids);
    free(seq);
    free(out);
    okv_speculator_free(spc);
    okv_sampler_free(smp);
    okv_grammar_matcher_free(gmat);
    okv_grammar_vocab_free(gvoc);
    okv_grammar_free(gram);
    okv_context_free(dctx);
    okv_context_free(ctx);
    okv_model_free(dm);
    okv_model_free(m);
    return rc;
}
