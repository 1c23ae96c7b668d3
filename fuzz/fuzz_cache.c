/* libFuzzer target: the cache's step API driven by a byte stream of
 * operations, checked against a plain model of the sequence (tests/seqref.h's
 * seq_model, as tests/test_cache_property.c is): begin / attend / commit /
 * abort / rewind / clear at positions read from the bytes.  After every
 * operation the cache's length, rows per layer and can_rewind at every
 * position must match the model, and every attention output must match a
 * naive softmax attention (tests/seqref.h).  Any disagreement traps.
 *
 * Input: 6 bytes of configuration (capacity, initial capacity, max_write,
 * dtypes, the three layers' windows), then 3 or 4 bytes per operation. */
#include "seqref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct bytes {
    const uint8_t *p;
    size_t n;
} bytes;

static uint8_t take(bytes *b) {
    if (!b->n) return 0;
    b->n--;
    return *b->p++;
}

static void agree(const seqref *s, const seq_model *m) {
    if (okv_cache_length(s->cache) != m->length) __builtin_trap();
    for (int32_t l = 0; l < s->n_layers; l++)
        if (okv_cache_rows(s->cache, l) != m->rows[l]) __builtin_trap();
    for (int32_t p = -1; p <= m->length + 2; p++)
        if (okv_cache_can_rewind(s->cache, p) != seq_model_can_rewind(s, m, p)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bytes b = {data, size};
    okv_layer_geometry geo[3] = {{1, 4, 0, 0}, {2, 3, 3, 0}, {1, 5, 6, 0}};
    const int32_t heads[3] = {2, 4, 1};
    const uint8_t c0 = take(&b), c1 = take(&b), c2 = take(&b), c3 = take(&b);
    okv_cache_config cfg = {.capacity = 1 + c0 % 48, .initial_capacity = c1 % 6, .max_write = 1 + c2 % 6,
                            .dtype = c3 & 1 ? OKV_F16 : OKV_F32};
    if (cfg.max_write > cfg.capacity) cfg.max_write = cfg.capacity;
    const uint8_t w = take(&b), w2 = take(&b);
    geo[0].window = w % 2 ? 0 : (w >> 1) % 9;      /* flat or ring, window 0..8 */
    geo[1].window = 1 + (w >> 5) % 8;
    geo[2].window = w2 % 3 ? (int32_t)(w2 % 10) : 0;
    seqref s;
    okv_error err;
    if (!seq_init(&s, geo, heads, 3, &cfg, c3 & 2 ? OKV_F16 : OKV_F32, (uint64_t)c3 << 8 | c0, &err)) {
        /* every configuration built above is valid */
        __builtin_trap();
    }
    seq_model m = seq_model_new(&s);
    agree(&s, &m);
    for (int ops = 0; b.n && ops < 256; ops++) {
        const uint8_t op = take(&b);
        if (op < 12) {
            if (okv_cache_clear(s.cache, &err) != OKV_OK) __builtin_trap();
            m.length = m.high_water = 0;
        } else if (op < 40) {
            const int32_t pos = (int32_t)(take(&b) % (uint32_t)(m.length + 4)) - 2;
            const bool want = seq_model_can_rewind(&s, &m, pos);
            if (okv_cache_rewind(s.cache, pos, &err) != (want ? OKV_OK : OKV_ERR_POSITION)) __builtin_trap();
            if (want) seq_model_rewind(&m, pos);
        } else {
            /* A step: at the length, re-running earlier positions, or past the end. */
            const uint8_t a = take(&b), e = take(&b);
            int32_t n = 1 + a % 7;                     /* 7 exceeds any max_write: refused */
            int32_t start = m.length;
            if (op < 110) start = m.length - (int32_t)((a >> 3) % 10);
            else if (op < 120) start = m.length + 1 + (a >> 3) % 3;
            int32_t pos[8];
            for (int32_t i = 0; i < n; i++) pos[i] = start + i;
            if (op >= 250 && n > 1) pos[n - 1] = pos[0];  /* not consecutive: refused */
            const bool ok = seq_model_step_ok(&s, &m, start, n) && !(op >= 250 && n > 1);
            okv_step *st = okv_step_begin(s.cache, pos, n, NULL, &err);
            if ((st != NULL) != ok) __builtin_trap();
            if (!st) {
                if (err.message[0] == '\0') __builtin_trap();
                agree(&s, &m);
                continue;
            }
            seq_model_grow(&s, &m, start + n);
            /* e: low 2 bits how it ends, the rest the layer order */
            const int end_kind = e & 3;
            int32_t order[3] = {0, 1, 2};
            const int perm = (e >> 2) % 6;
            if (perm & 1) { int32_t t = order[0]; order[0] = order[1]; order[1] = t; }
            if (perm >= 2) { int32_t t = order[2]; order[2] = order[perm / 2 - 1]; order[perm / 2 - 1] = t; }
            const int32_t n_attend = end_kind == 0 ? 0 : end_kind == 1 ? 1 + ((e >> 5) & 1) : 3;
            for (int32_t i = 0; i < n_attend; i++) {
                if (seq_attend(&s, st, order[i], start, n, &err) != OKV_OK) __builtin_trap();
                seq_model_wrote(&m, start, n);
            }
            if (end_kind == 2) {
                /* a call the step must refuse (wrong head count), after which only abort is left */
                float dummy[64] = {0};
                if (okv_update_and_attend(st, 0, dummy, 2, dummy, dummy, OKV_F32, 1, dummy, &err) !=
                    OKV_ERR_INVALID)
                    __builtin_trap();
            }
            if (end_kind == 3) {
                if (okv_step_commit(st, &err) != OKV_OK) __builtin_trap();
                m.length = start + n;
            } else {
                if (okv_step_commit(st, &err) == OKV_OK) __builtin_trap(); /* incomplete or failed */
                okv_step_abort(st);
                if (n_attend > 0 && m.length > start) m.length = start;
            }
        }
        agree(&s, &m);
    }
    if (!(s.max_err < 2e-5)) __builtin_trap();
    seq_free(&s);
    return 0;
}
