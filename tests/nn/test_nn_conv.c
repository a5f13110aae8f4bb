/* test_nn_conv.c - the fast convolution routes of the CPU backend (oneDNN;
 * Winograd F(3x3, 3x3) over oneDNN or the reference) against the im2col + GEMM
 * reference route: every convolution op (forward with and
 * without bias, backward data overwrite and accumulate, backward weights with
 * and without bias), the fused inference unit (bias + residual + ReLU/SiLU),
 * on shapes that include batch 1, odd batches and the net's real shapes; then
 * whole nets (logits and value of inference, loss and every gradient of a
 * training step, the weights after several steps); then that two instances
 * with one thread each run side by side instead of one after the other. The
 * shapes include ones the Winograd route takes (3x3, output channels a
 * multiple of 16) and ones it passes to the route below it. The oneDNN route
 * is skipped when built without oneDNN. */
#include "nn_test.h"

#include <stdatomic.h>

static nn_backend_t *ref, *fast;
static nn_cpu_conv_t route;

typedef struct {
    int32_t B, cin, cout, k;
} shape_t;

static float *randn(int64_t n, float scale) {
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    t_fill_randn(p, n, scale);
    return p;
}

/* Forward, backward data (= and +=), backward weights (with/without bias). */
static void test_conv_ops(shape_t s) {
    int64_t nx = (int64_t)s.B * s.cin * NN_HW, ny = (int64_t)s.B * s.cout * NN_HW;
    int64_t nw = (int64_t)s.cout * s.cin * s.k * s.k;
    float *x = randn(nx, 1), *w = randn(nw, 0.3f), *bias = randn(s.cout, 1), *dy = randn(ny, 1);
    float *a = malloc(sizeof(float) * (size_t)(nx > ny ? nx : ny)), *r = malloc(sizeof(float) * (size_t)(nx > ny ? nx : ny));
    float *dwa = malloc(sizeof(float) * (size_t)nw), *dwr = malloc(sizeof(float) * (size_t)nw);
    float *dba = malloc(sizeof(float) * (size_t)s.cout), *dbr = malloc(sizeof(float) * (size_t)s.cout);
    void *ws = ref->buf_alloc(ref, ref->conv_ws_bytes(ref, s.B, s.cin, s.cout, s.k));
    void *wsd = fast->buf_alloc(fast, fast->conv_ws_bytes(fast, s.B, s.cin, s.cout, s.k));
    /* sums of cin*k*k products of N(0,1) x N(0, 0.09): |y| ~ 0.3*sqrt(K) */
    double K = (double)s.cin * s.k * s.k, atol = 2e-6 * K, rtol = 1e-4;
    char what[128];
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        ref->conv_fwd(ref, x, w, with_bias ? bias : NULL, s.B, s.cin, s.cout, s.k, r, ws);
        fast->conv_fwd(fast, x, w, with_bias ? bias : NULL, s.B, s.cin, s.cout, s.k, a, wsd);
        snprintf(what, sizeof(what), "fwd B%d %d->%d k%d%s", s.B, s.cin, s.cout, s.k, with_bias ? " bias" : "");
        t_compare(what, a, r, ny, atol, rtol);
    }
    double Ko = (double)s.cout * s.k * s.k;
    for (int acc = 0; acc < 2; acc++) {
        for (int64_t i = 0; i < nx; i++) a[i] = r[i] = 0.5f + (float)(i % 7); /* kept when accumulating */
        ref->conv_bwd_data(ref, dy, w, s.B, s.cin, s.cout, s.k, r, acc, ws);
        fast->conv_bwd_data(fast, dy, w, s.B, s.cin, s.cout, s.k, a, acc, wsd);
        snprintf(what, sizeof(what), "bwd-data B%d %d->%d k%d%s", s.B, s.cin, s.cout, s.k, acc ? " +=" : "");
        t_compare(what, a, r, nx, 2e-6 * Ko, rtol);
    }
    double N = (double)s.B * NN_HW;
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        for (int32_t o = 0; o < s.cout; o++) dba[o] = dbr[o] = 1e9f; /* must be overwritten */
        ref->conv_bwd_filter(ref, x, dy, s.B, s.cin, s.cout, s.k, dwr, with_bias ? dbr : NULL, ws);
        fast->conv_bwd_filter(fast, x, dy, s.B, s.cin, s.cout, s.k, dwa, with_bias ? dba : NULL, wsd);
        snprintf(what, sizeof(what), "bwd-weights B%d %d->%d k%d", s.B, s.cin, s.cout, s.k);
        t_compare(what, dwa, dwr, nw, 1e-5 * N, rtol);
        if (with_bias) {
            snprintf(what, sizeof(what), "bwd-bias B%d %d->%d k%d", s.B, s.cin, s.cout, s.k);
            t_compare(what, dba, dbr, s.cout, 1e-5 * N, rtol);
        }
    }
    ref->buf_free(ref, ws);
    fast->buf_free(fast, wsd);
    free(x), free(w), free(bias), free(dy), free(a), free(r), free(dwa), free(dwr), free(dba), free(dbr);
}

/* The fused inference unit against the reference's conv_fwd + act_fwd. */
static void test_fused(shape_t s, nn_act_t act, int with_res) {
    int64_t nx = (int64_t)s.B * s.cin * NN_HW, ny = (int64_t)s.B * s.cout * NN_HW;
    int64_t nw = (int64_t)s.cout * s.cin * s.k * s.k;
    float *x = randn(nx, 1), *w = randn(nw, 0.3f), *bias = randn(s.cout, 1), *res = randn(ny, 1);
    float *a = malloc(sizeof(float) * (size_t)ny), *r = malloc(sizeof(float) * (size_t)ny);
    void *ws = ref->buf_alloc(ref, ref->conv_ws_bytes(ref, s.B, s.cin, s.cout, s.k));
    CHECK(fast->conv_fwd_act != NULL);
    ref->conv_fwd(ref, x, w, bias, s.B, s.cin, s.cout, s.k, r, ws);
    ref->act_fwd(ref, r, with_res ? res : NULL, ny, act, r);
    for (int rep = 0; rep < 2; rep++) { /* the second call reuses the cached primitive */
        memset(a, 0xff, sizeof(float) * (size_t)ny);
        fast->conv_fwd_act(fast, x, w, bias, with_res ? res : NULL, s.B, s.cin, s.cout, s.k, act, a, ws, 0);
        char what[128];
        snprintf(what, sizeof(what), "fused B%d %d->%d k%d %s%s #%d", s.B, s.cin, s.cout, s.k,
                 nn_act_name(act), with_res ? " +res" : "", rep);
        t_compare(what, a, r, ny, 2e-6 * s.cin * s.k * s.k, 1e-4);
    }
    ref->buf_free(ref, ws);
    free(x), free(w), free(bias), free(res), free(a), free(r);
}

/* A chain in the native layout: plain x -> unit A (native out) -> unit B
 * (native in, out and residual = A's output) -> 1x1 head without activation
 * (native in, NCHW out): only the end is compared, as only it is NCHW. */
static void test_native_chain(int32_t B, int32_t cin, int32_t C, nn_act_t act) {
    int64_t nx = (int64_t)B * cin * NN_HW, nh = (int64_t)B * C * NN_HW, no = (int64_t)B * 27 * NN_HW;
    float *x = randn(nx, 1), *wa = randn((int64_t)C * cin * 9, 0.2f), *wb = randn((int64_t)C * C * 9, 0.2f);
    float *wo = randn((int64_t)27 * C, 0.2f), *ba = randn(C, 1), *bb = randn(C, 1), *bo = randn(27, 1);
    float *ra = malloc(sizeof(float) * (size_t)nh), *rb = malloc(sizeof(float) * (size_t)nh);
    float *da = malloc(sizeof(float) * (size_t)nh), *db = malloc(sizeof(float) * (size_t)nh);
    float *ro = malloc(sizeof(float) * (size_t)no), *dout = malloc(sizeof(float) * (size_t)no);
    size_t wsb = ref->conv_ws_bytes(ref, B, cin > C ? cin : C, C, 3);
    void *ws = ref->buf_alloc(ref, wsb);
    ref->conv_fwd(ref, x, wa, ba, B, cin, C, 3, ra, ws);
    ref->act_fwd(ref, ra, NULL, nh, act, ra);
    ref->conv_fwd(ref, ra, wb, bb, B, C, C, 3, rb, ws);
    ref->act_fwd(ref, rb, ra, nh, act, rb);
    ref->conv_fwd(ref, rb, wo, bo, B, C, 27, 1, ro, ws);
    fast->conv_fwd_act(fast, x, wa, ba, NULL, B, cin, C, 3, act, da, ws, NN_CONV_Y_NATIVE);
    fast->conv_fwd_act(fast, da, wb, bb, da, B, C, C, 3, act, db, ws, NN_CONV_X_NATIVE | NN_CONV_Y_NATIVE);
    fast->conv_fwd_act(fast, db, wo, bo, NULL, B, C, 27, 1, act, dout, ws, NN_CONV_X_NATIVE | NN_CONV_NO_ACT);
    char what[128];
    snprintf(what, sizeof(what), "native chain B%d %d->%d %s", B, cin, C, nn_act_name(act));
    t_compare(what, dout, ro, no, 2e-5 * C * 9, 1e-4);
    ref->buf_free(ref, ws);
    free(x), free(wa), free(wb), free(wo), free(ba), free(bb), free(bo);
    free(ra), free(rb), free(da), free(db), free(ro), free(dout);
}

/* ---- whole nets ------------------------------------------------------------------ */
/* The parameters of a ReLU net after a step on both routes: a ReLU whose
 * input sits within rounding of 0 takes the other branch on one route and
 * moves the gradients that flow through it (the same chaos as the gradient
 * check below; seen after the default value target changed: 4 of 430,832
 * elements, relative L2 5.5e-6), so a few elements may differ by more than
 * rounding; a wrong route moves most of them. At most 0.1% of the elements
 * outside the elementwise bound, and the whole tensor within a relative L2
 * of 5e-5. */
static void kink_compare(const char *what, const float *a, const float *ref, int64_t n) {
    int64_t bad = 0;
    double dd = 0, rr = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]);
        bad += !(d <= 1e-5 + 1e-4 * fabs((double)ref[i]));
        dd += d * d, rr += (double)ref[i] * ref[i];
    }
    double rel = sqrt(dd / fmax(rr, 1e-30));
    CHECKF(bad <= n / 1000 && rel < 5e-5, "%s: %lld of %lld elements outside 1e-5 + 1e-4 |x|, relative L2 %.2e", what,
           (long long)bad, (long long)n, rel);
    fprintf(stderr, "%-36s n=%-8lld outside %lld, relative L2 %.2e\n", what, (long long)n, (long long)bad, rel);
}

static void test_net(int32_t blocks, int32_t ch, nn_act_t act, int32_t B) {
    t_seed(0x5EED0000u + (uint64_t)(blocks * 1000 + ch * 10 + B)); /* the same data for every route */
    nn_net_config_t cfg = {.blocks = blocks, .channels = ch, .act = act, .in_planes = 68, .in_hand = 14,
                           .features_version = 1};
    char err[256];
    nn_net_t *nr = nn_net_new(ref, &cfg, 11, err, sizeof(err)), *nd = nn_net_new(fast, &cfg, 11, err, sizeof(err));
    KOMA_ASSERT(nr && nd);
    nn_train_config_t tc = nn_train_config_default();
    tc.warmup_steps = 0;
    nn_optim_t *tr = nn_optim_new(nr, &tc, B, err, sizeof(err)), *td = nn_optim_new(nd, &tc, B, err, sizeof(err));
    KOMA_ASSERT(tr && td);
    t_batch_t tb;
    t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 4);
    char what[128];
    /* a few steps so BN statistics and weights move away from their init; each
     * step starts both sides from the same state (a 1e-7 difference can flip a
     * ReLU whose input is near 0 and then grows with every step: chaos, not a bug) */
    nn_metrics_t mr, md;
    int64_t np, ns;
    float *pr = nn_net_params(nr, &np, NULL), *pd = nn_net_params(nd, NULL, NULL);
    float *sr = nn_net_stats(nr, &ns), *sd = nn_net_stats(nd, NULL);
    for (int step = 0; step < 3; step++) {
        KOMA_ASSERT(nn_train_step(tr, &tb.b, &mr, err, sizeof(err)) == 0);
        KOMA_ASSERT(nn_train_step(td, &tb.b, &md, err, sizeof(err)) == 0);
        snprintf(what, sizeof(what), "net %dx%d %s B%d loss step %d", blocks, ch, nn_act_name(act), B, step);
        t_compare(what, &(float){(float)md.loss}, &(float){(float)mr.loss}, 1, 1e-4, 1e-4);
        snprintf(what, sizeof(what), "net %dx%d %s B%d params after step %d", blocks, ch, nn_act_name(act), B, step);
        if (act == NN_ACT_RELU)
            kink_compare(what, pd, pr, np);
        else
            t_compare(what, pd, pr, np, 1e-5, 1e-4);
        snprintf(what, sizeof(what), "net %dx%d %s B%d BN statistics after step %d", blocks, ch, nn_act_name(act), B, step);
        t_compare(what, sd, sr, ns, 1e-5, 1e-4);
        memcpy(pd, pr, sizeof(float) * (size_t)np);
        memcpy(sd, sr, sizeof(float) * (size_t)ns);
        memcpy(nn_optim_momentum(td), nn_optim_momentum(tr), sizeof(float) * (size_t)np);
        nn_net_mark_dirty(nd);
    }
    /* the same weights on both sides, then one gradient */
    KOMA_ASSERT(nn_train_grad(tr, &tb.b, &mr, err, sizeof(err)) == 0);
    KOMA_ASSERT(nn_train_grad(td, &tb.b, &md, err, sizeof(err)) == 0);
    float *gr = nn_optim_grads(tr), *gd = nn_optim_grads(td);
    /* relative L2 error: a ReLU whose input sits within rounding of 0 takes the
     * other branch on one route and moves a few hundred gradients by ~1e-4
     * (seen on both fast routes against the reference, with the two fast
     * routes agreeing); a wrong convolution moves all of them */
    double dd = 0, rr = 0;
    for (int64_t i = 0; i < np; i++) dd += ((double)gd[i] - gr[i]) * ((double)gd[i] - gr[i]), rr += (double)gr[i] * gr[i];
    double rel = sqrt(dd / fmax(rr, 1e-30)), gtol = act == NN_ACT_RELU ? 1e-2 : 1e-3;
    CHECKF(rel < gtol, "net %dx%d %s B%d gradients: relative L2 error %.2e", blocks, ch, nn_act_name(act), B, rel);
    fprintf(stderr, "net %dx%d %s B%d gradients: relative L2 error %.2e\n", blocks, ch, nn_act_name(act), B, rel);
    /* inference with folded BN */
    nn_ctx_t *cr = nn_ctx_new(nr, NULL, B, err, sizeof(err)), *cd = nn_ctx_new(nd, NULL, B, err, sizeof(err));
    KOMA_ASSERT(cr && cd);
    int64_t np_ = (int64_t)B * NN_POLICY_NB;
    float *polr = malloc(sizeof(float) * (size_t)np_), *pold = malloc(sizeof(float) * (size_t)np_);
    float *legr = malloc(sizeof(float) * (size_t)np_), *legd = malloc(sizeof(float) * (size_t)np_);
    float *valr = malloc(sizeof(float) * (size_t)B * 3), *vald = malloc(sizeof(float) * (size_t)B * 3);
    nn_forward(cr, B, tb.planes, tb.hand, polr, valr, legr);
    nn_forward(cd, B, tb.planes, tb.hand, pold, vald, legd);
    snprintf(what, sizeof(what), "net %dx%d %s B%d policy logits", blocks, ch, nn_act_name(act), B);
    t_compare(what, pold, polr, np_, 1e-3, 1e-3);
    snprintf(what, sizeof(what), "net %dx%d %s B%d legal logits", blocks, ch, nn_act_name(act), B);
    t_compare(what, legd, legr, np_, 1e-3, 1e-3);
    snprintf(what, sizeof(what), "net %dx%d %s B%d value logits", blocks, ch, nn_act_name(act), B);
    t_compare(what, vald, valr, (int64_t)B * 3, 1e-3, 1e-3);
    free(polr), free(pold), free(legr), free(legd), free(valr), free(vald);
    nn_ctx_free(cr), nn_ctx_free(cd);
    t_batch_free(&tb);
    nn_optim_free(tr), nn_optim_free(td);
    nn_net_free(nr), nn_net_free(nd);
}

/* ---- threads: two 1-thread instances on two threads overlap ----------------------- */
typedef struct {
    nn_backend_t *be;
    float *x, *w, *y;
    void *ws;
    int iters;
    double secs;
    int64_t cpu_ns; /* the running thread's own CPU time */
} spin_t;

static void spin_run(spin_t *s) {
    uint64_t t0 = compat_now_ns();
    int64_t c0 = compat_thread_cpu_time_ns();
    for (int i = 0; i < s->iters; i++)
        s->be->conv_fwd(s->be, s->x, s->w, NULL, 64, 64, 64, 3, s->y, s->ws);
    s->cpu_ns = compat_thread_cpu_time_ns() - c0;
    s->secs = (double)(compat_now_ns() - t0) * 1e-9;
}
static void *spin_thread(void *p) {
    spin_run(p);
    return NULL;
}

static double wall_seconds_of(spin_t *s, int n, int parallel) {
    uint64_t t0 = compat_now_ns();
    if (parallel) {
        compat_thread_t th[2];
        for (int i = 0; i < n; i++) KOMA_ASSERT(compat_thread_create(&th[i], spin_thread, &s[i]) == 0);
        for (int i = 0; i < n; i++) compat_thread_join(th[i]);
    } else { /* one after the other, each on a thread of its own as above */
        for (int i = 0; i < n; i++) {
            compat_thread_t th;
            KOMA_ASSERT(compat_thread_create(&th, spin_thread, &s[i]) == 0);
            compat_thread_join(th);
        }
    }
    return (double)(compat_now_ns() - t0) * 1e-9;
}

static void test_threads(void) {
    char err[256];
    spin_t s[2];
    for (int i = 0; i < 2; i++) {
        s[i].be = nn_backend_cpu_new_conv(1, route, err, sizeof(err));
        KOMA_ASSERT(s[i].be);
        s[i].x = randn(64 * 64 * 81, 1), s[i].w = randn(64 * 64 * 9, 0.1f), s[i].y = randn(64 * 64 * 81, 1);
        s[i].ws = s[i].be->buf_alloc(s[i].be, s[i].be->conv_ws_bytes(s[i].be, 64, 64, 64, 3));
        s[i].iters = t_scaled(40, 8); /* fewer in a sanitizer job (KOMA_TEST_SCALE): the check is a ratio */
        spin_run(&s[i]); /* builds the primitive */
    }
    /* Each instance works on its caller's thread alone: with the two side by side,
     * the process's CPU time is the two threads' own. An instance that starts a
     * team of 2 (the team size oneDNN fixes when a primitive is created) doubles
     * it. CPU times, not wall times: the check holds on a loaded machine. */
    int64_t p0 = compat_cpu_time_ns();
    double par = wall_seconds_of(s, 2, 1);
    int64_t proc_ns = compat_cpu_time_ns() - p0, own_ns = s[0].cpu_ns + s[1].cpu_ns;
    fprintf(stderr, "threads: two 1-thread %s instances side by side: %.3f s wall, process CPU %.3f s, "
                    "their threads' own %.3f s\n", nn_backend_cpu_conv_route(s[0].be), par, (double)proc_ns * 1e-9,
            (double)own_ns * 1e-9);
    CHECKF(own_ns > 0 && (double)proc_ns <= 1.25 * (double)own_ns + 30e6,
           "two 1-thread %s instances used %.3f s of process CPU for %.3f s on their own threads (a team of more "
           "than one thread each?)", nn_backend_cpu_conv_route(s[0].be), (double)proc_ns * 1e-9,
           (double)own_ns * 1e-9);
    for (int i = 0; i < 2; i++) {
        free(s[i].x), free(s[i].w), free(s[i].y);
        s[i].be->buf_free(s[i].be, s[i].ws);
        nn_backend_free(s[i].be);
    }
}

/* The whole battery on one fast route; 0 when that route is not built. */
static int test_route(nn_cpu_conv_t r, const char *want) {
    char err[256];
    route = r;
    fast = nn_backend_cpu_new_conv(2, r, err, sizeof(err));
    if (!fast) {
        printf("test_nn_conv: route %s skipped: %s\n", want, err);
        return 0;
    }
    const char *got = nn_backend_cpu_conv_route(fast);
    CHECKF(strcmp(got, want) == 0 || (r == NN_CPU_CONV_WINO && strncmp(got, "wino+", 5) == 0),
           "route %s, expected %s", got, want);
    fprintf(stderr, "route %s\n", got);
    const shape_t shapes[] = {
        {1, 82, 64, 3}, {3, 64, 64, 3}, {1, 64, 64, 3}, {7, 64, 27, 1}, {5, 64, 8, 1},
        {33, 16, 24, 3}, {2, 5, 6, 3}, {1, 130, 9, 1}, {64, 128, 128, 3},
        {17, 20, 32, 3}, {9, 82, 128, 3}, {8, 16, 16, 3}, {11, 48, 27, 3},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) test_conv_ops(shapes[i]);
    for (int act = 0; act < NN_ACT_NB; act++)
        for (int res = 0; res < 2; res++) {
            test_fused((shape_t){1, 64, 64, 3}, (nn_act_t)act, res);
            test_fused((shape_t){9, 32, 32, 3}, (nn_act_t)act, res);
            test_fused((shape_t){4, 32, 8, 1}, (nn_act_t)act, res);
            test_fused((shape_t){3, 32, 27, 3}, (nn_act_t)act, res);
        }
    test_fused((shape_t){5, 82, 64, 3}, NN_ACT_RELU, 0);
    test_native_chain(1, 82, 64, NN_ACT_RELU);
    test_native_chain(3, 118, 32, NN_ACT_RELU); /* AVX2: oneDNN has only its reference kernel for this in NHWC */
    test_native_chain(13, 20, 32, NN_ACT_SILU);
    test_native_chain(40, 64, 64, NN_ACT_RELU);
    test_native_chain(10, 64, 24, NN_ACT_RELU);
    test_net(2, 32, NN_ACT_RELU, 1);
    test_net(2, 32, NN_ACT_RELU, 7);
    test_net(1, 16, NN_ACT_SILU, 5);
    test_net(3, 64, NN_ACT_RELU, 32);
    test_threads();
    nn_backend_free(fast);
    return 1;
}

int main(void) {
    char err[256];
    ref = nn_backend_cpu_new_conv(2, NN_CPU_CONV_REF, err, sizeof(err));
    KOMA_ASSERT(ref);
    CHECK(strcmp(nn_backend_cpu_conv_route(ref), "ref") == 0);
    CHECK(ref->conv_fwd_act == NULL);
    test_route(NN_CPU_CONV_DNNL, "dnnl");
    CHECK(test_route(NN_CPU_CONV_WINO, "wino+"));
    nn_backend_free(ref);
    return t_done("test_nn_conv");
}
