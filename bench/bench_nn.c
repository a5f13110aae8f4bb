/* bench_nn.c - speed of the CPU backend: inference evaluations/s by batch
 * size, training samples/s, and the trunk convolution's GFLOP/s next to a
 * plain sgemm of the same shape (M = Cout, N = B*81, K = Cin*9).
 *
 * Usage: bench_nn [--nets 6x64,10x128,6x64g2] [--batches 1,8,32,128,256,1024]
 *                 [--train-batch 256] [--seconds 1] [--threads 0]
 *                 [--planes 104] [--hand 14] [--cpu-time] [--heads all|play]
 *                 [--activation relu|silu]
 * --heads all (the default) computes the policy, value and legal-move heads,
 * as the PyTorch comparison (bench/torch_bench.py) does; --heads play only
 * policy and value, what self-play and the USI engine ask for. A net with
 * the moves-left head ("4x32m") computes it too (the search asks for it).
 * --cpu-time times with process CPU seconds (clock()) instead of wall time:
 * with --threads 1 that gives per-core throughput on a shared machine.
 * --precision fp32|bf16|both: inference's convolutions (nn_backend_cpu_set_
 * precision; fp32 by default); both: fp32 and bf16 in turn, 3 rounds per
 * batch size, each evals/s and the median of the rounds' bf16 / fp32 ratios.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "compat/compat.h"
#include "nn/net.h"

static int g_cpu_time = 0; /* --cpu-time: process CPU seconds (all threads) instead of wall time */
static int g_legal = 1;    /* --heads all: the legal-move head too */
static int g_prec = 0;     /* --precision: 0 fp32, 1 bf16, 2 both */
static int g_no_conv = 0;  /* --no-conv: leave out the conv3x3 / sgemm line */
static double now_s(void) { return g_cpu_time ? (double)clock() / CLOCKS_PER_SEC : bench_wall_s(); }

static void bench_infer(nn_backend_t *be, nn_net_t *net, const int32_t *batches, int nb, double secs) {
    const nn_net_config_t *c = nn_net_config(net);
    for (int i = 0; i < nb; i++) {
        int32_t B = batches[i];
        char err[256];
        nn_ctx_t *ctx = nn_ctx_new(net, be, B, err, sizeof(err));
        if (!ctx) {
            fprintf(stderr, "%s\n", err);
            continue;
        }
        uint8_t *packed = malloc((size_t)(B * nn_packed_bytes(c->in_planes)));
        float *hand = malloc(sizeof(float) * (size_t)B * (c->in_hand ? c->in_hand : 1));
        float *pol = malloc(sizeof(float) * (size_t)B * NN_POLICY_NB), *val = malloc(sizeof(float) * (size_t)B * 3);
        float *leg = g_legal ? malloc(sizeof(float) * (size_t)B * NN_POLICY_NB) : NULL;
        float *ml = (c->heads & NN_HEAD_MOVES_LEFT) ? malloc(sizeof(float) * (size_t)B) : NULL;
        nn_outputs_t out = {pol, val, leg, ml};
        bench_fill_inputs(packed, hand, B, c->in_planes, c->in_hand);
        int32_t rounds = g_prec == 2 ? 3 : 1, np = g_prec == 2 ? 2 : 1;
        double rate[2][3] = {{0}}, ratio[3] = {0};
        for (int32_t r = 0; r < rounds; r++)
            for (int32_t k = 0; k < np; k++) {
                int32_t bf = g_prec == 2 ? k : g_prec;
                nn_backend_cpu_set_precision(be, bf ? NN_CPU_PREC_BF16 : NN_CPU_PREC_FP32);
                nn_forward_out(ctx, B, packed, hand, &out); /* warm-up */
                int64_t iters = 0;
                double t0 = now_s(), t = 0;
                do {
                    nn_forward_out(ctx, B, packed, hand, &out);
                    iters++;
                    t = now_s() - t0;
                } while (t < secs / rounds || iters < 2);
                rate[k][r] = (double)B * iters / t;
                if (k == 1) ratio[r] = rate[1][r] / rate[0][r];
            }
        if (g_prec != 2) {
            printf("  inference  batch %5d: %9.0f evals/s  (%.3f ms/batch)\n", B, rate[0][0], 1e3 * B / rate[0][0]);
        } else {
            double m = ratio[0] + ratio[1] + ratio[2] - fmax(ratio[0], fmax(ratio[1], ratio[2])) -
                       fmin(ratio[0], fmin(ratio[1], ratio[2])); /* the median */
            printf("  inference  batch %5d: fp32 %7.0f %7.0f %7.0f | %s %7.0f %7.0f %7.0f evals/s | bf16/fp32 %.2f "
                   "(%.2f %.2f %.2f)\n",
                   B, rate[0][0], rate[0][1], rate[0][2], nn_backend_cpu_precision(be), rate[1][0], rate[1][1],
                   rate[1][2], m, ratio[0], ratio[1], ratio[2]);
        }
        fflush(stdout);
        free(packed), free(hand), free(pol), free(val), free(leg), free(ml);
        nn_ctx_free(ctx);
    }
}

static void bench_train(nn_net_t *net, int32_t B, double secs) {
    char err[256];
    bench_batch_t tb;
    nn_optim_t *tr = bench_trainer_new(net, B, &tb);
    if (!tr) return;
    nn_metrics_t m;
    nn_train_step(tr, &tb.b, &m, err, sizeof(err)); /* warm-up */
    int64_t iters = 0;
    double t0 = now_s(), t = 0;
    do {
        if (nn_train_step(tr, &tb.b, &m, err, sizeof(err)) != 0) {
            fprintf(stderr, "%s\n", err);
            break;
        }
        iters++;
        t = now_s() - t0;
    } while (t < secs || iters < 2);
    printf("  training   batch %5d: %9.0f samples/s  (%.1f ms/step, loss %.3f)\n", B, (double)B * iters / t,
           1e3 * t / iters, m.loss);
    fflush(stdout);
    bench_batch_free(&tb);
    nn_optim_free(tr);
}

static double time_it(double secs, void (*fn)(void *), void *arg, int64_t *iters_out) {
    fn(arg);
    int64_t iters = 0;
    double t0 = now_s(), t = 0;
    do {
        fn(arg);
        iters++;
        t = now_s() - t0;
    } while (t < secs || iters < 2);
    *iters_out = iters;
    return t / (double)iters;
}

typedef struct {
    nn_backend_t *be;
    int32_t B, C;
    float *x, *w, *y, *col, *out;
    void *ws;
} conv_args_t;

static void run_conv(void *p) {
    conv_args_t *a = p;
    a->be->conv_fwd(a->be, a->x, a->w, NULL, a->B, a->C, a->C, 3, a->y, a->ws);
}
static void run_bwd_data(void *p) {
    conv_args_t *a = p;
    a->be->conv_bwd_data(a->be, a->y, a->w, a->B, a->C, a->C, 3, a->x, 0, a->ws);
}
static void run_bwd_filter(void *p) {
    conv_args_t *a = p;
    a->be->conv_bwd_filter(a->be, a->x, a->y, a->B, a->C, a->C, 3, a->w, NULL, a->ws);
}
static void run_gemm(void *p) {
    conv_args_t *a = p;
    int32_t N = a->B * NN_HW, K = a->C * 9;
    nn_gemm(0, 0, a->C, N, K, 1.0f, a->w, K, a->col, N, 0.0f, a->out, N);
}

static void bench_conv(nn_backend_t *be, int32_t C, int32_t B, double secs) {
    conv_args_t a = {be, B, C, NULL, NULL, NULL, NULL, NULL, NULL};
    int64_t nx = (int64_t)B * C * NN_HW, K = (int64_t)C * 9;
    a.x = malloc(sizeof(float) * (size_t)nx);
    a.y = malloc(sizeof(float) * (size_t)nx);
    a.w = malloc(sizeof(float) * (size_t)(C * K));
    a.col = malloc(sizeof(float) * (size_t)(K * B * NN_HW));
    a.out = malloc(sizeof(float) * (size_t)nx);
    a.ws = be->buf_alloc(be, be->conv_ws_bytes(be, B, C, C, 3));
    for (int64_t i = 0; i < nx; i++) a.x[i] = a.y[i] = (float)(bench_rnd() % 100) * 0.01f;
    for (int64_t i = 0; i < C * K; i++) a.w[i] = (float)(bench_rnd() % 100) * 0.001f;
    for (int64_t i = 0; i < K * B * NN_HW; i++) a.col[i] = (float)(bench_rnd() % 100) * 0.01f;
    double flop = 2.0 * C * (double)K * B * NN_HW;
    int64_t it;
    double tg = time_it(secs, run_gemm, &a, &it);
    double tf = time_it(secs, run_conv, &a, &it);
    double td = time_it(secs, run_bwd_data, &a, &it);
    double tw = time_it(secs, run_bwd_filter, &a, &it);
    printf("  conv3x3 %3d->%-3d B=%-4d sgemm(%dx%dx%lld) %6.1f GFLOP/s | conv fwd %6.1f (%.0f%%), bwd-data %6.1f, bwd-filter %6.1f GFLOP/s\n",
           C, C, B, C, B * NN_HW, (long long)K, flop / tg * 1e-9, flop / tf * 1e-9, 100.0 * tg / tf, flop / td * 1e-9,
           flop / tw * 1e-9);
    fflush(stdout);
    free(a.x), free(a.y), free(a.w), free(a.col), free(a.out);
    be->buf_free(be, a.ws);
}

int main(int argc, char **argv) {
    nn_cpu_blas_reexec_if_generic(argv); /* the OpenBLAS kernels and OpenMP wait policy programs get */
    const char *nets = "6x64,10x128";
    int32_t batches[32] = {1, 8, 32, 128, 256, 1024};
    int nb = 6;
    int32_t train_batch = 256, threads = 0, planes = 104, hand = 14;
    double secs = 1.0;
    int act = NN_ACT_RELU;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--nets") && v) nets = v, i++;
        else if (!strcmp(argv[i], "--batches") && v) nb = bench_parse_list(v, batches, 32), i++;
        else if (!strcmp(argv[i], "--train-batch") && v) train_batch = atoi(v), i++;
        else if (!strcmp(argv[i], "--seconds") && v) secs = atof(v), i++;
        else if (!strcmp(argv[i], "--threads") && v) threads = atoi(v), i++;
        else if (!strcmp(argv[i], "--planes") && v) planes = atoi(v), i++;
        else if (!strcmp(argv[i], "--hand") && v) hand = atoi(v), i++;
        else if (!strcmp(argv[i], "--cpu-time")) g_cpu_time = 1;
        else if (!strcmp(argv[i], "--precision") && v &&
                 (!strcmp(v, "fp32") || !strcmp(v, "bf16") || !strcmp(v, "both")))
            g_prec = !strcmp(v, "fp32") ? 0 : !strcmp(v, "bf16") ? 1 : 2, i++;
        else if (!strcmp(argv[i], "--no-conv")) g_no_conv = 1;
        else if (!strcmp(argv[i], "--heads") && v && (!strcmp(v, "all") || !strcmp(v, "play"))) g_legal = !strcmp(v, "all"), i++;
        else if (!strcmp(argv[i], "--activation") && v && nn_act_parse(v) >= 0) act = nn_act_parse(v), i++;
        else {
            fprintf(stderr,
                    "usage: %s [--nets 6x64,10x128] [--batches 1,8,...] [--train-batch 256] [--seconds 1] [--threads "
                    "0] [--planes 104] [--hand 14] [--cpu-time] [--heads all|play] [--activation relu|silu] "
                    "[--precision fp32|bf16|both] [--no-conv]\n",
                    argv[0]);
            return 2;
        }
    }
    nn_backend_t *be = nn_backend_cpu_new(threads);
    if (g_prec == 1 && nn_backend_cpu_set_precision(be, NN_CPU_PREC_BF16) != NN_CPU_PREC_BF16)
        printf("bench_nn: bf16 not available here (no AVX512_BF16, or not the Winograd route): fp32\n");
    printf("bench_nn: CPU backend (%s convolutions, OMP_WAIT_POLICY=%s), %d CPUs, %d planes + %d hand, %s heads, %.2f %s s per measurement\n",
           nn_backend_cpu_conv_route(be), getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "unset",
           compat_cpu_count(), planes, hand, g_legal ? "all" : "play (policy + value)", secs, g_cpu_time ? "CPU" : "wall");
    char list[256];
    snprintf(list, sizeof(list), "%s", nets);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        nn_net_config_t cfg = {.act = (nn_act_t)act, .in_planes = planes, .in_hand = hand, .features_version = 1};
        if (nn_net_arch_parse(tok, &cfg) != 0) { /* "4x32", or "4x32g2" with global pooling */
            fprintf(stderr, "bad net size '%s'\n", tok);
            return 2;
        }
        char err[256];
        nn_net_t *net = nn_net_new(be, &cfg, 1, err, sizeof(err));
        if (!net) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        int64_t np;
        nn_net_params(net, &np, NULL);
        printf("net %s %s (%lld params)\n", tok, nn_act_name(cfg.act), (long long)np);
        if (!g_no_conv) bench_conv(be, cfg.channels, train_batch > 0 ? train_batch : 256, secs);
        bench_infer(be, net, batches, nb, secs);
        if (train_batch > 0) bench_train(net, train_batch, secs);
        nn_net_free(net);
    }
    nn_backend_free(be);
    return 0;
}
