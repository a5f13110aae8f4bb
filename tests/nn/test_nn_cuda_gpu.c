/* test_nn_cuda_gpu.c - the CUDA backend against the CPU reference, op by op
 * and as a whole network. Exits 77 (skipped) without a device or without CUDA.
 *
 * Three passes, each on its own CUDA instance:
 *   fp32  NN_CUDA_NO_TF32: tight tolerances (only summation order and expf differ);
 *   tf32  the default (TF32 tensor cores where the GPU has them);
 *   bf16  NN_CUDA_BF16 (convolutions in BF16), loose tolerances.
 * Every op of nn/backend.h on random inputs of several shapes (B = 1, odd
 * channel counts, k = 1 and 3, accumulate on/off, NULL optional arguments,
 * in-place calls), then whole nets: the same weights on both backends,
 * inference outputs (plus policy KL and value error), one gradient pass
 * (losses, statistics, every parameter gradient) and two SGD steps (updates,
 * momentum, running statistics). Also: staging round trips larger than the
 * pinned buffers, overlapping copies, buffers shared between instances, and
 * the sticky error of an instance.
 *
 * Tolerances: |gpu - cpu| <= atol*rms(cpu) + rtol*|cpu| (atol is relative to
 * the RMS of the reference tensor so one table fits all shapes). Each line
 * prints max|diff|, max|diff|/rms and the max relative difference; the first
 * mismatches are printed before it. KOMA_GPU_TOL_SCALE=2 scales every
 * tolerance (to tell a marginal tolerance from a bug on new hardware).
 * Usage: test_nn_cuda_gpu [device] [fp32|tf32|bf16 ...] [quick] (default: device 0, all
 * passes, every case). `quick` leaves out the two largest convolutions and the
 * 6x64 net (the remaining cases cover the same ops and options on smaller
 * shapes): for compute-sanitizer, whose kernels run far slower (tools/gpu-checks.sh).
 *
 * Harness self-check without a GPU: KOMA_GPU_TEST_FAKE=1 runs every pass
 * against a stand-in "device" that is the CPU backend with the precision of
 * each mode emulated (conv/dense inputs rounded to TF32 or BF16, BF16 conv
 * outputs rounded, BF16 storage of the fused unit's native outputs). It exercises the test's own plumbing (sizes, in-place
 * cases, comparisons) and shows whether the tolerances leave room for
 * TF32/BF16 rounding; it says nothing about the CUDA code. */
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

/* ---- memory ops ----------------------------------------------------------------- */
static void test_memory(void) {
    /* larger than the pinned staging (2 x 8 MiB each way): chunking and wrap */
    int64_t n = 5 * 1024 * 1024 + 17; /* floats: 20 MiB */
    float *h = frand(n, 0, 1), *h0 = fdup(h, n), *d = G_->buf_alloc(G_, sizeof(float) * (size_t)n);
    KOMA_ASSERT(d);
    G_->upload(G_, d, h, sizeof(float) * (size_t)n);
    memset(h, 0, sizeof(float) * (size_t)n); /* the caller may reuse its buffer once upload returns */
    float *r = gget(d, n);
    cmp("upload/download 20 MiB", r, h0, n, T_EXACT);
    free(r);
    free(h0);
    /* many small uploads: more than a staging half in total, each checked */
    int32_t k = 3000, m = 1000; /* 3000 x 4000 bytes = 12 MB */
    float *src = frand((int64_t)k * m, 0, 1);
    float *dd = G_->buf_alloc(G_, sizeof(float) * (size_t)k * m);
    KOMA_ASSERT(dd);
    float *tmp = malloc(sizeof(float) * (size_t)m);
    for (int32_t i = 0; i < k; i++) {
        memcpy(tmp, src + (int64_t)i * m, sizeof(float) * (size_t)m);
        G_->upload(G_, dd + (int64_t)i * m, tmp, sizeof(float) * (size_t)m);
        memset(tmp, 0xAB, sizeof(float) * (size_t)m); /* reused at once, as callers do */
    }
    gcmp("3000 small uploads", dd, src, (int64_t)k * m, T_EXACT);
    free(tmp);
    /* memset_zero of a middle range */
    G_->memset_zero(G_, dd + 7, sizeof(float) * 1000);
    for (int i = 7; i < 1007; i++) src[i] = 0.0f;
    gcmp("memset_zero", dd, src, 2000, T_EXACT);
    /* copy, non-overlapping and overlapping both ways (memmove semantics) */
    float *ref = fdup(src, 4096);
    G_->upload(G_, dd, ref, sizeof(float) * 4096);
    G_->copy(G_, dd + 2048, dd, sizeof(float) * 1024);
    memmove(ref + 2048, ref, sizeof(float) * 1024);
    G_->copy(G_, dd + 3, dd, sizeof(float) * 1000); /* forward overlap */
    memmove(ref + 3, ref, sizeof(float) * 1000);
    G_->copy(G_, dd + 100, dd + 117, sizeof(float) * 900); /* backward overlap */
    memmove(ref + 100, ref + 117, sizeof(float) * 900);
    gcmp("copy (plain and overlapping)", dd, ref, 4096, T_EXACT);
    /* copy_2d: a channel slice of an NCHW tensor out and back in (the merged
     * head convolution's split and join, nn/net.c) */
    {
        int32_t B = 5, C = 7, C2 = 16, c0 = 9;
        size_t row = sizeof(float) * (size_t)C * NN_HW, pitch2 = sizeof(float) * (size_t)C2 * NN_HW;
        int64_t nf = (int64_t)B * C2 * NN_HW, ns = (int64_t)B * C * NN_HW;
        float *full = frand(nf, 0, 1), *want = malloc(row * (size_t)B), *back = calloc((size_t)nf, sizeof(float));
        float *gf = G_->buf_alloc(G_, pitch2 * (size_t)B), *gs = G_->buf_alloc(G_, row * (size_t)B);
        KOMA_ASSERT(want && back && gf && gs);
        G_->upload(G_, gf, full, pitch2 * (size_t)B);
        G_->copy_2d(G_, gs, row, gf + (int64_t)c0 * NN_HW, pitch2, row, (size_t)B);
        for (int32_t b = 0; b < B; b++) {
            memcpy(want + (int64_t)b * C * NN_HW, full + ((int64_t)b * C2 + c0) * NN_HW, row);
            memcpy(back + ((int64_t)b * C2 + c0) * NN_HW, want + (int64_t)b * C * NN_HW, row);
        }
        gcmp("copy_2d: channel slice out", gs, want, ns, T_EXACT);
        G_->memset_zero(G_, gf, pitch2 * (size_t)B);
        G_->copy_2d(G_, gf + (int64_t)c0 * NN_HW, pitch2, gs, row, row, (size_t)B);
        gcmp("copy_2d: channel slice back in", gf, back, nf, T_EXACT);
        G_->buf_free(G_, gf);
        G_->buf_free(G_, gs);
        free(full);
        free(want);
        free(back);
    }
    /* fences: a download_async queued before fence 1 has arrived once
     * fence_wait(1) returns, with more work queued after the mark (the CPU
     * stand-in of KOMA_GPU_TEST_FAKE has neither) */
    if (G_->fence_record && G_->host_alloc) {
        float *pin = G_->host_alloc(G_, sizeof(float) * 4096);
        KOMA_ASSERT(pin);
        G_->download_async(G_, pin, dd, sizeof(float) * 4096);
        G_->fence_record(G_, 1);
        G_->memset_zero(G_, dd + 4096, sizeof(float) * 1000000); /* after the mark */
        G_->fence_wait(G_, 1);
        CHECK(nn_cuda_error(G_) == NULL);
        cmp("download_async behind a fence", pin, ref, 4096, T_EXACT);
        G_->host_free(G_, pin);
    }
    gsync(G_);
    gpu_ok("memory");
    /* a buffer of this instance used by a second instance on the same device */
    char err[512];
    nn_backend_t *g2 = gpu_new(M_->flags, err, sizeof(err));
    CHECK(g2 != NULL);
    if (g2) {
        gsync(G_);
        float *e = g2->buf_alloc(g2, sizeof(float) * 4096);
        KOMA_ASSERT(e);
        g2->copy(g2, e, dd, sizeof(float) * 4096);
        float *back = malloc(sizeof(float) * 4096);
        g2->download(g2, back, e, sizeof(float) * 4096);
        CHECK(nn_cuda_error(g2) == NULL);
        cmp("buffer shared by two instances", back, ref, 4096, T_EXACT);
        free(back);
        g2->buf_free(g2, e);
        nn_backend_free(g2);
    }
    free(ref);
    free(src);
    G_->buf_free(G_, dd);
    G_->buf_free(G_, d);
    free(h);
}

/* ---- ops -------------------------------------------------------------------------- */
static void test_expand(int32_t B, int32_t planes, int32_t in_hand) {
    int64_t bpp = nn_packed_bytes(planes), C = planes + in_hand, n = (int64_t)B * C * NN_HW;
    uint8_t *packed = malloc((size_t)(B * bpp));
    for (int64_t i = 0; i < B * bpp; i++) packed[i] = (uint8_t)t_next();
    float *hand = frand((int64_t)B * in_hand, 1, 1);
    float *ref = malloc(sizeof(float) * (size_t)n);
    C_->expand_planes(C_, packed, in_hand ? hand : NULL, B, planes, in_hand, ref);
    uint8_t *gp = gdup(packed, (size_t)(B * bpp));
    float *gh = in_hand ? GF(hand, (int64_t)B * in_hand) : NULL;
    float *go = G_->buf_alloc(G_, sizeof(float) * (size_t)n);
    G_->expand_planes(G_, gp, gh, B, planes, in_hand, go);
    char what[96];
    snprintf(what, sizeof(what), "expand_planes B%d planes %d hand %d", B, planes, in_hand);
    gcmp(what, go, ref, n, T_EXACT);
    G_->buf_free(G_, gp);
    G_->buf_free(G_, gh);
    G_->buf_free(G_, go);
    free(packed), free(hand), free(ref);
}

/* conv fwd (bias on/off), bwd data (accumulate on/off), bwd filter (dbias on/off).
 * ws_mode: 0 the workspace of a larger batch (as net.c sizes it), 1 exactly
 * conv_ws_bytes of this batch, 2 NULL (the backend's own fallback). */
static void test_conv(int32_t B, int32_t cin, int32_t cout, int32_t k, int bias, int acc, int ws_mode) {
    int64_t nx = (int64_t)B * cin * NN_HW, ny = (int64_t)B * cout * NN_HW, nw = (int64_t)cout * cin * k * k;
    float *x = frand(nx, 0, 1), *w = frand(nw, 0, 1.0f / sqrtf((float)(cin * k * k))), *b = frand(cout, 0, 0.5f);
    float *dy = frand(ny, 0, 1), *dx0 = frand(nx, 0, 1), *junk_w = frand(nw, 0, 3), *junk_b = frand(cout, 0, 3);
    float *junk_y = frand(ny, 0, 3);
    /* CPU */
    size_t cws = C_->conv_ws_bytes(C_, B, cin, cout, k);
    void *cw = malloc(cws ? cws : 1);
    float *y = malloc(sizeof(float) * (size_t)ny), *dx = fdup(dx0, nx), *dw = malloc(sizeof(float) * (size_t)nw),
          *db = malloc(sizeof(float) * (size_t)cout);
    C_->conv_fwd(C_, x, w, bias ? b : NULL, B, cin, cout, k, y, cw);
    C_->conv_bwd_data(C_, dy, w, B, cin, cout, k, dx, acc, cw);
    C_->conv_bwd_filter(C_, x, dy, B, cin, cout, k, dw, bias ? db : NULL, cw);
    /* GPU: outputs start as junk to prove overwrite semantics */
    size_t gws = ws_mode == 2 ? 0 : G_->conv_ws_bytes(G_, ws_mode == 0 ? B + 5 : B, cin, cout, k);
    void *gw = ws_mode == 2 ? NULL : G_->buf_alloc(G_, gws ? gws : 1);
    float *gx = GF(x, nx), *gwt = GF(w, nw), *gb = GF(b, cout), *gdy = GF(dy, ny);
    float *junk_x = frand(nx, 0, 3);
    float *gy = GF(junk_y, ny), *gdx = GF(acc ? dx0 : junk_x, nx), *gdw = GF(junk_w, nw), *gdb = GF(junk_b, cout);
    free(junk_x);
    G_->conv_fwd(G_, gx, gwt, bias ? gb : NULL, B, cin, cout, k, gy, gw);
    G_->conv_bwd_data(G_, gdy, gwt, B, cin, cout, k, gdx, acc, gw);
    G_->conv_bwd_filter(G_, gx, gdy, B, cin, cout, k, gdw, bias ? gdb : NULL, gw);
    char what[128];
    const char *wsn[3] = {"ws(B+5)", "ws(B)", "ws NULL"};
    snprintf(what, sizeof(what), "conv_fwd B%d %d->%d k%d%s %s", B, cin, cout, k, bias ? " +bias" : "", wsn[ws_mode]);
    gcmp(what, gy, y, ny, M_->conv);
    snprintf(what, sizeof(what), "conv_bwd_data B%d %d->%d k%d %s", B, cin, cout, k, acc ? "+=" : "=");
    gcmp(what, gdx, dx, nx, M_->conv);
    snprintf(what, sizeof(what), "conv_bwd_filter B%d %d->%d k%d dw", B, cin, cout, k);
    gcmp(what, gdw, dw, nw, M_->conv);
    if (bias) {
        snprintf(what, sizeof(what), "conv_bwd_filter B%d %d->%d k%d dbias", B, cin, cout, k);
        gcmp(what, gdb, db, cout, T_RED);
    } else {
        snprintf(what, sizeof(what), "conv_bwd_filter dbias NULL leaves it");
        gcmp(what, gdb, junk_b, cout, T_EXACT);
    }
    float *bufs[] = {gx, gwt, gb, gdy, gy, gdx, gdw, gdb};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    G_->buf_free(G_, gw);
    free(x), free(w), free(b), free(dy), free(dx0), free(junk_w), free(junk_b), free(junk_y);
    free(cw), free(y), free(dx), free(dw), free(db);
}

/* conv_fwd_act, inference's fused unit, against the CPU's conv_fwd + act_fwd,
 * as forward_infer chains it: stem (plain in, native out), a residual unit
 * (native in and out, residual = the stem's output), then from the native
 * trunk: a head unit with a plain output and an activation, and a 1x1 head
 * without one (plain out). Only plain tensors are compared: the native layout
 * is the backend's own (BF16 NHWC where C % 8 == 0 in the bf16 pass). Also a
 * unit with a plain float residual. Skipped where the backend has no fused op
 * (KOMA_CUDA_NO_FUSE=1). */
static void test_conv_act(int32_t B, int32_t cin, int32_t C, int32_t hc, nn_act_t act) {
    if (!G_->conv_fwd_act) {
        fprintf(stderr, "[%s] conv_fwd_act: not set (KOMA_CUDA_NO_FUSE?): skipped\n", M_->name);
        return;
    }
    int64_t nx = (int64_t)B * cin * NN_HW, nh = (int64_t)B * C * NN_HW, nv = (int64_t)B * hc * NN_HW,
            no = (int64_t)B * 27 * NN_HW;
    float *x = frand(nx, 0, 1), *ws_ = frand((int64_t)C * cin * 9, 0, 1.0f / sqrtf((float)cin * 9));
    float *wb = frand((int64_t)C * C * 9, 0, 1.0f / sqrtf((float)C * 9)), *wv = frand((int64_t)hc * C, 0, 0.3f);
    float *wo = frand((int64_t)27 * C, 0, 0.3f), *bs = frand(C, 0.1f, 0.5f), *bb = frand(C, 0, 0.5f);
    float *bv = frand(hc, 0, 0.5f), *bo = frand(27, 0, 0.5f);
    /* CPU: the unfused ops, NCHW float */
    size_t cws = C_->conv_ws_bytes(C_, B, cin > C ? cin : C, C > 27 ? C : 27, 3);
    void *cw = malloc(cws ? cws : 1);
    float *ra = malloc(sizeof(float) * (size_t)nh), *rb = malloc(sizeof(float) * (size_t)nh);
    float *rv = malloc(sizeof(float) * (size_t)nv), *ro = malloc(sizeof(float) * (size_t)no);
    float *rp = malloc(sizeof(float) * (size_t)nh);
    C_->conv_fwd(C_, x, ws_, bs, B, cin, C, 3, ra, cw);
    C_->act_fwd(C_, ra, NULL, nh, act, ra);
    C_->conv_fwd(C_, ra, wb, bb, B, C, C, 3, rb, cw);
    C_->act_fwd(C_, rb, ra, nh, act, rb);
    C_->conv_fwd(C_, rb, wv, bv, B, C, hc, 1, rv, cw);
    C_->act_fwd(C_, rv, NULL, nv, act, rv);
    C_->conv_fwd(C_, rb, wo, bo, B, C, 27, 1, ro, cw);
    C_->conv_fwd(C_, ra, wb, bb, B, C, C, 3, rp, cw); /* plain in, plain out, plain residual */
    C_->act_fwd(C_, rp, ra, nh, act, rp);
    /* GPU */
    size_t gws = G_->conv_ws_bytes(G_, B, cin > C ? cin : C, C > 27 ? C : 27, 3);
    void *gw = G_->buf_alloc(G_, gws ? gws : 1);
    float *gx = GF(x, nx), *gws_ = GF(ws_, (int64_t)C * cin * 9), *gwb = GF(wb, (int64_t)C * C * 9);
    float *gwv = GF(wv, (int64_t)hc * C), *gwo = GF(wo, (int64_t)27 * C), *gbs = GF(bs, C), *gbb = GF(bb, C);
    float *gbv = GF(bv, hc), *gbo = GF(bo, 27), *gra = GF(ra, nh);
    float *ga = GF(rb, nh), *gb = GF(rb, nh), *gv = GF(rv, nv), *go = GF(ro, no), *gp = GF(ra, nh); /* junk-free sizes */
    const int32_t X = NN_CONV_X_NATIVE, Y = NN_CONV_Y_NATIVE;
    G_->conv_fwd_act(G_, gx, gws_, gbs, NULL, B, cin, C, 3, act, ga, gw, Y);
    G_->conv_fwd_act(G_, ga, gwb, gbb, ga, B, C, C, 3, act, gb, gw, X | Y);
    G_->conv_fwd_act(G_, gb, gwv, gbv, NULL, B, C, hc, 1, act, gv, gw, X);
    G_->conv_fwd_act(G_, gb, gwo, gbo, NULL, B, C, 27, 1, act, go, gw, X | NN_CONV_NO_ACT);
    G_->conv_fwd_act(G_, gra, gwb, gbb, gra, B, C, C, 3, act, gp, gw, 0);
    /* three convs deep, BF16 storage between them in the bf16 pass: the net-output tolerance */
    char what[128];
    snprintf(what, sizeof(what), "conv_fwd_act B%d %d->%d->%d->%d %s", B, cin, C, C, hc, nn_act_name(act));
    gcmp(what, gv, rv, nv, M_->net_out);
    snprintf(what, sizeof(what), "conv_fwd_act B%d %d->%d->%d->27 no act", B, cin, C, C);
    gcmp(what, go, ro, no, M_->net_out);
    snprintf(what, sizeof(what), "conv_fwd_act B%d %d->%d plain, +res %s", B, C, C, nn_act_name(act));
    gcmp(what, gp, rp, nh, M_->conv);
    float *bufs[] = {gx, gws_, gwb, gwv, gwo, gbs, gbb, gbv, gbo, gra, ga, gb, gv, go, gp};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    G_->buf_free(G_, gw);
    free(x), free(ws_), free(wb), free(wv), free(wo), free(bs), free(bb), free(bv), free(bo);
    free(cw), free(ra), free(rb), free(rv), free(ro), free(rp);
}

/* bn_fwd_train + bn_bwd (relu 0), or training's fused unit (relu 1; 2 with a
 * residual): bn_relu_fwd_train + bn_relu_bwd against the CPU's (its BN, ReLU
 * and copy in sequence). The backward runs from the CPU's statistics (and y,
 * so that the ReLU masks agree exactly) and the original x. */
static void test_bn(int32_t B, int32_t C, int32_t HW, int inplace, int relu) {
    if (relu && (!G_->bn_relu_fwd_train || !G_->bn_relu_bwd)) {
        fprintf(stderr, "[%s] bn_relu: the backend has no fused training unit\n", M_->name);
        t_judge(0);
        return;
    }
    int64_t n = (int64_t)B * C * HW;
    float *x = frand(n, 3, 2), *gamma = frand(C, 1, 0.3f), *beta = frand(C, 0, 0.5f), *rm = frand(C, 0, 0.1f);
    float *rv = frand(C, 1, 0.1f), *dy = frand(n, 0, 1), *res = relu == 2 ? frand(n, 0, 1) : NULL;
    float eps = 1e-5f, mom = 0.1f;
    /* CPU */
    float *cy = inplace ? fdup(x, n) : malloc(sizeof(float) * (size_t)n), *cm = malloc(sizeof(float) * (size_t)C),
          *ci = malloc(sizeof(float) * (size_t)C), *crm = fdup(rm, C), *crv = fdup(rv, C);
    const float *cx = inplace ? cy : x;
    if (relu) C_->bn_relu_fwd_train(C_, cx, gamma, beta, res, B, C, HW, eps, mom, crm, crv, cy, cm, ci);
    else C_->bn_fwd_train(C_, cx, gamma, beta, B, C, HW, eps, mom, crm, crv, cy, cm, ci);
    float *cdx = fdup(dy, n), *cdres = relu ? malloc(sizeof(float) * (size_t)n) : NULL;
    float *cdg = malloc(sizeof(float) * (size_t)C), *cdb = malloc(sizeof(float) * (size_t)C);
    if (relu) C_->bn_relu_bwd(C_, x, cy, cdx, gamma, cm, ci, B, C, HW, cdres, cdx, cdg, cdb);
    else C_->bn_bwd(C_, x, inplace ? cdx : dy, gamma, cm, ci, B, C, HW, cdx, cdg, cdb);
    if (relu) {
        int64_t zeros = 0;
        for (int64_t i = 0; i < n; i++) zeros += cy[i] == 0.0f;
        CHECK(zeros > n / 10 && zeros < n - n / 10); /* the mask matters */
    }
    /* GPU */
    float *gx = GF(x, n), *gg = GF(gamma, C), *gbt = GF(beta, C), *grm = GF(rm, C), *grv = GF(rv, C);
    float *gr = res ? GF(res, n) : NULL;
    float *gy = inplace ? gx : G_->buf_alloc(G_, sizeof(float) * (size_t)n), *gm = G_->buf_alloc(G_, sizeof(float) * (size_t)C),
          *gi = G_->buf_alloc(G_, sizeof(float) * (size_t)C);
    if (relu) G_->bn_relu_fwd_train(G_, gx, gg, gbt, gr, B, C, HW, eps, mom, grm, grv, gy, gm, gi);
    else G_->bn_fwd_train(G_, gx, gg, gbt, B, C, HW, eps, mom, grm, grv, gy, gm, gi);
    char what[96];
    const char *op = relu ? "bn_relu_fwd_train" : "bn_fwd_train", *bop = relu ? "bn_relu_bwd" : "bn_bwd";
    snprintf(what, sizeof(what), "%s B%d C%d HW%d y%s%s", op, B, C, HW, inplace ? " in-place" : "", res ? " +res" : "");
    gcmp(what, gy, cy, n, T_RED);
    static const char *const stat[4] = {"save_mean", "save_invstd", "running_mean", "running_var"};
    float *gs[4] = {gm, gi, grm, grv}, *cs[4] = {cm, ci, crm, crv};
    for (int i = 0; i < 4; i++) {
        snprintf(what, sizeof(what), "%s B%d C%d %s", op, B, C, stat[i]);
        gcmp(what, gs[i], cs[i], C, T_RED);
    }
    G_->upload(G_, gx, x, sizeof(float) * (size_t)n);
    float *gyb = relu && inplace ? G_->buf_alloc(G_, sizeof(float) * (size_t)n) : gy; /* y beside x */
    if (relu) G_->upload(G_, gyb, cy, sizeof(float) * (size_t)n);
    G_->upload(G_, gm, cm, sizeof(float) * (size_t)C);
    G_->upload(G_, gi, ci, sizeof(float) * (size_t)C);
    float *gdy = GF(dy, n), *gdx = inplace || relu ? gdy : G_->buf_alloc(G_, sizeof(float) * (size_t)n);
    float *gdres = relu ? G_->buf_alloc(G_, sizeof(float) * (size_t)n) : NULL;
    float *gdg = G_->buf_alloc(G_, sizeof(float) * (size_t)C), *gdb = G_->buf_alloc(G_, sizeof(float) * (size_t)C);
    if (relu) G_->bn_relu_bwd(G_, gx, gyb, gdy, gg, gm, gi, B, C, HW, gdres, gdx, gdg, gdb);
    else G_->bn_bwd(G_, gx, gdy, gg, gm, gi, B, C, HW, gdx, gdg, gdb);
    snprintf(what, sizeof(what), "%s B%d C%d HW%d dx%s", bop, B, C, HW, inplace ? " in-place" : "");
    gcmp(what, gdx, cdx, n, T_RED);
    if (relu) {
        snprintf(what, sizeof(what), "%s B%d C%d HW%d dres", bop, B, C, HW);
        gcmp(what, gdres, cdres, n, T_ELEM);
    }
    snprintf(what, sizeof(what), "%s B%d C%d dgamma", bop, B, C);
    gcmp(what, gdg, cdg, C, T_RED);
    snprintf(what, sizeof(what), "%s B%d C%d dbeta", bop, B, C);
    gcmp(what, gdb, cdb, C, T_RED);
    float *bufs[] = {gx, gg, gbt, grm, grv, gm, gi, gdy, gdg, gdb, gr, gdres,
                     inplace ? NULL : gy, inplace || relu ? NULL : gdx, gyb != gy ? gyb : NULL};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        if (bufs[i]) G_->buf_free(G_, bufs[i]);
    free(x), free(gamma), free(beta), free(rm), free(rv), free(dy), free(res), free(cy), free(cm), free(ci);
    free(crm), free(crv), free(cdx), free(cdres), free(cdg), free(cdb);
}

static void test_bn_fold(int32_t cout, int32_t kdim) {
    int64_t n = (int64_t)cout * kdim;
    float *w = frand(n, 0, 1), *g = frand(cout, 1, 0.3f), *bt = frand(cout, 0, 1), *m = frand(cout, 0, 1), *v = frand(cout, 0, 1);
    for (int32_t i = 0; i < cout; i++) v[i] = fabsf(v[i]) + 0.01f;
    float *cw = malloc(sizeof(float) * (size_t)n), *cb = malloc(sizeof(float) * (size_t)cout);
    C_->bn_fold(C_, w, g, bt, m, v, cout, kdim, 1e-5f, cw, cb);
    float *gw = GF(w, n), *gg = GF(g, cout), *gbt = GF(bt, cout), *gm = GF(m, cout), *gv = GF(v, cout);
    float *gow = G_->buf_alloc(G_, sizeof(float) * (size_t)n), *gob = G_->buf_alloc(G_, sizeof(float) * (size_t)cout);
    G_->bn_fold(G_, gw, gg, gbt, gm, gv, cout, kdim, 1e-5f, gow, gob);
    char what[96];
    snprintf(what, sizeof(what), "bn_fold cout %d kdim %d w", cout, kdim);
    gcmp(what, gow, cw, n, T_ELEM);
    snprintf(what, sizeof(what), "bn_fold cout %d kdim %d b", cout, kdim);
    gcmp(what, gob, cb, cout, T_ELEM);
    float *bufs[] = {gw, gg, gbt, gm, gv, gow, gob};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    free(w), free(g), free(bt), free(m), free(v), free(cw), free(cb);
}

static void test_elementwise(int64_t n) {
    float *x = frand(n, 0, 2), *r = frand(n, 0, 1), *dy = frand(n, 0, 1);
    for (int64_t i = 0; i < n; i += 97) x[i] = 0.0f; /* the ReLU kink itself */
    char what[96];
    for (int a = 0; a < NN_ACT_NB; a++)
        for (int res = 0; res < 2; res++)
            for (int inplace = 0; inplace < 2; inplace++) {
                float *cy = fdup(x, n);
                C_->act_fwd(C_, inplace ? cy : x, res ? r : NULL, n, (nn_act_t)a, cy);
                float *gx = GF(x, n), *gr = GF(r, n), *gy = inplace ? gx : G_->buf_alloc(G_, sizeof(float) * (size_t)n);
                G_->act_fwd(G_, gx, res ? gr : NULL, n, (nn_act_t)a, gy);
                snprintf(what, sizeof(what), "act_fwd %s n %lld%s%s", nn_act_name((nn_act_t)a), (long long)n,
                         res ? " +res" : "", inplace ? " in-place" : "");
                gcmp(what, gy, cy, n, T_ELEM);
                /* act_bwd with z = x (+ r) */
                float *z = fdup(x, n);
                if (res)
                    for (int64_t i = 0; i < n; i++) z[i] = x[i] + r[i];
                float *cdx = fdup(dy, n);
                C_->act_bwd(C_, inplace ? cdx : dy, z, n, (nn_act_t)a, cdx);
                float *gz = GF(z, n), *gdy = GF(dy, n), *gdx = inplace ? gdy : G_->buf_alloc(G_, sizeof(float) * (size_t)n);
                G_->act_bwd(G_, gdy, gz, n, (nn_act_t)a, gdx);
                snprintf(what, sizeof(what), "act_bwd %s n %lld%s", nn_act_name((nn_act_t)a), (long long)n,
                         inplace ? " in-place" : "");
                gcmp(what, gdx, cdx, n, T_ELEM);
                G_->buf_free(G_, gx), G_->buf_free(G_, gr), G_->buf_free(G_, gz), G_->buf_free(G_, gdy);
                if (!inplace) G_->buf_free(G_, gy), G_->buf_free(G_, gdx);
                free(cy), free(z), free(cdx);
            }
    /* add: y separate, y == a, y == b */
    float *cy = malloc(sizeof(float) * (size_t)n);
    C_->add(C_, x, r, n, cy);
    for (int alias = 0; alias < 3; alias++) {
        float *ga = GF(x, n), *gb = GF(r, n), *gy = alias == 1 ? ga : alias == 2 ? gb : G_->buf_alloc(G_, sizeof(float) * (size_t)n);
        G_->add(G_, ga, gb, n, gy);
        snprintf(what, sizeof(what), "add n %lld %s", (long long)n, alias == 1 ? "y=a" : alias == 2 ? "y=b" : "");
        gcmp(what, gy, cy, n, T_EXACT);
        G_->buf_free(G_, ga), G_->buf_free(G_, gb);
        if (alias == 0) G_->buf_free(G_, gy);
    }
    /* gather: scattered offsets (repeats, the first and last element) */
    int64_t ng = n / 3 + 2;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)ng);
    uint64_t h = 12345;
    for (int64_t i = 0; i < ng; i++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        idx[i] = (int32_t)((h >> 33) % (uint64_t)n);
    }
    idx[0] = 0, idx[ng - 1] = (int32_t)(n - 1);
    float *cg = malloc(sizeof(float) * (size_t)ng);
    C_->gather(C_, x, idx, ng, cg);
    float *gx = GF(x, n), *gg = G_->buf_alloc(G_, sizeof(float) * (size_t)ng);
    int32_t *gidx = G_->buf_alloc(G_, sizeof(int32_t) * (size_t)ng);
    G_->upload(G_, gidx, idx, sizeof(int32_t) * (size_t)ng);
    G_->gather(G_, gx, gidx, ng, gg);
    snprintf(what, sizeof(what), "gather %lld of n %lld", (long long)ng, (long long)n);
    gcmp(what, gg, cg, ng, T_EXACT);
    /* the stopwatch (the server's busy figure) over the same gather */
    G_->timer_mark(G_, 0);
    G_->gather(G_, gx, gidx, ng, gg);
    G_->timer_mark(G_, 1);
    if (G_->sync) G_->sync(G_);
    double ms = G_->timer_ms(G_);
    CHECKF(ms >= 0.0 && ms < 10000.0, "stopwatch over a gather of %lld: %.4f ms", (long long)ng, ms);
    G_->buf_free(G_, gx), G_->buf_free(G_, gg), G_->buf_free(G_, gidx);
    free(idx), free(cg);
    free(cy), free(x), free(r), free(dy);
}

/* gather_rows (the resident training window): two sources of R rows each,
 * rows drawn with repeats, policy entries of 0 to 40 a row; every output
 * byte for byte the CPU twin's. */
static void test_gather_rows(int32_t B, int32_t R, int32_t pb, int32_t hn, int32_t lb) {
    enum { NSRC = 2 };
    uint64_t h = 777 + (uint64_t)B;
#define NEXT() (h = h * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(h >> 33))
    uint8_t *planes[NSRC], *legal[NSRC];
    float *hand[NSRC], *probs[NSRC], *q[NSRC];
    uint16_t *labels[NSRC];
    int8_t *result[NSRC];
    uint32_t *start[NSRC];
    nn_rows_src_t hs[NSRC], gs[NSRC];
    void *gmem[NSRC][7];
    for (int s = 0; s < NSRC; s++) {
        start[s] = malloc(sizeof(uint32_t) * (size_t)(R + 1));
        start[s][0] = 0;
        for (int32_t r = 0; r < R; r++) start[s][r + 1] = start[s][r] + (NEXT() % 5 == 0 ? 0 : NEXT() % 41);
        uint32_t nnz = start[s][R];
        planes[s] = malloc((size_t)R * pb + 1), legal[s] = malloc((size_t)R * lb + 1);
        hand[s] = frand((int64_t)R * hn, 0, 1), probs[s] = frand(nnz, 0.5f, 0.2f), q[s] = frand(R, 0, 0.5f);
        labels[s] = malloc(sizeof(uint16_t) * (nnz + 1)), result[s] = malloc((size_t)R);
        for (int64_t i = 0; i < (int64_t)R * pb; i++) planes[s][i] = (uint8_t)NEXT();
        for (int64_t i = 0; i < (int64_t)R * lb; i++) legal[s][i] = (uint8_t)NEXT();
        for (uint32_t i = 0; i < nnz; i++) labels[s][i] = (uint16_t)(NEXT() % 2187);
        for (int32_t r = 0; r < R; r++) result[s][r] = (int8_t)((int)(NEXT() % 3) - 1);
        hs[s] = (nn_rows_src_t){planes[s], hand[s], legal[s], labels[s], probs[s], result[s], q[s]};
        gmem[s][0] = gdup(planes[s], (size_t)R * pb), gmem[s][1] = gdup(hand[s], sizeof(float) * (size_t)R * hn);
        gmem[s][2] = gdup(legal[s], (size_t)R * lb), gmem[s][3] = gdup(labels[s], sizeof(uint16_t) * nnz);
        gmem[s][4] = gdup(probs[s], sizeof(float) * nnz), gmem[s][5] = gdup(result[s], (size_t)R);
        gmem[s][6] = gdup(q[s], sizeof(float) * (size_t)R);
        gs[s] = (nn_rows_src_t){gmem[s][0], gmem[s][1], gmem[s][2], gmem[s][3], gmem[s][4], gmem[s][5], gmem[s][6]};
    }
    nn_row_ref_t *refs = malloc(sizeof(nn_row_ref_t) * (size_t)B);
    uint32_t *off = malloc(sizeof(uint32_t) * (size_t)(B + 1));
    off[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        int32_t s = (int32_t)(NEXT() % NSRC);
        uint32_t r = b == 0 ? 0 : b == B - 1 ? (uint32_t)R - 1 : NEXT() % (uint32_t)R;
        refs[b] = (nn_row_ref_t){.src = s, .row = r, .policy_begin = start[s][r]};
        off[b + 1] = off[b] + start[s][r + 1] - start[s][r];
    }
#undef NEXT
    uint32_t nnz = off[B];
    uint8_t *cp = malloc((size_t)B * pb + 1), *cl = malloc((size_t)B * lb + 1);
    float *ch = malloc(sizeof(float) * ((size_t)B * hn + 1)), *cpr = malloc(sizeof(float) * (nnz + 1)),
          *cq = malloc(sizeof(float) * (size_t)B);
    uint16_t *clb = malloc(sizeof(uint16_t) * (nnz + 1));
    int8_t *cr = malloc((size_t)B);
    C_->gather_rows(C_, hs, refs, off, B, pb, hn, lb, cp, ch, cl, clb, cpr, cr, cq);
    void *gsrc = gdup(gs, sizeof gs), *grefs = gdup(refs, sizeof(nn_row_ref_t) * (size_t)B),
         *goff = gdup(off, sizeof(uint32_t) * (size_t)(B + 1));
    void *gp = G_->buf_alloc(G_, (size_t)B * pb + 1), *gh = G_->buf_alloc(G_, sizeof(float) * ((size_t)B * hn + 1)),
         *gl = G_->buf_alloc(G_, (size_t)B * lb + 1), *glb = G_->buf_alloc(G_, sizeof(uint16_t) * (nnz + 1)),
         *gpr = G_->buf_alloc(G_, sizeof(float) * (nnz + 1)), *gr = G_->buf_alloc(G_, (size_t)B),
         *gq = G_->buf_alloc(G_, sizeof(float) * (size_t)B);
    G_->gather_rows(G_, gsrc, grefs, goff, B, pb, hn, lb, gp, gh, gl, glb, gpr, gr, gq);
    gpu_ok("gather_rows");
    struct {
        const char *name;
        const void *cpu, *gpu;
        size_t bytes;
    } col[7] = {{"planes", cp, gp, (size_t)B * pb},
                {"hand", ch, gh, sizeof(float) * (size_t)B * hn},
                {"legal", cl, gl, (size_t)B * lb},
                {"labels", clb, glb, sizeof(uint16_t) * nnz},
                {"probs", cpr, gpr, sizeof(float) * nnz},
                {"result", cr, gr, (size_t)B},
                {"q", cq, gq, sizeof(float) * (size_t)B}};
    for (int i = 0; i < 7; i++) {
        uint8_t *got = malloc(col[i].bytes + 1);
        if (col[i].bytes) G_->download(G_, got, col[i].gpu, col[i].bytes);
        gpu_ok("gather_rows download");
        int same = !memcmp(got, col[i].cpu, col[i].bytes);
        fprintf(stderr, "[%s] gather_rows B %d R %d %-8s %zu bytes %s\n", M_->name, B, R, col[i].name, col[i].bytes,
                same ? "ok" : "MISMATCH");
        t_judge(same);
        free(got);
        G_->buf_free(G_, (void *)col[i].gpu);
    }
    G_->buf_free(G_, gsrc), G_->buf_free(G_, grefs), G_->buf_free(G_, goff);
    for (int s = 0; s < NSRC; s++) {
        for (int k = 0; k < 7; k++) G_->buf_free(G_, gmem[s][k]);
        free(planes[s]), free(legal[s]), free(hand[s]), free(probs[s]), free(q[s]), free(labels[s]), free(result[s]);
        free(start[s]);
    }
    free(refs), free(off), free(cp), free(cl), free(ch), free(cpr), free(cq), free(clb), free(cr);
}

static void test_dense(int32_t B, int32_t in, int32_t out, int with_b, int with_dx) {
    float *x = frand((int64_t)B * in, 0, 1), *w = frand((int64_t)out * in, 0, 1.0f / sqrtf((float)in)), *b = frand(out, 0, 1);
    float *dy = frand((int64_t)B * out, 0, 1), *junk = frand(out, 0, 5);
    float *cy = malloc(sizeof(float) * (size_t)B * out), *cdx = malloc(sizeof(float) * (size_t)B * in),
          *cdw = malloc(sizeof(float) * (size_t)out * in), *cdb = malloc(sizeof(float) * (size_t)out);
    C_->dense_fwd(C_, x, w, with_b ? b : NULL, B, in, out, cy);
    C_->dense_bwd(C_, x, w, dy, B, in, out, with_dx ? cdx : NULL, cdw, with_b ? cdb : NULL);
    float *gx = GF(x, (int64_t)B * in), *gw = GF(w, (int64_t)out * in), *gb = GF(b, out), *gdy = GF(dy, (int64_t)B * out);
    float *gy = G_->buf_alloc(G_, sizeof(float) * (size_t)B * out), *gdx = G_->buf_alloc(G_, sizeof(float) * (size_t)B * in),
          *gdw = G_->buf_alloc(G_, sizeof(float) * (size_t)out * in), *gdb = GF(junk, out);
    G_->dense_fwd(G_, gx, gw, with_b ? gb : NULL, B, in, out, gy);
    G_->dense_bwd(G_, gx, gw, gdy, B, in, out, with_dx ? gdx : NULL, gdw, with_b ? gdb : NULL);
    char what[96];
    snprintf(what, sizeof(what), "dense_fwd B%d %d->%d%s", B, in, out, with_b ? " +b" : "");
    gcmp(what, gy, cy, (int64_t)B * out, M_->dense);
    if (with_dx) {
        snprintf(what, sizeof(what), "dense_bwd B%d %d->%d dx", B, in, out);
        gcmp(what, gdx, cdx, (int64_t)B * in, M_->dense);
    }
    snprintf(what, sizeof(what), "dense_bwd B%d %d->%d dw", B, in, out);
    gcmp(what, gdw, cdw, (int64_t)out * in, M_->dense);
    snprintf(what, sizeof(what), "dense_bwd B%d %d->%d db%s", B, in, out, with_b ? "" : " NULL leaves it");
    gcmp(what, gdb, with_b ? cdb : junk, out, with_b ? T_RED : T_EXACT);
    float *bufs[] = {gx, gw, gb, gdy, gy, gdx, gdw, gdb};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    free(x), free(w), free(b), free(dy), free(junk), free(cy), free(cdx), free(cdw), free(cdb);
}

/* Global pooling (nn/backend.h's pool_fwd/pool_bwd/chan_bias_fwd/chan_bias_bwd):
 * the board's mean and max per channel, its backward added into a gradient
 * that is not zero (ties in x: the first square takes the max's gradient),
 * the channel bias broadcast (apart and in place) and its sum over squares. */
static void test_gpool(int32_t B, int32_t C) {
    int64_t n = (int64_t)B * C * NN_HW, np = (int64_t)B * 2 * C, nb = (int64_t)B * C;
    float *x = frand(n, 0.5f, 1), *dp = frand(np, 0, 1), *dx0 = frand(n, 0, 1), *bias = frand(nb, 0, 1);
    for (int64_t i = 0; i < nb; i += 5) /* a channel of equal values: the max's gradient goes to square 0 */
        for (int32_t q = 0; q < NN_HW; q++) x[i * NN_HW + q] = 0.25f;
    float *cp = malloc(sizeof(float) * (size_t)np), *cdx = fdup(dx0, n), *cy = malloc(sizeof(float) * (size_t)n),
          *cdb = malloc(sizeof(float) * (size_t)nb);
    C_->pool_fwd(C_, x, B, C, cp);
    C_->pool_bwd(C_, x, dp, B, C, cdx);
    C_->chan_bias_fwd(C_, x, bias, B, C, cy);
    C_->chan_bias_bwd(C_, x, B, C, cdb);
    float *gx = GF(x, n), *gdp = GF(dp, np), *gdx = GF(dx0, n), *gbias = GF(bias, nb);
    float *gp = G_->buf_alloc(G_, sizeof(float) * (size_t)np), *gy = G_->buf_alloc(G_, sizeof(float) * (size_t)n),
          *gdb = G_->buf_alloc(G_, sizeof(float) * (size_t)nb), *gx2 = GF(x, n);
    G_->pool_fwd(G_, gx, B, C, gp);
    G_->pool_bwd(G_, gx, gdp, B, C, gdx);
    G_->chan_bias_fwd(G_, gx, gbias, B, C, gy);
    G_->chan_bias_fwd(G_, gx2, gbias, B, C, gx2); /* in place */
    G_->chan_bias_bwd(G_, gx, B, C, gdb);
    char what[96];
    snprintf(what, sizeof(what), "pool_fwd B%d C%d (mean, max)", B, C);
    gcmp(what, gp, cp, np, T_RED);
    snprintf(what, sizeof(what), "pool_bwd B%d C%d (added)", B, C);
    gcmp(what, gdx, cdx, n, T_ELEM);
    snprintf(what, sizeof(what), "chan_bias_fwd B%d C%d", B, C);
    gcmp(what, gy, cy, n, T_EXACT);
    snprintf(what, sizeof(what), "chan_bias_fwd B%d C%d in place", B, C);
    gcmp(what, gx2, cy, n, T_EXACT);
    snprintf(what, sizeof(what), "chan_bias_bwd B%d C%d", B, C);
    gcmp(what, gdb, cdb, nb, T_RED);
    float *bufs[] = {gx, gdp, gdx, gbias, gp, gy, gdb, gx2};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    free(x), free(dp), free(dx0), free(bias), free(cp), free(cdx), free(cy), free(cdb);
}

/* stats start non-zero: loss ops ADD into them */
static void stats_init(float *s) {
    for (int i = 0; i < NN_STAT_NB; i++) s[i] = 0.5f * (float)(i + 1);
}

static void cmp_stats(const char *what, const float *gs, const float *cs, int first, int last, double count_slack) {
    char w[128];
    static const char *names[NN_STAT_NB] = {"policy_loss", "policy_correct", "value_loss", "legal_loss",
                                            "legal_tp", "legal_fp", "legal_fn", "gnorm2",
                                            "ml_loss", "ml_abs", "ml_count", "opp_loss", "opp_correct"};
    for (int i = first; i <= last; i++) {
        snprintf(w, sizeof(w), "%s stats.%s", what, names[i]);
        int count = i == NN_STAT_POLICY_CORRECT || i == NN_STAT_LEGAL_TP || i == NN_STAT_LEGAL_FP || i == NN_STAT_LEGAL_FN ||
                    i == NN_STAT_ML_COUNT;
        check_scalar(w, gs[i], cs[i], count ? count_slack : 1e-6, count ? 0 : 1e-5);
    }
}

static void test_policy_loss(int32_t B, int32_t N, int32_t max_labels) {
    float *z = frand((int64_t)B * N, 0, 2);
    uint32_t *off = calloc((size_t)B + 1, sizeof(uint32_t));
    uint16_t *lab = calloc((size_t)B * (max_labels + 1), sizeof(uint16_t));
    float *prob = calloc((size_t)B * (max_labels + 1), sizeof(float));
    for (int32_t b = 0; b < B; b++) {
        int32_t k = b % 7 == 3 ? 0 : 1 + (int32_t)(t_next() % (uint64_t)max_labels); /* some rows have no target */
        uint32_t o = off[b];
        for (int32_t j = 0; j < k; j++) {
            lab[o + j] = (uint16_t)(t_next() % (uint64_t)N);
            prob[o + j] = (float)(0.05 + t_unif());
        }
        if (k >= 2 && b % 5 == 1) { /* a duplicated label and a tie in the target */
            lab[o + 1] = lab[o];
            prob[o + 1] = prob[o];
        }
        if (b % 11 == 2) { /* a tie in the logits: argmax goes to the lower index */
            float mx = -1e30f;
            for (int32_t i = 0; i < N; i++) mx = fmaxf(mx, z[(int64_t)b * N + i]);
            z[(int64_t)b * N + N - 1] = mx;
            z[(int64_t)b * N + N / 2] = mx;
        }
        off[b + 1] = o + (uint32_t)k;
    }
    uint32_t nnz = off[B];
    float scale = 1.0f / (float)B, cs[NN_STAT_NB], gs[NN_STAT_NB];
    float *cd = malloc(sizeof(float) * (size_t)B * N);
    stats_init(cs);
    C_->policy_loss(C_, z, off, lab, prob, B, N, scale, cd, cs);
    stats_init(gs);
    float *gz = GF(z, (int64_t)B * N), *gd = G_->buf_alloc(G_, sizeof(float) * (size_t)B * N), *gst = GF(gs, NN_STAT_NB);
    uint32_t *goff = gdup(off, sizeof(uint32_t) * (size_t)(B + 1));
    uint16_t *glab = gdup(lab, sizeof(uint16_t) * (nnz ? nnz : 1));
    float *gprob = gdup(prob, sizeof(float) * (nnz ? nnz : 1));
    G_->policy_loss(G_, gz, goff, glab, gprob, B, N, scale, gd, gst);
    char what[96];
    snprintf(what, sizeof(what), "policy_loss B%d N%d dlogits", B, N);
    gcmp(what, gd, cd, (int64_t)B * N, T_ELEM);
    G_->download(G_, gs, gst, sizeof(gs));
    snprintf(what, sizeof(what), "policy_loss B%d N%d", B, N);
    cmp_stats(what, gs, cs, NN_STAT_POLICY_LOSS, NN_STAT_POLICY_CORRECT, 0);
    for (int i = NN_STAT_VALUE_LOSS; i < NN_STAT_NB; i++) CHECK(gs[i] == 0.5f * (float)(i + 1)); /* untouched */
    G_->buf_free(G_, gz), G_->buf_free(G_, gd), G_->buf_free(G_, gst), G_->buf_free(G_, goff), G_->buf_free(G_, glab),
        G_->buf_free(G_, gprob);
    free(z), free(off), free(lab), free(prob), free(cd);
}

static void test_value(int32_t B, int32_t K) {
    int8_t *res = malloc((size_t)B);
    float *q = frand(B, 0, 0.8f); /* some outside [-1, 1]: clamped */
    for (int32_t b = 0; b < B; b++) res[b] = (int8_t)((int)(t_next() % 3) - 1);
    char what[96];
    if (K == 3) {
        float *ct = malloc(sizeof(float) * (size_t)B * 3);
        C_->value_target(C_, res, q, B, 0.3f, 0.25f, ct);
        int8_t *gr = gdup(res, (size_t)B);
        float *gq = GF(q, B), *gt = G_->buf_alloc(G_, sizeof(float) * (size_t)B * 3);
        G_->value_target(G_, gr, gq, B, 0.3f, 0.25f, gt);
        snprintf(what, sizeof(what), "value_target B%d", B);
        gcmp(what, gt, ct, (int64_t)B * 3, T_ELEM);
        G_->buf_free(G_, gr), G_->buf_free(G_, gq), G_->buf_free(G_, gt);
        free(ct);
    }
    float *z = frand((int64_t)B * K, 0, 2), *t = frand((int64_t)B * K, 0, 1);
    for (int64_t i = 0; i < (int64_t)B * K; i++) t[i] = fabsf(t[i]); /* need not sum to 1 */
    float scale = 0.7f / (float)B, cs[NN_STAT_NB], gs[NN_STAT_NB];
    float *cd = malloc(sizeof(float) * (size_t)B * K);
    stats_init(cs);
    C_->value_loss(C_, z, t, B, K, scale, cd, cs);
    stats_init(gs);
    float *gz = GF(z, (int64_t)B * K), *gt = GF(t, (int64_t)B * K), *gd = G_->buf_alloc(G_, sizeof(float) * (size_t)B * K),
          *gst = GF(gs, NN_STAT_NB);
    G_->value_loss(G_, gz, gt, B, K, scale, gd, gst);
    snprintf(what, sizeof(what), "value_loss B%d K%d dlogits", B, K);
    gcmp(what, gd, cd, (int64_t)B * K, T_ELEM);
    G_->download(G_, gs, gst, sizeof(gs));
    snprintf(what, sizeof(what), "value_loss B%d K%d", B, K);
    cmp_stats(what, gs, cs, NN_STAT_VALUE_LOSS, NN_STAT_VALUE_LOSS, 0);
    CHECK(gs[NN_STAT_POLICY_LOSS] == 0.5f && gs[NN_STAT_LEGAL_LOSS] == 2.0f);
    G_->buf_free(G_, gz), G_->buf_free(G_, gt), G_->buf_free(G_, gd), G_->buf_free(G_, gst);
    free(res), free(q), free(z), free(t), free(cd);
}

static void test_legal_loss(int32_t B, int32_t N) {
    int64_t n = (int64_t)B * N;
    float *z = frand(n, -1, 2), *t = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        t[i] = t_unif() < 0.1 ? 1.0f : 0.0f;
        if (i % 53 == 0) z[i] = 0.0f; /* exactly at the threshold: predicted legal */
    }
    float scale = 3.0f / (float)n, cs[NN_STAT_NB], gs[NN_STAT_NB];
    float *cd = malloc(sizeof(float) * (size_t)n);
    stats_init(cs);
    C_->legal_loss(C_, z, t, B, N, scale, cd, cs);
    stats_init(gs);
    float *gz = GF(z, n), *gt = GF(t, n), *gd = G_->buf_alloc(G_, sizeof(float) * (size_t)n), *gst = GF(gs, NN_STAT_NB);
    G_->legal_loss(G_, gz, gt, B, N, scale, gd, gst);
    char what[96];
    snprintf(what, sizeof(what), "legal_loss B%d N%d dlogits", B, N);
    gcmp(what, gd, cd, n, T_ELEM);
    G_->download(G_, gs, gst, sizeof(gs));
    snprintf(what, sizeof(what), "legal_loss B%d N%d", B, N);
    cmp_stats(what, gs, cs, NN_STAT_LEGAL_LOSS, NN_STAT_LEGAL_FN, 0);
    G_->buf_free(G_, gz), G_->buf_free(G_, gt), G_->buf_free(G_, gd), G_->buf_free(G_, gst);
    free(z), free(t), free(cd);
}

/* moves_left_loss (the moves-left head's Huber loss): predictions on both
 * sides of the delta, rows without a target (-1), exact zeros. */
static void test_moves_left_loss(int32_t B) {
    uint64_t keep = t_rng; /* the draws of the tests after this one as they were before it */
    float *z = frand(B, 1.5f, 1.0f), *t = malloc(sizeof(float) * (size_t)B);
    for (int32_t b = 0; b < B; b++) {
        t[b] = b % 5 == 3 ? -1.0f : (float)(t_next() % 120);
        if (b % 17 == 0) z[b] = 0.0f;
    }
    float scale = 0.9f / (float)B, cs[NN_STAT_NB], gs[NN_STAT_NB];
    float *cd = malloc(sizeof(float) * (size_t)B);
    stats_init(cs);
    C_->moves_left_loss(C_, z, t, B, NN_ML_SCALE, NN_ML_HUBER, scale, cd, cs);
    stats_init(gs);
    float *gz = GF(z, B), *gt = GF(t, B), *gd = G_->buf_alloc(G_, sizeof(float) * (size_t)B), *gst = GF(gs, NN_STAT_NB);
    G_->moves_left_loss(G_, gz, gt, B, NN_ML_SCALE, NN_ML_HUBER, scale, gd, gst);
    char what[96];
    snprintf(what, sizeof(what), "moves_left_loss B%d dpred", B);
    gcmp(what, gd, cd, B, T_ELEM);
    G_->download(G_, gs, gst, sizeof(gs));
    snprintf(what, sizeof(what), "moves_left_loss B%d", B);
    cmp_stats(what, gs, cs, NN_STAT_ML_LOSS, NN_STAT_ML_COUNT, 0);
    for (int i = 0; i < NN_STAT_ML_LOSS; i++) CHECK(gs[i] == 0.5f * (float)(i + 1)); /* untouched */
    G_->buf_free(G_, gz), G_->buf_free(G_, gt), G_->buf_free(G_, gd), G_->buf_free(G_, gst);
    free(z), free(t), free(cd);
    t_rng = keep;
}

/* gather_heads (the optional heads' targets from the resident window): two
 * sources, one with a moves_left column and one without, opponent replies
 * of 0 to 30 entries from rows of either source, one-hot ones on a row's
 * move_label; byte for byte the CPU's. */
static void test_gather_heads(int32_t B, int32_t R) {
    enum { NSRC = 2 };
    uint64_t keep = t_rng; /* the draws of the tests after this one as they were before it */
    int16_t *ml = malloc(sizeof(int16_t) * (size_t)R);
    for (int32_t r = 0; r < R; r++) ml[r] = (int16_t)((int)(t_next() % 300) - 1);
    uint32_t nnz = (uint32_t)R * 30;
    uint16_t *labels = malloc(sizeof(uint16_t) * nnz);
    float *probs = frand(nnz, 0.5f, 0.2f);
    for (uint32_t i = 0; i < nnz; i++) labels[i] = (uint16_t)(t_next() % 2187);
    uint16_t *mlab = malloc(sizeof(uint16_t) * (size_t)R);
    for (int32_t r = 0; r < R; r++) mlab[r] = (uint16_t)(t_next() % 2187);
    nn_rows_src_t hs[NSRC] = {{.labels = labels, .probs = probs, .moves_left = ml, .move_label = mlab},
                              {.labels = labels, .probs = probs, .move_label = mlab}};
    void *gml = gdup(ml, sizeof(int16_t) * (size_t)R), *glab = gdup(labels, sizeof(uint16_t) * nnz), *gpr = GF(probs, nnz),
         *gmlab = gdup(mlab, sizeof(uint16_t) * (size_t)R);
    nn_rows_src_t gs[NSRC] = {{.labels = glab, .probs = gpr, .moves_left = gml, .move_label = gmlab},
                              {.labels = glab, .probs = gpr, .move_label = gmlab}};
    nn_row_ref_t *refs = malloc(sizeof(nn_row_ref_t) * (size_t)B), *orefs = malloc(sizeof(nn_row_ref_t) * (size_t)B);
    uint32_t *off = malloc(sizeof(uint32_t) * (size_t)(B + 1));
    off[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        uint32_t r = (uint32_t)(t_next() % (uint32_t)R), k = b % 4 == 1 ? 0 : (uint32_t)(t_next() % 31);
        uint32_t onehot = b % 7 == 3; /* the move played: one entry on its label */
        if (onehot) k = 1;
        refs[b] = (nn_row_ref_t){.src = (int32_t)(t_next() % NSRC), .row = r};
        orefs[b] = (nn_row_ref_t){.src = (int32_t)(t_next() % NSRC), .row = r, .policy_begin = r * 30, .onehot = onehot};
        off[b + 1] = off[b] + k;
    }
    uint32_t n = off[B];
    float *cml = malloc(sizeof(float) * (size_t)B), *cpr = malloc(sizeof(float) * (n + 1));
    uint16_t *clb = malloc(sizeof(uint16_t) * (n + 1));
    C_->gather_heads(C_, hs, refs, orefs, off, B, cml, clb, cpr);
    void *gsrc = gdup(gs, sizeof gs), *grefs = gdup(refs, sizeof(nn_row_ref_t) * (size_t)B),
         *gorefs = gdup(orefs, sizeof(nn_row_ref_t) * (size_t)B), *goff = gdup(off, sizeof(uint32_t) * (size_t)(B + 1));
    void *o_ml = G_->buf_alloc(G_, sizeof(float) * (size_t)B), *o_lb = G_->buf_alloc(G_, sizeof(uint16_t) * (n + 1)),
         *o_pr = G_->buf_alloc(G_, sizeof(float) * (n + 1));
    G_->gather_heads(G_, gsrc, grefs, gorefs, goff, B, o_ml, o_lb, o_pr);
    gpu_ok("gather_heads");
    float *g_ml = malloc(sizeof(float) * (size_t)B), *g_pr = malloc(sizeof(float) * (n + 1));
    uint16_t *g_lb = malloc(sizeof(uint16_t) * (n + 1));
    G_->download(G_, g_ml, o_ml, sizeof(float) * (size_t)B);
    if (n) G_->download(G_, g_lb, o_lb, sizeof(uint16_t) * n), G_->download(G_, g_pr, o_pr, sizeof(float) * n);
    gpu_ok("gather_heads download");
    int same = !memcmp(g_ml, cml, sizeof(float) * (size_t)B) && !memcmp(g_lb, clb, sizeof(uint16_t) * n) &&
               !memcmp(g_pr, cpr, sizeof(float) * n);
    int minus = 0; /* the source without the column gives -1 */
    for (int32_t b = 0; b < B; b++) minus += refs[b].src == 1 && cml[b] == -1.0f;
    fprintf(stderr, "[%s] gather_heads B %d R %d: moves_left, %u reply entries %s\n", M_->name, B, R, n,
            same ? "ok" : "MISMATCH");
    t_judge(same);
    int want = 0;
    for (int32_t b = 0; b < B; b++) want += refs[b].src == 1;
    CHECK(minus == want);
    int hot = 1; /* the one-hot entries hold the row's move label, probability 1 */
    for (int32_t b = 3; b < B; b += 7) hot &= clb[off[b]] == mlab[orefs[b].row] && cpr[off[b]] == 1.0f;
    CHECK(hot);
    free(mlab);
    void *bufs[] = {gml, glab, gpr, gmlab, gsrc, grefs, gorefs, goff, o_ml, o_lb, o_pr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) G_->buf_free(G_, bufs[i]);
    free(ml), free(labels), free(probs), free(refs), free(orefs), free(off), free(cml), free(cpr), free(clb);
    free(g_ml), free(g_pr), free(g_lb);
    t_rng = keep;
}

static void test_sum_squares(int64_t n) {
    float *x = frand(n, 0, 1), cs = 1.5f, gs = 1.5f; /* adds into *out */
    C_->sum_squares(C_, x, n, &cs);
    float *gx = GF(x, n), *go = GF(&gs, 1);
    G_->sum_squares(G_, gx, n, go);
    G_->download(G_, &gs, go, sizeof(float));
    char what[96];
    snprintf(what, sizeof(what), "sum_squares n %lld", (long long)n);
    check_scalar(what, gs, cs, 0, 2e-6);
    G_->buf_free(G_, gx), G_->buf_free(G_, go);
    free(x);
}

static void test_sgd(int64_t n, int nesterov, float wd, float clip, int with_gnorm) {
    float *p = frand(n, 0, 1), *g = frand(n, 0, 0.5f), *v = frand(n, 0, 0.1f);
    float gn2 = 0;
    for (int64_t i = 0; i < n; i++) gn2 += g[i] * g[i];
    nn_sgd_args_t a = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = wd, .clip_norm = clip, .nesterov = nesterov};
    float *cp = fdup(p, n), *cv = fdup(v, n);
    C_->sgd_step(C_, cp, g, cv, n, with_gnorm ? &gn2 : NULL, &a);
    float *gp = GF(p, n), *gg = GF(g, n), *gv = GF(v, n), *gn = GF(&gn2, 1);
    G_->sgd_step(G_, gp, gg, gv, n, with_gnorm ? gn : NULL, &a);
    char what[128];
    snprintf(what, sizeof(what), "sgd n %lld nesterov %d wd %g clip %g%s p", (long long)n, nesterov, wd, clip,
             with_gnorm ? "" : " gnorm NULL");
    gcmp(what, gp, cp, n, T_ELEM);
    what[strlen(what) - 1] = 'v';
    gcmp(what, gv, cv, n, T_ELEM);
    /* lr and weight decay read from device memory (the recorded training
     * step's route): the same update as from the arguments */
    float hy[2] = {a.lr, a.weight_decay};
    float *gp2 = GF(p, n), *gv2 = GF(v, n), *ghy = GF(hy, 2);
    nn_sgd_args_t ad = a;
    ad.lr = 123.0f, ad.weight_decay = 7.0f; /* ignored */
    ad.hyper = ghy;
    G_->sgd_step(G_, gp2, gg, gv2, n, with_gnorm ? gn : NULL, &ad);
    what[strlen(what) - 1] = 'p';
    strncat(what, " (hyper)", sizeof(what) - strlen(what) - 1);
    gcmp(what, gp2, cp, n, T_ELEM);
    G_->buf_free(G_, gp), G_->buf_free(G_, gg), G_->buf_free(G_, gv), G_->buf_free(G_, gn);
    G_->buf_free(G_, gp2), G_->buf_free(G_, gv2), G_->buf_free(G_, ghy);
    free(p), free(g), free(v), free(cp), free(cv);
}

/* An instance records its first failure, goes quiet, and poisons downloads. */
static void test_sticky_error(void) {
    if (g_fake) return;
    char err[512];
    nn_backend_t *g = nn_backend_cuda_new(g_dev, M_->flags & ~(uint32_t)NN_CUDA_ABORT_ON_ERROR, err, sizeof(err));
    KOMA_ASSERT(g);
    CHECK(nn_backend_is_cuda(g) && !nn_backend_is_cuda(C_));
    CHECK(nn_cuda_error(g) == NULL);
    float *d = g->buf_alloc(g, 4 * 81 * sizeof(float));
    KOMA_ASSERT(d);
    fprintf(stderr, "[%s] sticky error: an unsupported conv (k = 2) must fail once, loudly:\n", M_->name);
    g->conv_fwd(g, d, d, NULL, 1, 2, 2, 2, d, NULL); /* k = 2 is outside the interface */
    const char *e = nn_cuda_error(g);
    CHECK(e != NULL && strstr(e, "kernel size 2") != NULL);
    float out[4] = {1, 2, 3, 4};
    g->download(g, out, d, sizeof(out));
    CHECK(isnan(out[0]) && isnan(out[3]));
    g->buf_free(g, d);
    nn_backend_free(g);
}

static void run_ops(void) {
    test_memory();
    gpu_ok("memory");
    test_expand(1, 5, 0);
    test_expand(3, 68, 14);
    test_expand(17, 27, 0);
    test_expand(2, 1, 3);
    gpu_ok("expand");
    /* B, cin, cout, k, bias, accumulate, workspace */
    test_conv(1, 5, 7, 3, 1, 0, 0);
    test_conv(1, 82, 64, 3, 0, 1, 1);
    test_conv(3, 7, 5, 1, 1, 1, 0);
    test_conv(8, 64, 64, 3, 0, 0, 0);
    test_conv(5, 33, 27, 1, 1, 0, 1);
    test_conv(16, 64, 8, 1, 0, 1, 2);
    test_conv(2, 3, 4, 3, 1, 1, 2);
    if (!g_quick) {
        test_conv(37, 128, 128, 3, 1, 1, 0);
        test_conv(64, 64, 64, 3, 0, 0, 1);
    }
    gpu_ok("conv");
    /* B, stem planes, trunk channels, head channels, act: NHWC trunks (C % 8 == 0), an NCHW one */
    test_conv_act(3, 82, 16, 2, NN_ACT_RELU);
    test_conv_act(5, 82, 16, 8, NN_ACT_SILU);
    test_conv_act(2, 7, 12, 3, NN_ACT_RELU);
    if (!g_quick) test_conv_act(64, 82, 64, 2, NN_ACT_RELU);
    gpu_ok("conv_fwd_act");
    { /* the other algorithm choosers: cuDNN heuristics, deterministic algorithms only */
        char err[512];
        nn_backend_t *keep = G_;
        G_ = gpu_new(M_->flags | NN_CUDA_HEURISTIC | NN_CUDA_DETERMINISTIC, err, sizeof(err));
        if (!t_judge(G_ != NULL)) {
            fprintf(stderr, "[%s] heuristic+deterministic instance: %s\n", M_->name, err);
        } else {
            fprintf(stderr, "[%s] convs with NN_CUDA_HEURISTIC | NN_CUDA_DETERMINISTIC:\n", M_->name);
            test_conv(9, 64, 64, 3, 1, 1, 0);
            test_conv(4, 82, 32, 3, 0, 0, 1);
            test_conv(4, 32, 27, 1, 1, 0, 0);
            gpu_ok("conv heuristic/deterministic");
            nn_backend_free(G_);
        }
        G_ = keep;
    }
    test_bn(1, 5, 81, 0, 0);
    test_bn(3, 64, 81, 1, 0);
    test_bn(17, 8, 81, 0, 0);
    test_bn(2, 3, 7, 1, 0);
    test_bn(300, 33, 81, 0, 0);
    test_bn(257, 128, 81, 1, 0); /* several partial blocks per channel, B not a multiple of them */
    test_bn(1000, 16, 81, 0, 0);
    test_bn(3, 8, 81, 0, 1); /* training's fused unit */
    test_bn(257, 128, 81, 0, 2);
    test_bn(64, 33, 81, 1, 2);
    gpu_ok("bn");
    test_bn_fold(5, 63);
    test_bn_fold(64, 576);
    test_bn_fold(8, 64);
    gpu_ok("bn_fold");
    test_elementwise(1);
    test_elementwise(81 * 64 * 3 + 5);
    test_elementwise(1000003);
    gpu_ok("elementwise");
    test_gather_rows(1, 1, 831, 14, 274);
    test_gather_rows(300, 50, 831, 14, 274);
    test_gather_rows(1024, 3000, 831, 0, 274);
    test_gather_heads(1, 1);
    test_gather_heads(300, 50);
    test_gather_heads(5000, 700); /* more rows than blocks: grid-stride */
    test_dense(1, 648, 128, 1, 1);
    test_dense(7, 128, 3, 1, 0);
    test_dense(33, 5, 9, 0, 1);
    test_dense(256, 648, 128, 1, 1);
    gpu_ok("dense");
    test_gpool(1, 1);
    test_gpool(3, 16);
    test_gpool(257, 64);
    test_gpool(1024, 128);
    gpu_ok("global pooling");
    test_policy_loss(1, NN_POLICY_NB, 1);
    test_policy_loss(5, NN_POLICY_NB, 40);
    test_policy_loss(1030, NN_POLICY_NB, 8); /* more rows than reduction blocks */
    test_policy_loss(9, 50, 300);            /* more targets than threads per row */
    gpu_ok("policy_loss");
    test_value(1, 3);
    test_value(9, 3);
    test_value(2000, 3);
    test_value(7, 5);
    gpu_ok("value");
    test_legal_loss(1, NN_POLICY_NB);
    test_legal_loss(4, NN_POLICY_NB);
    test_legal_loss(3, 10);
    test_legal_loss(200, NN_POLICY_NB); /* > CU_RED_MAX blocks of work: grid-stride */
    gpu_ok("legal_loss");
    test_moves_left_loss(1);
    test_moves_left_loss(37);
    test_moves_left_loss(300000); /* more rows than reduction blocks */
    gpu_ok("moves_left_loss");
    test_sum_squares(1);
    test_sum_squares(1000);
    test_sum_squares(3000001);
    gpu_ok("sum_squares");
    test_sgd(1, 1, 1e-4f, 10.0f, 1);
    test_sgd(100003, 1, 1e-4f, 0.5f, 1); /* clipping active */
    test_sgd(100003, 0, 0.0f, 0.5f, 1);
    test_sgd(4099, 1, 1e-3f, 0.5f, 0); /* gnorm2 NULL: no clipping */
    test_sgd(4099, 0, 1e-3f, 0.0f, 1); /* clip <= 0: off */
    gpu_ok("sgd");
    test_sticky_error();
}

/* ---- whole nets ------------------------------------------------------------------ */
static void copy_weights_to_gpu(nn_net_t *gnet, nn_net_t *cnet) {
    int64_t np, ns;
    float *cp = nn_net_params(cnet, &np, NULL), *cst = nn_net_stats(cnet, &ns);
    G_->upload(G_, nn_net_params(gnet, NULL, NULL), cp, sizeof(float) * (size_t)np);
    G_->upload(G_, nn_net_stats(gnet, NULL), cst, sizeof(float) * (size_t)ns);
    gsync(G_);
    nn_net_mark_dirty(gnet);
}

/* mean over positions of KL(softmax(ref) || softmax(got)) */
static double policy_kl(const float *got, const float *ref, int32_t B) {
    double kl = 0;
    for (int32_t b = 0; b < B; b++) {
        const float *g = got + (int64_t)b * NN_POLICY_NB, *r = ref + (int64_t)b * NN_POLICY_NB;
        double mg = g[0], mr = r[0], sg = 0, sr = 0;
        for (int i = 1; i < NN_POLICY_NB; i++) mg = fmax(mg, g[i]), mr = fmax(mr, r[i]);
        for (int i = 0; i < NN_POLICY_NB; i++) sg += exp(g[i] - mg), sr += exp(r[i] - mr);
        double lg = mg + log(sg), lr = mr + log(sr);
        for (int i = 0; i < NN_POLICY_NB; i++) {
            double pr = exp(r[i] - lr);
            kl += pr * ((r[i] - lr) - (g[i] - lg));
        }
    }
    return kl / B;
}

/* W/D/L probabilities: max abs difference */
static double value_err(const float *got, const float *ref, int32_t B) {
    double m = 0;
    for (int32_t b = 0; b < B; b++) {
        double pg[3], pr[3], sg = 0, sr = 0;
        for (int i = 0; i < 3; i++) sg += (pg[i] = exp(got[b * 3 + i])), sr += (pr[i] = exp(ref[b * 3 + i]));
        for (int i = 0; i < 3; i++) m = fmax(m, fabs(pg[i] / sg - pr[i] / sr));
    }
    return m;
}

/* A whole tensor: relative L2 within tol_l2 and (judge_elems) few elementwise outliers. */
static void cmp_tensor(const char *what, const float *got, const float *ref, int64_t n, tol_t t, double tol_l2,
                       int judge_elems) {
    double rl = rel_l2(got, ref, n);
    g_info = 1;
    int64_t bad = cmp(what, got, ref, n, t);
    g_info = 0;
    int ok = rl <= tol_l2 * g_scale && (!judge_elems || bad <= n / 500);
    fprintf(stderr, "[%s] %-46s rel L2 %.3g (tol %.3g), %lld outliers %s\n", M_->name, what, rl, tol_l2 * g_scale,
            (long long)bad, ok ? "ok" : "MISMATCH");
    t_judge(ok);
}

static void cmp_metrics(const char *what, const nn_metrics_t *g, const nn_metrics_t *c, int32_t B, double l2) {
    char w[128];
    double rl = M_->net_out.rtol; /* loss values: as precise as the outputs */
    snprintf(w, sizeof(w), "%s loss", what);
    check_scalar(w, g->loss, c->loss, 1e-6, rl);
    snprintf(w, sizeof(w), "%s policy_loss", what);
    check_scalar(w, g->policy_loss, c->policy_loss, 1e-6, rl);
    snprintf(w, sizeof(w), "%s value_loss", what);
    check_scalar(w, g->value_loss, c->value_loss, 1e-6, rl);
    snprintf(w, sizeof(w), "%s legal_loss", what);
    check_scalar(w, g->legal_loss, c->legal_loss, 1e-6, rl);
    snprintf(w, sizeof(w), "%s policy_acc", what);
    check_scalar(w, g->policy_acc, c->policy_acc, 2.0 / B + 1e-9, 0); /* near-ties may flip a position */
    snprintf(w, sizeof(w), "%s legal_f1", what);
    check_scalar(w, g->legal_f1, c->legal_f1, 1e-2, 0); /* logits near 0 may flip */
    snprintf(w, sizeof(w), "%s grad_norm", what);
    check_scalar(w, g->grad_norm, c->grad_norm, 1e-6, l2);
    if (isfinite(c->moves_left_loss) || isfinite(g->moves_left_loss)) {
        snprintf(w, sizeof(w), "%s moves_left_loss", what);
        check_scalar(w, g->moves_left_loss, c->moves_left_loss, 1e-6, rl);
        CHECK(g->moves_left_positions == c->moves_left_positions);
    }
    if (isfinite(c->opp_policy_loss) || isfinite(g->opp_policy_loss)) {
        snprintf(w, sizeof(w), "%s opp_policy_loss", what);
        check_scalar(w, g->opp_policy_loss, c->opp_policy_loss, 1e-6, rl);
        CHECK(g->opp_positions == c->opp_positions);
    }
}

static int32_t g_net_gpool = 0; /* test_net's nets: global pooling every g_net_gpool-th block (0: none) */
static int32_t g_net_heads = 0; /* test_net's nets: the optional heads (NN_HEAD_*) */

/* Targets of the optional heads for a test batch (B <= 64): plies (every
 * fifth row none), the opponent's reply of 1..3 labels (every third row none). */
typedef struct {
    float ml[64];
    uint32_t off[65];
    uint16_t lab[192];
    float prob[192];
} heads_t;

static void heads_attach(heads_t *h, t_batch_t *tb) {
    int32_t B = tb->b.B;
    KOMA_ASSERT(B <= 64);
    if (!g_net_heads) return; /* the other nets' batches: the random draws as before */
    h->off[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        h->ml[b] = b % 5 == 4 ? -1.0f : (float)(t_next() % 160);
        uint32_t k = b % 3 == 2 ? 0 : 1 + (uint32_t)(t_next() % 3);
        for (uint32_t j = 0; j < k; j++)
            h->lab[h->off[b] + j] = (uint16_t)((b * 131 + j * 7) % NN_POLICY_NB), h->prob[h->off[b] + j] = 1.0f / (float)k;
        h->off[b + 1] = h->off[b] + k;
    }
    tb->b.moves_left = h->ml;
    tb->b.opp_offsets = h->off, tb->b.opp_label = h->lab, tb->b.opp_prob = h->prob;
}

static void test_net(int32_t blocks, int32_t ch, nn_act_t act, int32_t planes, int32_t hand, int32_t Btrain) {
    char err[512], tag[64];
    snprintf(tag, sizeof(tag), "net %dx%d%s%.0d%s%s %s", blocks, ch, g_net_gpool ? "g" : "", (int)g_net_gpool,
             (g_net_heads & NN_HEAD_MOVES_LEFT) ? "m" : "", (g_net_heads & NN_HEAD_OPP_POLICY) ? "o" : "", nn_act_name(act));
    /* ReLU's derivative jumps at 0: any rounding difference moves a few of the
     * millions of pre-activations across the kink, and batch norm spreads each
     * flip over the whole batch, so ReLU gradients differ by far more than the
     * rounding (measured with KOMA_GPU_TEST_FAKE: 1e-7 perturbations give 1e-4
     * gradient differences, growing 5x per SGD step). Outputs and losses are
     * continuous and checked tightly for every net; gradients, updates and
     * momentum precisely only for the smooth SiLU nets, and for ReLU nets
     * against a sanity bound (a wrong sign, scale or layout gives rel L2 >= 1).
     * The max over the board of a global-pooling block is such a kink too:
     * BF16's rounding moves some channels' argmax (KOMA_GPU_TEST_FAKE bf16:
     * SiLU 2x32g2 grads rel L2 0.06-0.08), so those nets are smooth only in
     * the FP32 and TF32 passes. */
    int smooth = act != NN_ACT_RELU && !(g_net_gpool && (M_->flags & NN_CUDA_BF16));
    double l2 = smooth ? M_->net_l2 : M_->relu_l2;
    nn_net_config_t cfg = {.blocks = blocks, .channels = ch, .act = act, .in_planes = planes, .in_hand = hand, .features_version = 1,
                           .gpool = g_net_gpool, .heads = g_net_heads};
    nn_net_t *cnet = nn_net_new(C_, &cfg, 1234, err, sizeof(err));
    nn_net_t *gnet = nn_net_new(G_, &cfg, 999, err, sizeof(err)); /* other seed: the copy must win */
    KOMA_ASSERT(cnet && gnet);
    copy_weights_to_gpu(gnet, cnet);
    nn_train_config_t tc = nn_train_config_default();
    tc.warmup_steps = 0, tc.schedule = NN_SCHED_CONSTANT, tc.lr = 0.05f, tc.clip_norm = 1.0f, tc.bn_momentum = 0.1f;
    tc.weight_decay = 1e-3f, tc.q_mix = 0.3f, tc.q_draw = 0.2f, tc.w_legal = 20.0f;
    /* warm the running statistics on the CPU so inference sees non-trivial BN folding */
    nn_optim_t *ctr = nn_optim_new(cnet, &tc, Btrain, err, sizeof(err));
    KOMA_ASSERT(ctr);
    heads_t hd;
    for (int s = 0; s < 2; s++) {
        t_batch_t w;
        t_batch_init(&w, Btrain, planes, hand, 3);
        heads_attach(&hd, &w);
        KOMA_ASSERT(nn_train_step(ctr, &w.b, NULL, err, sizeof(err)) == 0);
        t_batch_free(&w);
    }
    nn_optim_set_step_count(ctr, 0);
    int64_t np, ns, nd;
    nn_net_params(cnet, &np, &nd);
    nn_net_stats(cnet, &ns);
    memset(nn_optim_momentum(ctr), 0, sizeof(float) * (size_t)np);
    copy_weights_to_gpu(gnet, cnet);
    char what[160];

    /* inference, several batch sizes; a second instance runs the GPU context */
    int32_t Bs[3] = {1, 7, 64};
    nn_ctx_t *cctx = nn_ctx_new(cnet, NULL, 64, err, sizeof(err));
    nn_ctx_t *gctx = nn_ctx_new(gnet, NULL, 64, err, sizeof(err));
    KOMA_ASSERT(cctx && gctx);
    for (int bi = 0; bi < 3; bi++) {
        int32_t B = Bs[bi];
        t_batch_t tb;
        t_batch_init(&tb, B, planes, hand, 2);
        int64_t np_ = (int64_t)B * NN_POLICY_NB;
        float *cp = malloc(sizeof(float) * (size_t)np_), *cl = malloc(sizeof(float) * (size_t)np_), *cv = malloc(sizeof(float) * (size_t)B * 3);
        float *gp = malloc(sizeof(float) * (size_t)np_), *gl = malloc(sizeof(float) * (size_t)np_), *gv = malloc(sizeof(float) * (size_t)B * 3);
        float cml[64], gml[64];
        int ml = (g_net_heads & NN_HEAD_MOVES_LEFT) != 0;
        nn_outputs_t co = {cp, cv, cl, ml ? cml : NULL}, go = {gp, gv, gl, ml ? gml : NULL};
        nn_forward_out(cctx, B, tb.planes, tb.hand, &co);
        nn_forward_out(gctx, B, tb.planes, tb.hand, &go);
        gpu_ok(tag);
        if (ml) { /* plies: the outputs' tolerance, scaled by the 20 plies a unit */
            snprintf(what, sizeof(what), "%s forward B%d moves_left", tag, B);
            cmp(what, gml, cml, B, (tol_t){M_->net_out.atol * NN_ML_SCALE, M_->net_out.rtol});
        }
        if (B == 7) { /* the same forward again: the third is recorded (CUDA graphs), later ones replay it */
            float *rp = malloc(sizeof(float) * (size_t)np_), *rl = malloc(sizeof(float) * (size_t)np_),
                  *rv = malloc(sizeof(float) * (size_t)B * 3);
            for (int rep = 2; rep <= 5; rep++) {
                nn_forward(gctx, B, tb.planes, tb.hand, rp, rv, rl);
                gpu_ok(tag);
                snprintf(what, sizeof(what), "%s forward B%d run %d = run 1 (graphs %s)", tag, B, rep,
                         G_->graph_launch ? "on" : "off");
                cmp(what, rp, gp, np_, T_EXACT);
                cmp(what, rv, gv, (int64_t)B * 3, T_EXACT);
                cmp(what, rl, gl, np_, T_EXACT);
            }
            free(rp), free(rl), free(rv);
        }
        snprintf(what, sizeof(what), "%s forward B%d policy", tag, B);
        cmp(what, gp, cp, np_, M_->net_out);
        snprintf(what, sizeof(what), "%s forward B%d value", tag, B);
        cmp(what, gv, cv, (int64_t)B * 3, M_->net_out);
        snprintf(what, sizeof(what), "%s forward B%d legal", tag, B);
        cmp(what, gl, cl, np_, M_->net_out);
        double kl = policy_kl(gp, cp, B), ve = value_err(gv, cv, B);
        snprintf(what, sizeof(what), "%s forward B%d policy KL", tag, B);
        check_scalar(what, kl, 0, M_->net_kl, 0);
        snprintf(what, sizeof(what), "%s forward B%d W/D/L prob err", tag, B);
        check_scalar(what, ve, 0, M_->net_prob, 0);
        free(cp), free(cl), free(cv), free(gp), free(gl), free(gv);
        t_batch_free(&tb);
    }
    /* the same net evaluated from another instance (buffers shared across streams) */
    nn_backend_t *g2 = gpu_new(M_->flags, err, sizeof(err));
    KOMA_ASSERT(g2);
    {
        nn_ctx_t *ctx2 = nn_ctx_new(gnet, g2, 8, err, sizeof(err));
        KOMA_ASSERT(ctx2);
        t_batch_t tb;
        t_batch_init(&tb, 8, planes, hand, 2);
        float *a = malloc(sizeof(float) * 8 * NN_POLICY_NB), *b = malloc(sizeof(float) * 8 * NN_POLICY_NB);
        nn_forward(gctx, 8, tb.planes, tb.hand, a, NULL, NULL);
        nn_forward(ctx2, 8, tb.planes, tb.hand, b, NULL, NULL);
        CHECK(nn_cuda_error(g2) == NULL);
        snprintf(what, sizeof(what), "%s instance 2 vs instance 1", tag);
        cmp(what, b, a, 8 * NN_POLICY_NB, (tol_t){1e-6, 1e-6}); /* same algorithms: (nearly) identical */
        free(a), free(b);
        t_batch_free(&tb);
        nn_ctx_free(ctx2);
    }
    nn_backend_free(g2);
    nn_ctx_free(cctx);
    nn_ctx_free(gctx);

    /* training: gradients, then two SGD steps */
    nn_optim_t *gtr = nn_optim_new(gnet, &tc, Btrain, err, sizeof(err));
    KOMA_ASSERT(gtr);
    t_batch_t tb;
    t_batch_init(&tb, Btrain, planes, hand, 4);
    heads_attach(&hd, &tb);
    nn_metrics_t cm, gm;
    KOMA_ASSERT(nn_train_grad(ctr, &tb.b, &cm, err, sizeof(err)) == 0);
    KOMA_ASSERT(nn_train_grad(gtr, &tb.b, &gm, err, sizeof(err)) == 0);
    gpu_ok(tag);
    snprintf(what, sizeof(what), "%s train_grad B%d", tag, Btrain);
    cmp_metrics(what, &gm, &cm, Btrain, l2);
    float *gg = gget(nn_optim_grads(gtr), np), *cg = nn_optim_grads(ctr);
    for (int32_t i = 0; i < nn_net_tensor_count(cnet); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(cnet, i);
        if (t->kind != NN_TENSOR_PARAM) continue;
        snprintf(what, sizeof(what), "%s grad %s", tag, t->name);
        cmp_tensor(what, gg + t->offset, cg + t->offset, t->numel, M_->net_grad, l2, smooth);
    }
    free(gg);
    float *p0 = fdup(nn_net_params(cnet, NULL, NULL), np), *s0 = fdup(nn_net_stats(cnet, NULL), ns);
    float *gs0 = gget(nn_net_stats(gnet, NULL), ns);
    snprintf(what, sizeof(what), "%s train_grad leaves running stats", tag);
    cmp(what, gs0, s0, ns, T_EXACT);
    free(gs0);
    for (int step = 0; step < 2; step++) {
        t_batch_t sb;
        heads_t sh;
        t_batch_init(&sb, Btrain, planes, hand, 4);
        heads_attach(&sh, &sb);
        KOMA_ASSERT(nn_train_step(ctr, &sb.b, &cm, err, sizeof(err)) == 0);
        KOMA_ASSERT(nn_train_step(gtr, &sb.b, &gm, err, sizeof(err)) == 0);
        gpu_ok(tag);
        snprintf(what, sizeof(what), "%s train_step %d", tag, step + 1);
        cmp_metrics(what, &gm, &cm, Btrain, l2);
        CHECK(gm.step == cm.step && gm.lr == cm.lr);
        t_batch_free(&sb);
    }
    /* updates p - p0 (the params themselves would hide any error), momentum, running stats */
    float *gp = gget(nn_net_params(gnet, NULL, NULL), np), *cp = nn_net_params(cnet, NULL, NULL);
    float *gmo = gget(nn_optim_momentum(gtr), np), *cmo = nn_optim_momentum(ctr);
    float *gst = gget(nn_net_stats(gnet, NULL), ns), *cst = nn_net_stats(cnet, NULL);
    for (int64_t i = 0; i < np; i++) gp[i] -= p0[i];
    float *cdelta = malloc(sizeof(float) * (size_t)np);
    for (int64_t i = 0; i < np; i++) cdelta[i] = cp[i] - p0[i];
    for (int32_t i = 0; i < nn_net_tensor_count(cnet); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(cnet, i);
        if (t->kind == NN_TENSOR_PARAM) {
            snprintf(what, sizeof(what), "%s 2 steps: update %s", tag, t->name);
            cmp_tensor(what, gp + t->offset, cdelta + t->offset, t->numel, M_->net_grad, l2, smooth);
            snprintf(what, sizeof(what), "%s 2 steps: momentum %s", tag, t->name);
            cmp_tensor(what, gmo + t->offset, cmo + t->offset, t->numel, M_->net_grad, l2, smooth);
        } else {
            /* step 2's statistics come from weights after step 1, which differ at the
             * ReLU kinks like the updates above: the whole tensor stays within the tight
             * net_l2, elementwise outliers count only for smooth nets (an H100 run had
             * one of 64 stem running means 1.3e-3 off, rel L2 3.5e-5 against 1e-3) */
            snprintf(what, sizeof(what), "%s 2 steps: %s", tag, t->name);
            cmp_tensor(what, gst + t->offset, cst + t->offset, t->numel, M_->net_stat, M_->net_l2, smooth);
        }
    }
    CHECK(nn_optim_step_count(gtr) == 2);
    free(gp), free(gmo), free(gst), free(cdelta), free(p0), free(s0);
    /* nn_eval_batch (folded BN after the update) on the same weights: the CPU
     * net's are copied over first. ReLU nets' updates differ by design (see
     * above), and folded BN with two steps of running stats amplifies that into
     * loss differences of several times the outputs' tolerance (fp32 value_loss
     * 3e-4 relative on an H100); the eval path itself is what is checked here. */
    copy_weights_to_gpu(gnet, cnet);
    gpu_ok(tag);
    KOMA_ASSERT(nn_eval_batch(ctr, &tb.b, &cm, err, sizeof(err)) == 0);
    KOMA_ASSERT(nn_eval_batch(gtr, &tb.b, &gm, err, sizeof(err)) == 0);
    gpu_ok(tag);
    snprintf(what, sizeof(what), "%s eval_batch", tag);
    gm.grad_norm = cm.grad_norm = 0;
    cmp_metrics(what, &gm, &cm, Btrain, l2);
    t_batch_free(&tb);
    nn_optim_free(gtr);
    nn_optim_free(ctr);
    nn_net_free(gnet);
    nn_net_free(cnet);
}

/* On the device: nn_train_step_launch with the metrics read one step late
 * (page-locked records behind fences: the route train/loop.c takes) against
 * nn_train_step in turn, on an instance with deterministic algorithms: the
 * same metrics, each named by its step, and the same weights (bit for bit is
 * expected; the tolerance is the smallest of the pass). Then the head
 * convolutions merged (the default) against apart on the same device:
 * outputs and three steps within the pass's net tolerances. */
static void test_late_and_merge(void) {
    char err[512], what[128];
    nn_backend_t *D = gpu_new(M_->flags | NN_CUDA_DETERMINISTIC, err, sizeof(err));
    KOMA_ASSERT(D);
    nn_net_config_t cfg = {.blocks = 2, .channels = 32, .act = NN_ACT_SILU, .in_planes = 12, .in_hand = 3,
                           .features_version = 1};
    nn_train_config_t tc = nn_train_config_default();
    tc.warmup_steps = 3, tc.lr = 0.05f, tc.clip_norm = 1.0f, tc.w_legal = 20.0f;
    nn_net_t *na = nn_net_new(D, &cfg, 77, err, sizeof(err)), *nb = nn_net_new(D, &cfg, 77, err, sizeof(err));
    KOMA_ASSERT(na && nb);
    int32_t B = 16, S = 5;
    nn_optim_t *ta = nn_optim_new(na, &tc, B, err, sizeof(err)), *tb = nn_optim_new(nb, &tc, B, err, sizeof(err));
    KOMA_ASSERT(ta && tb);
    t_batch_t bt[5];
    for (int s = 0; s < S; s++) t_batch_init(&bt[s], B - s, cfg.in_planes, cfg.in_hand, 3);
    nn_metrics_t ref[5], got[5];
    int64_t id[5];
    for (int s = 0; s < S; s++) KOMA_ASSERT(nn_train_step(ta, &bt[s].b, &ref[s], err, sizeof(err)) == 0);
    for (int s = 0; s < S; s++) {
        KOMA_ASSERT(nn_train_step_launch(tb, &bt[s].b, &id[s], err, sizeof(err)) == 0);
        if (s > 0) KOMA_ASSERT(nn_train_step_metrics(tb, id[s - 1], &got[s - 1], err, sizeof(err)) == 0);
    }
    KOMA_ASSERT(nn_train_step_metrics(tb, id[S - 1], &got[S - 1], err, sizeof(err)) == 0);
    int same = 1;
    for (int s = 0; s < S; s++) {
        same &= !memcmp(&ref[s], &got[s], sizeof ref[s]);
        CHECK(got[s].step == s + 1);
        snprintf(what, sizeof(what), "one step late, step %d loss", s + 1);
        check_scalar(what, got[s].loss, ref[s].loss, 1e-6, 1e-6);
        snprintf(what, sizeof(what), "one step late, step %d grad_norm", s + 1);
        check_scalar(what, got[s].grad_norm, ref[s].grad_norm, 1e-6, 1e-6);
    }
    int64_t np;
    nn_net_params(na, &np, NULL);
    float *pa = gget(nn_net_params(na, NULL, NULL), np), *pb = gget(nn_net_params(nb, NULL, NULL), np);
    same &= !memcmp(pa, pb, sizeof(float) * (size_t)np);
    cmp("one step late: weights after 5 steps", pb, pa, np, M_->net_stat);
    fprintf(stderr, "[%s] one step late vs nn_train_step: %s\n", M_->name, same ? "bit for bit" : "within tolerance");
    free(pa);
    free(pb);
    /* merged vs apart, same device, same weights */
    nn_net_set_merge_heads(nb, 0);
    CHECK(nn_net_copy_weights(nb, na, err, sizeof(err)) == 0);
    nn_ctx_t *ca = nn_ctx_new(na, NULL, B, err, sizeof(err)), *cb = nn_ctx_new(nb, NULL, B, err, sizeof(err));
    KOMA_ASSERT(ca && cb);
    int64_t NP = (int64_t)B * NN_POLICY_NB;
    float *p1 = malloc(sizeof(float) * NP), *p2 = malloc(sizeof(float) * NP), *l1 = malloc(sizeof(float) * NP),
          *l2 = malloc(sizeof(float) * NP), v1[3 * 16], v2[3 * 16];
    KOMA_ASSERT(nn_forward(ca, B, bt[0].planes, bt[0].hand, p1, v1, l1) == 0);
    KOMA_ASSERT(nn_forward(cb, B, bt[0].planes, bt[0].hand, p2, v2, l2) == 0);
    cmp("merged vs apart: policy", p1, p2, NP, M_->net_out);
    cmp("merged vs apart: value", v1, v2, 3 * B, M_->net_out);
    cmp("merged vs apart: legal", l1, l2, NP, M_->net_out);
    for (int s = 0; s < 3; s++) {
        KOMA_ASSERT(nn_train_step(ta, &bt[s].b, &ref[s], err, sizeof(err)) == 0);
        KOMA_ASSERT(nn_train_step(tb, &bt[s].b, &got[s], err, sizeof(err)) == 0);
    }
    snprintf(what, sizeof(what), "merged vs apart after 3 steps");
    cmp_metrics(what, &ref[2], &got[2], B, M_->net_l2);
    free(p1), free(p2), free(l1), free(l2);
    nn_ctx_free(ca);
    nn_ctx_free(cb);
    for (int s = 0; s < S; s++) t_batch_free(&bt[s]);
    nn_optim_free(ta);
    nn_optim_free(tb);
    nn_net_free(na);
    nn_net_free(nb);
    nn_backend_free(D);
}

static void run_nets(void) {
    test_late_and_merge();
    test_net(1, 17, NN_ACT_SILU, 5, 0, 5);   /* odd channels, no hand, smooth */
    test_net(2, 32, NN_ACT_SILU, 12, 3, 16);
    test_net(2, 24, NN_ACT_RELU, 9, 2, 1);   /* B = 1 training (BN over 81 squares) */
    if (!g_quick) test_net(6, 64, NN_ACT_RELU, 68, 14, 32); /* the engine's input size */
    g_net_gpool = 2; /* global pooling: the pooling blocks leave the fused route between their convs */
    test_net(2, 32, NN_ACT_SILU, 12, 3, 16);
    test_net(3, 24, NN_ACT_RELU, 9, 2, 4);
    g_net_gpool = 0;
    g_net_heads = NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY; /* the moves-left and opponent-reply heads */
    test_net(2, 32, NN_ACT_SILU, 12, 3, 16);
    test_net(2, 24, NN_ACT_RELU, 9, 2, 5);
    g_net_heads = 0;
}

/* atol (x rms), rtol per op class and mode */
static const tmode_t MODES[] = {
    /* Tolerances were checked for headroom against emulated TF32/BF16 rounding
     * (KOMA_GPU_TEST_FAKE=1): observed max |d|/rms tf32 conv 1.5e-3, dense 4.4e-3,
     * net outputs 7.9e-3, SiLU grads rel L2 1.4e-3; bf16 conv 2.1e-2, net outputs
     * 7.3e-2, SiLU grads rel L2 1.8e-2, ReLU grads rel L2 0.34.
     * name  flags             conv          dense         net_out       net_grad      net_stat      kl    prob  l2    relu_l2 */
    {"fp32", NN_CUDA_NO_TF32, {2e-4, 1e-4}, {3e-5, 3e-5}, {2e-4, 2e-4}, {2e-3, 2e-3}, {1e-4, 1e-4}, 1e-7, 1e-4, 1e-3, 0.05},
    {"tf32", 0, {5e-3, 5e-3}, {1e-2, 1e-2}, {3e-2, 3e-2}, {5e-2, 5e-2}, {5e-3, 5e-3}, 2e-4, 1e-2, 1e-2, 0.3},
    {"bf16", NN_CUDA_BF16, {5e-2, 2e-2}, {1e-2, 1e-2}, {0.15, 0.1}, {0.15, 0.1}, {2e-2, 2e-2}, 2e-3, 5e-2, 6e-2, 0.6},
};

int main(int argc, char **argv) {
    const char *fk = getenv("KOMA_GPU_TEST_FAKE");
    g_fake = fk && *fk && strcmp(fk, "0") != 0;
    int ndev = g_fake ? 1 : nn_cuda_device_count();
    if (ndev == 0) {
        char err[256];
        nn_cuda_device_info_t info;
        nn_cuda_device_info(0, &info, err, sizeof(err));
        fprintf(stderr, "test_nn_cuda_gpu: skipped (no CUDA device): %s\n", err);
        return 77;
    }
    int32_t dev = 0, nmodes = 0;
    for (int a = 1; a < argc; a++) {
        if (argv[a][0] >= '0' && argv[a][0] <= '9') dev = atoi(argv[a]);
        else if (strcmp(argv[a], "quick") == 0) g_quick = 1;
        else nmodes++;
    }
    g_dev = dev;
    const char *sc = getenv("KOMA_GPU_TOL_SCALE");
    if (sc && atof(sc) > 0) g_scale = atof(sc);
    nn_cuda_device_info_t info;
    char err[512];
    if (g_fake) {
        memset(&info, 0, sizeof(info));
        snprintf(info.name, sizeof(info.name), "HARNESS SELF-CHECK: the CPU backend with TF32/BF16 rounding, no GPU involved");
        info.cc_major = 9;
    } else if (nn_cuda_device_info(dev, &info, err, sizeof(err)) != 0) {
        fprintf(stderr, "test_nn_cuda_gpu: %s\n", err);
        return 1;
    }
    fprintf(stderr, "device %d: %s, cc %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d; tolerance scale %g%s\n", dev,
            info.name, info.cc_major, info.cc_minor, info.sm_count, (double)info.mem_bytes / (1 << 30),
            info.driver_version, info.runtime_version, g_scale, g_quick ? "; quick: reduced set" : "");
    C_ = nn_backend_cpu_new(0);
    /* bad arguments fail cleanly */
    if (!g_fake) {
        CHECK(nn_backend_cuda_new(ndev + 3, 0, err, sizeof(err)) == NULL && strstr(err, "out of range"));
        fprintf(stderr, "refused: %s\n", err);
    }
    for (int a = 1; a < argc; a++) {
        int known = (argv[a][0] >= '0' && argv[a][0] <= '9') || strcmp(argv[a], "quick") == 0;
        for (size_t m = 0; m < sizeof(MODES) / sizeof(MODES[0]); m++) known |= strcmp(argv[a], MODES[m].name) == 0;
        if (!known) {
            fprintf(stderr, "usage: %s [device] [fp32|tf32|bf16 ...] [quick]: unknown argument '%s'\n", argv[0], argv[a]);
            return 2;
        }
    }
    for (size_t m = 0; m < sizeof(MODES) / sizeof(MODES[0]); m++) {
        int wanted = nmodes == 0;
        for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], MODES[m].name) == 0;
        if (!wanted) continue;
        M_ = &MODES[m];
        if (!g_fake && (M_->flags & NN_CUDA_BF16) && info.cc_major < 8) {
            CHECK(nn_backend_cuda_new(dev, M_->flags, err, sizeof(err)) == NULL);
            fprintf(stderr, "[%s] skipped: %s\n", M_->name, err);
            continue;
        }
        if (!(M_->flags & NN_CUDA_NO_TF32) && info.cc_major < 8)
            fprintf(stderr, "[%s] note: no TF32 on cc %d.%d, this pass runs FP32\n", M_->name, info.cc_major, info.cc_minor);
        g_fake_prec = (M_->flags & NN_CUDA_BF16) ? 2 : (M_->flags & NN_CUDA_NO_TF32) ? 0 : 1;
        G_ = gpu_new(M_->flags, err, sizeof(err));
        if (!G_) {
            fprintf(stderr, "[%s] nn_backend_cuda_new: %s\n", M_->name, err);
            return 1;
        }
        fprintf(stderr, "== pass %s (flags 0x%x, effective 0x%x)\n", M_->name, M_->flags, nn_cuda_flags(G_));
        t_rng = 0x1234567ull + m;
        run_ops();
        run_nets();
        gpu_ok("end of pass");
        nn_backend_free(G_);
        G_ = NULL;
    }
    nn_backend_free(C_);
    return t_done("test_nn_cuda_gpu");
}
