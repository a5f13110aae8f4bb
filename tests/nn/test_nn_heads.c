/* test_nn_heads.c - the policy and legal heads' 3x3 convolutions merged into
 * one (nn_net_set_merge_heads) against the two convolutions apart, on both
 * CPU convolution routes, relu and silu, channel counts with and without
 * 16-float alignment inside the pair:
 *  - the pair is one tensor: each legal head-conv tensor sits right after its
 *    policy twin in the params / stats, and a weights file still holds them
 *    apart under their own names (a merged net's file loads into an
 *    unmerged net and gives the same numbers);
 *  - inference (all heads, the legal head alone, the policy head alone),
 *    nn_eval_batch, nn_train_grad's gradients of every tensor and three
 *    nn_train_step updates (weights, momentum, BN running statistics) agree
 *    within float tolerance (max differences printed);
 *  - heads not asked for keep their buffers (the legal head alone does not
 *    write the policy logits).
 * Finite differences of the merged route: test_nn_net (merged by default). */
#include "nn_test.h"

#include "nn/weights.h"

static nn_optim_t *make(nn_backend_t *be, const nn_net_config_t *cfg, int merged, int32_t B, nn_net_t **net) {
    char err[256];
    *net = nn_net_new(be, cfg, 33, err, sizeof err);
    KOMA_ASSERT(*net);
    nn_net_set_merge_heads(*net, merged);
    nn_train_config_t tc = nn_train_config_default();
    tc.lr = 0.05f, tc.warmup_steps = 1, tc.q_mix = 0.3f, tc.w_legal = 30.0f;
    nn_optim_t *tr = nn_optim_new(*net, &tc, B, err, sizeof err);
    KOMA_ASSERT(tr);
    return tr;
}

static void check_layout(nn_net_t *net) {
    static const char *role[5][2] = {{"policy.conv.weight", "legal.conv.weight"},
                                     {"policy.bn.weight", "legal.bn.weight"},
                                     {"policy.bn.bias", "legal.bn.bias"},
                                     {"policy.bn.running_mean", "legal.bn.running_mean"},
                                     {"policy.bn.running_var", "legal.bn.running_var"}};
    for (int k = 0; k < 5; k++) {
        int32_t p = nn_net_tensor_find(net, role[k][0]), l = nn_net_tensor_find(net, role[k][1]);
        KOMA_ASSERT(p >= 0 && l >= 0);
        const nn_tensor_info_t *tp = nn_net_tensor(net, p), *tl = nn_net_tensor(net, l);
        CHECKF(tp->kind == tl->kind && tl->offset == tp->offset + tp->numel && tp->offset % 16 == 0,
               "%s at %lld (+%lld), %s at %lld: not one tensor", role[k][0], (long long)tp->offset,
               (long long)tp->numel, role[k][1], (long long)tl->offset);
    }
}

static void cmp_metrics(const char *what, const nn_metrics_t *a, const nn_metrics_t *b) {
    char w[160];
    const double va[] = {a->loss, a->policy_loss, a->value_loss, a->legal_loss, a->grad_norm};
    const double vb[] = {b->loss, b->policy_loss, b->value_loss, b->legal_loss, b->grad_norm};
    float fa[5], fb[5];
    for (int i = 0; i < 5; i++) fa[i] = (float)va[i], fb[i] = (float)vb[i];
    snprintf(w, sizeof w, "%s: loss, p, v, l, |g|", what);
    t_compare(w, fa, fb, 5, 1e-6, 1e-5);
    CHECK(a->step == b->step && a->policy_positions == b->policy_positions);
}

static void compare(nn_backend_t *be, const char *route, int32_t C, nn_act_t act) {
    nn_net_config_t cfg = {.blocks = 2, .channels = C, .act = act, .in_planes = 7, .in_hand = 3, .features_version = 1};
    int32_t B = 6;
    char err[512], tag[96], w[200];
    snprintf(tag, sizeof tag, "%s C=%d %s", route, C, nn_act_name(act));
    fprintf(stderr, "-- merged vs apart: %s\n", tag);
    nn_net_t *nm, *na;
    nn_optim_t *tm = make(be, &cfg, 1, B, &nm), *ta = make(be, &cfg, 0, B, &na);
    CHECK(nn_net_merge_heads(nm) == 1 && nn_net_merge_heads(na) == 0);
    check_layout(nm);
    t_batch_t tb;
    t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 3);

    /* inference: all heads, the legal head alone, the policy head alone */
    nn_ctx_t *cm = nn_ctx_new(nm, NULL, B, err, sizeof err), *ca = nn_ctx_new(na, NULL, B, err, sizeof err);
    KOMA_ASSERT(cm && ca);
    int64_t NP = (int64_t)B * NN_POLICY_NB;
    float *pm = malloc(sizeof(float) * NP), *pa = malloc(sizeof(float) * NP), *lm = malloc(sizeof(float) * NP),
          *la = malloc(sizeof(float) * NP), *l2 = malloc(sizeof(float) * NP), *p2 = malloc(sizeof(float) * NP);
    float vm[3 * 6], va[3 * 6];
    CHECK(nn_forward(cm, B, tb.planes, tb.hand, pm, vm, lm) == 0 && nn_forward(ca, B, tb.planes, tb.hand, pa, va, la) == 0);
    snprintf(w, sizeof w, "%s forward policy", tag);
    t_compare(w, pm, pa, NP, 1e-5, 1e-5);
    snprintf(w, sizeof w, "%s forward value", tag);
    t_compare(w, vm, va, 3 * B, 1e-5, 1e-5);
    snprintf(w, sizeof w, "%s forward legal", tag);
    t_compare(w, lm, la, NP, 1e-5, 1e-5);
    float *dpol;
    nn_ctx_buffers(cm, NULL, NULL, &dpol, NULL, NULL);
    for (int64_t i = 0; i < NP; i++) dpol[i] = 7.0f;
    CHECK(nn_forward(cm, B, tb.planes, tb.hand, NULL, NULL, l2) == 0);
    int kept = 1;
    for (int64_t i = 0; i < NP; i++) kept &= dpol[i] == 7.0f;
    CHECKF(kept && !memcmp(l2, lm, sizeof(float) * NP), "%s: the legal head alone wrote the policy or differs", tag);
    CHECK(nn_forward(cm, B, tb.planes, tb.hand, p2, NULL, NULL) == 0);
    snprintf(w, sizeof w, "%s policy head alone", tag);
    t_compare(w, p2, pm, NP, 1e-5, 1e-5);

    /* nn_eval_batch, then gradients of every tensor */
    nn_metrics_t mm, ma;
    CHECK(nn_eval_batch(tm, &tb.b, &mm, err, sizeof err) == 0 && nn_eval_batch(ta, &tb.b, &ma, err, sizeof err) == 0);
    snprintf(w, sizeof w, "%s eval", tag);
    cmp_metrics(w, &mm, &ma);
    CHECK(nn_train_grad(tm, &tb.b, &mm, err, sizeof err) == 0 && nn_train_grad(ta, &tb.b, &ma, err, sizeof err) == 0);
    snprintf(w, sizeof w, "%s grad", tag);
    cmp_metrics(w, &mm, &ma);
    const float *gm = nn_optim_grads(tm), *ga = nn_optim_grads(ta);
    for (int32_t i = 0; i < nn_net_tensor_count(nm); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(nm, i);
        if (t->kind != NN_TENSOR_PARAM) continue;
        double scale = 0; /* tolerance relative to the tensor's largest gradient */
        for (int64_t j = 0; j < t->numel; j++) scale = fmax(scale, fabs(ga[t->offset + j]));
        snprintf(w, sizeof w, "%s d %s", tag, t->name);
        t_compare(w, gm + t->offset, ga + t->offset, t->numel, 1e-5 * scale + 1e-7, 1e-4);
    }

    /* three SGD steps: weights, momentum, running statistics */
    for (int s = 0; s < 3; s++) {
        CHECK(nn_train_step(tm, &tb.b, &mm, err, sizeof err) == 0 && nn_train_step(ta, &tb.b, &ma, err, sizeof err) == 0);
        snprintf(w, sizeof w, "%s step %d", tag, s + 1);
        cmp_metrics(w, &mm, &ma);
    }
    int64_t np, ns;
    const float *wm = nn_net_params(nm, &np, NULL), *wa = nn_net_params(na, NULL, NULL);
    snprintf(w, sizeof w, "%s weights after 3 steps", tag);
    t_compare(w, wm, wa, np, 1e-5, 1e-4);
    snprintf(w, sizeof w, "%s momentum after 3 steps", tag);
    t_compare(w, nn_optim_momentum(tm), nn_optim_momentum(ta), np, 1e-5, 1e-4);
    const float *sm = nn_net_stats(nm, &ns), *sa = nn_net_stats(na, NULL);
    snprintf(w, sizeof w, "%s BN statistics after 3 steps", tag);
    t_compare(w, sm, sa, ns, 1e-5, 1e-4);

    /* the file keeps the tensors apart: the merged net's file read into the
     * unmerged net gives its numbers exactly */
    char path[1000];
    snprintf(path, sizeof path, "%s", t_path("heads.safetensors"));
    CHECK(nn_weights_save(nm, tm, path, err, sizeof err) == 0);
    CHECK(nn_weights_read(na, ta, path, err, sizeof err) == 0);
    CHECK(!memcmp(wm, wa, sizeof(float) * (size_t)np) && !memcmp(sm, sa, sizeof(float) * (size_t)ns));
    CHECK(!memcmp(nn_optim_momentum(tm), nn_optim_momentum(ta), sizeof(float) * (size_t)np));
    nn_net_t *back = nn_weights_load(be, path, -1, err, sizeof err);
    KOMA_ASSERT(back);
    int32_t pw = nn_net_tensor_find(back, "policy.conv.weight"), lw = nn_net_tensor_find(back, "legal.conv.weight");
    CHECK(pw >= 0 && lw >= 0 && nn_net_tensor(back, lw)->numel == (int64_t)C * C * 9 &&
          nn_net_tensor(back, pw)->shape[0] == C && nn_net_tensor(back, lw)->shape[0] == C);
    nn_net_free(back);

    free(pm), free(pa), free(lm), free(la), free(l2), free(p2);
    nn_ctx_free(cm);
    nn_ctx_free(ca);
    t_batch_free(&tb);
    nn_optim_free(tm);
    nn_optim_free(ta);
    nn_net_free(nm);
    nn_net_free(na);
}

int main(void) {
    t_scratch("nn_heads");
    char err[256];
    nn_backend_t *ref = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, err, sizeof err);
    KOMA_ASSERT(ref);
    compare(ref, "ref", 8, NN_ACT_RELU);  /* the legal half 4-float aligned only */
    compare(ref, "ref", 16, NN_ACT_SILU);
    compare(ref, "ref", 5, NN_ACT_SILU);
    nn_backend_free(ref);
    nn_backend_t *dflt = nn_backend_cpu_new(1);
    KOMA_ASSERT(dflt);
    const char *route = nn_backend_cpu_conv_route(dflt);
    if (strcmp(route, "ref") != 0) { /* oneDNN: native layouts in the inference unit */
        compare(dflt, route, 8, NN_ACT_RELU);
        compare(dflt, route, 32, NN_ACT_SILU);
    }
    nn_backend_free(dflt);
    if (!atomic_load(&g_fail)) t_rm_rf(t_dir);
    return t_done("test_nn_heads");
}
