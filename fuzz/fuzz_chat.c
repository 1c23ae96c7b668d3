/* libFuzzer target: the answer parsers of offkv/chat.h (okv_chat_parse),
 * which read whatever text a model writes, partial while it streams.
 *
 * Input: byte 0 picks the format (mod the formats) and the think tags
 * (/ the formats, mod 3: none, <think> tags, the block already open); the
 * rest is the model's text (NUL bytes read as spaces: the checks compare
 * C strings).  Checked: every parse succeeds, and each prefix's partial
 * parse keeps the content and reasoning of the one before and stays a
 * prefix of the final parse's: a stream sends only what grew, so text
 * shown and then taken back would reach the client cut or doubled. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offkv/chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { N_FORMATS = OKV_CHAT_FORMAT_PYTHONIC + 1, MAX_TEXT = 2048 };

static int prefix_of(const char *a, const char *b) { return strncmp(a, b, strlen(a)) == 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int think = data[0] / N_FORMATS % 3;
    const okv_chat_syntax syn = {(okv_chat_format)(data[0] % N_FORMATS), think > 0, think == 2};
    size_t n = size - 1 < MAX_TEXT ? size - 1 : MAX_TEXT;
    char *text = malloc(n + 1);
    char *prev_c = calloc(1, 1), *prev_r = calloc(1, 1);
    if (!text || !prev_c || !prev_r) __builtin_trap();
    for (size_t i = 0; i < n; i++) text[i] = data[1 + i] ? (char)data[1 + i] : ' ';
    text[n] = '\0';
    okv_chat_msg fin, cur;
    okv_error err;
    if (okv_chat_parse(&syn, text, n, false, &fin, &err) != OKV_OK) __builtin_trap();
    const char *fin_r = fin.reasoning_content ? fin.reasoning_content : "";
    for (size_t k = 0; k <= n; k++) {
        if (okv_chat_parse(&syn, text, k, true, &cur, &err) != OKV_OK) __builtin_trap();
        const char *cur_r = cur.reasoning_content ? cur.reasoning_content : "";
        if (!prefix_of(prev_c, cur.content) || !prefix_of(cur.content, fin.content) || !prefix_of(prev_r, cur_r) ||
            !prefix_of(cur_r, fin_r))
            __builtin_trap();
        free(prev_c);
        free(prev_r);
        prev_c = strdup(cur.content);
        prev_r = strdup(cur_r);
        if (!prev_c || !prev_r) __builtin_trap();
        okv_chat_msg_free(&cur);
    }
    okv_chat_msg_free(&fin);
    free(prev_c);
    free(prev_r);
    free(text);
    return 0;
}
