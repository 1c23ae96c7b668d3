/* offkv — batched evaluation: several sequences in one forward pass.
 *
 * A batch is the working memory of one model's forward pass sized for up to
 * max_rows token rows.  okv_batch_eval runs any number of sequences (each a
 * sequence cache, each with its own consecutive positions) through the
 * model together: every weight matrix is read once for all their rows, and
 * each attention layer calls okv_update_and_attend once per sequence, on
 * that sequence's own step.  A server decodes all its conversations with
 * one call per token; a prompt can ride along in the same call.
 *
 * Batch invariance: a sequence's logits are bit-identical whatever else is
 * in the batch, in which order, and whether it runs alone (okv_context_eval
 * is the one-sequence case of the same code).  The kernels compute every
 * output row by the same operations whatever the row count. */
#ifndef OFFKV_BATCH_H
#define OFFKV_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "offkv/cache.h"
#include "offkv/model.h"
#include "offkv/threads.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_batch okv_batch;

/* Creates a batch for model holding up to max_rows token rows in one eval
 * (the sum of n_tokens over the sequences of a call).  pool runs the
 * products and attention; it is borrowed (it may be shared with other
 * batches and contexts that are not used at the same time) and may be NULL
 * for the caller's thread alone.  Errors: max_rows < 1 or a NULL model is
 * OKV_ERR_INVALID; OKV_ERR_NOMEM.  Free with okv_batch_free. */
okv_batch *okv_batch_create(const okv_model *model, int32_t max_rows, okv_threadpool *pool, okv_error *err);

/* Frees the batch.  NULL is a no-op. */
void okv_batch_free(okv_batch *b);

/* The most rows one okv_batch_eval takes. */
int32_t okv_batch_max_rows(const okv_batch *b);

/* One sequence of a batched eval. */
typedef struct okv_batch_seq {
    okv_cache *cache;          /* the sequence; its geometry must be the model's */
    const int32_t *tokens;     /* n_tokens token ids */
    const int32_t *positions;  /* n_tokens consecutive positions (okv_step_begin's rules) */
    int32_t n_tokens;
    float *logits;             /* NULL: none; else n_vocab floats for the last token, or
                                  n_tokens x n_vocab when all_logits */
    bool all_logits;
} okv_batch_seq;

/* Evaluates every sequence of seqs as one forward pass.  All the checks come
 * first: a NULL argument, n_seqs < 1, a token outside the vocabulary, more
 * rows than max_rows, the same cache twice, or a cache whose geometry is not
 * the model's is OKV_ERR_INVALID; a sequence whose positions its cache
 * refuses gives that step's error (OKV_ERR_POSITION, OKV_ERR_BUSY, ...) with
 * the message naming the sequence's index (in a batch of more than one).
 * Any error leaves every sequence as the cache contract says: unchanged
 * when nothing was written, else its length at most its step's start.  On success every cache's length is its
 * start + n_tokens. */
okv_status okv_batch_eval(okv_batch *b, const okv_batch_seq *seqs, int32_t n_seqs, okv_error *err);

#ifdef __cplusplus
}
#endif
#endif
