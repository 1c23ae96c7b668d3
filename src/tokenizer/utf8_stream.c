#include "offkv/tokenizer.h"

#include <string.h>

/* Bytes of the sequence lead byte b starts, 0 if b cannot start one. */
static int seq_len(unsigned char b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

/* Whether c may follow lead at position i (1-based) of a sequence: the
 * second byte is narrowed for leads whose plain range would allow overlong
 * forms, surrogates or code points past U+10FFFF. */
static int fits(unsigned char lead, int i, unsigned char c) {
    if (i == 1) {
        if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF;
        if (lead == 0xED) return c >= 0x80 && c <= 0x9F;
        if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
        if (lead == 0xF4) return c >= 0x80 && c <= 0x8F;
    }
    return c >= 0x80 && c <= 0xBF;
}

static size_t put_fffd(char *out) {
    memcpy(out, "\xEF\xBF\xBD", 3);
    return 3;
}

size_t okv_detok_stream_feed(okv_detok_stream *s, const char *in, size_t n, char *out) {
    size_t o = 0, i = 0;
    /* Work on held bytes followed by the input, without copying the input. */
    const size_t total = s->n_held + n;
    unsigned char held[4];
    const size_t n_old = s->n_held;
    memcpy(held, s->held, n_old);
    s->n_held = 0;
#define BYTE(j) ((j) < n_old ? held[(j)] : (unsigned char)in[(j) - n_old])
    while (i < total) {
        const unsigned char lead = BYTE(i);
        const int len = seq_len(lead);
        if (len == 0) {
            o += put_fffd(out + o);
            i++;
            continue;
        }
        int got = 1;
        while (got < len && i + (size_t)got < total && fits(lead, got, BYTE(i + (size_t)got))) got++;
        if (got == len) {
            for (int j = 0; j < len; j++) out[o++] = (char)BYTE(i + (size_t)j);
            i += (size_t)len;
        } else if (i + (size_t)got == total) {
            /* Valid so far and out of input: the next piece may complete it. */
            for (int j = 0; j < got; j++) s->held[j] = BYTE(i + (size_t)j);
            s->n_held = (size_t)got;
            i = total;
        } else {
            o += put_fffd(out + o); /* a maximal prefix that cannot complete */
            i += (size_t)got;
        }
    }
#undef BYTE
    return o;
}

size_t okv_detok_stream_finish(okv_detok_stream *s, char *out) {
    size_t o = s->n_held ? put_fffd(out) : 0;
    s->n_held = 0;
    return o;
}
