/* test_nn_torch.c - our CPU network against an independent PyTorch model.
 *
 * Writes, per net (ReLU 2x16 and SiLU 1x8, with global pooling, with the
 * moves-left and opponent-reply heads), a weights file and an io file
 * (inputs, our inference logits, our training losses and gradients, and the
 * params / running statistics after one SGD step), then runs
 * tests/nn/torch_ref.py with Debian's /usr/bin/python3, which rebuilds the net in
 * PyTorch (float64), recomputes everything and writes its verdict. Exits 77
 * (skipped) where python3 or torch is missing. */
#include "nn_test.h"

#include "nn/safetensors.h"
#include "nn/weights.h"


static void add(st_writer_t *w, const char *name, st_dtype_t dt, int64_t n, const void *data) {
    KOMA_ASSERT(st_writer_add(w, name, dt, 1, &n, data) == 0);
}

static void dump_case(nn_backend_t *be, const char *tag, nn_act_t act, int32_t blocks, int32_t ch, int32_t gpool,
                      int32_t heads) {
    char err[512], path[700], io[700];
    nn_net_config_t cfg = {.blocks = blocks, .channels = ch, .act = act, .in_planes = 9, .in_hand = 3, .features_version = 2,
                           .gpool = gpool, .heads = heads};
    nn_net_t *net = nn_net_new(be, &cfg, 42, err, sizeof(err));
    KOMA_ASSERT(net);
    nn_train_config_t tc = nn_train_config_default();
    tc.lr = 0.1f, tc.warmup_steps = 0, tc.schedule = NN_SCHED_CONSTANT, tc.weight_decay = 0.01f;
    tc.clip_norm = 0.5f, tc.w_policy = 1.0f, tc.w_value = 0.7f, tc.w_legal = 20.0f;
    tc.q_mix = 0.3f, tc.q_draw = 0.4f, tc.bn_momentum = 0.1f;
    tc.w_moves_left = 0.8f, tc.w_opp_policy = 0.6f;
    int32_t B = 5;
    nn_optim_t *tr = nn_optim_new(net, &tc, B, err, sizeof(err));
    KOMA_ASSERT(tr);
    t_batch_t tb;
    t_batch_init(&tb, B, cfg.in_planes, cfg.in_hand, 4);
    /* the optional heads' targets: plies (row 2 without), the opponent's reply (row 1 without) */
    float ml_t[5] = {12.0f, 80.0f, -1.0f, 3.0f, 31.0f};
    uint32_t opp_off[6] = {0, 2, 2, 3, 5, 6};
    uint16_t opp_lab[6] = {17, 1500, 40, 2186, 0, 999};
    float opp_prob[6] = {0.75f, 0.25f, 1.0f, 0.5f, 0.5f, 1.0f};
    if (heads) tb.b.moves_left = ml_t, tb.b.opp_offsets = opp_off, tb.b.opp_label = opp_lab, tb.b.opp_prob = opp_prob;
    /* give the running statistics something other than 0/1 */
    for (int s = 0; s < 2; s++) {
        t_batch_t warm;
        t_batch_init(&warm, B, cfg.in_planes, cfg.in_hand, 2);
        KOMA_ASSERT(nn_train_step(tr, &warm.b, NULL, err, sizeof(err)) == 0);
        t_batch_free(&warm);
    }
    nn_optim_set_step_count(tr, 0);
    int64_t np, ns;
    nn_net_params(net, &np, NULL);
    nn_net_stats(net, &ns);
    memset(nn_optim_momentum(tr), 0, sizeof(float) * (size_t)np);
    snprintf(path, sizeof(path), "%s/%s.weights.safetensors", t_dir, tag);
    snprintf(io, sizeof(io), "%s/%s.io.safetensors", t_dir, tag);
    KOMA_ASSERT(nn_weights_save(net, NULL, path, err, sizeof(err)) == 0);

    /* inference logits */
    nn_ctx_t *ctx = nn_ctx_new(net, NULL, B, err, sizeof(err));
    float *pol = malloc(sizeof(float) * B * NN_POLICY_NB), *leg = malloc(sizeof(float) * B * NN_POLICY_NB);
    float val[15], ml[5] = {0};
    nn_outputs_t out = {pol, val, leg, (heads & NN_HEAD_MOVES_LEFT) ? ml : NULL};
    KOMA_ASSERT(nn_forward_out(ctx, B, tb.planes, tb.hand, &out) == 0);
    /* training gradients, then one step */
    nn_metrics_t m;
    KOMA_ASSERT(nn_train_grad(tr, &tb.b, &m, err, sizeof(err)) == 0);
    float *grads = malloc(sizeof(float) * (size_t)np);
    memcpy(grads, nn_optim_grads(tr), sizeof(float) * (size_t)np);
    KOMA_ASSERT(nn_train_step(tr, &tb.b, NULL, err, sizeof(err)) == 0);
    double mv[8] = {m.loss, m.policy_loss, m.value_loss, m.legal_loss, m.policy_acc, m.legal_f1, m.moves_left_loss,
                    m.opp_policy_loss};

    st_writer_t *w = st_writer_new();
    add(w, "in.planes", ST_DTYPE_U8, B * nn_packed_bytes(cfg.in_planes), tb.planes);
    add(w, "in.hand", ST_DTYPE_F32, B * cfg.in_hand, tb.hand);
    add(w, "in.legal", ST_DTYPE_U8, B * nn_packed_bytes(NN_POLICY_CH), tb.legal);
    add(w, "in.policy_offsets", ST_DTYPE_U32, B + 1, tb.off);
    add(w, "in.policy_label", ST_DTYPE_U16, tb.off[B], tb.labels);
    add(w, "in.policy_prob", ST_DTYPE_F32, tb.off[B], tb.probs);
    add(w, "in.result", ST_DTYPE_I8, B, tb.result);
    add(w, "in.root_q", ST_DTYPE_F32, B, tb.q);
    add(w, "out.policy", ST_DTYPE_F32, (int64_t)B * NN_POLICY_NB, pol);
    add(w, "out.value", ST_DTYPE_F32, B * 3, val);
    add(w, "out.legal", ST_DTYPE_F32, (int64_t)B * NN_POLICY_NB, leg);
    add(w, "out.metrics", ST_DTYPE_F64, heads ? 8 : 6, mv);
    if (heads) {
        add(w, "in.moves_left", ST_DTYPE_F32, B, ml_t);
        add(w, "in.opp_offsets", ST_DTYPE_U32, B + 1, opp_off);
        add(w, "in.opp_label", ST_DTYPE_U16, opp_off[B], opp_lab);
        add(w, "in.opp_prob", ST_DTYPE_F32, opp_off[B], opp_prob);
        if (heads & NN_HEAD_MOVES_LEFT) add(w, "out.moves_left", ST_DTYPE_F32, B, ml);
    }
    for (int32_t i = 0; i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        static char names[2][256][ST_MAX_NAME];
        KOMA_ASSERT(i < 256);
        snprintf(names[0][i], ST_MAX_NAME, "after.%s", t->name);
        add(w, names[0][i], ST_DTYPE_F32, t->numel, nn_net_tensor_data(net, i));
        if (t->kind == NN_TENSOR_PARAM) {
            snprintf(names[1][i], ST_MAX_NAME, "grad.%s", t->name);
            add(w, names[1][i], ST_DTYPE_F32, t->numel, grads + t->offset);
        }
    }
    char buf[64];
#define META(k, fmt, v) (snprintf(buf, sizeof(buf), fmt, v), st_writer_meta(w, k, buf))
    META("lr", "%.9g", tc.lr);
    META("momentum", "%.9g", tc.momentum);
    META("weight_decay", "%.9g", tc.weight_decay);
    META("clip_norm", "%.9g", tc.clip_norm);
    META("w_policy", "%.9g", tc.w_policy);
    META("w_value", "%.9g", tc.w_value);
    META("w_legal", "%.9g", tc.w_legal);
    META("w_moves_left", "%.9g", tc.w_moves_left);
    META("w_opp_policy", "%.9g", tc.w_opp_policy);
    META("q_mix", "%.9g", tc.q_mix);
    META("q_draw", "%.9g", tc.q_draw);
    META("bn_momentum", "%.9g", tc.bn_momentum);
    META("batch", "%d", (int)B);
#undef META
    KOMA_ASSERT(st_writer_write(w, io, err, sizeof(err)) == 0);
    st_writer_free(w);
    fprintf(stderr, "%s: wrote %s and %s (loss %.5f)\n", tag, path, io, m.loss);
    free(pol), free(leg), free(grads);
    nn_ctx_free(ctx);
    t_batch_free(&tb);
    nn_optim_free(tr);
    nn_net_free(net);
}

int main(void) {
    if (!compat_file_exists("/usr/bin/python3")) {
        fprintf(stderr, "test_nn_torch: /usr/bin/python3 not found: skipped\n");
        return 77;
    }
    {
        /* Can this process run python3 with torch at all? (Not with torch
         * missing; not from a Windows build under wine, which cannot start a
         * Linux program.) */
        const char *probe[] = {"/usr/bin/python3", "-c", "import torch", NULL};
        char perr[512];
        int pst = 0, ran = compat_run(probe, &pst, perr, sizeof perr);
        if (ran != 0 || pst != 0) {
            fprintf(stderr, "test_nn_torch: cannot run `/usr/bin/python3 -c \"import torch\"` (%s): skipped\n",
                    ran != 0 ? perr : "it failed: is python3-torch installed?");
            return 77;
        }
    }
    t_scratch("nn_torch");
    char err[512];
    nn_backend_t *be = nn_backend_cpu_new(0);
    /* the default route: oneDNN where built with it (KOMA_CPU_CONV=ref for the reference) */
    fprintf(stderr, "CPU backend convolution route: %s\n", nn_backend_cpu_conv_route(be));
    dump_case(be, "relu2x16", NN_ACT_RELU, 2, 16, 0, 0);
    dump_case(be, "silu1x8", NN_ACT_SILU, 1, 8, 0, 0);
    /* global pooling (KataGo's bias structure) in block 1 of 2, and in both */
    dump_case(be, "relu2x16g2", NN_ACT_RELU, 2, 16, 2, 0);
    dump_case(be, "silu2x8g1", NN_ACT_SILU, 2, 8, 1, 0);
    /* the moves-left and opponent-reply heads (issue 33 item 3) */
    dump_case(be, "relu2x16mo", NN_ACT_RELU, 2, 16, 0, NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY);
    dump_case(be, "silu2x8g1mo", NN_ACT_SILU, 2, 8, 1, NN_HEAD_MOVES_LEFT | NN_HEAD_OPP_POLICY);
    nn_backend_free(be);
    char verdict_path[700];
    snprintf(verdict_path, sizeof(verdict_path), "%s/verdict.txt", t_dir);
    const char *argv[] = {"/usr/bin/python3", "tests/nn/torch_ref.py", t_dir, "relu2x16", "silu1x8", "relu2x16g2",
                          "silu2x8g1", "relu2x16mo", "silu2x8g1mo", NULL};
    fprintf(stderr, "running: /usr/bin/python3 tests/nn/torch_ref.py %s relu2x16 silu1x8 relu2x16g2 silu2x8g1 relu2x16mo "
            "silu2x8g1mo\n", t_dir);
    fflush(stderr);
    int rc = -1;
    if (compat_run(argv, &rc, err, sizeof err) != 0) fprintf(stderr, "test_nn_torch: %s\n", err);
    size_t len = 0;
    char *v = compat_read_file(verdict_path, &len, err, sizeof(err));
    int code;
    if (!v) {
        fprintf(stderr, "test_nn_torch: no verdict from torch_ref.py (exit status %d): FAILED\n", rc);
        code = 1;
    } else if (strncmp(v, "skip", 4) == 0) {
        fprintf(stderr, "test_nn_torch: torch not available: skipped\n");
        code = 77;
    } else if (strncmp(v, "pass", 4) == 0) {
        fprintf(stderr, "test_nn_torch: all outputs and gradients match PyTorch\n");
        code = 0;
    } else {
        fprintf(stderr, "test_nn_torch: MISMATCH against PyTorch\n");
        code = 1;
    }
    free(v);
    /* leave the files behind on failure for inspection */
    if (code != 1) t_rm_rf(t_dir);
    return code;
}
