/* The server's scheduler (tools/offkv/serve/sched.c) alone, issue 15:
 *  - every end-of-turn token is found and kept (the list grows instead of
 *    holding a fixed eight; a tokenizer refuses two tokens of one text, so
 *    a real vocabulary has at most EOS and the seven other markers: all
 *    eight must be there, in a vocabulary that has them all), but not
 *    harmony's <|end|> where <|return|> and <|call|> end the turns;
 *  - t_queued is the time a job waited for a sequence (it was always 0);
 *  - srv_sched_stop ends a queued job as SRV_FINISH_SHUTDOWN, never
 *    admitted, and a running one as SRV_FINISH_SHUTDOWN, admitted, so the
 *    server can tell a shutdown from an end;
 *  - srv_sched_create takes a NULL err, as the library's functions do. */
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "gguf_copy.h"
#include "serve/serve.h"

static char dir[4096];

/* stories260K (its EOS is "</s>") with tokens 300..306 renamed to the
 * other end-of-turn markers and made control tokens, and 307..311 to texts
 * that only look like them. */
static const char *const renamed[12] = {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>",
                                        "<|endoftext|>", "<|return|>", "<|eot_id|", "im_end", "<end_of_turn >",
                                        "<|END|>", "<|endoftext|>x"};
/* Harmony's (gpt-oss): <|return|> and <|call|> end its turns, so <|end|>,
 * which ends a message (reasoning, before the answer), must not. */
static const char *const harmony[4] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};

static bool write_many_eog(const char *shared, const char *out, const char *const *names, int n_names) {
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    okv_error err;
    okv_gguf *g = okv_gguf_open(path, &err);
    okv_gguf_writer *w = okv_gguf_writer_create(&err);
    bool ok = g && w;
    static const char *const skip[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", NULL};
    ok = ok && copy_metadata_except(g, w, skip) && copy_tensors(g, w);
    okv_gguf_type et;
    uint64_t n = 0;
    ok = ok && okv_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &n, &err) == OKV_OK && n > 320;
    char **texts = ok ? calloc(n, sizeof *texts) : NULL;
    int32_t *types = ok ? calloc(n, sizeof *types) : NULL;
    for (uint64_t i = 0; ok && i < n; i++) {
        const char *p;
        size_t len;
        int64_t t;
        ok = okv_gguf_array_str(g, "tokenizer.ggml.tokens", i, &p, &len, &err) == OKV_OK &&
             okv_gguf_array_i64(g, "tokenizer.ggml.token_type", i, &t, &err) == OKV_OK;
        const bool named = i >= 300 && i < 300 + (uint64_t)n_names;
        texts[i] = named ? strdup(names[i - 300]) : strndup(p, len);
        types[i] = named ? 3 : (int32_t)t;
    }
    ok = ok && okv_gguf_writer_add_array(w, "tokenizer.ggml.tokens", OKV_GGUF_STRING, (const char *const *)texts, n, &err) == OKV_OK &&
         okv_gguf_writer_add_array(w, "tokenizer.ggml.token_type", OKV_GGUF_I32, types, n, &err) == OKV_OK &&
         okv_gguf_writer_write(w, out, &err) == OKV_OK;
    if (!ok) printf("writing %s: %s\n", out, err.message);
    for (uint64_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(types);
    okv_gguf_writer_free(w);
    okv_gguf_close(g);
    return ok;
}

static srv_job *submit(srv_sched *s, int32_t max_tokens) {
    static const int32_t prompt[] = {1, 400, 401, 402};
    srv_job_params p = {.prompt = prompt, .n_prompt = 4, .max_tokens = max_tokens, .ignore_eos = true,
                        .sampling = {.temperature = 0, .top_p = 1}};
    bool busy = false;
    srv_job *j = srv_submit(s, &p, &busy, NULL);
    CHECK(j != NULL, "submit (busy %d)", busy);
    return j;
}

static srv_finish wait_end(srv_sched *s, srv_job *j) {
    size_t at = 0;
    srv_finish f = SRV_RUNNING;
    for (int i = 0; i < 2000 && f == SRV_RUNNING; i++) {
        char *t;
        size_t n;
        f = srv_job_poll(s, j, &at, &t, &n, 10);
        free(t);
    }
    return f;
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found\n");
        return CHECK_SKIP;
    }
    const char *b = getenv("OKV_BIN");
    snprintf(dir, sizeof dir, "%s/test-serve-sched-XXXXXX", b ? b : "/tmp");
    if (!mkdtemp(dir)) return 1;
    char eog_model[4200];
    snprintf(eog_model, sizeof eog_model, "%s/many-eog.gguf", dir);
    okv_error err;
    const srv_sched_config cfg = {.n_parallel = 1, .n_queue = 4, .capacity = 256, .chunk = 16, .n_threads = 1,
                                  .kv_type = "f16"};
    for (int v = 0; v < 2; v++) {
        if (!write_many_eog(shared, eog_model, v ? harmony : renamed, v ? 4 : 12)) continue;
        okv_model *m = okv_model_load(eog_model, NULL, &err);
        CHECK(m != NULL, "load: %s", err.message);
        srv_sched *s = m ? srv_sched_create(m, &cfg, &err) : NULL;
        CHECK(s != NULL, "create: %s", err.message);
        if (s) {
            const int32_t *ids;
            const int n = srv_sched_eog(s, &ids);
            int marked = 0, end = 0;
            for (int i = 0; i < n; i++) marked += ids[i] >= 300 && ids[i] < (v ? 303 : 307), end += ids[i] == 300;
            if (!v)
                CHECK(n == 8 && marked == 7, "end-of-turn tokens: %d (%d of the seven renamed markers), want 8", n, marked);
            else
                CHECK(n == 3 && marked == 2 && !end,
                      "harmony's end-of-turn tokens: %d (<|return|> and <|call|>: %d; <|end|> %s), want EOS, <|return|> "
                      "and <|call|>", n, marked - end, end ? "among them" : "not");
        }
        srv_sched_free(s);
        okv_model_free(m);
        remove(eog_model);
    }

    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "load: %s", err.message);
    if (!m) return check_done();
    /* A NULL err: the failure is still a NULL scheduler, not a crash. */
    srv_sched_config bad = cfg;
    bad.n_threads = -5;
    CHECK(srv_sched_create(m, &bad, NULL) == NULL, "a scheduler with -5 threads");
    srv_sched *s = srv_sched_create(m, &cfg, &err);
    CHECK(s != NULL, "create: %s", err.message);
    if (s) {
        /* One sequence: the second job waits for the first's 40 tokens. */
        srv_job *a = submit(s, 40), *q = submit(s, 4);
        CHECK(wait_end(s, a) == SRV_FINISH_LENGTH, "the first job ends by length");
        CHECK(wait_end(s, q) == SRV_FINISH_LENGTH, "the second job ends by length");
        srv_job_usage ua, uq;
        srv_job_usage_get(s, a, &ua);
        srv_job_usage_get(s, q, &uq);
        CHECK(ua.admitted && uq.admitted, "both were admitted");
        CHECK(uq.t_queued > 0 && uq.t_queued >= ua.t_done * 0.5 && uq.t_queued <= uq.t_done,
              "the queued job's t_queued %.6f s (the first took %.6f s, it %.6f s)", uq.t_queued, ua.t_done,
              uq.t_done);
        srv_job_release(s, a);
        srv_job_release(s, q);

        /* Which stop string ended a job: the greedy text of a stopless
         * job gives one (two bytes of it that first occur past its start);
         * then a job whose long prompt takes several steps (40 tokens,
         * chunks of 16) and which ends on its end-of-sequence token (biased
         * up) must report none, not the one before it. */
        static const int32_t prompt[] = {1, 400, 401, 402};
        srv_job_params gp = {.prompt = prompt, .n_prompt = 4, .max_tokens = 24, .ignore_eos = true,
                             .sampling = {.temperature = 0, .top_p = 1}};
        bool busy = false;
        srv_job *g = srv_submit(s, &gp, &busy, NULL);
        char text[4096] = "";
        size_t at = 0, len = 0;
        for (srv_finish f = SRV_RUNNING; g && f == SRV_RUNNING;) {
            char *t = NULL;
            size_t n = 0;
            f = srv_job_poll(s, g, &at, &t, &n, 10);
            if (t && len + n < sizeof text) memcpy(text + len, t, n), len += n, text[len] = '\0';
            free(t);
        }
        srv_job_release(s, g);
        size_t pos = 2;
        char stop[3] = "";
        while (pos + 2 <= len && (memcpy(stop, text + pos, 2), strstr(text, stop) != text + pos)) pos++;
        CHECK(pos + 2 <= len, "a stop string from the greedy text '%s'", text);
        char *stops[] = {"\x01never", stop};
        srv_job_params sp = gp;
        sp.stops = stops;
        sp.n_stops = 2;
        srv_job *st = srv_submit(s, &sp, &busy, NULL);
        CHECK(st && wait_end(s, st) == SRV_FINISH_STOP, "the job with stop strings ends by one");
        srv_job_usage us;
        if (st) srv_job_usage_get(s, st, &us);
        CHECK(st && us.stop_index == 1, "stop_index %d, want 1 ('%s')", st ? us.stop_index : -9, stop);
        srv_job_release(s, st);
        int32_t long_prompt[40];
        for (int i = 0; i < 40; i++) long_prompt[i] = i == 0 ? 1 : 300 + i;
        const int32_t *eog;
        srv_sched_eog(s, &eog);
        const float up = 100;
        srv_job_params ep = {.prompt = long_prompt, .n_prompt = 40, .max_tokens = 24, .bias_ids = eog, .bias = &up,
                             .n_bias = 1, .stops = stops, .n_stops = 2, .sampling = {.temperature = 0, .top_p = 1}};
        srv_job *e = srv_submit(s, &ep, &busy, NULL);
        CHECK(e && wait_end(s, e) == SRV_FINISH_STOP, "the job ends on end-of-sequence");
        srv_job_usage ue;
        if (e) srv_job_usage_get(s, e, &ue);
        CHECK(e && ue.completion_tokens == 0 && ue.stop_index == -1,
              "an end-of-sequence end: stop_index %d (want -1), %d tokens", e ? ue.stop_index : -9,
              e ? ue.completion_tokens : -1);
        srv_job_release(s, e);

        /* A shutdown with one running (held by a long budget) and one queued. */
        srv_job *run = submit(s, 200), *wait = submit(s, 4);
        CHECK(srv_job_wait_admitted(s, run, 5000), "the first job is admitted");
        srv_sched_stop(s);
        CHECK(wait_end(s, run) == SRV_FINISH_SHUTDOWN, "a running job ends as SRV_FINISH_SHUTDOWN");
        CHECK(wait_end(s, wait) == SRV_FINISH_SHUTDOWN, "a queued job ends as SRV_FINISH_SHUTDOWN");
        srv_job_usage ur, uw;
        srv_job_usage_get(s, run, &ur);
        srv_job_usage_get(s, wait, &uw);
        CHECK(ur.admitted && !uw.admitted, "admitted: running %d, queued %d", ur.admitted, uw.admitted);
        busy = false;
        static const int32_t one[] = {1};
        srv_job_params p = {.prompt = one, .n_prompt = 1, .max_tokens = 1, .sampling = {.top_p = 1}};
        CHECK(srv_submit(s, &p, &busy, NULL) == NULL && busy, "a stopped scheduler refuses new jobs as busy");
        srv_job_release(s, run);
        srv_job_release(s, wait);
        srv_sched_free(s);
    }
    okv_model_free(m);
    rmdir(dir);
    return check_done();
}
