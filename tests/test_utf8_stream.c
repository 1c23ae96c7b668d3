/* The UTF-8 stream that `offkv run` prints through: pieces that split a
 * character are held until it is complete, and bytes that can never form a
 * character become U+FFFD.  Expectations are written out by hand from the
 * Unicode standard's table of well-formed byte sequences (and its
 * "maximal subpart" rule for where one U+FFFD ends). */
#include "check.h"
#include "offkv/tokenizer.h"

#define FFFD "\xEF\xBF\xBD"

/* Feeds the pieces (NULL-terminated) one by one, then finishes; checks the
 * concatenated output and what came out after each piece. */
static void feed(const char *what, const char *const *pieces, const char *const *after, const char *want) {
    okv_detok_stream s = {0};
    char all[256] = "", out[64];
    size_t n_all = 0;
    for (int i = 0; pieces[i]; i++) {
        size_t n = okv_detok_stream_feed(&s, pieces[i], strlen(pieces[i]), out);
        CHECK(n == strlen(after[i]) && memcmp(out, after[i], n) == 0, "%s: piece %d gave %zu bytes '%.*s', want '%s'",
              what, i, n, (int)n, out, after[i]);
        memcpy(all + n_all, out, n);
        n_all += n;
    }
    n_all += okv_detok_stream_finish(&s, all + n_all);
    all[n_all] = '\0';
    CHECK(strcmp(all, want) == 0, "%s: '%s', want '%s'", what, all, want);
}

int main(void) {
    {   /* ’ (U+2019, E2 80 99) split over three byte tokens */
        const char *p[] = {"It\xE2", "\x80", "\x99s", NULL};
        const char *a[] = {"It", "", "\xE2\x80\x99s"};
        feed("3-byte char over 3 pieces", p, a, "It\xE2\x80\x99s");
    }
    {   /* 🙂 (U+1F642, F0 9F 99 82) split 2 + 2 */
        const char *p[] = {"\xF0\x9F", "\x99\x82!", NULL};
        const char *a[] = {"", "\xF0\x9F\x99\x82!"};
        feed("4-byte char over 2 pieces", p, a, "\xF0\x9F\x99\x82!");
    }
    {   /* é whole, ASCII untouched */
        const char *p[] = {"caf\xC3\xA9 ok", NULL};
        const char *a[] = {"caf\xC3\xA9 ok"};
        feed("whole pieces pass", p, a, "caf\xC3\xA9 ok");
    }
    {   /* a lead byte followed by ASCII: the lead alone is one U+FFFD, the ASCII stays */
        const char *p[] = {"\xC3", "A", NULL};
        const char *a[] = {"", FFFD "A"};
        feed("broken 2-byte", p, a, FFFD "A");
    }
    {   /* bytes that never start a character: continuation, C0/C1, F5..FF */
        const char *p[] = {"\x80" "a\xC0\xC1\xF5\xFF", NULL};
        const char *a[] = {FFFD "a" FFFD FFFD FFFD FFFD};
        feed("invalid leads", p, a, FFFD "a" FFFD FFFD FFFD FFFD);
    }
    {   /* E0 80: overlong (E0 needs A0..BF next): the lead is one U+FFFD, 80 another */
        const char *p[] = {"\xE0\x80" "x", NULL};
        const char *a[] = {FFFD FFFD "x"};
        feed("overlong 3-byte", p, a, FFFD FFFD "x");
    }
    {   /* ED A0 80 is a surrogate (U+D800): ED needs 80..9F next */
        const char *p[] = {"\xED\xA0\x80", NULL};
        const char *a[] = {FFFD FFFD FFFD};
        feed("surrogate", p, a, FFFD FFFD FFFD);
    }
    {   /* F4 90: past U+10FFFF */
        const char *p[] = {"\xF4\x90\x80\x80", NULL};
        const char *a[] = {FFFD FFFD FFFD FFFD};
        feed("past U+10FFFF", p, a, FFFD FFFD FFFD FFFD);
    }
    {   /* E2 80 then a new character: the maximal subpart E2 80 is one U+FFFD */
        const char *p[] = {"\xE2\x80", "\xC3\xA9", NULL};
        const char *a[] = {"", FFFD "\xC3\xA9"};
        feed("truncated 3-byte then a char", p, a, FFFD "\xC3\xA9");
    }
    {   /* the stream ends inside a character: one U+FFFD at the end */
        const char *p[] = {"ab\xF0\x9F\x99", NULL};
        const char *a[] = {"ab"};
        feed("ends mid-character", p, a, "ab" FFFD);
    }
    {   /* held bytes, then a piece that breaks them and starts another that completes later */
        const char *p[] = {"\xE2", "\xF0\x9F", "\x99\x82", NULL};
        const char *a[] = {"", FFFD, "\xF0\x9F\x99\x82"};
        feed("held then broken then held", p, a, FFFD "\xF0\x9F\x99\x82");
    }
    {   /* an empty piece changes nothing */
        const char *p[] = {"\xC3", "", "\xA9", NULL};
        const char *a[] = {"", "", "\xC3\xA9"};
        feed("empty piece", p, a, "\xC3\xA9");
    }
    return check_done();
}
