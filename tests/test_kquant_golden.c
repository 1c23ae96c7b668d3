/* The legacy and K-quant formats end to end: tiny-llama256 quantized by
 * llama.cpp's llama-quantize into each standard mix (Q4_K_M keeps output and
 * some attn_v/ffn_down in Q6_K, Q2_K keeps ffn_down in Q3_K, the legacy
 * types keep output in Q6_K, ...), 121 tokens in chunks of 16 with f32 K/V,
 * against llama.cpp's logits for the same files (../shared/README.md).
 *
 * Tolerance: 0.05 absolute.  llama.cpp itself, run on the same weights
 * dequantized to F32, lands 0.015-0.021 (max |diff|) from these goldens,
 * since its quantized products round the activations to 8 bits (Q8_K, Q8_0,
 * Q8_1) and ours do too, by the same rules, so a correct engine is within
 * that band.  Misreading a format moves logits like quantization itself
 * does, and the quantized files are 0.05 (Q6_K) to 0.71 (Q2_K) from their F32
 * source: 0.05 separates the two bands.  The logits are small (max |logit|
 * ~1.2), so the bound is absolute.  Rows whose two best reference logits are
 * more than the tolerance apart are decisive: there our argmax must agree.
 *
 * Every model runs on the scalar kernels and on each SIMD ISA this
 * processor has (the model option "isa"); in the sanitizer build (unoptimized,
 * where the four ISAs took over three minutes) on the scalar and the best
 * one only, the two whose code differs most. */
#include "check.h"
#include "gguf_copy.h"
#include "golden.h"
#include "golden_run.h"
#include "kernels/cpu.h"

static const double TOL = 0.05;

static void kq_case(const char *model, okv_isa isa) {
    char path[1024], json_path[1024], f32_path[1024];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, model);
    snprintf(json_path, sizeof json_path, "%s/golden/%s.seq121.seed42.chunk16.kvf32_faoff.json", shared, model);
    snprintf(f32_path, sizeof f32_path, "%s/golden/%s.seq121.seed42.chunk16.kvf32_faoff.f32", shared, model);
    char *json = golden_read(json_path, NULL);
    size_t ref_bytes = 0;
    float *ref = (float *)golden_read(f32_path, &ref_bytes);
    int tokens[200];
    const int n = json ? golden_ints(json, "tokens", tokens, 200) : -1;
    okv_error err;
    const char *opts[] = {"isa", okv_isa_name(isa), NULL};
    okv_model *m = okv_model_load(path, opts, &err);
    CHECK(json && ref && n == 121, "golden %s: n = %d", json_path, n);
    CHECK(m != NULL, "load %s: %s", path, m ? "" : err.message);
    if (m && json && ref && n == 121) {
        const int V = okv_model_n_vocab(m);
        CHECK(ref_bytes == sizeof(float) * 121 * (size_t)V, "golden size %zu", ref_bytes);
        float *ours = ref_bytes == sizeof(float) * 121 * (size_t)V ? eval_all(m, tokens, n, 16, "f32", 2) : NULL;
        if (ours) {
            golden_cmp c = golden_compare(ours, ref, n, V);
            int decisive = 0, disagree = 0;
            for (int r = 0; r < n; r++) {
                const float *a = ours + (size_t)r * V, *b = ref + (size_t)r * V;
                int ia = 0, ib = 0;
                for (int j = 1; j < V; j++) {
                    if (a[j] > a[ia]) ia = j;
                    if (b[j] > b[ib]) ib = j;
                }
                float second = -INFINITY;
                for (int j = 0; j < V; j++)
                    if (j != ib && b[j] > second) second = b[j];
                if (b[ib] - second > TOL) {
                    decisive++;
                    disagree += ia != ib;
                }
            }
            printf("%-22s %-10s max |diff| %.4f (max |logit| %.3g), argmax agrees on %d/%d decisive rows\n",
                   model, okv_isa_name(isa), c.max_diff, c.max_abs, decisive - disagree, decisive);
            CHECK(c.max_diff < TOL, "%s on %s: max |diff| %g >= %g", model, okv_isa_name(isa), c.max_diff, TOL);
            CHECK(disagree == 0, "%s on %s: argmax differs on %d decisive rows", model, okv_isa_name(isa), disagree);
            free(ours);
        }
    }
    okv_model_free(m);
    free(json);
    free(ref);
}

/* A file with a type offkv cannot run (here one matrix turned into
 * IQ2_XXS, zero bytes of the right size) is refused, naming the tensor and
 * its type; the same file with the tensor as it was loads. */
static void unsupported_case(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-llama256-q4_k_m.gguf", shared);
    okv_error err;
    okv_gguf *g = okv_gguf_open(path, &err);
    CHECK(g != NULL, "open %s", path);
    if (!g) return;
    const char *victim = "blk.1.ffn_down.weight";
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    int ok = w && copy_metadata(g, w);
    void *zeros = NULL;
    for (int64_t i = 0; ok && i < okv_gguf_n_tensors(g); i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        if (strcmp(t->name, victim) == 0) {
            const size_t bytes = okv_ggml_row_size(OKV_GGML_IQ2_XXS, t->ne[0]) * (size_t)t->ne[1];
            zeros = calloc(1, bytes);
            ok = !okv_gguf_writer_add_tensor(w, t->name, OKV_GGML_IQ2_XXS, t->n_dims, t->ne, zeros, &err);
        } else {
            ok = !okv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, &err);
        }
    }
    const char *out = "test_kquant_golden.iq2.tmp.gguf";
    ok = ok && !okv_gguf_writer_write(w, out, &err);
    CHECK(ok, "write %s: %s", out, err.message);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    free(zeros);
    okv_model *m = okv_model_load(out, NULL, &err);
    CHECK(!m && err.status == OKV_ERR_UNSUPPORTED && strstr(err.message, victim) && strstr(err.message, "iq2_xxs"),
          "IQ2_XXS matrix: %s", m ? "loaded" : err.message);
    if (!m) printf("refused as expected: %s\n", err.message);
    okv_model_free(m);
    remove(out);
}

int main(void) {
    shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const char *const models[] = {"tiny-llama256-f32",    "tiny-llama256-q4_k_m", "tiny-llama256-q5_k_m",
                                         "tiny-llama256-q6_k",   "tiny-llama256-q3_k_m", "tiny-llama256-q2_k",
                                         "tiny-llama256-q4_1",   "tiny-llama256-q5_0",   "tiny-llama256-q5_1"};
#if defined(__SANITIZE_ADDRESS__)
    const int all_isas = 0;
#else
    const int all_isas = 1;
#endif
    /* Under an emulator (make test-arm sets OKV_TEST_EMULATED) only the best
     * ISA runs, and make test-arm caps it at each level in turn (OKV_ISA):
     * the scalar kernels' goldens run natively, and test_x16 / test_matmul
     * check every level against the scalar bits. */
    const int emulated = getenv("OKV_TEST_EMULATED") != NULL;
    for (int isa = 0; isa < OKV_ISA_COUNT; isa++) {
        if (emulated && isa != (int)okv_cpu_best_isa()) {
            printf("%s: skipped under emulation (the best ISA runs: OKV_ISA)\n", okv_isa_name((okv_isa)isa));
            continue;
        }
        if (!all_isas && isa != OKV_ISA_SCALAR && isa != (int)okv_cpu_best_isa()) {
            printf("%s: skipped in the sanitizer build (scalar and the best ISA run)\n", okv_isa_name((okv_isa)isa));
            continue;
        }
        if (!okv_cpu_has_isa((okv_isa)isa)) {
            printf("%s: not on this processor, skipped\n", okv_isa_name((okv_isa)isa));
            continue;
        }
        for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) kq_case(models[i], (okv_isa)isa);
    }
    unsupported_case();
    return check_done();
}
