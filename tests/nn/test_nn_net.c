/* test_nn_net.c - the whole network on the CPU backend: finite-difference
 * gradients of every parameter tensor under each loss and all three together
 * (relu and silu), overfitting a small fixed batch, batch independence of
 * inference, and rejection of malformed batches. Under KOMA_TEST_SCALE (the
 * sanitizer jobs) the finite differences run on the all-losses and pooled
 * nets only, probing 2 of each tensor's 6 elements, and the overfit runs its
 * share of the 400 steps without the learning bounds; every tensor's
 * gradient code and every other check still runs. */
#include "nn_test.h"

typedef struct {
    nn_optim_t *tr;
    const nn_batch_t *batch;
} net_ctx_t;

static double net_loss(void *p) {
    net_ctx_t *c = p;
    nn_metrics_t m;
    char err[256];
    if (nn_train_grad(c->tr, c->batch, &m, err, sizeof(err)) != 0) {
        fprintf(stderr, "nn_train_grad: %s\n", err);
        exit(1);
    }
    return m.loss;
}

static void fd_net(nn_backend_t *be, nn_act_t act, float wp, float wv, float wl, int32_t blocks, int32_t gpool) {
    nn_net_config_t cfg = {.blocks = blocks, .channels = 6, .act = act, .in_planes = 5, .in_hand = 2, .features_version = 1,
                           .gpool = gpool};
    char err[256];
    nn_net_t *net = nn_net_new(be, &cfg, 7, err, sizeof(err));
    KOMA_ASSERT(net);
    nn_train_config_t tc = nn_train_config_default();
    tc.w_policy = wp, tc.w_value = wv, tc.w_legal = wl;
    tc.q_mix = 0.3f, tc.q_draw = 0.2f;
    nn_optim_t *tr = nn_optim_new(net, &tc, 3, err, sizeof(err));
    KOMA_ASSERT(tr);
    t_batch_t tb;
    t_batch_init(&tb, 3, cfg.in_planes, cfg.in_hand, 4);
    net_ctx_t c = {tr, &tb.b};
    nn_metrics_t m;
    KOMA_ASSERT(nn_train_grad(tr, &tb.b, &m, err, sizeof(err)) == 0);
    int64_t np;
    float *params = nn_net_params(net, &np, NULL);
    float *grads = malloc(sizeof(float) * (size_t)np);
    memcpy(grads, nn_optim_grads(tr), sizeof(float) * (size_t)np);
    char arch[32];
    fprintf(stderr, "-- net fd %s %s, weights p %.0f v %.0f l %.0f: loss %.5f (p %.4f v %.4f l %.5f)\n",
            nn_net_arch_format(&cfg, arch, sizeof arch), nn_act_name(act), wp, wv, wl, m.loss, m.policy_loss,
            m.value_loss, m.legal_loss);
    double eps = 1e-2;
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        if (t->kind != NN_TENSOR_PARAM) continue;
        char what[96];
        snprintf(what, sizeof(what), "fd %s", t->name);
        int64_t nonzero = 0;
        for (int64_t j = 0; j < t->numel; j++) nonzero += grads[t->offset + j] != 0.0f;
        if (wp > 0 && wv > 0 && wl > 0 && !t_judge(nonzero != 0))
            fprintf(stderr, "  %s: gradient is all zero under all three losses\n", t->name);
        t_fd_check(what, params + t->offset, t->numel, grads + t->offset, net_loss, &c, eps, 3e-4, 3e-2, t_scaled(6, 2),
                   0.05);
    }
    free(grads);
    t_batch_free(&tb);
    nn_optim_free(tr);
    nn_net_free(net);
}

static void overfit(nn_backend_t *be) {
    nn_net_config_t cfg = {.blocks = 2, .channels = 32, .act = NN_ACT_RELU, .in_planes = 8, .in_hand = 2, .features_version = 1};
    char err[256];
    nn_net_t *net = nn_net_new(be, &cfg, 11, err, sizeof(err));
    KOMA_ASSERT(net);
    nn_train_config_t tc = nn_train_config_default();
    tc.lr = 0.05f, tc.warmup_steps = 10, tc.schedule = NN_SCHED_CONSTANT;
    tc.q_mix = 0.0f, tc.bn_momentum = 0.1f, tc.weight_decay = 1e-5f;
    tc.w_legal = 100.0f; /* the legal BCE is a mean over 2187 labels: weigh it up to memorise random masks */
    int32_t B = 16;
    nn_optim_t *tr = nn_optim_new(net, &tc, B, err, sizeof(err));
    KOMA_ASSERT(tr);
    t_batch_t tb;
    t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 3);
    /* one clearly preferred move per position, so top-1 is well defined */
    for (int32_t b = 0; b < B; b++) {
        uint32_t o = tb.off[b], k = tb.off[b + 1] - o;
        for (uint32_t j = 0; j < k; j++) tb.probs[o + j] = j == 0 ? 0.6f : 0.4f / (float)(k - 1);
        if (k == 1) tb.probs[o] = 1.0f;
    }
    /* the policy cross-entropy cannot go below the target entropy */
    double H = 0;
    for (uint32_t j = 0; j < tb.off[B]; j++) H -= tb.probs[j] * log(tb.probs[j]);
    H /= B;
    nn_metrics_t m0, m, e0, e;
    KOMA_ASSERT(nn_eval_batch(tr, &tb.b, &e0, err, sizeof(err)) == 0);
    KOMA_ASSERT(nn_train_grad(tr, &tb.b, &m0, err, sizeof(err)) == 0);
    int steps = t_scaled(400, 20);
    for (int s = 0; s < steps; s++) {
        KOMA_ASSERT(nn_train_step(tr, &tb.b, &m, err, sizeof(err)) == 0);
        if (s % 100 == 0 || s == steps - 1)
            fprintf(stderr, "step %4lld lr %.4f loss %.4f p %.4f v %.4f l %.5f acc %.2f f1 %.3f |g| %.3f\n",
                    (long long)m.step, m.lr, m.loss, m.policy_loss, m.value_loss, m.legal_loss, m.policy_acc,
                    m.legal_f1, m.grad_norm);
    }
    KOMA_ASSERT(nn_train_grad(tr, &tb.b, &m, err, sizeof(err)) == 0);
    KOMA_ASSERT(nn_eval_batch(tr, &tb.b, &e, err, sizeof(err)) == 0);
    CHECK(nn_optim_step_count(tr) == steps);
    double fp = (m.policy_loss - H) / (m0.policy_loss - H), fv = m.value_loss / m0.value_loss,
           fl = m.legal_loss / m0.legal_loss;
    fprintf(stderr, "overfit (train mode): policy excess %.4f -> %.4f (x%.3f), value %.4f -> %.4f (x%.3f), legal %.5f -> %.5f (x%.3f)\n",
            m0.policy_loss - H, m.policy_loss - H, fp, m0.value_loss, m.value_loss, fv, m0.legal_loss, m.legal_loss, fl);
    /* Top-1 accuracy swings between ~0.8 and 1 from step to step once the loss has
     * fallen (near-tied targets; it depends on libm and compiler flags): the loss
     * bounds are the requirement, accuracy only has to be far above chance. */
    if (t_full()) {
        CHECK(fp <= 0.1 && fv <= 0.1 && fl <= 0.1);
        CHECK(m.policy_acc >= 0.75);
        CHECK(m.legal_f1 > 0.95);
    }
    double ep = (e.policy_loss - H) / (e0.policy_loss - H), ev = e.value_loss / e0.value_loss,
           el = e.legal_loss / e0.legal_loss;
    fprintf(stderr, "overfit (inference mode, folded BN): policy x%.3f value x%.3f legal x%.3f acc %.2f f1 %.3f\n",
            ep, ev, el, e.policy_acc, e.legal_f1);
    if (t_full()) {
        CHECK(ep <= 0.1 && ev <= 0.1 && el <= 0.1);
        CHECK(e.policy_acc >= 0.75 && e.legal_f1 > 0.95);
    }

    /* inference: a batch gives the same rows as the positions one by one */
    nn_ctx_t *ctx = nn_ctx_new(net, NULL, B, err, sizeof(err));
    KOMA_ASSERT(ctx);
    float *pol = malloc(sizeof(float) * B * NN_POLICY_NB), *val = malloc(sizeof(float) * B * 3),
          *leg = malloc(sizeof(float) * B * NN_POLICY_NB);
    float *p1 = malloc(sizeof(float) * B * NN_POLICY_NB), *v1 = malloc(sizeof(float) * B * 3),
          *l1 = malloc(sizeof(float) * B * NN_POLICY_NB);
    nn_forward(ctx, B, tb.planes, tb.hand, pol, val, leg);
    int64_t bpp = nn_packed_bytes(cfg.in_planes);
    for (int32_t b = 0; b < B; b++)
        nn_forward(ctx, 1, tb.planes + b * bpp, tb.hand + b * cfg.in_hand, p1 + (int64_t)b * NN_POLICY_NB,
                   v1 + b * 3, l1 + (int64_t)b * NN_POLICY_NB);
    t_compare("forward B=16 vs 16x B=1 policy", pol, p1, (int64_t)B * NN_POLICY_NB, 1e-4, 1e-4);
    t_compare("forward B=16 vs 16x B=1 value", val, v1, B * 3, 1e-4, 1e-4);
    t_compare("forward B=16 vs 16x B=1 legal", leg, l1, (int64_t)B * NN_POLICY_NB, 1e-4, 1e-4);
    /* Heads not asked for are not computed (self-play skips the legal head):
     * their buffers keep what they held; the others are the same numbers. */
    float *dpol, *dval, *dleg;
    uint8_t *dpk;
    float *dhd;
    nn_ctx_buffers(ctx, &dpk, &dhd, &dpol, &dval, &dleg);
    memcpy(dpk, tb.planes, (size_t)(B * bpp));
    memcpy(dhd, tb.hand, sizeof(float) * (size_t)B * cfg.in_hand);
    for (int64_t i = 0; i < (int64_t)B * NN_POLICY_NB; i++) dleg[i] = 7.0f;
    CHECK(nn_forward_dev(ctx, B, dpk, dhd, NN_OUT_POLICY | NN_OUT_VALUE) == 0);
    int untouched = 1;
    for (int64_t i = 0; i < (int64_t)B * NN_POLICY_NB; i++) untouched &= dleg[i] == 7.0f;
    CHECK(untouched);
    /* The policy alone runs its half of the merged head convolution on its
     * own (nn_net_set_merge_heads): the same numbers within float rounding. */
    t_compare("policy alone vs with the legal head", dpol, pol, (int64_t)B * NN_POLICY_NB, 1e-5, 1e-5);
    CHECK(memcmp(dval, val, sizeof(float) * (size_t)B * 3) == 0);
    for (int64_t i = 0; i < (int64_t)B * 3; i++) dval[i] = 7.0f;
    CHECK(nn_forward(ctx, B, tb.planes, tb.hand, NULL, NULL, l1) == 0);
    CHECK(memcmp(l1, leg, sizeof(float) * (size_t)B * NN_POLICY_NB) == 0 && dval[0] == 7.0f && dval[3 * B - 1] == 7.0f);
    /* the forward agrees with nn_eval_batch's loss: recompute value CE from val */
    double vl = 0;
    for (int32_t b = 0; b < B; b++) {
        const float *z = val + b * 3;
        double mx = fmax(z[0], fmax(z[1], z[2])), s = 0;
        for (int i = 0; i < 3; i++) s += exp(z[i] - mx);
        int t = tb.result[b] > 0 ? 0 : tb.result[b] == 0 ? 1 : 2;
        vl += mx + log(s) - z[t];
    }
    vl /= B;
    fprintf(stderr, "value CE from nn_forward %.6f, nn_eval_batch %.6f\n", vl, e.value_loss);
    CHECK(fabs(vl - e.value_loss) < 1e-4 + 1e-4 * vl);
    free(pol), free(val), free(leg), free(p1), free(v1), free(l1);
    nn_ctx_free(ctx);

    /* malformed batches are refused with a message */
    nn_batch_t bad = tb.b;
    bad.B = B + 1;
    CHECK(nn_train_step(tr, &bad, &m, err, sizeof(err)) != 0 && strstr(err, "batch size"));
    fprintf(stderr, "refused: %s\n", err);
    uint32_t off2[17];
    memcpy(off2, tb.off, sizeof(off2));
    off2[5] = off2[4] - 1 + (off2[4] == 0);
    off2[5] = off2[4] ? off2[4] - 1 : 0;
    if (off2[4]) {
        bad = tb.b;
        bad.policy_offsets = off2;
        CHECK(nn_train_step(tr, &bad, &m, err, sizeof(err)) != 0 && strstr(err, "policy_offsets"));
        fprintf(stderr, "refused: %s\n", err);
    }
    uint16_t save = tb.labels[0];
    tb.labels[0] = NN_POLICY_NB;
    CHECK(nn_train_step(tr, &tb.b, &m, err, sizeof(err)) != 0 && strstr(err, "policy_label"));
    fprintf(stderr, "refused: %s\n", err);
    tb.labels[0] = save;
    CHECK(nn_optim_step_count(tr) == steps);

    t_batch_free(&tb);
    nn_optim_free(tr);
    nn_net_free(net);
}

int main(void) {
    nn_backend_t *be = nn_backend_cpu_new(0);
    /* Each loss alone, then all three: the same code with other weights (a
     * loss's weight scales its gradient), so a sanitizer job (KOMA_TEST_SCALE)
     * runs the last of the four only. */
    if (t_full()) {
        fd_net(be, NN_ACT_SILU, 1, 0, 0, 1, 0);
        fd_net(be, NN_ACT_SILU, 0, 1, 0, 1, 0);
        fd_net(be, NN_ACT_SILU, 0, 0, 300, 1, 0);
    }
    fd_net(be, NN_ACT_SILU, 1, 1, 100, 1, 0);
    /* global pooling in block 1 of 2 (block 0 plain): the pool, dense and
     * channel-bias gradients, and everything before them, under the policy
     * and legal losses (with the value loss too, this net's value.fc2.bias
     * gradients are so small that the loss's curvature over +-eps reads as
     * kinks: a property of the check, not of pooling, which the value head
     * does not see) */
    fd_net(be, NN_ACT_SILU, 1, 0, 100, 2, 2);
    /* No whole-net finite differences for ReLU: with batch norm coupling all
     * positions, any step moves some of the thousands of pre-activations
     * across zero. Its op is checked in test_nn_ops, the whole ReLU net
     * against PyTorch in test_nn_torch. */
    overfit(be);
    nn_backend_free(be);
    return t_done("test_nn_net");
}
