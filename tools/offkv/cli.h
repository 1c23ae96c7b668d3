/* offkv command line: what the subcommands share (flag values, model and
 * context set-up, messages).  Exit codes: 0 success, 1 a failure while
 * working (a bad model file, an eval error), 2 a usage error (an unknown
 * flag, a bad flag value), 130 (128 + SIGINT, as a shell reports a program
 * Ctrl-C ended) when Ctrl-C ended offkv run's work early. */
#ifndef OFFKV_TOOL_CLI_H
#define OFFKV_TOOL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#include "offkv/cache.h"
#include "offkv/chat.h"
#include "offkv/context.h"
#include "offkv/model.h"
#include "offkv/sampler.h"
#include "offkv/status.h"
#include "offkv/tokenizer.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_INTERRUPTED = 130 };

/* Subcommands: argv[0] is the subcommand's name. */
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_info(int argc, char **argv);

/* True when a is one of the two spellings (b2 may be NULL). */
bool cli_is(const char *a, const char *b1, const char *b2);

/* Threads when the user says nothing: the online cores, at most 8. */
int32_t cli_default_threads(void);

/* The value after flag argv[*i] (advancing *i), or NULL after saying that
 * the flag needs one. */
const char *cli_value(const char *cmd, int argc, char **argv, int *i);

/* Parse value v of flag into *out, checking the range [lo, hi]; on failure
 * they print "offkv CMD: bad value 'V' for FLAG: ..." and return false. */
bool cli_int(const char *cmd, const char *flag, const char *v, long long lo, long long hi, int32_t *out);
bool cli_u64(const char *cmd, const char *flag, const char *v, uint64_t *out);
bool cli_float(const char *cmd, const char *flag, const char *v, double lo, double hi, float *out);
/* v must be one of the NULL-terminated choices; *out gets its index. */
bool cli_choice(const char *cmd, const char *flag, const char *v, const char *const *choices, int *out);

/* A chat template: the file tfile's text, or else the GGUF file model's
 * tokenizer.chat_template (with its BOS / EOS texts); NULL after saying
 * why (a model without a template: "give one with HOW"). */
okv_chat_template *cli_chat_template(const char *cmd, const char *model, const char *tfile, const char *how);

/* The sampling flags of run and chat: --temp, --top-k, --top-p, --seed. */
bool cli_is_sampling_flag(const char *a);
/* Parses sampling flag a's value v into sp (--seed also sets *seed_given);
 * false after saying what is wrong with v. */
bool cli_sampling_flag(const char *cmd, const char *a, const char *v, okv_sampler_params *sp, bool *seed_given);
/* The sampling flags' defaults: temperature 0.8, top-k 40, top-p 0.95. */
okv_sampler_params cli_sampling_defaults(void);
/* A seed from the clock and the process id when --seed was not given. */
void cli_sampling_seed(okv_sampler_params *sp, bool seed_given);

/* Says that flag is unknown and how to get help; returns CLI_USAGE. */
int cli_unknown(const char *cmd, const char *flag);

/* Prints "offkv CMD: error: ..." to stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The whole file at path, pipes and /dev/stdin included (read to the end,
 * not sized by seeking), NUL-terminated; its length in *n (may be NULL).
 * NULL with errno set on failure (EISDIR for a directory, ENOMEM). */
char *cli_read_all(const char *path, size_t *n);

/* cli_read_all for text parsed as a C string: NULL after saying why
 * ("WHAT 'PATH': " and the system's reason, or that the file holds a NUL
 * byte, which would cut the text short). */
char *cli_read_text(const char *cmd, const char *what, const char *path, size_t *n);

/* Flushes stdout now; false (after saying why) when what was printed could
 * not be written, so a command stops instead of working on for nobody. */
bool cli_flush_stdout(const char *cmd);

/* Checks that path names a readable regular file, saying otherwise. */
bool cli_model_file_ok(const char *cmd, const char *path);

/* Monotonic seconds. */
double cli_now(void);

/* "12.3 MiB" style, into buf. */
const char *cli_bytes(size_t n, char *buf, size_t cap);

/* Loads the model at path (sliding_window > 0: the model option of that
 * name), its matrices repacked on n_threads threads, saying why not on
 * failure; *rc is then the exit code (CLI_USAGE when --sliding-window does
 * not apply to the model, else CLI_FAIL). */
okv_model *cli_load_model(const char *cmd, const char *path, int32_t sliding_window, int32_t n_threads, int *rc);

/* On a terminal, a status line on stderr that the next one (or
 * cli_status_clear) rewrites: progress of long work that a log file should
 * not collect.  No-ops when stderr is no terminal. */
bool cli_status_on(void);
void cli_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_status_clear(void);

/* A load's progress for okv_model_load_progress (user: the command's name):
 * on a terminal, one line on stderr rewritten as the load goes and cleared
 * at the end of each stage; NULL when stderr is no terminal (a log gets no
 * progress lines, and the load then leaves the pages of what it does not
 * repack to be read when used). */
okv_model_progress cli_load_progress(void);

/* The flags a command has seen. */
typedef struct cli_seen {
    const char *names[64];
    int n;
} cli_seen;

/* Notes flag (either spelling); false, after saying so, when it was given
 * before: a repeated flag is a mistake to report, not to resolve silently. */
bool cli_once(cli_seen *seen, const char *cmd, const char *flag);

/* Whether flag (its long spelling) was given. */
bool cli_given(const cli_seen *seen, const char *flag);

/* --kv-type's choices, the default (f16) first; NULL-terminated. */
extern const char *const cli_kv_types[];

/* Context options; 0 or NULL leaves the context's default. */
typedef struct cli_ctx_opts {
    int32_t n_threads, capacity, max_write, initial_capacity;
    const char *kv_type;
    bool draft; /* the draft model's context: its warnings say so (the thread count's was said) */
} cli_ctx_opts;

/* Creates a context with its own cache, saying why not on failure; warns
 * when the capacity exceeds the model's training context. */
okv_context *cli_context(const char *cmd, okv_model *m, const cli_ctx_opts *o);

/* Tokenizes text with flags (OKV_TOKENIZE_*); returns a malloc'd array and
 * its length in *n, or NULL after saying why. */
int32_t *cli_tokenize(const char *cmd, const okv_tokenizer *tok, const char *text, unsigned flags, size_t *n);

/* Bytes of cache storage held now by the flat (window 0) and by the ring
 * layers, how many layers of each kind, and how many layers read another's
 * K/V with the bytes that saves. */
typedef struct cli_cache_kinds {
    size_t flat, ring, saved;
    int n_flat, n_ring, n_shared;
} cli_cache_kinds;
void cli_cache_bytes_by_kind(const okv_cache *c, cli_cache_kinds *k);

/* "cache 1.2 MiB for 64 positions: 2 flat layers ..., 4 ring layers ...[,
 * 2 layers sharing K/V (... saved)]" into buf. */
const char *cli_cache_line(const okv_cache *c, char *buf, size_t cap);

/* Writes s (n bytes) to f as a JSON string: escapes, and U+FFFD for each
 * byte that is not UTF-8. */
void cli_json_string(FILE *f, const char *s, size_t n);

/* Evaluates ids[from..n) at positions from..n-1 in chunks of at most chunk
 * (pos: room for chunk positions); the last token's logits land in
 * logits.  A prompt of several chunks shows how far it has got on a
 * terminal.  Returns n, or, when *stop (NULL: never) is set between two
 * chunks, the position evaluated up to (the cache holds ids[..that));
 * -1 after saying why it failed. */
int32_t cli_prefill(const char *cmd, okv_context *ctx, const int32_t *ids, int32_t from, int32_t n, int32_t chunk,
                    int32_t *pos, float *logits, const volatile sig_atomic_t *stop);

/* Ctrl-C during work: cli_sigint_catch sets cli_interrupted to 0 and has
 * SIGINT set it to 1 instead of ending the program (once: with once, a
 * second Ctrl-C ends it as usual), keeping the old action in *old for
 * cli_sigint_release. */
extern volatile sig_atomic_t cli_interrupted;
void cli_sigint_catch(bool once, struct sigaction *old);
void cli_sigint_release(const struct sigaction *old);

/* Saves cache's sequence (its n tokens) to a --prompt-cache path; false
 * after saying why not. */
bool cli_prompt_cache_save(const char *cmd, const okv_cache *cache, const char *path, uint64_t fingerprint,
                           const int32_t *tokens, int32_t n);

/* Checks a --prompt-cache path before the model loads, so that one that
 * can never work is refused before anything is evaluated: "" is no path;
 * an existing file must be a readable regular file; a new one needs a
 * folder it can be written in.  False after saying why. */
bool cli_prompt_cache_path_ok(const char *cmd, const char *path);

/* Writes n bytes of text to stdout now; false (after saying why) when they
 * could not be written, so that lost output is never reported as success. */
bool cli_put_text(const char *cmd, const char *text, size_t n);

/* Streams token id's text to stdout; a character split across tokens
 * waits for its last byte in us (okv_detok_stream). */
bool cli_emit(const char *cmd, const okv_tokenizer *tok, okv_detok_stream *us, int32_t id);

#endif
