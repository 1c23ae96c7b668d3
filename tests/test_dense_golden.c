/* The dense families of 2026 against llama.cpp's logits (../shared/golden):
 * qwen2 (Q/K/V biases, NEOX RoPE, tied output), qwen3 (per-head Q/K norms,
 * head size 32 from key_length), smollm3 (no RoPE on layers 3 and 7),
 * gemma2 (attention and final soft caps, sliding even layers, pre and post
 * norms, GELU) and phi3 (fused QKV and fused gate/up).  121 tokens in
 * chunks of 16 and all at once, with f32 and f16 K/V, each compared with
 * llama.cpp's chunk-16 run (within llama.cpp the two chunkings are bitwise
 * identical with an F32 cache, ../shared/README.md).
 *
 * Tolerances, those of the other golden tests (golden_run.h): f32 K/V
 * 1e-3 x max(1, max |logit|).  An independent float64 forward agrees with
 * llama's goldens to ~1e-5 and gemma3's to ~3e-4, gemma's f16 GELU table
 * turning last-bit differences into steps of ~1e-3 relative (gemma2 lands
 * at 1.5e-3 of 16.8).  Every mistake tried on purpose failed it: a bias
 * dropped, adjacent-pair RoPE, the Q/K norms skipped, the NoPE layers
 * rotated, the fused halves swapped moved logits by 0.6 to 10; gemma2's
 * attention soft cap skipped moved them by 0.032, twice its bound, since
 * tanh is near linear at these small scores.  f16 K/V: 0.1, since llama.cpp's own f16 cache
 * moves these models' logits by 2e-3 to 3e-2 and its flash-attention path
 * rounds differently from ours.  Rows whose two best reference logits are
 * further apart than twice the worst difference must agree on the argmax.
 *
 * Every ISA: the test runs itself once per instruction set the processor
 * has, with OKV_ISA capping it (matrix products, attention and f16
 * conversions all follow the cap); in the sanitizer build, scalar and the
 * best one only. */
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gguf_copy.h"
#include "golden.h"
#include "golden_run.h"
#include "kernels/cpu.h"

static void dense_case(const char *model, int chunk, const char *kv) {
    char path[1024], json_path[1024], f32_path[1024];
    const char *kvname = strcmp(kv, "f32") == 0 ? "kvf32_faoff" : "kvf16_faauto";
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, model);
    snprintf(json_path, sizeof json_path, "%s/golden/%s.seq121.seed42.chunk16.%s.json", shared, model, kvname);
    snprintf(f32_path, sizeof f32_path, "%s/golden/%s.seq121.seed42.chunk16.%s.f32", shared, model, kvname);
    char *json = golden_read(json_path, NULL);
    size_t ref_bytes = 0;
    float *ref = (float *)golden_read(f32_path, &ref_bytes);
    int tokens[200];
    const int n = json ? golden_ints(json, "tokens", tokens, 200) : -1;
    CHECK(json && ref && n == 121, "golden %s: n=%d", json_path, n);
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "load %s: %s", path, err.message);
    if (m && json && ref && n == 121) {
        const int V = okv_model_n_vocab(m);
        CHECK(ref_bytes == sizeof(float) * 121 * (size_t)V, "%s: golden size %zu", model, ref_bytes);
        float *ours = ref_bytes == sizeof(float) * 121 * (size_t)V ? eval_all(m, tokens, n, chunk, kv, 2) : NULL;
        if (ours) {
            golden_cmp c = golden_compare(ours, ref, n, V);
            const double tol = strcmp(kv, "f32") == 0 ? 1e-3 * (c.max_abs > 1 ? c.max_abs : 1) : 0.1;
            printf("%-13s %-10s chunk %3d kv %s: max |diff| %.3g (max |logit| %.3g, tolerance %.3g), argmax "
                   "mismatches %d\n",
                   model, okv_isa_name(okv_cpu_best_isa()), chunk, kv, c.max_diff, c.max_abs, tol,
                   c.argmax_mismatch);
            CHECK(c.max_diff <= tol, "%s chunk %d kv %s: max diff %g > %g", model, chunk, kv, c.max_diff, tol);
            CHECK(c.argmax_mismatch == 0, "%s chunk %d kv %s: %d argmax mismatches", model, chunk, kv,
                  c.argmax_mismatch);
            free(ours);
        }
    }
    okv_model_free(m);
    free(json);
    free(ref);
}

/* A copy of model without tensor drop: loading it is refused naming it. */
static void refused_without(const char *model, const char *drop) {
    char path[1024];
    const char *out = "test_dense_golden.tmp.gguf";
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, model);
    okv_error err = {0};
    okv_gguf *g = okv_gguf_open(path, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    int ok = g && w && copy_metadata(g, w);
    for (int64_t i = 0; ok && i < okv_gguf_n_tensors(g); i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        if (strcmp(t->name, drop) == 0) continue;
        ok = !okv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, &err);
    }
    ok = ok && !okv_gguf_writer_write(w, out, &err);
    CHECK(ok, "writing %s without %s: %s", model, drop, err.message);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    okv_model *m = okv_model_load(out, NULL, &err);
    CHECK(m == NULL && err.status == OKV_ERR_FORMAT && strstr(err.message, drop), "%s without %s: %s", model, drop,
          m ? "loaded" : err.message);
    if (!m) printf("%s without %s: refused: %s\n", model, drop, err.message);
    okv_model_free(m);
    remove(out);
}

static int run_cases(void) {
    static const char *const models[] = {"tiny-qwen2", "tiny-qwen3", "tiny-smollm3", "tiny-gemma2", "tiny-phi3"};
    const char *only = getenv("OKV_DENSE_MODEL"); /* one model, when debugging */
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        if (only && strcmp(only, models[i]) != 0) continue;
        dense_case(models[i], 16, "f32");
        dense_case(models[i], 121, "f32");
        dense_case(models[i], 16, "f16");
        dense_case(models[i], 121, "f16");
    }
    if (!only) {
        refused_without("tiny-qwen2", "blk.1.attn_k.bias");
        refused_without("tiny-qwen3", "blk.2.attn_q_norm.weight");
        refused_without("tiny-gemma2", "blk.0.post_ffw_norm.weight");
        refused_without("tiny-phi3", "blk.3.ffn_up.weight");
    }
    return check_done();
}

int main(int argc, char **argv) {
    (void)argc;
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    if (getenv("OKV_ISA")) return run_cases(); /* a child, or a run pinned by hand */
    /* Under an emulator (make test-arm sets OKV_TEST_EMULATED) a child cannot
     * exec /proc/self/exe (no binfmt handler for the guest binary): the best
     * ISA runs here, and make test-arm caps it at each level (OKV_ISA). */
    if (getenv("OKV_TEST_EMULATED")) return run_cases();
#if defined(__SANITIZE_ADDRESS__)
    const int all_isas = 0;
#else
    const int all_isas = 1;
#endif
    int failed = 0;
    for (int isa = 0; isa < OKV_ISA_COUNT; isa++) {
        if (!okv_cpu_has_isa((okv_isa)isa)) {
            printf("%s: not on this processor, skipped\n", okv_isa_name((okv_isa)isa));
            continue;
        }
        if (!all_isas && isa != OKV_ISA_SCALAR && isa != (int)okv_cpu_best_isa()) {
            printf("%s: skipped in the sanitizer build (scalar and the best ISA run)\n", okv_isa_name((okv_isa)isa));
            continue;
        }
        fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            setenv("OKV_ISA", okv_isa_name((okv_isa)isa), 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int status = 0;
        const int ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        CHECK(ok, "the run capped at %s failed (status %d)", okv_isa_name((okv_isa)isa), status);
        failed += !ok;
    }
    (void)failed;
    return check_done();
}
