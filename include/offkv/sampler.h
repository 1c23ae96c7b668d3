/* offkv — choosing the next token from logits. */
#ifndef OFFKV_SAMPLER_H
#define OFFKV_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include "offkv/grammar.h"
#include "offkv/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_sampler_params {
    float temperature;  /* <= 0: greedy (argmax, ties to the lowest id) */
    int32_t top_k;      /* <= 0: no top-k cut */
    float top_p;        /* >= 1: no nucleus cut */
    uint64_t seed;      /* same seed, same logits: same choices */
} okv_sampler_params;

typedef struct okv_sampler okv_sampler;

/* What OpenAI- and llama.cpp-style clients add to the plain sampler.  The
 * order is llama.cpp's: logit_bias, then the penalties, on the raw logits;
 * then top_k, temperature, top_p as above, then min_p on the resulting
 * weights.  A zeroed struct is "all off" except repeat_penalty, where both
 * 0 and 1 mean off. */
typedef struct okv_sampler_controls {
    float min_p;             /* (0, 1]: drop tokens whose weight is below min_p x the best one's; 0: off */
    float repeat_penalty;    /* a recent token's logit l becomes l / r if l > 0, l * r if not (llama.cpp); 0 or 1: off */
    float presence_penalty;  /* subtracted once from the logit of each recent token (OpenAI, -2..2) */
    float frequency_penalty; /* subtracted once per occurrence of a recent token (OpenAI, -2..2) */
    int32_t penalty_last_n;  /* the penalties look at the last N accepted tokens; -1: all of them; 0: none */
} okv_sampler_controls;

/* Creates a sampler for a vocabulary of n_vocab tokens (its scratch is
 * allocated here, not per call).  n_vocab < 1, top_p <= 0 or a NaN
 * temperature is OKV_ERR_INVALID.  Free with okv_sampler_free. */
okv_sampler *okv_sampler_create(const okv_sampler_params *p, int32_t n_vocab, okv_error *err);

/* Frees the sampler.  NULL is a no-op. */
void okv_sampler_free(okv_sampler *s);

/* okv_sampler_sample's results that are not token ids. */
#define OKV_SAMPLE_NONE (-1) /* NULL sampler or logits, or the grammar allows no token at all */
#define OKV_SAMPLE_NAN (-2)  /* a logit is NaN: the model's output is broken, so nothing was drawn */

/* Picks a token from n_vocab logits: greedy, or temperature-scaled softmax
 * restricted to the top_k highest and then to the smallest set whose
 * probability reaches top_p, drawn with the sampler's own random state.
 * With controls, logit biases or a grammar, those apply first (see above;
 * the logits are not modified).  OKV_SAMPLE_NONE or OKV_SAMPLE_NAN (both
 * negative) when no token can be drawn; the random state is then unchanged.
 * A NaN logit is never read as "least likely": NaN comes only from a broken
 * model or overflowed arithmetic, and a token drawn from it would be noise. */
int32_t okv_sampler_sample(okv_sampler *s, const float *logits);

/* Sets the controls (copied).  min_p outside [0, 1], a NaN or infinite
 * penalty, a repeat_penalty < 0 or penalty_last_n < -1 is OKV_ERR_INVALID
 * naming the field, and leaves the sampler unchanged. */
okv_status okv_sampler_set_controls(okv_sampler *s, const okv_sampler_controls *c, okv_error *err);

/* Sets logit biases (copied; replaces earlier ones): bias[i] is added to
 * the logit of token ids[i] before anything else; -INFINITY bans the token.
 * An id outside the vocabulary or a NaN / +inf bias is OKV_ERR_INVALID
 * naming it, and leaves the sampler unchanged.  n 0 clears them. */
okv_status okv_sampler_set_logit_bias(okv_sampler *s, const int32_t *ids, const float *bias, int32_t n,
                                      okv_error *err);

/* Constrains sampling to a grammar: m (borrowed; NULL removes the
 * constraint) is advanced by okv_sampler_accept, v (borrowed) must cover
 * the sampler's vocabulary.  Sampling first draws as usual and keeps the
 * token if the grammar allows it (llama.cpp's shortcut: the result has the
 * masked distribution's probabilities, as a rejected draw is redrawn);
 * only a refused draw masks the whole vocabulary and draws again. */
okv_status okv_sampler_set_grammar(okv_sampler *s, okv_grammar_matcher *m, const okv_grammar_vocab *v,
                                   okv_error *err);

/* Tells the sampler that token joined the sequence: the penalties count
 * it and the grammar advances over it.  A token out of range, or one the
 * grammar refuses, is OKV_ERR_INVALID and changes nothing.  Without
 * controls or a grammar, calling it is optional. */
okv_status okv_sampler_accept(okv_sampler *s, int32_t token, okv_error *err);

/* Forgets the accepted tokens (a new sequence; the grammar, which the
 * caller owns, is reset by the caller) and reseeds the random state. */
void okv_sampler_reset(okv_sampler *s, uint64_t seed);

/* Log-probabilities before any sampling control: log softmax(logits) over
 * the n_vocab logits.  Writes the chosen token's into *token_logprob (may
 * be NULL), and the k most likely tokens (best first, ties to the lower
 * id) into top_ids / top_logprobs (k may be 0).  Returns how many top
 * entries were written (k, or fewer when n_vocab is smaller), -1 on a bad
 * argument.  Allocates nothing. */
int32_t okv_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t k, float *token_logprob,
                     int32_t *top_ids, float *top_logprobs);

/* Writes into probs (n_vocab floats) the distribution okv_sampler_sample
 * draws from for these logits: one-hot at the argmax when greedy, else the
 * top-k / top-p restricted softmax(logits / T), zero outside it, after the
 * biases, penalties, min_p and the grammar's mask, when set.  Uses no
 * randomness (the sampler's state is unchanged), so speculative decoding can
 * compare a draft's and a target's distributions.  False for NULL, or when
 * a logit is NaN (probs is then left as it was). */
bool okv_sampler_probs(okv_sampler *s, const float *logits, float *probs);

#ifdef __cplusplus
}
#endif
#endif
