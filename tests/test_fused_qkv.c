/* Q, K and V may come as one fused attn_qkv tensor (rows Q, then K, then V).
 * This test rewrites a real model with its attention weights fused and
 * checks the rewritten model gives the same logits, for llama, gemma3 and
 * muse-glimmer. */
#include "check.h"
#include "golden.h"
#include "offkv/offkv.h"
#include "gguf_copy.h"

/* Writes a copy of src with each layer's attn_q/k/v fused into attn_qkv. */
static int write_fused(const char *src, const char *dst) {
    okv_error err;
    okv_gguf *g = okv_gguf_open(src, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    int ok = g && w && copy_metadata(g, w);
    char *fused[64] = {0};
    int n_fused = 0;
    for (int64_t i = 0; ok && i < okv_gguf_n_tensors(g); i++) {
        const okv_gguf_tensor *t = okv_gguf_tensor_at(g, i);
        int layer = -1;
        char what[32] = "", canon[96] = "";
        if (sscanf(t->name, "blk.%d.attn_%31[a-z]", &layer, what) == 2)
            snprintf(canon, sizeof canon, "blk.%d.attn_%s.weight", layer, what);
        const bool is_attn = strcmp(canon, t->name) == 0;
        if (is_attn && (!strcmp(what, "k") || !strcmp(what, "v"))) continue; /* folded into attn_qkv below */
        if (is_attn && !strcmp(what, "q")) {
            char name[96];
            const okv_gguf_tensor *parts[3] = {t};
            snprintf(name, sizeof name, "blk.%d.attn_k.weight", layer);
            parts[1] = okv_gguf_tensor_at(g, okv_gguf_find_tensor(g, name));
            snprintf(name, sizeof name, "blk.%d.attn_v.weight", layer);
            parts[2] = okv_gguf_tensor_at(g, okv_gguf_find_tensor(g, name));
            size_t bytes = parts[0]->n_bytes + parts[1]->n_bytes + parts[2]->n_bytes;
            char *data = fused[n_fused++] = malloc(bytes), *p = data;
            for (int j = 0; j < 3; j++) { memcpy(p, parts[j]->data, parts[j]->n_bytes); p += parts[j]->n_bytes; }
            int64_t ne[2] = {t->ne[0], parts[0]->ne[1] + parts[1]->ne[1] + parts[2]->ne[1]};
            snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", layer);
            ok = !okv_gguf_writer_add_tensor(w, name, t->type, 2, ne, data, &err);
            continue;
        }
        ok = !okv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, &err);
    }
    ok = ok && !okv_gguf_writer_write(w, dst, &err);
    if (!ok) fprintf(stderr, "write_fused: %s\n", err.message);
    for (int i = 0; i < n_fused; i++) free(fused[i]);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    return ok;
}

static float *logits_of(const char *path, int n) {
    okv_error err;
    okv_model *m = okv_model_load(path, NULL, &err);
    if (!m) { CHECK(0, "load %s: %s", path, err.message); return NULL; }
    const char *opts[] = {"max_write", "8", "kv_type", "f32", "capacity", "64", NULL};
    okv_context *ctx = okv_context_create(m, opts, NULL, &err);
    const int V = okv_model_n_vocab(m);
    float *out = malloc(sizeof(float) * (size_t)n * V);
    int32_t toks[8], pos[8];
    for (int s = 0; s < n; s += 8) {
        for (int i = 0; i < 8; i++) { toks[i] = 1 + (s + i) * 7 % 500; pos[i] = s + i; }
        okv_context_eval(ctx, toks, pos, 8, out + (size_t)s * V, &err);
    }
    okv_context_free(ctx);
    okv_model_free(m);
    return out;
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    const char *models[] = {"tiny-llama", "tiny-gemma3", "tiny-muse-glimmer"};
    for (int i = 0; i < 3; i++) {
        char src[1024];
        snprintf(src, sizeof src, "%s/models/%s.gguf", shared, models[i]);
        const char *dst = "test_fused_qkv.tmp.gguf";
        if (!write_fused(src, dst)) { CHECK(0, "%s: could not write the fused copy", models[i]); continue; }
        okv_error err;
        okv_gguf *check = okv_gguf_open(dst, &err);
        CHECK(check && okv_gguf_find_tensor(check, "blk.0.attn_qkv.weight") >= 0 &&
                  okv_gguf_find_tensor(check, "blk.0.attn_q.weight") < 0, "%s: fused copy lacks attn_qkv", models[i]);
        okv_gguf_close(check);
        float *a = logits_of(src, 24), *b = logits_of(dst, 24);
        double d = 0;
        for (int j = 0; a && b && j < 24 * 512; j++) d = fmax(d, fabs(a[j] - b[j]));
        CHECK(a && b && d <= 1e-6, "%s: fused and separate Q/K/V differ by %g", models[i], d);
        printf("%-18s fused attn_qkv vs separate: max |diff| %g\n", models[i], d);
        free(a);
        free(b);
        remove(dst);
    }
    return check_done();
}
