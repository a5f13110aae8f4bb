/* test_server.c - the inference server (nn/server.h) under many clients.
 *
 * Every result that comes back through the server is compared with a direct
 * nn_forward of the same position on the same net (values, gathered and full
 * policy, legal head). Also: FIFO order and a lone client served within the
 * gather timeout; a net published mid-stream (from a file and from a net)
 * while clients run: each ticket matches exactly the net of its reported
 * generation, and generations never go back per client; bad publishes fail
 * with the loader's message and the old net keeps serving; shutdown with
 * pending and blocked requests returns everywhere (a watchdog fails the test
 * instead of hanging); bad requests and tickets are refused; counters add up;
 * the moves-left head's plies (nn_forward_out's) on both routes, NAN from a
 * net without the head, a net with other heads refused by publish.
 * Runs clean under ThreadSanitizer and ASan+UBSan (BLAS on one thread). */
#include "nn_test.h"

#include <stdatomic.h>

#include "nn/fault.h"
#include "nn/server.h"
#include "nn/weights.h"

#define IN_PLANES 8
#define IN_HAND 2
#define POOL 384      /* distinct random positions; references computed once */
#define MAX_N 100     /* positions per submission in the tests (max_batch 40: most split) */
#define MAX_LABELS 24 /* per position */
#define TOL 1e-5

static int64_t g_pb; /* packed bytes per position */
static uint8_t *g_packed; /* (POOL, g_pb) */
static float *g_hand;     /* (POOL, IN_HAND) */
/* references per net: [net][pos] */
static float *g_ref_value[2], *g_ref_policy[2], *g_ref_legal[2];

/* a failure seen by a client thread */
#define TFAIL(...) t_fail(__FILE__, __LINE__, "", __VA_ARGS__)

static int32_t rng_int(uint64_t *s, int32_t n) { return (int32_t)(t_splitmix64(s) % (uint64_t)n); }

static int close_enough(float a, float ref) {
    double d = fabs((double)a - (double)ref);
    return d <= TOL + TOL * fabs((double)ref);
}

/* ---- a watchdog: fails the test instead of letting it hang ---------------- */
static atomic_int g_watch_armed = 0;
static atomic_int g_watch_seconds = 0;
static atomic_int g_watch_quit = 0;
static _Atomic(const char *) g_watch_what = "";
static void *watchdog_main(void *arg) {
    (void)arg;
    int64_t t0 = compat_now_ms();
    int armed_at = 0;
    while (!atomic_load(&g_watch_quit)) {
        compat_sleep_ms(50);
        int a = atomic_load(&g_watch_armed);
        if (a != armed_at) {
            armed_at = a;
            t0 = compat_now_ms();
        }
        if (a && compat_now_ms() - t0 > 1000LL * atomic_load(&g_watch_seconds)) {
            fprintf(stderr, "WATCHDOG: '%s' still running after %d s: hang\n", atomic_load(&g_watch_what),
                    atomic_load(&g_watch_seconds));
            fflush(stderr);
            _Exit(2);
        }
    }
    return NULL;
}
static void watch(const char *what, int seconds) {
    atomic_store(&g_watch_what, what);
    atomic_store(&g_watch_seconds, seconds);
    atomic_fetch_add(&g_watch_armed, 1);
}

/* ---- nets and references ------------------------------------------------------ */
static nn_net_config_t small_config(void) {
    nn_net_config_t c = {2, 16, NN_ACT_RELU, IN_PLANES, IN_HAND, 7};
    return c;
}

/* Random params and BN statistics so that folding matters. */
static nn_net_t *random_net_heads(nn_backend_t *be, uint64_t seed, int32_t heads) {
    char err[256];
    nn_net_config_t c = small_config();
    c.heads = heads;
    nn_net_t *net = nn_net_new(be, &c, seed, err, sizeof(err));
    KOMA_ASSERT(net);
    uint64_t s = seed * 7919;
    int64_t ns;
    float *st = nn_net_stats(net, &ns);
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        float *d = nn_net_tensor_data(net, i);
        int var = strstr(t->name, "running_var") != NULL;
        int beta = strstr(t->name, ".bias") != NULL || strstr(t->name, "running_mean") != NULL;
        if (!var && !beta) continue;
        for (int64_t k = 0; k < t->numel; k++) {
            double u = (double)(t_splitmix64(&s) >> 11) * (1.0 / 9007199254740992.0);
            d[k] = var ? (float)(0.5 + u) : (float)(0.2 * (u - 0.5));
        }
    }
    (void)st;
    nn_net_mark_dirty(net);
    return net;
}
static nn_net_t *random_net(nn_backend_t *be, uint64_t seed) { return random_net_heads(be, seed, 0); }

static void make_pool(void) {
    g_pb = nn_packed_bytes(IN_PLANES);
    g_packed = malloc((size_t)(POOL * g_pb));
    g_hand = malloc(sizeof(float) * POOL * IN_HAND);
    uint64_t s = 42;
    for (int64_t i = 0; i < POOL * g_pb; i++) g_packed[i] = (uint8_t)t_splitmix64(&s);
    for (int i = 0; i < POOL * IN_HAND; i++) g_hand[i] = (float)rng_int(&s, 5) * 0.25f;
}

static void make_refs(nn_net_t *net, int which, nn_backend_t *be) {
    char err[256];
    nn_ctx_t *ctx = nn_ctx_new(net, be, 64, err, sizeof(err));
    KOMA_ASSERT(ctx);
    g_ref_value[which] = malloc(sizeof(float) * POOL * NN_VALUE_NB);
    g_ref_policy[which] = malloc(sizeof(float) * POOL * NN_POLICY_NB);
    g_ref_legal[which] = malloc(sizeof(float) * POOL * NN_LEGAL_NB);
    for (int b0 = 0; b0 < POOL; b0 += 64) {
        int B = POOL - b0 < 64 ? POOL - b0 : 64;
        nn_forward(ctx, B, g_packed + b0 * g_pb, g_hand + b0 * IN_HAND, g_ref_policy[which] + (int64_t)b0 * NN_POLICY_NB,
                   g_ref_value[which] + b0 * NN_VALUE_NB, g_ref_legal[which] + (int64_t)b0 * NN_LEGAL_NB);
    }
    nn_ctx_free(ctx);
}

/* ---- a client submission with its own buffers ------------------------------------ */
typedef struct {
    int32_t n;
    int32_t pos[MAX_N]; /* pool index of each row */
    uint8_t packed[MAX_N * 81];
    float hand[MAX_N * IN_HAND];
    uint32_t offsets[MAX_N + 1];
    uint16_t labels[MAX_N * MAX_LABELS];
    float value[MAX_N * NN_VALUE_NB];
    float policy[MAX_N * NN_POLICY_NB];
    float legal[MAX_N * NN_LEGAL_NB];
    nn_server_request_t req;
    nn_server_ticket_t ticket;
} sub_t;

/* Fills a random submission of n rows; mode bit 0: gathered labels, bit 1:
 * legal wanted, bit 2: no value. */
static void sub_make(sub_t *u, uint64_t *rng, int32_t n, int mode) {
    u->n = n;
    uint32_t off = 0;
    u->offsets[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t p = rng_int(rng, POOL);
        u->pos[i] = p;
        memcpy(u->packed + i * g_pb, g_packed + p * g_pb, (size_t)g_pb);
        memcpy(u->hand + i * IN_HAND, g_hand + p * IN_HAND, sizeof(float) * IN_HAND);
        int32_t k = rng_int(rng, MAX_LABELS + 1);
        for (int32_t j = 0; j < k; j++) u->labels[off++] = (uint16_t)rng_int(rng, NN_POLICY_NB);
        u->offsets[i + 1] = off;
    }
    memset(&u->req, 0, sizeof(u->req));
    u->req.n = n;
    u->req.packed = u->packed;
    u->req.hand = u->hand;
    if (mode & 1) {
        u->req.label_offsets = u->offsets;
        u->req.labels = u->labels;
    }
    u->req.policy = u->policy;
    u->req.value = (mode & 4) ? NULL : u->value;
    u->req.legal = (mode & 2) ? u->legal : NULL;
    /* poison the outputs: a row the server forgets shows up as NaN */
    memset(u->value, 0xff, sizeof(float) * (size_t)n * NN_VALUE_NB);
    memset(u->policy, 0xff, sizeof(float) * (size_t)n * NN_POLICY_NB);
    if (mode & 2) memset(u->legal, 0xff, sizeof(float) * (size_t)n * NN_LEGAL_NB);
}

/* Number of outputs of u that differ from net `which`'s references. */
static int64_t sub_mismatches(const sub_t *u, int which, double *maxd) {
    int64_t bad = 0;
    const nn_server_request_t *r = &u->req;
    for (int32_t i = 0; i < u->n; i++) {
        int32_t p = u->pos[i];
        const float *rv = g_ref_value[which] + p * NN_VALUE_NB;
        const float *rp = g_ref_policy[which] + (int64_t)p * NN_POLICY_NB;
        const float *rl = g_ref_legal[which] + (int64_t)p * NN_LEGAL_NB;
#define CMP(a, b)                                                       \
    do {                                                                \
        double d_ = fabs((double)(a) - (double)(b));                    \
        if (isnan(d_)) d_ = INFINITY;                                   \
        if (maxd && d_ > *maxd) *maxd = d_;                             \
        if (!close_enough((a), (b))) bad++;                             \
    } while (0)
        if (r->value)
            for (int k = 0; k < NN_VALUE_NB; k++) CMP(r->value[i * NN_VALUE_NB + k], rv[k]);
        if (r->label_offsets) {
            for (uint32_t k = u->offsets[i]; k < u->offsets[i + 1]; k++) CMP(r->policy[k], rp[u->labels[k]]);
        } else {
            for (int k = 0; k < NN_POLICY_NB; k++) CMP(r->policy[(int64_t)i * NN_POLICY_NB + k], rp[k]);
        }
        if (r->legal)
            for (int k = 0; k < NN_LEGAL_NB; k++) CMP(r->legal[(int64_t)i * NN_LEGAL_NB + k], rl[k]);
#undef CMP
    }
    return bad;
}

/* Which net (0/1) a generation serves in the publish tests: odd -> net 0. */
static int net_of_gen(int64_t gen) { return gen % 2 == 1 ? 0 : 1; }

/* ---- test 1: many clients, random batches, results == direct forward ------------ */
typedef struct {
    nn_server_t *srv;
    int id;
    int iters;
    int32_t max_n;
    atomic_int *stop;      /* publish test: run until set (iters ignored when non-NULL) */
    int64_t submitted;     /* positions */
    int64_t submissions;
    int64_t results[2];    /* tickets checked against net 0 / net 1 */
    int64_t last_gen;
    double maxd;
} client_t;

static void *client_main(void *arg) {
    client_t *c = arg;
    uint64_t rng = 1000 + (uint64_t)c->id * 7777;
    sub_t *u[2] = {malloc(sizeof(sub_t)), malloc(sizeof(sub_t))};
    char err[256];
    int inflight = 0;
    for (int it = 0;; it++) {
        int more = c->stop ? !atomic_load(c->stop) : it < c->iters;
        /* keep two submissions in flight: submit the next, then complete the older */
        if (more) {
            sub_t *s = u[it % 2];
            int32_t n = 1 + rng_int(&rng, c->max_n);
            sub_make(s, &rng, n, rng_int(&rng, 8));
            int st = nn_server_submit(c->srv, &s->req, &s->ticket, err, sizeof(err));
            if (st != NN_SERVER_OK) {
                TFAIL("client %d: submit: %s (%s)", c->id, nn_server_status_name(st), err);
                break;
            }
            c->submitted += n;
            c->submissions++;
            inflight++;
        }
        if (inflight == 2 || (!more && inflight == 1)) {
            sub_t *s = u[(it + 1) % 2]; /* submitted at it - 1 */
            nn_server_result_t res;
            int st = (rng_int(&rng, 2) == 0) ? nn_server_wait(c->srv, s->ticket, &res) : NN_SERVER_PENDING;
            while (st == NN_SERVER_PENDING) st = nn_server_poll(c->srv, s->ticket, &res);
            inflight--;
            if (st != NN_SERVER_OK || res.status != st) {
                TFAIL("client %d: wait: %s %s", c->id, nn_server_status_name(st), res.message);
                break;
            }
            if (res.generation < c->last_gen)
                TFAIL("client %d: generation went back from %lld to %lld", c->id, (long long)c->last_gen,
                      (long long)res.generation);
            c->last_gen = res.generation;
            int which = net_of_gen(res.generation);
            double md = 0;
            int64_t bad = sub_mismatches(s, which, &md);
            if (md > c->maxd) c->maxd = md;
            if (bad) {
                int64_t other = sub_mismatches(s, 1 - which, NULL);
                TFAIL("client %d: ticket of %d positions (gen %lld): %lld outputs differ from net %d "
                      "(max diff %.3g); %lld differ from the other net", c->id, s->n,
                      (long long)res.generation, (long long)bad, which, md, (long long)other);
            }
            c->results[which]++;
        }
        if (!more && inflight == 0) break;
    }
    free(u[0]);
    free(u[1]);
    return NULL;
}

static void run_clients(nn_server_t *srv, int nclients, int iters, int32_t max_n, atomic_int *stop,
                        client_t *cl) {
    compat_thread_t th[16];
    for (int i = 0; i < nclients; i++) {
        memset(&cl[i], 0, sizeof(cl[i]));
        cl[i].srv = srv;
        cl[i].id = i;
        cl[i].iters = iters;
        cl[i].max_n = max_n;
        cl[i].stop = stop;
        KOMA_ASSERT(compat_thread_create(&th[i], client_main, &cl[i]) == 0);
    }
    for (int i = 0; i < nclients; i++) compat_thread_join(th[i]);
}

static nn_server_config_t test_config(int32_t max_batch, int32_t streams, int32_t gather_us) {
    nn_server_config_t cfg = nn_server_config_default();
    cfg.backend = "cpu";
    cfg.cpu_threads = streams; /* one BLAS thread per worker */
    cfg.streams = streams;
    cfg.max_batch = max_batch;
    cfg.gather_us = gather_us;
    return cfg;
}

static void test_many_clients(void) {
    fprintf(stderr, "-- many clients, random batches, results == direct nn_forward\n");
    watch("many clients", 900);
    char err[512];
    nn_server_config_t cfg = test_config(40, 2, 500);
    nn_server_t *srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    if (!srv) {
        TFAIL("nn_server_new: %s", err);
        return;
    }
    CHECK(strcmp(nn_server_backend_name(srv), "cpu") == 0);
    CHECK(nn_server_generation(srv) == 1);
    CHECK(nn_server_net_config(srv)->in_planes == IN_PLANES);
    client_t cl[6];
    run_clients(srv, 6, 16, MAX_N, NULL, cl);
    int64_t pos = 0, subs = 0, ok = 0;
    double maxd = 0;
    for (int i = 0; i < 6; i++) {
        pos += cl[i].submitted;
        subs += cl[i].submissions;
        ok += cl[i].results[0];
        CHECK(cl[i].results[1] == 0);
        if (cl[i].maxd > maxd) maxd = cl[i].maxd;
    }
    CHECK(ok == subs);
    nn_server_stats_t st;
    nn_server_stats(srv, &st);
    fprintf(stderr, "   %lld submissions, %lld positions, %lld batches, avg batch %.1f, max |diff| %.3g, "
            "busy %.0f%%\n", (long long)st.submissions, (long long)st.requests, (long long)st.batches,
            st.avg_batch, maxd, 100 * st.busy_frac_total);
    CHECK(st.requests == pos);
    CHECK(st.submissions == subs);
    CHECK(st.evaluated == pos);
    CHECK(st.failed == 0);
    CHECK(st.queued == 0);
    CHECK(st.avg_batch >= 1.0 && st.avg_batch <= 40.0);
    CHECK(st.batches >= (pos + 39) / 40 && st.batches <= pos);
    CHECK(st.busy_frac_total >= 0.0 && st.busy_frac_total <= 1.05);
    CHECK(st.generation == 1 && st.workers == 2);
    nn_server_free(srv);
}

/* ---- test 1b: the device route (staging, device gather) on CPU workers -------------- */
static void test_staged_route(void) {
    fprintf(stderr, "-- KOMA_SERVER_STAGED=1: staging copies and the device gather of labels, results == nn_forward\n");
    watch("staged route", 900);
    char err[512];
    compat_setenv("KOMA_SERVER_STAGED", "1");
    nn_server_config_t cfg = test_config(40, 2, 500);
    nn_server_t *srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    compat_setenv("KOMA_SERVER_STAGED", "0"); /* read when the workers start */
    if (!srv) {
        TFAIL("nn_server_new: %s", err);
        return;
    }
    client_t cl[4];
    run_clients(srv, 4, 12, MAX_N, NULL, cl);
    int64_t subs = 0, ok = 0;
    for (int i = 0; i < 4; i++) subs += cl[i].submissions, ok += cl[i].results[0];
    CHECK(subs > 0 && ok == subs);
    /* Gathered labels really go through the backend's gather: a failing one
     * fails the ticket with the backend's message. */
    sub_t *u = malloc(sizeof(sub_t));
    uint64_t rng = 99;
    sub_make(u, &rng, 8, 1);
    CHECK(u->offsets[8] > 0);
    CHECK(nn_fault_set("gather:1", err, sizeof err) == 0);
    nn_server_ticket_t t;
    nn_server_result_t res;
    memset(&res, 0, sizeof res);
    int st = nn_server_submit(srv, &u->req, &t, err, sizeof(err));
    if (st == NN_SERVER_OK) st = nn_server_wait(srv, t, &res);
    nn_fault_set(NULL, err, sizeof err);
    CHECKF(st != NN_SERVER_OK && strstr(res.message, "gather"), "status %s: %s", nn_server_status_name(st),
           st == NN_SERVER_OK ? "" : res.message);
    free(u);
    nn_server_free(srv);
}

/* ---- test 2: a lone client, FIFO order ---------------------------------------------- */
static void test_lone_client_and_fifo(void) {
    fprintf(stderr, "-- a lone small client; FIFO order\n");
    watch("lone client", 600);
    char err[512];
    uint64_t rng = 5;
    sub_t *u = malloc(sizeof(sub_t) * 12);
    /* gather 200 ms, max_batch 256: 3 positions never fill a batch */
    nn_server_config_t cfg = test_config(256, 1, 200000);
    nn_server_t *srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    KOMA_ASSERT(srv);
    for (int rep = 0; rep < 3; rep++) {
        sub_make(&u[0], &rng, 3, 1);
        int64_t t0 = compat_now_ns();
        nn_server_result_t res;
        int st = nn_server_eval(srv, &u[0].req, &res);
        double ms = (double)(compat_now_ns() - t0) * 1e-6;
        fprintf(stderr, "   3 positions, gather 200 ms: served in %.1f ms\n", ms);
        CHECK(st == NN_SERVER_OK && res.generation == 1);
        CHECK(sub_mismatches(&u[0], 0, NULL) == 0);
        CHECK(ms >= 150.0); /* it did wait for company... */
        /* ...but not for a full batch, which never comes: that wait would
         * last until the watch above ends the test */
    }
    nn_server_free(srv);

    /* gather 0: no waiting at all */
    cfg = test_config(256, 1, 0);
    srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    KOMA_ASSERT(srv);
    sub_make(&u[0], &rng, 2, 0);
    int64_t t0 = compat_now_ns();
    CHECK(nn_server_eval(srv, &u[0].req, NULL) == NN_SERVER_OK);
    double ms = (double)(compat_now_ns() - t0) * 1e-6;
    fprintf(stderr, "   2 positions, gather 0: served in %.1f ms\n", ms);
    CHECK(ms < 1000.0);
    CHECK(sub_mismatches(&u[0], 0, NULL) == 0);

    /* gather -1 (the default): no waiting on CPU workers */
    nn_server_free(srv);
    cfg = test_config(256, 1, -1);
    srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    KOMA_ASSERT(srv);
    nn_server_stats_t gst;
    nn_server_stats(srv, &gst);
    CHECKF(gst.gather_us == 0 && nn_server_config_default().gather_us == -1,
           "default gather on the CPU: %d us (configuration default %d)", gst.gather_us,
           nn_server_config_default().gather_us);

    /* FIFO with one worker: when the last ticket is done, all earlier are */
    for (int rep = 0; rep < 5; rep++) {
        for (int i = 0; i < 12; i++) {
            sub_make(&u[i], &rng, 1 + rng_int(&rng, 100), rng_int(&rng, 2));
            CHECK(nn_server_submit(srv, &u[i].req, &u[i].ticket, err, sizeof(err)) == NN_SERVER_OK);
        }
        nn_server_result_t res;
        CHECK(nn_server_wait(srv, u[11].ticket, &res) == NN_SERVER_OK);
        for (int i = 10; i >= 0; i--) {
            int st = nn_server_poll(srv, u[i].ticket, &res);
            if (st != NN_SERVER_OK) TFAIL("FIFO: ticket %d not done (%s) after ticket 11 was", i, nn_server_status_name(st));
            if (st == NN_SERVER_PENDING) nn_server_wait(srv, u[i].ticket, NULL);
        }
        for (int i = 0; i < 12; i++) CHECK(sub_mismatches(&u[i], 0, NULL) == 0);
    }
    nn_server_free(srv);
    free(u);
}

/* ---- test 2b: CPU workers share the queued rows ------------------------------------ */
/* Two single-thread CPU workers are two cores: 128 queued rows must run as two
 * batches of 64 at the same time, not as one batch of 128 on one core while
 * the other waits (bench_selfplay used 1.07 of 2 cores that way). */
static void test_cpu_workers_share(void) {
    fprintf(stderr, "-- two CPU workers split the queued rows between them\n");
    watch("cpu workers share", 600);
    char err[512];
    uint64_t rng = 9;
    sub_t *u = malloc(sizeof(sub_t) * 4);
    /* max_batch 128 and a 60 s gather: the batch starts when 4 x 32 rows are queued */
    nn_server_config_t cfg = test_config(128, 2, 60 * 1000 * 1000);
    nn_server_t *srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    KOMA_ASSERT(srv);
    int64_t t0 = compat_now_ns();
    for (int i = 0; i < 4; i++) {
        sub_make(&u[i], &rng, 32, 1);
        CHECK(nn_server_submit(srv, &u[i].req, &u[i].ticket, err, sizeof(err)) == NN_SERVER_OK);
    }
    for (int i = 0; i < 4; i++) {
        nn_server_result_t res;
        CHECK(nn_server_wait(srv, u[i].ticket, &res) == NN_SERVER_OK && res.generation == 1);
        CHECK(sub_mismatches(&u[i], 0, NULL) == 0);
    }
    double s = (double)(compat_now_ns() - t0) * 1e-9;
    nn_server_stats_t st;
    nn_server_stats(srv, &st);
    fprintf(stderr, "   128 rows: %lld batches, avg batch %.1f, %.2f s\n", (long long)st.batches, st.avg_batch, s);
    /* 2 batches of 64; or 3 (64, 32, 32) when the first worker is back before
     * the second has woken and, as the gatherer again, takes its half of the
     * 64 left (seen 1 run in ~50 under load: scheduling, not a fault). One
     * batch of 128 would be the old behaviour, more than 3 a split below
     * SRV_CPU_MIN_SPLIT. */
    CHECKF(st.batches >= 2 && st.batches <= 3,
           "128 queued rows ran as %lld batches on 2 free CPU workers, want 2 of 64 (or 64+32+32)",
           (long long)st.batches);
    CHECK(st.evaluated == 128);
    CHECKF(s < 30.0, "the rest of a split batch waited for the gather time (%.1f s)", s);
    nn_server_free(srv);
    free(u);
}

/* ---- test 3: publishing while clients run -------------------------------------------- */
typedef struct {
    nn_server_t *srv;
    nn_net_t *nets[2];
    int rounds;
    int64_t last;
} publisher_t;

static void *publisher_main(void *arg) {
    publisher_t *p = arg;
    char err[512];
    for (int r = 0; r < p->rounds; r++) {
        compat_sleep_ms(15);
        int64_t want = nn_server_generation(p->srv) + 1;
        int which = net_of_gen(want);
        int64_t g = (r % 2 == 0) ? nn_server_publish_file(p->srv, t_path(which ? "b.safetensors" : "a.safetensors"), 0,
                                                           err, sizeof(err))
                                 : nn_server_publish_net(p->srv, p->nets[which], want, err, sizeof(err));
        if (g != want) TFAIL("publish round %d: got generation %lld, wanted %lld: %s", r, (long long)g,
                             (long long)want, err);
        p->last = g;
    }
    return NULL;
}

static void test_publish(nn_net_t *na, nn_net_t *nb) {
    fprintf(stderr, "-- publish while clients run\n");
    watch("publish", 900);
    char err[512];
    nn_server_config_t cfg = test_config(32, 2, 300);
    nn_server_t *srv = nn_server_new(&cfg, NULL, na, err, sizeof(err)); /* initial net from a net */
    KOMA_ASSERT(srv);
    atomic_int stop = 0;
    publisher_t pub = {srv, {na, nb}, 12, 0};
    compat_thread_t pt;
    KOMA_ASSERT(compat_thread_create(&pt, publisher_main, &pub) == 0);
    /* clients run until the publisher is done (then a little longer) */
    client_t cl[4];
    compat_thread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&cl[i], 0, sizeof(cl[i]));
        cl[i].srv = srv;
        cl[i].id = 10 + i;
        cl[i].max_n = 60;
        cl[i].stop = &stop;
        KOMA_ASSERT(compat_thread_create(&th[i], client_main, &cl[i]) == 0);
    }
    compat_thread_join(pt);
    compat_sleep_ms(30); /* some results from the last net */
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++) compat_thread_join(th[i]);
    int64_t r0 = 0, r1 = 0;
    for (int i = 0; i < 4; i++) {
        r0 += cl[i].results[0];
        r1 += cl[i].results[1];
    }
    nn_server_stats_t st;
    nn_server_stats(srv, &st);
    fprintf(stderr, "   %d publishes, generation %lld; tickets checked: %lld on net A, %lld on net B\n",
            st.publishes, (long long)st.generation, (long long)r0, (long long)r1);
    CHECK(st.publishes == 12 && st.generation == 13 && pub.last == 13);
    CHECK(r0 > 0 && r1 > 0);
    CHECK(st.failed == 0);

    /* bad publishes: nothing changes, the current net keeps serving */
    const char *bad = t_path("corrupt.safetensors");
    int64_t g = nn_server_publish_file(srv, bad, 0, err, sizeof(err));
    fprintf(stderr, "   corrupt file -> %s\n", err);
    CHECK(g == -1 && strstr(err, bad) != NULL);
    g = nn_server_publish_file(srv, t_path("missing.safetensors"), 0, err, sizeof(err));
    fprintf(stderr, "   missing file -> %s\n", err);
    CHECK(g == -1 && strstr(err, "missing.safetensors") != NULL);
    g = nn_server_publish_file(srv, t_path("other.safetensors"), 0, err, sizeof(err));
    fprintf(stderr, "   other net    -> %s\n", err);
    CHECK(g == -1 && strstr(err, "other.safetensors") != NULL);
    g = nn_server_publish_net(srv, nb, 5, err, sizeof(err));
    fprintf(stderr, "   old gen      -> %s\n", err);
    CHECK(g == -1);
    CHECK(nn_server_generation(srv) == 13);
    client_t one;
    run_clients(srv, 1, 10, 60, NULL, &one);
    CHECK(one.results[0] == 10 && one.last_gen == 13); /* gen 13 is net A */
    nn_server_free(srv);
}

/* ---- test 4: shutdown with pending and blocked requests ---------------------------------- */
typedef struct {
    nn_server_t *srv;
    sub_t *u;
    int count;
    int ok, stopped, other;
} blocked_t;

static void *blocked_main(void *arg) {
    blocked_t *b = arg;
    char err[256];
    for (int i = 0; i < b->count; i++) {
        int st = nn_server_submit(b->srv, &b->u[i].req, &b->u[i].ticket, err, sizeof(err));
        if (st == NN_SERVER_ESTOPPED) {
            b->stopped++;
            b->u[i].ticket = 0;
        } else if (st != NN_SERVER_OK) {
            b->other++;
        }
    }
    for (int i = 0; i < b->count; i++) {
        if (!b->u[i].ticket) continue;
        nn_server_result_t res;
        int st = nn_server_wait(b->srv, b->u[i].ticket, &res);
        if (st == NN_SERVER_OK) b->ok++;
        else if (st == NN_SERVER_ESTOPPED && strstr(res.message, "stopped")) b->stopped++;
        else b->other++;
    }
    return NULL;
}

static void test_shutdown(void) {
    fprintf(stderr, "-- shutdown with pending and blocked requests\n");
    char err[512];
    uint64_t rng = 77;
    for (int drain = 0; drain < 2; drain++) {
        watch(drain ? "shutdown (drain)" : "shutdown", 300);
        /* gather 30 s, batches of 256 that never fill, 4 tickets at most: the
         * requests sit in the queue and the 5th submit of each client blocks */
        nn_server_config_t cfg = test_config(256, 2, 30000000);
        cfg.max_tickets = 4;
        cfg.queue_positions = 200;
        nn_server_t *srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
        KOMA_ASSERT(srv);
        blocked_t b[3];
        compat_thread_t th[3];
        for (int t = 0; t < 3; t++) {
            memset(&b[t], 0, sizeof(b[t]));
            b[t].srv = srv;
            b[t].count = 3;
            b[t].u = malloc(sizeof(sub_t) * 3);
            for (int i = 0; i < 3; i++) sub_make(&b[t].u[i], &rng, 10, 1);
            KOMA_ASSERT(compat_thread_create(&th[t], blocked_main, &b[t]) == 0);
        }
        /* wait until the queue is full (4 tickets, the rest blocked) */
        for (int k = 0; k < 200; k++) {
            nn_server_stats_t st;
            nn_server_stats(srv, &st);
            if (st.submissions >= 4) break;
            compat_sleep_ms(10);
        }
        compat_sleep_ms(50);
        int64_t t0 = compat_now_ns();
        nn_server_stop(srv, drain);
        for (int t = 0; t < 3; t++) compat_thread_join(th[t]);
        double ms = (double)(compat_now_ns() - t0) * 1e-6;
        int ok = 0, stopped = 0, other = 0;
        for (int t = 0; t < 3; t++) {
            ok += b[t].ok;
            stopped += b[t].stopped;
            other += b[t].other;
        }
        fprintf(stderr, "   stop(drain=%d): %.0f ms; %d completed, %d stopped, %d other\n", drain, ms, ok,
                stopped, other);
        CHECK(ok + stopped == 9 && other == 0);
        if (drain) CHECK(ok == 4);   /* the 4 queued ran, the blocked 5 were refused */
        else CHECK(ok == 0 && stopped == 9);
        sub_t *u = &b[0].u[0];
        nn_server_ticket_t t;
        CHECK(nn_server_submit(srv, &u->req, &t, err, sizeof(err)) == NN_SERVER_ESTOPPED);
        nn_server_stats_t st;
        nn_server_stats(srv, &st);
        CHECK(st.failed == (drain ? 0 : 4));
        nn_server_free(srv);
        for (int t2 = 0; t2 < 3; t2++) free(b[t2].u);
    }

    /* free with clients still blocked in wait: they return, free returns */
    watch("free while waiting", 300);
    nn_server_config_t cfg = test_config(256, 1, 30000000);
    nn_server_t *srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    KOMA_ASSERT(srv);
    blocked_t b = {srv, malloc(sizeof(sub_t)), 1, 0, 0, 0};
    sub_make(&b.u[0], &rng, 5, 0);
    compat_thread_t th;
    KOMA_ASSERT(compat_thread_create(&th, blocked_main, &b) == 0);
    for (int k = 0; k < 500; k++) { /* the client is inside nn_server_wait soon after it submitted */
        nn_server_stats_t st;
        nn_server_stats(srv, &st);
        if (st.submissions == 1) break;
        compat_sleep_ms(10);
    }
    compat_sleep_ms(200);
    nn_server_free(srv); /* stops, fails the ticket, waits for the client to leave wait */
    compat_thread_join(th);
    CHECK(b.stopped == 1);
    free(b.u);
}

/* ---- test 5: bad requests and tickets ------------------------------------------------------ */
static void test_bad_requests(void) {
    fprintf(stderr, "-- bad requests and tickets\n");
    watch("bad requests", 300);
    char err[512];
    uint64_t rng = 9;
    nn_server_config_t cfg = test_config(32, 1, 0);
    nn_server_t *srv = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    KOMA_ASSERT(srv);
    sub_t *u = malloc(sizeof(sub_t));
    nn_server_ticket_t t;
    sub_make(u, &rng, 4, 1);
    u->labels[0] = NN_POLICY_NB;
    u->offsets[1] = u->offsets[1] ? u->offsets[1] : 1;
    for (int i = 2; i <= 4; i++)
        if (u->offsets[i] < u->offsets[1]) u->offsets[i] = u->offsets[1];
    CHECK(nn_server_submit(srv, &u->req, &t, err, sizeof(err)) == NN_SERVER_EINVAL && t == 0);
    fprintf(stderr, "   label 2187   -> %s\n", err);
    CHECK(strstr(err, "2187") != NULL);
    sub_make(u, &rng, 4, 1);
    u->offsets[2] = u->offsets[1] + 5;
    u->offsets[3] = u->offsets[2] - 1;
    CHECK(nn_server_submit(srv, &u->req, &t, err, sizeof(err)) == NN_SERVER_EINVAL);
    fprintf(stderr, "   offsets      -> %s\n", err);
    sub_make(u, &rng, 4, 0);
    u->req.n = 0;
    CHECK(nn_server_submit(srv, &u->req, &t, err, sizeof(err)) == NN_SERVER_EINVAL);
    u->req.n = 4;
    u->req.hand = NULL;
    CHECK(nn_server_submit(srv, &u->req, &t, err, sizeof(err)) == NN_SERVER_EINVAL);
    fprintf(stderr, "   no hand      -> %s\n", err);
    u->req.hand = u->hand;
    CHECK(nn_server_submit(srv, &u->req, &t, err, sizeof(err)) == NN_SERVER_OK);
    nn_server_result_t res;
    CHECK(nn_server_wait(srv, t, &res) == NN_SERVER_OK);
    CHECK(nn_server_wait(srv, t, &res) == NN_SERVER_EINVAL);  /* consumed */
    CHECK(nn_server_poll(srv, t + 12345, &res) == NN_SERVER_EINVAL);
    CHECK(nn_server_poll(srv, 0, &res) == NN_SERVER_EINVAL);
    CHECK(sub_mismatches(u, 0, NULL) == 0);
    /* bad configurations */
    cfg.backend = "tpu";
    CHECK(nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err)) == NULL);
    fprintf(stderr, "   backend tpu  -> %s\n", err);
    cfg = test_config(32, 1, 0);
    CHECK(nn_server_new(&cfg, t_path("corrupt.safetensors"), NULL, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "corrupt.safetensors") != NULL);
    cfg.backend = "auto"; /* no device here (or a CUDA build on a GPU box): either works */
    nn_server_t *s2 = nn_server_new(&cfg, t_path("a.safetensors"), NULL, err, sizeof(err));
    if (s2) fprintf(stderr, "   auto         -> %s\n", nn_server_backend_name(s2));
    else fprintf(stderr, "   auto         -> %s\n", err);
    nn_server_free(s2);
    nn_server_free(srv);
    free(u);
}

/* ---- the moves-left head ----------------------------------------------------------- */
/* Submits rows [0, n) of the pool asking for value and moves left; 0 or -1. */
static int eval_ml(nn_server_t *srv, int32_t n, float *value, float *ml) {
    nn_server_request_t r = {0};
    r.n = n;
    r.packed = g_packed;
    r.hand = g_hand;
    r.value = value;
    r.moves_left = ml;
    nn_server_result_t res;
    int st = nn_server_eval(srv, &r, &res);
    CHECKF(st == NN_SERVER_OK, "moves-left request: %s: %s", nn_server_status_name(st), res.message);
    return st == NN_SERVER_OK ? 0 : -1;
}

static void test_moves_left(nn_backend_t *be, nn_net_t *plain) {
    fprintf(stderr, "-- moves-left head: plies == nn_forward_out on both routes, NAN without the head\n");
    watch("moves left", 300);
    enum { N = 90 };
    char err[512];
    nn_net_t *net = random_net_heads(be, 33, NN_HEAD_MOVES_LEFT);
    /* small weights and a bias that keep most outputs above the clamp at 0 */
    int32_t bi = nn_net_tensor_find(net, "moves_left.fc2.bias"), wi = nn_net_tensor_find(net, "moves_left.fc2.weight");
    CHECK(bi >= 0 && wi >= 0);
    if (bi >= 0 && wi >= 0) {
        nn_net_tensor_data(net, bi)[0] = 2.0f;
        float *w = nn_net_tensor_data(net, wi);
        for (int64_t k = 0; k < nn_net_tensor(net, wi)->numel; k++) w[k] *= 0.1f;
    }
    nn_net_mark_dirty(net);
    nn_ctx_t *ctx = nn_ctx_new(net, be, N, err, sizeof err);
    KOMA_ASSERT(ctx);
    static float ref_ml[N], ref_v[N * NN_VALUE_NB], ml[N], v[N * NN_VALUE_NB];
    nn_outputs_t out = {.value = ref_v, .moves_left = ref_ml};
    CHECK(nn_forward_out(ctx, N, g_packed, g_hand, &out) == 0);
    nn_ctx_free(ctx);
    int positive = 0;
    for (int i = 0; i < N; i++) positive += ref_ml[i] > 0.0f;
    CHECKF(positive > N / 2, "only %d of %d reference plies above 0", positive, N);
    for (int staged = 0; staged < 2; staged++) {
        compat_setenv("KOMA_SERVER_STAGED", staged ? "1" : "0");
        nn_server_config_t cfg = test_config(40, 2, 0);
        nn_server_t *srv = nn_server_new(&cfg, NULL, net, err, sizeof err);
        compat_setenv("KOMA_SERVER_STAGED", "0");
        if (!srv) {
            TFAIL("nn_server_new (moves-left net): %s", err);
            continue;
        }
        CHECK(nn_server_net_config(srv)->heads == NN_HEAD_MOVES_LEFT);
        for (int i = 0; i < N; i++) ml[i] = -7.0f;
        if (eval_ml(srv, N, v, ml) == 0) {
            int bad = 0;
            for (int i = 0; i < N; i++) bad += !(ml[i] >= 0.0f && close_enough(ml[i], ref_ml[i]));
            CHECKF(bad == 0, "%s route: %d of %d moves-left answers differ from nn_forward_out", staged ? "staged" : "host",
                   bad, N);
        }
        /* not asked: the value alone, and the same values */
        static float v2[N * NN_VALUE_NB];
        if (eval_ml(srv, N, v2, NULL) == 0) {
            int bad = 0;
            for (int i = 0; i < N * NN_VALUE_NB; i++) bad += !close_enough(v2[i], ref_v[i]);
            CHECKF(bad == 0, "value without moves left: %d differ", bad);
        }
        /* a net without the head cannot be published into it, nor the other way */
        CHECK(nn_server_publish_net(srv, plain, 0, err, sizeof err) < 0);
        nn_server_free(srv);
    }
    /* a net without the head: NAN for every position, the ticket succeeds */
    nn_server_config_t cfg = test_config(40, 1, 0);
    nn_server_t *srv = nn_server_new(&cfg, NULL, plain, err, sizeof err);
    if (srv) {
        CHECK(nn_server_net_config(srv)->heads == 0);
        for (int i = 0; i < N; i++) ml[i] = 1.0f;
        if (eval_ml(srv, N, v, ml) == 0) {
            int nan = 0;
            for (int i = 0; i < N; i++) nan += isnan(ml[i]);
            CHECKF(nan == N, "net without the head: %d of %d answers NAN", nan, N);
        }
        CHECKF(nn_server_publish_net(srv, net, 0, err, sizeof err) < 0 && strstr(err, "m "),
               "publishing a moves-left net into a server of a plain one: %s", err);
        nn_server_free(srv);
    } else {
        TFAIL("nn_server_new (plain net): %s", err);
    }
    nn_net_free(net);
}

int main(void) {
    /* BLAS on one thread: the server's workers are the parallelism here, and
     * OpenBLAS's own thread pool confuses ThreadSanitizer. The variable only
     * matters to a BLAS that reads it lazily; what counts is that every
     * backend here is made with one thread (test_config: cpu_threads = streams). */
    compat_setenv("OPENBLAS_NUM_THREADS", "1");
    t_scratch("nn_server");
    char err[512];
    compat_thread_t wd;
    KOMA_ASSERT(compat_thread_create(&wd, watchdog_main, NULL) == 0);

    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *na = random_net(be, 11), *nb = random_net(be, 22);
    make_pool();
    make_refs(na, 0, be);
    make_refs(nb, 1, be);
    KOMA_ASSERT(nn_weights_save(na, NULL, t_path("a.safetensors"), err, sizeof(err)) == 0);
    KOMA_ASSERT(nn_weights_save(nb, NULL, t_path("b.safetensors"), err, sizeof(err)) == 0);
    {   /* a corrupt copy of b (one flipped byte near the end: a checksum fails) */
        size_t len;
        char *data = compat_read_file(t_path("b.safetensors"), &len, err, sizeof(err));
        KOMA_ASSERT(data && len > 100);
        data[len - 10] ^= 0x5a;
        FILE *f = fopen(t_path("corrupt.safetensors"), "wb");
        KOMA_ASSERT(f && fwrite(data, 1, len, f) == len);
        fclose(f);
        free(data);
        /* a valid file of another net */
        nn_net_config_t c = small_config();
        c.channels = 8;
        nn_net_t *other = nn_net_new(be, &c, 3, err, sizeof(err));
        KOMA_ASSERT(other && nn_weights_save(other, NULL, t_path("other.safetensors"), err, sizeof(err)) == 0);
        nn_net_free(other);
    }
    /* the two nets must disagree everywhere that matters */
    CHECK(!close_enough(g_ref_value[0][0], g_ref_value[1][0]));

    test_many_clients();
    test_staged_route();
    test_lone_client_and_fifo();
    test_cpu_workers_share();
    test_publish(na, nb);
    test_shutdown();
    test_bad_requests();
    test_moves_left(be, na);

    atomic_store(&g_watch_quit, 1);
    compat_thread_join(wd);
    nn_net_free(na);
    nn_net_free(nb);
    nn_backend_free(be);
    for (int i = 0; i < 2; i++) {
        free(g_ref_value[i]);
        free(g_ref_policy[i]);
        free(g_ref_legal[i]);
    }
    free(g_packed);
    free(g_hand);
    t_rm_rf(t_dir);
    return t_done("test_server");
}
