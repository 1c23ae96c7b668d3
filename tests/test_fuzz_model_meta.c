/* Fuzz: semantically absurd metadata that the GGUF reader accepts but a
 * model must refuse.  The rule: bad input (a wrong shape, a bad value) is an
 * error code and a message naming the problem; the library never crashes on
 * user input, and never silently runs a model its file describes wrongly.
 *
 * Each case is a copy of a shared model (tests/gguf_copy.h) with one key
 * replaced, written under build/, then loaded; when it loads, a context is
 * made and 3 tokens evaluated.  A case either must be refused (load or
 * context creation fails with a status and a message naming the key), or is
 * plausible and must run with finite logits. */
#include <math.h>

#include "fuzz_meta.h"

int main(void) {
    tmp = "test_fuzz_model_meta.tmp.gguf";
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    const double nan = NAN;
    static const meta_case fine[] = {
        /* plausible values: the model must run */
        {"tiny-llama", "tokenizer.ggml.bos_token_id", V_U32, 100000, 0, RUN, NULL},   /* kept default */
        {"tiny-llama", "tokenizer.ggml.eos_token_id", V_U32, 4294967295.0, 0, RUN, NULL},
        {"tiny-llama", "llama.context_length", V_U32, 4294967295.0, 0, RUN, NULL},
        {"tiny-llama", "llama.context_length", V_U32, 0, 0, RUN, NULL},
        {"tiny-llama", "llama.attention.sliding_window", V_U32, 1u << 30, 0, RUN, NULL},
        {"tiny-llama", "llama.attention.sliding_window", V_U32, 1, 0, RUN, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window", V_U32, 1u << 30, 0, RUN, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window_pattern", V_U32, 4294967295.0, 0, RUN, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window_pattern", V_U32, 1, 0, RUN, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window", V_U32, 1u << 30, 0, RUN, NULL},
    };
    static const meta_case bad[] = {
        {"tiny-llama", "llama.embedding_length", V_U32, 2147483647.0, 0, REFUSE, NULL},
        {"tiny-llama", "llama.embedding_length", V_U32, 0, 0, REFUSE, NULL},
        {"tiny-llama", "llama.embedding_length", V_U32, 128, 0, REFUSE, "token_embd"},
        {"tiny-llama", "llama.attention.head_count", V_U32, 0, 0, REFUSE, "heads"},
        {"tiny-llama", "llama.attention.head_count", V_U32, 4294967295.0, 0, REFUSE, NULL},
        {"tiny-llama", "llama.attention.head_count", V_U32S, 4, 3, REFUSE, NULL},
        {"tiny-llama", "llama.attention.head_count", V_I32S, -4, 4, REFUSE, NULL},
        {"tiny-llama", "llama.attention.head_count_kv", V_U32, 3, 0, REFUSE, "kv heads"},
        {"tiny-llama", "llama.attention.head_count_kv", V_U32, 0, 0, REFUSE, "kv heads"},
        {"tiny-llama", "llama.attention.head_count_kv", V_U32, 8, 0, REFUSE, "kv heads"},
        {"tiny-llama", "llama.attention.key_length", V_U32, 0, 0, REFUSE, "head dim"},
        {"tiny-llama", "llama.attention.key_length", V_U32, 513, 0, REFUSE, "head dim 513"},
        {"tiny-gemma3", "gemma3.attention.key_length", V_U32, 8, 0, REFUSE, "key_length"},
        {"tiny-gemma3", "gemma3.attention.value_length", V_U32, 32, 0, REFUSE, "value_length"},
        {"tiny-llama", "llama.block_count", V_U32, 5, 0, REFUSE, "blk.4"},
        {"tiny-llama", "llama.block_count", V_U32, 4096, 0, REFUSE, "blk.4"},
        {"tiny-llama", "llama.block_count", V_U32, 0, 0, REFUSE, NULL},
        {"tiny-llama", "llama.block_count", V_U32, 4294967295.0, 0, REFUSE, NULL},
        {"tiny-llama", "llama.feed_forward_length", V_U32, 1u << 22, 0, REFUSE, "ffn"},
        {"tiny-llama", "llama.feed_forward_length", V_U32, 4294967295.0, 0, REFUSE, NULL},
        {"tiny-llama", "llama.feed_forward_length", V_U32, 0, 0, REFUSE, NULL},
        {"tiny-llama", "llama.attention.layer_norm_rms_epsilon", V_F32, nan, 0, REFUSE, NULL},
        {"tiny-llama", "llama.attention.layer_norm_rms_epsilon", V_F32, INFINITY, 0, REFUSE, NULL},
        {"tiny-llama", "llama.attention.layer_norm_rms_epsilon", V_STR, 0, 0, REFUSE, NULL},
        {"tiny-llama", "llama.rope.freq_base", V_F32, nan, 0, REFUSE, NULL},
        {"tiny-llama", "llama.attention.sliding_window", V_U32, (1u << 30) + 1.0, 0, REFUSE, "sliding"},
        {"tiny-llama", "llama.attention.sliding_window", V_U32, 4294967295.0, 0, REFUSE, "sliding"},
        {"tiny-llama", "llama.attention.sliding_window", V_F32, 8, 0, REFUSE, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window", V_U32, (1u << 30) + 1.0, 0, REFUSE, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window_pattern", V_BOOLS, 0, 5, REFUSE, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window_pattern", V_BOOLS, 0, 7, REFUSE, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window_pattern", V_U32S, 1, 6, REFUSE, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window_pattern", V_STR, 0, 0, REFUSE, NULL},
        {"tiny-gemma3", "gemma3.attention.sliding_window_pattern", V_F32, 6, 0, REFUSE, NULL},
        {"tiny-gemma3", "gemma3.rope.freq_base_swa", V_F32, nan, 0, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window_pattern", V_BOOLS, 0, 9, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window_pattern", V_BOOLS, 0, 0, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window_pattern", V_I32S, 1, 8, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window_pattern", V_DROP, 0, 0, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window", V_DROP, 0, 0, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.attention.sliding_window", V_U32, 4294967295.0, 0, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.logit_scale", V_F32, nan, 0, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.logit_scale", V_DROP, 0, 0, REFUSE, NULL},
        {"tiny-muse-glimmer", "muse-glimmer.final_logit_softcapping", V_F32, INFINITY, 0, REFUSE, NULL},
        /* vocabulary arrays shorter or longer than token_embd has rows, or
         * than each other */
        {"tiny-llama", "tokenizer.ggml.tokens", V_VOCAB, 0, 500, REFUSE, "token_embd"},
        {"tiny-llama", "tokenizer.ggml.tokens", V_VOCAB, 0, 600, REFUSE, "token_embd"},
        {"tiny-llama", "tokenizer.ggml.tokens", V_VOCAB, 0, 1, REFUSE, "bos"},
        {"tiny-llama", "tokenizer.ggml.tokens", V_VOCAB, 1, 600, REFUSE, "scores"},
        {"stories260K", "tokenizer.ggml.tokens", V_VOCAB, 0, 511, REFUSE, "token_embd"},
        {"tiny-gemma3", "tokenizer.ggml.tokens", V_VOCAB, 0, 513, REFUSE, "token_embd"},
        {"tiny-muse-glimmer", "tokenizer.ggml.tokens", V_VOCAB, 0, 256, REFUSE, "token_embd"},
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) run_case(&fine[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) run_case(&bad[i]);
    remove(tmp);
    return check_done();
}
