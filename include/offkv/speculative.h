/* offkv — speculative decoding.
 *
 * A speculator extends a target context's sequence several tokens per
 * target eval.  Each step a drafter proposes up to K tokens: a draft model
 * (its own context and cache, same vocabulary, proposing one token at a
 * time) or prompt lookup (the tokens that followed the most recent earlier
 * occurrence of the sequence's last N tokens; no second model).  The target
 * evaluates the last token and the K proposals in one eval, keeps the
 * longest prefix it agrees with plus one token of its own, and both caches
 * rewind to that point (okv_cache_rewind, checked with okv_cache_can_rewind).
 *
 * Greedy (temperature 0 or top_k 1): every kept token is the target's argmax
 * after the tokens before it, so the text is the target's own greedy text,
 * as long as a (K+1)-token eval gives the same logits as K+1 one-token evals
 * with the same cache config.  The attention kernels guarantee that when
 * each query's visible rows fall into the same 32-row blocks either way:
 * full-attention layers read from position 0, and windows of at most 32 - K
 * rows read one block per ring run.  Two cases can move the last bits (and
 * so, rarely, an argmax): windows longer than 32 - K, and decode attention
 * split across threads (when the thread count does not divide the kv heads
 * and a query sees 512 or more rows).  With temperature > 0 a
 * proposal d drawn with draft probability q(d) is kept with probability
 * min(1, p(d) / q(d)), p the target's distribution, and a rejection draws
 * from max(0, p - q) normalised (okv_spec_accept), so every token is
 * distributed as the target's sampler would draw it.
 *
 * Sequence convention: the speculator holds the sequence's tokens; the
 * target's cache holds all but the last (which is sampled, not yet
 * evaluated).  A speculator borrows its contexts; they must outlive it and
 * are not to be used by others between its calls. */
#ifndef OFFKV_SPECULATIVE_H
#define OFFKV_SPECULATIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "offkv/context.h"
#include "offkv/sampler.h"
#include "offkv/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_spec_config {
    int32_t n_draft;             /* K: most tokens proposed per step, 1..64 */
    int32_t lookup_ngram;        /* N > 0: prompt-lookup drafting (draft context must be NULL);
                                    0: the draft context proposes */
    okv_sampler_params sampling; /* the target's sampling (the draft samples with the same
                                    temperature / top-k / top-p); the seed seeds the
                                    speculator's own random draws */
    float p_min;                 /* 0..1: a draft model stops proposing when its most likely
                                    token has a probability below this (llama.cpp's
                                    --draft-p-min); 0 always proposes K.  A proposal the
                                    draft is unsure of is seldom kept and costs a draft
                                    eval and a verify row.  Prompt lookup ignores it. */
} okv_spec_config;

typedef struct okv_spec_stats {
    int64_t steps;      /* target evals made by okv_speculator_step */
    int64_t drafted;    /* tokens proposed */
    int64_t accepted;   /* proposals the target kept */
    int64_t generated;  /* tokens returned (accepted + one per step) */
} okv_spec_stats;

typedef struct okv_speculator okv_speculator;

/* Creates a speculator over target with draft (a context of a model with
 * the same vocabulary, or NULL with lookup_ngram > 0).  Errors
 * (OKV_ERR_INVALID, naming the value): a NULL target or config; n_draft
 * outside 1..64; lookup_ngram < 0; p_min outside 0..1 (or NaN); both or neither of a draft context and
 * lookup_ngram; a draft sharing the target's cache; vocabularies that differ
 * (the message names the first differing token id and both texts, or the
 * sizes); a target whose max_write is below n_draft + 1 (the target
 * evaluates K + 1 tokens at once, and its rings hold window + max_write - 1
 * rows, enough to rewind the K it may reject); a draft whose capacity is
 * below the target's, or whose max_write is below n_draft + 1 while it has
 * sliding-window layers (the same rewind).  OKV_ERR_NOMEM.  Free with
 * okv_speculator_free. */
okv_speculator *okv_speculator_create(okv_context *target, okv_context *draft, const okv_spec_config *cfg,
                                      okv_error *err);

/* Frees the speculator (not its contexts).  NULL is a no-op. */
void okv_speculator_free(okv_speculator *s);

/* Sets the sequence to tokens[0..n): the target's cache must hold the first
 * n - 1 of them (length n - 1; the caller evaluated them, for example as
 * the prompt, and sampled tokens[n-1] from the last logits).  The draft's
 * cache is cleared and catches up on the next step.  n < 1, a NULL tokens, a
 * token outside the vocabulary, more than the target's capacity + 1 tokens
 * or a target length other than n - 1 is OKV_ERR_INVALID. */
okv_status okv_speculator_reset(okv_speculator *s, const int32_t *tokens, int32_t n, okv_error *err);

/* One speculative step: drafts up to min(K, max_new - 1) tokens (fewer near
 * the target's capacity, none when lookup finds no match, and a draft model
 * stops at the first proposal it is less sure of than p_min; after a step
 * where it was unsure of the first, it sits out 1, 2, 4 .. 16 steps while
 * that repeats, catching up in one chunked eval), evaluates them
 * with the target, and appends the kept tokens and the target's own next
 * token to the sequence.  out receives them (1 .. K + 1 ids, at most
 * max_new; room for max_new needed) and *n_out their count; the caller stops
 * at an end-of-sequence token among them.  Afterwards the target's cache
 * holds all tokens but the new last one.  Errors: max_new < 1 or NULL
 * arguments is OKV_ERR_INVALID; a full context (the last token's position
 * is the capacity) OKV_ERR_POSITION; an eval's error is passed on; a NaN
 * among the draft's or the target's logits OKV_ERR_NUMERIC; a target
 * cache whose length the caller changed since the last call is
 * OKV_ERR_INVALID (the draft's cache is left as it is; the next step or
 * okv_speculator_reset brings it back in line).
 * On error the sequence is unchanged and the caches are rewound to it as far
 * as they allow (a draft that cannot be is cleared and catches up later). */
okv_status okv_speculator_step(okv_speculator *s, int32_t max_new, int32_t *out, int32_t *n_out, okv_error *err);

/* Counts since creation.  NULL s or out: out is left alone. */
void okv_speculator_get_stats(const okv_speculator *s, okv_spec_stats *out);

/* The acceptance rule of one proposal, for sampling (temperature > 0).
 * p is the target's distribution and q the draft's over n_vocab tokens (q
 * NULL: the proposal was certain, q one-hot at it, as prompt lookup's are);
 * drafted is the proposal.  Accepts when u_accept * q[drafted] <
 * p[drafted] (probability min(1, p/q) for u_accept uniform in [0, 1)) and
 * returns drafted with *accepted true; otherwise returns the token drawn
 * with u_resample (uniform in [0, 1)) from max(0, p - q) normalised (from p
 * if that is all zero) and sets *accepted false.  Allocates nothing.
 * Returns -1 for NULL p or accepted, n_vocab < 1 or drafted outside the
 * vocabulary. */
int32_t okv_spec_accept(const float *p, const float *q, int32_t n_vocab, int32_t drafted, double u_accept,
                        double u_resample, bool *accepted);

#ifdef __cplusplus
}
#endif
#endif
