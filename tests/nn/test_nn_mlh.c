/* test_nn_mlh.c - the optional heads of issue 33 item 3 on the CPU backend:
 *  - architecture strings with head suffixes ("4x32m", "6x64g2mo") parse,
 *    format and compare; malformed ones are refused;
 *  - a net with heads holds the plain net's tensors with the same random
 *    weights (the heads' tensors are appended) and gives the same policy,
 *    value and legal outputs, bit for bit;
 *  - nn_forward_out's moves_left: plies >= 0, NN_ML_SCALE * max(raw, 0)
 *    exactly for a head whose output is a known bias, the same on every CPU
 *    convolution route (reference, oneDNN, Winograd) and for any batch split;
 *  - asking a net without the head for moves_left is an error;
 *  - training: finite-difference gradients of every parameter tensor under
 *    the moves-left loss alone, the opponent-reply loss alone and all five
 *    losses (relu and silu, merged and apart head convolutions), rows
 *    without targets adding nothing; the metrics (Huber loss, MAE in plies,
 *    opponent cross-entropy) against a host computation; a batch without the
 *    heads' columns trains the heads not at all; overfitting a small batch
 *    drives the moves-left MAE down;
 *  - files: a net with heads saved and loaded gives the same outputs (its
 *    koma.net names the heads); the net that ships with Koma (a file from
 *    before the heads) loads with heads 0 and plays; a file whose tensors
 *    and koma.net disagree (a head's tensors under a plain name, a head
 *    named without its tensors) is refused with a message naming the file;
 *    nn_weights_read refuses a file of another head set. */
#include "nn_test.h"

#include "nn/safetensors.h"
#include "nn/weights.h"

static void arch_strings(void) {
    nn_net_config_t c = {0};
    char buf[48];
    CHECK(nn_net_arch_parse("4x32m", &c) == 0 && c.blocks == 4 && c.channels == 32 && c.gpool == 0 &&
          c.heads == NN_HEAD_MOVES_LEFT);
    CHECK(strcmp(nn_net_arch_format(&c, buf, sizeof buf), "4x32m") == 0 && nn_net_arch_is("4x32m", &c) &&
          !nn_net_arch_is("4x32", &c));
    CHECK(nn_net_arch_parse("6x64g2mo", &c) == 0 && c.gpool == 2 && c.heads == (NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY));
    CHECK(strcmp(nn_net_arch_format(&c, buf, sizeof buf), "6x64g2mo") == 0);
    CHECK(nn_net_arch_parse("6x64o", &c) == 0 && c.heads == NN_HEAD_OPP_POLICY && c.gpool == 0);
    CHECK(strcmp(nn_net_arch_format(&c, buf, sizeof buf), "6x64o") == 0);
    CHECK(nn_net_arch_parse("6x64", &c) == 0 && c.heads == 0);
    static const char *bad[] = {"4x32om", "4x32mm", "4x32q", "4x32m1", "4xm", "4x32gm", "m4x32", "4x32oo", "4x32 m"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nn_net_config_t d = {.blocks = 9, .channels = 9, .heads = 0};
        CHECKF(nn_net_arch_parse(bad[i], &d) == -1 && d.blocks == 9 && d.heads == 0, "'%s' accepted", bad[i]);
    }
    int32_t b, ch;
    CHECK(nn_net_size_parse("6x64g2mo", &b, &ch) == 0 && b == 6 && ch == 64);
}

static int32_t find(nn_net_t *net, const char *name) {
    int32_t i = nn_net_tensor_find(net, name);
    KOMA_ASSERT(i >= 0);
    return i;
}

static void same_trunk(nn_backend_t *be) {
    nn_net_config_t plain = {.blocks = 2, .channels = 16, .act = NN_ACT_RELU, .in_planes = 7, .in_hand = 3,
                             .features_version = 1};
    nn_net_config_t heads = plain;
    heads.heads = NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY;
    char err[256];
    nn_net_t *a = nn_net_new(be, &plain, 5, err, sizeof err), *h = nn_net_new(be, &heads, 5, err, sizeof err);
    KOMA_ASSERT(a && h);
    CHECK(nn_net_tensor_count(h) == nn_net_tensor_count(a) + 5 + 4 + 2);
    int same = 1;
    for (int32_t i = 0; i < nn_net_tensor_count(a); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(a, i);
        int32_t j = find(h, t->name);
        same &= j == i && !memcmp(nn_net_tensor_data(a, i), nn_net_tensor_data(h, j), sizeof(float) * (size_t)t->numel);
    }
    CHECKF(same, "the plain net's tensors differ in the net with heads");
    const nn_tensor_info_t *f1 = nn_net_tensor(h, find(h, "moves_left.fc1.weight"));
    const nn_tensor_info_t *o = nn_net_tensor(h, find(h, "opp_policy.out.weight"));
    CHECK(f1->shape[0] == NN_ML_HIDDEN && f1->shape[1] == NN_ML_CH * NN_HW && o->shape[0] == NN_POLICY_CH &&
          o->shape[1] == 16 && nn_net_tensor_find(h, "moves_left.bn.running_var") >= 0 &&
          nn_net_tensor_find(a, "moves_left.fc2.bias") < 0);
    int32_t B = 5;
    t_batch_t tb;
    t_batch_init(&tb, B, plain.in_planes, plain.in_hand, 3);
    nn_ctx_t *ca = nn_ctx_new(a, NULL, B, err, sizeof err), *ch = nn_ctx_new(h, NULL, B, err, sizeof err);
    KOMA_ASSERT(ca && ch);
    int64_t NP = (int64_t)B * NN_POLICY_NB;
    float *p[2], *l[2], v[2][15], ml[8];
    for (int k = 0; k < 2; k++) p[k] = malloc(sizeof(float) * NP), l[k] = malloc(sizeof(float) * NP);
    CHECK(nn_forward(ca, B, tb.planes, tb.hand, p[0], v[0], l[0]) == 0);
    nn_outputs_t out = {p[1], v[1], l[1], ml};
    CHECK(nn_forward_out(ch, B, tb.planes, tb.hand, &out) == 0);
    CHECKF(!memcmp(p[0], p[1], sizeof(float) * NP) && !memcmp(v[0], v[1], sizeof v[0]) &&
               !memcmp(l[0], l[1], sizeof(float) * NP),
           "policy, value or legal outputs differ with the heads");
    int ok = 1;
    for (int32_t b = 0; b < B; b++) ok &= isfinite(ml[b]) && ml[b] >= 0.0f;
    CHECKF(ok, "moves_left not finite plies >= 0");
    /* a net without the head: moves_left is a bad argument, nothing computed */
    nn_outputs_t bad = {NULL, NULL, NULL, ml};
    CHECK(nn_forward_out(ca, B, tb.planes, tb.hand, &bad) == -1);
    CHECK(nn_ctx_moves_left(ca) == NULL && nn_ctx_moves_left(ch) != NULL);
    CHECK(nn_forward_dev(ca, B, NULL, NULL, NN_OUT_MOVES_LEFT) == -1);
    /* the head's output a known bias: fc2's weights zero */
    float *w2 = nn_net_tensor_data(h, find(h, "moves_left.fc2.weight")), *b2 = nn_net_tensor_data(h, find(h, "moves_left.fc2.bias"));
    memset(w2, 0, sizeof(float) * NN_ML_HIDDEN);
    const float bias[3] = {1.5f, -0.25f, 0.0f}, want[3] = {30.0f, 0.0f, 0.0f};
    for (int k = 0; k < 3; k++) {
        *b2 = bias[k];
        nn_net_mark_dirty(h);
        nn_outputs_t only = {NULL, NULL, NULL, ml};
        CHECK(nn_forward_out(ch, B, tb.planes, tb.hand, &only) == 0);
        int exact = 1;
        for (int32_t b = 0; b < B; b++) exact &= ml[b] == want[k];
        CHECKF(exact && nn_moves_left_plies(bias[k]) == want[k], "raw %g: plies %g, expected %g", bias[k], ml[0],
               want[k]);
    }
    for (int k = 0; k < 2; k++) free(p[k]), free(l[k]);
    nn_ctx_free(ca);
    nn_ctx_free(ch);
    t_batch_free(&tb);
    nn_net_free(a);
    nn_net_free(h);
}

/* The moves-left output of one net on every CPU convolution route, relu and
 * silu, with global pooling, whole batch and one position at a time. */
static void routes(nn_act_t act) {
    nn_net_config_t cfg = {.blocks = 2, .channels = 32, .act = act, .in_planes = 7, .in_hand = 3, .features_version = 1,
                           .gpool = 2, .heads = NN_HEAD_MOVES_LEFT};
    const nn_cpu_conv_t conv[3] = {NN_CPU_CONV_REF, NN_CPU_CONV_DNNL, NN_CPU_CONV_WINO};
    const char *names[3] = {"ref", "dnnl", "wino"};
    int32_t B = 6;
    t_batch_t tb;
    t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 2);
    float ref[6], got[6], one[6], spread = 0;
    char err[256], w[96];
    for (int r = 0; r < 3; r++) {
        nn_backend_t *be = nn_backend_cpu_new_conv(1, conv[r], err, sizeof err);
        if (!be) { /* oneDNN not built */
            fprintf(stderr, "-- %s: %s (skipped)\n", names[r], err);
            continue;
        }
        nn_net_t *net = nn_net_new(be, &cfg, 17, err, sizeof err);
        KOMA_ASSERT(net);
        /* a bias that keeps the outputs above the clamp: the comparison sees the head */
        *nn_net_tensor_data(net, find(net, "moves_left.fc2.bias")) = 2.0f;
        nn_net_mark_dirty(net);
        nn_ctx_t *ctx = nn_ctx_new(net, NULL, B, err, sizeof err);
        KOMA_ASSERT(ctx);
        nn_outputs_t out = {NULL, NULL, NULL, r ? got : ref};
        CHECK(nn_forward_out(ctx, B, tb.planes, tb.hand, &out) == 0);
        int64_t bpp = nn_packed_bytes(cfg.in_planes);
        for (int32_t b = 0; b < B; b++) {
            nn_outputs_t o1 = {NULL, NULL, NULL, one + b};
            CHECK(nn_forward_out(ctx, 1, tb.planes + b * bpp, tb.hand + b * cfg.in_hand, &o1) == 0);
        }
        snprintf(w, sizeof w, "%s %s one at a time", names[r], nn_act_name(act));
        t_compare(w, one, r ? got : ref, B, 1e-4, 1e-4);
        if (r) {
            snprintf(w, sizeof w, "%s %s vs ref moves_left", names[r], nn_act_name(act));
            t_compare(w, got, ref, B, 1e-3, 1e-4);
        } else {
            for (int32_t b = 1; b < B; b++) spread = fmaxf(spread, fabsf(ref[b] - ref[0]));
        }
        nn_ctx_free(ctx);
        nn_net_free(net);
        nn_backend_free(be);
    }
    CHECKF(spread > 1e-3f, "moves_left is the same for every position (%g): the head does not see the board", spread);
    t_batch_free(&tb);
}

/* The opponent-reply and moves-left targets of a test batch: row b's reply
 * target 1..3 labels (none for every third row), plies in [0, 150) (none,
 * -1, for every fourth row). */
typedef struct {
    uint32_t off[17];
    uint16_t labels[48];
    float probs[48], ml[16];
} t_heads_t;

static void heads_init(t_heads_t *h, t_batch_t *tb) {
    int32_t B = tb->b.B;
    KOMA_ASSERT(B <= 16);
    h->off[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        uint32_t o = h->off[b], k = b % 3 == 1 ? 0 : 1 + (uint32_t)(t_next() % 3);
        double sum = 0;
        for (uint32_t j = 0; j < k; j++) {
            h->labels[o + j] = (uint16_t)((b * 331 + j * 97 + 5) % NN_POLICY_NB);
            h->probs[o + j] = (float)(0.2 + t_unif());
            sum += h->probs[o + j];
        }
        for (uint32_t j = 0; j < k; j++) h->probs[o + j] = (float)(h->probs[o + j] / sum);
        h->off[b + 1] = o + k;
        h->ml[b] = b % 4 == 2 ? -1.0f : (float)(t_next() % 150);
    }
    tb->b.moves_left = h->ml;
    tb->b.opp_offsets = h->off;
    tb->b.opp_label = h->labels;
    tb->b.opp_prob = h->probs;
}

typedef struct {
    nn_optim_t *tr;
    const nn_batch_t *batch;
} fd_ctx_t;

static double fd_loss(void *p) {
    fd_ctx_t *c = p;
    nn_metrics_t m;
    char err[256];
    if (nn_train_grad(c->tr, c->batch, &m, err, sizeof err) != 0) {
        fprintf(stderr, "nn_train_grad: %s\n", err);
        exit(1);
    }
    return m.loss;
}

static void fd_heads(nn_act_t act, int merged, float wp, float wml, float wopp) {
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t cfg = {.blocks = 1, .channels = 6, .act = act, .in_planes = 5, .in_hand = 2, .features_version = 1,
                           .heads = NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY};
    char err[256];
    nn_net_t *net = nn_net_new(be, &cfg, 7, err, sizeof err);
    KOMA_ASSERT(net);
    nn_net_set_merge_heads(net, merged);
    /* a moves-left output near the targets' scale: residuals on both sides of the Huber delta */
    *nn_net_tensor_data(net, find(net, "moves_left.fc2.bias")) = 3.0f;
    nn_train_config_t tc = nn_train_config_default();
    tc.w_policy = wp, tc.w_value = wp, tc.w_legal = wp, tc.w_moves_left = wml, tc.w_opp_policy = wopp;
    tc.q_mix = 0.3f;
    int32_t B = 4;
    nn_optim_t *tr = nn_optim_new(net, &tc, B, err, sizeof err);
    KOMA_ASSERT(tr);
    t_batch_t tb;
    t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 4);
    t_heads_t hd;
    heads_init(&hd, &tb);
    nn_metrics_t m;
    KOMA_ASSERT(nn_train_grad(tr, &tb.b, &m, err, sizeof err) == 0);
    fprintf(stderr, "-- heads fd %s %s, w p/v/l %.0f ml %.1f opp %.1f: loss %.5f ml %.4f (mae %.2f, %d rows) opp %.4f (%d rows)\n",
            nn_act_name(act), merged ? "merged" : "apart", wp, wml, wopp, m.loss, m.moves_left_loss, m.moves_left_mae,
            m.moves_left_positions, m.opp_policy_loss, m.opp_positions);
    CHECK(m.moves_left_positions == 3 && m.opp_positions == 3);
    int64_t np;
    float *params = nn_net_params(net, &np, NULL);
    float *grads = malloc(sizeof(float) * (size_t)np);
    memcpy(grads, nn_optim_grads(tr), sizeof(float) * (size_t)np);
    fd_ctx_t c = {tr, &tb.b};
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        if (t->kind != NN_TENSOR_PARAM) continue;
        char what[96];
        snprintf(what, sizeof what, "fd %s", t->name);
        int64_t nonzero = 0;
        for (int64_t j = 0; j < t->numel; j++) nonzero += grads[t->offset + j] != 0.0f;
        int ml_t = strncmp(t->name, "moves_left.", 11) == 0, opp_t = strncmp(t->name, "opp_policy.", 11) == 0;
        if ((ml_t && wml > 0) || (opp_t && wopp > 0))
            CHECKF(nonzero > 0, "%s: no gradient under its own loss", t->name);
        if ((ml_t && wml == 0) || (opp_t && wopp == 0))
            CHECKF(nonzero == 0, "%s: a gradient without its loss", t->name);
        /* ReLU: the heads' dense and output layers (the others, behind
         * hundreds of ReLU kinks at this step size, are checked under SiLU:
         * the same code but for the activation) */
        if (act == NN_ACT_RELU && !((ml_t || opp_t || !strncmp(t->name, "policy.", 7)) &&
                                    (strstr(t->name, ".fc") || strstr(t->name, ".out."))))
            continue;
        t_fd_check(what, params + t->offset, t->numel, grads + t->offset, fd_loss, &c, 1e-2, 3e-4, 3e-2, 6, 0.05);
    }
    free(grads);
    t_batch_free(&tb);
    nn_optim_free(tr);
    nn_net_free(net);
    nn_backend_free(be);
}

/* The metrics against a host computation from the forward outputs, and a
 * batch without the heads' columns: no gradient into their output layers. */
static void metrics_and_absent(void) {
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t cfg = {.blocks = 1, .channels = 8, .act = NN_ACT_RELU, .in_planes = 5, .in_hand = 2,
                           .features_version = 1, .heads = NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY};
    char err[256];
    nn_net_t *net = nn_net_new(be, &cfg, 9, err, sizeof err);
    KOMA_ASSERT(net);
    float *w2 = nn_net_tensor_data(net, find(net, "moves_left.fc2.weight"));
    memset(w2, 0, sizeof(float) * NN_ML_HIDDEN);
    *nn_net_tensor_data(net, find(net, "moves_left.fc2.bias")) = 2.0f; /* 40 plies for every position */
    nn_train_config_t tc = nn_train_config_default();
    int32_t B = 8;
    nn_optim_t *tr = nn_optim_new(net, &tc, B, err, sizeof err);
    KOMA_ASSERT(tr);
    t_batch_t tb;
    t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 3);
    t_heads_t hd;
    heads_init(&hd, &tb);
    nn_metrics_t m, e;
    CHECK(nn_train_grad(tr, &tb.b, &m, err, sizeof err) == 0 && nn_eval_batch(tr, &tb.b, &e, err, sizeof err) == 0);
    double loss = 0, mae = 0;
    int32_t n = 0;
    for (int32_t b = 0; b < B; b++) {
        if (hd.ml[b] < 0) continue;
        double r = 2.0 - hd.ml[b] / 20.0, a = fabs(r);
        loss += a <= 0.5 ? 0.5 * r * r : 0.5 * (a - 0.25);
        mae += fabs(40.0 - hd.ml[b]);
        n++;
    }
    CHECK(m.moves_left_positions == n && e.moves_left_positions == n);
    CHECK_NEAR(m.moves_left_loss, loss / n, 1e-5);
    CHECK_NEAR(m.moves_left_mae, mae / n, 1e-3);
    CHECK_NEAR(e.moves_left_loss, loss / n, 1e-5);
    CHECKF(isfinite(m.opp_policy_loss) && m.opp_policy_loss > 0 && fabs(e.opp_policy_loss - m.opp_policy_loss) <
           0.5 * m.opp_policy_loss, "opp loss %g (eval %g)", m.opp_policy_loss, e.opp_policy_loss);
    double l_with = m.loss;
    /* no columns: the heads' output layers get no gradient, their metrics are NAN, the objective drops them */
    tb.b.moves_left = NULL, tb.b.opp_offsets = NULL, tb.b.opp_label = NULL, tb.b.opp_prob = NULL;
    CHECK(nn_train_grad(tr, &tb.b, &m, err, sizeof err) == 0);
    CHECK(isnan(m.moves_left_loss) && isnan(m.opp_policy_loss) && m.moves_left_positions == 0 && m.opp_positions == 0);
    CHECK(m.loss < l_with);
    const float *g = nn_optim_grads(tr);
    const char *outs[4] = {"moves_left.fc2.bias", "moves_left.fc1.weight", "opp_policy.out.weight", "opp_policy.out.bias"};
    for (int k = 0; k < 4; k++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, find(net, outs[k]));
        int zero = 1;
        for (int64_t j = 0; j < t->numel; j++) zero &= g[t->offset + j] == 0.0f;
        CHECKF(zero, "%s has a gradient without targets", outs[k]);
    }
    /* a bad opponent label is refused */
    heads_init(&hd, &tb);
    hd.labels[0] = NN_POLICY_NB;
    CHECK(nn_train_grad(tr, &tb.b, &m, err, sizeof err) == -1 && strstr(err, "opp_label"));
    t_batch_free(&tb);
    nn_optim_free(tr);
    nn_net_free(net);
    nn_backend_free(be);
}

/* Overfitting a small batch: the moves-left MAE falls well below the spread
 * of the targets, and the opponent loss falls (a sanitizer job,
 * KOMA_TEST_SCALE, runs its share of the 300 steps and asserts neither). */
static void overfit(void) {
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t cfg = {.blocks = 2, .channels = 16, .act = NN_ACT_RELU, .in_planes = 8, .in_hand = 2,
                           .features_version = 1, .heads = NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY};
    char err[256];
    nn_net_t *net = nn_net_new(be, &cfg, 11, err, sizeof err);
    KOMA_ASSERT(net);
    nn_train_config_t tc = nn_train_config_default();
    tc.lr = 0.05f, tc.warmup_steps = 10, tc.schedule = NN_SCHED_CONSTANT, tc.w_opp_policy = 1.0f;
    int32_t B = 16;
    nn_optim_t *tr = nn_optim_new(net, &tc, B, err, sizeof err);
    KOMA_ASSERT(tr);
    t_batch_t tb;
    t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 2);
    t_heads_t hd;
    heads_init(&hd, &tb);
    nn_metrics_t m0, m;
    CHECK(nn_train_step(tr, &tb.b, &m0, err, sizeof err) == 0);
    int steps = t_scaled(300, 20);
    for (int s = 0; s < steps; s++) CHECK(nn_train_step(tr, &tb.b, &m, err, sizeof err) == 0);
    fprintf(stderr, "-- overfit: moves-left MAE %.1f -> %.1f plies, opp loss %.3f -> %.3f\n", m0.moves_left_mae,
            m.moves_left_mae, m0.opp_policy_loss, m.opp_policy_loss);
    if (t_full()) {
        CHECK(m.moves_left_mae < 0.3 * m0.moves_left_mae && m.moves_left_mae < 15.0);
        CHECK(m.opp_policy_loss < 0.5 * m0.opp_policy_loss);
    }
    t_batch_free(&tb);
    nn_optim_free(tr);
    nn_net_free(net);
    nn_backend_free(be);
}

/* path's tensors rewritten into out with koma.net = arch (the other metadata kept). */
static void rewrite_arch(const char *path, const char *out, const char *arch, const char *drop_prefix) {
    char err[512];
    st_file_t *f = st_open(path, 0, err, sizeof err);
    KOMA_ASSERT(f);
    st_writer_t *w = st_writer_new();
    for (int32_t i = 0; i < st_count(f); i++) {
        const st_tensor_t *t = st_at(f, i);
        if (drop_prefix && strncmp(t->name, drop_prefix, strlen(drop_prefix)) == 0) continue;
        KOMA_ASSERT(st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data) == 0);
    }
    static const char *keys[] = {"koma.kind", "koma.version", "koma.activation", "koma.features_version",
                                 "koma.in_planes", "koma.in_hand"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (st_meta(f, keys[k])) KOMA_ASSERT(st_writer_meta(w, keys[k], st_meta(f, keys[k])) == 0);
    KOMA_ASSERT(st_writer_meta(w, "koma.net", arch) == 0);
    KOMA_ASSERT(st_writer_write(w, out, err, sizeof err) == 0);
    st_writer_free(w);
    st_close(f);
}

static void files(void) {
    nn_backend_t *be = nn_backend_cpu_new(1);
    t_scratch("nn_mlh");
    nn_net_config_t cfg = {.blocks = 2, .channels = 16, .act = NN_ACT_SILU, .in_planes = 7, .in_hand = 3,
                           .features_version = 1, .gpool = 2, .heads = NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY};
    char err[512], path[700], bad[700], a[48];
    nn_net_t *net = nn_net_new(be, &cfg, 21, err, sizeof err);
    KOMA_ASSERT(net);
    *nn_net_tensor_data(net, find(net, "moves_left.fc2.bias")) = 1.0f;
    snprintf(path, sizeof path, "%s/heads.safetensors", t_dir);
    CHECK(nn_weights_save(net, NULL, path, err, sizeof err) == 0);
    nn_net_t *back = nn_weights_load(be, path, -1, err, sizeof err);
    CHECKF(back != NULL, "%s", err);
    if (back) {
        CHECK(nn_net_config(back)->heads == cfg.heads &&
              strcmp(nn_net_arch_format(nn_net_config(back), a, sizeof a), "2x16g2mo") == 0);
        int32_t B = 3;
        t_batch_t tb;
        t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 2);
        nn_ctx_t *c1 = nn_ctx_new(net, NULL, B, err, sizeof err), *c2 = nn_ctx_new(back, NULL, B, err, sizeof err);
        float ml1[3], ml2[3], v1[9], v2[9];
        nn_outputs_t o1 = {NULL, v1, NULL, ml1}, o2 = {NULL, v2, NULL, ml2};
        CHECK(nn_forward_out(c1, B, tb.planes, tb.hand, &o1) == 0 && nn_forward_out(c2, B, tb.planes, tb.hand, &o2) == 0);
        CHECK(!memcmp(ml1, ml2, sizeof ml1) && !memcmp(v1, v2, sizeof v1) && ml1[0] > 0);
        nn_ctx_free(c1), nn_ctx_free(c2);
        t_batch_free(&tb);
    }
    nn_net_free(back);
    /* the heads' tensors under a plain architecture: refused, naming the file and the tensor */
    snprintf(bad, sizeof bad, "%s/stray.safetensors", t_dir);
    rewrite_arch(path, bad, "2x16g2", NULL);
    back = nn_weights_load(be, bad, -1, err, sizeof err);
    CHECKF(!back && strstr(err, bad) && strstr(err, "moves_left.") && strstr(err, "2x16g2"), "stray head: %s",
           back ? "loaded" : err);
    nn_net_free(back);
    rewrite_arch(path, bad, "2x16g2m", NULL); /* the opponent head's tensors without its 'o' */
    back = nn_weights_load(be, bad, -1, err, sizeof err);
    CHECKF(!back && strstr(err, bad) && strstr(err, "opp_policy."), "stray opp head: %s", back ? "loaded" : err);
    nn_net_free(back);
    /* a head named without its tensors */
    rewrite_arch(path, bad, "2x16g2mo", "moves_left.");
    back = nn_weights_load(be, bad, -1, err, sizeof err);
    CHECKF(!back && strstr(err, bad) && strstr(err, "moves_left.") && strstr(err, "missing"), "missing head: %s",
           back ? "loaded" : err);
    nn_net_free(back);
    /* nn_weights_read into a net of another head set */
    nn_net_config_t plain = cfg;
    plain.heads = 0;
    nn_net_t *pn = nn_net_new(be, &plain, 1, err, sizeof err);
    KOMA_ASSERT(pn);
    CHECKF(nn_weights_read(pn, NULL, path, err, sizeof err) == -1 && strstr(err, "2x16g2mo"), "read: %s", err);
    nn_net_free(pn);
    /* the shipped net, from before the heads: heads 0, and it plays */
    const char *shipped = "nets/koma-default.safetensors";
    nn_net_config_t sc;
    if (nn_weights_peek(shipped, &sc, err, sizeof err) != 0) {
        fprintf(stderr, "-- %s: %s (run from the source tree)\n", shipped, err);
        CHECK(0);
    } else {
        nn_net_t *old = nn_weights_load(be, shipped, -1, err, sizeof err);
        CHECKF(old != NULL, "%s", err);
        if (old) {
            CHECK(nn_net_config(old)->heads == 0);
            t_batch_t tb;
            t_batch_init(&tb, 2, sc.in_planes, sc.in_hand, 2);
            nn_ctx_t *c = nn_ctx_new(old, NULL, 2, err, sizeof err);
            float *pol = malloc(sizeof(float) * 2 * NN_POLICY_NB), val[6], ml[2];
            CHECK(nn_forward(c, 2, tb.planes, tb.hand, pol, val, NULL) == 0 && isfinite(val[0]) && isfinite(pol[0]));
            nn_outputs_t o = {NULL, NULL, NULL, ml};
            CHECK(nn_forward_out(c, 2, tb.planes, tb.hand, &o) == -1);
            fprintf(stderr, "-- shipped net %s: loads with heads 0 and plays\n",
                    nn_net_arch_format(nn_net_config(old), a, sizeof a));
            free(pol);
            nn_ctx_free(c);
            t_batch_free(&tb);
        }
        nn_net_free(old);
    }
    nn_net_free(net);
    nn_backend_free(be);
    t_rm_rf(t_dir);
}

int main(void) {
    arch_strings();
    nn_backend_t *be = nn_backend_cpu_new(1);
    same_trunk(be);
    nn_backend_free(be);
    routes(NN_ACT_RELU);
    routes(NN_ACT_SILU);
    fd_heads(NN_ACT_RELU, 1, 0.0f, 1.0f, 0.0f);
    fd_heads(NN_ACT_RELU, 1, 0.0f, 0.0f, 1.0f);
    fd_heads(NN_ACT_RELU, 0, 1.0f, 1.0f, 1.0f);
    fd_heads(NN_ACT_SILU, 1, 1.0f, 1.0f, 1.0f);
    fd_heads(NN_ACT_SILU, 0, 0.0f, 1.0f, 1.0f);
    metrics_and_absent();
    overfit();
    files();
    return t_done("test_nn_mlh");
}
