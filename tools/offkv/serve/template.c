/* Chat templates.  offkv does not run Jinja: like llama.cpp's
 * llm_chat_detect_template it recognises the families it serves by the
 * markers their templates contain, and renders each family's format in C
 * (the formats are llama.cpp's llm_chat_apply_template, so the same model
 * gets the same prompt text from both). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

static const struct {
    const char *name;
    srv_template t;
} names[] = {
    {"chatml", SRV_TMPL_CHATML},
    {"llama2", SRV_TMPL_LLAMA2},
    {"llama2-sys", SRV_TMPL_LLAMA2_SYS},
    {"llama2-sys-bos", SRV_TMPL_LLAMA2_SYS_BOS},
    {"llama2-sys-strip", SRV_TMPL_LLAMA2_SYS_STRIP},
    {"mistral-v1", SRV_TMPL_MISTRAL_V1},
    {"mistral-v3", SRV_TMPL_MISTRAL_V3},
    {"mistral-v3-tekken", SRV_TMPL_MISTRAL_V3_TEKKEN},
    {"mistral-v7", SRV_TMPL_MISTRAL_V7},
    {"llama3", SRV_TMPL_LLAMA3},
    {"gemma", SRV_TMPL_GEMMA},
};

const char *srv_template_names(void) {
    return "chatml, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v1, mistral-v3, "
           "mistral-v3-tekken, mistral-v7, llama3, gemma";
}

const char *srv_template_name(srv_template t) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].t == t) return names[i].name;
    return "unknown";
}

static bool has(const char *text, const char *marker) { return strstr(text, marker) != NULL; }

srv_template srv_template_detect(const char *text) {
    if (!text) return SRV_TMPL_UNKNOWN;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(text, names[i].name) == 0) return names[i].t;
    /* The order is llama.cpp's: a template may carry several families'
     * markers (ChatML text inside a Mistral template, say), and the first
     * test that matches decides. */
    if (has(text, "<|im_start|>")) {
        /* Phi-4 (<|im_sep|>) and SmolVLM reuse ChatML's markers with another format. */
        if (has(text, "<|im_sep|>") || has(text, "<end_of_utterance>")) return SRV_TMPL_UNKNOWN;
        return SRV_TMPL_CHATML;
    }
    if (strncmp(text, "mistral", 7) == 0 || has(text, "[INST]")) {
        if (has(text, "[SYSTEM_PROMPT]")) return SRV_TMPL_MISTRAL_V7;
        if (has(text, "' [INST] ' + system_message") || has(text, "[AVAILABLE_TOOLS]")) {
            if (has(text, " [INST]")) return SRV_TMPL_MISTRAL_V1;
            if (has(text, "\"[INST]\"")) return SRV_TMPL_MISTRAL_V3_TEKKEN;
            return SRV_TMPL_MISTRAL_V3;
        }
        if (has(text, "content.strip()")) return SRV_TMPL_LLAMA2_SYS_STRIP;
        if (has(text, "bos_token + '[INST]")) return SRV_TMPL_LLAMA2_SYS_BOS;
        if (has(text, "<<SYS>>")) return SRV_TMPL_LLAMA2_SYS;
        return SRV_TMPL_LLAMA2;
    }
    /* Families llama.cpp tests before Gemma's and Llama 3's: their markers
     * must not be mistaken for ours. */
    if (has(text, "<|assistant|>") || has(text, "[gMASK]") || has(text, "bos_token + message['role']"))
        return SRV_TMPL_UNKNOWN;
    if (has(text, "<start_of_turn>")) return SRV_TMPL_GEMMA;
    if (has(text, "<|start_header_id|>") && has(text, "<|end_header_id|>")) return SRV_TMPL_LLAMA3;
    return SRV_TMPL_UNKNOWN;
}

/* A growing string; on allocation failure it stays failed and apply
 * returns NULL. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool failed;
} sbuf;

static void put_n(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void put(sbuf *b, const char *s) { put_n(b, s, strlen(s)); }

/* Puts s without leading and trailing white space (as llama.cpp's trim). */
static void put_trim(sbuf *b, const char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && isspace((unsigned char)s[n - 1])) n--;
    put_n(b, s, n);
}

static bool is(const char *role, const char *want) { return strcmp(role, want) == 0; }

char *srv_template_apply(srv_template t, const srv_message *m, int n) {
    sbuf b = {0};
    put(&b, "");
    switch (t) {
    case SRV_TMPL_UNKNOWN:
    case SRV_TMPL_CHATML:
        for (int i = 0; i < n; i++) {
            put(&b, "<|im_start|>");
            put(&b, m[i].role);
            put(&b, "\n");
            put(&b, m[i].content);
            put(&b, "<|im_end|>\n");
        }
        put(&b, "<|im_start|>assistant\n");
        break;
    case SRV_TMPL_MISTRAL_V7:
        for (int i = 0; i < n; i++) {
            if (is(m[i].role, "system")) put(&b, "[SYSTEM_PROMPT] "), put(&b, m[i].content), put(&b, "[/SYSTEM_PROMPT]");
            else if (is(m[i].role, "user")) put(&b, "[INST] "), put(&b, m[i].content), put(&b, "[/INST]");
            else put(&b, " "), put(&b, m[i].content), put(&b, "</s>");
        }
        break;
    case SRV_TMPL_MISTRAL_V1:
    case SRV_TMPL_MISTRAL_V3:
    case SRV_TMPL_MISTRAL_V3_TEKKEN: {
        const char *lead = t == SRV_TMPL_MISTRAL_V1 ? " " : "";
        const char *trail = t == SRV_TMPL_MISTRAL_V3_TEKKEN ? "" : " ";
        bool inside = false;
        for (int i = 0; i < n; i++) {
            if (!inside) {
                put(&b, lead), put(&b, "[INST]"), put(&b, trail);
                inside = true;
            }
            if (is(m[i].role, "system")) put(&b, m[i].content), put(&b, "\n\n");
            else if (is(m[i].role, "user")) put(&b, m[i].content), put(&b, lead), put(&b, "[/INST]");
            else {
                put(&b, trail);
                if (t == SRV_TMPL_MISTRAL_V3) put_trim(&b, m[i].content);
                else put(&b, m[i].content);
                put(&b, "</s>");
                inside = false;
            }
        }
        break;
    }
    case SRV_TMPL_LLAMA2:
    case SRV_TMPL_LLAMA2_SYS:
    case SRV_TMPL_LLAMA2_SYS_BOS:
    case SRV_TMPL_LLAMA2_SYS_STRIP: {
        const bool sys = t != SRV_TMPL_LLAMA2, bos_inside = t == SRV_TMPL_LLAMA2_SYS_BOS,
                   strip = t == SRV_TMPL_LLAMA2_SYS_STRIP;
        bool inside = true; /* the tokenizer adds the first BOS */
        put(&b, "[INST] ");
        for (int i = 0; i < n; i++) {
            if (!inside) {
                inside = true;
                put(&b, bos_inside ? "<s>[INST] " : "[INST] ");
            }
            const char *role = m[i].role;
            if (is(role, "system")) {
                if (sys) put(&b, "<<SYS>>\n");
                if (strip) put_trim(&b, m[i].content);
                else put(&b, m[i].content);
                put(&b, sys ? "\n<</SYS>>\n\n" : "\n");
            } else if (is(role, "user")) {
                if (strip) put_trim(&b, m[i].content);
                else put(&b, m[i].content);
                put(&b, " [/INST]");
            } else {
                if (strip) put_trim(&b, m[i].content);
                else put(&b, m[i].content);
                put(&b, "</s>");
                inside = false;
            }
        }
        break;
    }
    case SRV_TMPL_LLAMA3:
        for (int i = 0; i < n; i++) {
            put(&b, "<|start_header_id|>");
            put(&b, m[i].role);
            put(&b, "<|end_header_id|>\n\n");
            put_trim(&b, m[i].content);
            put(&b, "<|eot_id|>");
        }
        put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case SRV_TMPL_GEMMA: {
        /* Gemma has no system turn: llama.cpp prepends the system text to
         * the next user turn, and so do we. */
        sbuf sys = {0};
        put(&sys, "");
        for (int i = 0; i < n; i++) {
            if (is(m[i].role, "system")) {
                put_trim(&sys, m[i].content);
                continue;
            }
            const bool model = is(m[i].role, "assistant");
            put(&b, "<start_of_turn>");
            put(&b, model ? "model" : m[i].role);
            put(&b, "\n");
            if (sys.n && !model) {
                put(&b, sys.p);
                put(&b, "\n\n");
                sys.n = 0;
            }
            put_trim(&b, m[i].content);
            put(&b, "<end_of_turn>\n");
        }
        if (sys.failed) b.failed = true;
        free(sys.p);
        put(&b, "<start_of_turn>model\n");
        break;
    }
    }
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
