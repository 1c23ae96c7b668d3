/* offkv — contexts: running a model over a sequence cache.
 *
 * A context owns the working buffers and the thread pool of one stream of
 * evaluation; the keys and values live in a sequence cache, either its own
 * or one shared through a registry (so a prefill context and a decode
 * context of one model read and extend one sequence; a cache's geometry is
 * its model's, so a different model, such as a speculative draft, needs a
 * cache of its own).  Contexts sharing a cache are the caller's to
 * serialize.  An eval is the one-sequence case of okv_batch_eval (batch.h):
 * its results are the same bits. */
#ifndef OFFKV_CONTEXT_H
#define OFFKV_CONTEXT_H

#include <stdint.h>
#include "offkv/cache.h"
#include "offkv/model.h"
#include "offkv/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_context okv_context;

/* Creates a context for model.  options is NULL or a NULL-terminated list of
 * key, value string pairs:
 *   "llm_cache_registry_key"  bind to the cache installed in registry under
 *                             this name (its geometry must equal the model's)
 *   "capacity"                positions the own cache holds (default: the
 *                             model's training context, at most 4096)
 *   "initial_capacity"        rows a flat layer starts with (default 256)
 *   "max_write"               most tokens one eval takes (default 512, at most
 *                             the capacity; with a shared cache: at most that
 *                             cache's max_write)
 *   "kv_type"                 "f16" (default), "f32" or "q8_0" (half
 *                             of f16's bytes; head_dim a multiple of 32): own
 *                             cache's storage
 *   "n_threads"               threads for this context's pool (default 1)
 * Without llm_cache_registry_key the context builds its own cache.  An
 * unknown option, a bad value, a registry key with nothing installed (or no
 * registry) or a cache whose geometry differs from the model's is
 * OKV_ERR_INVALID or OKV_ERR_NOT_FOUND with a message naming it.  The model
 * and registry are borrowed and must outlive the context; the context holds
 * its own reference to the cache.  Free with okv_context_free. */
okv_context *okv_context_create(okv_model *model, const char *const *options,
                                okv_registry *registry, okv_error *err);

/* Frees the context and drops its reference to the cache.  NULL is a no-op. */
void okv_context_free(okv_context *ctx);

/* Runs one step: tokens at positions (consecutive; at most max_write of
 * them) through every layer, each attention layer writing into and attending
 * over the cache.  If logits_out is non-NULL it receives n x n_vocab floats,
 * row i the logits after token i.  Errors: a token id outside the vocabulary
 * or n < 1 is OKV_ERR_INVALID; positions the cache refuses are
 * OKV_ERR_POSITION (see okv_step_begin); a failure leaves the sequence as the
 * cache contract says (before any write: unchanged; after: length at most the
 * step's start). */
okv_status okv_context_eval(okv_context *ctx, const int32_t *tokens, const int32_t *positions,
                            int32_t n, float *logits_out, okv_error *err);

/* Like okv_context_eval, but computes only the last token's logits
 * (n_vocab floats; logits_out may be NULL to skip the output layer). */
okv_status okv_context_eval_last(okv_context *ctx, const int32_t *tokens, const int32_t *positions,
                                 int32_t n, float *logits_out, okv_error *err);

/* The cache this context reads and writes (borrowed). */
okv_cache *okv_context_cache(okv_context *ctx);

/* The most tokens one eval takes. */
int32_t okv_context_max_write(const okv_context *ctx);

/* The model this context runs. */
const okv_model *okv_context_model(const okv_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
