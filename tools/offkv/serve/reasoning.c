/* Following an answer's reasoning markup byte by byte as the scheduler
 * generates it: whether the answer is inside reasoning after each token,
 * by the parser's rules (okv_chat_reasoning).  Byte by byte because a
 * token's text may hold half a tag; the window keeps the last bytes so
 * that a tag split across tokens is still seen whole. */
#include <string.h>

#include "serve.h"

void srv_reasoning_init(srv_reasoning *r, const okv_chat_reasoning_markup *m) {
    memset(r, 0, sizeof *r);
    if (!m || !m->open) return;
    r->m = *m;
    r->inside = m->starts_inside;
    r->settled = m->starts_inside;
}

/* Whether the window ends with s. */
static bool ends_with(const srv_reasoning *r, const char *s) {
    const size_t n = strlen(s);
    return n <= r->n_win && memcmp(r->win + r->n_win - n, s, n) == 0;
}

void srv_reasoning_feed(srv_reasoning *r, const char *text, size_t n) {
    if (!r->m.open) return;
    for (size_t i = 0; i < n; i++) {
        const char c = text[i];
        if (r->n_win == sizeof r->win) {
            memmove(r->win, r->win + 1, sizeof r->win - 1);
            r->n_win--;
        }
        r->win[r->n_win++] = c;
        if (r->inside) {
            if (ends_with(r, r->m.close)) r->inside = false, r->settled = true;
        } else if (!r->m.leading) {
            if (ends_with(r, r->m.open)) r->inside = true;
        } else if (!r->settled) {
            /* white space, then the opener's bytes in order, or never */
            if (c == r->m.open[r->lead]) {
                if (!r->m.open[++r->lead]) r->inside = r->settled = true;
            } else if (!(r->lead == 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r'))) {
                r->settled = true;
            }
        }
    }
}

bool srv_reasoning_may_open(const okv_chat_reasoning_markup *m, const char *prompt, const okv_tokenizer *tok) {
    if (!m || !m->open || !m->leading || m->starts_inside || !prompt || !tok) return false;
    size_t n = strlen(prompt), k = strlen(m->close), ids = 0;
    while (n && (prompt[n - 1] == ' ' || prompt[n - 1] == '\n' || prompt[n - 1] == '\t' || prompt[n - 1] == '\r')) n--;
    if (n >= k && memcmp(prompt + n - k, m->close, k) == 0) return false;
    okv_error err = {0};
    int32_t id;
    return okv_tokenizer_encode(tok, m->open, strlen(m->open), OKV_TOKENIZE_PARSE_SPECIAL | OKV_TOKENIZE_CONTINUE, &id,
                                1, &ids, &err) == OKV_OK &&
           ids == 1;
}
