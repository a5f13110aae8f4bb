/* test_nn_act.c - the vectorised SiLU (nn/act.h) against double precision
 * x / (1 + exp(-x)) and its derivative: a dense sweep of [-90, 90], random
 * values of every scale, the extremes (-100, -88, -87, 0, 88, 100, FLT_MAX,
 * denormals, +-inf: never Inf or NaN for a finite input; NaN in, NaN out),
 * every element the same wherever an array starts and ends (the backend
 * splits arrays over threads), and the two users: the CPU backend's act_fwd /
 * act_bwd (at the extremes, where the old expf code gave NaN for -inf and
 * act_bwd NaN for +-inf) and the Winograd convolution's epilogue (NCHW and
 * NHWC outputs, pre-activations out to +-200) against a double reference. */
#include <float.h>

#include "nn_test.h"

#include "nn/act.h"
#include "nn/conv_wino.h"
#include "nn/par.h"

static double silu_d(double x) { return x / (1.0 + exp(-x)); }
static double dsilu_d(double x) {
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
}

/* The forward is within rtol of the double reference from -87 up; below, it
 * is silu(-87) (|y| < 1.5e-36) where the truth is smaller still. */
static void check_fwd(const char *what, const float *x, const float *y, int64_t n, double rtol) {
    int64_t bad = 0;
    double maxr = 0;
    for (int64_t i = 0; i < n; i++) {
        double ref = silu_d((double)x[i]), d = fabs((double)y[i] - ref);
        int ok = x[i] >= -NN_ACT_EXP_MAX ? d <= rtol * fabs(ref) + 1e-45 : fabs(y[i]) < 1.5e-36 && d < 2e-36;
        if (x[i] >= -NN_ACT_EXP_MAX && fabs(ref) >= FLT_MIN && d / fabs(ref) > maxr) maxr = d / fabs(ref);
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s: silu(%.9g) = %.9g, expected %.9g\n", what, x[i], y[i], ref);
    }
    if (n > 1 || bad) fprintf(stderr, "%-36s n=%-8lld max rel %.3g %s\n", what, (long long)n, maxr, bad ? "MISMATCH" : "ok");
    t_judge(bad == 0);
}

static void test_sweep(void) {
    int64_t n = 1800001; /* [-90, 90] by 1e-4 */
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    float *dy = malloc(sizeof(float) * (size_t)n), *dx = malloc(sizeof(float) * (size_t)n);
    float *ref = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(-90.0 + 1e-4 * (double)i);
    nn_act_silu_fwd(x, NULL, n, y);
    check_fwd("silu sweep [-90, 90]", x, y, n, 1e-6);
    for (int64_t i = 0; i < n; i++) {
        dy[i] = 1.0f;
        double c = x[i] < -NN_ACT_EXP_MAX ? -NN_ACT_EXP_MAX : x[i]; /* the clamp below -87 */
        ref[i] = (float)dsilu_d(c);
    }
    nn_act_silu_bwd(dy, x, n, dx);
    /* silu' crosses 0 at -1.278: absolute error there, relative elsewhere */
    t_compare("silu' sweep [-90, 90]", dx, ref, n, 1e-7, 2e-6);
    for (int64_t i = 0; i < n; i++) { /* random scales: 1e-30 .. 1e3, both signs */
        x[i] = t_randn() * (float)pow(10.0, -30.0 + 33.0 * t_unif());
        dy[i] = t_randn();
        ref[i] = (float)(dy[i] * dsilu_d(x[i]));
    }
    nn_act_silu_fwd(x, NULL, n, y);
    check_fwd("silu random scales", x, y, n, 1e-6);
    nn_act_silu_bwd(dy, x, n, dx);
    t_compare("silu' random scales", dx, ref, n, 1e-7, 2e-6);
    free(x), free(y), free(dy), free(dx), free(ref);
}

static void test_extremes(void) {
    const float inf = INFINITY;
    float x[] = {-100.0f, -88.0f, -87.0f, -86.0f, -20.0f, -1.2784645f, -1e-3f, -0.0f, 0.0f, 1e-3f, 20.0f,
                 87.0f, 88.0f, 100.0f, 1e10f, -1e10f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 1e-40f, -1e-40f,
                 FLT_TRUE_MIN, -FLT_TRUE_MIN, inf, -inf};
    int n = (int)(sizeof x / sizeof x[0]);
    float y[sizeof x / sizeof x[0]], d[sizeof x / sizeof x[0]], one[sizeof x / sizeof x[0]];
    for (int i = 0; i < n; i++) one[i] = 1.0f;
    nn_act_silu_fwd(x, NULL, n, y);
    nn_act_silu_bwd(one, x, n, d);
    for (int i = 0; i < n; i++) {
        if (x[i] == inf) {
            CHECKF(y[i] == inf && d[i] == 1.0f, "silu(+inf) = %g (+inf), silu' = %g (1)", y[i], d[i]);
            continue;
        }
        CHECKF(isfinite(y[i]) && isfinite(d[i]), "silu(%g) = %g, silu' = %g: finite", x[i], y[i], d[i]);
        if (isfinite(x[i])) check_fwd("silu extreme", &x[i], &y[i], 1, 1e-6);
        double c = x[i] < -NN_ACT_EXP_MAX ? -NN_ACT_EXP_MAX : x[i] > NN_ACT_EXP_MAX ? NN_ACT_EXP_MAX : x[i];
        CHECK_NEAR(d[i], dsilu_d(c), 1e-7 + 2e-6 * fabs(dsilu_d(c)));
    }
    CHECKF(fabsf(y[n - 1]) < 1.5e-36f, "silu(-inf) = %g, near its limit 0", y[n - 1]);
    CHECK(y[7] == 0.0f && signbit(y[7]) && y[8] == 0.0f && !signbit(y[8])); /* -0 and +0 kept */
    CHECKF(y[20] == x[20] * 0.5f && y[22] == 0.0f, "denormals: silu(1e-40) = %g, silu(min) = %g", y[20], y[22]);
    float nan_in[3] = {NAN, -NAN, 1.0f}, no[3], nd[3], g[3] = {1, 1, NAN};
    nn_act_silu_fwd(nan_in, NULL, 3, no);
    nn_act_silu_bwd(g, nan_in, 3, nd);
    CHECKF(isnan(no[0]) && isnan(no[1]) && isnan(nd[0]) && isnan(nd[1]) && isnan(nd[2]),
           "NaN in, NaN out: %g %g / %g %g %g", no[0], no[1], nd[0], nd[1], nd[2]);
    CHECK(isnan(nn_act_silu1(NAN)) && nn_act_silu1(0.0f) == 0.0f && nn_act_silu1(inf) == inf);
    float r = 0.5f, s;
    nn_act_silu_fwd(&x[4], &r, 1, &s); /* res added first */
    CHECK(s == nn_act_silu1(-19.5f));
}

/* Each element's result is the same wherever the array starts and however
 * long it is (block or tail), in place too. */
static void test_offsets(void) {
    enum { N = 100 };
    float x[N], r[N], want[N], wantr[N], dw[N], g[N];
    for (int i = 0; i < N; i++) x[i] = 8 * t_randn(), r[i] = t_randn(), g[i] = t_randn();
    for (int i = 0; i < N; i++) want[i] = nn_act_silu1(x[i]), wantr[i] = nn_act_silu1(x[i] + r[i]);
    nn_act_silu_bwd(g, x, N, dw);
    int bad = 0;
    for (int off = 0; off < 20; off++)
        for (int len = 0; off + len <= N; len += 7) {
            float y[N], yr[N], d[N], in[N];
            nn_act_silu_fwd(x + off, NULL, len, y);
            nn_act_silu_fwd(x + off, r + off, len, yr);
            nn_act_silu_bwd(g + off, x + off, len, d);
            memcpy(in, x + off, sizeof(float) * (size_t)len);
            nn_act_silu_fwd(in, NULL, len, in);
            for (int i = 0; i < len; i++)
                bad += y[i] != want[off + i] || yr[i] != wantr[off + i] || d[i] != dw[off + i] || in[i] != y[i];
        }
    CHECKF(bad == 0, "%d results differ with the array's start or length", bad);
}

/* a and b hold the same bits (infinities and NaNs included) */
static void same_bits(const char *what, const float *a, const float *b, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: %.9g, expected %.9g\n", what, (long long)i, a[i], b[i]);
    fprintf(stderr, "%-36s n=%-8lld %s\n", what, (long long)n, bad ? "MISMATCH" : "ok (same bits)");
    t_judge(bad == 0);
}

/* The CPU backend's ops: the same results as nn/act.h, on 1 and 2 threads
 * (an array long enough to be split), finite at the extremes. */
static void test_backend(void) {
    nn_backend_t *be1 = nn_backend_cpu_new(1), *be2 = nn_backend_cpu_new(2);
    int64_t n = 3 * NN_PAR_MIN + 13;
    float *x = malloc(sizeof(float) * (size_t)n), *res = malloc(sizeof(float) * (size_t)n);
    float *g = malloc(sizeof(float) * (size_t)n), *y[3], *d[3];
    for (int k = 0; k < 3; k++) y[k] = malloc(sizeof(float) * (size_t)n), d[k] = malloc(sizeof(float) * (size_t)n);
    t_fill_randn(x, n, 30);
    t_fill_randn(res, n, 1);
    t_fill_randn(g, n, 1);
    const float ext[] = {-INFINITY, INFINITY, -FLT_MAX, FLT_MAX, -100, 100, -88, 88, 1e-40f};
    for (int i = 0; i < (int)(sizeof ext / sizeof ext[0]); i++) x[i * 1000] = ext[i], res[i * 1000] = 0;
    nn_act_silu_fwd(x, res, n, y[0]);
    be1->act_fwd(be1, x, res, n, NN_ACT_SILU, y[1]);
    be2->act_fwd(be2, x, res, n, NN_ACT_SILU, y[2]);
    nn_act_silu_bwd(g, x, n, d[0]);
    be1->act_bwd(be1, g, x, n, NN_ACT_SILU, d[1]);
    be2->act_bwd(be2, g, x, n, NN_ACT_SILU, d[2]);
    same_bits("backend act_fwd silu, 1 thread", y[1], y[0], n);
    same_bits("backend act_fwd silu, 2 threads", y[2], y[0], n);
    same_bits("backend act_bwd silu, 1 thread", d[1], d[0], n);
    same_bits("backend act_bwd silu, 2 threads", d[2], d[0], n);
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < n; i++) nonfinite += (!isfinite(y[1][i]) && x[i] != INFINITY) || !isfinite(d[1][i]);
    CHECKF(nonfinite == 0, "%lld non-finite outputs of act_fwd / act_bwd silu (finite but for silu(+inf))",
           (long long)nonfinite);
    CHECKF(fabsf(y[1][0]) < 1.5e-36f && y[1][1000] == INFINITY, "backend: silu(-inf) = %g, silu(+inf) = %g", y[1][0],
           y[1][1000]);
    free(x), free(res), free(g);
    for (int k = 0; k < 3; k++) free(y[k]), free(d[k]);
    nn_backend_free(be1);
    nn_backend_free(be2);
}

/* The Winograd route's SiLU epilogue (bias, residual, activation) against a
 * direct convolution in double; biases of +-200 put pre-activations past
 * the clamps. */
static void test_wino(int32_t layout) {
    enum { B = 3, CIN = 16, COUT = 32 };
    int64_t nx = (int64_t)B * CIN * NN_HW, ny = (int64_t)B * COUT * NN_HW;
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * COUT * CIN * 9), bias[COUT];
    float *res = malloc(sizeof(float) * (size_t)ny), *y = malloc(sizeof(float) * (size_t)ny);
    t_fill_randn(x, nx, 1);
    t_fill_randn(w, COUT * CIN * 9, 0.5f);
    t_fill_randn(res, ny, 1);
    for (int c = 0; c < COUT; c++) bias[c] = c == 0 ? -200.0f : c == 1 ? 200.0f : c == 2 ? -90.0f : 3 * t_randn();
    int xn = (layout & NN_CONV_X_NATIVE) != 0, yn = (layout & NN_CONV_Y_NATIVE) != 0;
    nn_wino_t *wi = nn_wino_new(2);
    CHECK(nn_wino_conv_fwd(wi, x, w, bias, res, NN_ACT_SILU, B, CIN, COUT, y, layout) == 0);
    int64_t bad = 0;
    double maxd = 0;
    for (int b = 0; b < B; b++)
        for (int o = 0; o < COUT; o++)
            for (int q = 0; q < NN_HW; q++) {
                int qy = q / 9, qx = q % 9;
                double s = bias[o];
                for (int i = 0; i < CIN; i++)
                    for (int k = 0; k < 9; k++) {
                        int iy = qy + k / 3 - 1, ix = qx + k % 3 - 1;
                        if (iy < 0 || iy > 8 || ix < 0 || ix > 8) continue;
                        int64_t xi = xn ? ((int64_t)b * NN_HW + iy * 9 + ix) * CIN + i
                                        : ((int64_t)b * CIN + i) * NN_HW + iy * 9 + ix;
                        s += (double)x[xi] * w[(o * CIN + i) * 9 + k];
                    }
                int64_t yi = yn ? ((int64_t)b * NN_HW + q) * COUT + o : ((int64_t)b * COUT + o) * NN_HW + q;
                s += res[yi];
                double ref = silu_d(s), d = fabs(y[yi] - ref);
                if (d > maxd) maxd = d;
                /* Winograd's own float error (~2e-6 of the sums) dominates */
                if (!(d <= 1e-4 + 1e-4 * fabs(ref)) && bad++ < 5)
                    fprintf(stderr, "  wino silu [%d][%d][%d]: %.9g, expected %.9g\n", b, o, q, y[yi], ref);
            }
    fprintf(stderr, "wino silu epilogue, layout %d: max|diff| %.3g %s\n", layout, maxd, bad ? "MISMATCH" : "ok");
    t_judge(bad == 0);
    nn_wino_free(wi);
    free(x), free(w), free(res), free(y);
}

int main(void) {
    fprintf(stderr, "SiLU in %d-float vectors\n",
#if defined(__GNUC__)
            NN_ACT_VW
#else
            1
#endif
    );
    test_sweep();
    test_extremes();
    test_offsets();
    test_backend();
    test_wino(0);
    test_wino(NN_CONV_X_NATIVE | NN_CONV_Y_NATIVE);
    test_wino(NN_CONV_Y_NATIVE);
    return t_done("test_nn_act");
}
