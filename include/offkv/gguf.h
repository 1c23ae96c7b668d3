/* offkv — GGUF files: reading (v2 and v3, little-endian) and writing (v3).
 *
 * A GGUF file is a header, key/value metadata, tensor descriptions, and an
 * aligned data section.  okv_gguf_open validates the whole structure up
 * front: every count, length, shape and byte range is checked against the
 * file size, so once a handle exists every getter below is a bounds-safe
 * lookup.  A malformed or truncated file is OKV_ERR_FORMAT with a message
 * naming the field.  Strings and tensor data returned by the reader point
 * into the mapped file (or the caller's buffer) and live as long as the
 * handle; GGUF strings are not NUL-terminated, hence pointer + length.
 *
 * Getters that take a key return OKV_ERR_NOT_FOUND when the key is absent
 * and leave *out untouched, so a caller can preset a default and accept
 * NOT_FOUND; a value of the wrong type, or one that does not fit the
 * requested type, is OKV_ERR_FORMAT. */
#ifndef OFFKV_GGUF_H
#define OFFKV_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "offkv/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata value types, numbered as in the file. */
typedef enum okv_gguf_type {
    OKV_GGUF_NONE = -1, /* returned for a bad index; never in a file */
    OKV_GGUF_U8 = 0,
    OKV_GGUF_I8 = 1,
    OKV_GGUF_U16 = 2,
    OKV_GGUF_I16 = 3,
    OKV_GGUF_U32 = 4,
    OKV_GGUF_I32 = 5,
    OKV_GGUF_F32 = 6,
    OKV_GGUF_BOOL = 7,
    OKV_GGUF_STRING = 8,
    OKV_GGUF_ARRAY = 9,
    OKV_GGUF_U64 = 10,
    OKV_GGUF_I64 = 11,
    OKV_GGUF_F64 = 12
} okv_gguf_type;

/* ggml tensor types, numbered as in ggml.h (gaps are types ggml removed). */
typedef enum okv_ggml_type {
    OKV_GGML_F32 = 0,
    OKV_GGML_F16 = 1,
    OKV_GGML_Q4_0 = 2,
    OKV_GGML_Q4_1 = 3,
    OKV_GGML_Q5_0 = 6,
    OKV_GGML_Q5_1 = 7,
    OKV_GGML_Q8_0 = 8,
    OKV_GGML_Q8_1 = 9,
    OKV_GGML_Q2_K = 10,
    OKV_GGML_Q3_K = 11,
    OKV_GGML_Q4_K = 12,
    OKV_GGML_Q5_K = 13,
    OKV_GGML_Q6_K = 14,
    OKV_GGML_Q8_K = 15,
    OKV_GGML_IQ2_XXS = 16,
    OKV_GGML_IQ2_XS = 17,
    OKV_GGML_IQ3_XXS = 18,
    OKV_GGML_IQ1_S = 19,
    OKV_GGML_IQ4_NL = 20,
    OKV_GGML_IQ3_S = 21,
    OKV_GGML_IQ2_S = 22,
    OKV_GGML_IQ4_XS = 23,
    OKV_GGML_I8 = 24,
    OKV_GGML_I16 = 25,
    OKV_GGML_I32 = 26,
    OKV_GGML_I64 = 27,
    OKV_GGML_F64 = 28,
    OKV_GGML_IQ1_M = 29,
    OKV_GGML_BF16 = 30,
    OKV_GGML_TQ1_0 = 34,
    OKV_GGML_TQ2_0 = 35,
    OKV_GGML_MXFP4 = 39,
    OKV_GGML_TYPE_END = 40 /* one past the largest number known */
} okv_ggml_type;

/* Returns the ggml name of type t ("f32", "q8_0", ...), or NULL for a number
 * that is not a known ggml type.  The string is static. */
const char *okv_ggml_type_name(int32_t t);

/* Elements per block of type t (1 for plain types, 32 for Q8_0/Q4_0, 256
 * for the K-quants), or 0 for an unknown type. */
int64_t okv_ggml_block_size(int32_t t);

/* Bytes per block of type t (4 for F32, 34 for Q8_0, 18 for Q4_0, ...), or
 * 0 for an unknown type. */
size_t okv_ggml_type_size(int32_t t);

/* Bytes of one row of n elements of type t, or 0 when t is unknown, n < 0,
 * n is not a multiple of the block size, or the size would overflow. */
size_t okv_ggml_row_size(int32_t t, int64_t n);

/* Quantizes the k floats at x into one row of type t at dst
 * (okv_ggml_row_size(t, k) bytes) exactly as ggml's reference quantizers do
 * (llama-quantize without an importance matrix): the bytes equal what
 * llama.cpp writes for the same input.  t is one of the types offkv writes:
 * F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K and MXFP4.
 * Returns 1, or 0 (writing nothing) for another type or a k that is not
 * whole blocks of t. */
int okv_quantize_row(int32_t t, const float *x, void *dst, int64_t k);

/* ------------------------------------------------------------------ */
/* Reading                                                             */

typedef struct okv_gguf okv_gguf;

/* One tensor as the file describes it.  Dimensions past n_dims are 1;
 * ne[0] is the contiguous one (a row).  name and data are owned by the
 * handle.  data is base + data-section start + offset: aligned to the
 * file's alignment when the file is mapped, only as aligned as the caller's
 * buffer allows for okv_gguf_open_memory. */
typedef struct okv_gguf_tensor {
    const char *name;     /* NUL-terminated */
    okv_ggml_type type;
    int32_t n_dims;       /* 1..4 */
    int64_t ne[4];
    uint64_t offset;      /* from the start of the data section */
    const void *data;
    size_t n_bytes;
} okv_gguf_tensor;

/* Maps the file at path read-only and validates it.  A file that cannot be
 * opened or mapped is OKV_ERR_IO; a malformed one is OKV_ERR_FORMAT (bad
 * magic, version other than 2 or 3, any count/length/offset/shape that does
 * not fit the file, duplicate keys or tensor names, unknown value or tensor
 * types, a bad general.alignment, misaligned tensor offsets); running out of
 * memory is OKV_ERR_NOMEM.  Returns NULL on error.  The caller owns the
 * handle and frees it with okv_gguf_close, which also unmaps the file. */
okv_gguf *okv_gguf_open(const char *path, okv_error *err);

/* As okv_gguf_open, over size bytes at data that the caller owns.  The
 * bytes are not copied: they must stay valid and unchanged until
 * okv_gguf_close.  Used for files already in memory and for tests. */
okv_gguf *okv_gguf_open_memory(const void *data, size_t size, okv_error *err);

/* Frees the handle (and unmaps the file if okv_gguf_open mapped it).  Every
 * pointer obtained from it becomes invalid.  NULL is a no-op. */
void okv_gguf_close(okv_gguf *g);

/* The file's format version (2 or 3). */
uint32_t okv_gguf_version(const okv_gguf *g);

/* The data-section alignment: general.alignment, or 32 when absent. */
uint32_t okv_gguf_alignment(const okv_gguf *g);

/* Number of metadata pairs. */
int64_t okv_gguf_n_kv(const okv_gguf *g);

/* The i-th key (NUL-terminated, owned by g), or NULL for a bad index. */
const char *okv_gguf_key(const okv_gguf *g, int64_t i);

/* Index of key, or -1 when absent (or key is NULL). */
int64_t okv_gguf_find_key(const okv_gguf *g, const char *key);

/* Type of the i-th value, or OKV_GGUF_NONE for a bad index. */
okv_gguf_type okv_gguf_kv_type(const okv_gguf *g, int64_t i);

/* Name of a value type ("u32", "string", "array", ...); "?" if unknown. */
const char *okv_gguf_type_name(okv_gguf_type t);

/* Integer getters: accept a value of any integer type (u8 .. i64) whose
 * value fits *out; bool, float and string values are OKV_ERR_FORMAT, as is
 * a value out of range (e.g. -1 for a u32). */
okv_status okv_gguf_get_u32(const okv_gguf *g, const char *key, uint32_t *out, okv_error *err);
okv_status okv_gguf_get_i32(const okv_gguf *g, const char *key, int32_t *out, okv_error *err);
okv_status okv_gguf_get_u64(const okv_gguf *g, const char *key, uint64_t *out, okv_error *err);
okv_status okv_gguf_get_i64(const okv_gguf *g, const char *key, int64_t *out, okv_error *err);

/* Reads an f32 or f64 value as a float (an f64 beyond float range is
 * OKV_ERR_FORMAT).  Integers are not converted: the format types floats. */
okv_status okv_gguf_get_f32(const okv_gguf *g, const char *key, float *out, okv_error *err);

/* Reads an f32 or f64 value as a double, exactly (what a tool that shows
 * the file as it is wants).  Errors as okv_gguf_get_f32, less the range. */
okv_status okv_gguf_get_f64(const okv_gguf *g, const char *key, double *out, okv_error *err);

/* Reads a bool value. */
okv_status okv_gguf_get_bool(const okv_gguf *g, const char *key, bool *out, okv_error *err);

/* Reads a string value as a pointer into the file and its length in bytes;
 * the bytes are not NUL-terminated.  Either out pointer may be NULL. */
okv_status okv_gguf_get_str(const okv_gguf *g, const char *key, const char **s, size_t *len,
                            okv_error *err);

/* Copies a string value into buf as a NUL-terminated string.  A value that
 * needs more than cap bytes (with its NUL) is OKV_ERR_INVALID and leaves buf
 * as an empty string, as does any other failure; a NULL buf or cap 0 is
 * OKV_ERR_INVALID. */
okv_status okv_gguf_get_str_buf(const okv_gguf *g, const char *key, char *buf, size_t cap,
                                okv_error *err);

/* Describes an array value: its element type and count (either out pointer
 * may be NULL).  A non-array value is OKV_ERR_FORMAT. */
okv_status okv_gguf_get_array(const okv_gguf *g, const char *key, okv_gguf_type *elem_type,
                              uint64_t *n, okv_error *err);

/* Element i of an array of strings, as pointer + length into the file.
 * Constant time (the reader indexes string arrays at open).  An index out
 * of range is OKV_ERR_INVALID; a value that is not an array of strings is
 * OKV_ERR_FORMAT. */
okv_status okv_gguf_array_str(const okv_gguf *g, const char *key, uint64_t i, const char **s,
                              size_t *len, okv_error *err);

/* Element i of an array of integers (any integer element type; a u64 beyond
 * INT64_MAX is OKV_ERR_FORMAT, as is a negative one for array_u64), of
 * floats (f32 or f64; as a float, or exactly as a double), or of bools.
 * Errors as okv_gguf_array_str. */
okv_status okv_gguf_array_i64(const okv_gguf *g, const char *key, uint64_t i, int64_t *out,
                              okv_error *err);
okv_status okv_gguf_array_u64(const okv_gguf *g, const char *key, uint64_t i, uint64_t *out,
                              okv_error *err);
okv_status okv_gguf_array_f32(const okv_gguf *g, const char *key, uint64_t i, float *out,
                              okv_error *err);
okv_status okv_gguf_array_f64(const okv_gguf *g, const char *key, uint64_t i, double *out,
                              okv_error *err);
okv_status okv_gguf_array_bool(const okv_gguf *g, const char *key, uint64_t i, bool *out,
                               okv_error *err);

/* Number of tensors. */
int64_t okv_gguf_n_tensors(const okv_gguf *g);

/* Index of the tensor called name, or -1 when absent (or name is NULL). */
int64_t okv_gguf_find_tensor(const okv_gguf *g, const char *name);

/* The i-th tensor's description (owned by g), or NULL for a bad index. */
const okv_gguf_tensor *okv_gguf_tensor_at(const okv_gguf *g, int64_t i);

/* ------------------------------------------------------------------ */
/* Writing                                                             */

typedef struct okv_gguf_writer okv_gguf_writer;

/* Fills dst (n_bytes, the tensor's whole data) for the tensor called name;
 * user is the pointer given to okv_gguf_writer_add_tensor_fn.  A status
 * other than OKV_OK aborts the write and is returned from it. */
typedef okv_status (*okv_gguf_fill_fn)(void *user, const char *name, void *dst, size_t n_bytes,
                                       okv_error *err);

/* Creates an empty writer (no metadata, no tensors, alignment 32).  Returns
 * NULL with OKV_ERR_NOMEM if memory runs out.  The caller owns it and frees
 * it with okv_gguf_writer_free. */
okv_gguf_writer *okv_gguf_writer_create(okv_error *err);

/* Frees the writer and its copies of keys and values.  NULL is a no-op. */
void okv_gguf_writer_free(okv_gguf_writer *w);

/* Adds metadata key = value; keys and values are copied.  A NULL or empty
 * key, a key already added, or an unknown type is OKV_ERR_INVALID.
 * general.alignment may only be added as a u32 that is a nonzero power of
 * two, and sets the alignment the file is written with.  A failed add
 * leaves the writer as it was. */
okv_status okv_gguf_writer_add_u32(okv_gguf_writer *w, const char *key, uint32_t v, okv_error *err);
okv_status okv_gguf_writer_add_i32(okv_gguf_writer *w, const char *key, int32_t v, okv_error *err);
okv_status okv_gguf_writer_add_u64(okv_gguf_writer *w, const char *key, uint64_t v, okv_error *err);
okv_status okv_gguf_writer_add_f32(okv_gguf_writer *w, const char *key, float v, okv_error *err);
okv_status okv_gguf_writer_add_bool(okv_gguf_writer *w, const char *key, bool v, okv_error *err);
/* s is NUL-terminated. */
okv_status okv_gguf_writer_add_str(okv_gguf_writer *w, const char *key, const char *s, okv_error *err);

/* Adds a scalar of any non-array type t; value points to the C object of
 * that type (uint8_t .. double, bool; const char * for a string). */
okv_status okv_gguf_writer_add_scalar(okv_gguf_writer *w, const char *key, okv_gguf_type t,
                                      const void *value, okv_error *err);

/* Adds an array of n elements of non-array type elem; values is a C array
 * of that type (const char *const * for strings, each NUL-terminated, bool
 * for bools).  values may be NULL only when n is 0. */
okv_status okv_gguf_writer_add_array(okv_gguf_writer *w, const char *key, okv_gguf_type elem,
                                     const void *values, uint64_t n, okv_error *err);

/* Adds a tensor of ggml type `type` and shape ne[0..n_dims-1].  The name is
 * copied; data (okv_ggml_row_size(type, ne[0]) * ne[1] * ... bytes) is
 * borrowed and must stay valid until the last write call.  n_dims outside
 * 1..4, an extent < 1, ne[0] not a multiple of the type's block size, an
 * unknown type, a NULL/empty/duplicate name, NULL data, or a size that
 * overflows is OKV_ERR_INVALID.  Tensors are written in the order added. */
okv_status okv_gguf_writer_add_tensor(okv_gguf_writer *w, const char *name, okv_ggml_type type,
                                      int32_t n_dims, const int64_t *ne, const void *data,
                                      okv_error *err);

/* As okv_gguf_writer_add_tensor, but the data is produced at write time by
 * fill(user, name, dst, n_bytes, err), one tensor at a time, so a large
 * model never has to sit in memory whole.  fill is called once per write. */
okv_status okv_gguf_writer_add_tensor_fn(okv_gguf_writer *w, const char *name, okv_ggml_type type,
                                         int32_t n_dims, const int64_t *ne, okv_gguf_fill_fn fill,
                                         void *user, okv_error *err);

/* The bytes okv_gguf_writer_write would write now, computed without
 * writing or filling anything, so a caller can check the space first. */
okv_status okv_gguf_writer_size(const okv_gguf_writer *w, uint64_t *size, okv_error *err);

/* Writes everything added so far as a GGUF v3 file at path.  A regular file
 * (new, existing, or a symlink's target) is written beside its name and
 * renamed into place only when complete, so a failure or a kill never
 * leaves a partial file under the name, never destroys the old one, and a
 * program that mapped the old file keeps reading it intact.  A device or
 * FIFO at path is written through and never removed.  A failing open, write,
 * close or rename is OKV_ERR_IO; a fill callback's error is passed on.  The
 * writer is unchanged and may be written again. */
okv_status okv_gguf_writer_write(const okv_gguf_writer *w, const char *path, okv_error *err);

/* As okv_gguf_writer_write, into a new malloc'd buffer: *data and *size are
 * set on success and the caller frees *data with free(). */
okv_status okv_gguf_writer_to_memory(const okv_gguf_writer *w, void **data, size_t *size,
                                     okv_error *err);

#ifdef __cplusplus
}
#endif
#endif
