/* test_nn_late.c - the training step one step late (nn_train_step_launch,
 * nn_train_step_metrics): on a backend whose downloads really arrive late
 * (tests/nn/nn_late.h: copies land at the fence that covers them, NaN
 * before) and on the plain CPU backend, launching step s + 1 before reading
 * step s gives the metrics (bit for bit, each named by its step), weights,
 * momentum, BN statistics and step count of nn_train_step in turn; records
 * read in either order; a third unread launch and an unknown step are
 * refused; a failure after a record was queued behind a fence fails its
 * read, while a record already downloaded stays readable; a NaN injected
 * into the last step shows in that step's late metrics. */
#include "nn_test.h"

#include "nn/fault.h"
#include "tests/nn/nn_late.h"

#define STEPS 7
#define MAXB 8

static const nn_net_config_t CFG = {.blocks = 1, .channels = 8, .act = NN_ACT_RELU, .in_planes = 6, .in_hand = 2,
                                    .features_version = 1};

static nn_optim_t *make(nn_backend_t *be, nn_net_t **net) {
    char err[256];
    *net = nn_net_new(be, &CFG, 21, err, sizeof err);
    KOMA_ASSERT(*net);
    nn_train_config_t tc = nn_train_config_default();
    tc.lr = 0.05f, tc.warmup_steps = 3, tc.clip_norm = 0.5f; /* warmup: a different lr every step */
    nn_optim_t *tr = nn_optim_new(*net, &tc, MAXB, err, sizeof err);
    KOMA_ASSERT(tr);
    return tr;
}

static void set_fault(const char *spec) {
    char e[256];
    KOMA_ASSERT(nn_fault_set(spec, e, sizeof e) == 0);
}

static int same(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* Net and optimizer state of a and b, bit for bit. */
static int same_state(nn_optim_t *a, nn_optim_t *b) {
    int64_t np, ns;
    nn_net_t *na = nn_optim_net(a), *nb = nn_optim_net(b);
    float *pa = nn_net_params(na, &np, NULL), *pb = nn_net_params(nb, NULL, NULL);
    float *sa = nn_net_stats(na, &ns), *sb = nn_net_stats(nb, NULL);
    return same(pa, pb, sizeof(float) * (size_t)np) && same(sa, sb, sizeof(float) * (size_t)ns) &&
           same(nn_optim_momentum(a), nn_optim_momentum(b), sizeof(float) * (size_t)np) &&
           nn_optim_step_count(a) == nn_optim_step_count(b);
}

/* The wrapper itself: a late copy is NaN until its fence is waited for. */
static void test_wrapper(void) {
    nn_backend_t *be = t_late_backend_new(1, 1);
    float *dev = be->buf_alloc(be, 2 * sizeof(float));
    float *host = be->host_alloc(be, 2 * sizeof(float));
    float v[2] = {1.5f, -2.0f};
    be->upload(be, dev, v, sizeof v);
    be->download_async(be, host, dev, sizeof(float));
    be->fence_record(be, 2);
    float w[2] = {7.0f, 8.0f};
    be->upload(be, dev, w, sizeof w); /* later work does not change the queued copy */
    be->download_async(be, host + 1, dev + 1, sizeof(float));
    CHECK(isnan(host[0]) && isnan(host[1]));
    be->fence_wait(be, 2);
    CHECK(host[0] == 1.5f && isnan(host[1])); /* the second copy is behind the fence: still on its way */
    be->sync(be);
    CHECK(host[0] == 1.5f && host[1] == 8.0f);
    be->host_free(be, host);
    be->buf_free(be, dev);
    nn_backend_free(be);
}

static void test_same_as_sync(nn_backend_t *be, const char *name) {
    nn_backend_t *ref_be = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, NULL, 0);
    KOMA_ASSERT(ref_be);
    nn_net_t *na, *nb;
    nn_optim_t *ta = make(ref_be, &na), *tb = make(be, &nb);
    t_batch_t bt[STEPS];
    t_rng = 77;
    for (int s = 0; s < STEPS; s++) t_batch_init(&bt[s], 3 + s % (MAXB - 2), CFG.in_planes, CFG.in_hand, 3);
    for (int32_t b = 1; b <= bt[2].b.B; b++) bt[2].off[b] = 0; /* step 2: no policy target at all (NaN figures) */
    char err[512];
    nn_metrics_t ref[STEPS], got[STEPS];
    for (int s = 0; s < STEPS; s++) CHECK(nn_train_step(ta, &bt[s].b, &ref[s], err, sizeof err) == 0);
    CHECK(isnan(ref[2].policy_loss) && isfinite(ref[3].policy_loss));
    /* launch s, then read s - 1 */
    int64_t id[STEPS];
    for (int s = 0; s < STEPS; s++) {
        CHECKF(nn_train_step_launch(tb, &bt[s].b, &id[s], err, sizeof err) == 0, "%s: launch %d: %s", name, s, err);
        CHECK(id[s] == s + 1 && nn_optim_step_count(tb) == s + 1);
        if (s > 0) CHECK(nn_train_step_metrics(tb, id[s - 1], &got[s - 1], err, sizeof err) == 0);
        CHECK(nn_train_steps_pending(tb) == 1);
    }
    CHECK(nn_train_step_metrics(tb, id[STEPS - 1], &got[STEPS - 1], err, sizeof err) == 0);
    CHECK(nn_train_steps_pending(tb) == 0);
    for (int s = 0; s < STEPS; s++)
        CHECKF(same(&ref[s], &got[s], sizeof ref[s]), "%s: step %d: metrics differ (step %lld/%lld loss %.9g/%.9g, "
               "grad norm %.9g/%.9g, lr %g/%g)", name, s, (long long)ref[s].step, (long long)got[s].step, ref[s].loss,
               got[s].loss, ref[s].grad_norm, got[s].grad_norm, ref[s].lr, got[s].lr);
    CHECKF(same_state(ta, tb), "%s: weights, statistics or momentum differ from nn_train_step's", name);

    /* two records at once, read in reverse order; a third launch is refused */
    nn_metrics_t r1, r2, g1, g2;
    CHECK(nn_train_step(ta, &bt[0].b, &r1, err, sizeof err) == 0);
    CHECK(nn_train_step(ta, &bt[1].b, &r2, err, sizeof err) == 0);
    int64_t i1, i2, i3 = -5;
    CHECK(nn_train_step_launch(tb, &bt[0].b, &i1, err, sizeof err) == 0);
    CHECK(nn_train_step_launch(tb, &bt[1].b, &i2, err, sizeof err) == 0);
    CHECK(nn_train_steps_pending(tb) == 2);
    err[0] = 0;
    CHECKF(nn_train_step_launch(tb, &bt[2].b, &i3, err, sizeof err) == -1 && strstr(err, "not read") && i3 == -5,
           "%s: third launch: %s", name, err);
    CHECK(nn_optim_step_count(tb) == STEPS + 2);
    CHECK(nn_train_step_metrics(tb, i2, &g2, err, sizeof err) == 0);
    CHECK(nn_train_step_metrics(tb, i1, &g1, err, sizeof err) == 0);
    CHECK(same(&r1, &g1, sizeof r1) && same(&r2, &g2, sizeof r2) && g2.step == STEPS + 2);
    err[0] = 0;
    CHECK(nn_train_step_metrics(tb, i1, &g1, err, sizeof err) == -1 && strstr(err, "no metrics of step"));
    CHECK(same_state(ta, tb));

    /* a NaN in the last step's forward (its value logits) shows in its late read */
    CHECK(nn_train_step(ta, &bt[3].b, &r1, err, sizeof err) == 0);
    CHECK(nn_train_step_launch(tb, &bt[3].b, &i1, err, sizeof err) == 0);
    set_fault("dense_fwd:2:nan");
    CHECK(nn_train_step_launch(tb, &bt[4].b, &i2, err, sizeof err) == 0); /* queues without complaint */
    set_fault(NULL);
    CHECK(nn_train_step_metrics(tb, i1, &g1, err, sizeof err) == 0 && same(&r1, &g1, sizeof r1));
    CHECK(nn_train_step_metrics(tb, i2, &g2, err, sizeof err) == 0);
    CHECKF(!isfinite(g2.loss) && !isfinite(g2.value_loss) && g2.step == i2, "%s: NaN step: loss %g", name, g2.loss);

    for (int s = 0; s < STEPS; s++) t_batch_free(&bt[s]);
    nn_optim_free(ta);
    nn_optim_free(tb);
    nn_net_free(na);
    nn_net_free(nb);
    nn_backend_free(ref_be);
}

/* A failed op after a record was queued: behind a fence (late) its read
 * fails, since the copy may never have arrived; downloaded at launch (the
 * CPU) it stays readable. The failed launch is not counted. */
static void test_failure(nn_backend_t *be, int fenced) {
    nn_net_t *net;
    nn_optim_t *tr = make(be, &net);
    t_batch_t bt;
    t_batch_init(&bt, 5, CFG.in_planes, CFG.in_hand, 2);
    char err[512];
    int64_t i1, i2 = -1;
    CHECK(nn_train_step_launch(tr, &bt.b, &i1, err, sizeof err) == 0);
    set_fault("sgd_step:1");
    err[0] = 0;
    CHECK(nn_train_step_launch(tr, &bt.b, &i2, err, sizeof err) == -1 && strstr(err, "injected fault: sgd_step"));
    set_fault(NULL);
    CHECK(i2 == -1 && nn_optim_step_count(tr) == 1);
    nn_metrics_t m;
    err[0] = 0;
    int rc = nn_train_step_metrics(tr, i1, &m, err, sizeof err);
    if (fenced) CHECKF(rc == -1 && strstr(err, "backend failed"), "fenced record after a failure: %d %s", rc, err);
    else CHECKF(rc == 0 && isfinite(m.loss) && m.step == 1, "downloaded record after a failure: %d %s", rc, err);
    CHECK(nn_train_steps_pending(tr) == 0);
    t_batch_free(&bt);
    nn_optim_free(tr);
    nn_net_free(net);
}

int main(void) {
    test_wrapper();
    nn_backend_t *late = t_late_backend_new(1, 1);
    test_same_as_sync(late, "late");
    t_late_be_t *L = t_late_of(late);
    fprintf(stderr, "late backend: %lld async copies, %lld fence waits, %lld delivered, %lld host allocations\n",
            (long long)L->asyncs, (long long)L->waits, (long long)L->delivered, (long long)L->host_allocs);
    CHECK(L->asyncs == STEPS + 4 && L->waits == STEPS + 4 && L->delivered == L->asyncs && L->host_allocs == 1);
    nn_backend_free(late);
    nn_backend_t *cpu = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, NULL, 0);
    test_same_as_sync(cpu, "cpu");
    nn_backend_free(cpu);
    late = t_late_backend_new(1, 1);
    test_failure(late, 1);
    nn_backend_free(late);
    cpu = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, NULL, 0);
    test_failure(cpu, 0);
    nn_backend_free(cpu);
    return t_done("test_nn_late");
}
