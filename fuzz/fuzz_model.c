/* libFuzzer target: okv_model_load over arbitrary file bytes, every
 * architecture (llama, gemma3, muse-glimmer: the seeds hold all three).
 *
 * The bytes are written to a memfd and loaded through /proc/self/fd, the
 * same path (open, fstat, mmap, validate) a file on disk takes.  A refused
 * file must come with a status and a message; a loaded one must describe
 * itself, make a small context and evaluate a few tokens without any
 * sanitizer complaint (the weights may be nonsense; the logits may be too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "offkv/offkv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fd = memfd_create("okv-fuzz-model", MFD_CLOEXEC);
    if (fd < 0) { perror("memfd_create"); abort(); }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

/* Keeps evaluation cheap: models whose weights exceed this only load. */
#define EVAL_MAX_WEIGHT_BYTES (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fd < 0) LLVMFuzzerInitialize(NULL, NULL);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m) {
        if (err.status == OKV_OK || err.message[0] == '\0') __builtin_trap();
        return 0;
    }
    const int32_t n_vocab = okv_model_n_vocab(m), n_layers = okv_model_n_layers(m);
    if (n_vocab < 1 || n_layers < 1 || !okv_model_describe(m) || !okv_model_arch(m)) __builtin_trap();
    for (int32_t l = 0; l < n_layers; l++) {
        okv_layer_geometry geo;
        if (!okv_model_layer_geometry(m, l, &geo)) __builtin_trap();
    }
    if (okv_model_weight_bytes(m) <= EVAL_MAX_WEIGHT_BYTES) {
        const char *opts[] = {"capacity", "8", "max_write", "4", "initial_capacity", "2", "kv_type", "f32", NULL};
        okv_context *ctx = okv_context_create(m, opts, NULL, &err);
        if (ctx) {
            float *logits = malloc(sizeof(float) * 4 * (size_t)n_vocab);
            int32_t tokens[4], pos[4];
            for (int i = 0; i < 4; i++) {
                tokens[i] = (int32_t)((size > (size_t)i ? data[size - 1 - i] : 1) % (uint32_t)n_vocab);
                pos[i] = i;
            }
            if (logits) {
                okv_context_eval(ctx, tokens, pos, 3, logits, &err);
                pos[0] = 3;
                okv_context_eval_last(ctx, tokens + 3, pos, 1, logits, &err);
            }
            free(logits);
            okv_context_free(ctx);
        } else if (err.message[0] == '\0') {
            __builtin_trap();
        }
    }
    okv_model_free(m);
    return 0;
}
