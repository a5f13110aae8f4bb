/* test_nn_mlh.c - the optional heads of issue 33 item 3 on the CPU backend:
 *  - architecture strings with head suffixes ("4x32m", "6x64g2mo") parse,
 *    format and compare; malformed ones are refused;
 *  - a net with heads holds the plain net's tensors with the same random
 *    weights (the heads' tensors are appended) and gives the same policy,
 *    value and legal outputs, bit for bit;
 *  - nn_forward_out's moves_left: plies >= 0, NN_ML_SCALE * max(raw, 0)
 *    exactly for a head whose output is a known bias, the same on every CPU
 *    convolution route (reference, oneDNN, Winograd) and for any batch split;
 *  - asking a net without the head for moves_left is an error. */
#include "nn_test.h"

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

int main(void) {
    arch_strings();
    nn_backend_t *be = nn_backend_cpu_new(1);
    same_trunk(be);
    nn_backend_free(be);
    routes(NN_ACT_RELU);
    routes(NN_ACT_SILU);
    return t_done("test_nn_mlh");
}
