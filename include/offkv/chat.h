/* offkv — chat templates: the prompt text a model's own Jinja template
 * makes of a conversation, as Hugging Face's apply_chat_template does.
 *
 * A template is parsed once (okv_chat_template_parse, or from a GGUF
 * file's tokenizer.chat_template with okv_chat_template_from_gguf) and
 * rendered any number of times, from any number of threads at once: a
 * parsed template is immutable, and each render allocates its own memory.
 *
 * The language is jinja2's, in the environment transformers uses:
 * trim_blocks, lstrip_blocks, loop controls (break / continue), `tojson`
 * without ASCII escaping (json.dumps' indent / separators / sort_keys), the
 * globals raise_exception(msg) and strftime_now(fmt), and a sandbox: a
 * template sees only the data given to it (messages, tools, bos_token,
 * eos_token, add_generation_prompt and any extra variables), and a render
 * that would loop, recurse, allocate or write beyond the limits fails with
 * an error instead of hanging or exhausting memory.
 *
 * Conversations and tools are given as JSON text, as in an OpenAI request:
 * messages carry role, content (a string, or a list of parts), and where
 * they apply tool_calls, tool_call_id, name and reasoning_content; the
 * template decides what it prints of them. */
#ifndef OFFKV_CHAT_H
#define OFFKV_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include "offkv/gguf.h"
#include "offkv/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_chat_template okv_chat_template;

/* Parses template text (len bytes, not necessarily NUL-terminated).  A
 * syntax error is OKV_ERR_FORMAT with a message naming the line and column
 * ("line 3, column 14: expected ...").  bos_token and eos_token render as
 * empty strings until okv_chat_template_set_tokens sets them. */
okv_chat_template *okv_chat_template_parse(const char *text, size_t len, okv_error *err);

/* Parses a GGUF file's tokenizer.chat_template, with bos_token and
 * eos_token set to the texts of the tokens tokenizer.ggml.bos_token_id and
 * eos_token_id name in tokenizer.ggml.tokens (left empty when the file has
 * no such ids).  A file without a template is OKV_ERR_NOT_FOUND; errors
 * otherwise as okv_chat_template_parse. */
okv_chat_template *okv_chat_template_from_gguf(const okv_gguf *g, okv_error *err);

/* Frees t (NULL is allowed). */
void okv_chat_template_free(okv_chat_template *t);

/* Sets the strings the template sees as bos_token and eos_token (NULL:
 * empty); they are copied.  Not to be called while a render runs. */
okv_status okv_chat_template_set_tokens(okv_chat_template *t, const char *bos_token, const char *eos_token,
                                        okv_error *err);

/* The template's source text (NUL-terminated), bos_token and eos_token. */
const char *okv_chat_template_source(const okv_chat_template *t);
const char *okv_chat_template_bos(const okv_chat_template *t);
const char *okv_chat_template_eos(const okv_chat_template *t);

/* Bounds on one render; 0 in a field takes its default.  Defaults: 16 MiB
 * of output, 1 000 000 loop iterations, macro calls 100 deep, 256 MiB of
 * working memory, 10 seconds. */
typedef struct okv_chat_limits {
    size_t max_output;
    size_t max_iterations;
    int max_depth;
    size_t max_memory;
    double max_seconds;
} okv_chat_limits;

/* What one render sees. */
typedef struct okv_chat_input {
    const char *messages_json; /* a JSON array of message objects (required) */
    const char *tools_json;    /* a JSON array of tools, or NULL: `tools` undefined */
    const char *extra_json;    /* a JSON object of further variables (enable_thinking,
                                  reasoning_effort, ...), or NULL */
    bool add_generation_prompt;
    const char *now;           /* strftime_now's time, "YYYY-MM-DDTHH:MM:SS"; NULL: now, local */
    const okv_chat_limits *limits; /* NULL: the defaults */
} okv_chat_input;

/* Renders the conversation.  On success *out is the prompt text (malloc'd,
 * NUL-terminated, free() it) and *out_len its length in bytes.  Failures:
 * OKV_ERR_INVALID for input that is not valid JSON of the right shape (the
 * message says where), OKV_ERR_FORMAT when the template itself fails:
 * raise_exception (the message is the template's own, after "line N: "),
 * arithmetic on or an attribute of an undefined name (printed alone it is
 * empty, as in jinja2), a type error, or a limit reached.
 * *out is left NULL on failure. */
okv_status okv_chat_template_render(const okv_chat_template *t, const okv_chat_input *in, char **out,
                                    size_t *out_len, okv_error *err);

/* ---- the model's answer: content, reasoning and tool calls ----
 *
 * Models write tool calls and reasoning in their family's own markup; a
 * parser per format turns the generated text back into an OpenAI message.
 * A call whose JSON does not parse is never returned as a call: its text
 * stays in the content. */

typedef enum okv_chat_format {
    OKV_CHAT_FORMAT_CONTENT = 0, /* no tool calls: the text is the content */
    OKV_CHAT_FORMAT_GENERIC,     /* a JSON answer: {"tool_calls": [{"name", "arguments"}]},
                                    {"tool_call": {...}}, {"name", "arguments"} or {"response": text} */
    OKV_CHAT_FORMAT_HERMES,      /* <tool_call>{"name", "arguments"}</tool_call> (Hermes, Qwen 2.5 / 3, QwQ) */
    OKV_CHAT_FORMAT_QWEN3_CODER, /* <tool_call><function=N><parameter=P>value</parameter></function></tool_call> */
    OKV_CHAT_FORMAT_LLAMA3,      /* {"name", "parameters"}; <|python_tag|>; <function=N>{...}</function> */
    OKV_CHAT_FORMAT_MISTRAL,     /* [TOOL_CALLS][{"name", "arguments"}] or [TOOL_CALLS]N[ARGS]{...} */
    OKV_CHAT_FORMAT_GPT_OSS,     /* harmony: <|channel|>commentary to=functions.N <|message|>{...}<|call|> */
    OKV_CHAT_FORMAT_DEEPSEEK,    /* <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜> */
    OKV_CHAT_FORMAT_GRANITE,     /* <|tool_call|>[{"name", "arguments"}] */
    OKV_CHAT_FORMAT_COMMAND_R,   /* <|START_THINKING|>..., <|START_ACTION|>[{"tool_name", "parameters"}]<|END_ACTION|>,
                                    <|START_RESPONSE|>...<|END_RESPONSE|> */
    OKV_CHAT_FORMAT_APERTUS,     /* <|tools_prefix|>[{"NAME": {arguments}}]<|tools_suffix|> */
    OKV_CHAT_FORMAT_PYTHONIC     /* LFM2: <|tool_call_start|>[f(a="x", b=1)]<|tool_call_end|> */
} okv_chat_format;

/* How to read a model's answer. */
typedef struct okv_chat_syntax {
    okv_chat_format format;
    bool think_tags; /* <think>...</think> is reasoning (Qwen 3, QwQ, DeepSeek R1, SmolLM3) */
    bool think_open; /* the prompt ends inside <think>: the answer starts with reasoning */
} okv_chat_syntax;

/* The syntax of answers to prompts from t: the tool-call format its
 * markup shows (GENERIC for a template that renders tools in no known
 * format, CONTENT for one without tools) and whether it thinks in tags;
 * prompt (NULL: not known) is the rendered prompt, to tell whether it left
 * a <think> open. */
okv_chat_syntax okv_chat_template_syntax(const okv_chat_template *t, const char *prompt);

/* Where an answer's reasoning begins and ends in a syntax's markup, for a
 * caller that follows the answer as it is generated (to count its
 * reasoning tokens, or to end reasoning at a budget).  The parser's own
 * rules: <think> and Command R's <|START_THINKING|> count only at the
 * answer's start (after white space), or the answer starts inside when the
 * prompt left <think> open; gpt-oss reasons in every analysis message. */
typedef struct okv_chat_reasoning_markup {
    const char *open;   /* opens reasoning: "<think>", "<|START_THINKING|>",
                           "<|channel|>analysis<|message|>"; NULL: the syntax has no reasoning */
    bool leading;       /* open counts only at the answer's start, after white space; else anywhere */
    bool starts_inside; /* the answer begins inside reasoning (syntax->think_open) */
    const char *close;  /* ends it: "</think>", "<|END_THINKING|>", "<|end|>" */
    const char *force;  /* what a caller appends to end reasoning early so that the answer follows
                           and parses: "\n</think>\n\n", "<|END_THINKING|>", or gpt-oss's
                           "<|end|><|start|>assistant<|channel|>final<|message|>" (its final
                           channel: no tool call can follow) */
    const char *force_tools; /* force for an answer that may still call a tool: gpt-oss's stops at
                                "<|end|><|start|>assistant<|channel|>", so that the model chooses the
                                final channel or commentary (a call); the others' is force */
} okv_chat_reasoning_markup;

/* The reasoning markup of answers read with syntax (all NULL when it has
 * none: the content format without think tags, Llama 3, Mistral, ...). */
okv_chat_reasoning_markup okv_chat_reasoning(const okv_chat_syntax *syntax);

/* The text that opens a tool call in format f ("<tool_call>",
 * "[TOOL_CALLS]", " to=functions.", "<｜tool▁calls▁begin｜>", ...), or ""
 * where a call is a bare JSON object at the start of the answer (Llama 3,
 * generic), or NULL for OKV_CHAT_FORMAT_CONTENT.  The hook for a lazy
 * grammar: constrained decoding of the call switches on once the model has
 * written this text (tool_choice "auto": the trigger of
 * okv_grammar_matcher_create_lazy, anchored at the answer's start where the
 * opener is ""), or is forced from the start (tool_choice "required" or
 * named). */
const char *okv_chat_tool_call_opener(okv_chat_format f);

/* The format's name ("hermes", "llama3", ...). */
const char *okv_chat_format_name(okv_chat_format f);

/* A tool call as OpenAI's message.tool_calls[i] carries it. */
typedef struct okv_chat_tool_call {
    char *id;        /* the model's own id (Mistral's JSON form), or NULL: the caller assigns one */
    char *name;      /* NULL only in a partial call whose name is not complete yet */
    char *arguments; /* JSON object text, as the model wrote it; in a partial call, the part written so far */
    bool complete;   /* false: a partial parse stopped inside this call */
} okv_chat_tool_call;

typedef struct okv_chat_msg {
    char *content;           /* never NULL */
    char *reasoning_content; /* NULL: no reasoning */
    okv_chat_tool_call *tool_calls;
    int n_tool_calls;
} okv_chat_msg;

/* Parses a model's answer (len bytes) into *out (freed with
 * okv_chat_msg_free; cleared first).  partial: the answer is still being
 * generated: text that may be the start of markup is held back from the
 * content, and a call being written is returned with complete = false
 * (its name once written, its arguments so far), so that each partial
 * parse extends the previous one (the content, reasoning and arguments
 * seen before are prefixes of those seen after) and streaming can send
 * the differences.  Fails only for NULL arguments or memory. */
okv_status okv_chat_parse(const okv_chat_syntax *syntax, const char *text, size_t len, bool partial, okv_chat_msg *out,
                          okv_error *err);

/* Frees what *m holds and clears it (NULL is allowed). */
void okv_chat_msg_free(okv_chat_msg *m);

#ifdef __cplusplus
}
#endif
#endif
