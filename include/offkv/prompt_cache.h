/* offkv — saved sequences (prompt caches).
 *
 * A sequence cache can be written to a file and read back into a cache of
 * the same layers and config, which then continues exactly where the saved
 * one stopped: the same rows at the same positions (ring layers included),
 * the same length, and the same rewind limits.  A server or the CLI keeps a
 * long system prompt or a conversation this way and evaluates only what is
 * new (offkv run --prompt-cache).
 *
 * The file (little-endian) holds: the magic "OFFKVSEQ", a format version,
 * the storage type, a 64-bit fingerprint of the model the rows were made
 * with (the caller's; okv_model_fingerprint gives one for a GGUF model), the
 * cache's layer count, capacity, max_write, length, high water and the
 * number of tokens saved with it (0: none); each layer's kv heads, head
 * width, window, rows, first saved position, row bytes and kv_from; the
 * tokens; then each layer's K and V rows by logical position (those the
 * layer holds below the length; none for a layer that shares a donor's),
 * and an FNV-1a 64 checksum of all of it.
 * Rows are stored as the cache stores them (okv_cache_row_bytes per kv head
 * and position), so nothing is converted. */
#ifndef OFFKV_PROMPT_CACHE_H
#define OFFKV_PROMPT_CACHE_H

#include <stdint.h>

#include "offkv/cache.h"
#include "offkv/model.h"
#include "offkv/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format version okv_cache_save writes and okv_cache_load reads. */
#define OKV_SEQ_FILE_VERSION 1

/* Writes cache c's sequence to path, atomically: a temporary file beside
 * it is renamed over path only once every byte is written, so a failed or
 * killed save leaves the old file whole.  fingerprint identifies the model
 * (okv_model_fingerprint).  tokens, if n_tokens > 0, are the sequence's
 * token ids, stored for the reader (n_tokens must then equal the length).
 * Errors: NULL c or path, n_tokens other than 0 or the length, or tokens NULL
 * with n_tokens > 0 is OKV_ERR_INVALID; an open step OKV_ERR_BUSY; a write
 * failure OKV_ERR_IO naming the path; OKV_ERR_NOMEM. */
okv_status okv_cache_save(const okv_cache *c, const char *path, uint64_t fingerprint, const int32_t *tokens,
                          int32_t n_tokens, okv_error *err);

/* Replaces cache c's sequence with the one saved at path.  The file must
 * have been written by okv_cache_save for the same fingerprint, from a cache
 * with the same storage type, layers (kv heads, head dim, window),
 * capacity and max_write; anything else is refused with a message naming
 * what differs (OKV_ERR_FORMAT for a file that is not a saved sequence, is
 * truncated, has extra bytes, holds rows that do not fit its length or fails
 * its checksum; OKV_ERR_UNSUPPORTED for another version; OKV_ERR_INVALID for
 * another model or cache shape, unless the file also fails its checksum:
 * a damaged header is named as damage, not as another model), and a
 * file that cannot be read is OKV_ERR_IO.  Any error leaves c exactly as it
 * was.  tokens, if not NULL, receives the stored token ids (room for
 * max_tokens; more stored than that is OKV_ERR_INVALID) and *n_tokens their
 * count (0 when the file holds none); n_tokens may be NULL.  An open step is
 * OKV_ERR_BUSY. */
okv_status okv_cache_load(okv_cache *c, const char *path, uint64_t fingerprint, int32_t *tokens,
                          int32_t max_tokens, int32_t *n_tokens, okv_error *err);

/* A 64-bit fingerprint of a loaded model for okv_cache_save/load: a hash of
 * its architecture, hyperparameters, per-layer attention parameters,
 * vocabulary, tensor table (names, types, shapes) and the first and last
 * 4 KiB of every tensor's data, so two files with the same shapes but other
 * weights differ.  0 for NULL. */
uint64_t okv_model_fingerprint(const okv_model *m);

#ifdef __cplusplus
}
#endif
#endif
