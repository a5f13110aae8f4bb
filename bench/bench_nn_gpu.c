/* bench_nn_gpu.c - speed of the CUDA backend: inference evaluations/s by
 * batch size (host round trip and device-only), training samples/s, and the
 * share of the GPU's dense tensor-core peak that inference reaches (of the
 * mode's peak, and of the BF16 peak: what the tensor cores could give).
 *
 * FLOPs are 2 x the multiply-adds of the convolutions and dense layers of one
 * forward pass (elementwise work not counted); training counts 3 x forward
 * (forward, backward data, backward filter). The peak comes from a table of
 * known GPUs (dense, no sparsity; BF16 and TF32 with FP32 accumulation), else
 * an estimate from the compute capability, SM count and clock (marked "est.").
 *
 * Usage: bench_nn_gpu [--device 0] [--nets 6x64,10x128] [--modes tf32,bf16]
 *                     [--batches 1,2,4,...,1024] [--train-batches 256,1024]
 *                     [--seconds 1] [--planes 68] [--hand 14] [--heuristic]
 * Modes: tf32 (default FP32 with TF32 tensor cores), bf16 (NN_CUDA_BF16),
 * fp32 (NN_CUDA_NO_TF32). --heuristic: cuDNN heuristics instead of timing.
 * Exits 77 without a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "compat/compat.h"
#include "nn/backend_cuda.h"
#include "nn/net.h"

/* ---- peak table ------------------------------------------------------------- */
typedef struct {
    const char *match; /* substring of the device name; most specific first */
    double bf16, tf32; /* dense TFLOP/s */
} peak_t;

static const peak_t PEAKS[] = {
    {"GH200", 989.4, 494.7},   {"H200", 989.4, 494.7},    {"H100 NVL", 835.0, 417.5},
    {"H100 PCIe", 756.5, 378.0}, {"H100", 989.4, 494.7},  {"H800", 989.4, 494.7},
    {"B200", 2250.0, 1100.0},  {"A100", 312.0, 156.0},    {"A800", 312.0, 156.0},
    {"L40S", 362.1, 183.0},    {"L40", 181.0, 90.5},      {"A40", 149.7, 74.8},
    {"A10", 125.0, 62.5},      {"L4", 121.0, 60.0},       {"RTX 4090", 165.2, 82.6},
    {"RTX 3090", 71.0, 35.6},
};

/* Dense FLOP per clock per SM by compute capability (fallback estimate). */
static void peak_estimate(const nn_cuda_device_info_t *d, double *bf16, double *tf32) {
    double per_bf16 = 0, per_tf32 = 0;
    int cc = d->cc_major * 10 + d->cc_minor;
    if (cc >= 100) per_bf16 = 8192, per_tf32 = 4096;
    else if (cc >= 90) per_bf16 = 4096, per_tf32 = 2048;
    else if (cc == 80) per_bf16 = 2048, per_tf32 = 1024;
    else if (cc >= 86) per_bf16 = 1024, per_tf32 = 512;
    double clk = (double)d->clock_khz * 1e3;
    *bf16 = per_bf16 * d->sm_count * clk * 1e-12;
    *tf32 = per_tf32 * d->sm_count * clk * 1e-12;
}

static const char *peak_lookup(const nn_cuda_device_info_t *d, double *bf16, double *tf32) {
    for (size_t i = 0; i < sizeof(PEAKS) / sizeof(PEAKS[0]); i++)
        if (strstr(d->name, PEAKS[i].match)) {
            *bf16 = PEAKS[i].bf16;
            *tf32 = PEAKS[i].tf32;
            return PEAKS[i].match;
        }
    peak_estimate(d, bf16, tf32);
    return "est. from cc x SMs x clock";
}

/* ---- FLOPs -------------------------------------------------------------------- */
static double conv_flop(int32_t cin, int32_t cout, int32_t k) { return 2.0 * NN_HW * cin * cout * k * k; }

/* One position, forward, as documented in nn/net.h. */
static double net_flop(const nn_net_config_t *c) {
    int32_t C = c->channels, cin = c->in_planes + c->in_hand;
    double f = conv_flop(cin, C, 3) + 2.0 * c->blocks * conv_flop(C, C, 3);
    f += 2.0 * (conv_flop(C, C, 3) + conv_flop(C, NN_POLICY_CH, 1)); /* policy and legal heads */
    f += conv_flop(C, NN_VALUE_CH, 1) + 2.0 * (NN_VALUE_CH * NN_HW * NN_VALUE_HIDDEN + NN_VALUE_HIDDEN * NN_VALUE_NB);
    return f;
}

/* ---- inference ------------------------------------------------------------------ */
static int failed(nn_backend_t *be) {
    const char *e = nn_cuda_error(be);
    if (e) fprintf(stderr, "CUDA backend failed: %s\n", e);
    return e != NULL;
}

/* What nn_forward does, with every head computed (as PyTorch's module) but
 * only policy and value downloaded (as PyTorch's benchmark copies out). */
static void host_round_trip(nn_ctx_t *ctx, nn_backend_t *be, const nn_net_config_t *c, int32_t B,
                            const uint8_t *packed, const float *hand, float *pol, float *val) {
    uint8_t *dpacked;
    float *dhand, *dpol, *dval;
    nn_ctx_buffers(ctx, &dpacked, &dhand, &dpol, &dval, NULL);
    be->upload(be, dpacked, packed, (size_t)(B * nn_packed_bytes(c->in_planes)));
    if (c->in_hand) be->upload(be, dhand, hand, sizeof(float) * (size_t)B * c->in_hand);
    nn_forward_dev(ctx, B, dpacked, dhand, NN_OUT_ALL);
    be->download(be, pol, dpol, sizeof(float) * (size_t)B * NN_POLICY_NB);
    be->download(be, val, dval, sizeof(float) * (size_t)B * NN_VALUE_NB);
    be->sync(be);
}

/* TFLOP/s as a percentage of a peak (0 where none applies). */
static double pct_of(double tflops, double peak) { return peak > 0 ? 100.0 * tflops / peak : 0.0; }

/* peak: the dense tensor-core peak of the mode (0: none applies); bf16: the
 * GPU's BF16 dense peak, the ceiling of any mode (the last column). */
static void bench_infer(nn_backend_t *be, nn_net_t *net, const int32_t *batches, int nb, double secs, double peak,
                        double bf16) {
    const nn_net_config_t *c = nn_net_config(net);
    int32_t maxB = 1;
    for (int i = 0; i < nb; i++) maxB = batches[i] > maxB ? batches[i] : maxB;
    char err[256];
    nn_ctx_t *ctx = nn_ctx_new(net, be, maxB, err, sizeof(err)); /* one arena, as the inference server has */
    if (!ctx) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    uint8_t *packed = malloc((size_t)(maxB * nn_packed_bytes(c->in_planes)));
    float *hand = malloc(sizeof(float) * (size_t)maxB * (c->in_hand ? c->in_hand : 1));
    float *pol = malloc(sizeof(float) * (size_t)maxB * NN_POLICY_NB), *val = malloc(sizeof(float) * (size_t)maxB * 3);
    bench_fill_inputs(packed, hand, maxB, c->in_planes, c->in_hand);
    uint8_t *dpacked;
    float *dhand;
    nn_ctx_buffers(ctx, &dpacked, &dhand, NULL, NULL, NULL);
    double fpp = net_flop(c);
    printf("| batch | evals/s (host in/out) | ms/batch | evals/s (device only) | ms/batch | TFLOP/s | %% of peak | %% of "
           "BF16 peak |\n");
    printf("|------:|------:|------:|------:|------:|------:|------:|------:|\n");
    for (int i = 0; i < nb; i++) {
        int32_t B = batches[i];
        if (B < 1 || B > maxB) continue;
        /* host round trip: upload packed + hand, forward (every head, as
         * PyTorch's module), download policy + value */
        for (int w = 0; w < 3; w++) host_round_trip(ctx, be, c, B, packed, hand, pol, val); /* algorithm choice, warm-up */
        int64_t it = 0;
        double t0 = bench_wall_s(), t = 0;
        do {
            host_round_trip(ctx, be, c, B, packed, hand, pol, val);
            it++;
            t = bench_wall_s() - t0;
        } while (t < secs || it < 3);
        double host_eps = (double)B * it / t, host_ms = 1e3 * t / it;
        /* device only: inputs already on the device, one sync at the end */
        be->upload(be, dpacked, packed, (size_t)(B * nn_packed_bytes(c->in_planes)));
        if (c->in_hand) be->upload(be, dhand, hand, sizeof(float) * (size_t)B * c->in_hand);
        nn_forward_dev(ctx, B, dpacked, dhand, NN_OUT_ALL);
        be->sync(be);
        int64_t chunk = 1;
        it = 0;
        t0 = bench_wall_s();
        do {
            for (int64_t j = 0; j < chunk; j++) nn_forward_dev(ctx, B, dpacked, dhand, NN_OUT_ALL);
            be->sync(be);
            it += chunk;
            t = bench_wall_s() - t0;
            if (chunk < 64) chunk *= 2;
        } while (t < secs || it < 3);
        double dev_eps = (double)B * it / t, tflops = dev_eps * fpp * 1e-12;
        printf("| %5d | %9.0f | %7.3f | %9.0f | %7.3f | %6.2f | %5.2f%% | %5.2f%% |\n", B, host_eps, host_ms, dev_eps,
               1e3 * t / it, tflops, pct_of(tflops, peak), pct_of(tflops, bf16));
        fflush(stdout);
        if (failed(be)) break;
    }
    free(packed), free(hand), free(pol), free(val);
    nn_ctx_free(ctx);
}

/* ---- training ----------------------------------------------------------------------- */

static void bench_train(nn_backend_t *be, nn_net_t *net, int32_t B, double secs, double peak, double bf16) {
    const nn_net_config_t *c = nn_net_config(net);
    char err[256];
    bench_batch_t tb;
    nn_optim_t *tr = bench_trainer_new(net, B, &tb);
    if (!tr) return;
    nn_metrics_t m;
    for (int w = 0; w < 3; w++) nn_train_step(tr, &tb.b, &m, err, sizeof(err)); /* algorithm choice, warm-up */
    /* The batch in the trainer's staging, as the resident window's gather_rows
     * leaves it (train/window.c; its 12-byte-a-row upload and one gather
     * kernel a step are not timed here): the default route on a GPU, whose
     * steps are recorded (CUDA graphs) from the third on. */
    nn_train_staging_t st;
    nn_optim_staging(tr, &st, NULL);
    uint32_t nnz = tb.b.policy_offsets[B];
    be->upload(be, st.planes, tb.b.planes, (size_t)(B * nn_packed_bytes(c->in_planes)));
    if (c->in_hand) be->upload(be, st.hand, tb.b.hand, sizeof(float) * (size_t)B * c->in_hand);
    be->upload(be, st.legal, tb.b.legal, (size_t)(B * nn_packed_bytes(NN_POLICY_CH)));
    be->upload(be, st.offsets, tb.b.policy_offsets, sizeof(uint32_t) * (size_t)(B + 1));
    if (nnz) be->upload(be, st.labels, tb.b.policy_label, sizeof(uint16_t) * nnz);
    if (nnz) be->upload(be, st.probs, tb.b.policy_prob, sizeof(float) * nnz);
    be->upload(be, st.result, tb.b.result, (size_t)B);
    be->upload(be, st.q, tb.b.root_q, sizeof(float) * (size_t)B);
    nn_batch_t staged = {.B = B, .staged = 1, .policy_offsets = tb.b.policy_offsets};
    for (int w = 0; w < 3; w++) nn_train_step(tr, &staged, &m, err, sizeof(err)); /* the third is recorded */
    for (int late = 0; late < 3; late++) {
        /* late 0: nn_train_step, no metrics (it still waits for the device at
         * the end of every step); late 1: the training loop's way
         * (train/loop.c): step s + 1 queued, then step s's metrics read;
         * late 2: the same on the staged batch (recorded steps) */
        const nn_batch_t *bt = late == 2 ? &staged : &tb.b;
        int64_t it = 0, prev = -1, id = 0;
        double t0 = bench_wall_s(), t = 0;
        do {
            for (int j = 0; j < 8; j++, it++) {
                int rc = late ? nn_train_step_launch(tr, bt, &id, err, sizeof(err))
                              : nn_train_step(tr, bt, NULL, err, sizeof(err));
                if (rc == 0 && late && prev >= 0) rc = nn_train_step_metrics(tr, prev, &m, err, sizeof(err));
                prev = id;
                if (rc != 0) {
                    fprintf(stderr, "%s\n", err);
                    goto done;
                }
            }
            t = bench_wall_s() - t0;
        } while (t < secs);
        if (late && nn_train_step_metrics(tr, prev, &m, err, sizeof(err)) != 0) {
            fprintf(stderr, "%s\n", err);
            goto done;
        }
        t = bench_wall_s() - t0;
        if (!late) nn_train_step(tr, bt, &m, err, sizeof(err));
        double sps = (double)B * it / t, tflops = sps * 3.0 * net_flop(c) * 1e-12;
        printf("| train%s | %5d | %9.0f samples/s | %7.2f ms/step | %6.2f TFLOP/s | %5.2f%% of peak | loss %.3f | "
               "%5.2f%% of BF16 peak |\n", late == 2 ? " staged" : late ? " late" : "", B, sps, 1e3 * t / it, tflops,
               pct_of(tflops, peak), m.loss, pct_of(tflops, bf16));
        fflush(stdout);
    }
done:
    failed(be);
    bench_batch_free(&tb);
    nn_optim_free(tr);
}

int main(int argc, char **argv) {
    const char *nets = "6x64,10x128", *modes = "tf32,bf16";
    int32_t batches[64] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
    int nb = 11;
    int32_t tbatches[16] = {256, 1024};
    int ntb = 2;
    int32_t device = 0, planes = 68, hand = 14; /* engine/encode.h: ENC_PLANES, ENC_HAND */
    double secs = 1.0;
    uint32_t extra = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--device") && v) device = atoi(v), i++;
        else if (!strcmp(argv[i], "--nets") && v) nets = v, i++;
        else if (!strcmp(argv[i], "--modes") && v) modes = v, i++;
        else if (!strcmp(argv[i], "--batches") && v) nb = bench_parse_list(v, batches, 64), i++;
        else if (!strcmp(argv[i], "--train-batches") && v) ntb = bench_parse_list(v, tbatches, 16), i++;
        else if (!strcmp(argv[i], "--seconds") && v) secs = atof(v), i++;
        else if (!strcmp(argv[i], "--planes") && v) planes = atoi(v), i++;
        else if (!strcmp(argv[i], "--hand") && v) hand = atoi(v), i++;
        else if (!strcmp(argv[i], "--heuristic")) extra |= NN_CUDA_HEURISTIC;
        else {
            fprintf(stderr, "usage: %s [--device 0] [--nets 6x64,10x128] [--modes tf32,bf16,fp32] [--batches 1,2,...,1024] "
                            "[--train-batches 256,1024 or none] [--seconds 1] [--planes 68] [--hand 14] [--heuristic]\n", argv[0]);
            return 2;
        }
    }
    char err[512];
    nn_cuda_device_info_t info;
    if (nn_cuda_device_count() == 0 || nn_cuda_device_info(device, &info, err, sizeof(err)) != 0) {
        if (nn_cuda_device_count() == 0) nn_cuda_device_info(0, &info, err, sizeof(err));
        fprintf(stderr, "bench_nn_gpu: skipped: %s\n", err);
        return 77;
    }
    double pk_bf16, pk_tf32;
    const char *pk_src = peak_lookup(&info, &pk_bf16, &pk_tf32);
    printf("# bench_nn_gpu: device %d %s, cc %d.%d, %d SMs, %.0f MHz, %.1f GiB, driver %d, runtime %d\n", device, info.name,
           info.cc_major, info.cc_minor, info.sm_count, info.clock_khz * 1e-3, (double)info.mem_bytes / (1 << 30),
           info.driver_version, info.runtime_version);
    printf("# dense peak (%s): bf16 %.1f TFLOP/s, tf32 %.1f TFLOP/s; input %d planes + %d hand\n", pk_src, pk_bf16, pk_tf32,
           planes, hand);
    const char *mp = modes;
    while (*mp) {
        char mode[16];
        size_t L = strcspn(mp, ",");
        snprintf(mode, sizeof(mode), "%.*s", (int)(L < sizeof(mode) ? L : sizeof(mode) - 1), mp);
        mp += L + (mp[L] == ',');
        uint32_t flags = extra;
        double peak = pk_tf32;
        if (!strcmp(mode, "bf16")) flags |= NN_CUDA_BF16, peak = pk_bf16;
        else if (!strcmp(mode, "fp32")) flags |= NN_CUDA_NO_TF32, peak = 0; /* no tensor-core peak applies */
        else if (strcmp(mode, "tf32") != 0) {
            fprintf(stderr, "unknown mode '%s' (tf32, bf16, fp32)\n", mode);
            return 2;
        }
        const char *np = nets;
        while (*np) {
            char size[32];
            size_t n = strcspn(np, ",");
            snprintf(size, sizeof(size), "%.*s", (int)(n < sizeof(size) ? n : sizeof(size) - 1), np);
            np += n + (np[n] == ',');
            nn_net_config_t cfg = {.act = NN_ACT_RELU, .in_planes = planes, .in_hand = hand, .features_version = 1};
            if (nn_net_size_parse(size, &cfg.blocks, &cfg.channels) != 0) {
                fprintf(stderr, "bad net size '%s'\n", size);
                return 2;
            }
            nn_backend_t *be = nn_backend_cuda_new(device, flags, err, sizeof(err));
            if (!be) {
                fprintf(stderr, "%s: %s\n", mode, err);
                break;
            }
            nn_net_t *net = nn_net_new(be, &cfg, 1, err, sizeof(err));
            if (!net) {
                fprintf(stderr, "%s\n", err);
                nn_backend_free(be);
                return 1;
            }
            printf("\n## %s %s (%.1f MFLOP per position forward)\n\n", size, mode, net_flop(&cfg) * 1e-6);
            bench_infer(be, net, batches, nb, secs, peak, pk_bf16);
            printf("\n");
            for (int i = 0; i < ntb; i++) bench_train(be, net, tbatches[i], secs, peak, pk_bf16);
            nn_net_free(net);
            nn_backend_free(be);
        }
    }
    return 0;
}
