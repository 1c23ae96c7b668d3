/* offkv serve behind a router (issue 17, section 6):
 *  - the scheduler's gauges: requests running and waiting, and the K/V
 *    positions the running requests hold, checked against what a job has
 *    made (a 4-token prompt and g tokens generated hold 3 + g positions:
 *    the last token is not evaluated yet), the queued job counted as
 *    waiting, its 4-token prompt pending (the running one's is read),
 *    everything 0 once the jobs end;
 *  - the server listens before it loads: /health answers 503
 *    {"status":"loading"} and the other endpoints 503 until srv_load, then
 *    /health 200 {"status":"ok"};
 *  - /metrics carries the names the Gateway API Inference Extension's
 *    endpoint picker reads from vLLM (vllm:num_requests_waiting,
 *    vllm:num_requests_running, vllm:kv_cache_usage_perc) and from
 *    llama.cpp's server (llamacpp:requests_deferred,
 *    llamacpp:requests_processing, llamacpp:kv_cache_usage_ratio), each a
 *    gauge with a HELP and a TYPE line, and the value 0 when idle. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "serve/serve.h"

/* ---- the scheduler's gauges ---- */

static srv_job *submit(srv_sched *s, int32_t max_tokens) {
    static const int32_t prompt[] = {1, 400, 401, 402};
    srv_job_params p = {.prompt = prompt, .n_prompt = 4, .max_tokens = max_tokens, .ignore_eos = true,
                        .sampling = {.temperature = 0, .top_p = 1}};
    bool busy = false;
    srv_job *j = srv_submit(s, &p, &busy, NULL);
    CHECK(j != NULL, "submit (busy %d)", busy);
    return j;
}

static void gauges(okv_model *m) {
    const srv_sched_config cfg = {.n_parallel = 1, .n_queue = 4, .capacity = 256, .chunk = 16, .n_threads = 1,
                                  .kv_type = "f16"};
    okv_error err = {0};
    srv_sched *s = srv_sched_create(m, &cfg, &err);
    CHECK(s != NULL, "create: %s", err.message);
    if (!s) return;
    srv_sched_stats st;
    srv_sched_stats_get(s, &st);
    CHECK(st.active == 0 && st.queued == 0 && st.kv_used == 0 && st.kv_total == 256 && st.prompt_pending == 0,
          "idle: running %d, waiting %d, K/V %lld of %lld, prompt pending %lld (want 0, 0, 0 of 256, 0)",
          (int)st.active, (int)st.queued, (long long)st.kv_used, (long long)st.kv_total, (long long)st.prompt_pending);
    srv_job *run = submit(s, 200), *wait = submit(s, 4);
    int consistent = 0, max_g = 0;
    size_t at = 0;
    srv_finish f = SRV_RUNNING;
    for (int i = 0; i < 20000 && f == SRV_RUNNING; i++) {
        char *t = NULL;
        size_t n = 0;
        f = srv_job_poll(s, run, &at, &t, &n, 1);
        free(t);
        /* Two equal readings around the job's count: no step came between. */
        srv_sched_stats a, b;
        srv_job_usage u;
        srv_sched_stats_get(s, &a);
        srv_job_usage_get(s, run, &u);
        srv_sched_stats_get(s, &b);
        if (a.kv_used != b.kv_used || a.active != b.active || !u.admitted || u.t_done > 0) continue;
        if (u.completion_tokens < 1 || u.completion_tokens >= 200) continue;
        consistent++;
        if (u.completion_tokens > max_g) max_g = u.completion_tokens;
        CHECK(a.active == 1 && a.queued == 1, "while the first runs: running %d, waiting %d (want 1, 1)", (int)a.active,
              (int)a.queued);
        CHECK(a.kv_used == 3 + u.completion_tokens, "%d tokens made from a 4-token prompt: K/V %lld (want %d)",
              (int)u.completion_tokens, (long long)a.kv_used, 3 + (int)u.completion_tokens);
        CHECK(a.prompt_pending == 4, "while the first runs: %lld prompt tokens pending (want the waiting job's 4)",
              (long long)a.prompt_pending);
        if (check_failed_) break;
    }
    CHECK(consistent > 0, "no consistent reading while the first job ran");
    printf("gauges: %d consistent readings while running (up to %d tokens)\n", consistent, max_g);
    size_t at2 = 0;
    for (int i = 0; i < 2000; i++) {
        char *t = NULL;
        size_t n = 0;
        if (srv_job_poll(s, wait, &at2, &t, &n, 10) != SRV_RUNNING) {
            free(t);
            break;
        }
        free(t);
    }
    srv_sched_stats_get(s, &st);
    CHECK(st.active == 0 && st.queued == 0 && st.kv_used == 0 && st.prompt_pending == 0,
          "both ended: running %d, waiting %d, K/V %lld, prompt pending %lld (want 0: a finished request's history "
          "is free)", (int)st.active, (int)st.queued, (long long)st.kv_used, (long long)st.prompt_pending);
    srv_job_release(s, run);
    srv_job_release(s, wait);
    srv_sched_free(s);
}

/* ---- over HTTP ---- */

/* GET path from 127.0.0.1:port; the status (0 when no answer), body in
 * a malloc'd *body. */
static int http_get(int port, const char *path, char **body) {
    *body = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        return 0;
    }
    char req[512];
    int k = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)k) != k) {
        close(fd);
        return 0;
    }
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    for (ssize_t r; buf && (r = read(fd, buf + n, cap - n - 1)) > 0;) {
        n += (size_t)r;
        if (n + 1 == cap) {
            char *g = realloc(buf, cap *= 2);
            if (!g) break;
            buf = g;
        }
    }
    close(fd);
    if (!buf) return 0;
    buf[n] = 0;
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) status = 0;
    const char *b = strstr(buf, "\r\n\r\n");
    *body = strdup(b ? b + 4 : "");
    free(buf);
    return status;
}

static bool status_is(const char *body, const char *want) {
    cJSON *j = cJSON_Parse(body);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "status");
    const bool ok = cJSON_IsString(s) && strcmp(s->valuestring, want) == 0;
    cJSON_Delete(j);
    return ok;
}

/* The sample of metric name (a line "name value" or "name{...} value"),
 * after its "# TYPE name gauge" line; NAN when absent. */
static double gauge(const char *text, const char *name) {
    char type[256];
    snprintf(type, sizeof type, "# TYPE %s gauge\n", name);
    const char *t = strstr(text, type);
    if (!t) return NAN;
    const size_t len = strlen(name);
    for (const char *p = t; (p = strstr(p, "\n")) != NULL;) {
        p++;
        if (strncmp(p, name, len) == 0 && (p[len] == ' ' || p[len] == '{')) {
            const char *v = p[len] == '{' ? strchr(p, '}') : p + len;
            if (!v) return NAN;
            return strtod(v + 1, NULL);
        }
        if (*p != '#') return NAN;
    }
    return NAN;
}

static void lifecycle(const char *model) {
    srv_config cfg = {.model_path = model, .host = "127.0.0.1", .port = 0, .max_body = 1 << 20, .timeout = 5,
                      .max_per_client = 64,
                      .sched = {.n_parallel = 2, .n_queue = 4, .capacity = 128, .chunk = 16, .n_threads = 1,
                                .kv_type = "f16"}};
    srv_server *srv = srv_start(&cfg);
    CHECK(srv != NULL, "srv_start");
    if (!srv) return;
    const int port = srv_port(srv);
    CHECK(port > 0, "port %d", port);
    char *body;
    int st = http_get(port, "/health", &body);
    CHECK(st == 503 && body && status_is(body, "loading"), "/health before the load: %d %s (want 503 loading)", st,
          body ? body : "");
    free(body);
    static const char *const others[] = {"/v1/models", "/metrics"};
    for (int i = 0; i < 2; i++) {
        st = http_get(port, others[i], &body);
        CHECK(st == 503, "%s before the load: %d (want 503)", others[i], st);
        free(body);
    }
    CHECK(srv_load(srv), "srv_load");
    st = http_get(port, "/health", &body);
    CHECK(st == 200 && body && status_is(body, "ok"), "/health after the load: %d %s (want 200 ok)", st,
          body ? body : "");
    free(body);
    st = http_get(port, "/metrics", &body);
    CHECK(st == 200 && body, "/metrics: %d", st);
    static const char *const names[] = {"vllm:num_requests_waiting",  "vllm:num_requests_running",
                                        "vllm:kv_cache_usage_perc",   "llamacpp:requests_deferred",
                                        "llamacpp:requests_processing", "llamacpp:kv_cache_usage_ratio",
                                        "offkv_kv_cache_usage_ratio", "offkv_prompt_tokens_pending"};
    for (size_t i = 0; body && i < sizeof names / sizeof names[0]; i++) {
        char help[256];
        snprintf(help, sizeof help, "# HELP %s ", names[i]);
        const double v = gauge(body, names[i]);
        CHECK(strstr(body, help) && v == 0.0, "%s: a gauge with HELP, 0 when idle (got %g)", names[i], v);
    }
    CHECK(body && strstr(body, "vllm:num_requests_running{model_name=\"stories260K.gguf\"} 0\n"),
          "vLLM's gauges carry model_name");
    free(body);
    srv_stop(srv);
}

int main(void) {
    const char *shared = check_shared_dir();
    if (!shared) {
        printf("skipped: ../shared not found\n");
        return CHECK_SKIP;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    okv_error err = {0};
    okv_model *m = okv_model_load(path, NULL, &err);
    CHECK(m != NULL, "load: %s", err.message);
    if (!m) return check_done();
    gauges(m);
    okv_model_free(m);
    lifecycle(path);
    return check_done();
}
