/* offkv — tokenizers: text to token ids and back, as llama.cpp does it.
 *
 * Two vocabulary models are served: SentencePiece-style ("llama": score-
 * driven bigram merges over UTF-8 characters, spaces written as U+2581,
 * byte-fallback tokens <0xXX>) and GPT-2-style byte-level BPE ("gpt2": a
 * regex pre-tokenizer chosen by name, bytes mapped to printable characters,
 * merges applied by rank).  The ids produced are llama.cpp's for the same
 * vocabulary, input and flags.
 *
 * A tokenizer is built from plain arrays (okv_vocab_desc), so it does not
 * depend on any file format; okv_tokenizer_from_gguf reads those arrays from
 * a GGUF file's tokenizer.ggml.* metadata.  A tokenizer is immutable once
 * made: any number of threads may encode and decode with it at once. */
#ifndef OFFKV_TOKENIZER_H
#define OFFKV_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "offkv/gguf.h"
#include "offkv/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_tokenizer okv_tokenizer;

/* The roles of fill-in-the-middle tokens (code completion: the model writes
 * what goes between a prefix and a suffix; okv_tokenizer_fim). */
typedef enum okv_fim_role {
    OKV_FIM_PREFIX,   /* before the text that precedes the cursor (<|fim_prefix|>) */
    OKV_FIM_SUFFIX,   /* before the text that follows it (<|fim_suffix|>) */
    OKV_FIM_MIDDLE,   /* asks for the middle (<|fim_middle|>) */
    OKV_FIM_PAD,      /* padding, written after the middle (<|fim_pad|>) */
    OKV_FIM_REPO,     /* a repository-level prompt's project name follows (<|repo_name|>) */
    OKV_FIM_FILE_SEP, /* a file's name and text follow (<|file_sep|>) */
    OKV_FIM_N
} okv_fim_role;

/* Token types, numbered as tokenizer.ggml.token_type stores them. */
typedef enum okv_token_type {
    OKV_TOKEN_UNDEFINED = 0,
    OKV_TOKEN_NORMAL = 1,
    OKV_TOKEN_UNKNOWN = 2,
    OKV_TOKEN_CONTROL = 3,
    OKV_TOKEN_USER_DEFINED = 4,
    OKV_TOKEN_UNUSED = 5,
    OKV_TOKEN_BYTE = 6
} okv_token_type;

/* A vocabulary as plain arrays.  Nothing is borrowed past
 * okv_tokenizer_create: every string and number is copied.  Ids that a
 * vocabulary lacks are -1. */
typedef struct okv_vocab_desc {
    const char *model;          /* "llama" (SentencePiece) or "gpt2" (byte-level BPE) */
    const char *pre;            /* gpt2 only: pre-tokenizer name; NULL means "default" */
    int32_t n_tokens;           /* >= 1 */
    const char *const *tokens;  /* n_tokens strings (UTF-8 bytes) */
    const size_t *token_lens;   /* their lengths; NULL: the strings are NUL-terminated */
    const float *scores;        /* n_tokens merge scores (llama); NULL: all 0 */
    const int32_t *types;       /* n_tokens okv_token_type values; NULL: all NORMAL */
    int32_t n_merges;           /* gpt2: number of merges (rank = index) */
    const char *const *merges;  /* "left right" strings; NULL when n_merges is 0 */
    const size_t *merge_lens;   /* their lengths; NULL: NUL-terminated */
    int32_t bos_id, eos_id, unk_id, pad_id;
    int add_bos;                /* 1/0, or -1 for the model's default */
    int add_eos;                /* 1/0, or -1 for the model's default */
    int add_space_prefix;       /* llama: 1/0, or -1 for the default (1) */
    const int32_t *eog_ids;     /* ids the file says end a generation besides EOS (end of turn, end of
                                   message, fill-in-the-middle pad/repo/file separators); NULL: none */
    int32_t n_eog_ids;
    const int32_t *fim_ids;     /* OKV_FIM_N ids the file names for the fill-in-the-middle roles
                                   (okv_fim_role order), -1 where it names none; NULL: none */
} okv_vocab_desc;

/* Encode flags. */
#define OKV_TOKENIZE_ADD_SPECIAL 1u   /* add BOS/EOS where the vocabulary asks for them */
#define OKV_TOKENIZE_PARSE_SPECIAL 2u /* control tokens' text in the input becomes those tokens */
#define OKV_TOKENIZE_CONTINUE 4u      /* the text continues tokens already in the sequence: a llama
                                         vocabulary adds no space prefix at its start (it still does
                                         after each control token in it, as at a text's start) */

/* Builds a tokenizer from desc.  An unknown model is OKV_ERR_UNSUPPORTED, as
 * is a gpt2 pre-tokenizer name this build does not know ("default",
 * "gpt-2"/"gpt2", "starcoder", "deepseek-coder", "llama-bpe"/"llama3"/
 * "llama-v3", "qwen2" and "gpt-4o" are known); the message names it.  A NULL array
 * that is required, n_tokens < 1, a token id or type out of range, a
 * duplicate token string, or add_bos/add_eos set while that id is -1 is
 * OKV_ERR_INVALID naming the value.  Empty token strings are renamed
 * "[EMPTY_<id>]" as llama.cpp does.  Returns NULL on error; the caller frees
 * the tokenizer with okv_tokenizer_free. */
okv_tokenizer *okv_tokenizer_create(const okv_vocab_desc *desc, okv_error *err);

/* Builds the tokenizer a GGUF file describes in its tokenizer.ggml.* keys:
 * model, tokens, scores (f32 or i32), token_type, merges (required for
 * gpt2), pre, bos/eos/unknown/padding_token_id, add_bos_token,
 * add_eos_token and add_space_prefix.  Absent keys take llama.cpp's
 * defaults (llama: bos 1, eos 2, unk 0; gpt2: bos = eos = 11, no unk; pre
 * "default"), and, as in llama.cpp, a special id outside the vocabulary
 * keeps the default (files write -1 as 4294967295) and a token type outside
 * 0..6 reads as UNDEFINED.  A missing tokenizer.ggml.model or tokens is
 * OKV_ERR_NOT_FOUND, a key of the wrong type or too short an array is
 * OKV_ERR_FORMAT, and the rest is as okv_tokenizer_create; messages name
 * the key.  Everything needed is copied: g may be closed afterwards.
 * Returns NULL on error; free the tokenizer with okv_tokenizer_free. */
okv_tokenizer *okv_tokenizer_from_gguf(const okv_gguf *g, okv_error *err);

/* Frees the tokenizer.  NULL is a no-op. */
void okv_tokenizer_free(okv_tokenizer *tok);

/* Turns len bytes of text (UTF-8; with a gpt2 vocabulary invalid bytes are
 * read as U+FFFD while overlong forms and surrogates decode to their code
 * point, with a llama one invalid bytes are spelled as byte tokens, as
 * llama.cpp reads them) into token ids written to ids[0..max-1], and sets
 * *n_out to the number of ids the text needs.  flags is a combination of
 * OKV_TOKENIZE_*.  With ids NULL and max 0 it only counts.  When max is too
 * small the call is OKV_ERR_INVALID, saying both sizes, with *n_out still
 * set to the size needed, so a caller can allocate and call again.  Without
 * OKV_TOKENIZE_PARSE_SPECIAL, user-defined tokens in the text are still
 * matched whole (as llama.cpp and Hugging Face do), control tokens are not. */
okv_status okv_tokenizer_encode(const okv_tokenizer *tok, const char *text, size_t len,
                                unsigned flags, int32_t *ids, size_t max, size_t *n_out,
                                okv_error *err);

/* okv_tokenizer_encode for a caller with a limit (a context of max
 * positions): the text may need at most max ids.  When it needs more the
 * call is OKV_ERR_INVALID with *n_out set above max (to a lower bound of
 * what it needs, not the exact count), found without tokenizing all of a
 * long text: a text longer than max ids can stand for is refused before any
 * work (max times the longest token's bytes for a llama vocabulary; 4 times
 * that for a gpt2 one, whose overlong UTF-8 forms shrink, and only when it
 * cannot drop bytes: every byte character and every merge's result is a
 * token), and encoding stops once the ids pass max (at the next special
 * token for a llama vocabulary, at the next pre-token for a gpt2 one).  So
 * the cost of refusing a prompt is bounded by max times the longest token,
 * not by the prompt's size, except for a gpt2 vocabulary that can drop bytes,
 * where the pre-tokenizer's split of a fragment is linear in its length.
 * ids may be NULL only with max 0 (then any text that needs an id is
 * refused). */
okv_status okv_tokenizer_encode_max(const okv_tokenizer *tok, const char *text, size_t len,
                                    unsigned flags, int32_t *ids, size_t max, size_t *n_out,
                                    okv_error *err);

/* Writes the bytes token id stands for into buf[0..cap-1] (no NUL) and sets
 * *n_out to their count: U+2581 becomes a space (llama), byte-level
 * characters become their bytes (gpt2), <0xXX> byte tokens become one byte.
 * Control and unknown tokens give no bytes unless special is nonzero, then
 * their text; undefined and unused ones (and a type outside 0..6 in a file)
 * give none, as in llama.cpp.  A piece is a byte string, not necessarily
 * whole UTF-8: join the pieces of a sequence before displaying them.  An id
 * out of range is OKV_ERR_INVALID; so is cap too small, with *n_out set to
 * the size needed and nothing written to buf. */
okv_status okv_tokenizer_token_to_piece(const okv_tokenizer *tok, int32_t id, int special,
                                        char *buf, size_t cap, size_t *n_out, okv_error *err);

/* The stored text of token id (not NUL-terminated; *len gets its length),
 * or NULL for an id out of range. */
const char *okv_tokenizer_token_text(const okv_tokenizer *tok, int32_t id, size_t *len);

/* The type of token id, or OKV_TOKEN_UNDEFINED for an id out of range. */
okv_token_type okv_tokenizer_token_type(const okv_tokenizer *tok, int32_t id);

/* Number of tokens in the vocabulary. */
int32_t okv_tokenizer_n_vocab(const okv_tokenizer *tok);

/* The beginning-of-sequence id, or -1 when the vocabulary has none. */
int32_t okv_tokenizer_bos(const okv_tokenizer *tok);

/* The end-of-sequence id, or -1 when the vocabulary has none. */
int32_t okv_tokenizer_eos(const okv_tokenizer *tok);

/* The ids that end a generation, ascending, as llama.cpp's end-of-generation
 * set has them: EOS, the vocabulary's eog_ids (okv_tokenizer_from_gguf:
 * tokenizer.ggml.eot_token_id, eom_token_id and fim_pad/rep/sep_token_id),
 * and the tokens whose text ends a turn in a family's format (<|eot_id|>,
 * <|im_end|>, <end_of_turn>, <|end|>, <|endoftext|>, <|return|>, <|call|>,
 * </s>, <|end_of_text|>, <eos>, <turn|>, ...) or is a fill-in-the-middle
 * separator (<|fim_pad|>, <|repo_name|>, <|file_sep|>, ...), whatever its
 * type.  But where <|return|> and <|call|> end turns (gpt-oss's harmony),
 * <|end|> ends a message only and is not in the set; nor is </s> where
 * <|tool_response> is (Gemma 4); the EOS always is.  *n gets the count;
 * the array lives as long as tok. */
const int32_t *okv_tokenizer_eog(const okv_tokenizer *tok, int32_t *n);

/* The vocabulary's token for a fill-in-the-middle role, as llama.cpp
 * finds it: the id the file names (okv_tokenizer_from_gguf:
 * tokenizer.ggml.fim_pre/suf/mid/pad/rep/sep_token_id, or the older
 * prefix/suffix/middle_token_id), else the token spelled as one of the
 * families spell the role (<|fim_prefix|>, <fim_prefix>, <fim-prefix>,
 * <PRE>, <|code_prefix|>, DeepSeek Coder's <\uff5cfim\u2581begin\uff5c>,
 * ...; <|repo_name|>; <|file_sep|>).  -1 when it has none, for a NULL tok or
 * a role out of range. */
int32_t okv_tokenizer_fim(const okv_tokenizer *tok, okv_fim_role role);

/* Whether id is in okv_tokenizer_eog's set (false for NULL tok or an id
 * out of range). */
bool okv_tokenizer_is_eog(const okv_tokenizer *tok, int32_t id);

/* Whether OKV_TOKENIZE_ADD_SPECIAL adds a BOS (resp. EOS) with this
 * vocabulary: the file's add_bos_token/add_eos_token, else the model's
 * default (llama: BOS yes, EOS no; gpt2: neither, except BOS for
 * llama-bpe). */
int okv_tokenizer_adds_bos(const okv_tokenizer *tok);
int okv_tokenizer_adds_eos(const okv_tokenizer *tok);

/* Streaming text out of pieces without splitting characters.
 *
 * A piece (okv_tokenizer_token_to_piece) is bytes, and with byte-fallback
 * or byte-level vocabularies one character can span several tokens
 * (<0xE2><0x80><0x99>).  Shown piece by piece, a terminal or a streamed
 * HTTP answer would carry broken characters in between.  The stream holds
 * back the bytes of an incomplete UTF-8 sequence until the piece that
 * completes it arrives, and replaces bytes that can never be part of a
 * valid character by U+FFFD (one per maximal subpart of an ill-formed
 * sequence, as the Unicode standard recommends: each stray byte its own), so what comes out is always valid UTF-8 and,
 * joined, equals the joined pieces wherever those were valid.
 *
 * Start one per sequence zeroed (okv_detok_stream s = {0};): it owns no
 * memory, so there is nothing to free.  Its fields are the stream's own. */
typedef struct okv_detok_stream {
    unsigned char held[4]; /* the start of an incomplete character */
    size_t n_held;
} okv_detok_stream;

/* Room okv_detok_stream_feed may need for n input bytes: every byte, held
 * ones included, may become a 3-byte U+FFFD. */
#define OKV_DETOK_ROOM(n) (3 * ((size_t)(n) + 4))

/* Feeds the n bytes of a piece; writes the text now complete to out, which
 * has room for OKV_DETOK_ROOM(n) bytes (not NUL-terminated), and returns its
 * length. */
size_t okv_detok_stream_feed(okv_detok_stream *s, const char *piece, size_t n, char *out);

/* Ends the stream: what is still held can no longer complete and comes out
 * as U+FFFD (written to out, which has room for 3 bytes); returns its
 * length (0 or 3).  The stream is then empty, ready for a new sequence. */
size_t okv_detok_stream_finish(okv_detok_stream *s, char *out);

#ifdef __cplusplus
}
#endif
#endif
