/* test_nn_step_halves.c - nn_train_step_grads then nn_train_step_apply (the
 * halves data-parallel training takes apart) give the weights, momentum,
 * BN running statistics, metrics and step count of nn_train_step, bit for
 * bit, over several steps with clipping active; halving the gradients
 * between the halves changes the step (the halves really use the
 * gradients as they are then). */
#include "nn_test.h"

static nn_optim_t *make(nn_backend_t *be, nn_net_t **net, int32_t B) {
    nn_net_config_t cfg = {.blocks = 1, .channels = 16, .act = NN_ACT_RELU, .in_planes = 8, .in_hand = 2, .features_version = 1};
    char err[256];
    *net = nn_net_new(be, &cfg, 5, err, sizeof(err));
    KOMA_ASSERT(*net);
    nn_train_config_t tc = nn_train_config_default();
    tc.lr = 0.05f, tc.warmup_steps = 2, tc.clip_norm = 0.5f; /* clipping on */
    nn_optim_t *tr = nn_optim_new(*net, &tc, B, err, sizeof(err));
    KOMA_ASSERT(tr);
    return tr;
}

static int same_floats(const float *a, const float *b, int64_t n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

int main(void) {
    nn_backend_t *be = nn_backend_cpu_new(1);
    int32_t B = 12;
    t_batch_t tb;
    t_batch_init(&tb, B, 8, 2, 3);
    nn_net_t *na, *nb, *nc;
    nn_optim_t *ta = make(be, &na, B), *tbr = make(be, &nb, B), *tc = make(be, &nc, B);
    char err[256];
    int64_t np, ns;
    for (int step = 0; step < 4; step++) {
        nn_metrics_t ma, mb, mc;
        CHECK(nn_train_step(ta, &tb.b, &ma, err, sizeof err) == 0);
        CHECK(nn_train_step_grads(tbr, &tb.b, &mb, err, sizeof err) == 0);
        CHECK(nn_train_step_apply(tbr, &mb, err, sizeof err) == 0);
        CHECKF(memcmp(&ma, &mb, sizeof ma) == 0, "step %d: metrics differ (loss %.9g vs %.9g, grad norm %.9g vs %.9g)",
               step, ma.loss, mb.loss, ma.grad_norm, mb.grad_norm);
        /* halved gradients: a different step */
        CHECK(nn_train_step_grads(tc, &tb.b, &mc, err, sizeof err) == 0);
        float *g = nn_optim_grads(tc);
        nn_net_params(nc, &np, NULL);
        for (int64_t i = 0; i < np; i++) g[i] *= 0.5f;
        CHECK(nn_train_step_apply(tc, &mc, err, sizeof err) == 0);
        if (step == 0) CHECK_NEAR(mc.grad_norm, 0.5 * ma.grad_norm, 1e-4 * ma.grad_norm); /* the same weights yet */
    }
    float *pa = nn_net_params(na, &np, NULL), *pb = nn_net_params(nb, NULL, NULL), *pc = nn_net_params(nc, NULL, NULL);
    float *sa = nn_net_stats(na, &ns), *sb = nn_net_stats(nb, NULL);
    CHECK(same_floats(pa, pb, np));
    CHECK(same_floats(sa, sb, ns));
    CHECK(same_floats(nn_optim_momentum(ta), nn_optim_momentum(tbr), np));
    CHECK(nn_optim_step_count(ta) == 4 && nn_optim_step_count(tbr) == 4 && nn_optim_step_count(tc) == 4);
    CHECK(!same_floats(pa, pc, np));
    nn_optim_free(ta);
    nn_optim_free(tbr);
    nn_optim_free(tc);
    nn_net_free(na);
    nn_net_free(nb);
    nn_net_free(nc);
    t_batch_free(&tb);
    nn_backend_free(be);
    return t_done("test_nn_step_halves");
}
