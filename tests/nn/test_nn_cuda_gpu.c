/* test_nn_cuda_gpu.c - the CUDA backend against the CPU reference, op by op
 * and as a whole network. Exits 77 (skipped) without a device or without CUDA.
 *
 * Three passes, each on its own CUDA instance:
 *   fp32  NN_CUDA_NO_TF32: tight tolerances (only summation order and expf differ);
 *   tf32  the default (TF32 tensor cores where the GPU has them);
 *   bf16  NN_CUDA_BF16 (convolutions in BF16), loose tolerances.
 * Every op of nn/backend.h on random inputs of several shapes (B = 1, odd
 * channel counts, k = 1 and 3, accumulate on/off, NULL optional arguments,
 * in-place calls), then whole nets: the same weights on both backends,
 * inference outputs (plus policy KL and value error), one gradient pass
 * (losses, statistics, every parameter gradient) and two SGD steps (updates,
 * momentum, running statistics). Also: staging round trips larger than the
 * pinned buffers, overlapping copies, buffers shared between instances, and
 * the sticky error of an instance.
 *
 * Tolerances: |gpu - cpu| <= atol*rms(cpu) + rtol*|cpu| (atol is relative to
 * the RMS of the reference tensor so one table fits all shapes). Each line
 * prints max|diff|, max|diff|/rms and the max relative difference; the first
 * mismatches are printed before it. KOMA_GPU_TOL_SCALE=2 scales every
 * tolerance (to tell a marginal tolerance from a bug on new hardware).
 * Usage: test_nn_cuda_gpu [device] [fp32|tf32|bf16 ...] [quick] (default: device 0, all
 * passes, every case). `quick` leaves out the two largest convolutions and the
 * 6x64 net (the remaining cases cover the same ops and options on smaller
 * shapes): for compute-sanitizer, whose kernels run far slower (tools/gpu-checks.sh).
 *
 * Harness self-check without a GPU: KOMA_GPU_TEST_FAKE=1 runs every pass
 * against a stand-in "device" that is the CPU backend with the precision of
 * each mode emulated (conv/dense inputs rounded to TF32 or BF16, BF16 conv
 * outputs rounded, BF16 storage of the fused unit's native outputs). It exercises the test's own plumbing (sizes, in-place
 * cases, comparisons) and shows whether the tolerances leave room for
 * TF32/BF16 rounding; it says nothing about the CUDA code.
 *
 * One program in three files, one translation unit: cuda_test.h (the passes'
 * types, the stand-in device, the comparisons), cuda_ops_test.h (the op-by-op
 * comparisons, run_ops) and this file (whole nets, the passes, main). The two
 * headers are included here only; cmake/module_tests.cmake makes a test of every
 * tests/nn/test_*.c, so they are not tests of their own and the target needs
 * no second source. */
#include "cuda_test.h"
#include "cuda_ops_test.h"

/* ---- whole nets ------------------------------------------------------------------ */
static void copy_weights_to_gpu(nn_net_t *gnet, nn_net_t *cnet) {
    int64_t np, ns;
    float *cp = nn_net_params(cnet, &np, NULL), *cst = nn_net_stats(cnet, &ns);
    G_->upload(G_, nn_net_params(gnet, NULL, NULL), cp, sizeof(float) * (size_t)np);
    G_->upload(G_, nn_net_stats(gnet, NULL), cst, sizeof(float) * (size_t)ns);
    gsync(G_);
    nn_net_mark_dirty(gnet);
}

/* mean over positions of KL(softmax(ref) || softmax(got)) */
static double policy_kl(const float *got, const float *ref, int32_t B) {
    double kl = 0;
    for (int32_t b = 0; b < B; b++) {
        const float *g = got + (int64_t)b * NN_POLICY_NB, *r = ref + (int64_t)b * NN_POLICY_NB;
        double mg = g[0], mr = r[0], sg = 0, sr = 0;
        for (int i = 1; i < NN_POLICY_NB; i++) mg = fmax(mg, g[i]), mr = fmax(mr, r[i]);
        for (int i = 0; i < NN_POLICY_NB; i++) sg += exp(g[i] - mg), sr += exp(r[i] - mr);
        double lg = mg + log(sg), lr = mr + log(sr);
        for (int i = 0; i < NN_POLICY_NB; i++) {
            double pr = exp(r[i] - lr);
            kl += pr * ((r[i] - lr) - (g[i] - lg));
        }
    }
    return kl / B;
}

/* W/D/L probabilities: max abs difference */
static double value_err(const float *got, const float *ref, int32_t B) {
    double m = 0;
    for (int32_t b = 0; b < B; b++) {
        double pg[3], pr[3], sg = 0, sr = 0;
        for (int i = 0; i < 3; i++) sg += (pg[i] = exp(got[b * 3 + i])), sr += (pr[i] = exp(ref[b * 3 + i]));
        for (int i = 0; i < 3; i++) m = fmax(m, fabs(pg[i] / sg - pr[i] / sr));
    }
    return m;
}

/* A whole tensor: relative L2 within tol_l2 and (judge_elems) few elementwise outliers. */
static void cmp_tensor(const char *what, const float *got, const float *ref, int64_t n, tol_t t, double tol_l2,
                       int judge_elems) {
    double rl = rel_l2(got, ref, n);
    g_info = 1;
    int64_t bad = cmp(what, got, ref, n, t);
    g_info = 0;
    int ok = rl <= tol_l2 * g_scale && (!judge_elems || bad <= n / 500);
    fprintf(stderr, "[%s] %-46s rel L2 %.3g (tol %.3g), %lld outliers %s\n", M_->name, what, rl, tol_l2 * g_scale,
            (long long)bad, ok ? "ok" : "MISMATCH");
    t_judge(ok);
}

static void cmp_metrics(const char *what, const nn_metrics_t *g, const nn_metrics_t *c, int32_t B, double l2) {
    char w[128];
    double rl = M_->net_out.rtol; /* loss values: as precise as the outputs */
    snprintf(w, sizeof(w), "%s loss", what);
    check_scalar(w, g->loss, c->loss, 1e-6, rl);
    snprintf(w, sizeof(w), "%s policy_loss", what);
    check_scalar(w, g->policy_loss, c->policy_loss, 1e-6, rl);
    snprintf(w, sizeof(w), "%s value_loss", what);
    check_scalar(w, g->value_loss, c->value_loss, 1e-6, rl);
    snprintf(w, sizeof(w), "%s legal_loss", what);
    check_scalar(w, g->legal_loss, c->legal_loss, 1e-6, rl);
    snprintf(w, sizeof(w), "%s policy_acc", what);
    check_scalar(w, g->policy_acc, c->policy_acc, 2.0 / B + 1e-9, 0); /* near-ties may flip a position */
    snprintf(w, sizeof(w), "%s legal_f1", what);
    check_scalar(w, g->legal_f1, c->legal_f1, 1e-2, 0); /* logits near 0 may flip */
    snprintf(w, sizeof(w), "%s grad_norm", what);
    check_scalar(w, g->grad_norm, c->grad_norm, 1e-6, l2);
    if (isfinite(c->moves_left_loss) || isfinite(g->moves_left_loss)) {
        snprintf(w, sizeof(w), "%s moves_left_loss", what);
        check_scalar(w, g->moves_left_loss, c->moves_left_loss, 1e-6, rl);
        CHECK(g->moves_left_positions == c->moves_left_positions);
    }
    if (isfinite(c->opp_policy_loss) || isfinite(g->opp_policy_loss)) {
        snprintf(w, sizeof(w), "%s opp_policy_loss", what);
        check_scalar(w, g->opp_policy_loss, c->opp_policy_loss, 1e-6, rl);
        CHECK(g->opp_positions == c->opp_positions);
    }
}

static int32_t g_net_gpool = 0; /* test_net's nets: global pooling every g_net_gpool-th block (0: none) */
static int32_t g_net_heads = 0; /* test_net's nets: the optional heads (NN_HEAD_*) */

/* Targets of the optional heads for a test batch (B <= 64): plies (every
 * fifth row none), the opponent's reply of 1..3 labels (every third row none). */
typedef struct {
    float ml[64];
    uint32_t off[65];
    uint16_t lab[192];
    float prob[192];
} heads_t;

static void heads_attach(heads_t *h, t_batch_t *tb) {
    int32_t B = tb->b.B;
    KOMA_ASSERT(B <= 64);
    if (!g_net_heads) return; /* the other nets' batches: the random draws as before */
    h->off[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        h->ml[b] = b % 5 == 4 ? -1.0f : (float)(t_next() % 160);
        uint32_t k = b % 3 == 2 ? 0 : 1 + (uint32_t)(t_next() % 3);
        for (uint32_t j = 0; j < k; j++)
            h->lab[h->off[b] + j] = (uint16_t)((b * 131 + j * 7) % NN_POLICY_NB), h->prob[h->off[b] + j] = 1.0f / (float)k;
        h->off[b + 1] = h->off[b] + k;
    }
    tb->b.moves_left = h->ml;
    tb->b.opp_offsets = h->off, tb->b.opp_label = h->lab, tb->b.opp_prob = h->prob;
}

/* One net of test_net on both backends: the same weights, the CPU optimizer's
 * running statistics warmed; tag names the net in every line. */
typedef struct {
    char tag[64];
    int smooth;  /* gradients, updates and momentum judged elementwise too (see test_net) */
    double l2;   /* their relative L2 bound */
    int32_t planes, hand, Btrain;
    nn_net_t *cnet, *gnet;
    nn_optim_t *ctr; /* the CPU net's optimizer */
    nn_train_config_t tc;
    int64_t np, ns; /* parameters, running statistics */
} net_case_t;

/* Inference, several batch sizes; a second instance runs the GPU context. */
static void net_forward_checks(net_case_t *nc) {
    char err[512], what[160];
    const char *tag = nc->tag;
    int32_t planes = nc->planes, hand = nc->hand;
    int32_t Bs[3] = {1, 7, 64};
    nn_ctx_t *cctx = nn_ctx_new(nc->cnet, NULL, 64, err, sizeof(err));
    nn_ctx_t *gctx = nn_ctx_new(nc->gnet, NULL, 64, err, sizeof(err));
    KOMA_ASSERT(cctx && gctx);
    for (int bi = 0; bi < 3; bi++) {
        int32_t B = Bs[bi];
        t_batch_t tb;
        t_batch_init(&tb, B, planes, hand, 2);
        int64_t np_ = (int64_t)B * NN_POLICY_NB;
        float *cp = malloc(sizeof(float) * (size_t)np_), *cl = malloc(sizeof(float) * (size_t)np_), *cv = malloc(sizeof(float) * (size_t)B * 3);
        float *gp = malloc(sizeof(float) * (size_t)np_), *gl = malloc(sizeof(float) * (size_t)np_), *gv = malloc(sizeof(float) * (size_t)B * 3);
        float cml[64], gml[64];
        int ml = (g_net_heads & NN_HEAD_MOVES_LEFT) != 0;
        nn_outputs_t co = {cp, cv, cl, ml ? cml : NULL}, go = {gp, gv, gl, ml ? gml : NULL};
        nn_forward_out(cctx, B, tb.planes, tb.hand, &co);
        nn_forward_out(gctx, B, tb.planes, tb.hand, &go);
        gpu_ok(tag);
        if (ml) { /* plies: the outputs' tolerance, scaled by the 20 plies a unit */
            snprintf(what, sizeof(what), "%s forward B%d moves_left", tag, B);
            cmp(what, gml, cml, B, (tol_t){M_->net_out.atol * NN_ML_SCALE, M_->net_out.rtol});
        }
        if (B == 7) { /* the same forward again: the third is recorded (CUDA graphs), later ones replay it */
            float *rp = malloc(sizeof(float) * (size_t)np_), *rl = malloc(sizeof(float) * (size_t)np_),
                  *rv = malloc(sizeof(float) * (size_t)B * 3);
            for (int rep = 2; rep <= 5; rep++) {
                nn_forward(gctx, B, tb.planes, tb.hand, rp, rv, rl);
                gpu_ok(tag);
                snprintf(what, sizeof(what), "%s forward B%d run %d = run 1 (graphs %s)", tag, B, rep,
                         G_->graph_launch ? "on" : "off");
                cmp(what, rp, gp, np_, T_EXACT);
                cmp(what, rv, gv, (int64_t)B * 3, T_EXACT);
                cmp(what, rl, gl, np_, T_EXACT);
            }
            free(rp), free(rl), free(rv);
        }
        snprintf(what, sizeof(what), "%s forward B%d policy", tag, B);
        cmp(what, gp, cp, np_, M_->net_out);
        snprintf(what, sizeof(what), "%s forward B%d value", tag, B);
        cmp(what, gv, cv, (int64_t)B * 3, M_->net_out);
        snprintf(what, sizeof(what), "%s forward B%d legal", tag, B);
        cmp(what, gl, cl, np_, M_->net_out);
        double kl = policy_kl(gp, cp, B), ve = value_err(gv, cv, B);
        snprintf(what, sizeof(what), "%s forward B%d policy KL", tag, B);
        check_scalar(what, kl, 0, M_->net_kl, 0);
        snprintf(what, sizeof(what), "%s forward B%d W/D/L prob err", tag, B);
        check_scalar(what, ve, 0, M_->net_prob, 0);
        free(cp), free(cl), free(cv), free(gp), free(gl), free(gv);
        t_batch_free(&tb);
    }
    /* the same net evaluated from another instance (buffers shared across streams) */
    nn_backend_t *g2 = gpu_new(M_->flags, err, sizeof(err));
    KOMA_ASSERT(g2);
    {
        nn_ctx_t *ctx2 = nn_ctx_new(nc->gnet, g2, 8, err, sizeof(err));
        KOMA_ASSERT(ctx2);
        t_batch_t tb;
        t_batch_init(&tb, 8, planes, hand, 2);
        float *a = malloc(sizeof(float) * 8 * NN_POLICY_NB), *b = malloc(sizeof(float) * 8 * NN_POLICY_NB);
        nn_forward(gctx, 8, tb.planes, tb.hand, a, NULL, NULL);
        nn_forward(ctx2, 8, tb.planes, tb.hand, b, NULL, NULL);
        CHECK(nn_cuda_error(g2) == NULL);
        snprintf(what, sizeof(what), "%s instance 2 vs instance 1", tag);
        cmp(what, b, a, 8 * NN_POLICY_NB, (tol_t){1e-6, 1e-6}); /* same algorithms: (nearly) identical */
        free(a), free(b);
        t_batch_free(&tb);
        nn_ctx_free(ctx2);
    }
    nn_backend_free(g2);
    nn_ctx_free(cctx);
    nn_ctx_free(gctx);
}

/* After two SGD steps from p0: the updates p - p0 (the params themselves
 * would hide any error), the momentum and the running statistics. */
static void net_cmp_steps(net_case_t *nc, nn_optim_t *gtr, const float *p0) {
    char what[160];
    const char *tag = nc->tag;
    int64_t np = nc->np, ns = nc->ns;
    nn_net_t *cnet = nc->cnet, *gnet = nc->gnet;
    nn_optim_t *ctr = nc->ctr;
    int smooth = nc->smooth;
    double l2 = nc->l2;
    float *gp = gget(nn_net_params(gnet, NULL, NULL), np), *cp = nn_net_params(cnet, NULL, NULL);
    float *gmo = gget(nn_optim_momentum(gtr), np), *cmo = nn_optim_momentum(ctr);
    float *gst = gget(nn_net_stats(gnet, NULL), ns), *cst = nn_net_stats(cnet, NULL);
    for (int64_t i = 0; i < np; i++) gp[i] -= p0[i];
    float *cdelta = malloc(sizeof(float) * (size_t)np);
    for (int64_t i = 0; i < np; i++) cdelta[i] = cp[i] - p0[i];
    for (int32_t i = 0; i < nn_net_tensor_count(cnet); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(cnet, i);
        if (t->kind == NN_TENSOR_PARAM) {
            snprintf(what, sizeof(what), "%s 2 steps: update %s", tag, t->name);
            cmp_tensor(what, gp + t->offset, cdelta + t->offset, t->numel, M_->net_grad, l2, smooth);
            snprintf(what, sizeof(what), "%s 2 steps: momentum %s", tag, t->name);
            cmp_tensor(what, gmo + t->offset, cmo + t->offset, t->numel, M_->net_grad, l2, smooth);
        } else {
            /* step 2's statistics come from weights after step 1, which differ at the
             * ReLU kinks like the updates above: the whole tensor stays within the tight
             * net_l2, elementwise outliers count only for smooth nets (an H100 run had
             * one of 64 stem running means 1.3e-3 off, rel L2 3.5e-5 against 1e-3) */
            snprintf(what, sizeof(what), "%s 2 steps: %s", tag, t->name);
            cmp_tensor(what, gst + t->offset, cst + t->offset, t->numel, M_->net_stat, M_->net_l2, smooth);
        }
    }
    CHECK(nn_optim_step_count(gtr) == 2);
    free(gp), free(gmo), free(gst), free(cdelta);
}

/* Training: gradients, then two SGD steps, then nn_eval_batch. */
static void net_train_checks(net_case_t *nc) {
    char err[512], what[160];
    const char *tag = nc->tag;
    int32_t planes = nc->planes, hand = nc->hand, Btrain = nc->Btrain;
    int64_t np = nc->np, ns = nc->ns;
    nn_net_t *cnet = nc->cnet, *gnet = nc->gnet;
    nn_optim_t *ctr = nc->ctr;
    double l2 = nc->l2;
    nn_optim_t *gtr = nn_optim_new(gnet, &nc->tc, Btrain, err, sizeof(err));
    KOMA_ASSERT(gtr);
    t_batch_t tb;
    heads_t hd;
    t_batch_init(&tb, Btrain, planes, hand, 4);
    heads_attach(&hd, &tb);
    nn_metrics_t cm, gm;
    KOMA_ASSERT(nn_train_grad(ctr, &tb.b, &cm, err, sizeof(err)) == 0);
    KOMA_ASSERT(nn_train_grad(gtr, &tb.b, &gm, err, sizeof(err)) == 0);
    gpu_ok(tag);
    snprintf(what, sizeof(what), "%s train_grad B%d", tag, Btrain);
    cmp_metrics(what, &gm, &cm, Btrain, l2);
    float *gg = gget(nn_optim_grads(gtr), np), *cg = nn_optim_grads(ctr);
    for (int32_t i = 0; i < nn_net_tensor_count(cnet); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(cnet, i);
        if (t->kind != NN_TENSOR_PARAM) continue;
        snprintf(what, sizeof(what), "%s grad %s", tag, t->name);
        cmp_tensor(what, gg + t->offset, cg + t->offset, t->numel, M_->net_grad, l2, nc->smooth);
    }
    free(gg);
    float *p0 = fdup(nn_net_params(cnet, NULL, NULL), np), *s0 = fdup(nn_net_stats(cnet, NULL), ns);
    float *gs0 = gget(nn_net_stats(gnet, NULL), ns);
    snprintf(what, sizeof(what), "%s train_grad leaves running stats", tag);
    cmp(what, gs0, s0, ns, T_EXACT);
    free(gs0);
    for (int step = 0; step < 2; step++) {
        t_batch_t sb;
        heads_t sh;
        t_batch_init(&sb, Btrain, planes, hand, 4);
        heads_attach(&sh, &sb);
        KOMA_ASSERT(nn_train_step(ctr, &sb.b, &cm, err, sizeof(err)) == 0);
        KOMA_ASSERT(nn_train_step(gtr, &sb.b, &gm, err, sizeof(err)) == 0);
        gpu_ok(tag);
        snprintf(what, sizeof(what), "%s train_step %d", tag, step + 1);
        cmp_metrics(what, &gm, &cm, Btrain, l2);
        CHECK(gm.step == cm.step && gm.lr == cm.lr);
        t_batch_free(&sb);
    }
    net_cmp_steps(nc, gtr, p0);
    free(p0), free(s0);
    /* nn_eval_batch (folded BN after the update) on the same weights: the CPU
     * net's are copied over first. ReLU nets' updates differ by design (see
     * test_net), and folded BN with two steps of running stats amplifies that into
     * loss differences of several times the outputs' tolerance (fp32 value_loss
     * 3e-4 relative on an H100); the eval path itself is what is checked here. */
    copy_weights_to_gpu(gnet, cnet);
    gpu_ok(tag);
    KOMA_ASSERT(nn_eval_batch(ctr, &tb.b, &cm, err, sizeof(err)) == 0);
    KOMA_ASSERT(nn_eval_batch(gtr, &tb.b, &gm, err, sizeof(err)) == 0);
    gpu_ok(tag);
    snprintf(what, sizeof(what), "%s eval_batch", tag);
    gm.grad_norm = cm.grad_norm = 0;
    cmp_metrics(what, &gm, &cm, Btrain, l2);
    t_batch_free(&tb);
    nn_optim_free(gtr);
}

/* One net on both backends: inference outputs, one gradient pass, two SGD
 * steps, nn_eval_batch (net_forward_checks, net_train_checks). */
static void test_net(int32_t blocks, int32_t ch, nn_act_t act, int32_t planes, int32_t hand, int32_t Btrain) {
    char err[512];
    net_case_t nc = {.planes = planes, .hand = hand, .Btrain = Btrain};
    snprintf(nc.tag, sizeof(nc.tag), "net %dx%d%s%.0d%s%s %s", blocks, ch, g_net_gpool ? "g" : "", (int)g_net_gpool,
             (g_net_heads & NN_HEAD_MOVES_LEFT) ? "m" : "", (g_net_heads & NN_HEAD_OPP_POLICY) ? "o" : "", nn_act_name(act));
    /* ReLU's derivative jumps at 0: any rounding difference moves a few of the
     * millions of pre-activations across the kink, and batch norm spreads each
     * flip over the whole batch, so ReLU gradients differ by far more than the
     * rounding (measured with KOMA_GPU_TEST_FAKE: 1e-7 perturbations give 1e-4
     * gradient differences, growing 5x per SGD step). Outputs and losses are
     * continuous and checked tightly for every net; gradients, updates and
     * momentum precisely only for the smooth SiLU nets, and for ReLU nets
     * against a sanity bound (a wrong sign, scale or layout gives rel L2 >= 1).
     * The max over the board of a global-pooling block is such a kink too:
     * BF16's rounding moves some channels' argmax (KOMA_GPU_TEST_FAKE bf16:
     * SiLU 2x32g2 grads rel L2 0.06-0.08), so those nets are smooth only in
     * the FP32 and TF32 passes. */
    nc.smooth = act != NN_ACT_RELU && !(g_net_gpool && (M_->flags & NN_CUDA_BF16));
    nc.l2 = nc.smooth ? M_->net_l2 : M_->relu_l2;
    nn_net_config_t cfg = {.blocks = blocks, .channels = ch, .act = act, .in_planes = planes, .in_hand = hand, .features_version = 1,
                           .gpool = g_net_gpool, .heads = g_net_heads};
    nn_net_t *cnet = nn_net_new(C_, &cfg, 1234, err, sizeof(err));
    nn_net_t *gnet = nn_net_new(G_, &cfg, 999, err, sizeof(err)); /* other seed: the copy must win */
    KOMA_ASSERT(cnet && gnet);
    copy_weights_to_gpu(gnet, cnet);
    nn_train_config_t tc = nn_train_config_default();
    tc.warmup_steps = 0, tc.schedule = NN_SCHED_CONSTANT, tc.lr = 0.05f, tc.clip_norm = 1.0f, tc.bn_momentum = 0.1f;
    tc.weight_decay = 1e-3f, tc.q_mix = 0.3f, tc.q_draw = 0.2f, tc.w_legal = 20.0f;
    /* warm the running statistics on the CPU so inference sees non-trivial BN folding */
    nn_optim_t *ctr = nn_optim_new(cnet, &tc, Btrain, err, sizeof(err));
    KOMA_ASSERT(ctr);
    heads_t hd;
    for (int s = 0; s < 2; s++) {
        t_batch_t w;
        t_batch_init(&w, Btrain, planes, hand, 3);
        heads_attach(&hd, &w);
        KOMA_ASSERT(nn_train_step(ctr, &w.b, NULL, err, sizeof(err)) == 0);
        t_batch_free(&w);
    }
    nn_optim_set_step_count(ctr, 0);
    int64_t np, ns, nd;
    nn_net_params(cnet, &np, &nd);
    nn_net_stats(cnet, &ns);
    memset(nn_optim_momentum(ctr), 0, sizeof(float) * (size_t)np);
    copy_weights_to_gpu(gnet, cnet);
    nc.cnet = cnet, nc.gnet = gnet, nc.ctr = ctr, nc.tc = tc, nc.np = np, nc.ns = ns;
    net_forward_checks(&nc);
    net_train_checks(&nc);
    nn_optim_free(ctr);
    nn_net_free(gnet);
    nn_net_free(cnet);
}

/* On the device: nn_train_step_launch with the metrics read one step late
 * (page-locked records behind fences: the route train/loop.c takes) against
 * nn_train_step in turn, on an instance with deterministic algorithms: the
 * same metrics, each named by its step, and the same weights (bit for bit is
 * expected; the tolerance is the smallest of the pass). Then the head
 * convolutions merged (the default) against apart on the same device:
 * outputs and three steps within the pass's net tolerances. */
static void test_late_and_merge(void) {
    char err[512], what[128];
    nn_backend_t *D = gpu_new(M_->flags | NN_CUDA_DETERMINISTIC, err, sizeof(err));
    KOMA_ASSERT(D);
    nn_net_config_t cfg = {.blocks = 2, .channels = 32, .act = NN_ACT_SILU, .in_planes = 12, .in_hand = 3,
                           .features_version = 1};
    nn_train_config_t tc = nn_train_config_default();
    tc.warmup_steps = 3, tc.lr = 0.05f, tc.clip_norm = 1.0f, tc.w_legal = 20.0f;
    nn_net_t *na = nn_net_new(D, &cfg, 77, err, sizeof(err)), *nb = nn_net_new(D, &cfg, 77, err, sizeof(err));
    KOMA_ASSERT(na && nb);
    int32_t B = 16, S = 5;
    nn_optim_t *ta = nn_optim_new(na, &tc, B, err, sizeof(err)), *tb = nn_optim_new(nb, &tc, B, err, sizeof(err));
    KOMA_ASSERT(ta && tb);
    t_batch_t bt[5];
    for (int s = 0; s < S; s++) t_batch_init(&bt[s], B - s, cfg.in_planes, cfg.in_hand, 3);
    nn_metrics_t ref[5], got[5];
    int64_t id[5];
    for (int s = 0; s < S; s++) KOMA_ASSERT(nn_train_step(ta, &bt[s].b, &ref[s], err, sizeof(err)) == 0);
    for (int s = 0; s < S; s++) {
        KOMA_ASSERT(nn_train_step_launch(tb, &bt[s].b, &id[s], err, sizeof(err)) == 0);
        if (s > 0) KOMA_ASSERT(nn_train_step_metrics(tb, id[s - 1], &got[s - 1], err, sizeof(err)) == 0);
    }
    KOMA_ASSERT(nn_train_step_metrics(tb, id[S - 1], &got[S - 1], err, sizeof(err)) == 0);
    int same = 1;
    for (int s = 0; s < S; s++) {
        same &= !memcmp(&ref[s], &got[s], sizeof ref[s]);
        CHECK(got[s].step == s + 1);
        snprintf(what, sizeof(what), "one step late, step %d loss", s + 1);
        check_scalar(what, got[s].loss, ref[s].loss, 1e-6, 1e-6);
        snprintf(what, sizeof(what), "one step late, step %d grad_norm", s + 1);
        check_scalar(what, got[s].grad_norm, ref[s].grad_norm, 1e-6, 1e-6);
    }
    int64_t np;
    nn_net_params(na, &np, NULL);
    float *pa = gget(nn_net_params(na, NULL, NULL), np), *pb = gget(nn_net_params(nb, NULL, NULL), np);
    same &= !memcmp(pa, pb, sizeof(float) * (size_t)np);
    cmp("one step late: weights after 5 steps", pb, pa, np, M_->net_stat);
    fprintf(stderr, "[%s] one step late vs nn_train_step: %s\n", M_->name, same ? "bit for bit" : "within tolerance");
    free(pa);
    free(pb);
    /* merged vs apart, same device, same weights */
    nn_net_set_merge_heads(nb, 0);
    CHECK(nn_net_copy_weights(nb, na, err, sizeof(err)) == 0);
    nn_ctx_t *ca = nn_ctx_new(na, NULL, B, err, sizeof(err)), *cb = nn_ctx_new(nb, NULL, B, err, sizeof(err));
    KOMA_ASSERT(ca && cb);
    int64_t NP = (int64_t)B * NN_POLICY_NB;
    float *p1 = malloc(sizeof(float) * NP), *p2 = malloc(sizeof(float) * NP), *l1 = malloc(sizeof(float) * NP),
          *l2 = malloc(sizeof(float) * NP), v1[3 * 16], v2[3 * 16];
    KOMA_ASSERT(nn_forward(ca, B, bt[0].planes, bt[0].hand, p1, v1, l1) == 0);
    KOMA_ASSERT(nn_forward(cb, B, bt[0].planes, bt[0].hand, p2, v2, l2) == 0);
    cmp("merged vs apart: policy", p1, p2, NP, M_->net_out);
    cmp("merged vs apart: value", v1, v2, 3 * B, M_->net_out);
    cmp("merged vs apart: legal", l1, l2, NP, M_->net_out);
    for (int s = 0; s < 3; s++) {
        KOMA_ASSERT(nn_train_step(ta, &bt[s].b, &ref[s], err, sizeof(err)) == 0);
        KOMA_ASSERT(nn_train_step(tb, &bt[s].b, &got[s], err, sizeof(err)) == 0);
    }
    snprintf(what, sizeof(what), "merged vs apart after 3 steps");
    cmp_metrics(what, &ref[2], &got[2], B, M_->net_l2);
    free(p1), free(p2), free(l1), free(l2);
    nn_ctx_free(ca);
    nn_ctx_free(cb);
    for (int s = 0; s < S; s++) t_batch_free(&bt[s]);
    nn_optim_free(ta);
    nn_optim_free(tb);
    nn_net_free(na);
    nn_net_free(nb);
    nn_backend_free(D);
}

static void run_nets(void) {
    test_late_and_merge();
    test_net(1, 17, NN_ACT_SILU, 5, 0, 5);   /* odd channels, no hand, smooth */
    test_net(2, 32, NN_ACT_SILU, 12, 3, 16);
    test_net(2, 24, NN_ACT_RELU, 9, 2, 1);   /* B = 1 training (BN over 81 squares) */
    if (!g_quick) test_net(6, 64, NN_ACT_RELU, 68, 14, 32); /* the engine's input size */
    g_net_gpool = 2; /* global pooling: the pooling blocks leave the fused route between their convs */
    test_net(2, 32, NN_ACT_SILU, 12, 3, 16);
    test_net(3, 24, NN_ACT_RELU, 9, 2, 4);
    g_net_gpool = 0;
    g_net_heads = NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY; /* the moves-left and opponent-reply heads */
    test_net(2, 32, NN_ACT_SILU, 12, 3, 16);
    test_net(2, 24, NN_ACT_RELU, 9, 2, 5);
    g_net_heads = 0;
}

/* atol (x rms), rtol per op class and mode */
static const tmode_t MODES[] = {
    /* Tolerances were checked for headroom against emulated TF32/BF16 rounding
     * (KOMA_GPU_TEST_FAKE=1): observed max |d|/rms tf32 conv 1.5e-3, dense 4.4e-3,
     * net outputs 7.9e-3, SiLU grads rel L2 1.4e-3; bf16 conv 2.1e-2, net outputs
     * 7.3e-2, SiLU grads rel L2 1.8e-2, ReLU grads rel L2 0.34.
     * name  flags             conv          dense         net_out       net_grad      net_stat      kl    prob  l2    relu_l2 */
    {"fp32", NN_CUDA_NO_TF32, {2e-4, 1e-4}, {3e-5, 3e-5}, {2e-4, 2e-4}, {2e-3, 2e-3}, {1e-4, 1e-4}, 1e-7, 1e-4, 1e-3, 0.05},
    {"tf32", 0, {5e-3, 5e-3}, {1e-2, 1e-2}, {3e-2, 3e-2}, {5e-2, 5e-2}, {5e-3, 5e-3}, 2e-4, 1e-2, 1e-2, 0.3},
    {"bf16", NN_CUDA_BF16, {5e-2, 2e-2}, {1e-2, 1e-2}, {0.15, 0.1}, {0.15, 0.1}, {2e-2, 2e-2}, 2e-3, 5e-2, 6e-2, 0.6},
};

int main(int argc, char **argv) {
    const char *fk = getenv("KOMA_GPU_TEST_FAKE");
    g_fake = fk && *fk && strcmp(fk, "0") != 0;
    int ndev = g_fake ? 1 : nn_cuda_device_count();
    if (ndev == 0) {
        char err[256];
        nn_cuda_device_info_t info;
        nn_cuda_device_info(0, &info, err, sizeof(err));
        fprintf(stderr, "test_nn_cuda_gpu: skipped (no CUDA device): %s\n", err);
        return 77;
    }
    int32_t dev = 0, nmodes = 0;
    for (int a = 1; a < argc; a++) {
        if (argv[a][0] >= '0' && argv[a][0] <= '9') dev = atoi(argv[a]);
        else if (strcmp(argv[a], "quick") == 0) g_quick = 1;
        else nmodes++;
    }
    g_dev = dev;
    const char *sc = getenv("KOMA_GPU_TOL_SCALE");
    if (sc && atof(sc) > 0) g_scale = atof(sc);
    nn_cuda_device_info_t info;
    char err[512];
    if (g_fake) {
        memset(&info, 0, sizeof(info));
        snprintf(info.name, sizeof(info.name), "HARNESS SELF-CHECK: the CPU backend with TF32/BF16 rounding, no GPU involved");
        info.cc_major = 9;
    } else if (nn_cuda_device_info(dev, &info, err, sizeof(err)) != 0) {
        fprintf(stderr, "test_nn_cuda_gpu: %s\n", err);
        return 1;
    }
    fprintf(stderr, "device %d: %s, cc %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d; tolerance scale %g%s\n", dev,
            info.name, info.cc_major, info.cc_minor, info.sm_count, (double)info.mem_bytes / (1 << 30),
            info.driver_version, info.runtime_version, g_scale, g_quick ? "; quick: reduced set" : "");
    C_ = nn_backend_cpu_new(0);
    /* bad arguments fail cleanly */
    if (!g_fake) {
        CHECK(nn_backend_cuda_new(ndev + 3, 0, err, sizeof(err)) == NULL && strstr(err, "out of range"));
        fprintf(stderr, "refused: %s\n", err);
    }
    for (int a = 1; a < argc; a++) {
        int known = (argv[a][0] >= '0' && argv[a][0] <= '9') || strcmp(argv[a], "quick") == 0;
        for (size_t m = 0; m < sizeof(MODES) / sizeof(MODES[0]); m++) known |= strcmp(argv[a], MODES[m].name) == 0;
        if (!known) {
            fprintf(stderr, "usage: %s [device] [fp32|tf32|bf16 ...] [quick]: unknown argument '%s'\n", argv[0], argv[a]);
            return 2;
        }
    }
    for (size_t m = 0; m < sizeof(MODES) / sizeof(MODES[0]); m++) {
        int wanted = nmodes == 0;
        for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], MODES[m].name) == 0;
        if (!wanted) continue;
        M_ = &MODES[m];
        if (!g_fake && (M_->flags & NN_CUDA_BF16) && info.cc_major < 8) {
            CHECK(nn_backend_cuda_new(dev, M_->flags, err, sizeof(err)) == NULL);
            fprintf(stderr, "[%s] skipped: %s\n", M_->name, err);
            continue;
        }
        if (!(M_->flags & NN_CUDA_NO_TF32) && info.cc_major < 8)
            fprintf(stderr, "[%s] note: no TF32 on cc %d.%d, this pass runs FP32\n", M_->name, info.cc_major, info.cc_minor);
        g_fake_prec = (M_->flags & NN_CUDA_BF16) ? 2 : (M_->flags & NN_CUDA_NO_TF32) ? 0 : 1;
        G_ = gpu_new(M_->flags, err, sizeof(err));
        if (!G_) {
            fprintf(stderr, "[%s] nn_backend_cuda_new: %s\n", M_->name, err);
            return 1;
        }
        fprintf(stderr, "== pass %s (flags 0x%x, effective 0x%x)\n", M_->name, M_->flags, nn_cuda_flags(G_));
        t_rng = 0x1234567ull + m;
        run_ops();
        run_nets();
        gpu_ok("end of pass");
        nn_backend_free(G_);
        G_ = NULL;
    }
    nn_backend_free(C_);
    return t_done("test_nn_cuda_gpu");
}
