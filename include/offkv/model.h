/* offkv — models loaded from GGUF files.
 *
 * A model is the read-only half of inference: hyperparameters, weights
 * (memory-mapped from the file; the "repack" option below copies most
 * matrices into faster layouts or huge pages), the tokenizer, and the cache
 * geometry its attention layers need.  Contexts (context.h) run it.  One
 * model may serve any number of contexts; it must outlive them. */
#ifndef OFFKV_MODEL_H
#define OFFKV_MODEL_H

#include <stdint.h>
#include "offkv/cache.h"
#include "offkv/status.h"
#include "offkv/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_model okv_model;

/* Loads the GGUF file at path.  options is NULL or a NULL-terminated list
 * of key, value string pairs; known keys:
 *   "sliding_window"  N > 0: run every layer of a `llama` model with a window
 *                     of N positions (for files that lack the key).
 *   "repack"          "on" (default) or "off": Q4_0, Q5_0, Q8_0, Q4_K,
 *                     Q5_K, Q6_K and MXFP4 matrices are copied at load into
 *                     layouts whose products run two to three times as fast
 *                     on several tokens at once (batched decode, prefill);
 *                     the file's pages of those matrices are then released,
 *                     so they take anonymous memory (the file's bytes; Q4_K
 *                     and Q5_K 2-3% more) instead of page cache.  The
 *                     logits move only by float summation order.  F16, BF16
 *                     and F32 matrices are copied as they are, into the same
 *                     huge pages (where the system grants them), which
 *                     decode reads with fewer TLB misses than the file's.
 *   "isa"             the instruction-set level the matrix products run at:
 *                     "auto" (default: the best this processor runs, capped
 *                     by the environment variable OKV_ISA) or one of scalar,
 *                     avx2, avxvnni, avx512, avx512vnni (x86), neon, dotprod,
 *                     i8mm (aarch64) that this processor runs.  For
 *                     comparing levels in one process (tests, benchmarks);
 *                     it also picks the repacked layouts.  Attention and the
 *                     element-wise steps keep the processor's best.
 *   "n_threads"       1 (default) to 1024: the threads the load's reading
 *                     (okv_model_load_progress) and repacking run on (the
 *                     longest part: the copies, and the kernel zeroing each
 *                     new page as a thread first writes it); the same bytes
 *                     whatever the number.  Threads started for the load
 *                     end with it.
 * Errors: OKV_ERR_IO (cannot open), OKV_ERR_FORMAT (corrupt file, a missing,
 * mis-shaped or misaligned tensor, a missing required key),
 * OKV_ERR_UNSUPPORTED (well-formed but beyond offkv: an unknown architecture,
 * tensor type or rope scaling type, a head dim over 512, key and value
 * lengths that differ, a tensor the architecture does not use, which
 * running without would compute something else, an "isa" this processor
 * cannot run), OKV_ERR_INVALID (an
 * unknown option or bad value), OKV_ERR_NOMEM, or the tokenizer's own
 * (okv_tokenizer_from_gguf's: OKV_ERR_NOT_FOUND
 * for a file without tokenizer.ggml.model or its tokens, OKV_ERR_INVALID for
 * a bad vocabulary); each message names the file part or option.  Returns NULL on
 * error; free with okv_model_free. */
okv_model *okv_model_load(const char *path, const char *const *options, okv_error *err);

/* How far a load has got: stage is "reading" (every weight the model uses
 * read from the file, in file order) or "repacking" (the "repack" copies);
 * done and total count bytes of the file's weights in that stage.  Called
 * on the loading thread, about every 1% of a stage and at its end
 * (done == total), never with done going back within a stage. */
typedef void (*okv_model_progress)(void *user, const char *stage, uint64_t done, uint64_t total);

/* okv_model_load with progress reported to fn (NULL: as okv_model_load).
 * With fn, the load also reads every weight from the file (a "reading"
 * stage; okv_model_load reads only the matrices it repacks and leaves the
 * other pages to be read when first used), so a cold load from a slow disk
 * shows its progress and the first evaluation does not wait on the disk.
 * Errors as okv_model_load's. */
okv_model *okv_model_load_progress(const char *path, const char *const *options, okv_model_progress fn, void *user,
                                   okv_error *err);

/* Frees the model and unmaps its file.  No context may still use it.  NULL is a no-op. */
void okv_model_free(okv_model *m);

/* The architecture name from the file ("llama", "gemma3", ...). */
const char *okv_model_arch(const okv_model *m);

/* Hyperparameters. */
int32_t okv_model_n_vocab(const okv_model *m);
int32_t okv_model_n_layers(const okv_model *m);
int32_t okv_model_n_embd(const okv_model *m);
int32_t okv_model_n_ctx_train(const okv_model *m);

/* Copies the cache geometry of layer i (kv heads, head dim, window) into
 * out; false for a bad index.  These are what contexts build caches from and
 * check shared caches against. */
bool okv_model_layer_geometry(const okv_model *m, int32_t i, okv_layer_geometry *out);

/* The model's tokenizer (borrowed; lives as long as the model). */
const okv_tokenizer *okv_model_tokenizer(const okv_model *m);

/* Bytes of the weights the model uses, as stored in the file (the tensors
 * it bound; repacked copies of them take about as much, see "repack"). */
size_t okv_model_weight_bytes(const okv_model *m);

/* A one-line description: arch, layers, widths, weight types, and the
 * instruction-set level the products run at ("isa"). */
const char *okv_model_describe(const okv_model *m);

#ifdef __cplusplus
}
#endif
#endif
