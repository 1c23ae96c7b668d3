/* offkv — constrained output: GBNF grammars, JSON Schema, and the token
 * masks that keep a sampler inside them.
 *
 * A grammar is llama.cpp's GBNF: `name ::= alternatives` rules with string
 * literals ("..." with \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH escapes), character
 * classes ([a-z0-9_], [^"\\], with the same escapes), `.` (any character),
 * rule references, groups ( ), alternation |, and the repetitions * + ? {m}
 * {m,} {m,n}; `#` starts a comment.  Characters are Unicode code points and
 * the text a grammar matches is UTF-8.  A parsed grammar (okv_grammar) is
 * immutable and may be shared by any number of matchers and threads.
 *
 * A matcher (okv_grammar_matcher) is one position in one grammar: the set
 * of parse stacks llama.cpp keeps, advanced byte by byte (a UTF-8 character
 * may be split between tokens).  okv_grammar_vocab holds a vocabulary's
 * token pieces as a byte trie so a whole vocabulary is masked in one walk
 * that drops every subtree whose prefix the grammar already refuses. */
#ifndef OFFKV_GRAMMAR_H
#define OFFKV_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "offkv/status.h"
#include "offkv/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_grammar okv_grammar;
typedef struct okv_grammar_matcher okv_grammar_matcher;
typedef struct okv_grammar_vocab okv_grammar_vocab;

/* Parses len bytes of GBNF text whose start rule is `root` (NULL: "root").
 * A syntax error, a reference to an undefined rule, a missing start rule,
 * a grammar past the bounds (a million elements, repetitions of 10000,
 * groups 256 deep) or a left-recursive rule (one that can reach itself
 * before reading a character, which would never terminate) is
 * OKV_ERR_INVALID; the message names the rule, and a syntax error gives
 * the line and column.  Returns NULL on error;
 * free the grammar with okv_grammar_free. */
okv_grammar *okv_grammar_parse(const char *text, size_t len, const char *root, okv_error *err);

/* Frees a grammar.  NULL is a no-op.  Free its matchers first. */
void okv_grammar_free(okv_grammar *g);

/* Number of rules after parsing (repetitions and groups become rules of
 * their own, as in llama.cpp).  0 for NULL. */
int32_t okv_grammar_n_rules(const okv_grammar *g);

/* Converts a JSON Schema (len bytes of JSON text) to GBNF text whose start
 * rule is "root", the way llama.cpp's json_schema_to_grammar does:
 * objects (properties in order, required first; additionalProperties
 * false / true / a schema; absent means false as in llama.cpp), arrays
 * (items, prefixItems, minItems, maxItems), enum, const, strings
 * (minLength, maxLength, format date / time / date-time / uuid, pattern as
 * an anchored ^...$ regular expression: literals, ., classes with \d \w \s,
 * groups, |, * + ? {m,n}), integers and numbers with minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum (integer bounds), boolean, null,
 * anyOf, oneOf (read as anyOf, as llama.cpp reads it: a value that fits
 * two branches is taken), $ref to #/$defs/... or #/definitions/..., and
 * type arrays; 'type' beside enum or const keeps the values of that type.
 * A property name holding '"', '\' or a control character beside
 * additionalProperties is OKV_ERR_UNSUPPORTED.
 * Annotations (title, description, $schema, $id, $comment, default,
 * examples, deprecated, readOnly, writeOnly) are ignored; any other keyword
 * is OKV_ERR_UNSUPPORTED naming it and its place in the schema, never a
 * silent skip.  Invalid JSON is OKV_ERR_INVALID naming the offset.  The
 * text follows JSON's own rules: whitespace between tokens is limited, as
 * llama.cpp limits it, so a finite schema gives a finite language.
 * Returns a NUL-terminated string the caller frees with free(), or NULL. */
char *okv_json_schema_to_gbnf(const char *schema, size_t len, okv_error *err);

/* Converts n schemas into one GBNF text with n start rules, names[i] for
 * schemas[i] (lens[i] bytes), and no "root": a caller embeds them in a
 * grammar of its own, e.g. a tool call whose arguments follow the tool's
 * schema (root ::= "{\"name\": \"get_weather\", \"arguments\": " get-weather "}").
 * The primitives (space, string, value, ...) are shared; a name must be
 * letters, digits and '-', none of the primitives' names nor "ref-...", and
 * given once, else OKV_ERR_INVALID naming it; each schema's $ref resolves
 * in that schema; errors as okv_json_schema_to_gbnf, the path beginning with
 * the name.  Returns a string the caller frees with free(), or NULL. */
char *okv_json_schemas_to_gbnf(int32_t n, const char *const *schemas, const size_t *lens, const char *const *names,
                               okv_error *err);

/* okv_json_schemas_to_gbnf for a grammar that only needs to keep output
 * well-formed (a tool call the model may or may not start): a keyword the
 * converter does not know, and a string format it does not know, are taken
 * as no constraint, so the grammar accepts a superset of what the schemas
 * validate.  What was skipped is written into skipped (cap bytes, may be
 * NULL; "" when nothing), "PATH: keyword 'K'" or "PATH: format 'F'" joined
 * with ", " (past a dozen, "and N more"; cut at cap ending in "...").  The
 * other refusals (an unsupported pattern or combination) stay errors. */
char *okv_json_schemas_to_gbnf_loose(int32_t n, const char *const *schemas, const size_t *lens,
                                     const char *const *names, char *skipped, size_t cap, okv_error *err);

/* The GBNF of any JSON object (OpenAI's response_format "json_object"),
 * start rule "root"; a static string. */
const char *okv_gbnf_json_object(void);

/* Builds the byte trie of a vocabulary's pieces (okv_tokenizer_token_to_piece
 * without specials).  Tokens whose piece is empty (control tokens) are never
 * allowed by a grammar, except the end tokens: end_ids[0..n_end) (NULL / 0:
 * the tokenizer's end-of-generation set, okv_tokenizer_eog), allowed
 * exactly when the grammar may stop.  The
 * tokenizer is not kept.  Returns NULL on error; free with
 * okv_grammar_vocab_free. */
okv_grammar_vocab *okv_grammar_vocab_create(const okv_tokenizer *tok, const int32_t *end_ids, int32_t n_end,
                                            okv_error *err);

/* The same with control tokens as their text ("[TOOL_CALLS]",
 * "<|channel|>"; the end tokens stay ends): for output that shows control
 * tokens (a server detokenizing with special), so that a grammar or a lazy
 * trigger can name the markup a model writes as one control token. */
okv_grammar_vocab *okv_grammar_vocab_create_special(const okv_tokenizer *tok, const int32_t *end_ids, int32_t n_end,
                                                    okv_error *err);

/* Frees a vocabulary trie.  NULL is a no-op. */
void okv_grammar_vocab_free(okv_grammar_vocab *v);

/* Number of tokens the vocabulary covers; 0 for NULL. */
int32_t okv_grammar_vocab_n_tokens(const okv_grammar_vocab *v);

/* Whether id is one of the vocabulary's end tokens. */
bool okv_grammar_vocab_is_end(const okv_grammar_vocab *v, int32_t id);

/* Creates a matcher at the start of g (g must outlive it).  NULL on
 * error: OKV_ERR_NOMEM, or OKV_ERR_INVALID for a grammar whose start
 * alone runs past the matcher's bounds (131072 alternatives, 200000 rule
 * expansions, rules nested 32768 deep); free with okv_grammar_matcher_free. */
okv_grammar_matcher *okv_grammar_matcher_create(const okv_grammar *g, okv_error *err);

/* A lazy matcher (llama.cpp's lazy grammar): text passes freely until it
 * contains trigger (len bytes, at least 1), then g constrains the rest,
 * starting at the trigger's first byte, so g's sentences begin with the
 * trigger (a tool call's opener and the call after it).  A token may end
 * inside the trigger, or hold the trigger and text past it: the text
 * before the trigger is free, the trigger and what follows go to g, and a
 * token whose part from the trigger on g refuses is refused as a whole.
 * anchored: the trigger counts only at the start of the text (after ASCII
 * whitespace); once the text starts otherwise, the matcher stays free.
 * While free, every token is allowed (control tokens too) and the text may
 * end anywhere.  okv_grammar_matcher_reset and _clone keep the trigger and
 * its waiting state.  NULL on error (an empty trigger is OKV_ERR_INVALID). */
okv_grammar_matcher *okv_grammar_matcher_create_lazy(const okv_grammar *g, const char *trigger, size_t len,
                                                     bool anchored, okv_error *err);

/* Makes matcher m skip a leading block, the way okv_chat_parse reads
 * reasoning in <think> tags: with inside (the prompt ended in the block),
 * the text through the first close_tag is free; else, when the text begins
 * (after ASCII whitespace) with open_tag, the text through the first
 * close_tag after it.  A lazy matcher looks for its trigger in what follows
 * (anchored: at its start, after whitespace); a trigger in the block does
 * not count (a reasoning model that writes a tool call's opener while it
 * thinks).  A matcher that is not lazy holds what follows to its grammar,
 * after at most 4 bytes of ASCII whitespace (a reasoning model thinks,
 * then answers in the grammar: structured output), and takes at most 4
 * bytes of it before open_tag too;
 * until then only the grammar's start decides whether the text may end.
 * Call it before m reads any text; okv_grammar_matcher_reset and _clone
 * keep it.  OKV_ERR_INVALID for a NULL m or tag, an empty tag, or m not at
 * its start; OKV_ERR_NOMEM. */
okv_status okv_grammar_matcher_skip_block(okv_grammar_matcher *m, const char *open_tag, const char *close_tag,
                                          bool inside, okv_error *err);

/* Whether a lazy matcher has seen its trigger (the grammar is on); true
 * for a matcher that is not lazy, false for NULL. */
bool okv_grammar_matcher_triggered(const okv_grammar_matcher *m);

/* Frees a matcher.  NULL is a no-op. */
void okv_grammar_matcher_free(okv_grammar_matcher *m);

/* A new matcher at m's position (for forks of one sequence).  NULL on
 * error. */
okv_grammar_matcher *okv_grammar_matcher_clone(const okv_grammar_matcher *m, okv_error *err);

/* Back to the start of the grammar. */
void okv_grammar_matcher_reset(okv_grammar_matcher *m);

/* Advances over len bytes of UTF-8 text.  When the grammar refuses them
 * (or they are not UTF-8), returns false and leaves m unchanged. */
bool okv_grammar_matcher_accept_bytes(okv_grammar_matcher *m, const char *bytes, size_t len);

/* Whether the text read so far is a whole sentence of the grammar (an end
 * token may come now).  A character split between tokens is not whole. */
bool okv_grammar_matcher_can_end(const okv_grammar_matcher *m);

/* Whether nothing but the end may come (every parse is complete). */
bool okv_grammar_matcher_must_end(const okv_grammar_matcher *m);

/* Whether token id may come next: its piece continues the grammar, or it is
 * an end token and the grammar may stop.  The position does not change
 * (m is not const: the check uses m's scratch). */
bool okv_grammar_matcher_allows(okv_grammar_matcher *m, const okv_grammar_vocab *v, int32_t id);

/* Advances over token id (its piece, or nothing for an end token).  A
 * token the matcher does not allow is OKV_ERR_INVALID naming it and leaves
 * m unchanged. */
okv_status okv_grammar_matcher_accept_token(okv_grammar_matcher *m, const okv_grammar_vocab *v, int32_t id,
                                            okv_error *err);

/* Sets allowed[i] (n_vocab bools, v's size) to whether token i may come
 * next, in one walk over v's trie.  Masks of recent positions are kept (by
 * the parse state), so a state seen again (inside a long string) costs a
 * copy.  A walk is bounded (8 million rule expansions, some 0.3 s: a
 * JSON schema over a 151 k vocabulary costs about 360 000): a grammar
 * ambiguous enough to pass it stops there, and the tokens found by then
 * are the mask (each one the grammar takes).  Returns the number of tokens
 * allowed. */
int32_t okv_grammar_matcher_mask(okv_grammar_matcher *m, const okv_grammar_vocab *v, bool *allowed);

#ifdef __cplusplus
}
#endif
#endif
