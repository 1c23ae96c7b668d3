/* Fuzz: okv_context_eval with bad positions and tokens mixed into a valid
 * stream, on every shared model.  The rule: bad input (a bad position, a
 * token outside the vocabulary, a NULL, n out of range) is an error code and
 * a message and leaves state unchanged.  Checked by a twin: a reference
 * context gets only the calls the tested one accepted, in the same order;
 * after every accepted call the two give bit-identical logits and the same
 * length.  A refused call that had touched the cache would show up as a
 * difference later.  Fixed seeds; OKV_FUZZ_ITERS overrides the steps. */
#include <limits.h>
#include <stdint.h>

#include "check.h"
#include "offkv/offkv.h"

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

enum { CAP = 48, MW = 8 };

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) { printf("skipped: ../shared not found\n"); return CHECK_SKIP; }
    static const char *const models[] = {"stories260K", "tiny-llama", "tiny-gemma3", "tiny-gemma3-allswa",
                                         "tiny-muse-glimmer"};
    size_t steps = 120;
    if (getenv("OKV_FUZZ_ITERS")) steps = (size_t)strtoull(getenv("OKV_FUZZ_ITERS"), NULL, 10);
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s.gguf", shared, models[mi]);
        okv_error err;
        okv_model *m = okv_model_load(path, NULL, &err);
        CHECK(m != NULL, "%s: %s", path, err.message);
        if (!m) continue;
        const char *opts[] = {"capacity", "48", "max_write", "8", "kv_type", "f32", NULL};
        okv_context *t = okv_context_create(m, opts, NULL, &err), *r = okv_context_create(m, opts, NULL, &err);
        CHECK(t && r, "%s: context: %s", models[mi], err.message);
        if (!t || !r) { okv_context_free(t); okv_context_free(r); okv_model_free(m); continue; }
        okv_cache *tc = okv_context_cache(t), *rc = okv_context_cache(r);
        const int32_t nv = okv_model_n_vocab(m);
        float *lt = malloc(sizeof(float) * MW * (size_t)nv), *lr = malloc(sizeof(float) * MW * (size_t)nv);
        int accepted = 0, refused = 0, diffs = 0;
        rng_state = 4242 + mi;
        for (size_t it = 0; it < steps; it++) {
            const int32_t len = okv_cache_length(tc);
            int32_t tok[MW + 2], pos[MW + 2];
            int32_t n = 1 + (int32_t)(rnd() % MW), start = len;
            int kind = (int)(rnd() % 10);
            bool must_fail = false;
            if (len >= CAP - 1 && kind < 8) {
                CHECK(okv_cache_clear(tc, &err) == OKV_OK && okv_cache_clear(rc, &err) == OKV_OK, "clear");
                continue;
            }
            if (kind == 7 && len > 0) start = len - 1 - (int32_t)(rnd() % (uint64_t)len); /* a rewind: may be refused */
            if (start + n > CAP) n = CAP - start;
            if (n < 1) n = 1;
            for (int32_t i = 0; i < MW + 2; i++) {
                tok[i] = (int32_t)(rnd() % (uint64_t)nv);
                pos[i] = start + i;
            }
            int32_t *tp = tok, *pp = pos;
            if (kind >= 8) { /* certainly bad */
                must_fail = true;
                switch (rnd() % 11) {
                case 0: pos[0] = -1 - (int32_t)(rnd() % 5); for (int32_t i = 1; i < n; i++) pos[i] = pos[0] + i; break;
                case 1: if (n < 2) n = 2; pos[n - 1] += 1 + (int32_t)(rnd() % 3); break;     /* a gap */
                case 2: for (int32_t i = 0; i < n; i++) pos[i] = len + 1 + (int32_t)(rnd() % 4) + i; break; /* past the length */
                case 3: for (int32_t i = 0; i < n; i++) pos[i] = CAP - n + 1 + i; break; /* past the capacity */
                case 4: tok[rnd() % (uint64_t)n] = nv; break;
                case 5: tok[rnd() % (uint64_t)n] = -1; break;
                case 6: tok[rnd() % (uint64_t)n] = INT32_MAX; break;
                case 7: n = 0; break;
                case 8: n = MW + 1; if (start + n > CAP) start = CAP - n; for (int32_t i = 0; i < n; i++) pos[i] = start + i; break;
                case 9: pos[0] = INT32_MAX; n = 1; break;
                default: tp = NULL; break;
                }
            }
            memset(&err, 0, sizeof err);
            okv_status st = okv_context_eval(t, tp, pp, n, lt, &err);
            if (st != OKV_OK) {
                refused++;
                CHECK(err.message[0] != '\0', "%s step %zu: refused without a message", models[mi], it);
                CHECK(okv_cache_length(tc) == len, "%s step %zu: a refused eval (%s) moved the length %d -> %d",
                      models[mi], it, err.message, (int)len, (int)okv_cache_length(tc));
                CHECK(must_fail || st == OKV_ERR_POSITION, "%s step %zu: a plausible eval refused: %s %s", models[mi],
                      it, okv_status_name(st), err.message);
                continue;
            }
            CHECK(!must_fail, "%s step %zu: a bad eval (kind %d) was accepted", models[mi], it, kind);
            if (must_fail) break;
            accepted++;
            okv_status sr = okv_context_eval(r, tp, pp, n, lr, &err);
            CHECK(sr == OKV_OK, "%s step %zu: the reference refused: %s", models[mi], it, err.message);
            if (sr != OKV_OK) break;
            if (memcmp(lt, lr, sizeof(float) * (size_t)n * (size_t)nv) != 0 || okv_cache_length(tc) != okv_cache_length(rc))
                diffs++;
        }
        CHECK(diffs == 0, "%s: %d accepted evals differ from the reference", models[mi], diffs);
        CHECK(accepted > 20 && refused > 5, "%s: %d accepted, %d refused: the mix is off", models[mi], accepted, refused);
        free(lt);
        free(lr);
        okv_context_free(t);
        okv_context_free(r);
        okv_model_free(m);
    }
    return check_done();
}
