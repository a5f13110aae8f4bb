/* test_nn_ops.c - every CPU backend op against a plain double-precision
 * reference and, for every backward op, against finite differences. */
#include "nn_test.h"

#ifdef KOMA_HAVE_CBLAS
#include <cblas.h> /* OPENBLAS_VERSION: nn/gemm.c's preinit hook is built */
#endif

static nn_backend_t *be;

/* ---- gemm ------------------------------------------------------------------ */
static void ref_gemm(int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)(tA ? A[k * lda + i] : A[i * lda + k]) * (tB ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = (float)(alpha * s + (double)beta * C[i * ldc + j]);
        }
}

static void test_gemm(void) {
    int sizes[][3] = {{37, 53, 71}, {64, 405, 576}, {1, 300, 129}, {130, 7, 260}};
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 4; t++) {
            int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2], tA = t & 1, tB = t >> 1;
            float *A = malloc(sizeof(float) * M * K), *Bm = malloc(sizeof(float) * K * N);
            float *C0 = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * M * N),
                  *C2 = malloc(sizeof(float) * M * N);
            t_fill_randn(A, (int64_t)M * K, 1);
            t_fill_randn(Bm, (int64_t)K * N, 1);
            t_fill_randn(C0, (int64_t)M * N, 1);
            memcpy(C1, C0, sizeof(float) * M * N);
            memcpy(C2, C0, sizeof(float) * M * N);
            int lda = tA ? M : K, ldb = tB ? K : N;
            ref_gemm(tA, tB, M, N, K, 0.7f, A, lda, Bm, ldb, 0.3f, C0, N);
            nn_gemm(tA, tB, M, N, K, 0.7f, A, lda, Bm, ldb, 0.3f, C1, N);
            nn_gemm_portable(tA, tB, M, N, K, 0.7f, A, lda, Bm, ldb, 0.3f, C2, N);
            char what[64];
            snprintf(what, sizeof(what), "gemm %dx%dx%d t%d%d", M, N, K, tA, tB);
            t_compare(what, C1, C0, (int64_t)M * N, 1e-4, 1e-4);
            snprintf(what, sizeof(what), "gemm_portable %dx%dx%d t%d%d", M, N, K, tA, tB);
            t_compare(what, C2, C0, (int64_t)M * N, 1e-4, 1e-4);
            free(A);
            free(Bm);
            free(C0);
            free(C1);
            free(C2);
        }
}

/* The pool a program starting under `ulimit -v` has room for (nn/gemm.c's
 * preinit hook starts it again with OPENBLAS_NUM_THREADS set below the CPU
 * count). Figures from an H100 machine: a CUDA build maps ~770-960 MiB of
 * libraries before main, and OpenBLAS died creating thread 5 of 16. */
static void test_preinit_threads(void) {
    const int64_t MiB = 1 << 20;
    int32_t lim16 = nn_gemm_preinit_threads(1000000 * 1024LL, 960 * MiB, 16);
#if defined(__linux__) && defined(__GLIBC__) && defined(OPENBLAS_VERSION)
    CHECKF(lim16 == 1, "16 CPUs, 16 MiB free: %d threads, want 1", (int)lim16);
    /* 874 MiB free: the 320 MiB reserve, then one thread per 265 MiB */
    CHECK(nn_gemm_preinit_threads(1024 * MiB, 150 * MiB, 16) == 3);
    CHECK(nn_gemm_preinit_threads(1024 * MiB, 150 * MiB, 2) == 2);
    CHECK(nn_gemm_preinit_threads(1024 * MiB, 1100 * MiB, 8) == 1); /* over the limit already */
#else
    CHECK(lim16 == 16); /* no hook (not glibc, or no OpenBLAS): the CPU count */
#endif
    CHECK(nn_gemm_preinit_threads(64LL << 30, 900 * MiB, 16) == 16); /* plenty: every CPU */
}

/* ---- expand ------------------------------------------------------------------ */
static void test_expand(void) {
    int32_t B = 3, planes = 13, hand = 4, C = planes + hand;
    int64_t bpp = nn_packed_bytes(planes);
    CHECK(bpp == (13 * 81 + 7) / 8);
    CHECK(nn_packed_bytes(27) == 274);
    uint8_t *packed = calloc((size_t)(B * bpp), 1);
    float *hv = malloc(sizeof(float) * B * hand), *out = malloc(sizeof(float) * B * C * 81);
    for (int64_t i = 0; i < B * bpp; i++) packed[i] = (uint8_t)t_next();
    t_fill_randn(hv, B * hand, 1);
    be->expand_planes(be, packed, hv, B, planes, hand, out);
    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int p = 0; p < planes; p++)
            for (int sq = 0; sq < 81; sq++) {
                int i = p * 81 + sq;
                float want = (float)((packed[b * bpp + i / 8] >> (i % 8)) & 1);
                bad += out[(b * C + p) * 81 + sq] != want;
            }
    for (int b = 0; b < B; b++)
        for (int j = 0; j < hand; j++)
            for (int sq = 0; sq < 81; sq++) bad += out[(b * C + planes + j) * 81 + sq] != hv[b * hand + j];
    fprintf(stderr, "%-36s %s\n", "expand_planes", bad ? "MISMATCH" : "ok");
    CHECK(bad == 0);
    /* one specific bit: plane 2, square 40 of position 1 */
    memset(packed, 0, (size_t)(B * bpp));
    int i = 2 * 81 + 40;
    packed[1 * bpp + (i >> 3)] = (uint8_t)(1u << (i & 7));
    be->expand_planes(be, packed, hv, B, planes, hand, out);
    double sum = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < planes * 81; k++) sum += out[b * C * 81 + k];
    CHECK(sum == 1.0 && out[(1 * C + 2) * 81 + 40] == 1.0f);
    free(packed);
    free(hv);
    free(out);
}

/* ---- convolution ------------------------------------------------------------- */
static void ref_conv(const float *x, const float *w, const float *bias, int B, int cin, int cout, int k,
                     float *y) {
    int p = k / 2;
    for (int b = 0; b < B; b++)
        for (int o = 0; o < cout; o++)
            for (int r = 0; r < 9; r++)
                for (int c = 0; c < 9; c++) {
                    double s = bias ? bias[o] : 0;
                    for (int i = 0; i < cin; i++)
                        for (int ky = 0; ky < k; ky++)
                            for (int kx = 0; kx < k; kx++) {
                                int rr = r + ky - p, cc = c + kx - p;
                                if (rr < 0 || rr >= 9 || cc < 0 || cc >= 9) continue;
                                s += (double)w[((o * cin + i) * k + ky) * k + kx] * x[((b * cin + i) * 9 + rr) * 9 + cc];
                            }
                    y[((b * cout + o) * 9 + r) * 9 + c] = (float)s;
                }
}

typedef struct {
    float *x, *w, *bias, *y, *r;
    int B, cin, cout, k;
    void *ws;
} conv_ctx_t;

static double conv_loss(void *p) {
    conv_ctx_t *c = p;
    be->conv_fwd(be, c->x, c->w, c->bias, c->B, c->cin, c->cout, c->k, c->y, c->ws);
    double s = 0;
    for (int64_t i = 0; i < (int64_t)c->B * c->cout * 81; i++) s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_conv(int B, int cin, int cout, int k, int with_bias, int fd) {
    int64_t nx = (int64_t)B * cin * 81, ny = (int64_t)B * cout * 81, nw = (int64_t)cout * cin * k * k;
    conv_ctx_t c = {0};
    c.B = B, c.cin = cin, c.cout = cout, c.k = k;
    c.x = malloc(sizeof(float) * nx);
    c.w = malloc(sizeof(float) * nw);
    c.bias = with_bias ? malloc(sizeof(float) * cout) : NULL;
    c.y = malloc(sizeof(float) * ny);
    c.r = malloc(sizeof(float) * ny);
    c.ws = be->buf_alloc(be, be->conv_ws_bytes(be, B, cin, cout, k));
    float *yref = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx),
          *dxref = malloc(sizeof(float) * nx), *dw = malloc(sizeof(float) * nw),
          *dwref = malloc(sizeof(float) * nw), *db = malloc(sizeof(float) * cout),
          *dbref = malloc(sizeof(float) * cout);
    t_fill_randn(c.x, nx, 1);
    t_fill_randn(c.w, nw, 0.3f);
    if (c.bias) t_fill_randn(c.bias, cout, 1);
    t_fill_randn(c.r, ny, 1);
    char what[96];
    snprintf(what, sizeof(what), "conv_fwd B%d %d->%d k%d%s", B, cin, cout, k, with_bias ? " bias" : "");
    be->conv_fwd(be, c.x, c.w, c.bias, B, cin, cout, k, c.y, c.ws);
    ref_conv(c.x, c.w, c.bias, B, cin, cout, k, yref);
    t_compare(what, c.y, yref, ny, 1e-4, 1e-4);

    /* adjoint references: dx = sum_o w * r, dw = sum_b x * r, computed in double */
    int p = k / 2;
    memset(dxref, 0, sizeof(float) * nx);
    for (int64_t i = 0; i < nw; i++) dwref[i] = 0;
    double *dxd = calloc((size_t)nx, sizeof(double)), *dwd = calloc((size_t)nw, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int o = 0; o < cout; o++)
            for (int rr = 0; rr < 9; rr++)
                for (int cc = 0; cc < 9; cc++) {
                    double g = c.r[((b * cout + o) * 9 + rr) * 9 + cc];
                    for (int i = 0; i < cin; i++)
                        for (int ky = 0; ky < k; ky++)
                            for (int kx = 0; kx < k; kx++) {
                                int sr = rr + ky - p, sc = cc + kx - p;
                                if (sr < 0 || sr >= 9 || sc < 0 || sc >= 9) continue;
                                int64_t xi = ((int64_t)(b * cin + i) * 9 + sr) * 9 + sc;
                                int64_t wi = ((int64_t)(o * cin + i) * k + ky) * k + kx;
                                dxd[xi] += (double)c.w[wi] * g;
                                dwd[wi] += (double)c.x[xi] * g;
                            }
                }
    for (int64_t i = 0; i < nx; i++) dxref[i] = (float)dxd[i];
    for (int64_t i = 0; i < nw; i++) dwref[i] = (float)dwd[i];
    for (int o = 0; o < cout; o++) {
        double s = 0;
        for (int b = 0; b < B; b++)
            for (int q = 0; q < 81; q++) s += c.r[(b * cout + o) * 81 + q];
        dbref[o] = (float)s;
    }
    be->conv_bwd_data(be, c.r, c.w, B, cin, cout, k, dx, 0, c.ws);
    snprintf(what, sizeof(what), "conv_bwd_data B%d %d->%d k%d", B, cin, cout, k);
    t_compare(what, dx, dxref, nx, 1e-3, 1e-3);
    /* accumulate adds on top */
    for (int64_t i = 0; i < nx; i++) dx[i] = 1.0f;
    be->conv_bwd_data(be, c.r, c.w, B, cin, cout, k, dx, 1, c.ws);
    for (int64_t i = 0; i < nx; i++) dxref[i] += 1.0f;
    snprintf(what, sizeof(what), "conv_bwd_data accumulate k%d", k);
    t_compare(what, dx, dxref, nx, 1e-3, 1e-3);
    be->conv_bwd_filter(be, c.x, c.r, B, cin, cout, k, dw, c.bias ? db : NULL, c.ws);
    snprintf(what, sizeof(what), "conv_bwd_filter B%d %d->%d k%d", B, cin, cout, k);
    t_compare(what, dw, dwref, nw, 1e-3, 1e-3);
    if (c.bias) t_compare("conv_bwd_filter dbias", db, dbref, cout, 1e-3, 1e-4);
    if (fd) {
        be->conv_bwd_data(be, c.r, c.w, B, cin, cout, k, dx, 0, c.ws);
        snprintf(what, sizeof(what), "fd conv dx k%d", k);
        t_fd_check(what, c.x, nx, dx, conv_loss, &c, 1e-2, 1e-3, 1e-2, 40, 0);
        snprintf(what, sizeof(what), "fd conv dw k%d", k);
        t_fd_check(what, c.w, nw, dw, conv_loss, &c, 1e-2, 1e-3, 1e-2, 40, 0);
        if (c.bias) t_fd_check("fd conv dbias", c.bias, cout, db, conv_loss, &c, 1e-2, 1e-3, 1e-2, 40, 0);
    }
    free(dxd);
    free(dwd);
    free(c.x);
    free(c.w);
    free(c.bias);
    free(c.y);
    free(c.r);
    be->buf_free(be, c.ws);
    free(yref);
    free(dx);
    free(dxref);
    free(dw);
    free(dwref);
    free(db);
    free(dbref);
}

/* ---- batch norm -------------------------------------------------------------- */
typedef struct {
    float *x, *gamma, *beta, *y, *r, *rm, *rv, *mean, *invstd;
    int B, C;
} bn_ctx_t;

static double bn_loss(void *p) {
    bn_ctx_t *c = p;
    be->bn_fwd_train(be, c->x, c->gamma, c->beta, c->B, c->C, 81, NN_BN_EPS, 0.1f, c->rm, c->rv, c->y,
                     c->mean, c->invstd);
    double s = 0;
    for (int64_t i = 0; i < (int64_t)c->B * c->C * 81; i++) s += (double)c->y[i] * c->r[i] * c->r[i];
    return s;
}

static void test_bn(void) {
    bn_ctx_t c;
    c.B = 3;
    c.C = 5;
    int64_t n = (int64_t)c.B * c.C * 81;
    c.x = malloc(sizeof(float) * n);
    c.y = malloc(sizeof(float) * n);
    c.r = malloc(sizeof(float) * n);
    c.gamma = malloc(sizeof(float) * c.C);
    c.beta = malloc(sizeof(float) * c.C);
    c.rm = calloc((size_t)c.C, sizeof(float));
    c.rv = malloc(sizeof(float) * c.C);
    c.mean = malloc(sizeof(float) * c.C);
    c.invstd = malloc(sizeof(float) * c.C);
    float *dy = malloc(sizeof(float) * n), *dx = malloc(sizeof(float) * n);
    float *dg = malloc(sizeof(float) * c.C), *dbt = malloc(sizeof(float) * c.C);
    t_fill_randn(c.x, n, 2);
    for (int64_t i = 0; i < n; i++) c.x[i] += 1.5f;
    t_fill_randn(c.gamma, c.C, 1);
    t_fill_randn(c.beta, c.C, 1);
    t_fill_randn(c.r, n, 1);
    for (int i = 0; i < c.C; i++) c.rv[i] = 1.0f;
    be->bn_fwd_train(be, c.x, c.gamma, c.beta, c.B, c.C, 81, NN_BN_EPS, 0.1f, c.rm, c.rv, c.y, c.mean, c.invstd);
    /* reference forward and running statistics */
    float *yref = malloc(sizeof(float) * n), rmref[5], rvref[5];
    for (int ch = 0; ch < c.C; ch++) {
        double s = 0, ss = 0, m;
        int64_t cnt = (int64_t)c.B * 81;
        for (int b = 0; b < c.B; b++)
            for (int q = 0; q < 81; q++) s += c.x[(b * c.C + ch) * 81 + q];
        m = s / cnt;
        for (int b = 0; b < c.B; b++)
            for (int q = 0; q < 81; q++) ss += pow(c.x[(b * c.C + ch) * 81 + q] - m, 2);
        double var = ss / cnt;
        for (int b = 0; b < c.B; b++)
            for (int q = 0; q < 81; q++) {
                int64_t i = (b * c.C + ch) * 81 + q;
                yref[i] = (float)((c.x[i] - m) / sqrt(var + NN_BN_EPS) * c.gamma[ch] + c.beta[ch]);
            }
        rmref[ch] = (float)(0.1 * m);
        rvref[ch] = (float)(0.9 + 0.1 * ss / (cnt - 1));
    }
    t_compare("bn_fwd_train", c.y, yref, n, 1e-4, 1e-4);
    t_compare("bn running_mean", c.rm, rmref, c.C, 1e-6, 1e-5);
    t_compare("bn running_var (unbiased)", c.rv, rvref, c.C, 1e-6, 1e-5);
    for (int64_t i = 0; i < n; i++) dy[i] = c.r[i] * c.r[i];
    be->bn_bwd(be, c.x, dy, c.gamma, c.mean, c.invstd, c.B, c.C, 81, dx, dg, dbt);
    t_fd_check("fd bn dx", c.x, n, dx, bn_loss, &c, 1e-2, 2e-3, 1e-2, 60, 0);
    t_fd_check("fd bn dgamma", c.gamma, c.C, dg, bn_loss, &c, 1e-2, 2e-3, 1e-2, 60, 0);
    t_fd_check("fd bn dbeta", c.beta, c.C, dbt, bn_loss, &c, 1e-2, 2e-3, 1e-2, 60, 0);
    /* in place dx == dy gives the same */
    be->bn_fwd_train(be, c.x, c.gamma, c.beta, c.B, c.C, 81, NN_BN_EPS, 0.1f, c.rm, c.rv, c.y, c.mean, c.invstd);
    be->bn_bwd(be, c.x, dy, c.gamma, c.mean, c.invstd, c.B, c.C, 81, dx, dg, dbt);
    be->bn_bwd(be, c.x, dy, c.gamma, c.mean, c.invstd, c.B, c.C, 81, dy, dg, dbt);
    t_compare("bn_bwd in place", dy, dx, n, 0, 0);

    /* fold: conv(x, w_fold, b_fold) == BN_inference(conv(x, w)) */
    int cin = 4, cout = c.C, B = 2;
    float w[5 * 4 * 9], wf[5 * 4 * 9], bf[5], var[5], mean[5];
    float *xin = malloc(sizeof(float) * B * cin * 81), *y1 = malloc(sizeof(float) * B * cout * 81),
          *y2 = malloc(sizeof(float) * B * cout * 81);
    t_fill_randn(w, cout * cin * 9, 0.3f);
    t_fill_randn(xin, B * cin * 81, 1);
    t_fill_randn(mean, cout, 1);
    for (int i = 0; i < cout; i++) var[i] = 0.5f + (float)t_unif();
    be->bn_fold(be, w, c.gamma, c.beta, mean, var, cout, cin * 9, NN_BN_EPS, wf, bf);
    void *ws = be->buf_alloc(be, be->conv_ws_bytes(be, B, cin, cout, 3));
    be->conv_fwd(be, xin, w, NULL, B, cin, cout, 3, y1, ws);
    for (int b = 0; b < B; b++)
        for (int o = 0; o < cout; o++)
            for (int q = 0; q < 81; q++) {
                float *v = &y1[(b * cout + o) * 81 + q];
                *v = (float)((*v - mean[o]) / sqrt(var[o] + NN_BN_EPS) * c.gamma[o] + c.beta[o]);
            }
    be->conv_fwd(be, xin, wf, bf, B, cin, cout, 3, y2, ws);
    t_compare("bn_fold", y2, y1, B * cout * 81, 1e-4, 1e-4);
    be->buf_free(be, ws);
    free(xin), free(y1), free(y2), free(yref);
    free(c.x), free(c.y), free(c.r), free(c.gamma), free(c.beta), free(c.rm), free(c.rv), free(c.mean),
        free(c.invstd), free(dy), free(dx), free(dg), free(dbt);
}

/* ---- activations, add, dense -------------------------------------------------- */
typedef struct {
    float *x, *res, *y, *r;
    int64_t n;
    nn_act_t act;
} act_ctx_t;

static double act_loss(void *p) {
    act_ctx_t *c = p;
    be->act_fwd(be, c->x, c->res, c->n, c->act, c->y);
    double s = 0;
    for (int64_t i = 0; i < c->n; i++) s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_act(nn_act_t act) {
    act_ctx_t c;
    c.n = 500;
    c.act = act;
    c.x = malloc(sizeof(float) * c.n);
    c.res = malloc(sizeof(float) * c.n);
    c.y = malloc(sizeof(float) * c.n);
    c.r = malloc(sizeof(float) * c.n);
    float *z = malloc(sizeof(float) * c.n), *dx = malloc(sizeof(float) * c.n), *ref = calloc((size_t)c.n, sizeof(float));
    t_fill_randn(c.x, c.n, 2);
    t_fill_randn(c.res, c.n, 1);
    t_fill_randn(c.r, c.n, 1);
    be->act_fwd(be, c.x, c.res, c.n, act, c.y);
    be->add(be, c.x, c.res, c.n, z);
    for (int64_t i = 0; i < c.n; i++) {
        double v = (double)c.x[i] + c.res[i];
        ref[i] = (float)(act == NN_ACT_RELU ? (v > 0 ? v : 0) : v / (1 + exp(-v)));
    }
    char what[64];
    snprintf(what, sizeof(what), "act_fwd %s", nn_act_name(act));
    t_compare(what, c.y, ref, c.n, 1e-6, 1e-5);
    be->act_bwd(be, c.r, z, c.n, act, dx);
    snprintf(what, sizeof(what), "fd act %s dx", nn_act_name(act));
    t_fd_check(what, c.x, c.n, dx, act_loss, &c, 1e-3, 1e-3, 1e-2, 100, 0.01);
    if (act == NN_ACT_RELU) { /* the output may stand in for z */
        float *dx2 = malloc(sizeof(float) * c.n);
        be->act_bwd(be, c.r, c.y, c.n, act, dx2);
        t_compare("act_bwd relu with y for z", dx2, dx, c.n, 0, 0);
        free(dx2);
    }
    free(c.x), free(c.res), free(c.y), free(c.r), free(z), free(dx), free(ref);
}

typedef struct {
    float *x, *w, *b, *y, *r;
    int B, in, out;
} dense_ctx_t;

static double dense_loss(void *p) {
    dense_ctx_t *c = p;
    be->dense_fwd(be, c->x, c->w, c->b, c->B, c->in, c->out, c->y);
    double s = 0;
    for (int64_t i = 0; i < (int64_t)c->B * c->out; i++) s += (double)c->y[i] * c->r[i];
    return s;
}

static void test_dense(void) {
    dense_ctx_t c = {0};
    c.B = 5, c.in = 17, c.out = 6;
    c.x = malloc(sizeof(float) * c.B * c.in);
    c.w = malloc(sizeof(float) * c.out * c.in);
    c.b = malloc(sizeof(float) * c.out);
    c.y = malloc(sizeof(float) * c.B * c.out);
    c.r = malloc(sizeof(float) * c.B * c.out);
    float *dx = malloc(sizeof(float) * c.B * c.in), *dw = malloc(sizeof(float) * c.out * c.in),
          *db = malloc(sizeof(float) * c.out), *yref = malloc(sizeof(float) * c.B * c.out);
    t_fill_randn(c.x, c.B * c.in, 1);
    t_fill_randn(c.w, c.out * c.in, 1);
    t_fill_randn(c.b, c.out, 1);
    t_fill_randn(c.r, c.B * c.out, 1);
    be->dense_fwd(be, c.x, c.w, c.b, c.B, c.in, c.out, c.y);
    for (int i = 0; i < c.B; i++)
        for (int o = 0; o < c.out; o++) {
            double s = c.b[o];
            for (int k = 0; k < c.in; k++) s += (double)c.x[i * c.in + k] * c.w[o * c.in + k];
            yref[i * c.out + o] = (float)s;
        }
    t_compare("dense_fwd", c.y, yref, c.B * c.out, 1e-5, 1e-5);
    be->dense_bwd(be, c.x, c.w, c.r, c.B, c.in, c.out, dx, dw, db);
    t_fd_check("fd dense dx", c.x, c.B * c.in, dx, dense_loss, &c, 1e-2, 1e-3, 1e-3, 100, 0);
    t_fd_check("fd dense dw", c.w, c.out * c.in, dw, dense_loss, &c, 1e-2, 1e-3, 1e-3, 120, 0);
    t_fd_check("fd dense db", c.b, c.out, db, dense_loss, &c, 1e-2, 1e-3, 1e-3, 10, 0);
    free(c.x), free(c.w), free(c.b), free(c.y), free(c.r), free(dx), free(dw), free(db), free(yref);
}

/* ---- losses ------------------------------------------------------------------ */
typedef struct {
    float *z, *d, *t;
    uint32_t *off;
    uint16_t *lab;
    float *prob;
    int B, N;
    int which; /* 0 policy, 1 value, 2 legal */
    float stats[NN_STAT_NB];
} loss_ctx_t;

static double loss_eval(void *p) {
    loss_ctx_t *c = p;
    memset(c->stats, 0, sizeof(c->stats));
    float *d = malloc(sizeof(float) * c->B * c->N);
    if (c->which == 0) be->policy_loss(be, c->z, c->off, c->lab, c->prob, c->B, c->N, 1.0f, d, c->stats);
    if (c->which == 1) be->value_loss(be, c->z, c->t, c->B, c->N, 1.0f, d, c->stats);
    if (c->which == 2) be->legal_loss(be, c->z, c->t, c->B, c->N, 1.0f, d, c->stats);
    free(d);
    /* reference loss in double (the stats are float sums) */
    double L = 0;
    for (int b = 0; b < c->B; b++) {
        const float *z = c->z + b * c->N;
        if (c->which == 2) {
            for (int i = 0; i < c->N; i++) {
                double x = z[i], t = c->t[b * c->N + i];
                L += fmax(x, 0) - x * t + log1p(exp(-fabs(x)));
            }
            continue;
        }
        double mx = z[0], s = 0;
        for (int i = 1; i < c->N; i++) mx = fmax(mx, z[i]);
        for (int i = 0; i < c->N; i++) s += exp(z[i] - mx);
        double lse = mx + log(s);
        if (c->which == 0)
            for (uint32_t j = c->off[b]; j < c->off[b + 1]; j++) L += c->prob[j] * (lse - z[c->lab[j]]);
        else
            for (int i = 0; i < c->N; i++) L += c->t[b * c->N + i] * (lse - z[i]);
    }
    return L;
}

static void test_losses(void) {
    int B = 4;
    loss_ctx_t c;
    memset(&c, 0, sizeof(c));
    /* policy, sparse: position 3 has two labels with equal prob (tie -> lower label) */
    c.which = 0, c.B = B, c.N = 50;
    c.z = malloc(sizeof(float) * B * 50);
    c.d = malloc(sizeof(float) * B * 50);
    t_fill_randn(c.z, B * 50, 2);
    uint32_t off[5] = {0, 3, 4, 4, 6};
    uint16_t lab[6] = {7, 2, 40, 11, 30, 9};
    float prob[6] = {0.5f, 0.3f, 0.2f, 1.0f, 0.5f, 0.5f};
    c.off = off, c.lab = lab, c.prob = prob;
    c.z[0 * 50 + 7] = 9.0f;  /* position 0: argmax = 7 = target argmax -> correct */
    c.z[1 * 50 + 12] = 9.0f; /* position 1: wrong */
    c.z[3 * 50 + 9] = 9.0f;  /* position 3: tie 30/9 -> 9 -> correct */
    memset(c.stats, 0, sizeof(c.stats));
    be->policy_loss(be, c.z, off, lab, prob, B, 50, 1.0f, c.d, c.stats);
    double L = loss_eval(&c);
    fprintf(stderr, "policy loss %.6f (ref %.6f), correct %.0f\n", c.stats[NN_STAT_POLICY_LOSS], L,
            c.stats[NN_STAT_POLICY_CORRECT]);
    CHECK(fabs(c.stats[NN_STAT_POLICY_LOSS] - L) < 1e-4 * fabs(L) + 1e-5);
    CHECK(c.stats[NN_STAT_POLICY_CORRECT] == 2.0f);
    t_fd_check("fd policy_loss", c.z, B * 50, c.d, loss_eval, &c, 1e-2, 1e-4, 1e-3, 200, 0);
    /* scale multiplies the gradient */
    float *d2 = malloc(sizeof(float) * B * 50);
    be->policy_loss(be, c.z, off, lab, prob, B, 50, 0.25f, d2, c.stats);
    for (int i = 0; i < B * 50; i++) c.d[i] *= 0.25f;
    t_compare("policy_loss scale", d2, c.d, B * 50, 1e-7, 1e-6);
    free(d2);
    free(c.z), free(c.d);

    /* value target + value loss */
    int8_t res[4] = {1, 0, -1, 1};
    float q[4] = {0.5f, -1.0f, 0.0f, 1.0f}, tgt[12];
    be->value_target(be, res, q, 4, 0.25f, 0.4f, tgt);
    /* q=0.5, qd 0.4: d = 0.2, W = 0.65, L = 0.15 */
    float want[12] = {0.75f + 0.25f * 0.65f, 0.25f * 0.2f, 0.25f * 0.15f, 0.25f * 0.0f, 0.75f + 0, 0.25f * 1.0f,
                      0.25f * 0.3f, 0.25f * 0.4f, 0.75f + 0.25f * 0.3f, 0.75f + 0.25f, 0, 0};
    t_compare("value_target", tgt, want, 12, 1e-6, 1e-6);
    c.which = 1, c.N = 3;
    c.z = malloc(sizeof(float) * B * 3);
    c.d = malloc(sizeof(float) * B * 3);
    c.t = tgt;
    t_fill_randn(c.z, B * 3, 1);
    memset(c.stats, 0, sizeof(c.stats));
    be->value_loss(be, c.z, tgt, B, 3, 1.0f, c.d, c.stats);
    L = loss_eval(&c);
    CHECK(fabs(c.stats[NN_STAT_VALUE_LOSS] - L) < 1e-5 * fabs(L) + 1e-6);
    t_fd_check("fd value_loss", c.z, B * 3, c.d, loss_eval, &c, 1e-2, 1e-4, 1e-3, 12, 0);
    free(c.z), free(c.d);

    /* legal BCE + counts */
    c.which = 2, c.N = 60;
    c.z = malloc(sizeof(float) * B * 60);
    c.d = malloc(sizeof(float) * B * 60);
    c.t = malloc(sizeof(float) * B * 60);
    t_fill_randn(c.z, B * 60, 3);
    int tp = 0, fp = 0, fn = 0;
    for (int i = 0; i < B * 60; i++) {
        c.t[i] = t_unif() < 0.3 ? 1.0f : 0.0f;
        int pred = c.z[i] >= 0;
        tp += pred && c.t[i] > 0.5f;
        fp += pred && c.t[i] < 0.5f;
        fn += !pred && c.t[i] > 0.5f;
    }
    memset(c.stats, 0, sizeof(c.stats));
    be->legal_loss(be, c.z, c.t, B, 60, 1.0f, c.d, c.stats);
    L = loss_eval(&c);
    CHECK(fabs(c.stats[NN_STAT_LEGAL_LOSS] - L) < 1e-5 * fabs(L) + 1e-5);
    CHECK(c.stats[NN_STAT_LEGAL_TP] == tp && c.stats[NN_STAT_LEGAL_FP] == fp && c.stats[NN_STAT_LEGAL_FN] == fn);
    fprintf(stderr, "legal loss %.5f (ref %.5f) tp %d fp %d fn %d\n", c.stats[NN_STAT_LEGAL_LOSS], L, tp, fp, fn);
    t_fd_check("fd legal_loss", c.z, B * 60, c.d, loss_eval, &c, 1e-2, 1e-4, 1e-3, 240, 0);
    free(c.z), free(c.d), free(c.t);
}

/* ---- optimizer ---------------------------------------------------------------- */
static void test_sgd(void) {
    int64_t n = 100;
    float p[100], g[100], v[100], pr[100], vr[100];
    t_fill_randn(p, n, 1);
    t_fill_randn(g, n, 1);
    t_fill_randn(v, n, 1);
    memcpy(pr, p, sizeof(p));
    memcpy(vr, v, sizeof(v));
    float gn2 = 0;
    be->sum_squares(be, g, n, &gn2);
    double ref = 0;
    for (int i = 0; i < n; i++) ref += (double)g[i] * g[i];
    CHECK(fabs(gn2 - ref) < 1e-4 * ref);
    nn_sgd_args_t a = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .clip_norm = 2.0f, .nesterov = 1};
    be->sgd_step(be, p, g, v, n, &gn2, &a);
    double scale = 2.0 / (sqrt(ref) + 1e-6);
    for (int i = 0; i < n; i++) {
        double gi = g[i] * scale, vi = 0.9 * vr[i] + gi;
        vr[i] = (float)vi;
        pr[i] = (float)(pr[i] * (1 - 0.1 * 0.01) - 0.1 * (gi + 0.9 * vi));
    }
    t_compare("sgd_step nesterov+clip param", p, pr, n, 1e-6, 1e-5);
    t_compare("sgd_step nesterov+clip momentum", v, vr, n, 1e-6, 1e-5);
    /* no clipping when the norm is below the threshold, plain momentum */
    a.clip_norm = 1e9f;
    a.nesterov = 0;
    memcpy(pr, p, sizeof(p));
    memcpy(vr, v, sizeof(v));
    be->sgd_step(be, p, g, v, n, &gn2, &a);
    for (int i = 0; i < n; i++) {
        double vi = 0.9 * vr[i] + g[i];
        vr[i] = (float)vi;
        pr[i] = (float)(pr[i] * (1 - 0.1 * 0.01) - 0.1 * vi);
    }
    t_compare("sgd_step momentum param", p, pr, n, 1e-6, 1e-5);
    /* lr and weight decay from memory (hyper): the arguments' are ignored,
     * the update is the same bit for bit as with them as arguments */
    float p2[100], v2[100], hy[2] = {0.1f, 0.01f};
    memcpy(p2, p, sizeof p), memcpy(v2, v, sizeof v);
    be->sgd_step(be, p, g, v, n, &gn2, &a);
    nn_sgd_args_t ah = a;
    ah.lr = 5.0f, ah.weight_decay = 0.5f, ah.hyper = hy;
    be->sgd_step(be, p2, g, v2, n, &gn2, &ah);
    CHECK(!memcmp(p, p2, sizeof p) && !memcmp(v, v2, sizeof v));
    hy[0] = 0.2f; /* read when the op runs */
    be->sgd_step(be, p2, g, v2, n, &gn2, &ah);
    a.lr = 0.2f;
    be->sgd_step(be, p, g, v, n, &gn2, &a);
    CHECK(!memcmp(p, p2, sizeof p) && !memcmp(v, v2, sizeof v));
}

static void test_schedule(void) {
    nn_train_config_t c = nn_train_config_default();
    c.lr = 1.0f, c.warmup_steps = 10, c.total_steps = 110, c.lr_min_frac = 0.1f;
    CHECK(fabsf(nn_lr_at(&c, 0) - 0.1f) < 1e-6f);
    CHECK(fabsf(nn_lr_at(&c, 9) - 1.0f) < 1e-6f);
    CHECK(fabsf(nn_lr_at(&c, 10) - 1.0f) < 1e-6f);
    CHECK(fabsf(nn_lr_at(&c, 60) - 0.55f) < 1e-5f);
    CHECK(fabsf(nn_lr_at(&c, 110) - 0.1f) < 1e-6f);
    CHECK(fabsf(nn_lr_at(&c, 5000) - 0.1f) < 1e-6f);
    c.schedule = NN_SCHED_STEP, c.step_size = 20, c.step_gamma = 0.5f;
    CHECK(fabsf(nn_lr_at(&c, 29) - 1.0f) < 1e-6f);
    CHECK(fabsf(nn_lr_at(&c, 30) - 0.5f) < 1e-6f);
    CHECK(fabsf(nn_lr_at(&c, 55) - 0.25f) < 1e-6f);
    int32_t b, ch;
    CHECK(nn_net_size_parse("6x64", &b, &ch) == 0 && b == 6 && ch == 64);
    CHECK(nn_net_size_parse("10x128", &b, &ch) == 0 && b == 10 && ch == 128);
    CHECK(nn_net_size_parse("6x", &b, &ch) != 0);
    CHECK(nn_net_size_parse("x64", &b, &ch) != 0);
    CHECK(nn_net_size_parse("6x64x", &b, &ch) != 0);
    CHECK(nn_net_size_parse("0x64", &b, &ch) != 0);
    CHECK(nn_net_size_parse("6 x64", &b, &ch) != 0);
    CHECK(nn_net_size_parse("", &b, &ch) != 0);
    CHECK(nn_act_parse("relu") == NN_ACT_RELU && nn_act_parse("silu") == NN_ACT_SILU && nn_act_parse("tanh") < 0);
}

/* gather picks elements by offset; the stopwatch times the interval marked
 * (the server's busy figure) and says -1 when there is none. */
static void test_gather_timer(void) {
    float src[10];
    for (int i = 0; i < 10; i++) src[i] = (float)(i * i);
    int32_t idx[5] = {9, 0, 3, 3, 7};
    float dst[5];
    be->gather(be, src, idx, 5, dst);
    CHECK(dst[0] == 81.0f && dst[1] == 0.0f && dst[2] == 9.0f && dst[3] == 9.0f && dst[4] == 49.0f);
    CHECK(be->timer_ms(be) < 0); /* nothing marked yet */
    be->timer_mark(be, 0);
    CHECK(be->timer_ms(be) < 0); /* no end yet */
    compat_sleep_ms(30);
    be->timer_mark(be, 1);
    double ms = be->timer_ms(be);
    CHECKF(ms >= 25.0 && ms < 2000.0, "stopwatch over a 30 ms sleep: %.3f ms", ms);
}

/* copy_2d: rows at their pitches, nothing else touched (the channel slices
 * of the merged head convolution, nn/net.c). */
static void test_copy_2d(void) {
    float src[6 * 10], dst[4 * 8];
    for (int i = 0; i < 60; i++) src[i] = (float)i;
    for (int i = 0; i < 32; i++) dst[i] = -1.0f;
    /* 4 rows of 3 floats from column 2 of a 6 x 10 matrix into column 1 of a 4 x 8 one */
    be->copy_2d(be, dst + 1, 8 * sizeof(float), src + 2, 10 * sizeof(float), 3 * sizeof(float), 4);
    int bad = 0;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 8; c++) bad += dst[r * 8 + c] != (c >= 1 && c < 4 ? (float)(r * 10 + c + 1) : -1.0f);
    CHECKF(bad == 0, "copy_2d: %d elements wrong", bad);
}

/* The ops that run on the instance's OpenMP threads (BN, activations, add,
 * losses, sum of squares, SGD) give one thread's results on four, at sizes
 * above the threshold where they split: elementwise outputs bit for bit,
 * sums up to their order. (Without OpenMP both run on one thread.) */
static void test_threads(void) {
    nn_backend_t *one = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, NULL, 0),
                 *four = nn_backend_cpu_new_conv(4, NN_CPU_CONV_REF, NULL, 0);
    KOMA_ASSERT(one && four);
    enum { B = 48, C = 24, HW = 81, N = 2187 };
    int64_t n = (int64_t)B * C * HW, nl = (int64_t)B * N;
    nn_backend_t *bes[2] = {one, four};
    float *x = malloc(sizeof(float) * n), *r = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
    float *z = malloc(sizeof(float) * nl), *t = malloc(sizeof(float) * nl), g[C], bt[C];
    float *y[2], *dx[2], *a[2], *ab[2], *dl[2], *dp[2], *p[2], *v[2], st[2][NN_STAT_NB], ms[2][4 * C], ss[2];
    t_fill_randn(x, n, 2);
    t_fill_randn(r, n, 1);
    t_fill_randn(dy, n, 1);
    t_fill_randn(z, nl, 3);
    t_fill_randn(g, C, 1);
    t_fill_randn(bt, C, 1);
    for (int64_t i = 0; i < nl; i++) t[i] = t_unif() < 0.05;
    uint32_t off[B + 1];
    uint16_t lab[4 * B];
    float prob[4 * B];
    off[0] = 0;
    for (int b = 0; b < B; b++) {
        off[b + 1] = off[b] + 1 + b % 4;
        for (uint32_t j = off[b]; j < off[b + 1]; j++) {
            lab[j] = (uint16_t)(t_next() % N);
            prob[j] = (float)t_unif();
        }
    }
    for (int k = 0; k < 2; k++) {
        nn_backend_t *e = bes[k];
        y[k] = malloc(sizeof(float) * n);
        dx[k] = malloc(sizeof(float) * n);
        a[k] = malloc(sizeof(float) * n);
        ab[k] = malloc(sizeof(float) * n);
        dl[k] = malloc(sizeof(float) * nl);
        dp[k] = malloc(sizeof(float) * nl);
        p[k] = malloc(sizeof(float) * n);
        v[k] = malloc(sizeof(float) * n);
        float *rm = ms[k], *rv = ms[k] + C, *mean = ms[k] + 2 * C, *inv = ms[k] + 3 * C, dg[C], db[C];
        for (int c = 0; c < C; c++) rm[c] = 0, rv[c] = 1;
        e->bn_fwd_train(e, x, g, bt, B, C, HW, NN_BN_EPS, 0.1f, rm, rv, y[k], mean, inv);
        e->bn_bwd(e, x, dy, g, mean, inv, B, C, HW, dx[k], dg, db);
        memcpy(rm, dg, sizeof dg); /* the statistics were compared through mean and invstd */
        memcpy(rv, db, sizeof db);
        e->act_fwd(e, x, r, n, NN_ACT_SILU, a[k]);
        e->act_bwd(e, dy, x, n, NN_ACT_RELU, ab[k]);
        e->add(e, a[k], ab[k], n, a[k]);
        memset(st[k], 0, sizeof st[k]);
        e->legal_loss(e, z, t, B, N, 0.5f, dl[k], st[k]);
        e->policy_loss(e, z, off, lab, prob, B, N, 0.5f, dp[k], st[k]);
        ss[k] = 0;
        e->sum_squares(e, x, n, &ss[k]);
        memcpy(p[k], x, sizeof(float) * n);
        memset(v[k], 0, sizeof(float) * n);
        nn_sgd_args_t sa = {0.1f, 0.9f, 1e-4f, 1.0f, 1};
        e->sgd_step(e, p[k], dy, v[k], n, &ss[k], &sa);
        KOMA_ASSERT(!nn_backend_error(e));
    }
    t_compare("threads: bn_fwd_train", y[1], y[0], n, 1e-5, 1e-5);
    t_compare("threads: bn mean, invstd, dgamma, dbeta", ms[1], ms[0], 4 * C, 1e-5, 1e-5);
    t_compare("threads: bn_bwd", dx[1], dx[0], n, 1e-5, 1e-5);
    t_compare("threads: act_fwd silu + act_bwd relu, add", a[1], a[0], n, 0, 0);
    t_compare("threads: legal_loss gradient", dl[1], dl[0], nl, 0, 0);
    t_compare("threads: policy_loss gradient", dp[1], dp[0], nl, 0, 0);
    t_compare("threads: loss sums", st[1], st[0], NN_STAT_NB, 1e-3, 1e-6);
    t_compare("threads: sum_squares", &ss[1], &ss[0], 1, 0, 1e-6);
    t_compare("threads: sgd_step", p[1], p[0], n, 1e-6, 1e-6);
    for (int k = 0; k < 2; k++) {
        free(y[k]), free(dx[k]), free(a[k]), free(ab[k]), free(dl[k]), free(dp[k]), free(p[k]), free(v[k]);
        nn_backend_free(bes[k]);
    }
    free(x), free(r), free(dy), free(z), free(t);
}

int main(void) {
    be = nn_backend_cpu_new(0);
    test_gather_timer();
    test_copy_2d();
    test_gemm();
    test_preinit_threads();
    test_expand();
    test_conv(2, 3, 4, 3, 1, 1);
    test_conv(2, 3, 4, 1, 1, 1);
    test_conv(1, 5, 6, 3, 0, 1);
    test_conv(1, 5, 27, 1, 1, 0);
    test_conv(50, 64, 8, 3, 0, 0); /* several batch chunks */
    test_conv(7, 130, 9, 1, 1, 0);
    /* the default backend above takes oneDNN's route where built with it: the
     * reference route (im2col + GEMM) gets the same convolution checks */
    char err[256];
    nn_backend_t *dflt = be;
    be = nn_backend_cpu_new_conv(0, NN_CPU_CONV_REF, err, sizeof(err));
    KOMA_ASSERT(be);
    fprintf(stderr, "-- convolutions again on the reference route (default route: %s)\n",
            nn_backend_cpu_conv_route(dflt));
    test_conv(2, 3, 4, 3, 1, 1);
    test_conv(1, 5, 27, 1, 1, 0);
    test_conv(50, 64, 8, 3, 0, 0);
    test_conv(7, 130, 9, 1, 1, 0);
    nn_backend_free(be);
    be = dflt;
    test_bn();
    test_act(NN_ACT_RELU);
    test_act(NN_ACT_SILU);
    test_dense();
    test_losses();
    test_sgd();
    test_schedule();
    test_threads();
    nn_backend_free(be);
    return t_done("test_nn_ops");
}
