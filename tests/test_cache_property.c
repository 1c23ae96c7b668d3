/* Thousands of random begin / attend / commit / abort / rewind / clear
 * sequences, each checked against a plain model of what the sequence should
 * hold: its length, its high water, what each ring can still rewind to, how
 * many rows each layer has, and every attention output. */
#include "check.h"
#include "seqref.h"

static int compare(const seqref *s, const seq_model *m, int iter) {
    int ok = okv_cache_length(s->cache) == m->length;
    for (int32_t l = 0; l < s->n_layers; l++) ok &= okv_cache_rows(s->cache, l) == m->rows[l];
    for (int32_t p = -1; p <= m->length + 2; p++)
        ok &= okv_cache_can_rewind(s->cache, p) == seq_model_can_rewind(s, m, p);
    CHECK(ok, "iteration %d: cache and model disagree (length %d vs %d)", iter,
          okv_cache_length(s->cache), m->length);
    return ok;
}

static void run(uint64_t seed, int iters) {
    okv_layer_geometry geo[3] = {{1, 4, 0, 0}, {2, 3, 3, 0}, {1, 5, 6, 0}};
    int32_t heads[3] = {2, 4, 1};
    okv_cache_config cfg = {.capacity = 48, .initial_capacity = (int32_t)(seed % 5), .max_write = 5,
                            .dtype = seed & 1 ? OKV_F16 : OKV_F32};
    seqref s;
    okv_error err;
    if (!seq_init(&s, geo, heads, 3, &cfg, seed & 2 ? OKV_F16 : OKV_F32, seed, &err)) {
        CHECK(0, "create: %s", err.message);
        return;
    }
    seq_model m = seq_model_new(&s);
    for (int it = 0; it < iters; it++) {
        const uint64_t r = seq_rand(&s) % 100;
        if (r < 6) {
            CHECK_STATUS(okv_cache_clear(s.cache, &err), OKV_OK, err);
            m.length = m.high_water = 0;
        } else if (r < 16) {
            int32_t pos = (int32_t)(seq_rand(&s) % (uint64_t)(m.length + 3)) - 1;
            bool want = seq_model_can_rewind(&s, &m, pos);
            okv_status rc = okv_cache_rewind(s.cache, pos, &err);
            CHECK(rc == (want ? OKV_OK : OKV_ERR_POSITION), "rewind %d: %s", pos, okv_status_name(rc));
            if (want) seq_model_rewind(&m, pos);
        } else {
            /* A step: usually at the length, sometimes a re-run or a bad one. */
            int32_t n = 1 + (int32_t)(seq_rand(&s) % 6);
            int32_t start = m.length;
            uint64_t kind = seq_rand(&s) % 10;
            if (kind < 2) start = m.length - (int32_t)(seq_rand(&s) % 8);
            else if (kind == 2) start = m.length + 1;
            if (start + n > cfg.capacity && kind >= 3) { start = 0; }
            int32_t pos[8];
            for (int32_t i = 0; i < n; i++) pos[i] = start + i;
            const bool ok = seq_model_step_ok(&s, &m, start, n);
            okv_step *st = okv_step_begin(s.cache, pos, n, NULL, &err);
            CHECK((st != NULL) == ok, "iteration %d: begin(%d, %d) %s, model says %d", it, start, n,
                  st ? "accepted" : err.message, ok);
            if (!st) {
                if (!compare(&s, &m, it)) break;
                continue;
            }
            seq_model_grow(&s, &m, start + n);
            const uint64_t end_kind = seq_rand(&s) % 10;
            /* end_kind 0: abort before writing; 1: abort after some layers;
             * 2: a bad call then abort; else attend all (random order) and commit. */
            int32_t order[3] = {0, 1, 2};
            for (int i = 2; i > 0; i--) {
                int j = (int)(seq_rand(&s) % (uint64_t)(i + 1));
                int32_t t = order[i]; order[i] = order[j]; order[j] = t;
            }
            int32_t n_attend = end_kind == 0 ? 0 : end_kind == 1 ? 1 + (int32_t)(seq_rand(&s) % 2) : 3;
            for (int32_t i = 0; i < n_attend; i++) {
                CHECK_STATUS(seq_attend(&s, st, order[i], start, n, &err), OKV_OK, err);
                seq_model_wrote(&m, start, n);
            }
            if (end_kind == 2) {
                float dummy[64] = {0};
                CHECK_STATUS(okv_update_and_attend(st, 0, dummy, 2, dummy, dummy, OKV_F32, 1, dummy, &err),
                             OKV_ERR_INVALID, err);
            }
            if (end_kind >= 3) {
                CHECK_STATUS(okv_step_commit(st, &err), OKV_OK, err);
                m.length = start + n;
            } else {
                if (end_kind == 2 || n_attend < 3)
                    CHECK(okv_step_commit(st, &err) != OKV_OK, "commit of an incomplete step accepted");
                okv_step_abort(st);
                if (n_attend > 0 && m.length > start) m.length = start;
            }
        }
        if (!compare(&s, &m, it)) break;
    }
    CHECK(s.max_err < 2e-5, "seed %llu: attention max err %g", (unsigned long long)seed, s.max_err);
    seq_free(&s);
}

int main(void) {
    for (uint64_t seed = 1; seed <= 8; seed++) run(seed, 600);
    return check_done();
}
