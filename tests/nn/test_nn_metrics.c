/* test_nn_metrics.c - the training figures a person reads. With playout-cap
 * randomization most positions carry no policy target; policy loss and
 * top-1 accuracy are over the positions that have one (before, they were
 * divided by every position of the batch and read about four times too
 * low), a batch without any target reports none (NAN) and still trains, and
 * the total stays the objective the step minimised (policy summed over the
 * targets / all B positions: each target's gradient weight is w_p / B, as
 * nn/net.h states). */
#include "nn_test.h"

#include <math.h>

int main(void) {
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t cfg = {.blocks = 1, .channels = 8, .act = NN_ACT_RELU, .in_planes = 5, .in_hand = 2,
                           .features_version = 1};
    char err[256];
    nn_net_t *net = nn_net_new(be, &cfg, 3, err, sizeof err);
    KOMA_ASSERT(net);
    nn_train_config_t tc = nn_train_config_default();
    nn_optim_t *tr = nn_optim_new(net, &tc, 8, err, sizeof err);
    KOMA_ASSERT(tr);
    t_seed(99);
    t_batch_t full;
    t_batch_init(&full, 8, cfg.in_planes, cfg.in_hand, 3);
    /* The same 8 positions with the policy targets of positions 1, 3, 4, 6, 7 removed. */
    t_batch_t part;
    t_seed(99);
    t_batch_init(&part, 8, cfg.in_planes, cfg.in_hand, 3);
    static const int keep[8] = {1, 0, 1, 0, 0, 1, 0, 0};
    uint32_t o = 0;
    for (int b = 0; b < 8; b++) {
        uint32_t from = full.off[b], to = full.off[b + 1];
        part.off[b] = o;
        if (keep[b])
            for (uint32_t j = from; j < to; j++) part.labels[o] = full.labels[j], part.probs[o] = full.probs[j], o++;
    }
    part.off[8] = o;
    nn_metrics_t mf, mp, m1;
    CHECK(nn_eval_batch(tr, &full.b, &mf, err, sizeof err) == 0);
    CHECK(nn_eval_batch(tr, &part.b, &mp, err, sizeof err) == 0);
    CHECK(mf.policy_positions == 8 && mp.policy_positions == 3);
    /* The three kept positions alone, as a batch of 3: the same policy figures. */
    t_batch_t three;
    t_seed(7);
    t_batch_init(&three, 3, cfg.in_planes, cfg.in_hand, 3);
    int64_t bpp = nn_packed_bytes(cfg.in_planes), lpp = nn_packed_bytes(NN_POLICY_CH);
    int k = 0;
    o = 0;
    for (int b = 0; b < 8; b++) {
        if (!keep[b]) continue;
        memcpy(three.planes + k * bpp, full.planes + b * bpp, (size_t)bpp);
        memcpy(three.legal + k * lpp, full.legal + b * lpp, (size_t)lpp);
        memcpy(three.hand + k * cfg.in_hand, full.hand + b * cfg.in_hand, sizeof(float) * (size_t)cfg.in_hand);
        three.result[k] = full.result[b], three.q[k] = full.q[b];
        three.off[k] = o;
        for (uint32_t j = full.off[b]; j < full.off[b + 1]; j++)
            three.labels[o] = full.labels[j], three.probs[o] = full.probs[j], o++;
        three.off[++k] = o;
    }
    CHECK(nn_eval_batch(tr, &three.b, &m1, err, sizeof err) == 0);
    CHECK(m1.policy_positions == 3);
    CHECK_NEAR(mp.policy_loss, m1.policy_loss, 1e-5 * fabs(m1.policy_loss) + 1e-6);
    CHECK_NEAR(mp.policy_acc, m1.policy_acc, 1e-9);
    /* The total is the objective: policy summed over targets / all 8 positions. */
    double want = tc.w_policy * mp.policy_loss * 3.0 / 8.0 + tc.w_value * mp.value_loss + tc.w_legal * mp.legal_loss;
    CHECK_NEAR(mp.loss, want, 1e-5 * fabs(want));
    /* No target at all: no policy figures (NAN), a finite total. */
    for (int b = 0; b <= 8; b++) part.off[b] = 0;
    CHECK(nn_eval_batch(tr, &part.b, &mp, err, sizeof err) == 0);
    CHECK(mp.policy_positions == 0 && isnan(mp.policy_loss) && isnan(mp.policy_acc) && isfinite(mp.loss));
    /* A training step on such a batch is fine too. */
    CHECK(nn_train_step(tr, &part.b, &mp, err, sizeof err) == 0 && isfinite(mp.loss));
    t_batch_free(&full);
    t_batch_free(&part);
    t_batch_free(&three);
    nn_optim_free(tr);
    nn_net_free(net);
    nn_backend_free(be);
    return t_done("test_nn_metrics");
}
