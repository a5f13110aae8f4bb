/* cuda_ops_test.h - test_nn_cuda_gpu's op-by-op half: every op of nn/backend.h
 * on the device G_ against the CPU reference C_ on random inputs of several
 * shapes (memory ops and staging, plane expansion, convolutions and the fused
 * unit, batch norm, elementwise ops, gathers, dense, global pooling, the losses,
 * SGD, the sticky error); run_ops runs them all for the current pass. The
 * whole-net comparisons and main are in test_nn_cuda_gpu.c. Header-only, every
 * function static, included by test_nn_cuda_gpu.c alone after cuda_test.h: it
 * is not a test of its own (cmake/module_tests.cmake globs test_*.c only). */
#ifndef KOMA_TESTS_NN_CUDA_OPS_TEST_H
#define KOMA_TESTS_NN_CUDA_OPS_TEST_H

#include "cuda_test.h"

/* ---- memory ops ----------------------------------------------------------------- */
static void test_memory(void) {
    /* larger than the pinned staging (2 x 8 MiB each way): chunking and wrap */
    int64_t n = 5 * 1024 * 1024 + 17; /* floats: 20 MiB */
    float *h = frand(n, 0, 1), *h0 = fdup(h, n), *d = G_->buf_alloc(G_, sizeof(float) * (size_t)n);
    KOMA_ASSERT(d);
    G_->upload(G_, d, h, sizeof(float) * (size_t)n);
    memset(h, 0, sizeof(float) * (size_t)n); /* the caller may reuse its buffer once upload returns */
    float *r = gget(d, n);
    cmp("upload/download 20 MiB", r, h0, n, T_EXACT);
    free(r);
    free(h0);
    /* many small uploads: more than a staging half in total, each checked */
    int32_t k = 3000, m = 1000; /* 3000 x 4000 bytes = 12 MB */
    float *src = frand((int64_t)k * m, 0, 1);
    float *dd = G_->buf_alloc(G_, sizeof(float) * (size_t)k * m);
    KOMA_ASSERT(dd);
    float *tmp = malloc(sizeof(float) * (size_t)m);
    for (int32_t i = 0; i < k; i++) {
        memcpy(tmp, src + (int64_t)i * m, sizeof(float) * (size_t)m);
        G_->upload(G_, dd + (int64_t)i * m, tmp, sizeof(float) * (size_t)m);
        memset(tmp, 0xAB, sizeof(float) * (size_t)m); /* reused at once, as callers do */
    }
    gcmp("3000 small uploads", dd, src, (int64_t)k * m, T_EXACT);
    free(tmp);
    /* memset_zero of a middle range */
    G_->memset_zero(G_, dd + 7, sizeof(float) * 1000);
    for (int i = 7; i < 1007; i++) src[i] = 0.0f;
    gcmp("memset_zero", dd, src, 2000, T_EXACT);
    /* copy, non-overlapping and overlapping both ways (memmove semantics) */
    float *ref = fdup(src, 4096);
    G_->upload(G_, dd, ref, sizeof(float) * 4096);
    G_->copy(G_, dd + 2048, dd, sizeof(float) * 1024);
    memmove(ref + 2048, ref, sizeof(float) * 1024);
    G_->copy(G_, dd + 3, dd, sizeof(float) * 1000); /* forward overlap */
    memmove(ref + 3, ref, sizeof(float) * 1000);
    G_->copy(G_, dd + 100, dd + 117, sizeof(float) * 900); /* backward overlap */
    memmove(ref + 100, ref + 117, sizeof(float) * 900);
    gcmp("copy (plain and overlapping)", dd, ref, 4096, T_EXACT);
    /* copy_2d: a channel slice of an NCHW tensor out and back in (the merged
     * head convolution's split and join, nn/net.c) */
    {
        int32_t B = 5, C = 7, C2 = 16, c0 = 9;
        size_t row = sizeof(float) * (size_t)C * NN_HW, pitch2 = sizeof(float) * (size_t)C2 * NN_HW;
        int64_t nf = (int64_t)B * C2 * NN_HW, ns = (int64_t)B * C * NN_HW;
        float *full = frand(nf, 0, 1), *want = malloc(row * (size_t)B), *back = calloc((size_t)nf, sizeof(float));
        float *gf = G_->buf_alloc(G_, pitch2 * (size_t)B), *gs = G_->buf_alloc(G_, row * (size_t)B);
        KOMA_ASSERT(want && back && gf && gs);
        G_->upload(G_, gf, full, pitch2 * (size_t)B);
        G_->copy_2d(G_, gs, row, gf + (int64_t)c0 * NN_HW, pitch2, row, (size_t)B);
        for (int32_t b = 0; b < B; b++) {
            memcpy(want + (int64_t)b * C * NN_HW, full + ((int64_t)b * C2 + c0) * NN_HW, row);
            memcpy(back + ((int64_t)b * C2 + c0) * NN_HW, want + (int64_t)b * C * NN_HW, row);
        }
        gcmp("copy_2d: channel slice out", gs, want, ns, T_EXACT);
        G_->memset_zero(G_, gf, pitch2 * (size_t)B);
        G_->copy_2d(G_, gf + (int64_t)c0 * NN_HW, pitch2, gs, row, row, (size_t)B);
        gcmp("copy_2d: channel slice back in", gf, back, nf, T_EXACT);
        G_->buf_free(G_, gf);
        G_->buf_free(G_, gs);
        free(full);
        free(want);
        free(back);
    }
    /* fences: a download_async queued before fence 1 has arrived once
     * fence_wait(1) returns, with more work queued after the mark (the CPU
     * stand-in of KOMA_GPU_TEST_FAKE has neither) */
    if (G_->fence_record && G_->host_alloc) {
        float *pin = G_->host_alloc(G_, sizeof(float) * 4096);
        KOMA_ASSERT(pin);
        G_->download_async(G_, pin, dd, sizeof(float) * 4096);
        G_->fence_record(G_, 1);
        G_->memset_zero(G_, dd + 4096, sizeof(float) * 1000000); /* after the mark */
        G_->fence_wait(G_, 1);
        CHECK(nn_cuda_error(G_) == NULL);
        cmp("download_async behind a fence", pin, ref, 4096, T_EXACT);
        G_->host_free(G_, pin);
    }
    gsync(G_);
    gpu_ok("memory");
    /* a buffer of this instance used by a second instance on the same device */
    char err[512];
    nn_backend_t *g2 = gpu_new(M_->flags, err, sizeof(err));
    CHECK(g2 != NULL);
    if (g2) {
        gsync(G_);
        float *e = g2->buf_alloc(g2, sizeof(float) * 4096);
        KOMA_ASSERT(e);
        g2->copy(g2, e, dd, sizeof(float) * 4096);
        float *back = malloc(sizeof(float) * 4096);
        g2->download(g2, back, e, sizeof(float) * 4096);
        CHECK(nn_cuda_error(g2) == NULL);
        cmp("buffer shared by two instances", back, ref, 4096, T_EXACT);
        free(back);
        g2->buf_free(g2, e);
        nn_backend_free(g2);
    }
    free(ref);
    free(src);
    G_->buf_free(G_, dd);
    G_->buf_free(G_, d);
    free(h);
}

/* ---- ops -------------------------------------------------------------------------- */
static void test_expand(int32_t B, int32_t planes, int32_t in_hand) {
    int64_t bpp = nn_packed_bytes(planes), C = planes + in_hand, n = (int64_t)B * C * NN_HW;
    uint8_t *packed = malloc((size_t)(B * bpp));
    for (int64_t i = 0; i < B * bpp; i++) packed[i] = (uint8_t)t_next();
    float *hand = frand((int64_t)B * in_hand, 1, 1);
    float *ref = malloc(sizeof(float) * (size_t)n);
    C_->expand_planes(C_, packed, in_hand ? hand : NULL, B, planes, in_hand, ref);
    uint8_t *gp = gdup(packed, (size_t)(B * bpp));
    float *gh = in_hand ? GF(hand, (int64_t)B * in_hand) : NULL;
    float *go = G_->buf_alloc(G_, sizeof(float) * (size_t)n);
    G_->expand_planes(G_, gp, gh, B, planes, in_hand, go);
    char what[96];
    snprintf(what, sizeof(what), "expand_planes B%d planes %d hand %d", B, planes, in_hand);
    gcmp(what, go, ref, n, T_EXACT);
    G_->buf_free(G_, gp);
    G_->buf_free(G_, gh);
    G_->buf_free(G_, go);
    free(packed), free(hand), free(ref);
}

/* conv fwd (bias on/off), bwd data (accumulate on/off), bwd filter (dbias on/off).
 * ws_mode: 0 the workspace of a larger batch (as net.c sizes it), 1 exactly
 * conv_ws_bytes of this batch, 2 NULL (the backend's own fallback). */
static void test_conv(int32_t B, int32_t cin, int32_t cout, int32_t k, int bias, int acc, int ws_mode) {
    int64_t nx = (int64_t)B * cin * NN_HW, ny = (int64_t)B * cout * NN_HW, nw = (int64_t)cout * cin * k * k;
    float *x = frand(nx, 0, 1), *w = frand(nw, 0, 1.0f / sqrtf((float)(cin * k * k))), *b = frand(cout, 0, 0.5f);
    float *dy = frand(ny, 0, 1), *dx0 = frand(nx, 0, 1), *junk_w = frand(nw, 0, 3), *junk_b = frand(cout, 0, 3);
    float *junk_y = frand(ny, 0, 3);
    /* CPU */
    size_t cws = C_->conv_ws_bytes(C_, B, cin, cout, k);
    void *cw = malloc(cws ? cws : 1);
    float *y = malloc(sizeof(float) * (size_t)ny), *dx = fdup(dx0, nx), *dw = malloc(sizeof(float) * (size_t)nw),
          *db = malloc(sizeof(float) * (size_t)cout);
    C_->conv_fwd(C_, x, w, bias ? b : NULL, B, cin, cout, k, y, cw);
    C_->conv_bwd_data(C_, dy, w, B, cin, cout, k, dx, acc, cw);
    C_->conv_bwd_filter(C_, x, dy, B, cin, cout, k, dw, bias ? db : NULL, cw);
    /* GPU: outputs start as junk to prove overwrite semantics */
    size_t gws = ws_mode == 2 ? 0 : G_->conv_ws_bytes(G_, ws_mode == 0 ? B + 5 : B, cin, cout, k);
    void *gw = ws_mode == 2 ? NULL : G_->buf_alloc(G_, gws ? gws : 1);
    float *gx = GF(x, nx), *gwt = GF(w, nw), *gb = GF(b, cout), *gdy = GF(dy, ny);
    float *junk_x = frand(nx, 0, 3);
    float *gy = GF(junk_y, ny), *gdx = GF(acc ? dx0 : junk_x, nx), *gdw = GF(junk_w, nw), *gdb = GF(junk_b, cout);
    free(junk_x);
    G_->conv_fwd(G_, gx, gwt, bias ? gb : NULL, B, cin, cout, k, gy, gw);
    G_->conv_bwd_data(G_, gdy, gwt, B, cin, cout, k, gdx, acc, gw);
    G_->conv_bwd_filter(G_, gx, gdy, B, cin, cout, k, gdw, bias ? gdb : NULL, gw);
    char what[128];
    const char *wsn[3] = {"ws(B+5)", "ws(B)", "ws NULL"};
    snprintf(what, sizeof(what), "conv_fwd B%d %d->%d k%d%s %s", B, cin, cout, k, bias ? " +bias" : "", wsn[ws_mode]);
    gcmp(what, gy, y, ny, M_->conv);
    snprintf(what, sizeof(what), "conv_bwd_data B%d %d->%d k%d %s", B, cin, cout, k, acc ? "+=" : "=");
    gcmp(what, gdx, dx, nx, M_->conv);
    snprintf(what, sizeof(what), "conv_bwd_filter B%d %d->%d k%d dw", B, cin, cout, k);
    gcmp(what, gdw, dw, nw, M_->conv);
    if (bias) {
        snprintf(what, sizeof(what), "conv_bwd_filter B%d %d->%d k%d dbias", B, cin, cout, k);
        gcmp(what, gdb, db, cout, T_RED);
    } else {
        snprintf(what, sizeof(what), "conv_bwd_filter dbias NULL leaves it");
        gcmp(what, gdb, junk_b, cout, T_EXACT);
    }
    float *bufs[] = {gx, gwt, gb, gdy, gy, gdx, gdw, gdb};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    G_->buf_free(G_, gw);
    free(x), free(w), free(b), free(dy), free(dx0), free(junk_w), free(junk_b), free(junk_y);
    free(cw), free(y), free(dx), free(dw), free(db);
}

/* conv_fwd_act, inference's fused unit, against the CPU's conv_fwd + act_fwd,
 * as forward_infer chains it: stem (plain in, native out), a residual unit
 * (native in and out, residual = the stem's output), then from the native
 * trunk: a head unit with a plain output and an activation, and a 1x1 head
 * without one (plain out). Only plain tensors are compared: the native layout
 * is the backend's own (BF16 NHWC where C % 8 == 0 in the bf16 pass). Also a
 * unit with a plain float residual. Skipped where the backend has no fused op
 * (KOMA_CUDA_NO_FUSE=1). */
static void test_conv_act(int32_t B, int32_t cin, int32_t C, int32_t hc, nn_act_t act) {
    if (!G_->conv_fwd_act) {
        fprintf(stderr, "[%s] conv_fwd_act: not set (KOMA_CUDA_NO_FUSE?): skipped\n", M_->name);
        return;
    }
    int64_t nx = (int64_t)B * cin * NN_HW, nh = (int64_t)B * C * NN_HW, nv = (int64_t)B * hc * NN_HW,
            no = (int64_t)B * 27 * NN_HW;
    float *x = frand(nx, 0, 1), *ws_ = frand((int64_t)C * cin * 9, 0, 1.0f / sqrtf((float)cin * 9));
    float *wb = frand((int64_t)C * C * 9, 0, 1.0f / sqrtf((float)C * 9)), *wv = frand((int64_t)hc * C, 0, 0.3f);
    float *wo = frand((int64_t)27 * C, 0, 0.3f), *bs = frand(C, 0.1f, 0.5f), *bb = frand(C, 0, 0.5f);
    float *bv = frand(hc, 0, 0.5f), *bo = frand(27, 0, 0.5f);
    /* CPU: the unfused ops, NCHW float */
    size_t cws = C_->conv_ws_bytes(C_, B, cin > C ? cin : C, C > 27 ? C : 27, 3);
    void *cw = malloc(cws ? cws : 1);
    float *ra = malloc(sizeof(float) * (size_t)nh), *rb = malloc(sizeof(float) * (size_t)nh);
    float *rv = malloc(sizeof(float) * (size_t)nv), *ro = malloc(sizeof(float) * (size_t)no);
    float *rp = malloc(sizeof(float) * (size_t)nh);
    C_->conv_fwd(C_, x, ws_, bs, B, cin, C, 3, ra, cw);
    C_->act_fwd(C_, ra, NULL, nh, act, ra);
    C_->conv_fwd(C_, ra, wb, bb, B, C, C, 3, rb, cw);
    C_->act_fwd(C_, rb, ra, nh, act, rb);
    C_->conv_fwd(C_, rb, wv, bv, B, C, hc, 1, rv, cw);
    C_->act_fwd(C_, rv, NULL, nv, act, rv);
    C_->conv_fwd(C_, rb, wo, bo, B, C, 27, 1, ro, cw);
    C_->conv_fwd(C_, ra, wb, bb, B, C, C, 3, rp, cw); /* plain in, plain out, plain residual */
    C_->act_fwd(C_, rp, ra, nh, act, rp);
    /* GPU */
    size_t gws = G_->conv_ws_bytes(G_, B, cin > C ? cin : C, C > 27 ? C : 27, 3);
    void *gw = G_->buf_alloc(G_, gws ? gws : 1);
    float *gx = GF(x, nx), *gws_ = GF(ws_, (int64_t)C * cin * 9), *gwb = GF(wb, (int64_t)C * C * 9);
    float *gwv = GF(wv, (int64_t)hc * C), *gwo = GF(wo, (int64_t)27 * C), *gbs = GF(bs, C), *gbb = GF(bb, C);
    float *gbv = GF(bv, hc), *gbo = GF(bo, 27), *gra = GF(ra, nh);
    float *ga = GF(rb, nh), *gb = GF(rb, nh), *gv = GF(rv, nv), *go = GF(ro, no), *gp = GF(ra, nh); /* junk-free sizes */
    const int32_t X = NN_CONV_X_NATIVE, Y = NN_CONV_Y_NATIVE;
    G_->conv_fwd_act(G_, gx, gws_, gbs, NULL, B, cin, C, 3, act, ga, gw, Y);
    G_->conv_fwd_act(G_, ga, gwb, gbb, ga, B, C, C, 3, act, gb, gw, X | Y);
    G_->conv_fwd_act(G_, gb, gwv, gbv, NULL, B, C, hc, 1, act, gv, gw, X);
    G_->conv_fwd_act(G_, gb, gwo, gbo, NULL, B, C, 27, 1, act, go, gw, X | NN_CONV_NO_ACT);
    G_->conv_fwd_act(G_, gra, gwb, gbb, gra, B, C, C, 3, act, gp, gw, 0);
    /* three convs deep, BF16 storage between them in the bf16 pass: the net-output tolerance */
    char what[128];
    snprintf(what, sizeof(what), "conv_fwd_act B%d %d->%d->%d->%d %s", B, cin, C, C, hc, nn_act_name(act));
    gcmp(what, gv, rv, nv, M_->net_out);
    snprintf(what, sizeof(what), "conv_fwd_act B%d %d->%d->%d->27 no act", B, cin, C, C);
    gcmp(what, go, ro, no, M_->net_out);
    snprintf(what, sizeof(what), "conv_fwd_act B%d %d->%d plain, +res %s", B, C, C, nn_act_name(act));
    gcmp(what, gp, rp, nh, M_->conv);
    float *bufs[] = {gx, gws_, gwb, gwv, gwo, gbs, gbb, gbv, gbo, gra, ga, gb, gv, go, gp};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    G_->buf_free(G_, gw);
    free(x), free(ws_), free(wb), free(wv), free(wo), free(bs), free(bb), free(bv), free(bo);
    free(cw), free(ra), free(rb), free(rv), free(ro), free(rp);
}

/* bn_fwd_train + bn_bwd (relu 0), or training's fused unit (relu 1; 2 with a
 * residual): bn_relu_fwd_train + bn_relu_bwd against the CPU's (its BN, ReLU
 * and copy in sequence). The backward runs from the CPU's statistics (and y,
 * so that the ReLU masks agree exactly) and the original x. */
static void test_bn(int32_t B, int32_t C, int32_t HW, int inplace, int relu) {
    if (relu && (!G_->bn_relu_fwd_train || !G_->bn_relu_bwd)) {
        fprintf(stderr, "[%s] bn_relu: the backend has no fused training unit\n", M_->name);
        t_judge(0);
        return;
    }
    int64_t n = (int64_t)B * C * HW;
    float *x = frand(n, 3, 2), *gamma = frand(C, 1, 0.3f), *beta = frand(C, 0, 0.5f), *rm = frand(C, 0, 0.1f);
    float *rv = frand(C, 1, 0.1f), *dy = frand(n, 0, 1), *res = relu == 2 ? frand(n, 0, 1) : NULL;
    float eps = 1e-5f, mom = 0.1f;
    /* CPU */
    float *cy = inplace ? fdup(x, n) : malloc(sizeof(float) * (size_t)n), *cm = malloc(sizeof(float) * (size_t)C),
          *ci = malloc(sizeof(float) * (size_t)C), *crm = fdup(rm, C), *crv = fdup(rv, C);
    const float *cx = inplace ? cy : x;
    if (relu) C_->bn_relu_fwd_train(C_, cx, gamma, beta, res, B, C, HW, eps, mom, crm, crv, cy, cm, ci);
    else C_->bn_fwd_train(C_, cx, gamma, beta, B, C, HW, eps, mom, crm, crv, cy, cm, ci);
    float *cdx = fdup(dy, n), *cdres = relu ? malloc(sizeof(float) * (size_t)n) : NULL;
    float *cdg = malloc(sizeof(float) * (size_t)C), *cdb = malloc(sizeof(float) * (size_t)C);
    if (relu) C_->bn_relu_bwd(C_, x, cy, cdx, gamma, cm, ci, B, C, HW, cdres, cdx, cdg, cdb);
    else C_->bn_bwd(C_, x, inplace ? cdx : dy, gamma, cm, ci, B, C, HW, cdx, cdg, cdb);
    if (relu) {
        int64_t zeros = 0;
        for (int64_t i = 0; i < n; i++) zeros += cy[i] == 0.0f;
        CHECK(zeros > n / 10 && zeros < n - n / 10); /* the mask matters */
    }
    /* GPU */
    float *gx = GF(x, n), *gg = GF(gamma, C), *gbt = GF(beta, C), *grm = GF(rm, C), *grv = GF(rv, C);
    float *gr = res ? GF(res, n) : NULL;
    float *gy = inplace ? gx : G_->buf_alloc(G_, sizeof(float) * (size_t)n), *gm = G_->buf_alloc(G_, sizeof(float) * (size_t)C),
          *gi = G_->buf_alloc(G_, sizeof(float) * (size_t)C);
    if (relu) G_->bn_relu_fwd_train(G_, gx, gg, gbt, gr, B, C, HW, eps, mom, grm, grv, gy, gm, gi);
    else G_->bn_fwd_train(G_, gx, gg, gbt, B, C, HW, eps, mom, grm, grv, gy, gm, gi);
    char what[96];
    const char *op = relu ? "bn_relu_fwd_train" : "bn_fwd_train", *bop = relu ? "bn_relu_bwd" : "bn_bwd";
    snprintf(what, sizeof(what), "%s B%d C%d HW%d y%s%s", op, B, C, HW, inplace ? " in-place" : "", res ? " +res" : "");
    gcmp(what, gy, cy, n, T_RED);
    static const char *const stat[4] = {"save_mean", "save_invstd", "running_mean", "running_var"};
    float *gs[4] = {gm, gi, grm, grv}, *cs[4] = {cm, ci, crm, crv};
    for (int i = 0; i < 4; i++) {
        snprintf(what, sizeof(what), "%s B%d C%d %s", op, B, C, stat[i]);
        gcmp(what, gs[i], cs[i], C, T_RED);
    }
    G_->upload(G_, gx, x, sizeof(float) * (size_t)n);
    float *gyb = relu && inplace ? G_->buf_alloc(G_, sizeof(float) * (size_t)n) : gy; /* y beside x */
    if (relu) G_->upload(G_, gyb, cy, sizeof(float) * (size_t)n);
    G_->upload(G_, gm, cm, sizeof(float) * (size_t)C);
    G_->upload(G_, gi, ci, sizeof(float) * (size_t)C);
    float *gdy = GF(dy, n), *gdx = inplace || relu ? gdy : G_->buf_alloc(G_, sizeof(float) * (size_t)n);
    float *gdres = relu ? G_->buf_alloc(G_, sizeof(float) * (size_t)n) : NULL;
    float *gdg = G_->buf_alloc(G_, sizeof(float) * (size_t)C), *gdb = G_->buf_alloc(G_, sizeof(float) * (size_t)C);
    if (relu) G_->bn_relu_bwd(G_, gx, gyb, gdy, gg, gm, gi, B, C, HW, gdres, gdx, gdg, gdb);
    else G_->bn_bwd(G_, gx, gdy, gg, gm, gi, B, C, HW, gdx, gdg, gdb);
    snprintf(what, sizeof(what), "%s B%d C%d HW%d dx%s", bop, B, C, HW, inplace ? " in-place" : "");
    gcmp(what, gdx, cdx, n, T_RED);
    if (relu) {
        snprintf(what, sizeof(what), "%s B%d C%d HW%d dres", bop, B, C, HW);
        gcmp(what, gdres, cdres, n, T_ELEM);
    }
    snprintf(what, sizeof(what), "%s B%d C%d dgamma", bop, B, C);
    gcmp(what, gdg, cdg, C, T_RED);
    snprintf(what, sizeof(what), "%s B%d C%d dbeta", bop, B, C);
    gcmp(what, gdb, cdb, C, T_RED);
    float *bufs[] = {gx, gg, gbt, grm, grv, gm, gi, gdy, gdg, gdb, gr, gdres,
                     inplace ? NULL : gy, inplace || relu ? NULL : gdx, gyb != gy ? gyb : NULL};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        if (bufs[i]) G_->buf_free(G_, bufs[i]);
    free(x), free(gamma), free(beta), free(rm), free(rv), free(dy), free(res), free(cy), free(cm), free(ci);
    free(crm), free(crv), free(cdx), free(cdres), free(cdg), free(cdb);
}

static void test_bn_fold(int32_t cout, int32_t kdim) {
    int64_t n = (int64_t)cout * kdim;
    float *w = frand(n, 0, 1), *g = frand(cout, 1, 0.3f), *bt = frand(cout, 0, 1), *m = frand(cout, 0, 1), *v = frand(cout, 0, 1);
    for (int32_t i = 0; i < cout; i++) v[i] = fabsf(v[i]) + 0.01f;
    float *cw = malloc(sizeof(float) * (size_t)n), *cb = malloc(sizeof(float) * (size_t)cout);
    C_->bn_fold(C_, w, g, bt, m, v, cout, kdim, 1e-5f, cw, cb);
    float *gw = GF(w, n), *gg = GF(g, cout), *gbt = GF(bt, cout), *gm = GF(m, cout), *gv = GF(v, cout);
    float *gow = G_->buf_alloc(G_, sizeof(float) * (size_t)n), *gob = G_->buf_alloc(G_, sizeof(float) * (size_t)cout);
    G_->bn_fold(G_, gw, gg, gbt, gm, gv, cout, kdim, 1e-5f, gow, gob);
    char what[96];
    snprintf(what, sizeof(what), "bn_fold cout %d kdim %d w", cout, kdim);
    gcmp(what, gow, cw, n, T_ELEM);
    snprintf(what, sizeof(what), "bn_fold cout %d kdim %d b", cout, kdim);
    gcmp(what, gob, cb, cout, T_ELEM);
    float *bufs[] = {gw, gg, gbt, gm, gv, gow, gob};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    free(w), free(g), free(bt), free(m), free(v), free(cw), free(cb);
}

static void test_elementwise(int64_t n) {
    float *x = frand(n, 0, 2), *r = frand(n, 0, 1), *dy = frand(n, 0, 1);
    for (int64_t i = 0; i < n; i += 97) x[i] = 0.0f; /* the ReLU kink itself */
    char what[96];
    for (int a = 0; a < NN_ACT_NB; a++)
        for (int res = 0; res < 2; res++)
            for (int inplace = 0; inplace < 2; inplace++) {
                float *cy = fdup(x, n);
                C_->act_fwd(C_, inplace ? cy : x, res ? r : NULL, n, (nn_act_t)a, cy);
                float *gx = GF(x, n), *gr = GF(r, n), *gy = inplace ? gx : G_->buf_alloc(G_, sizeof(float) * (size_t)n);
                G_->act_fwd(G_, gx, res ? gr : NULL, n, (nn_act_t)a, gy);
                snprintf(what, sizeof(what), "act_fwd %s n %lld%s%s", nn_act_name((nn_act_t)a), (long long)n,
                         res ? " +res" : "", inplace ? " in-place" : "");
                gcmp(what, gy, cy, n, T_ELEM);
                /* act_bwd with z = x (+ r) */
                float *z = fdup(x, n);
                if (res)
                    for (int64_t i = 0; i < n; i++) z[i] = x[i] + r[i];
                float *cdx = fdup(dy, n);
                C_->act_bwd(C_, inplace ? cdx : dy, z, n, (nn_act_t)a, cdx);
                float *gz = GF(z, n), *gdy = GF(dy, n), *gdx = inplace ? gdy : G_->buf_alloc(G_, sizeof(float) * (size_t)n);
                G_->act_bwd(G_, gdy, gz, n, (nn_act_t)a, gdx);
                snprintf(what, sizeof(what), "act_bwd %s n %lld%s", nn_act_name((nn_act_t)a), (long long)n,
                         inplace ? " in-place" : "");
                gcmp(what, gdx, cdx, n, T_ELEM);
                G_->buf_free(G_, gx), G_->buf_free(G_, gr), G_->buf_free(G_, gz), G_->buf_free(G_, gdy);
                if (!inplace) G_->buf_free(G_, gy), G_->buf_free(G_, gdx);
                free(cy), free(z), free(cdx);
            }
    /* add: y separate, y == a, y == b */
    float *cy = malloc(sizeof(float) * (size_t)n);
    C_->add(C_, x, r, n, cy);
    for (int alias = 0; alias < 3; alias++) {
        float *ga = GF(x, n), *gb = GF(r, n), *gy = alias == 1 ? ga : alias == 2 ? gb : G_->buf_alloc(G_, sizeof(float) * (size_t)n);
        G_->add(G_, ga, gb, n, gy);
        snprintf(what, sizeof(what), "add n %lld %s", (long long)n, alias == 1 ? "y=a" : alias == 2 ? "y=b" : "");
        gcmp(what, gy, cy, n, T_EXACT);
        G_->buf_free(G_, ga), G_->buf_free(G_, gb);
        if (alias == 0) G_->buf_free(G_, gy);
    }
    /* gather: scattered offsets (repeats, the first and last element) */
    int64_t ng = n / 3 + 2;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)ng);
    uint64_t h = 12345;
    for (int64_t i = 0; i < ng; i++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        idx[i] = (int32_t)((h >> 33) % (uint64_t)n);
    }
    idx[0] = 0, idx[ng - 1] = (int32_t)(n - 1);
    float *cg = malloc(sizeof(float) * (size_t)ng);
    C_->gather(C_, x, idx, ng, cg);
    float *gx = GF(x, n), *gg = G_->buf_alloc(G_, sizeof(float) * (size_t)ng);
    int32_t *gidx = G_->buf_alloc(G_, sizeof(int32_t) * (size_t)ng);
    G_->upload(G_, gidx, idx, sizeof(int32_t) * (size_t)ng);
    G_->gather(G_, gx, gidx, ng, gg);
    snprintf(what, sizeof(what), "gather %lld of n %lld", (long long)ng, (long long)n);
    gcmp(what, gg, cg, ng, T_EXACT);
    /* the stopwatch (the server's busy figure) over the same gather */
    G_->timer_mark(G_, 0);
    G_->gather(G_, gx, gidx, ng, gg);
    G_->timer_mark(G_, 1);
    if (G_->sync) G_->sync(G_);
    double ms = G_->timer_ms(G_);
    CHECKF(ms >= 0.0 && ms < 10000.0, "stopwatch over a gather of %lld: %.4f ms", (long long)ng, ms);
    G_->buf_free(G_, gx), G_->buf_free(G_, gg), G_->buf_free(G_, gidx);
    free(idx), free(cg);
    free(cy), free(x), free(r), free(dy);
}

/* gather_rows (the resident training window): two sources of R rows each,
 * rows drawn with repeats, policy entries of 0 to 40 a row; every output
 * byte for byte the CPU twin's. */
static void test_gather_rows(int32_t B, int32_t R, int32_t pb, int32_t hn, int32_t lb) {
    enum { NSRC = 2 };
    uint64_t h = 777 + (uint64_t)B;
#define NEXT() (h = h * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(h >> 33))
    uint8_t *planes[NSRC], *legal[NSRC];
    float *hand[NSRC], *probs[NSRC], *q[NSRC];
    uint16_t *labels[NSRC];
    int8_t *result[NSRC];
    uint32_t *start[NSRC];
    nn_rows_src_t hs[NSRC], gs[NSRC];
    void *gmem[NSRC][7];
    for (int s = 0; s < NSRC; s++) {
        start[s] = malloc(sizeof(uint32_t) * (size_t)(R + 1));
        start[s][0] = 0;
        for (int32_t r = 0; r < R; r++) start[s][r + 1] = start[s][r] + (NEXT() % 5 == 0 ? 0 : NEXT() % 41);
        uint32_t nnz = start[s][R];
        planes[s] = malloc((size_t)R * pb + 1), legal[s] = malloc((size_t)R * lb + 1);
        hand[s] = frand((int64_t)R * hn, 0, 1), probs[s] = frand(nnz, 0.5f, 0.2f), q[s] = frand(R, 0, 0.5f);
        labels[s] = malloc(sizeof(uint16_t) * (nnz + 1)), result[s] = malloc((size_t)R);
        for (int64_t i = 0; i < (int64_t)R * pb; i++) planes[s][i] = (uint8_t)NEXT();
        for (int64_t i = 0; i < (int64_t)R * lb; i++) legal[s][i] = (uint8_t)NEXT();
        for (uint32_t i = 0; i < nnz; i++) labels[s][i] = (uint16_t)(NEXT() % 2187);
        for (int32_t r = 0; r < R; r++) result[s][r] = (int8_t)((int)(NEXT() % 3) - 1);
        hs[s] = (nn_rows_src_t){planes[s], hand[s], legal[s], labels[s], probs[s], result[s], q[s]};
        gmem[s][0] = gdup(planes[s], (size_t)R * pb), gmem[s][1] = gdup(hand[s], sizeof(float) * (size_t)R * hn);
        gmem[s][2] = gdup(legal[s], (size_t)R * lb), gmem[s][3] = gdup(labels[s], sizeof(uint16_t) * nnz);
        gmem[s][4] = gdup(probs[s], sizeof(float) * nnz), gmem[s][5] = gdup(result[s], (size_t)R);
        gmem[s][6] = gdup(q[s], sizeof(float) * (size_t)R);
        gs[s] = (nn_rows_src_t){gmem[s][0], gmem[s][1], gmem[s][2], gmem[s][3], gmem[s][4], gmem[s][5], gmem[s][6]};
    }
    nn_row_ref_t *refs = malloc(sizeof(nn_row_ref_t) * (size_t)B);
    uint32_t *off = malloc(sizeof(uint32_t) * (size_t)(B + 1));
    off[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        int32_t s = (int32_t)(NEXT() % NSRC);
        uint32_t r = b == 0 ? 0 : b == B - 1 ? (uint32_t)R - 1 : NEXT() % (uint32_t)R;
        refs[b] = (nn_row_ref_t){.src = s, .row = r, .policy_begin = start[s][r]};
        off[b + 1] = off[b] + start[s][r + 1] - start[s][r];
    }
#undef NEXT
    uint32_t nnz = off[B];
    uint8_t *cp = malloc((size_t)B * pb + 1), *cl = malloc((size_t)B * lb + 1);
    float *ch = malloc(sizeof(float) * ((size_t)B * hn + 1)), *cpr = malloc(sizeof(float) * (nnz + 1)),
          *cq = malloc(sizeof(float) * (size_t)B);
    uint16_t *clb = malloc(sizeof(uint16_t) * (nnz + 1));
    int8_t *cr = malloc((size_t)B);
    C_->gather_rows(C_, hs, refs, off, B, pb, hn, lb, cp, ch, cl, clb, cpr, cr, cq);
    void *gsrc = gdup(gs, sizeof gs), *grefs = gdup(refs, sizeof(nn_row_ref_t) * (size_t)B),
         *goff = gdup(off, sizeof(uint32_t) * (size_t)(B + 1));
    void *gp = G_->buf_alloc(G_, (size_t)B * pb + 1), *gh = G_->buf_alloc(G_, sizeof(float) * ((size_t)B * hn + 1)),
         *gl = G_->buf_alloc(G_, (size_t)B * lb + 1), *glb = G_->buf_alloc(G_, sizeof(uint16_t) * (nnz + 1)),
         *gpr = G_->buf_alloc(G_, sizeof(float) * (nnz + 1)), *gr = G_->buf_alloc(G_, (size_t)B),
         *gq = G_->buf_alloc(G_, sizeof(float) * (size_t)B);
    G_->gather_rows(G_, gsrc, grefs, goff, B, pb, hn, lb, gp, gh, gl, glb, gpr, gr, gq);
    gpu_ok("gather_rows");
    struct {
        const char *name;
        const void *cpu, *gpu;
        size_t bytes;
    } col[7] = {{"planes", cp, gp, (size_t)B * pb},
                {"hand", ch, gh, sizeof(float) * (size_t)B * hn},
                {"legal", cl, gl, (size_t)B * lb},
                {"labels", clb, glb, sizeof(uint16_t) * nnz},
                {"probs", cpr, gpr, sizeof(float) * nnz},
                {"result", cr, gr, (size_t)B},
                {"q", cq, gq, sizeof(float) * (size_t)B}};
    for (int i = 0; i < 7; i++) {
        uint8_t *got = malloc(col[i].bytes + 1);
        if (col[i].bytes) G_->download(G_, got, col[i].gpu, col[i].bytes);
        gpu_ok("gather_rows download");
        int same = !memcmp(got, col[i].cpu, col[i].bytes);
        fprintf(stderr, "[%s] gather_rows B %d R %d %-8s %zu bytes %s\n", M_->name, B, R, col[i].name, col[i].bytes,
                same ? "ok" : "MISMATCH");
        t_judge(same);
        free(got);
        G_->buf_free(G_, (void *)col[i].gpu);
    }
    G_->buf_free(G_, gsrc), G_->buf_free(G_, grefs), G_->buf_free(G_, goff);
    for (int s = 0; s < NSRC; s++) {
        for (int k = 0; k < 7; k++) G_->buf_free(G_, gmem[s][k]);
        free(planes[s]), free(legal[s]), free(hand[s]), free(probs[s]), free(q[s]), free(labels[s]), free(result[s]);
        free(start[s]);
    }
    free(refs), free(off), free(cp), free(cl), free(ch), free(cpr), free(cq), free(clb), free(cr);
}

static void test_dense(int32_t B, int32_t in, int32_t out, int with_b, int with_dx) {
    float *x = frand((int64_t)B * in, 0, 1), *w = frand((int64_t)out * in, 0, 1.0f / sqrtf((float)in)), *b = frand(out, 0, 1);
    float *dy = frand((int64_t)B * out, 0, 1), *junk = frand(out, 0, 5);
    float *cy = malloc(sizeof(float) * (size_t)B * out), *cdx = malloc(sizeof(float) * (size_t)B * in),
          *cdw = malloc(sizeof(float) * (size_t)out * in), *cdb = malloc(sizeof(float) * (size_t)out);
    C_->dense_fwd(C_, x, w, with_b ? b : NULL, B, in, out, cy);
    C_->dense_bwd(C_, x, w, dy, B, in, out, with_dx ? cdx : NULL, cdw, with_b ? cdb : NULL);
    float *gx = GF(x, (int64_t)B * in), *gw = GF(w, (int64_t)out * in), *gb = GF(b, out), *gdy = GF(dy, (int64_t)B * out);
    float *gy = G_->buf_alloc(G_, sizeof(float) * (size_t)B * out), *gdx = G_->buf_alloc(G_, sizeof(float) * (size_t)B * in),
          *gdw = G_->buf_alloc(G_, sizeof(float) * (size_t)out * in), *gdb = GF(junk, out);
    G_->dense_fwd(G_, gx, gw, with_b ? gb : NULL, B, in, out, gy);
    G_->dense_bwd(G_, gx, gw, gdy, B, in, out, with_dx ? gdx : NULL, gdw, with_b ? gdb : NULL);
    char what[96];
    snprintf(what, sizeof(what), "dense_fwd B%d %d->%d%s", B, in, out, with_b ? " +b" : "");
    gcmp(what, gy, cy, (int64_t)B * out, M_->dense);
    if (with_dx) {
        snprintf(what, sizeof(what), "dense_bwd B%d %d->%d dx", B, in, out);
        gcmp(what, gdx, cdx, (int64_t)B * in, M_->dense);
    }
    snprintf(what, sizeof(what), "dense_bwd B%d %d->%d dw", B, in, out);
    gcmp(what, gdw, cdw, (int64_t)out * in, M_->dense);
    snprintf(what, sizeof(what), "dense_bwd B%d %d->%d db%s", B, in, out, with_b ? "" : " NULL leaves it");
    gcmp(what, gdb, with_b ? cdb : junk, out, with_b ? T_RED : T_EXACT);
    float *bufs[] = {gx, gw, gb, gdy, gy, gdx, gdw, gdb};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    free(x), free(w), free(b), free(dy), free(junk), free(cy), free(cdx), free(cdw), free(cdb);
}

/* Global pooling (nn/backend.h's pool_fwd/pool_bwd/chan_bias_fwd/chan_bias_bwd):
 * the board's mean and max per channel, its backward added into a gradient
 * that is not zero (ties in x: the first square takes the max's gradient),
 * the channel bias broadcast (apart and in place) and its sum over squares. */
static void test_gpool(int32_t B, int32_t C) {
    int64_t n = (int64_t)B * C * NN_HW, np = (int64_t)B * 2 * C, nb = (int64_t)B * C;
    float *x = frand(n, 0.5f, 1), *dp = frand(np, 0, 1), *dx0 = frand(n, 0, 1), *bias = frand(nb, 0, 1);
    for (int64_t i = 0; i < nb; i += 5) /* a channel of equal values: the max's gradient goes to square 0 */
        for (int32_t q = 0; q < NN_HW; q++) x[i * NN_HW + q] = 0.25f;
    float *cp = malloc(sizeof(float) * (size_t)np), *cdx = fdup(dx0, n), *cy = malloc(sizeof(float) * (size_t)n),
          *cdb = malloc(sizeof(float) * (size_t)nb);
    C_->pool_fwd(C_, x, B, C, cp);
    C_->pool_bwd(C_, x, dp, B, C, cdx);
    C_->chan_bias_fwd(C_, x, bias, B, C, cy);
    C_->chan_bias_bwd(C_, x, B, C, cdb);
    float *gx = GF(x, n), *gdp = GF(dp, np), *gdx = GF(dx0, n), *gbias = GF(bias, nb);
    float *gp = G_->buf_alloc(G_, sizeof(float) * (size_t)np), *gy = G_->buf_alloc(G_, sizeof(float) * (size_t)n),
          *gdb = G_->buf_alloc(G_, sizeof(float) * (size_t)nb), *gx2 = GF(x, n);
    G_->pool_fwd(G_, gx, B, C, gp);
    G_->pool_bwd(G_, gx, gdp, B, C, gdx);
    G_->chan_bias_fwd(G_, gx, gbias, B, C, gy);
    G_->chan_bias_fwd(G_, gx2, gbias, B, C, gx2); /* in place */
    G_->chan_bias_bwd(G_, gx, B, C, gdb);
    char what[96];
    snprintf(what, sizeof(what), "pool_fwd B%d C%d (mean, max)", B, C);
    gcmp(what, gp, cp, np, T_RED);
    snprintf(what, sizeof(what), "pool_bwd B%d C%d (added)", B, C);
    gcmp(what, gdx, cdx, n, T_ELEM);
    snprintf(what, sizeof(what), "chan_bias_fwd B%d C%d", B, C);
    gcmp(what, gy, cy, n, T_EXACT);
    snprintf(what, sizeof(what), "chan_bias_fwd B%d C%d in place", B, C);
    gcmp(what, gx2, cy, n, T_EXACT);
    snprintf(what, sizeof(what), "chan_bias_bwd B%d C%d", B, C);
    gcmp(what, gdb, cdb, nb, T_RED);
    float *bufs[] = {gx, gdp, gdx, gbias, gp, gy, gdb, gx2};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) G_->buf_free(G_, bufs[i]);
    free(x), free(dp), free(dx0), free(bias), free(cp), free(cdx), free(cy), free(cdb);
}

/* stats start non-zero: loss ops ADD into them */
static void stats_init(float *s) {
    for (int i = 0; i < NN_STAT_NB; i++) s[i] = 0.5f * (float)(i + 1);
}

static void cmp_stats(const char *what, const float *gs, const float *cs, int first, int last, double count_slack) {
    char w[128];
    static const char *names[NN_STAT_NB] = {"policy_loss", "policy_correct", "value_loss", "legal_loss",
                                            "legal_tp", "legal_fp", "legal_fn", "gnorm2",
                                            "ml_loss", "ml_abs", "ml_count", "opp_loss", "opp_correct"};
    for (int i = first; i <= last; i++) {
        snprintf(w, sizeof(w), "%s stats.%s", what, names[i]);
        int count = i == NN_STAT_POLICY_CORRECT || i == NN_STAT_LEGAL_TP || i == NN_STAT_LEGAL_FP || i == NN_STAT_LEGAL_FN ||
                    i == NN_STAT_ML_COUNT;
        check_scalar(w, gs[i], cs[i], count ? count_slack : 1e-6, count ? 0 : 1e-5);
    }
}

static void test_policy_loss(int32_t B, int32_t N, int32_t max_labels) {
    float *z = frand((int64_t)B * N, 0, 2);
    uint32_t *off = calloc((size_t)B + 1, sizeof(uint32_t));
    uint16_t *lab = calloc((size_t)B * (max_labels + 1), sizeof(uint16_t));
    float *prob = calloc((size_t)B * (max_labels + 1), sizeof(float));
    for (int32_t b = 0; b < B; b++) {
        int32_t k = b % 7 == 3 ? 0 : 1 + (int32_t)(t_next() % (uint64_t)max_labels); /* some rows have no target */
        uint32_t o = off[b];
        for (int32_t j = 0; j < k; j++) {
            lab[o + j] = (uint16_t)(t_next() % (uint64_t)N);
            prob[o + j] = (float)(0.05 + t_unif());
        }
        if (k >= 2 && b % 5 == 1) { /* a duplicated label and a tie in the target */
            lab[o + 1] = lab[o];
            prob[o + 1] = prob[o];
        }
        if (b % 11 == 2) { /* a tie in the logits: argmax goes to the lower index */
            float mx = -1e30f;
            for (int32_t i = 0; i < N; i++) mx = fmaxf(mx, z[(int64_t)b * N + i]);
            z[(int64_t)b * N + N - 1] = mx;
            z[(int64_t)b * N + N / 2] = mx;
        }
        off[b + 1] = o + (uint32_t)k;
    }
    uint32_t nnz = off[B];
    float scale = 1.0f / (float)B, cs[NN_STAT_NB], gs[NN_STAT_NB];
    float *cd = malloc(sizeof(float) * (size_t)B * N);
    stats_init(cs);
    C_->policy_loss(C_, z, off, lab, prob, B, N, scale, cd, cs);
    stats_init(gs);
    float *gz = GF(z, (int64_t)B * N), *gd = G_->buf_alloc(G_, sizeof(float) * (size_t)B * N), *gst = GF(gs, NN_STAT_NB);
    uint32_t *goff = gdup(off, sizeof(uint32_t) * (size_t)(B + 1));
    uint16_t *glab = gdup(lab, sizeof(uint16_t) * (nnz ? nnz : 1));
    float *gprob = gdup(prob, sizeof(float) * (nnz ? nnz : 1));
    G_->policy_loss(G_, gz, goff, glab, gprob, B, N, scale, gd, gst);
    char what[96];
    snprintf(what, sizeof(what), "policy_loss B%d N%d dlogits", B, N);
    gcmp(what, gd, cd, (int64_t)B * N, T_ELEM);
    G_->download(G_, gs, gst, sizeof(gs));
    snprintf(what, sizeof(what), "policy_loss B%d N%d", B, N);
    cmp_stats(what, gs, cs, NN_STAT_POLICY_LOSS, NN_STAT_POLICY_CORRECT, 0);
    for (int i = NN_STAT_VALUE_LOSS; i < NN_STAT_NB; i++) CHECK(gs[i] == 0.5f * (float)(i + 1)); /* untouched */
    G_->buf_free(G_, gz), G_->buf_free(G_, gd), G_->buf_free(G_, gst), G_->buf_free(G_, goff), G_->buf_free(G_, glab),
        G_->buf_free(G_, gprob);
    free(z), free(off), free(lab), free(prob), free(cd);
}

static void test_value(int32_t B, int32_t K) {
    int8_t *res = malloc((size_t)B);
    float *q = frand(B, 0, 0.8f); /* some outside [-1, 1]: clamped */
    for (int32_t b = 0; b < B; b++) res[b] = (int8_t)((int)(t_next() % 3) - 1);
    char what[96];
    if (K == 3) {
        float *ct = malloc(sizeof(float) * (size_t)B * 3);
        C_->value_target(C_, res, q, B, 0.3f, 0.25f, ct);
        int8_t *gr = gdup(res, (size_t)B);
        float *gq = GF(q, B), *gt = G_->buf_alloc(G_, sizeof(float) * (size_t)B * 3);
        G_->value_target(G_, gr, gq, B, 0.3f, 0.25f, gt);
        snprintf(what, sizeof(what), "value_target B%d", B);
        gcmp(what, gt, ct, (int64_t)B * 3, T_ELEM);
        G_->buf_free(G_, gr), G_->buf_free(G_, gq), G_->buf_free(G_, gt);
        free(ct);
    }
    float *z = frand((int64_t)B * K, 0, 2), *t = frand((int64_t)B * K, 0, 1);
    for (int64_t i = 0; i < (int64_t)B * K; i++) t[i] = fabsf(t[i]); /* need not sum to 1 */
    float scale = 0.7f / (float)B, cs[NN_STAT_NB], gs[NN_STAT_NB];
    float *cd = malloc(sizeof(float) * (size_t)B * K);
    stats_init(cs);
    C_->value_loss(C_, z, t, B, K, scale, cd, cs);
    stats_init(gs);
    float *gz = GF(z, (int64_t)B * K), *gt = GF(t, (int64_t)B * K), *gd = G_->buf_alloc(G_, sizeof(float) * (size_t)B * K),
          *gst = GF(gs, NN_STAT_NB);
    G_->value_loss(G_, gz, gt, B, K, scale, gd, gst);
    snprintf(what, sizeof(what), "value_loss B%d K%d dlogits", B, K);
    gcmp(what, gd, cd, (int64_t)B * K, T_ELEM);
    G_->download(G_, gs, gst, sizeof(gs));
    snprintf(what, sizeof(what), "value_loss B%d K%d", B, K);
    cmp_stats(what, gs, cs, NN_STAT_VALUE_LOSS, NN_STAT_VALUE_LOSS, 0);
    CHECK(gs[NN_STAT_POLICY_LOSS] == 0.5f && gs[NN_STAT_LEGAL_LOSS] == 2.0f);
    G_->buf_free(G_, gz), G_->buf_free(G_, gt), G_->buf_free(G_, gd), G_->buf_free(G_, gst);
    free(res), free(q), free(z), free(t), free(cd);
}

static void test_legal_loss(int32_t B, int32_t N) {
    int64_t n = (int64_t)B * N;
    float *z = frand(n, -1, 2), *t = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        t[i] = t_unif() < 0.1 ? 1.0f : 0.0f;
        if (i % 53 == 0) z[i] = 0.0f; /* exactly at the threshold: predicted legal */
    }
    float scale = 3.0f / (float)n, cs[NN_STAT_NB], gs[NN_STAT_NB];
    float *cd = malloc(sizeof(float) * (size_t)n);
    stats_init(cs);
    C_->legal_loss(C_, z, t, B, N, scale, cd, cs);
    stats_init(gs);
    float *gz = GF(z, n), *gt = GF(t, n), *gd = G_->buf_alloc(G_, sizeof(float) * (size_t)n), *gst = GF(gs, NN_STAT_NB);
    G_->legal_loss(G_, gz, gt, B, N, scale, gd, gst);
    char what[96];
    snprintf(what, sizeof(what), "legal_loss B%d N%d dlogits", B, N);
    gcmp(what, gd, cd, n, T_ELEM);
    G_->download(G_, gs, gst, sizeof(gs));
    snprintf(what, sizeof(what), "legal_loss B%d N%d", B, N);
    cmp_stats(what, gs, cs, NN_STAT_LEGAL_LOSS, NN_STAT_LEGAL_FN, 0);
    G_->buf_free(G_, gz), G_->buf_free(G_, gt), G_->buf_free(G_, gd), G_->buf_free(G_, gst);
    free(z), free(t), free(cd);
}

/* moves_left_loss (the moves-left head's Huber loss): predictions on both
 * sides of the delta, rows without a target (-1), exact zeros. */
static void test_moves_left_loss(int32_t B) {
    uint64_t keep = t_rng; /* the draws of the tests after this one as they were before it */
    float *z = frand(B, 1.5f, 1.0f), *t = malloc(sizeof(float) * (size_t)B);
    for (int32_t b = 0; b < B; b++) {
        t[b] = b % 5 == 3 ? -1.0f : (float)(t_next() % 120);
        if (b % 17 == 0) z[b] = 0.0f;
    }
    float scale = 0.9f / (float)B, cs[NN_STAT_NB], gs[NN_STAT_NB];
    float *cd = malloc(sizeof(float) * (size_t)B);
    stats_init(cs);
    C_->moves_left_loss(C_, z, t, B, NN_ML_SCALE, NN_ML_HUBER, scale, cd, cs);
    stats_init(gs);
    float *gz = GF(z, B), *gt = GF(t, B), *gd = G_->buf_alloc(G_, sizeof(float) * (size_t)B), *gst = GF(gs, NN_STAT_NB);
    G_->moves_left_loss(G_, gz, gt, B, NN_ML_SCALE, NN_ML_HUBER, scale, gd, gst);
    char what[96];
    snprintf(what, sizeof(what), "moves_left_loss B%d dpred", B);
    gcmp(what, gd, cd, B, T_ELEM);
    G_->download(G_, gs, gst, sizeof(gs));
    snprintf(what, sizeof(what), "moves_left_loss B%d", B);
    cmp_stats(what, gs, cs, NN_STAT_ML_LOSS, NN_STAT_ML_COUNT, 0);
    for (int i = 0; i < NN_STAT_ML_LOSS; i++) CHECK(gs[i] == 0.5f * (float)(i + 1)); /* untouched */
    G_->buf_free(G_, gz), G_->buf_free(G_, gt), G_->buf_free(G_, gd), G_->buf_free(G_, gst);
    free(z), free(t), free(cd);
    t_rng = keep;
}

/* gather_heads (the optional heads' targets from the resident window): two
 * sources, one with a moves_left column and one without, opponent replies
 * of 0 to 30 entries from rows of either source, one-hot ones on a row's
 * move_label; byte for byte the CPU's. */
static void test_gather_heads(int32_t B, int32_t R) {
    enum { NSRC = 2 };
    uint64_t keep = t_rng; /* the draws of the tests after this one as they were before it */
    int16_t *ml = malloc(sizeof(int16_t) * (size_t)R);
    for (int32_t r = 0; r < R; r++) ml[r] = (int16_t)((int)(t_next() % 300) - 1);
    uint32_t nnz = (uint32_t)R * 30;
    uint16_t *labels = malloc(sizeof(uint16_t) * nnz);
    float *probs = frand(nnz, 0.5f, 0.2f);
    for (uint32_t i = 0; i < nnz; i++) labels[i] = (uint16_t)(t_next() % 2187);
    uint16_t *mlab = malloc(sizeof(uint16_t) * (size_t)R);
    for (int32_t r = 0; r < R; r++) mlab[r] = (uint16_t)(t_next() % 2187);
    nn_rows_src_t hs[NSRC] = {{.labels = labels, .probs = probs, .moves_left = ml, .move_label = mlab},
                              {.labels = labels, .probs = probs, .move_label = mlab}};
    void *gml = gdup(ml, sizeof(int16_t) * (size_t)R), *glab = gdup(labels, sizeof(uint16_t) * nnz), *gpr = GF(probs, nnz),
         *gmlab = gdup(mlab, sizeof(uint16_t) * (size_t)R);
    nn_rows_src_t gs[NSRC] = {{.labels = glab, .probs = gpr, .moves_left = gml, .move_label = gmlab},
                              {.labels = glab, .probs = gpr, .move_label = gmlab}};
    nn_row_ref_t *refs = malloc(sizeof(nn_row_ref_t) * (size_t)B), *orefs = malloc(sizeof(nn_row_ref_t) * (size_t)B);
    uint32_t *off = malloc(sizeof(uint32_t) * (size_t)(B + 1));
    off[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        uint32_t r = (uint32_t)(t_next() % (uint32_t)R), k = b % 4 == 1 ? 0 : (uint32_t)(t_next() % 31);
        uint32_t onehot = b % 7 == 3; /* the move played: one entry on its label */
        if (onehot) k = 1;
        refs[b] = (nn_row_ref_t){.src = (int32_t)(t_next() % NSRC), .row = r};
        orefs[b] = (nn_row_ref_t){.src = (int32_t)(t_next() % NSRC), .row = r, .policy_begin = r * 30, .onehot = onehot};
        off[b + 1] = off[b] + k;
    }
    uint32_t n = off[B];
    float *cml = malloc(sizeof(float) * (size_t)B), *cpr = malloc(sizeof(float) * (n + 1));
    uint16_t *clb = malloc(sizeof(uint16_t) * (n + 1));
    C_->gather_heads(C_, hs, refs, orefs, off, B, cml, clb, cpr);
    void *gsrc = gdup(gs, sizeof gs), *grefs = gdup(refs, sizeof(nn_row_ref_t) * (size_t)B),
         *gorefs = gdup(orefs, sizeof(nn_row_ref_t) * (size_t)B), *goff = gdup(off, sizeof(uint32_t) * (size_t)(B + 1));
    void *o_ml = G_->buf_alloc(G_, sizeof(float) * (size_t)B), *o_lb = G_->buf_alloc(G_, sizeof(uint16_t) * (n + 1)),
         *o_pr = G_->buf_alloc(G_, sizeof(float) * (n + 1));
    G_->gather_heads(G_, gsrc, grefs, gorefs, goff, B, o_ml, o_lb, o_pr);
    gpu_ok("gather_heads");
    float *g_ml = malloc(sizeof(float) * (size_t)B), *g_pr = malloc(sizeof(float) * (n + 1));
    uint16_t *g_lb = malloc(sizeof(uint16_t) * (n + 1));
    G_->download(G_, g_ml, o_ml, sizeof(float) * (size_t)B);
    if (n) G_->download(G_, g_lb, o_lb, sizeof(uint16_t) * n), G_->download(G_, g_pr, o_pr, sizeof(float) * n);
    gpu_ok("gather_heads download");
    int same = !memcmp(g_ml, cml, sizeof(float) * (size_t)B) && !memcmp(g_lb, clb, sizeof(uint16_t) * n) &&
               !memcmp(g_pr, cpr, sizeof(float) * n);
    int minus = 0; /* the source without the column gives -1 */
    for (int32_t b = 0; b < B; b++) minus += refs[b].src == 1 && cml[b] == -1.0f;
    fprintf(stderr, "[%s] gather_heads B %d R %d: moves_left, %u reply entries %s\n", M_->name, B, R, n,
            same ? "ok" : "MISMATCH");
    t_judge(same);
    int want = 0;
    for (int32_t b = 0; b < B; b++) want += refs[b].src == 1;
    CHECK(minus == want);
    int hot = 1; /* the one-hot entries hold the row's move label, probability 1 */
    for (int32_t b = 3; b < B; b += 7) hot &= clb[off[b]] == mlab[orefs[b].row] && cpr[off[b]] == 1.0f;
    CHECK(hot);
    free(mlab);
    void *bufs[] = {gml, glab, gpr, gmlab, gsrc, grefs, gorefs, goff, o_ml, o_lb, o_pr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) G_->buf_free(G_, bufs[i]);
    free(ml), free(labels), free(probs), free(refs), free(orefs), free(off), free(cml), free(cpr), free(clb);
    free(g_ml), free(g_pr), free(g_lb);
    t_rng = keep;
}

static void test_sum_squares(int64_t n) {
    float *x = frand(n, 0, 1), cs = 1.5f, gs = 1.5f; /* adds into *out */
    C_->sum_squares(C_, x, n, &cs);
    float *gx = GF(x, n), *go = GF(&gs, 1);
    G_->sum_squares(G_, gx, n, go);
    G_->download(G_, &gs, go, sizeof(float));
    char what[96];
    snprintf(what, sizeof(what), "sum_squares n %lld", (long long)n);
    check_scalar(what, gs, cs, 0, 2e-6);
    G_->buf_free(G_, gx), G_->buf_free(G_, go);
    free(x);
}

static void test_sgd(int64_t n, int nesterov, float wd, float clip, int with_gnorm) {
    float *p = frand(n, 0, 1), *g = frand(n, 0, 0.5f), *v = frand(n, 0, 0.1f);
    float gn2 = 0;
    for (int64_t i = 0; i < n; i++) gn2 += g[i] * g[i];
    nn_sgd_args_t a = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = wd, .clip_norm = clip, .nesterov = nesterov};
    float *cp = fdup(p, n), *cv = fdup(v, n);
    C_->sgd_step(C_, cp, g, cv, n, with_gnorm ? &gn2 : NULL, &a);
    float *gp = GF(p, n), *gg = GF(g, n), *gv = GF(v, n), *gn = GF(&gn2, 1);
    G_->sgd_step(G_, gp, gg, gv, n, with_gnorm ? gn : NULL, &a);
    char what[128];
    snprintf(what, sizeof(what), "sgd n %lld nesterov %d wd %g clip %g%s p", (long long)n, nesterov, wd, clip,
             with_gnorm ? "" : " gnorm NULL");
    gcmp(what, gp, cp, n, T_ELEM);
    what[strlen(what) - 1] = 'v';
    gcmp(what, gv, cv, n, T_ELEM);
    /* lr and weight decay read from device memory (the recorded training
     * step's route): the same update as from the arguments */
    float hy[2] = {a.lr, a.weight_decay};
    float *gp2 = GF(p, n), *gv2 = GF(v, n), *ghy = GF(hy, 2);
    nn_sgd_args_t ad = a;
    ad.lr = 123.0f, ad.weight_decay = 7.0f; /* ignored */
    ad.hyper = ghy;
    G_->sgd_step(G_, gp2, gg, gv2, n, with_gnorm ? gn : NULL, &ad);
    what[strlen(what) - 1] = 'p';
    strncat(what, " (hyper)", sizeof(what) - strlen(what) - 1);
    gcmp(what, gp2, cp, n, T_ELEM);
    G_->buf_free(G_, gp), G_->buf_free(G_, gg), G_->buf_free(G_, gv), G_->buf_free(G_, gn);
    G_->buf_free(G_, gp2), G_->buf_free(G_, gv2), G_->buf_free(G_, ghy);
    free(p), free(g), free(v), free(cp), free(cv);
}

/* An instance records its first failure, goes quiet, and poisons downloads. */
static void test_sticky_error(void) {
    if (g_fake) return;
    char err[512];
    nn_backend_t *g = nn_backend_cuda_new(g_dev, M_->flags & ~(uint32_t)NN_CUDA_ABORT_ON_ERROR, err, sizeof(err));
    KOMA_ASSERT(g);
    CHECK(nn_backend_is_cuda(g) && !nn_backend_is_cuda(C_));
    CHECK(nn_cuda_error(g) == NULL);
    float *d = g->buf_alloc(g, 4 * 81 * sizeof(float));
    KOMA_ASSERT(d);
    fprintf(stderr, "[%s] sticky error: an unsupported conv (k = 2) must fail once, loudly:\n", M_->name);
    g->conv_fwd(g, d, d, NULL, 1, 2, 2, 2, d, NULL); /* k = 2 is outside the interface */
    const char *e = nn_cuda_error(g);
    CHECK(e != NULL && strstr(e, "kernel size 2") != NULL);
    float out[4] = {1, 2, 3, 4};
    g->download(g, out, d, sizeof(out));
    CHECK(isnan(out[0]) && isnan(out[3]));
    g->buf_free(g, d);
    nn_backend_free(g);
}

static void run_ops(void) {
    test_memory();
    gpu_ok("memory");
    test_expand(1, 5, 0);
    test_expand(3, 68, 14);
    test_expand(17, 27, 0);
    test_expand(2, 1, 3);
    gpu_ok("expand");
    /* B, cin, cout, k, bias, accumulate, workspace */
    test_conv(1, 5, 7, 3, 1, 0, 0);
    test_conv(1, 82, 64, 3, 0, 1, 1);
    test_conv(3, 7, 5, 1, 1, 1, 0);
    test_conv(8, 64, 64, 3, 0, 0, 0);
    test_conv(5, 33, 27, 1, 1, 0, 1);
    test_conv(16, 64, 8, 1, 0, 1, 2);
    test_conv(2, 3, 4, 3, 1, 1, 2);
    if (!g_quick) {
        test_conv(37, 128, 128, 3, 1, 1, 0);
        test_conv(64, 64, 64, 3, 0, 0, 1);
    }
    gpu_ok("conv");
    /* B, stem planes, trunk channels, head channels, act: NHWC trunks (C % 8 == 0), an NCHW one */
    test_conv_act(3, 82, 16, 2, NN_ACT_RELU);
    test_conv_act(5, 82, 16, 8, NN_ACT_SILU);
    test_conv_act(2, 7, 12, 3, NN_ACT_RELU);
    if (!g_quick) test_conv_act(64, 82, 64, 2, NN_ACT_RELU);
    gpu_ok("conv_fwd_act");
    { /* the other algorithm choosers: cuDNN heuristics, deterministic algorithms only */
        char err[512];
        nn_backend_t *keep = G_;
        G_ = gpu_new(M_->flags | NN_CUDA_HEURISTIC | NN_CUDA_DETERMINISTIC, err, sizeof(err));
        if (!t_judge(G_ != NULL)) {
            fprintf(stderr, "[%s] heuristic+deterministic instance: %s\n", M_->name, err);
        } else {
            fprintf(stderr, "[%s] convs with NN_CUDA_HEURISTIC | NN_CUDA_DETERMINISTIC:\n", M_->name);
            test_conv(9, 64, 64, 3, 1, 1, 0);
            test_conv(4, 82, 32, 3, 0, 0, 1);
            test_conv(4, 32, 27, 1, 1, 0, 0);
            gpu_ok("conv heuristic/deterministic");
            nn_backend_free(G_);
        }
        G_ = keep;
    }
    test_bn(1, 5, 81, 0, 0);
    test_bn(3, 64, 81, 1, 0);
    test_bn(17, 8, 81, 0, 0);
    test_bn(2, 3, 7, 1, 0);
    test_bn(300, 33, 81, 0, 0);
    test_bn(257, 128, 81, 1, 0); /* several partial blocks per channel, B not a multiple of them */
    test_bn(1000, 16, 81, 0, 0);
    test_bn(3, 8, 81, 0, 1); /* training's fused unit */
    test_bn(257, 128, 81, 0, 2);
    test_bn(64, 33, 81, 1, 2);
    gpu_ok("bn");
    test_bn_fold(5, 63);
    test_bn_fold(64, 576);
    test_bn_fold(8, 64);
    gpu_ok("bn_fold");
    test_elementwise(1);
    test_elementwise(81 * 64 * 3 + 5);
    test_elementwise(1000003);
    gpu_ok("elementwise");
    test_gather_rows(1, 1, 831, 14, 274);
    test_gather_rows(300, 50, 831, 14, 274);
    test_gather_rows(1024, 3000, 831, 0, 274);
    test_gather_heads(1, 1);
    test_gather_heads(300, 50);
    test_gather_heads(5000, 700); /* more rows than blocks: grid-stride */
    test_dense(1, 648, 128, 1, 1);
    test_dense(7, 128, 3, 1, 0);
    test_dense(33, 5, 9, 0, 1);
    test_dense(256, 648, 128, 1, 1);
    gpu_ok("dense");
    test_gpool(1, 1);
    test_gpool(3, 16);
    test_gpool(257, 64);
    test_gpool(1024, 128);
    gpu_ok("global pooling");
    test_policy_loss(1, NN_POLICY_NB, 1);
    test_policy_loss(5, NN_POLICY_NB, 40);
    test_policy_loss(1030, NN_POLICY_NB, 8); /* more rows than reduction blocks */
    test_policy_loss(9, 50, 300);            /* more targets than threads per row */
    gpu_ok("policy_loss");
    test_value(1, 3);
    test_value(9, 3);
    test_value(2000, 3);
    test_value(7, 5);
    gpu_ok("value");
    test_legal_loss(1, NN_POLICY_NB);
    test_legal_loss(4, NN_POLICY_NB);
    test_legal_loss(3, 10);
    test_legal_loss(200, NN_POLICY_NB); /* > CU_RED_MAX blocks of work: grid-stride */
    gpu_ok("legal_loss");
    test_moves_left_loss(1);
    test_moves_left_loss(37);
    test_moves_left_loss(300000); /* more rows than reduction blocks */
    gpu_ok("moves_left_loss");
    test_sum_squares(1);
    test_sum_squares(1000);
    test_sum_squares(3000001);
    gpu_ok("sum_squares");
    test_sgd(1, 1, 1e-4f, 10.0f, 1);
    test_sgd(100003, 1, 1e-4f, 0.5f, 1); /* clipping active */
    test_sgd(100003, 0, 0.0f, 0.5f, 1);
    test_sgd(4099, 1, 1e-3f, 0.5f, 0); /* gnorm2 NULL: no clipping */
    test_sgd(4099, 0, 1e-3f, 0.0f, 1); /* clip <= 0: off */
    gpu_ok("sgd");
    test_sticky_error();
}

#endif
