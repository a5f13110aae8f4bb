/* test_nn_fault_gpu.c - failure safety on the CUDA backend (needs a device;
 * exits 77 without one or without CUDA).
 *
 * The CPU half lives in test_nn_fault.c; this is the same contract where the
 * work is asynchronous: a fault injected with nn_fault_set (the KOMA_FAULT
 * switch) into a CUDA instance fails nn_forward (outputs NaN, never stale),
 * nn_train_step and nn_weights_save, and only that instance; a ":nan" fault
 * on sgd_step is caught by nn_net_check_finite and nn_weights_save, naming
 * the tensor; nn_net_copy_weights between two instances waits for work still
 * queued on the SOURCE's stream (a long queue ends with the write of the
 * expected weights; the copy must see them); the inference server on "cuda"
 * (pinned worker staging, download_async, one wait per batch) returns the
 * same values as a direct forward, and a worker fault fails the ticket.
 * Harness self-check without a GPU: KOMA_GPU_TEST_FAKE=1 runs it on CPU
 * instances (and a "cpu" server); that proves the plumbing, not CUDA. */
#include "nn_test.h"

#include "nn/backend_cuda.h"
#include "nn/fault.h"
#include "nn/server.h"
#include "nn/weights.h"

static int g_fake;
static const nn_net_config_t CFG = {
    .blocks = 2, .channels = 32, .act = NN_ACT_RELU, .in_planes = 5, .in_hand = 2, .features_version = 3};

static nn_backend_t *dev_new(void) {
    char err[512];
    nn_backend_t *be = g_fake ? nn_backend_cpu_new(1) : nn_backend_cuda_new(0, NN_CUDA_NO_TF32, err, sizeof err);
    if (!be) fprintf(stderr, "device backend: %s\n", err);
    KOMA_ASSERT(be);
    return be;
}

static void set_fault(const char *spec) {
    char e[256];
    KOMA_ASSERT(nn_fault_set(spec, e, sizeof e) == 0);
}

static nn_net_t *new_net(nn_backend_t *be, uint64_t seed) {
    char err[512];
    nn_net_t *net = nn_net_new(be, &CFG, seed, err, sizeof err);
    if (!net) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(net);
    return net;
}

static int has(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }
#define HAS(s, sub) has((s), (sub))

static void test_fail_and_nan(void) {
    char err[1024];
    nn_backend_t *be = dev_new(), *other = dev_new();
    nn_net_t *net = new_net(be, 1);
    nn_ctx_t *ctx = nn_ctx_new(net, NULL, 8, err, sizeof err), *octx = nn_ctx_new(net, other, 8, err, sizeof err);
    KOMA_ASSERT(ctx && octx);
    uint8_t packed[8 * 64];
    float hand[8 * 2], value[8 * 3];
    for (size_t i = 0; i < sizeof packed; i++) packed[i] = (uint8_t)(i * 13);
    for (int i = 0; i < 16; i++) hand[i] = (float)(i % 3);
    CHECK(nn_forward(ctx, 8, packed, hand, NULL, value, NULL) == 0 && isfinite(value[0]));
    set_fault("conv_fwd:3");
    CHECK(nn_forward(ctx, 8, packed, hand, NULL, value, NULL) == -1);
    CHECKF(HAS(nn_backend_error(be), "injected fault: conv_fwd call 3"), "error: %s", nn_backend_error(be));
    CHECK(isnan(value[0]) && isnan(value[23]));
    CHECK(nn_forward(octx, 8, packed, hand, NULL, value, NULL) == 0 && isfinite(value[0]));
    err[0] = 0;
    CHECKF(nn_weights_save(net, NULL, t_path("failed.safetensors"), err, sizeof err) == -1 && HAS(err, "not written"),
           "save: %s", err);

    /* training on a third instance: a failed op, then a silent NaN */
    nn_backend_t *tb = dev_new();
    nn_net_t *tn = new_net(tb, 2);
    nn_optim_t *tr = nn_optim_new(tn, NULL, 16, err, sizeof err);
    KOMA_ASSERT(tr);
    t_batch_t b;
    t_batch_init(&b, 16, CFG.in_planes, CFG.in_hand, 3);
    nn_metrics_t m;
    set_fault("sgd_step:1:nan");
    CHECK(nn_train_step(tr, &b.b, &m, err, sizeof err) == 0);
    err[0] = 0;
    CHECKF(nn_net_check_finite(tn, err, sizeof err) == -1 && HAS(err, "'stem.conv.weight'"), "finite: %s", err);
    CHECK(nn_weights_save(tn, tr, t_path("nan.safetensors"), err, sizeof err) == -1 &&
          !compat_file_exists(t_path("nan.safetensors")));
    set_fault("bn_bwd:2");
    err[0] = 0;
    CHECKF(nn_train_step(tr, &b.b, &m, err, sizeof err) == -1 && HAS(err, "injected fault: bn_bwd call 2"), "step: %s",
           err);
    CHECK(nn_optim_step_count(tr) == 1);
    set_fault(NULL);
    t_batch_free(&b);
    nn_optim_free(tr);
    nn_net_free(tn);
    nn_backend_free(tb);
    nn_ctx_free(ctx);
    nn_ctx_free(octx);
    nn_net_free(net);
    nn_backend_free(be);
    nn_backend_free(other);
}

/* The source's stream holds a long queue that ends by writing the expected
 * params; a copy on the destination's stream must see that write. */
static void test_copy_waits_for_source(void) {
    char err[512];
    nn_backend_t *sb = dev_new(), *db = dev_new();
    nn_net_t *src = new_net(sb, 3), *dst = new_net(db, 4);
    int64_t np = 0;
    float *sp = nn_net_params(src, &np, NULL);
    float *want = malloc(sizeof(float) * (size_t)np), *got = malloc(sizeof(float) * (size_t)np);
    for (int64_t i = 0; i < np; i++) want[i] = (float)(i % 1000) * 1e-3f;
    int64_t big = (int64_t)16 << 20; /* floats of busy work: p, g, v */
    float *junk = sb->buf_alloc(sb, 3 * sizeof(float) * (size_t)big), *next = sb->buf_alloc(sb, sizeof(float) * (size_t)np);
    KOMA_ASSERT(junk && next && want && got);
    sb->memset_zero(sb, junk, 3 * sizeof(float) * (size_t)big);
    sb->upload(sb, next, want, sizeof(float) * (size_t)np);
    if (sb->sync) sb->sync(sb);
    nn_sgd_args_t a = {.lr = 0.0f, .momentum = 0.0f};
    for (int r = 0; r < 40; r++) sb->sgd_step(sb, junk, junk + big, junk + 2 * big, big, NULL, &a); /* queued only */
    sb->copy(sb, sp, next, sizeof(float) * (size_t)np);
    CHECK(nn_net_copy_weights(dst, src, err, sizeof err) == 0);
    db->download(db, got, nn_net_params(dst, NULL, NULL), sizeof(float) * (size_t)np);
    int64_t bad = 0;
    for (int64_t i = 0; i < np; i++) bad += got[i] != want[i];
    CHECKF(bad == 0, "%lld of %lld params copied before the source's queue reached them", (long long)bad,
           (long long)np);
    sb->buf_free(sb, junk);
    sb->buf_free(sb, next);
    free(want);
    free(got);
    nn_net_free(src);
    nn_net_free(dst);
    nn_backend_free(sb);
    nn_backend_free(db);
}

/* The server's device path (pinned staging, async downloads, one wait per
 * batch) gives what a direct forward gives; a worker fault fails its ticket. */
static void test_server(void) {
    char err[1024];
    nn_backend_t *be = dev_new();
    nn_net_t *net = new_net(be, 5);
    nn_ctx_t *ctx = nn_ctx_new(net, NULL, 32, err, sizeof err);
    KOMA_ASSERT(ctx);
    enum { N = 32 };
    static uint8_t packed[N * 64];
    static float hand[N * 2], v_ref[N * 3], p_ref[N * NN_POLICY_NB], v[N * 3], p[N * NN_POLICY_NB];
    for (size_t i = 0; i < sizeof packed; i++) packed[i] = (uint8_t)(i * 7 + 1);
    for (int i = 0; i < N * 2; i++) hand[i] = (float)(i % 4);
    CHECK(nn_forward(ctx, N, packed, hand, p_ref, v_ref, NULL) == 0);
    nn_server_config_t sc = nn_server_config_default();
    sc.backend = g_fake ? "cpu" : "cuda";
    sc.cuda_flags = NN_CUDA_NO_TF32;
    sc.streams = 2;
    sc.max_batch = 16; /* the submission is split over two batches */
    nn_server_t *srv = nn_server_new(&sc, NULL, net, err, sizeof err);
    if (!srv) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(srv);
    nn_server_request_t req = {.n = N, .packed = packed, .hand = hand, .value = v, .policy = p};
    nn_server_result_t res;
    CHECK(nn_server_eval(srv, &req, &res) == NN_SERVER_OK);
    int64_t bad = 0; /* batches of 16 and 32 may take other conv algorithms: FP32 rounding only */
    for (int i = 0; i < N * 3; i++) bad += !(fabs((double)v[i] - v_ref[i]) <= 1e-3 + 1e-4 * fabs((double)v_ref[i]));
    for (int i = 0; i < N * NN_POLICY_NB; i++)
        bad += !(fabs((double)p[i] - p_ref[i]) <= 1e-3 + 1e-4 * fabs((double)p_ref[i]));
    CHECKF(bad == 0, "server vs direct forward: %lld values differ", (long long)bad);
    set_fault("conv_fwd:1");
    int st = nn_server_eval(srv, &req, &res);
    CHECKF(st == NN_SERVER_EDEVICE && HAS(res.message, "injected fault: conv_fwd call 1"), "%s: %s",
           nn_server_status_name(st), res.message);
    set_fault(NULL);
    nn_server_free(srv);
    nn_ctx_free(ctx);
    nn_net_free(net);
    nn_backend_free(be);
}

int main(void) {
    g_fake = getenv("KOMA_GPU_TEST_FAKE") && atoi(getenv("KOMA_GPU_TEST_FAKE")) == 1;
    if (!g_fake && nn_cuda_device_count() == 0) {
        fprintf(stderr, "test_nn_fault_gpu: no CUDA device (or built without CUDA): skipped\n");
        return 77;
    }
    t_scratch("nn_fault_gpu");
    test_fail_and_nan();
    test_copy_waits_for_source();
    test_server();
    if (!atomic_load(&g_fail)) t_rm_rf(t_dir);
    return t_done("test_nn_fault_gpu");
}
