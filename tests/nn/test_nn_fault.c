/* test_nn_fault.c - a failing backend fails the call that uses it.
 *
 * With faults injected into the CPU backend (nn/fault.h, the KOMA_FAULT
 * switch through nn_fault_set): a forward, a training step, an eval batch and
 * nn_weights_save return an error naming the op, later calls on the failed
 * instance fail too, another instance is unaffected, and nothing is written;
 * a silent NaN in the weights (":nan") is caught by nn_weights_save and
 * nn_net_check_finite, naming the tensor; a weights file with a NaN tensor
 * and a valid checksum is refused by every loader (naming file and tensor),
 * by nn_server_publish_file and, as a net, by nn_server_publish_net;
 * out-of-memory messages name host memory and the bytes; nn_net_copy_weights
 * waits for the source's queue before the destination copies; a server whose
 * worker fails fails its batch and every pending ticket with the worker's
 * message, and later submissions. Runs under ThreadSanitizer too (server). */
#include "nn_test.h"

#include "nn/fault.h"
#include "nn/safetensors.h"
#include "nn/server.h"
#include "nn/weights.h"

static const nn_net_config_t CFG = {
    .blocks = 1, .channels = 8, .act = NN_ACT_RELU, .in_planes = 5, .in_hand = 2, .features_version = 3};

static void set_fault(const char *spec) {
    char e[256];
    if (nn_fault_set(spec, e, sizeof e) != 0) {
        fprintf(stderr, "nn_fault_set(%s): %s\n", spec, e);
        KOMA_ASSERT(0);
    }
}

static nn_net_t *new_net(nn_backend_t *be, uint64_t seed) {
    char err[512];
    nn_net_t *net = nn_net_new(be, &CFG, seed, err, sizeof err);
    if (!net) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(net);
    return net;
}

#define HAS(s, sub) (strstr((s), (sub)) != NULL)

static void test_spec(void) {
    static const char *const bad[] = {"conv_fwd", "conv_fwd:", "conv_fwd:0", "conv_fwd:x", ":3", "conv_fwd:3:inf",
                                      "upload:2:nan", "conv_fwd:3x"};
    char e[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e[0] = 0;
        CHECKF(nn_fault_set(bad[i], e, sizeof e) == -1 && HAS(e, "KOMA_FAULT"), "spec '%s' -> '%s'", bad[i], e);
    }
    CHECK(nn_fault_set("conv_fwd:3", e, sizeof e) == 0);
    CHECK(nn_fault_set("sgd_step:2:nan", e, sizeof e) == 0);
    CHECK(nn_fault_set(NULL, e, sizeof e) == 0);
    CHECK(nn_fault_hit("sgd_step") == NN_FAULT_NONE && nn_fault_hit("sgd_step") == NN_FAULT_NONE);
    set_fault("add:2");
    CHECK(nn_fault_hit("conv_fwd") == NN_FAULT_NONE);
    CHECK(nn_fault_hit("add") == NN_FAULT_NONE);
    CHECK(nn_fault_hit("add") == NN_FAULT_FAIL); /* exactly the second call, once */
    CHECK(nn_fault_hit("add") == NN_FAULT_NONE);
    set_fault(NULL);
}

/* A forward on a failed instance returns -1 and NaN outputs; another
 * instance on the same net still works; the net is not saved. */
static void test_forward(void) {
    char err[1024];
    nn_backend_t *be = nn_backend_cpu_new(1), *be2 = nn_backend_cpu_new(1);
    nn_net_t *net = new_net(be, 11);
    nn_ctx_t *ctx = nn_ctx_new(net, NULL, 4, err, sizeof err), *ctx2 = nn_ctx_new(net, be2, 4, err, sizeof err);
    KOMA_ASSERT(ctx && ctx2);
    uint8_t packed[4 * 64] = {0};
    float hand[4 * 2] = {1, 0, 2, 1, 0, 0, 3, 1}, value[4 * 3], policy[4 * NN_POLICY_NB];
    for (size_t i = 0; i < sizeof packed; i++) packed[i] = (uint8_t)(i * 29);
    CHECK(nn_forward(ctx, 4, packed, hand, policy, value, NULL) == 0 && isfinite(value[0]));
    CHECK(nn_backend_error(be) == NULL);

    set_fault("conv_fwd:2");
    CHECK(nn_forward(ctx, 4, packed, hand, policy, value, NULL) == -1);
    const char *e = nn_backend_error(be);
    CHECKF(e && HAS(e, "injected fault: conv_fwd call 2"), "error: %s", e ? e : "(none)");
    CHECKF(isnan(value[0]) && isnan(policy[7]), "a failed forward left plausible outputs %g %g", value[0], policy[7]);
    CHECK(nn_forward(ctx, 1, packed, hand, NULL, value, NULL) == -1); /* sticky */
    CHECK(nn_forward_dev(ctx, 1, packed, hand, NN_OUT_ALL) == -1);
    CHECK(nn_forward(ctx2, 4, packed, hand, NULL, value, NULL) == 0 && isfinite(value[0]) && !nn_backend_error(be2));

    const char *path = t_path("fwd.safetensors");
    err[0] = 0;
    CHECKF(nn_weights_save(net, NULL, path, err, sizeof err) == -1 && HAS(err, path) && HAS(err, "not written") &&
               HAS(err, "injected fault"),
           "save after a failure: %s", err);
    CHECK(!compat_file_exists(path));
    set_fault(NULL);
    nn_ctx_free(ctx);
    nn_ctx_free(ctx2);
    nn_net_free(net);
    nn_backend_free(be);
    nn_backend_free(be2);
}

/* A failed training step returns -1 with the op's name, the step count stays,
 * the later steps fail too, and the net and optimizer are not saved. */
static void test_train_step(void) {
    char err[1024];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = new_net(be, 12);
    nn_optim_t *tr = nn_optim_new(net, NULL, 8, err, sizeof err);
    KOMA_ASSERT(tr);
    t_batch_t b;
    t_batch_init(&b, 8, CFG.in_planes, CFG.in_hand, 3);
    nn_metrics_t m;
    CHECK(nn_train_step(tr, &b.b, &m, err, sizeof err) == 0 && isfinite(m.loss));
    set_fault("conv_bwd_filter:3");
    err[0] = 0;
    CHECKF(nn_train_step(tr, &b.b, &m, err, sizeof err) == -1 && HAS(err, "nn_train_step") &&
               HAS(err, "injected fault: conv_bwd_filter call 3"),
           "failed step: %s", err);
    CHECK(nn_optim_step_count(tr) == 1);
    err[0] = 0;
    CHECKF(nn_train_step(tr, &b.b, &m, err, sizeof err) == -1 && HAS(err, "conv_bwd_filter"), "next step: %s", err);
    CHECK(nn_eval_batch(tr, &b.b, &m, err, sizeof err) == -1);
    CHECK(nn_optim_step_count(tr) == 1);
    const char *path = t_path("step.safetensors");
    err[0] = 0;
    CHECKF(nn_weights_save(net, tr, path, err, sizeof err) == -1 && HAS(err, "not written"), "save: %s", err);
    CHECK(!compat_file_exists(path));
    set_fault(NULL);
    t_batch_free(&b);
    nn_optim_free(tr);
    nn_net_free(net);
    nn_backend_free(be);
}

/* A silent NaN in the weights: the step "succeeds", but the net is neither
 * saved nor passes the finite check, and the message names the tensor. */
static void test_nan_weights(void) {
    char err[1024];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = new_net(be, 13);
    nn_optim_t *tr = nn_optim_new(net, NULL, 8, err, sizeof err);
    KOMA_ASSERT(tr);
    t_batch_t b;
    t_batch_init(&b, 8, CFG.in_planes, CFG.in_hand, 3);
    nn_metrics_t m;
    CHECK(nn_net_check_finite(net, err, sizeof err) == 0);
    set_fault("sgd_step:1:nan"); /* the first group: conv and dense weights */
    CHECK(nn_train_step(tr, &b.b, &m, err, sizeof err) == 0);
    err[0] = 0;
    CHECKF(nn_net_check_finite(net, err, sizeof err) == -1 && HAS(err, "'stem.conv.weight'") && HAS(err, "non-finite"),
           "finite check: %s", err);
    const char *path = t_path("nan.safetensors");
    err[0] = 0;
    CHECKF(nn_weights_save(net, tr, path, err, sizeof err) == -1 && HAS(err, path) && HAS(err, "not written") &&
               HAS(err, "'stem.conv.weight'") && HAS(err, "non-finite"),
           "save: %s", err);
    CHECK(!compat_file_exists(path));
    CHECK(nn_weights_save(net, NULL, path, err, sizeof err) == -1 && !compat_file_exists(path));
    set_fault(NULL);
    t_batch_free(&b);
    nn_optim_free(tr);
    nn_net_free(net);
    nn_backend_free(be);
}

/* Writes net (CPU: host params) as a weights file with a VALID checksum,
 * element `elem` of tensor `bad` replaced by v (no replacement when bad is NULL). */
static void write_weights(nn_net_t *net, const char *path, const char *bad, int64_t elem, float v) {
    int64_t np = 0, ns = 0;
    const float *p = nn_net_params(net, &np, NULL), *s = nn_net_stats(net, &ns);
    float *h = malloc(sizeof(float) * (size_t)(np + ns));
    KOMA_ASSERT(h);
    memcpy(h, p, sizeof(float) * (size_t)np);
    memcpy(h + np, s, sizeof(float) * (size_t)ns);
    st_writer_t *w = st_writer_new();
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        float *d = (t->kind == NN_TENSOR_PARAM ? h : h + np) + t->offset;
        if (bad && strcmp(t->name, bad) == 0) d[elem] = v;
        KOMA_ASSERT(st_writer_add(w, t->name, ST_DTYPE_F32, t->ndim, t->shape, d) == 0);
    }
    char buf[32];
    st_writer_meta(w, "koma.kind", "weights");
    st_writer_meta(w, "koma.version", "1");
    st_writer_meta(w, "koma.net", nn_net_size_format(CFG.blocks, CFG.channels, buf, sizeof buf));
    st_writer_meta(w, "koma.activation", "relu");
    snprintf(buf, sizeof buf, "%d", CFG.features_version);
    st_writer_meta(w, "koma.features_version", buf);
    snprintf(buf, sizeof buf, "%d", CFG.in_planes);
    st_writer_meta(w, "koma.in_planes", buf);
    snprintf(buf, sizeof buf, "%d", CFG.in_hand);
    st_writer_meta(w, "koma.in_hand", buf);
    char err[512];
    KOMA_ASSERT(st_writer_write(w, path, err, sizeof err) == 0);
    st_writer_free(w);
    free(h);
}

/* Loaders and publishers refuse a NaN tensor behind a valid checksum. */
static void test_load_and_publish(void) {
    char err[1024];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = new_net(be, 14);
    const char *good = t_path("good.safetensors");
    char bad[700];
    snprintf(bad, sizeof bad, "%s", t_path("nan_tensor.safetensors"));
    write_weights(net, good, NULL, 0, 0.0f);
    write_weights(net, bad, "blocks.0.conv1.weight", 5, NAN);
    char e2[512];
    st_file_t *f = st_open(bad, ST_OPEN_VERIFY, e2, sizeof e2);
    CHECKF(f != NULL, "the NaN file's checksums must be valid: %s", e2);
    st_close(f);

    nn_net_t *ok = nn_weights_load(be, good, -1, err, sizeof err);
    CHECKF(ok != NULL, "control file: %s", err);
    err[0] = 0;
    nn_net_t *n2 = nn_weights_load(be, bad, -1, err, sizeof err);
    CHECKF(!n2 && HAS(err, bad) && HAS(err, "'blocks.0.conv1.weight'") && HAS(err, "holds NaN") &&
               HAS(err, "index 5"),
           "load: %s", err);
    nn_net_free(n2);
    /* nn_weights_read: refused and nothing changed */
    int64_t np = 0;
    float *p = nn_net_params(net, &np, NULL);
    float *before = malloc(sizeof(float) * (size_t)np);
    memcpy(before, p, sizeof(float) * (size_t)np);
    err[0] = 0;
    CHECKF(nn_weights_read(net, NULL, bad, err, sizeof err) == -1 && HAS(err, "'blocks.0.conv1.weight'"), "read: %s",
           err);
    CHECK(memcmp(before, p, sizeof(float) * (size_t)np) == 0);
    free(before);

    nn_server_config_t sc = nn_server_config_default();
    sc.cpu_threads = 1;
    sc.max_batch = 4;
    nn_server_t *srv = nn_server_new(&sc, good, NULL, err, sizeof err);
    KOMA_ASSERT(srv);
    err[0] = 0;
    CHECKF(nn_server_publish_file(srv, bad, 0, err, sizeof err) == -1 && HAS(err, "'blocks.0.conv1.weight'"),
           "publish file: %s", err);
    CHECK(nn_server_generation(srv) == 1);
    float *w = nn_net_tensor_data(ok, nn_net_tensor_find(ok, "value.fc2.bias"));
    w[1] = INFINITY; /* CPU: host memory */
    err[0] = 0;
    CHECKF(nn_server_publish_net(srv, ok, 0, err, sizeof err) == -1 && HAS(err, "'value.fc2.bias'") &&
               HAS(err, "non-finite"),
           "publish net: %s", err);
    CHECK(nn_server_generation(srv) == 1);
    w[1] = 0.0f;
    CHECK(nn_server_publish_net(srv, ok, 0, err, sizeof err) == 2);
    nn_server_free(srv);
    nn_net_free(ok);
    nn_net_free(net);
    nn_backend_free(be);
}

/* Out of memory on the CPU backend says host memory and the bytes. */
static void test_oom_message(void) {
    char err[1024];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = new_net(be, 15);
    set_fault("buf_alloc:1");
    err[0] = 0;
    CHECKF(!nn_ctx_new(net, NULL, 4, err, sizeof err) && HAS(err, "out of host memory") && HAS(err, " bytes"),
           "ctx: %s", err);
    set_fault("buf_alloc:2");
    err[0] = 0;
    CHECKF(!nn_optim_new(net, NULL, 4, err, sizeof err) && HAS(err, "out of host memory") && !HAS(err, "device"),
           "trainer: %s", err);
    set_fault("buf_alloc:1");
    err[0] = 0;
    CHECKF(!nn_net_new(be, &CFG, 1, err, sizeof err) && HAS(err, "out of host memory"), "net: %s", err);
    CHECK(nn_backend_error(be) == NULL); /* running out of memory is the caller's to report, not sticky */
    set_fault(NULL);
    nn_net_free(net);
    nn_backend_free(be);
}

/* ---- copy_weights waits for the source --------------------------------------- */
static char g_log[512];
typedef struct {
    nn_backend_t be; /* first */
    nn_backend_t *cpu;
    char tag;
} rec_t;
static void rec_note(nn_backend_t *be, const char *op) {
    size_t l = strlen(g_log);
    snprintf(g_log + l, sizeof g_log - l, "%c.%s ", ((rec_t *)be)->tag, op);
}
static void rec_sync(nn_backend_t *be) { rec_note(be, "sync"); }
static void rec_copy(nn_backend_t *be, void *d, const void *s, size_t n) {
    rec_note(be, "copy");
    rec_t *r = (rec_t *)be;
    r->cpu->copy(r->cpu, d, s, n);
}
static void rec_free(nn_backend_t *be) {
    nn_backend_free(((rec_t *)be)->cpu);
    free(be);
}
/* A CPU instance whose sync and copy are logged (as if it had a queue). */
static nn_backend_t *rec_new(char tag) {
    rec_t *r = calloc(1, sizeof *r);
    r->cpu = nn_backend_cpu_new(1);
    KOMA_ASSERT(r && r->cpu);
    r->be = *r->cpu; /* the CPU ops only use be->ctx */
    r->be.sync = rec_sync;
    r->be.copy = rec_copy;
    r->be.free = rec_free;
    r->tag = tag;
    return &r->be;
}

static void test_copy_waits_for_source(void) {
    char err[512];
    nn_backend_t *s = rec_new('S'), *d = rec_new('D');
    nn_net_t *src = new_net(s, 16), *dst = new_net(d, 17);
    g_log[0] = 0;
    CHECK(nn_net_copy_weights(dst, src, err, sizeof err) == 0);
    const char *sync = strstr(g_log, "S.sync"), *copy = strstr(g_log, "D.copy");
    CHECKF(sync && copy && sync < copy, "the source's queue must be waited for before the copy: %s", g_log);
    int64_t np = 0;
    CHECK(memcmp(nn_net_params(dst, &np, NULL), nn_net_params(src, NULL, NULL), sizeof(float) * (size_t)np) == 0);
    nn_net_free(src);
    nn_net_free(dst);
    nn_backend_free(s);
    nn_backend_free(d);
}

/* ---- server: a failed worker fails its batch and every pending ticket -------- */
static void test_server_worker_fault(void) {
    char err[1024];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = new_net(be, 18);
    nn_server_config_t sc = nn_server_config_default();
    sc.cpu_threads = 1;
    sc.streams = 1;
    sc.max_batch = 8;
    sc.gather_us = 200000; /* the tickets below queue up while the first batch runs */
    nn_server_t *srv = nn_server_new(&sc, NULL, net, err, sizeof err);
    KOMA_ASSERT(srv);
    enum { T = 4, N = 8 };
    static uint8_t packed[N * 64];
    static float hand[N * 2], value[T][N * 3];
    nn_server_request_t req = {.n = N, .packed = packed, .hand = hand, .value = value[0]};
    nn_server_result_t res;
    CHECK(nn_server_eval(srv, &req, &res) == NN_SERVER_OK && isfinite(value[0][0]));

    set_fault("conv_fwd:1"); /* the worker's next forward */
    /* A full batch runs at once, so the worker may fail before the later
     * tickets are in: each is then refused with the fault instead. */
    nn_server_ticket_t tk[T];
    int accepted = 0;
    for (int i = 0; i < T; i++) {
        req.value = value[i];
        err[0] = 0;
        int sst = nn_server_submit(srv, &req, &tk[accepted], err, sizeof err);
        if (sst == NN_SERVER_OK) accepted++;
        else
            CHECKF(i > 0 && sst == NN_SERVER_EDEVICE && HAS(err, "injected fault: conv_fwd call 1"),
                   "submit %d: %s: %s", i, nn_server_status_name(sst), err);
    }
    CHECKF(accepted >= 1, "the first ticket is accepted (%d)", accepted);
    for (int i = 0; i < accepted; i++) {
        memset(&res, 0, sizeof res);
        int st = nn_server_wait(srv, tk[i], &res);
        CHECKF(st == NN_SERVER_EDEVICE && HAS(res.message, "inference server worker 0") &&
                   HAS(res.message, "injected fault: conv_fwd call 1"),
               "ticket %d: %s: %s", i, nn_server_status_name(st), res.message);
    }
    req.value = value[0];
    err[0] = 0;
    CHECKF(nn_server_submit(srv, &req, &tk[0], err, sizeof err) == NN_SERVER_EDEVICE && HAS(err, "injected fault"),
           "submit after the last worker failed: %s", err);
    nn_server_stats_t st;
    nn_server_stats(srv, &st);
    CHECKF(st.failed == accepted, "%lld failed tickets counted, %d accepted", (long long)st.failed, accepted);
    set_fault(NULL);
    nn_server_free(srv);
    nn_net_free(net);
    nn_backend_free(be);
}

int main(void) {
    t_scratch("nn_fault");
    test_spec();
    test_forward();
    test_train_step();
    test_nan_weights();
    test_load_and_publish();
    test_oom_message();
    test_copy_waits_for_source();
    test_server_worker_fault();
    if (!atomic_load(&g_fail)) t_rm_rf(t_dir);
    return t_done("test_nn_fault");
}
