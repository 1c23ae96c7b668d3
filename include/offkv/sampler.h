/* offkv — choosing the next token from logits. */
#ifndef OFFKV_SAMPLER_H
#define OFFKV_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
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

/* Creates a sampler for a vocabulary of n_vocab tokens (its scratch is
 * allocated here, not per call).  n_vocab < 1, top_p <= 0 or a NaN
 * temperature is OKV_ERR_INVALID.  Free with okv_sampler_free. */
okv_sampler *okv_sampler_create(const okv_sampler_params *p, int32_t n_vocab, okv_error *err);

/* Frees the sampler.  NULL is a no-op. */
void okv_sampler_free(okv_sampler *s);

/* Picks a token from n_vocab logits: greedy, or temperature-scaled softmax
 * restricted to the top_k highest and then to the smallest set whose
 * probability reaches top_p, drawn with the sampler's own random state. */
int32_t okv_sampler_sample(okv_sampler *s, const float *logits);

/* Writes into probs (n_vocab floats) the distribution okv_sampler_sample
 * draws from for these logits: one-hot at the argmax when greedy, else the
 * top-k / top-p restricted softmax(logits / T), zero outside it.  Uses no
 * randomness (the sampler's state is unchanged), so speculative decoding can
 * compare a draft's and a target's distributions.  False for NULL. */
bool okv_sampler_probs(okv_sampler *s, const float *logits, float *probs);

#ifdef __cplusplus
}
#endif
#endif
