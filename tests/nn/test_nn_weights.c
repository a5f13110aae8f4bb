/* test_nn_weights.c - weights files: exact round trip, metadata, and every
 * bad file a user can hand us (truncated, corrupt, wrong net, wrong
 * features_version, missing/misshapen tensor, wrong kind, no optimizer
 * state, NaN/Inf values or a negative running variance behind valid
 * checksums), each refused with a message that names the file. Also: optimizer
 * resume is exact (k steps + save + load + m steps == k + m steps). */
#include "nn_test.h"

#include "nn/safetensors.h"
#include "nn/weights.h"

static void expect_fail(const char *what, int failed, const char *err, const char *path, const char *word) {
    fprintf(stderr, "%-28s -> %s\n", what, failed ? err : "(loaded!)");
    CHECK(failed);
    CHECK(strstr(err, path) != NULL);
    if (word && !t_judge(strstr(err, word) != NULL)) fprintf(stderr, "  message lacks '%s'\n", word);
}

static int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

/* Writes net's tensors as a weights file, except `skip`, with tensor
 * `reshape` given a wrong shape, and metadata key `drop_meta` left out /
 * kind replaced. */
static void write_custom(nn_net_t *net, const char *path, const char *skip, const char *reshape,
                         const char *drop_meta, const char *kind) {
    st_writer_t *w = st_writer_new();
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        if (skip && strcmp(t->name, skip) == 0) continue;
        int64_t shape[4];
        memcpy(shape, t->shape, sizeof(shape));
        if (reshape && strcmp(t->name, reshape) == 0) {
            int64_t s0 = shape[0];
            shape[0] = shape[1];
            shape[1] = s0;
        }
        KOMA_ASSERT(st_writer_add(w, t->name, ST_DTYPE_F32, t->ndim, shape, nn_net_tensor_data(net, i)) == 0);
    }
    const char *meta[][2] = {{"koma.kind", kind ? kind : "weights"}, {"koma.version", "1"}, {"koma.net", "2x16"},
                             {"koma.activation", "silu"}, {"koma.features_version", "3"}, {"koma.in_planes", "7"},
                             {"koma.in_hand", "3"}};
    for (int i = 0; i < 7; i++)
        if (!drop_meta || strcmp(meta[i][0], drop_meta) != 0) st_writer_meta(w, meta[i][0], meta[i][1]);
    char err[512];
    KOMA_ASSERT(st_writer_write(w, path, err, sizeof(err)) == 0);
    st_writer_free(w);
}

/* Writes net as a valid weights file (checksums computed over the new bytes)
 * whose tensor `name` holds v at index j: a file only the values betray. */
static void write_poisoned(nn_net_t *net, const char *path, const char *name, int64_t j, float v) {
    st_writer_t *w = st_writer_new();
    float *copy = NULL;
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        const float *src = nn_net_tensor_data(net, i);
        if (strcmp(t->name, name) == 0) {
            KOMA_ASSERT(j < t->numel);
            copy = malloc(sizeof(float) * (size_t)t->numel);
            memcpy(copy, src, sizeof(float) * (size_t)t->numel);
            copy[j] = v;
            src = copy;
        }
        KOMA_ASSERT(st_writer_add(w, t->name, ST_DTYPE_F32, t->ndim, t->shape, src) == 0);
    }
    KOMA_ASSERT(copy != NULL);
    const char *meta[][2] = {{"koma.kind", "weights"}, {"koma.version", "1"}, {"koma.net", "2x16"},
                             {"koma.activation", "silu"}, {"koma.features_version", "3"}, {"koma.in_planes", "7"},
                             {"koma.in_hand", "3"}};
    for (int i = 0; i < 7; i++) st_writer_meta(w, meta[i][0], meta[i][1]);
    char err[512];
    KOMA_ASSERT(st_writer_write(w, path, err, sizeof(err)) == 0);
    st_writer_free(w);
    free(copy);
}

/* A file whose checksums are right but whose values are no net: NaN, +Inf,
 * -Inf, a negative batch-norm running variance. nn_weights_load,
 * nn_weights_read and nn_weights_check refuse it naming the file, the tensor
 * and the index; a negative running mean (legal) loads. */
static void test_bad_values(nn_backend_t *be) {
    char err[1024];
    nn_net_config_t cfg = {.blocks = 2, .channels = 16, .act = NN_ACT_SILU, .in_planes = 7, .in_hand = 3, .features_version = 3};
    nn_net_t *net = nn_net_new(be, &cfg, 1, err, sizeof(err));
    KOMA_ASSERT(net);
    const char *bad = t_path("values.safetensors");
    static const struct {
        const char *tensor;
        int64_t index;
        float value;
        const char *want;
    } cases[] = {
        {"blocks.0.bn1.running_var", 12, NAN, "tensor 'blocks.0.bn1.running_var' holds NaN at index 12"},
        {"value.fc1.weight", 3, INFINITY, "tensor 'value.fc1.weight' holds +Inf at index 3"},
        {"stem.conv.weight", 40, -INFINITY, "tensor 'stem.conv.weight' holds -Inf at index 40"},
        {"blocks.1.bn2.running_var", 2, -0.5f, "tensor 'blocks.1.bn2.running_var' holds -0.5 at index 2: a batch-norm "
                                               "running variance cannot be negative"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        write_poisoned(net, bad, cases[k].tensor, cases[k].index, cases[k].value);
        err[0] = 0;
        expect_fail(cases[k].want, nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, cases[k].want);
        err[0] = 0;
        expect_fail("  nn_weights_check", nn_weights_check(bad, 3, err, sizeof(err)) != 0, err, bad, cases[k].want);
        err[0] = 0;
        expect_fail("  nn_weights_read", nn_weights_read(net, NULL, bad, err, sizeof(err)) != 0, err, bad,
                    cases[k].want);
    }
    /* the controls: a running mean may be negative, a variance may be 0 */
    write_poisoned(net, bad, "blocks.0.bn1.running_mean", 5, -3.0f);
    CHECKF(nn_weights_check(bad, 3, err, sizeof(err)) == 0, "negative running mean refused: %s", err);
    write_poisoned(net, bad, "blocks.0.bn1.running_var", 5, 0.0f);
    nn_net_t *ok = nn_weights_load(be, bad, 3, err, sizeof(err));
    CHECKF(ok != NULL, "zero running variance refused: %s", err);
    CHECKF(nn_weights_check(bad, 3, err, sizeof(err)) == 0, "nn_weights_check: %s", err);
    expect_fail("  check, wrong features_version", nn_weights_check(bad, 4, err, sizeof(err)) != 0, err, bad,
                "features_version");
    nn_net_free(ok);
    compat_remove_file(bad);
    nn_net_free(net);
}

static void test_round_trip_and_errors(nn_backend_t *be) {
    char err[1024];
    nn_net_config_t cfg = {.blocks = 2, .channels = 16, .act = NN_ACT_SILU, .in_planes = 7, .in_hand = 3, .features_version = 3};
    nn_net_t *net = nn_net_new(be, &cfg, 1, err, sizeof(err));
    nn_optim_t *tr = nn_optim_new(net, NULL, 8, err, sizeof(err));
    KOMA_ASSERT(net && tr);
    t_batch_t tb;
    t_batch_init(&tb, 8, cfg.in_planes, cfg.in_hand, 3);
    for (int s = 0; s < 3; s++) KOMA_ASSERT(nn_train_step(tr, &tb.b, NULL, err, sizeof(err)) == 0);
    const char *path = t_path("net.safetensors");
    KOMA_ASSERT(nn_weights_save(net, NULL, path, err, sizeof(err)) == 0);

    nn_net_config_t pc;
    CHECK(nn_weights_peek(path, &pc, err, sizeof(err)) == 0);
    CHECK(pc.blocks == 2 && pc.channels == 16 && pc.act == NN_ACT_SILU && pc.in_planes == 7 && pc.in_hand == 3 &&
          pc.features_version == 3);
    st_file_t *f = st_open(path, ST_OPEN_VERIFY, err, sizeof(err));
    KOMA_ASSERT(f);
    CHECK(strcmp(st_meta(f, "koma.kind"), "weights") == 0);
    CHECK(strcmp(st_meta(f, "koma.net"), "2x16") == 0);
    CHECK(strcmp(st_meta(f, "koma.activation"), "silu") == 0);
    CHECK(strcmp(st_meta(f, "koma.features_version"), "3") == 0);
    CHECK(st_find(f, "blocks.1.bn2.running_var") != NULL);
    CHECK(st_find(f, "opt.step") == NULL);
    st_close(f);

    nn_net_t *net2 = nn_weights_load(be, path, 3, err, sizeof(err));
    KOMA_ASSERT(net2);
    int64_t np, ns;
    float *p1 = nn_net_params(net, &np, NULL), *p2 = nn_net_params(net2, NULL, NULL);
    float *s1 = nn_net_stats(net, &ns), *s2 = nn_net_stats(net2, NULL);
    CHECK(memcmp(p1, p2, sizeof(float) * (size_t)np) == 0);
    CHECK(memcmp(s1, s2, sizeof(float) * (size_t)ns) == 0);
    nn_ctx_t *c1 = nn_ctx_new(net, NULL, 8, err, sizeof(err)), *c2 = nn_ctx_new(net2, NULL, 8, err, sizeof(err));
    float *o1 = malloc(sizeof(float) * 8 * NN_POLICY_NB), *o2 = malloc(sizeof(float) * 8 * NN_POLICY_NB);
    float v1[24], v2[24];
    nn_forward(c1, 8, tb.planes, tb.hand, o1, v1, NULL);
    nn_forward(c2, 8, tb.planes, tb.hand, o2, v2, NULL);
    CHECK(memcmp(o1, o2, sizeof(float) * 8 * NN_POLICY_NB) == 0 && memcmp(v1, v2, sizeof(v1)) == 0);
    fprintf(stderr, "round trip: params, stats and forward outputs identical\n");
    free(o1), free(o2);
    nn_ctx_free(c1), nn_ctx_free(c2);

    /* any features_version when asked for -1 */
    nn_net_t *net3 = nn_weights_load(be, path, -1, err, sizeof(err));
    CHECK(net3 != NULL);
    nn_net_free(net3);

    expect_fail("wrong features_version", nn_weights_load(be, path, 4, err, sizeof(err)) == NULL, err, path,
                "features_version");
    nn_net_config_t small = cfg;
    small.channels = 8;
    nn_net_t *other = nn_net_new(be, &small, 1, err, sizeof(err));
    expect_fail("read into 2x8 net", nn_weights_read(other, NULL, path, err, sizeof(err)) != 0, err, path, "2x16");
    nn_net_free(other);
    small = cfg;
    small.in_planes = 8;
    other = nn_net_new(be, &small, 1, err, sizeof(err));
    expect_fail("read into 8-plane net", nn_weights_read(other, NULL, path, err, sizeof(err)) != 0, err, path, "planes");
    nn_net_free(other);
    small = cfg;
    small.features_version = 2;
    other = nn_net_new(be, &small, 1, err, sizeof(err));
    expect_fail("read into fv 2 net", nn_weights_read(other, NULL, path, err, sizeof(err)) != 0, err, path,
                "features_version");
    nn_net_free(other);
    nn_optim_t *tr2 = nn_optim_new(net2, NULL, 2, err, sizeof(err));
    expect_fail("no optimizer state", nn_weights_read(net2, tr2, path, err, sizeof(err)) != 0, err, path, "optimizer");
    nn_optim_free(tr2);

    size_t len = 0;
    char *bytes = compat_read_file(path, &len, err, sizeof(err));
    KOMA_ASSERT(bytes && len > 1000);
    const char *bad = t_path("bad.safetensors");
    write_bytes(bad, bytes, len - 100);
    expect_fail("truncated", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, NULL);
    write_bytes(bad, bytes, 6);
    expect_fail("6 bytes", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, NULL);
    bytes[len - 5] ^= 0x40; /* inside the last tensor's data */
    write_bytes(bad, bytes, len);
    expect_fail("flipped data byte", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, NULL);
    bytes[len - 5] ^= 0x40;
    bytes[20] ^= 0x01; /* inside the JSON header */
    write_bytes(bad, bytes, len);
    expect_fail("flipped header byte", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, NULL);
    free(bytes);
    write_bytes(bad, "hello, world", 12);
    expect_fail("not safetensors", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, NULL);
    const char *missing = t_path("does-not-exist.safetensors");
    expect_fail("missing file", nn_weights_load(be, missing, 3, err, sizeof(err)) == NULL, err, missing, NULL);

    write_custom(net, bad, "blocks.1.conv2.weight", NULL, NULL, NULL);
    expect_fail("missing tensor", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad,
                "blocks.1.conv2.weight");
    /* a failed read leaves the net as it was */
    float *before = malloc(sizeof(float) * (size_t)np);
    memcpy(before, nn_net_params(net2, NULL, NULL), sizeof(float) * (size_t)np);
    CHECK(nn_weights_read(net2, NULL, bad, err, sizeof(err)) != 0);
    CHECK(memcmp(before, nn_net_params(net2, NULL, NULL), sizeof(float) * (size_t)np) == 0);
    free(before);
    write_custom(net, bad, NULL, "value.fc1.weight", NULL, NULL);
    expect_fail("transposed tensor", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, "value.fc1.weight");
    write_custom(net, bad, NULL, NULL, "koma.net", NULL);
    expect_fail("no koma.net", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, "koma.net");
    write_custom(net, bad, NULL, NULL, "koma.features_version", NULL);
    expect_fail("no features_version", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad,
                "features_version");
    write_custom(net, bad, NULL, NULL, NULL, "shard");
    expect_fail("kind shard", nn_weights_load(be, bad, 3, err, sizeof(err)) == NULL, err, bad, "weights");
    write_custom(net, bad, NULL, NULL, NULL, NULL); /* the control: same writer, nothing wrong */
    nn_net_t *ok = nn_weights_load(be, bad, 3, err, sizeof(err));
    CHECK(ok != NULL);
    nn_net_free(ok);
    compat_remove_file(bad);
    compat_remove_file(path);
    t_batch_free(&tb);
    nn_optim_free(tr);
    nn_net_free(net);
    nn_net_free(net2);
}

static void params_after(nn_backend_t *be, nn_net_t *net, nn_optim_t *tr, t_batch_t *tb, int from, int to) {
    char err[256];
    (void)be;
    (void)net;
    for (int s = from; s < to; s++) KOMA_ASSERT(nn_train_step(tr, &tb[s % 3].b, NULL, err, sizeof(err)) == 0);
}

static void test_resume(nn_backend_t *be) {
    char err[1024];
    nn_net_config_t cfg = {.blocks = 1, .channels = 16, .act = NN_ACT_RELU, .in_planes = 6, .in_hand = 2, .features_version = 9};
    nn_train_config_t tc = nn_train_config_default();
    tc.lr = 0.05f, tc.warmup_steps = 3, tc.total_steps = 20, tc.clip_norm = 1.0f, tc.weight_decay = 1e-3f;
    t_batch_t tb[3];
    for (int i = 0; i < 3; i++) t_batch_init(&tb[i], 6, cfg.in_planes, cfg.in_hand, 3);
    /* uninterrupted: 10 steps */
    nn_net_t *a = nn_net_new(be, &cfg, 5, err, sizeof(err));
    nn_optim_t *ta = nn_optim_new(a, &tc, 6, err, sizeof(err));
    params_after(be, a, ta, tb, 0, 5);
    const char *path = t_path("resume.safetensors");
    KOMA_ASSERT(nn_weights_save(a, ta, path, err, sizeof(err)) == 0);
    params_after(be, a, ta, tb, 5, 10);
    /* resumed: load weights + optimizer state, 5 more steps */
    nn_net_t *b = nn_weights_load(be, path, 9, err, sizeof(err));
    KOMA_ASSERT(b);
    nn_optim_t *tb2 = nn_optim_new(b, &tc, 6, err, sizeof(err));
    KOMA_ASSERT(nn_weights_read(b, tb2, path, err, sizeof(err)) == 0);
    CHECK(nn_optim_step_count(tb2) == 5);
    params_after(be, b, tb2, tb, 5, 10);
    /* fresh optimizer state from the same weights: must differ */
    nn_net_t *c = nn_weights_load(be, path, 9, err, sizeof(err));
    nn_optim_t *tc3 = nn_optim_new(c, &tc, 6, err, sizeof(err));
    params_after(be, c, tc3, tb, 5, 10);

    int64_t np, ns;
    float *pa = nn_net_params(a, &np, NULL), *pb = nn_net_params(b, NULL, NULL), *pc = nn_net_params(c, NULL, NULL);
    float *sa = nn_net_stats(a, &ns), *sb = nn_net_stats(b, NULL);
    CHECK(nn_optim_step_count(ta) == 10 && nn_optim_step_count(tb2) == 10);
    t_compare("resume: params", pb, pa, np, 0, 0);
    t_compare("resume: bn running stats", sb, sa, ns, 0, 0);
    t_compare("resume: momentum", nn_optim_momentum(tb2), nn_optim_momentum(ta), np, 0, 0);
    double d = 0;
    for (int64_t i = 0; i < np; i++) d = fmax(d, fabs(pc[i] - pa[i]));
    fprintf(stderr, "resume without optimizer state differs by %.3g (must be > 0)\n", d);
    CHECK(d > 1e-4);
    compat_remove_file(path);
    for (int i = 0; i < 3; i++) t_batch_free(&tb[i]);
    nn_optim_free(ta), nn_optim_free(tb2), nn_optim_free(tc3);
    nn_net_free(a), nn_net_free(b), nn_net_free(c);
}

int main(void) {
    t_scratch("nn_weights");
    nn_backend_t *be = nn_backend_cpu_new(0);
    test_round_trip_and_errors(be);
    test_bad_values(be);
    test_resume(be);
    nn_backend_free(be);
    t_rm_rf(t_dir);
    return t_done("test_nn_weights");
}
