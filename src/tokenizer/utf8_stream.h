/* Internal: streaming token text without splitting characters.
 *
 * A token's piece is bytes, and with byte-fallback vocabularies one
 * character can span several tokens (<0xE2><0x80><0x99>).  Printed piece by
 * piece, a terminal shows broken characters in between.  The stream holds
 * back the bytes of an incomplete UTF-8 sequence until the piece that
 * completes it arrives, and replaces bytes that can never be part of a
 * valid character by U+FFFD (one per maximal invalid run, as the Unicode
 * standard recommends), so what comes out is always valid UTF-8. */
#ifndef OKV_TOKENIZER_UTF8_STREAM_H
#define OKV_TOKENIZER_UTF8_STREAM_H

#include <stddef.h>

typedef struct okv_utf8_stream {
    unsigned char held[4]; /* the start of an incomplete character */
    size_t n_held;
} okv_utf8_stream;

/* Feeds n bytes; writes the text now complete to out, which has room for
 * okv_utf8_stream_room(n) bytes (every byte, held ones included, may become
 * a 3-byte U+FFFD), and returns its length. */
size_t okv_utf8_stream_feed(okv_utf8_stream *s, const char *in, size_t n, char *out);

/* Room okv_utf8_stream_feed may need for n input bytes. */
static inline size_t okv_utf8_stream_room(size_t n) { return 3 * (n + 4); }

/* Ends the stream: what is still held can no longer complete and comes out
 * as U+FFFD (written to out, at most 3 bytes); returns its length. */
size_t okv_utf8_stream_finish(okv_utf8_stream *s, char *out);

#endif
