/* cuda_test.h - what test_nn_cuda_gpu's parts share: the pass (tmode_t: flags and
 * tolerances), the CPU reference C_ and the device G_ of the pass, the stand-in
 * device of KOMA_GPU_TEST_FAKE (the CPU backend with TF32/BF16 rounding), and the
 * llm.c-style comparisons (cmp, gcmp, rel_l2, check_scalar: first mismatches, max
 * difference, atol*rms + rtol*|cpu|). See test_nn_cuda_gpu.c for the passes and
 * the tolerances. Header-only, every function static, included by
 * test_nn_cuda_gpu.c alone: it is not a test of its own (cmake/module_tests.cmake
 * globs test_*.c only). One thread. */
#ifndef KOMA_TESTS_NN_CUDA_TEST_H
#define KOMA_TESTS_NN_CUDA_TEST_H

#include "nn_test.h"

#include "nn/backend_cuda.h"

typedef struct {
    double atol, rtol;
} tol_t;

typedef struct {
    const char *name;
    uint32_t flags;
    tol_t conv, dense, net_out, net_grad, net_stat;
    double net_kl;     /* mean policy KL(cpu || gpu) per position */
    double net_prob;   /* max |W/D/L probability difference| */
    double net_l2;     /* relative L2 error of a whole gradient / update tensor (SiLU nets) */
    double relu_l2;    /* the same for ReLU nets: a sanity bound only (see test_net) */
} tmode_t;

static nn_backend_t *C_, *G_;
static const tmode_t *M_;
static double g_scale = 1.0;
static int32_t g_dev = 0;
static int g_info = 0; /* cmp prints but does not judge (cmp_tensor judges itself) */
static int g_quick = 0; /* argv "quick": no largest convs, no 6x64 net */
static const tol_t T_EXACT = {0.0, 0.0};
static const tol_t T_ELEM = {1e-6, 1e-6};  /* elementwise: expf/log differ by an ulp or two */
static const tol_t T_RED = {1e-5, 1e-5};   /* double reductions in another order */

/* ---- the stand-in device of KOMA_GPU_TEST_FAKE ---------------------------------- */
static int g_fake = 0;      /* 1: no CUDA, the CPU backend plays the device */
static int g_fake_prec = 0; /* 0 fp32, 1 tf32 (conv + dense), 2 bf16 conv + tf32 dense */

static float round_bits(float x, int mant_drop) { /* round to nearest even, dropping mant_drop bits */
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x; /* inf / nan */
    uint32_t half = (1u << (mant_drop - 1)) - 1, lsb = (u >> mant_drop) & 1u;
    u = (u + half + lsb) & ~((1u << mant_drop) - 1u);
    memcpy(&x, &u, 4);
    return x;
}
static float *fake_round(const float *x, int64_t n, int drop) {
    float *y = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    KOMA_ASSERT(y);
    for (int64_t i = 0; i < n; i++) y[i] = drop ? round_bits(x[i], drop) : x[i];
    return y;
}
static int conv_drop(void) { return g_fake_prec == 2 ? 16 : g_fake_prec == 1 ? 13 : 0; }
static int dense_drop(void) { return g_fake_prec >= 1 ? 13 : 0; }
/* The stand-in: the CPU ops (sharing the CPU instance's ctx, its sticky error
 * included) with rounding around convs and GEMMs. */
typedef struct {
    nn_backend_t be; /* first: a fake_t * is its nn_backend_t * */
    nn_backend_t *cpu;
} fake_t;
static nn_backend_t *fake_cpu(nn_backend_t *be) { return ((fake_t *)be)->cpu; }

static void fake_free(nn_backend_t *be) {
    nn_backend_free(fake_cpu(be));
    free(be);
}
static void *fake_ws(nn_backend_t *be, void *ws, int32_t B, int32_t cin, int32_t cout, int32_t k, void **own) {
    *own = NULL;
    if (ws) return ws;
    nn_backend_t *c = fake_cpu(be);
    return *own = malloc(c->conv_ws_bytes(c, B, cin, cout, k) + 64);
}
static void fake_conv_fwd(nn_backend_t *be, const float *x, const float *w, const float *bias, int32_t B, int32_t cin,
                          int32_t cout, int32_t k, float *y, void *ws) {
    nn_backend_t *c = fake_cpu(be);
    int64_t nx = (int64_t)B * cin * NN_HW, ny = (int64_t)B * cout * NN_HW;
    float *xr = fake_round(x, nx, conv_drop()), *wr = fake_round(w, (int64_t)cout * cin * k * k, conv_drop());
    void *own, *wsp = fake_ws(be, ws, B, cin, cout, k, &own);
    c->conv_fwd(c, xr, wr, NULL, B, cin, cout, k, y, wsp);
    for (int64_t i = 0; i < ny; i++) {
        if (g_fake_prec == 2) y[i] = round_bits(y[i], 16);
        if (bias) y[i] += bias[(i / NN_HW) % cout];
    }
    free(xr), free(wr), free(own);
}
/* The fused unit: the rounded conv, the activation, and in the bf16 pass a
 * native output (C % 8 == 0) stored as BF16, as the CUDA backend keeps it. */
static void fake_conv_fwd_act(nn_backend_t *be, const float *x, const float *w, const float *bias, const float *res,
                              int32_t B, int32_t cin, int32_t cout, int32_t k, nn_act_t act, float *y, void *ws,
                              int32_t flags) {
    nn_backend_t *c = fake_cpu(be);
    int64_t ny = (int64_t)B * cout * NN_HW;
    fake_conv_fwd(be, x, w, bias, B, cin, cout, k, y, ws);
    if (!(flags & NN_CONV_NO_ACT)) c->act_fwd(c, y, res, ny, act, y);
    if (g_fake_prec == 2 && (flags & NN_CONV_Y_NATIVE) && cout % 8 == 0)
        for (int64_t i = 0; i < ny; i++) y[i] = round_bits(y[i], 16);
}
static void fake_conv_bwd_data(nn_backend_t *be, const float *dy, const float *w, int32_t B, int32_t cin, int32_t cout,
                               int32_t k, float *dx, int32_t accumulate, void *ws) {
    nn_backend_t *c = fake_cpu(be);
    int64_t nx = (int64_t)B * cin * NN_HW, ny = (int64_t)B * cout * NN_HW;
    float *dyr = fake_round(dy, ny, conv_drop()), *wr = fake_round(w, (int64_t)cout * cin * k * k, conv_drop());
    float *t = malloc(sizeof(float) * (size_t)nx);
    void *own, *wsp = fake_ws(be, ws, B, cin, cout, k, &own);
    c->conv_bwd_data(c, dyr, wr, B, cin, cout, k, t, 0, wsp);
    for (int64_t i = 0; i < nx; i++) {
        float v = g_fake_prec == 2 ? round_bits(t[i], 16) : t[i];
        dx[i] = accumulate ? dx[i] + v : v;
    }
    free(dyr), free(wr), free(t), free(own);
}
static void fake_conv_bwd_filter(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t cin, int32_t cout,
                                 int32_t k, float *dw, float *dbias, void *ws) {
    nn_backend_t *c = fake_cpu(be);
    int64_t nx = (int64_t)B * cin * NN_HW, ny = (int64_t)B * cout * NN_HW, nw = (int64_t)cout * cin * k * k;
    float *xr = fake_round(x, nx, conv_drop()), *dyr = fake_round(dy, ny, conv_drop());
    void *own, *wsp = fake_ws(be, ws, B, cin, cout, k, &own);
    c->conv_bwd_filter(c, xr, dyr, B, cin, cout, k, dw, NULL, wsp);
    if (g_fake_prec == 2)
        for (int64_t i = 0; i < nw; i++) dw[i] = round_bits(dw[i], 16);
    if (dbias) /* from the float dy, as the CUDA backend does */
        for (int32_t o = 0; o < cout; o++) {
            double sum = 0;
            for (int32_t b = 0; b < B; b++)
                for (int q = 0; q < NN_HW; q++) sum += dy[((int64_t)b * cout + o) * NN_HW + q];
            dbias[o] = (float)sum;
        }
    free(xr), free(dyr), free(own);
}
static void fake_dense_fwd(nn_backend_t *be, const float *x, const float *w, const float *b, int32_t B, int32_t in,
                           int32_t out, float *y) {
    nn_backend_t *c = fake_cpu(be);
    float *xr = fake_round(x, (int64_t)B * in, dense_drop()), *wr = fake_round(w, (int64_t)out * in, dense_drop());
    c->dense_fwd(c, xr, wr, b, B, in, out, y);
    free(xr), free(wr);
}
static void fake_dense_bwd(nn_backend_t *be, const float *x, const float *w, const float *dy, int32_t B, int32_t in,
                           int32_t out, float *dx, float *dw, float *db) {
    nn_backend_t *c = fake_cpu(be);
    float *xr = fake_round(x, (int64_t)B * in, dense_drop()), *wr = fake_round(w, (int64_t)out * in, dense_drop()),
          *dyr = fake_round(dy, (int64_t)B * out, dense_drop());
    c->dense_bwd(c, xr, wr, dyr, B, in, out, dx, dw, NULL);
    if (db)
        for (int32_t o = 0; o < out; o++) {
            double sum = 0;
            for (int32_t i = 0; i < B; i++) sum += dy[(int64_t)i * out + o];
            db[o] = (float)sum;
        }
    free(xr), free(wr), free(dyr);
}
static nn_backend_t *fake_new(void) {
    nn_backend_t *cpu = nn_backend_cpu_new(1);
    fake_t *f = malloc(sizeof(*f));
    KOMA_ASSERT(cpu && f);
    nn_backend_t *be = &f->be;
    *be = *cpu; /* the CPU ops only use be->ctx, the CPU instance's */
    f->cpu = cpu;
    be->name = "fake-cuda";
    be->free = fake_free;
    be->conv_fwd = fake_conv_fwd;
    be->conv_fwd_act = fake_conv_fwd_act;
    be->conv_bwd_data = fake_conv_bwd_data;
    be->conv_bwd_filter = fake_conv_bwd_filter;
    be->dense_fwd = fake_dense_fwd;
    be->dense_bwd = fake_dense_bwd;
    be->pool_fwd_native = NULL; /* fake_conv_fwd_act keeps NCHW, and the CUDA backend pools NCHW */
    be->chan_bias_fwd_native = NULL;
    return be;
}

/* A device instance of the current pass (a stand-in under KOMA_GPU_TEST_FAKE). */
static nn_backend_t *gpu_new(uint32_t flags, char *err, size_t errlen) {
    if (g_fake) return fake_new();
    return nn_backend_cuda_new(g_dev, flags, err, errlen);
}
static void gsync(nn_backend_t *be) {
    if (be->sync) be->sync(be);
}

/* ---- helpers ------------------------------------------------------------------ */
static float *frand(int64_t n, float mean, float scale) {
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    KOMA_ASSERT(x);
    for (int64_t i = 0; i < n; i++) x[i] = mean + scale * t_randn();
    return x;
}
static float *fdup(const float *x, int64_t n) {
    float *y = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    KOMA_ASSERT(y);
    if (n > 0) memcpy(y, x, sizeof(float) * (size_t)n);
    return y;
}
static void *gdup(const void *h, size_t bytes) {
    void *d = G_->buf_alloc(G_, bytes ? bytes : 1);
    KOMA_ASSERT(d);
    if (bytes) G_->upload(G_, d, h, bytes);
    return d;
}
static float *gget(const void *d, int64_t n) {
    float *h = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    KOMA_ASSERT(h);
    if (n > 0) G_->download(G_, h, d, sizeof(float) * (size_t)n);
    return h;
}
#define GF(h, n) ((float *)gdup((h), sizeof(float) * (size_t)(n)))

/* Stops the program at the first sticky CUDA error (later ops would be no-ops). */
static void gpu_ok(const char *where) {
    const char *e = nn_cuda_error(G_);
    if (e) {
        fprintf(stderr, "[%s] %s: CUDA backend failed: %s\n", M_ ? M_->name : "-", where, e);
        exit(1);
    }
}

static double rms_of(const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return n > 0 ? sqrt(s / (double)n) : 0.0;
}

/* |got - ref| <= atol*rms(ref) + rtol*|ref|; prints the first mismatches and
 * max abs / rms-relative / relative differences. Returns mismatches. */
static int64_t cmp(const char *what, const float *got, const float *ref, int64_t n, tol_t t) {
    double rms = rms_of(ref, n), atol = t.atol * g_scale * rms, rtol = t.rtol * g_scale;
    double maxd = 0, maxrel = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (isnan(d)) d = INFINITY;
        if (d > maxd) maxd = d;
        if (fabs(ref[i]) > 1e-3 * rms && d / fabs(ref[i]) > maxrel) maxrel = d / fabs(ref[i]);
        if (!(d <= atol + rtol * fabs((double)ref[i]))) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: gpu %.9g, cpu %.9g\n", what, (long long)i, got[i], ref[i]);
            bad++;
        }
    }
    fprintf(stderr, "[%s] %-46s n=%-8lld max|d| %.3g  /rms %.3g  rel %.3g  %s\n", M_->name, what, (long long)n, maxd,
            rms > 0 ? maxd / rms : maxd, maxrel, bad ? (g_info ? "outliers (judged below)" : "MISMATCH") : "ok");
    if (!g_info && !t_judge(bad == 0))
        fprintf(stderr, "  %s: %lld of %lld outside atol %.3g*rms + rtol %.3g*|cpu|\n", what, (long long)bad,
                (long long)n, t.atol * g_scale, rtol);
    return bad;
}

/* Download n floats from the GPU buffer d and compare them with ref. */
static int64_t gcmp(const char *what, const void *d, const float *ref, int64_t n, tol_t t) {
    float *h = gget(d, n);
    gpu_ok(what);
    int64_t bad = cmp(what, h, ref, n, t);
    free(h);
    return bad;
}

/* Relative L2 error ||got - ref|| / ||ref||: for whole-net tensors, where a
 * few pre-activations near a ReLU kink may legitimately land on either side. */
static double rel_l2(const float *got, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void check_scalar(const char *what, double got, double ref, double atol, double rtol) {
    double d = fabs(got - ref);
    int ok = d <= (atol + rtol * fabs(ref)) * g_scale;
    fprintf(stderr, "[%s] %-46s gpu %.9g cpu %.9g |d| %.3g %s\n", M_->name, what, got, ref, d, ok ? "ok" : "MISMATCH");
    t_judge(ok);
}

#endif
