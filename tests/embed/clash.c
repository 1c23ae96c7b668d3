/* An outside program with names of its own that liboffkv.a once defined
 * too (issue 15, item 10): internal helpers without the okv_ prefix
 * (heap_push, bpe_encode, ...) and PCRE2's API, as a program that links its
 * own PCRE2 has.  tests/install.sh links it statically with liboffkv.a: a
 * clash is a "multiple definition" error there.  Run with a byte-level BPE
 * vocabulary (a GGUF) it checks that the library's own, now private, PCRE2
 * still pre-tokenizes: "Hello world" is two words, whatever this program's
 * pcre2_compile_8 does. */
#include <offkv/offkv.h>
#include <stdio.h>
#include <string.h>

/* The program's own functions of those names; each says it was called. */
static int calls;
int heap_push(void) { return ++calls; }
int heap_pop(void) { return ++calls; }
int ids_push(void) { return ++calls; }
int bpe_encode(void) { return ++calls; }
int spm_encode(void) { return ++calls; }
int pretok_create(void) { return ++calls; }
int pretok_split(void) { return ++calls; }
int pretok_free(void) { return ++calls; }
int tok_find(void) { return ++calls; }
int tok_hash(void) { return ++calls; }
int tok_utf8_next(void) { return ++calls; }
void *pcre2_compile_8(void) { ++calls; return NULL; }
int pcre2_match_8(void) { return ++calls; }
void pcre2_code_free_8(void) { ++calls; }
void *pcre2_match_data_create_8(void) { ++calls; return NULL; }
int _pcre2_strlen_8(void) { return ++calls; }

int main(int argc, char **argv) {
    printf("clash: offkv %s\n", okv_version());
    if (argc < 2) return 0;
    okv_error err;
    okv_gguf *g = okv_gguf_open(argv[1], &err);
    okv_tokenizer *tok = g ? okv_tokenizer_from_gguf(g, &err) : NULL;
    if (!tok) {
        fprintf(stderr, "clash: %s\n", err.message);
        return 1;
    }
    const char *text = "Hello world";
    int32_t ids[16];
    size_t n = 0;
    if (okv_tokenizer_encode(tok, text, strlen(text), 0, ids, 16, &n, &err) != OKV_OK) {
        fprintf(stderr, "clash: %s\n", err.message);
        return 1;
    }
    char back[64] = "";
    for (size_t i = 0; i < n; i++) {
        char piece[32];
        size_t k = 0;
        if (okv_tokenizer_token_to_piece(tok, ids[i], 0, piece, sizeof piece, &k, &err) == OKV_OK)
            strncat(back, piece, k < sizeof back - strlen(back) - 1 ? k : sizeof back - strlen(back) - 1);
    }
    printf("clash: '%s' is %zu tokens, back '%s'; the program's own functions were called %d times\n", text, n, back,
           calls);
    okv_tokenizer_free(tok);
    okv_gguf_close(g);
    return strcmp(back, text) == 0 && calls == 0 ? 0 : 1;
}
