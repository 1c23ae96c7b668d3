/* offkv serve: an OpenAI-compatible HTTP server over offkv (chat
 * completions, completions and the Responses API; and Anthropic's
 * Messages API).
 *
 * Its parts, each in its own file, so each can be tested alone:
 *   request.c   the request bodies (JSON, through cJSON) into srv_request,
 *               and the OpenAI-shaped error bodies;
 *   template.c  chat templates: recognised by their markers as llama.cpp's
 *               llm_chat_detect_template does, rendered to prompt text;
 *   sched.c     the sequences (one cache each, one model) and the worker
 *               thread that decodes all active ones together;
 *   anthropic.c Anthropic's Messages API: its requests into OpenAI chat
 *               requests, the answers' OpenAI pieces into its blocks and
 *               events;
 *   responses.c OpenAI's Responses API, the same way: its requests into
 *               chat requests, the answers' pieces into its output items
 *               and events;
 *   http.c, openai.c, lifecycle.c  the HTTP server (libmicrohttpd): the
 *               wire, the OpenAI shaping of answers and SSE, the process's
 *               life (server.h, internal to them, says what each offers).
 * The HTTP and JSON libraries stay out of liboffkv: this folder is its own
 * static library, linked into the offkv program and its tests. */
#ifndef OFFKV_SERVE_H
#define OFFKV_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offkv/chat.h"
#include "offkv/model.h"
#include "offkv/sampler.h"
#include "offkv/tokenizer.h"

/* ---- chat templates (template.c) ---- */

typedef struct srv_message {
    char *role;     /* "system", "user", "assistant", ... */
    char *content;  /* UTF-8 text */
} srv_message;

/* The Jinja text of a template llama.cpp names ("chatml", "llama2",
 * "llama3", "gemma", "mistral-v3", ...), or NULL. */
const char *srv_template_builtin(const char *name);

/* The names --chat-template accepts, comma separated, for messages. */
const char *srv_template_names(void);

/* A parsed chat template with the model's bos / eos texts. */
typedef struct srv_chat srv_chat;

/* The template: file (--chat-template-file) if given, else name
 * (--chat-template: a name above or a Jinja text), else the model file's
 * tokenizer.chat_template, else ChatML (said in srv_chat_describe).  NULL
 * with err filled (a syntax error names its line and column). */
srv_chat *srv_chat_load(const char *model_path, const okv_tokenizer *tok, const char *name, const char *file, char *err,
                        size_t cap);
void srv_chat_free(srv_chat *c);

/* Sets bos_token / eos_token to the vocabulary's BOS and EOS texts, and
 * whether a leading bos_token is left to the tokenizer. */
void srv_chat_use_tokenizer(srv_chat *c, const okv_tokenizer *tok);

/* The template's Jinja text ("" when none), for GET /props. */
const char *srv_chat_source(const srv_chat *c);

/* Where the template came from, for the start line. */
const char *srv_chat_describe(const srv_chat *c);

/* How to read the model's answers (tool-call format, <think>); prompt may
 * be NULL.  A template that does not show the model its tools gets them
 * from the server in llama.cpp's generic JSON form (srv_chat_render), and
 * the answers are read in that form. */
okv_chat_syntax srv_chat_syntax(const srv_chat *c, const char *prompt);

/* ---- requests (request.c) ---- */

/* SRV_MAX_STOP_BYTES: the longest stop string: every token is checked
 * against each one's tail in the one decode thread all sequences share.
 * SRV_MAX_THINK_MESSAGE: the longest thinking_budget_message (its tokens
 * go in one a step, as generated ones do).  SRV_MAX_INFILL_EXTRA: the most
 * files of an /infill's input_extra. */
enum { SRV_MAX_STOPS = 4, SRV_MAX_STOP_BYTES = 4096, SRV_MAX_PROMPTS = 16, SRV_MAX_TOP_LOGPROBS = 20,
       SRV_MAX_INFILL_EXTRA = 256,
       SRV_MAX_THINK_MESSAGE = 4096 };

/* What a request asks for: a chat answer, a completion of prompts, or
 * llama.cpp's /infill (the middle between a prefix and a suffix). */
typedef enum srv_kind { SRV_CHAT = 1, SRV_COMPLETION = 2, SRV_INFILL = 3 } srv_kind;

typedef struct srv_request {
    srv_kind kind;
    srv_message *msgs;      /* chat */
    int n_msgs;
    char **prompts;         /* completion: one choice per prompt */
    int n_prompts;
    int32_t max_tokens;     /* -1: until the end of sequence or the context */
    float temperature, top_p;
    int32_t top_k;
    bool has_seed;
    uint64_t seed;
    char *stops[SRV_MAX_STOPS];
    int n_stops;
    bool stream, include_usage;
    bool return_progress;   /* llama.cpp's extension: a stream sends prompt_progress chunks while the prompt is read */
    bool ignore_eos;        /* llama.cpp's extension: generate through end-of-sequence tokens (benchmarks) */
    int32_t n;              /* choices per prompt (forks of one prompt) */
    okv_sampler_controls controls; /* min_p and the penalties */
    int32_t n_bias;         /* logit_bias: token ids (checked against the vocabulary by the caller) */
    int32_t *bias_ids;
    float *bias;
    char *grammar;          /* GBNF the output must follow (grammar, response_format, json_schema); NULL: none */
    int32_t top_logprobs;   /* -1: no logprobs; else how many alternatives per token */
    double max_predict_ms;  /* llama.cpp's t_max_predict_ms (an editor's latency bound); 0: none */
    /* chat: what the template sees (template.c) */
    char *messages_json;        /* the messages, arguments as objects */
    char *tools_json;           /* NULL: no tools */
    char *template_kwargs_json; /* chat_template_kwargs, or NULL */
    int tool_choice;            /* SRV_TOOLS_* */
    char *tool_choice_name;     /* SRV_TOOLS_NAMED: the function */
    bool parallel_tool_calls;
    bool add_generation_prompt;
    char *continue_text;        /* continue_final_message (vLLM's and transformers' name): the final assistant
                                   turn's text, where the prompt ends so that the answer continues it; NULL: none */
    int32_t think_budget;       /* thinking_budget_tokens (llama.cpp's name): reasoning tokens before the
                                   template's markup ends reasoning; -1: no limit; -2: not given (the
                                   server's --reasoning-budget) */
    char *think_message;        /* thinking_budget_message (llama.cpp's): text written before that markup;
                                   NULL: not given (the server's --reasoning-budget-message) */
    /* infill: the text before the cursor (input_prefix, then prompts[0]:
     * llama.cpp's prompt, the cursor's line so far), after it (input_suffix)
     * and other files for context (input_extra); a completion with OpenAI's
     * suffix has input_suffix, its prompts the prefixes */
    char *input_prefix, *input_suffix;
    char **extra_names, **extra_texts;
    int n_extra;
} srv_request;

enum { SRV_TOOLS_AUTO, SRV_TOOLS_NONE, SRV_TOOLS_REQUIRED, SRV_TOOLS_NAMED };

/* Which API's shapes an answer takes: its errors' bodies (OpenAI's
 * {"error": {...}} or Anthropic's {"type": "error", ...}) and events. */
typedef enum srv_api { SRV_API_OPENAI, SRV_API_ANTHROPIC, SRV_API_RESPONSES, SRV_API_LLAMA } srv_api;

/* What a failed parse says: HTTP status, OpenAI's error type, the offending
 * parameter ("" when none) and a message naming it. */
typedef struct srv_fail {
    int status;
    char type[48];
    char param[48];
    char message[256];
    const char *allow; /* a 405's Allow header: the methods the path takes (static) */
    srv_api api;       /* the shape of its body where no route is known yet (srv_send_error_raw) */
} srv_fail;

struct cJSON;

/* s[0..n) as valid UTF-8 for a JSON string, NUL-ended in out (cap bytes):
 * each byte that is not part of a valid character, and each NUL (which
 * would end a C string), becomes U+FFFD; cut at a character when out is
 * full. */
void srv_utf8_clean(const char *s, size_t n, char *out, size_t cap);

/* Parses a request body (len bytes, not NUL-terminated; any bytes) into a
 * JSON object, refusing what every endpoint refuses: bytes that are not
 * UTF-8, malformed JSON or bytes after it, a value that is not an object,
 * a \u0000 in a string and a key given twice in one object.  Returns the
 * object (free with cJSON_Delete) or NULL with *fail filled (status 400). */
struct cJSON *srv_body_parse(const char *body, size_t len, srv_fail *fail);

/* Parses a request body (len bytes, not NUL-terminated; any bytes) for
 * the endpoint kind.  On success fills *req (free with srv_request_clear)
 * and returns true; otherwise fills *fail (status 400) and returns false,
 * leaving *req empty. */
bool srv_request_parse(srv_kind kind, const char *body, size_t len, srv_request *req, srv_fail *fail);

/* Frees what a request holds and empties it. */
void srv_request_clear(srv_request *req);

/* template.c's part of parsing a chat request (root is the body's JSON
 * object): messages_json, tools, tool_choice, parallel_tool_calls,
 * chat_template_kwargs, add_generation_prompt.  False with *fail set. */
bool srv_chat_request(const struct cJSON *root, srv_request *r, srv_fail *fail);
/* True for a reasoning effort OpenAI's reasoning_effort or Anthropic's
 * output_config.effort names ("none", "minimal", "low", "medium", "high",
 * "xhigh", "max"), which reaches the template as reasoning_effort. */
bool srv_effort_ok(const char *effort);
#define SRV_EFFORTS "\"none\", \"minimal\", \"low\", \"medium\", \"high\", \"xhigh\" or \"max\""

void srv_chat_request_clear(srv_request *r);

/* The conversation of a parsed chat request rendered by the template
 * (malloc'd), or NULL with *fail set: a template that raises is a 400
 * carrying its message.  tools_turn: a template with no tool section gets
 * the request's tools as a system turn, in DeepSeek V3.1's layout where the
 * template writes DeepSeek's calls (R1, V3.1), else in llama.cpp's generic
 * form (a completion does; /apply-template shows the template's own
 * rendering, as transformers renders it). */
char *srv_chat_render(const srv_chat *c, const srv_request *r, bool tools_turn, srv_fail *fail);

/* The part of a rendered prompt to tokenize: without a leading bos_token
 * when the tokenizer adds BOS itself. */
const char *srv_chat_model_text(const srv_chat *c, const char *prompt);

/* The body of an OpenAI error: {"error":{"message","type","param","code"}}
 * (param null when empty); malloc'd, or NULL when out of memory. */
char *srv_error_json(const srv_fail *f);

/* Fills f. */
void srv_fail_set(srv_fail *f, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Fills f as a 400 invalid_request_error naming param; returns false (the
 * request parsers' one way to refuse a field). */
bool srv_bad(srv_fail *f, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- constrained tool calls (toolgrammar.c) ---- */

/* Where a lazy tool-call grammar switches on. */
typedef struct srv_trigger {
    const char *text; /* the format's opener, or "{" for a bare JSON call (static) */
    bool anchored;    /* only at the answer's start (Llama 3, generic) */
    char skipped[512]; /* what of the tools' schemas the lazy grammar takes as no constraint ("" when all holds):
                          "TOOL#PATH: keyword 'K'", ... (okv_json_schemas_to_gbnf_loose) */
} srv_trigger;

/* Whether len bytes of GBNF parse and their matcher can start, as the
 * scheduler will need them to; *err says why not. */
bool srv_grammar_usable(const char *gbnf, size_t len, okv_error *err);

/* The GBNF of tool calls in syn->format's markup to r's tools (the one
 * tool_choice names, else any), each call's arguments following its
 * tool's "parameters" schema.  parallel_tool_calls false: exactly one
 * call; else one or more, joined the format's way (gpt-oss and Llama 3
 * write one).  lazy false (tool_choice "required" or named): the answer is
 * the calls, from its first token (after a prompt that opened a reasoning
 * block, from its end: the scheduler's matcher skips it,
 * srv_job_params.reasoning).  lazy
 * true (tool_choice "auto"): the grammar's sentences start at the format's
 * opener, *trig says where it switches on
 * (okv_grammar_matcher_create_lazy), and the generic format may answer
 * {"response": text} instead.  NULL with f->status 0 for a lazy grammar of
 * a format offkv cannot constrain (qwen3-coder, command-r, apertus,
 * pythonic: decoding stays free); NULL with *f set: 400 naming the tool
 * and the schema keyword offkv cannot honour, or the format it cannot
 * force; 500 when out of memory.  Free with free(). */
char *srv_tool_call_grammar(const srv_request *r, const okv_chat_syntax *syn, bool lazy, srv_trigger *trig, srv_fail *f);

/* ---- the answer as OpenAI shapes it (toolcalls.c) ---- */

/* A chat answer being streamed: the text so far and what was sent of it. */
typedef struct srv_chat_stream {
    okv_chat_syntax syn;
    bool parse;      /* false: the text is the content, passed through */
    bool parallel;   /* parallel_tool_calls: else only the first call counts */
    bool calls;      /* the request offers tools (and tool_choice is not "none"): else no call is returned */
    uint64_t id_seed;
    char *acc;
    size_t n, cap;
    size_t content_sent, reasoning_sent;
    int calls_started; /* calls whose id and name went out */
    char **ids;
    size_t *args_sent;
    int n_ids;
} srv_chat_stream;

/* Starts a stream for request r answered with syntax syn (tool calls are
 * parsed, and returned, only when r offers tools and tool_choice is not
 * "none"; gpt-oss's channels are parsed always, for its reasoning, but a
 * call the request did not allow is not returned). */
void srv_chat_stream_init(srv_chat_stream *st, const okv_chat_syntax *syn, const srv_request *r, uint64_t seed);

/* Adds the next piece of text (final: the answer has ended) and puts what
 * it adds into the chunk's delta: content, reasoning_content and
 * tool_calls[i] (id, type and name first, then arguments in pieces).  *any
 * tells whether anything was added; false when out of memory. */
bool srv_chat_stream_feed(srv_chat_stream *st, const char *text, size_t n, bool final, struct cJSON *delta, bool *any);

/* Whether the stream has sent a tool call (finish_reason "tool_calls"). */
bool srv_chat_stream_called(const srv_chat_stream *st);
void srv_chat_stream_free(srv_chat_stream *st);

/* The message of a whole answer: {"role", "content", ["reasoning_content"],
 * ["tool_calls"]}; *called tells whether it holds calls.  NULL when out of
 * memory. */
struct cJSON *srv_chat_message(srv_chat_stream *st, const char *text, bool *called);

/* Whether answers in st's syntax need control tokens as text. */
bool srv_chat_needs_special(const srv_chat_stream *st);


/* An answer's tokens: of the prompt (cached among them), generated (those
 * inside reasoning among them): the usage of every API's answers. */
typedef struct srv_usage {
    int64_t input, cached, output, reasoning;
} srv_usage;

/* ---- /infill (infill.c) ---- */

/* The prompt of an /infill request (its input_prefix, prompt, input_suffix
 * and input_extra) in the model's fill-in-the-middle tokens, as llama.cpp's
 * server builds it for a context of n_ctx positions: malloc'd ids, their
 * count in *n.  NULL with *f set: 501 when the vocabulary lacks the FIM
 * prefix, suffix or middle token, 500 out of memory. */
int32_t *srv_infill_prompt(const okv_tokenizer *tok, const srv_request *r, int32_t n_ctx, size_t *n, srv_fail *f);

/* ---- Anthropic's Messages API (anthropic.c) ---- */

/* The body of the OpenAI chat request that an Anthropic Messages request
 * body (len bytes, any bytes) asks for, as malloc'd JSON text; NULL with *f
 * set (400 naming the field, 500 out of memory).  count: for
 * /v1/messages/count_tokens, which has no max_tokens and generates nothing
 * (only the prompt's parts are kept). */
char *srv_anthropic_request(const char *body, size_t len, bool count, srv_fail *f);

/* Anthropic's error body {"type": "error", "error": {"type", "message"}},
 * its type from f->status (400 invalid_request_error, 503
 * overloaded_error, ...); malloc'd, NULL when out of memory. */
char *srv_anthropic_error_json(const srv_fail *f);

/* The message of a whole answer from its OpenAI message (srv_chat_message;
 * NULL: no content): thinking, text and tool_use blocks in that order, a
 * call whose arguments are not a JSON object kept as a text block (not
 * lost, and no input a client cannot parse); *tool_uses (may be NULL) the
 * tool_use blocks.  stop_reason and stop_sequence are null: see
 * srv_anthropic_set_stop.  NULL when out of memory. */
struct cJSON *srv_anthropic_message(const struct cJSON *msg, const char *id, const char *model,
                                    const srv_usage *u, int *tool_uses);

/* Sets a message's stop_reason ("end_turn", "max_tokens", "stop_sequence"
 * or "tool_use") and stop_sequence (NULL: null); false when out of memory. */
bool srv_anthropic_set_stop(struct cJSON *message, const char *stop_reason, const char *stop_sequence);

enum { SRV_BLOCK_NONE, SRV_BLOCK_TEXT, SRV_BLOCK_THINKING, SRV_BLOCK_TOOL_USE };

/* A streamed answer's events ("event: NAME\ndata: JSON\n\n") appended to
 * *out (*n bytes of *cap: a growing buffer, kept NUL-terminated). */
typedef struct srv_anthropic_stream {
    char **out;
    size_t *n, *cap;
    int open;        /* SRV_BLOCK_*: the kind of block index, open */
    int index;       /* the last block started (-1: none) */
    int tool_uses;   /* tool_use blocks sent */
    char *call_id, *call_name; /* the tool call being read (NULL: none): sent once whole */
    char *args;
    size_t n_args, cap_args;
} srv_anthropic_stream;

/* message_start (stop_reason null, the usage so far).  Each function
 * below is false when out of memory. */
bool srv_anthropic_start(srv_anthropic_stream *st, const char *id, const char *model, const srv_usage *u);
/* The events of one OpenAI chat delta (srv_chat_stream_feed's):
 * reasoning_content as thinking_delta, content as text_delta; a tool
 * call's pieces are gathered and go out whole when the next block or the
 * end comes (a tool_use block, or its text when its arguments are not a
 * JSON object); a block of another kind closes the open one. */
bool srv_anthropic_delta(srv_anthropic_stream *st, const struct cJSON *delta);
/* Sends the gathered call and closes the open block: after it tool_uses is
 * final (the stop reason's "tool_use"). */
bool srv_anthropic_finish(srv_anthropic_stream *st);
/* srv_anthropic_finish, then message_delta (stop_reason and stop_sequence
 * as srv_anthropic_set_stop's, the usage) and message_stop. */
bool srv_anthropic_end(srv_anthropic_stream *st, const char *stop_reason, const char *stop_sequence,
                       const srv_usage *u);
/* An error event (a failed or cut-off generation), in place of the end. */
bool srv_anthropic_error_event(srv_anthropic_stream *st, const srv_fail *f);
/* A ping event (a stream kept alive while the prompt is read). */
bool srv_anthropic_ping(srv_anthropic_stream *st);
/* Frees what the stream holds (the call being read). */
void srv_anthropic_stream_free(srv_anthropic_stream *st);

/* ---- OpenAI's Responses API (responses.c) ---- */

/* The body of the OpenAI chat request that a Responses request body (len
 * bytes, any bytes) asks for, as malloc'd JSON text; NULL with *f set (400
 * naming the field, 500 out of memory).  offkv keeps no responses:
 * previous_response_id, conversation and item references are refused (the
 * client sends the whole conversation, as with store: false). */
char *srv_responses_request(const char *body, size_t len, srv_fail *f);

enum { SRV_ITEM_REASONING, SRV_ITEM_MESSAGE, SRV_ITEM_CALL };

/* One output item as it grows: reasoning text, message text or a
 * function call's arguments in text. */
typedef struct srv_responses_item {
    int kind;                 /* SRV_ITEM_* */
    char *call_id, *name;     /* a call's */
    char *text;
    size_t n, cap;
} srv_responses_item;

/* A response: its output items (from an answer's OpenAI message, or
 * streamed deltas) and what its object and events say of it; the
 * stream's events ("event: NAME\ndata: JSON\n\n") go to *out (*n bytes of
 * *cap: a growing buffer, kept NUL-terminated). */
typedef struct srv_responses {
    char id[48];              /* resp_...; item ids are made from it */
    const char *model;
    long long created;
    srv_responses_item *items;
    int n_items, cap_items;
    bool open;                /* the last item is still being streamed */
    char **out;
    size_t *n, *cap;
    long long seq;            /* the next event's sequence_number */
} srv_responses;

/* The response object of a whole answer, from its OpenAI message
 * (srv_chat_message): a reasoning item, a message item and a function_call
 * item per call, in that order; status "completed", or "incomplete" with
 * reason max_output_tokens when cut (length).  NULL when out of memory. */
struct cJSON *srv_responses_object(srv_responses *r, const struct cJSON *msg, bool length,
                                   const srv_usage *u);

/* response.created and response.in_progress.  Each function below is
 * false when out of memory. */
bool srv_responses_start(srv_responses *r);
/* The events of one OpenAI chat delta (srv_chat_stream_feed's):
 * reasoning_content as a reasoning item's reasoning_text, content as a
 * message item's output_text, each tool call as a function_call item, its
 * arguments as they come; an item of another kind closes the open one. */
bool srv_responses_delta(srv_responses *r, const struct cJSON *delta);
/* Closes the open item, then response.completed (or response.incomplete
 * when length) with the whole response. */
bool srv_responses_end(srv_responses *r, bool length, const srv_usage *u);
/* An error event (a failed or cut-off generation), in place of the end. */
bool srv_responses_error_event(srv_responses *r, const srv_fail *f);
/* Frees the items. */
void srv_responses_free(srv_responses *r);

/* ---- an answer's reasoning, followed as it is generated (reasoning.c) ---- */

/* Where a growing answer stands in its reasoning markup
 * (okv_chat_reasoning): fed each generated token's text, it says whether
 * the answer is inside reasoning now, so that the scheduler counts the
 * reasoning tokens (usage's reasoning_tokens) and ends reasoning at a
 * budget (thinking_budget_tokens, Anthropic's budget_tokens). */
typedef struct srv_reasoning {
    okv_chat_reasoning_markup m; /* m.open NULL: never inside */
    bool inside;
    bool settled;  /* a leading opener can no longer come: past the answer's start, or closed */
    size_t lead;   /* leading markup: bytes of m.open matched at the start */
    char win[40];  /* the answer's last bytes, to find markup split across tokens */
    size_t n_win;
} srv_reasoning;

void srv_reasoning_init(srv_reasoning *r, const okv_chat_reasoning_markup *m);
/* Takes the next n bytes of the answer's text. */
void srv_reasoning_feed(srv_reasoning *r, const char *text, size_t n);
/* Whether an answer may open a reasoning block that its prompt did not
 * (Qwen 3, SmolLM3 and Command R7B thinking): m's opener counts at the
 * answer's start, the rendered prompt did not close reasoning (it does not
 * end, after white space, with m's close: Qwen 3 with enable_thinking false
 * and SmolLM3's /no_think end in an empty <think></think>, Command R7B's in
 * <|START_THINKING|><|END_THINKING|>), and tok has the opener as one token,
 * as a model trained to reason does (one without spells it only by chance:
 * a random model at a high temperature, into a block it never closes).
 * False for a NULL argument. */
bool srv_reasoning_may_open(const okv_chat_reasoning_markup *m, const char *prompt, const okv_tokenizer *tok);

/* ---- sequences and the decode loop (sched.c) ---- */

typedef struct srv_sched srv_sched;
typedef struct srv_job srv_job;

typedef struct srv_sched_config {
    int32_t n_parallel;     /* sequences */
    int32_t n_queue;        /* requests that may wait for one */
    int32_t capacity;       /* positions each sequence's cache may hold */
    int32_t chunk;          /* most prompt tokens one step evaluates */
    int32_t n_threads;
    const char *kv_type;    /* "f16", "f32" or "q8_0" */
} srv_sched_config;

/* Creates the sequences and starts the worker thread.  NULL after filling
 * err (when not NULL) when something cannot be created. */
srv_sched *srv_sched_create(okv_model *model, const srv_sched_config *cfg, okv_error *err);

/* Ends every request (each finishes as it stands), stops the worker and
 * frees everything.  Jobs still held by callers stay valid until released. */
void srv_sched_free(srv_sched *s);

/* Ends every request now (shutdown): queued ones and running ones finish
 * as SRV_FINISH_SHUTDOWN with what they have; new submissions are refused. */
void srv_sched_stop(srv_sched *s);

/* The positions each sequence may hold. */
int32_t srv_sched_capacity(const srv_sched *s);

typedef struct srv_job_params {
    const int32_t *prompt;
    int32_t n_prompt;
    int32_t max_tokens;     /* -1: up to the context */
    okv_sampler_params sampling;
    char *const *stops;
    int n_stops;
    bool ignore_eos;
    okv_sampler_controls controls;
    const int32_t *bias_ids;
    const float *bias;
    int32_t n_bias;
    const char *grammar;    /* GBNF (parsed per job); NULL: none */
    const char *trigger;    /* non-NULL: the grammar is lazy, on from this text (a tool call's opener) */
    bool trigger_anchored;  /* the trigger counts only at the answer's start */
    int32_t top_logprobs;   /* -1: none */
    bool special;           /* control tokens come out as their text (the answer's markup is parsed) */
    const okv_chat_reasoning_markup *reasoning; /* a chat answer's reasoning markup (copied; NULL: none):
                                                   its tokens are counted (srv_job_usage.reasoning_tokens),
                                                   and a grammar skips a leading block of it
                                                   (okv_grammar_matcher_skip_block): a lazy one's trigger
                                                   does not count in it; another holds what follows it
                                                   where the prompt opened the block or reasoning_may_open */
    bool reasoning_may_open; /* the answer may open reasoning (srv_reasoning_may_open); else a grammar that
                                is not lazy holds the answer from its first token, or the prompt's block's end */
    int32_t think_budget;   /* with reasoning: after this many reasoning tokens, think_message (plain text:
                               its control tokens' names stay text) and reasoning->force come next, token
                               by token, in place of samples; -1: no limit */
    const char *think_message; /* NULL: none */
    double max_predict_s;   /* llama.cpp's t_max_predict_ms, in seconds: once the answer holds a line break,
                               it ends (as "length") at the first token this long after the first; 0: never */
} srv_job_params;

/* Queues a job (copying what it needs).  NULL with *busy set when every
 * sequence is busy and the queue is full or the server is stopping; NULL
 * with *busy false and *err set otherwise: OKV_ERR_NOMEM, or
 * OKV_ERR_INVALID for a grammar that does not parse or whose matcher
 * cannot start (the message says why).  The caller holds one reference. */
srv_job *srv_submit(srv_sched *s, const srv_job_params *p, bool *busy, okv_error *err);

/* Queues n jobs for one prompt (p->sampling.seed + i for job i): the
 * first evaluates the prompt, the others start as forks of its cache once
 * it has (okv_cache_fork), each then sampling on its own.  All or none are
 * queued; false with *busy and *err as srv_submit. */
bool srv_submit_forks(srv_sched *s, const srv_job_params *p, int n, srv_job **jobs, bool *busy, okv_error *err);

/* One generated token's log-probabilities (before sampling). */
typedef struct srv_logprob {
    int32_t id;
    float logprob;
    int32_t n_top;
    int32_t top_ids[SRV_MAX_TOP_LOGPROBS];
    float top_logprobs[SRV_MAX_TOP_LOGPROBS];
} srv_logprob;

/* Copies the job's log-probability records after *consumed, up to those
 * of the text before text_at (the caller's srv_job_poll position: each
 * piece of text with its tokens' records; all of them once the job ended
 * and its text is read), into a malloc'd *out (NULL when none) and
 * advances *consumed; the count. */
size_t srv_job_logprobs(srv_sched *s, srv_job *j, size_t text_at, size_t *consumed, srv_logprob **out);

/* Cancels the job (a client gone): it stops at the next step and frees its
 * sequence. */
void srv_job_cancel(srv_sched *s, srv_job *j);

/* Drops the caller's reference (cancelling the job if it still runs). */
void srv_job_release(srv_sched *s, srv_job *j);

/* SRV_FINISH_SHUTDOWN: cut off (or, when never admitted, refused) by
 * srv_sched_stop, so that a client can tell a shutdown from an end. */
typedef enum srv_finish {
    SRV_RUNNING = 0,
    SRV_FINISH_STOP,
    SRV_FINISH_LENGTH,
    SRV_FINISH_ERROR,
    SRV_FINISH_SHUTDOWN
} srv_finish;

/* What a job has produced: text after *consumed (the caller's position) is
 * copied to a malloc'd *text (may be NULL when there is none), *consumed is
 * advanced.  Waits up to timeout_ms for something new when nothing is.
 * Returns the job's finish state at the time of the call (SRV_RUNNING
 * while it runs). */
srv_finish srv_job_poll(srv_sched *s, srv_job *j, size_t *consumed, char **text, size_t *n_text, int timeout_ms);

/* Waits up to timeout_ms for the job to leave the queue; true once it has
 * (admitted into a sequence, or ended). */
bool srv_job_wait_admitted(srv_sched *s, srv_job *j, int timeout_ms);

typedef struct srv_job_usage {
    int32_t prompt_tokens, completion_tokens, cached_tokens;
    int32_t reasoning_tokens;          /* of completion_tokens, those generated inside reasoning */
    bool admitted;                     /* had a sequence */
    double t_queued;                   /* seconds in the queue (so far, while queued) */
    double t_first, t_done;            /* seconds since submission */
    int stop_index;                    /* the stop string that ended it (srv_job_params.stops), or -1 */
    char error[256];
} srv_job_usage;

void srv_job_usage_get(srv_sched *s, srv_job *j, srv_job_usage *u);

/* How far a job's prompt is read (llama.cpp's prompt_progress): of total
 * prompt tokens, cache came from a cache already (prompt reuse, or the
 * leader's prompt for a fork), processed are in the sequence's cache now
 * (cache included), time_ms since the job got its sequence. */
typedef struct srv_job_progress {
    int32_t total, cache, processed;
    double time_ms;
} srv_job_progress;

/* Fills *p and returns true when the job's prompt has moved on since the
 * caller's *seen (0 at first: none seen), which it advances.  It moves
 * when the job gets its sequence and after every step that reads part of
 * its prompt, the last time to processed == total; a caller that looks
 * less often than that gets the latest (reports are not queued, so a slow
 * reader never falls behind).  False while queued and when nothing
 * changed. */
bool srv_job_progress_get(srv_sched *s, srv_job *j, uint32_t *seen, srv_job_progress *p);

typedef struct srv_sched_stats {
    int32_t active, queued, n_parallel;
    uint64_t prompt_tokens, generated_tokens, cached_tokens, steps;
    double decode_seconds;           /* time the worker spent evaluating */
    double last_tokens_per_second;   /* over the last finished request */
    size_t cache_flat_bytes, cache_ring_bytes;
    int64_t kv_used, kv_total;       /* K/V positions held by running requests, of all sequences' */
    int64_t prompt_pending;          /* prompt tokens submitted and not yet in a cache (queued requests
                                        count their whole prompt, forks none: they copy their leader's) */
} srv_sched_stats;

void srv_sched_stats_get(srv_sched *s, srv_sched_stats *st);

/* ---- token-level answers (tokens.c) ---- */

struct cJSON;

/* OpenAI's logprobs object of a choice for n records: chat's {content,
 * refusal} or the legacy completions' parallel arrays (text_offset counted
 * from *text_offset, which advances); special: control tokens as their
 * text, as a job that shows them writes them (srv_job_params.special). */
struct cJSON *srv_logprobs_json(const okv_tokenizer *tok, srv_kind kind, bool special, const srv_logprob *lp, size_t n,
                                size_t *text_offset);

/* llama.cpp's POST /tokenize and /detokenize: the JSON answer (malloc'd),
 * or NULL with *f filled (400 naming the field). */
char *srv_tokenize_answer(const okv_tokenizer *tok, const char *body, size_t len, srv_fail *f);
char *srv_detokenize_answer(const okv_tokenizer *tok, const char *body, size_t len, srv_fail *f);

typedef struct srv_props {
    const okv_tokenizer *tok;
    const char *model_path, *model_name, *chat_template, *build_info;
    int32_t n_ctx, total_slots;
} srv_props;

/* GET /props as llama.cpp answers it; malloc'd, NULL when out of memory. */
char *srv_props_answer(const srv_props *p);

/* The tokens that end a turn (the tokenizer's end-of-generation set,
 * okv_tokenizer_eog): their count, *ids pointing at them (valid while s
 * lives). */
int srv_sched_eog(const srv_sched *s, const int32_t **ids);

/* ---- the door before the HTTP library (gate.c) ---- */

struct sockaddr;

/* What srv_head_check makes of a request's head (request line and header
 * lines) as far as it has arrived (n bytes of buf): 0 when more must come
 * (and may: n is at most max_head), 1 when it is whole and reads as HTTP/1.x
 * with a Content-Length (if any) of digits no larger than max_body and a
 * Transfer-Encoding (if any) of chunked, -1 when it is refused, with f filled
 * (400, 413, 414, 431, 501 or 505; f->api Anthropic's for a target under
 * /v1/messages, else OpenAI's).  A byte that
 * cannot belong where it is is refused as soon as it arrives. */
int srv_head_check(const char *buf, size_t n, size_t max_head, size_t max_body, srv_fail *f);

/* Writes a whole HTTP response for f (its JSON body in f->api's shape,
 * Connection: close) to socket fd without blocking; false when it did not
 * all go. */
bool srv_send_error_raw(int fd, const srv_fail *f);

/* Whether two socket addresses are one client (the same IP address). */
bool srv_same_client(const struct sockaddr *a, const struct sockaddr *b);

typedef struct srv_gate srv_gate;

/* Header lines a request may have (cpp-httplib's limit, as llama.cpp's
 * server takes). */
#define SRV_MAX_HEADERS 100
#define SRV_MAX_HEADERS_TEXT "100"

typedef struct srv_gate_config {
    int listen_fd;          /* a listening socket (made non-blocking) */
    double timeout;         /* seconds a connection has for its whole head */
    int max_per_client;     /* connections one address may have waiting; a new one drops its oldest */
    int max_waiting;        /* all addresses together */
    size_t max_head;        /* bytes of a head (431 past it) */
    size_t max_body;        /* a larger Content-Length is a 413 */
} srv_gate_config;

/* Takes a connection whose head is whole (its bytes still unread). */
typedef void (*srv_gate_pass_fn)(void *cls, int fd, const struct sockaddr *addr, unsigned addr_len);
/* An answer the gate gave itself (f: its status and words) to the client
 * at addr: counted and logged by the caller. */
typedef void (*srv_gate_count_fn)(void *cls, const srv_fail *f, const struct sockaddr *addr, unsigned addr_len);

/* Starts the thread that accepts on cfg->listen_fd.  NULL when it cannot. */
srv_gate *srv_gate_start(const srv_gate_config *cfg, srv_gate_pass_fn pass, srv_gate_count_fn count, void *cls);

/* Stops accepting and closes every connection still waiting.  NULL is a no-op. */
void srv_gate_stop(srv_gate *g);

/* ---- the HTTP server (lifecycle.c) ---- */

typedef struct srv_config {
    const char *model_path;
    const char *host;
    int port;               /* 0: any free port */
    const char *api_key;    /* NULL: none */
    size_t max_body;
    double timeout;         /* seconds a client has to send a request's head, and again its body */
    int max_per_client;     /* connections one client address may hold (waiting for a head or answered) */
    bool quiet;             /* no line on stderr per answer (wire_log) */
    double keepalive;       /* seconds a stream may go without a byte (a long prompt being read) before it
                               gets a ping, which clients skip and proxies count as traffic; 0: never */
    const char *chat_template;  /* NULL: the model's */
    const char *chat_template_file; /* NULL: none */
    int32_t reasoning_budget; /* reasoning tokens a chat answer may spend when its request names no
                                 thinking_budget_tokens; -1: no limit */
    const char *reasoning_budget_message; /* written before the closing markup when a request names no
                                             thinking_budget_message; NULL: none */
    srv_sched_config sched;
    const char *const *model_options; /* okv_model_load options: NULL-terminated key, value pairs; NULL: none */
    okv_model_progress load_progress; /* the load's progress, given load_progress_user; NULL: none */
    void *load_progress_user;
} srv_config;

/* Runs the server until SIGINT or SIGTERM; the process's exit code.  It
 * listens first (srv_start), loads (srv_load: /health answers 503
 * {"status":"loading"} meanwhile), prints "listening on URL" on stdout
 * when ready, and on a signal drains (srv_stop). */
int srv_run(const srv_config *cfg);

/* The same steps one at a time, for tests and embedders (srv_run also
 * blocks SIGINT/SIGTERM and takes them by sigwait; these touch no signal).
 * srv_start listens on cfg's host and port and answers at once: /health
 * 503 {"status":"loading"}, the chat page 200, every other endpoint 503;
 * NULL after saying why on stderr.  cfg must outlive the server. */
typedef struct srv_server srv_server;
srv_server *srv_start(const srv_config *cfg);
/* The port it listens on (the one picked when cfg->port was 0). */
int srv_port(const srv_server *srv);
/* Parses the chat template, loads the model and starts the scheduler; from
 * then on /health answers 200.  False after saying why on stderr (the
 * server keeps answering 503: stop it). */
bool srv_load(srv_server *srv);
/* Stops accepting, ends every request (queued ones get a 503, running
 * streams an error event and [DONE]), lets the answers go out, frees.  NULL
 * is a no-op. */
void srv_stop(srv_server *srv);

/* The chat page (page.c). */
extern const char srv_page_html[];

double srv_now(void);

#endif
