/* test_nn_gpool.c - global pooling (KataGo's bias structure, nn/net.h): the
 * architecture string, the four backend ops against plain loops and finite
 * differences, the inference forward on every CPU convolution route (the
 * pooling block leaves the fused route between its two convolutions), a net
 * whose pooling dense is zero playing exactly as the plain net with the same
 * other weights, the weights file naming the architecture, and a backend
 * without the ops refusing such a net. The whole net's gradients are checked
 * in test_nn_net, against PyTorch in test_nn_torch. */
#include "nn_test.h"

#include "nn/safetensors.h"
#include "nn/weights.h"

static void test_arch_string(void) {
    nn_net_config_t c;
    memset(&c, 0, sizeof c);
    CHECK(nn_net_arch_parse("4x32", &c) == 0 && c.blocks == 4 && c.channels == 32 && c.gpool == 0);
    CHECK(nn_net_arch_parse("4x32g2", &c) == 0 && c.blocks == 4 && c.channels == 32 && c.gpool == 2);
    CHECK(nn_net_arch_parse("6x64G3", &c) == 0 && c.blocks == 6 && c.gpool == 3);
    CHECK(nn_net_arch_parse("4x32g4", &c) == 0 && c.gpool == 4);
    CHECK(nn_net_arch_parse("4x32g5", &c) != 0); /* no block would pool */
    CHECK(nn_net_arch_parse("4x32g0", &c) != 0);
    CHECK(nn_net_arch_parse("4x32g", &c) != 0);
    CHECK(nn_net_arch_parse("4g2", &c) != 0);
    CHECK(nn_net_arch_parse("4x32g2x", &c) != 0);
    CHECK(nn_net_arch_parse("4x32g2g2", &c) != 0);
    int32_t b = 0, ch = 0;
    CHECK(nn_net_size_parse("4x32g2", &b, &ch) == 0 && b == 4 && ch == 32);
    char buf[32];
    c = (nn_net_config_t){.blocks = 4, .channels = 32, .gpool = 2};
    CHECK(strcmp(nn_net_arch_format(&c, buf, sizeof buf), "4x32g2") == 0);
    CHECK(nn_net_arch_is("4x32g2", &c) && !nn_net_arch_is("4x32", &c) && !nn_net_arch_is("4x32g1", &c));
    c.gpool = 0;
    CHECK(strcmp(nn_net_arch_format(&c, buf, sizeof buf), "4x32") == 0);
    CHECK(nn_net_arch_is("4x32", &c));
    c = (nn_net_config_t){.blocks = 6, .channels = 8, .gpool = 3};
    CHECK(!nn_net_gpool_block(&c, 0) && !nn_net_gpool_block(&c, 1) && nn_net_gpool_block(&c, 2) &&
          !nn_net_gpool_block(&c, 3) && nn_net_gpool_block(&c, 5));
}

typedef struct {
    nn_backend_t *be;
    const float *x, *w;
    int32_t B, C;
    float *y;
} pool_ctx_t;

/* sum_j w[j] * pool(x)[j]: a scalar whose gradient through pool_bwd is w */
static double pool_loss(void *p) {
    pool_ctx_t *c = p;
    c->be->pool_fwd(c->be, c->x, c->B, c->C, c->y);
    double s = 0;
    for (int64_t j = 0; j < (int64_t)c->B * 2 * c->C; j++) s += (double)c->w[j] * c->y[j];
    return s;
}

static void test_ops(nn_backend_t *be) { /* be: the Winograd route, which has the native pair */
    int32_t B = 3, C = 5;
    int64_t n = (int64_t)B * C * NN_HW;
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)B * 2 * C);
    float *ref = malloc(sizeof(float) * (size_t)B * 2 * C), *w = malloc(sizeof(float) * (size_t)B * 2 * C);
    float *dx = calloc((size_t)n, sizeof(float)), *bias = malloc(sizeof(float) * (size_t)B * C);
    float *yb = malloc(sizeof(float) * (size_t)n), *db = malloc(sizeof(float) * (size_t)B * C);
    t_fill_randn(x, n, 1.0f);
    t_fill_randn(w, (int64_t)B * 2 * C, 1.0f);
    t_fill_randn(bias, (int64_t)B * C, 1.0f);
    be->pool_fwd(be, x, B, C, y);
    for (int32_t b = 0; b < B; b++)
        for (int32_t c = 0; c < C; c++) {
            double s = 0, m = -INFINITY;
            for (int32_t q = 0; q < NN_HW; q++) {
                double v = x[((int64_t)b * C + c) * NN_HW + q];
                s += v;
                m = v > m ? v : m;
            }
            ref[b * 2 * C + c] = (float)(s / NN_HW);
            ref[b * 2 * C + C + c] = (float)m;
        }
    t_compare("pool_fwd (mean, max)", y, ref, (int64_t)B * 2 * C, 1e-6, 1e-5);
    /* pool_bwd adds: start from ones and take them off again */
    for (int64_t i = 0; i < n; i++) dx[i] = 1.0f;
    be->pool_bwd(be, x, w, B, C, dx);
    for (int64_t i = 0; i < n; i++) dx[i] -= 1.0f;
    pool_ctx_t pc = {be, x, w, B, C, y};
    t_fd_check("pool_bwd vs finite differences", x, n, dx, pool_loss, &pc, 1e-3, 1e-4, 1e-2, 60, 0.05);
    be->chan_bias_fwd(be, x, bias, B, C, yb);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += yb[i] != x[i] + bias[i / NN_HW];
    CHECKF(bad == 0, "chan_bias_fwd: %lld values are not x + bias", (long long)bad);
    memcpy(yb, x, sizeof(float) * (size_t)n);
    be->chan_bias_fwd(be, yb, bias, B, C, yb); /* in place */
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += yb[i] != x[i] + bias[i / NN_HW];
    CHECKF(bad == 0, "chan_bias_fwd in place: %lld values are not x + bias", (long long)bad);
    be->chan_bias_bwd(be, x, B, C, db);
    for (int32_t i = 0; i < B * C; i++) {
        double s = 0;
        for (int32_t q = 0; q < NN_HW; q++) s += x[(int64_t)i * NN_HW + q];
        ref[i] = (float)s;
    }
    t_compare("chan_bias_bwd (sum over squares)", db, ref, (int64_t)B * C, 1e-5, 1e-5);
    /* the native (NHWC) pair, where the backend has it: the same values */
    if (be->pool_fwd_native && be->chan_bias_fwd_native) {
        float *xn = malloc(sizeof(float) * (size_t)n), *yn = malloc(sizeof(float) * (size_t)n);
        for (int32_t b = 0; b < B; b++)
            for (int32_t c = 0; c < C; c++)
                for (int32_t q = 0; q < NN_HW; q++)
                    xn[((int64_t)b * NN_HW + q) * C + c] = x[((int64_t)b * C + c) * NN_HW + q];
        be->pool_fwd(be, x, B, C, ref);
        be->pool_fwd_native(be, xn, B, C, y);
        t_compare("pool_fwd_native == pool_fwd", y, ref, (int64_t)B * 2 * C, 0, 0);
        be->chan_bias_fwd(be, x, bias, B, C, yb);
        be->chan_bias_fwd_native(be, xn, bias, B, C, yn);
        bad = 0;
        for (int32_t b = 0; b < B; b++)
            for (int32_t c = 0; c < C; c++)
                for (int32_t q = 0; q < NN_HW; q++)
                    bad += yn[((int64_t)b * NN_HW + q) * C + c] != yb[((int64_t)b * C + c) * NN_HW + q];
        CHECKF(bad == 0, "chan_bias_fwd_native: %lld values differ from chan_bias_fwd", (long long)bad);
        free(xn), free(yn);
    }
    free(x), free(y), free(ref), free(w), free(dx), free(bias), free(yb), free(db);
}

/* A random batch of B packed positions and hands for cfg. */
static void rand_inputs(const nn_net_config_t *cfg, int32_t B, uint8_t **packed, float **hand) {
    size_t pb = (size_t)nn_packed_bytes(cfg->in_planes) * (size_t)B;
    *packed = malloc(pb);
    for (size_t i = 0; i < pb; i++) (*packed)[i] = (uint8_t)(t_next() & 0xFF);
    *hand = malloc(sizeof(float) * (size_t)(B * cfg->in_hand + 1));
    for (int32_t i = 0; i < B * cfg->in_hand; i++) (*hand)[i] = (float)(t_next() % 4);
}

/* Logits of net for the batch (policy, value, legal concatenated). */
static float *forward_all(nn_net_t *net, nn_backend_t *be, int32_t B, const uint8_t *packed, const float *hand) {
    char err[256];
    nn_ctx_t *ctx = nn_ctx_new(net, be, B, err, sizeof err);
    KOMA_ASSERT(ctx);
    float *o = malloc(sizeof(float) * (size_t)B * (2 * NN_POLICY_NB + NN_VALUE_NB));
    KOMA_ASSERT(nn_forward(ctx, B, packed, hand, o, o + (size_t)B * NN_POLICY_NB,
                           o + (size_t)B * (NN_POLICY_NB + NN_VALUE_NB)) == 0);
    nn_ctx_free(ctx);
    return o;
}

/* Trains a few steps so the BN statistics and the pooling dense are not their initial values. */
static void train_some(nn_net_t *net, int32_t steps) {
    char err[256];
    nn_train_config_t tc = nn_train_config_default();
    tc.warmup_steps = 0, tc.lr = 0.05f, tc.bn_momentum = 0.5f;
    nn_optim_t *tr = nn_optim_new(net, &tc, 4, err, sizeof err);
    KOMA_ASSERT(tr);
    const nn_net_config_t *cfg = nn_net_config(net);
    nn_metrics_t m0 = {0}, m = {0};
    for (int32_t s = 0; s < steps; s++) {
        t_batch_t tb;
        t_batch_init(&tb, 4, cfg->in_planes, cfg->in_hand, 3);
        KOMA_ASSERT(nn_train_step(tr, &tb.b, s ? &m : &m0, err, sizeof err) == 0);
        if (s == steps - 1) { /* the inference forward inside the trainer's arena */
            nn_metrics_t e;
            CHECKF(nn_eval_batch(tr, &tb.b, &e, err, sizeof err) == 0 && isfinite(e.loss), "nn_eval_batch: %s", err);
        }
        t_batch_free(&tb);
    }
    CHECKF(isfinite(m.loss), "training a global-pooling net: loss %g", m.loss);
    nn_optim_free(tr);
}

static void test_routes(nn_act_t act) {
    char err[256];
    nn_backend_t *ref = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, err, sizeof err);
    KOMA_ASSERT(ref);
    nn_net_config_t cfg = {.blocks = 3, .channels = 16, .act = act, .in_planes = 7, .in_hand = 2,
                           .features_version = 1, .gpool = 2};
    nn_net_t *net = nn_net_new(ref, &cfg, 5, err, sizeof err);
    KOMA_ASSERT(net);
    train_some(net, 3);
    int32_t B = 5;
    uint8_t *packed;
    float *hand;
    rand_inputs(&cfg, B, &packed, &hand);
    float *want = forward_all(net, ref, B, packed, hand);
    int64_t no = (int64_t)B * (2 * NN_POLICY_NB + NN_VALUE_NB);
    const nn_cpu_conv_t routes[2] = {NN_CPU_CONV_DNNL, NN_CPU_CONV_WINO};
    for (int r = 0; r < 2; r++) {
        nn_backend_t *be = nn_backend_cpu_new_conv(1, routes[r], err, sizeof err);
        if (!be) {
            fprintf(stderr, "  (route %d not built: %s)\n", (int)routes[r], err);
            continue;
        }
        nn_net_t *n2 = nn_net_new(be, &cfg, 99, err, sizeof err);
        KOMA_ASSERT(n2 && nn_net_copy_weights(n2, net, err, sizeof err) == 0);
        float *got = forward_all(n2, be, B, packed, hand);
        char what[96];
        snprintf(what, sizeof what, "3x16g2 %s forward, %s route", nn_act_name(act), nn_backend_cpu_conv_route(be));
        t_compare(what, got, want, no, 2e-4, 2e-3);
        free(got);
        nn_net_free(n2);
        nn_backend_free(be);
    }
    /* The same weights with the pooling dense at zero: the plain net's outputs. */
    nn_net_config_t pc = cfg;
    pc.gpool = 0;
    nn_net_t *plain = nn_net_new(ref, &pc, 6, err, sizeof err);
    KOMA_ASSERT(plain);
    int32_t copied = 0;
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        float *d = nn_net_tensor_data(net, i);
        if (strstr(t->name, ".gpool.")) {
            memset(d, 0, sizeof(float) * (size_t)t->numel); /* CPU backend: host memory */
            continue;
        }
        int32_t j = nn_net_tensor_find(plain, t->name);
        KOMA_ASSERT(j >= 0);
        memcpy(nn_net_tensor_data(plain, j), d, sizeof(float) * (size_t)t->numel);
        copied++;
    }
    CHECK(copied == nn_net_tensor_count(plain) && nn_net_tensor_count(net) == copied + 2);
    nn_net_mark_dirty(net);
    nn_net_mark_dirty(plain);
    float *g0 = forward_all(net, ref, B, packed, hand), *p0 = forward_all(plain, ref, B, packed, hand);
    t_compare("zero pooling dense == the plain net", g0, p0, no, 1e-6, 1e-6);
    int64_t differ = 0;
    for (int64_t i = 0; i < no; i++) differ += g0[i] != want[i];
    CHECKF(differ > no / 2, "the trained pooling dense changes the outputs (%lld of %lld differ)", (long long)differ,
           (long long)no);
    free(g0), free(p0), free(want), free(packed), free(hand);
    nn_net_free(plain);
    nn_net_free(net);
    nn_backend_free(ref);
}

static void test_weights(nn_backend_t *be) {
    char err[512], path[700], path2[700];
    t_scratch("nn_gpool");
    snprintf(path, sizeof path, "%s/g.safetensors", t_dir);
    snprintf(path2, sizeof path2, "%s/p.safetensors", t_dir);
    nn_net_config_t cfg = {.blocks = 2, .channels = 8, .act = NN_ACT_SILU, .in_planes = 7, .in_hand = 2,
                           .features_version = 3, .gpool = 2};
    nn_net_t *net = nn_net_new(be, &cfg, 11, err, sizeof err);
    KOMA_ASSERT(net);
    train_some(net, 2);
    CHECKF(nn_weights_save(net, NULL, path, err, sizeof err) == 0, "save: %s", err);
    st_file_t *f = st_open(path, 0, err, sizeof err);
    KOMA_ASSERT(f);
    const char *arch = st_meta(f, "koma.net");
    CHECKF(arch && strcmp(arch, "2x8g2") == 0, "koma.net of a global-pooling net: %s", arch ? arch : "(none)");
    CHECK(st_find(f, "blocks.1.gpool.weight") && st_find(f, "blocks.1.gpool.bias") && !st_find(f, "blocks.0.gpool.weight"));
    st_close(f);
    nn_net_config_t peek;
    CHECK(nn_weights_peek(path, &peek, err, sizeof err) == 0 && peek.gpool == 2 && peek.blocks == 2);
    nn_net_t *back = nn_weights_load(be, path, 3, err, sizeof err);
    CHECKF(back != NULL, "load: %s", err);
    if (back) {
        CHECK(nn_net_config(back)->gpool == 2);
        uint8_t *packed;
        float *hand;
        rand_inputs(&cfg, 3, &packed, &hand);
        float *a = forward_all(net, be, 3, packed, hand), *b = forward_all(back, be, 3, packed, hand);
        CHECKF(memcmp(a, b, sizeof(float) * 3 * (2 * NN_POLICY_NB + NN_VALUE_NB)) == 0,
               "a loaded global-pooling net plays bit for bit as the saved one");
        free(a), free(b), free(packed), free(hand);
        nn_net_free(back);
    }
    /* a plain net: koma.net as before ("2x8"); a plain net refuses the pooling file by name */
    nn_net_config_t pc = cfg;
    pc.gpool = 0;
    nn_net_t *plain = nn_net_new(be, &pc, 11, err, sizeof err);
    KOMA_ASSERT(plain);
    CHECK(nn_weights_save(plain, NULL, path2, err, sizeof err) == 0);
    f = st_open(path2, 0, err, sizeof err);
    KOMA_ASSERT(f);
    arch = st_meta(f, "koma.net");
    CHECKF(arch && strcmp(arch, "2x8") == 0, "koma.net of a plain net: %s", arch ? arch : "(none)");
    st_close(f);
    CHECK(nn_weights_read(plain, NULL, path, err, sizeof err) != 0);
    CHECKF(strstr(err, "2x8g2") && strstr(err, "expected 2x8"), "read into a plain net: %s", err);
    nn_net_free(plain);
    nn_net_free(net);
    t_rm_rf(t_dir);
}

static void test_no_ops(nn_backend_t *be) {
    nn_backend_t bare = *be; /* the same instance without the pooling ops */
    bare.pool_fwd = NULL;
    char err[512] = "";
    nn_net_config_t cfg = {.blocks = 2, .channels = 8, .act = NN_ACT_RELU, .in_planes = 7, .in_hand = 2,
                           .features_version = 1, .gpool = 1};
    nn_net_t *net = nn_net_new(&bare, &cfg, 1, err, sizeof err);
    CHECKF(!net && strstr(err, "no global pooling") && strstr(err, "2x8g1"), "a backend without pooling: %s", err);
    nn_net_free(net);
    cfg.gpool = 3; /* more than the blocks */
    net = nn_net_new(be, &cfg, 1, err, sizeof err);
    CHECKF(!net && strstr(err, "gpool 3"), "gpool > blocks: %s", err);
    nn_net_free(net);
}

int main(void) {
    nn_backend_t *be = nn_backend_cpu_new(1);
    test_arch_string();
    test_ops(be);
    test_routes(NN_ACT_RELU);
    test_routes(NN_ACT_SILU);
    test_weights(be);
    test_no_ops(be);
    nn_backend_free(be);
    return t_done("test_nn_gpool");
}
