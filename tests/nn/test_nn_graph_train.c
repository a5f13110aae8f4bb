/* test_nn_graph_train.c - recorded training steps (nn/net.c's queue_step over
 * a backend's graph_begin / graph_end / graph_launch, nn/backend.h), on the
 * CPU: a stand-in backend records every op between graph_begin and graph_end
 * instead of running it, and graph_launch replays the list with the values
 * the ops were called with, as a CUDA graph replays its kernels. Checks that:
 *  - steps on staged batches (the resident window's) run as ops twice, the
 *    third is recorded, the later ones are replays that run no op, and every
 *    step's weights, running statistics, momentum and metrics equal, bit for
 *    bit, those of a plain CPU trainer on the same batches uploaded from the
 *    host;
 *  - the learning rate changes every step (warmup, then cosine) and the
 *    replays follow it: lr and weight decay are read from device memory
 *    (sgd_step's hyper), not frozen into the recording;
 *  - new settings (nn_optim_set_config: momentum, loss weights) and
 *    another batch size get recordings of their own, never a stale replay;
 *  - host batches (uploads) are never recorded;
 *  - a failed recording costs nothing: that step and the later ones run as
 *    ops, still equal to the reference.
 * The CUDA backend's stream capture of a step is device-only. */
#include "nn_test.h"

#include <stdint.h>
#include <string.h>

enum {
    OP_MEMSET, OP_COPY, OP_COPY_2D, OP_EXPAND, OP_CONV, OP_BWD_DATA, OP_BWD_FILTER, OP_BN_FWD, OP_BN_BWD, OP_ACT,
    OP_ADD, OP_ACT_BWD, OP_DENSE, OP_DENSE_BWD, OP_POLICY_LOSS, OP_VALUE_TARGET, OP_VALUE_LOSS, OP_LEGAL_LOSS,
    OP_SUMSQ, OP_SGD
};

/* One recorded call: its pointers, integers and floats as they were passed. */
typedef struct {
    int op;
    const void *p[6];
    void *o[5];
    int64_t i[6];
    float f[3];
    nn_sgd_args_t sgd;
} call_t;

#define REC_MAX 4096
#define REC_GRAPHS 4

typedef struct {
    uint64_t key;
    int32_t n;
    call_t *calls;
} graph_t;

typedef struct {
    nn_backend_t be; /* first: a stand_t * is its nn_backend_t * */
    nn_backend_t *cpu;
    int recording, off, fail_end, overflow;
    graph_t cur, g[REC_GRAPHS];
    int next;
    int64_t ops_run, begins, ends, launches;
} stand_t;

static stand_t *S(nn_backend_t *be) { return (stand_t *)be; }

static void replay(nn_backend_t *c, const call_t *k) {
    switch (k->op) {
    case OP_MEMSET: c->memset_zero(c, k->o[0], (size_t)k->i[0]); break;
    case OP_COPY: c->copy(c, k->o[0], k->p[0], (size_t)k->i[0]); break;
    case OP_COPY_2D:
        c->copy_2d(c, k->o[0], (size_t)k->i[0], k->p[0], (size_t)k->i[1], (size_t)k->i[2], (size_t)k->i[3]);
        break;
    case OP_EXPAND:
        c->expand_planes(c, k->p[0], k->p[1], (int32_t)k->i[0], (int32_t)k->i[1], (int32_t)k->i[2], k->o[0]);
        break;
    case OP_CONV:
        c->conv_fwd(c, k->p[0], k->p[1], k->p[2], (int32_t)k->i[0], (int32_t)k->i[1], (int32_t)k->i[2],
                    (int32_t)k->i[3], k->o[0], k->o[1]);
        break;
    case OP_BWD_DATA:
        c->conv_bwd_data(c, k->p[0], k->p[1], (int32_t)k->i[0], (int32_t)k->i[1], (int32_t)k->i[2], (int32_t)k->i[3],
                         k->o[0], (int32_t)k->i[4], k->o[1]);
        break;
    case OP_BWD_FILTER:
        c->conv_bwd_filter(c, k->p[0], k->p[1], (int32_t)k->i[0], (int32_t)k->i[1], (int32_t)k->i[2],
                           (int32_t)k->i[3], k->o[0], k->o[1], k->o[2]);
        break;
    case OP_BN_FWD:
        c->bn_fwd_train(c, k->p[0], k->p[1], k->p[2], (int32_t)k->i[0], (int32_t)k->i[1], (int32_t)k->i[2], k->f[0],
                        k->f[1], k->o[0], k->o[1], k->o[2], k->o[3], k->o[4]);
        break;
    case OP_BN_BWD:
        c->bn_bwd(c, k->p[0], k->p[1], k->p[2], k->p[3], k->p[4], (int32_t)k->i[0], (int32_t)k->i[1], (int32_t)k->i[2],
                  k->o[0], k->o[1], k->o[2]);
        break;
    case OP_ACT: c->act_fwd(c, k->p[0], k->p[1], k->i[0], (nn_act_t)k->i[1], k->o[0]); break;
    case OP_ADD: c->add(c, k->p[0], k->p[1], k->i[0], k->o[0]); break;
    case OP_ACT_BWD: c->act_bwd(c, k->p[0], k->p[1], k->i[0], (nn_act_t)k->i[1], k->o[0]); break;
    case OP_DENSE:
        c->dense_fwd(c, k->p[0], k->p[1], k->p[2], (int32_t)k->i[0], (int32_t)k->i[1], (int32_t)k->i[2], k->o[0]);
        break;
    case OP_DENSE_BWD:
        c->dense_bwd(c, k->p[0], k->p[1], k->p[2], (int32_t)k->i[0], (int32_t)k->i[1], (int32_t)k->i[2], k->o[0],
                     k->o[1], k->o[2]);
        break;
    case OP_POLICY_LOSS:
        c->policy_loss(c, k->p[0], k->p[1], k->p[2], k->p[3], (int32_t)k->i[0], (int32_t)k->i[1], k->f[0], k->o[0],
                       k->o[1]);
        break;
    case OP_VALUE_TARGET:
        c->value_target(c, k->p[0], k->p[1], (int32_t)k->i[0], k->f[0], k->f[1], k->o[0]);
        break;
    case OP_VALUE_LOSS:
        c->value_loss(c, k->p[0], k->p[1], (int32_t)k->i[0], (int32_t)k->i[1], k->f[0], k->o[0], k->o[1]);
        break;
    case OP_LEGAL_LOSS:
        c->legal_loss(c, k->p[0], k->p[1], (int32_t)k->i[0], (int32_t)k->i[1], k->f[0], k->o[0], k->o[1]);
        break;
    case OP_SUMSQ: c->sum_squares(c, k->p[0], k->i[0], k->o[0]); break;
    case OP_SGD: c->sgd_step(c, k->o[0], k->p[0], k->o[1], k->i[0], k->p[1], &k->sgd); break;
    default: KOMA_ASSERT(0);
    }
}

/* Records k while recording, else runs it now. */
static void call(nn_backend_t *be, call_t k) {
    stand_t *s = S(be);
    if (!s->recording) {
        s->ops_run++;
        replay(s->cpu, &k);
        return;
    }
    if (s->cur.n >= REC_MAX) s->overflow = 1;
    else s->cur.calls[s->cur.n++] = k;
}

static void w_memset(nn_backend_t *be, void *d, size_t n) { call(be, (call_t){.op = OP_MEMSET, .o = {d}, .i = {(int64_t)n}}); }
static void w_copy(nn_backend_t *be, void *d, const void *s, size_t n) {
    call(be, (call_t){.op = OP_COPY, .o = {d}, .p = {s}, .i = {(int64_t)n}});
}
static void w_copy_2d(nn_backend_t *be, void *d, size_t dp, const void *s, size_t sp, size_t w, size_t rows) {
    call(be, (call_t){.op = OP_COPY_2D, .o = {d}, .p = {s}, .i = {(int64_t)dp, (int64_t)sp, (int64_t)w, (int64_t)rows}});
}
static void w_expand(nn_backend_t *be, const uint8_t *packed, const float *hand, int32_t B, int32_t planes,
                     int32_t in_hand, float *out) {
    call(be, (call_t){.op = OP_EXPAND, .p = {packed, hand}, .i = {B, planes, in_hand}, .o = {out}});
}
static void w_conv(nn_backend_t *be, const float *x, const float *w, const float *bias, int32_t B, int32_t cin,
                   int32_t cout, int32_t k, float *y, void *ws) {
    call(be, (call_t){.op = OP_CONV, .p = {x, w, bias}, .i = {B, cin, cout, k}, .o = {y, ws}});
}
static void w_bwd_data(nn_backend_t *be, const float *dy, const float *w, int32_t B, int32_t cin, int32_t cout,
                       int32_t k, float *dx, int32_t acc, void *ws) {
    call(be, (call_t){.op = OP_BWD_DATA, .p = {dy, w}, .i = {B, cin, cout, k, acc}, .o = {dx, ws}});
}
static void w_bwd_filter(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t cin, int32_t cout,
                         int32_t k, float *dw, float *db, void *ws) {
    call(be, (call_t){.op = OP_BWD_FILTER, .p = {x, dy}, .i = {B, cin, cout, k}, .o = {dw, db, ws}});
}
static void w_bn_fwd(nn_backend_t *be, const float *x, const float *g, const float *b, int32_t B, int32_t C,
                     int32_t HW, float eps, float mom, float *rm, float *rv, float *y, float *sm, float *si) {
    call(be, (call_t){.op = OP_BN_FWD, .p = {x, g, b}, .i = {B, C, HW}, .f = {eps, mom}, .o = {rm, rv, y, sm, si}});
}
static void w_bn_bwd(nn_backend_t *be, const float *x, const float *dy, const float *g, const float *sm,
                     const float *si, int32_t B, int32_t C, int32_t HW, float *dx, float *dg, float *db) {
    call(be, (call_t){.op = OP_BN_BWD, .p = {x, dy, g, sm, si}, .i = {B, C, HW}, .o = {dx, dg, db}});
}
static void w_act(nn_backend_t *be, const float *x, const float *res, int64_t n, nn_act_t act, float *y) {
    call(be, (call_t){.op = OP_ACT, .p = {x, res}, .i = {n, act}, .o = {y}});
}
static void w_add(nn_backend_t *be, const float *a, const float *b, int64_t n, float *y) {
    call(be, (call_t){.op = OP_ADD, .p = {a, b}, .i = {n}, .o = {y}});
}
static void w_act_bwd(nn_backend_t *be, const float *dy, const float *z, int64_t n, nn_act_t act, float *dx) {
    call(be, (call_t){.op = OP_ACT_BWD, .p = {dy, z}, .i = {n, act}, .o = {dx}});
}
static void w_dense(nn_backend_t *be, const float *x, const float *w, const float *b, int32_t B, int32_t in,
                    int32_t out, float *y) {
    call(be, (call_t){.op = OP_DENSE, .p = {x, w, b}, .i = {B, in, out}, .o = {y}});
}
static void w_dense_bwd(nn_backend_t *be, const float *x, const float *w, const float *dy, int32_t B, int32_t in,
                        int32_t out, float *dx, float *dw, float *db) {
    call(be, (call_t){.op = OP_DENSE_BWD, .p = {x, w, dy}, .i = {B, in, out}, .o = {dx, dw, db}});
}
static void w_policy_loss(nn_backend_t *be, const float *lg, const uint32_t *off, const uint16_t *lab,
                          const float *pr, int32_t B, int32_t N, float scale, float *dl, float *st) {
    call(be, (call_t){.op = OP_POLICY_LOSS, .p = {lg, off, lab, pr}, .i = {B, N}, .f = {scale}, .o = {dl, st}});
}
static void w_value_target(nn_backend_t *be, const int8_t *res, const float *q, int32_t B, float qm, float qd,
                           float *t) {
    call(be, (call_t){.op = OP_VALUE_TARGET, .p = {res, q}, .i = {B}, .f = {qm, qd}, .o = {t}});
}
static void w_value_loss(nn_backend_t *be, const float *lg, const float *t, int32_t B, int32_t K, float scale,
                         float *dl, float *st) {
    call(be, (call_t){.op = OP_VALUE_LOSS, .p = {lg, t}, .i = {B, K}, .f = {scale}, .o = {dl, st}});
}
static void w_legal_loss(nn_backend_t *be, const float *lg, const float *t, int32_t B, int32_t N, float scale,
                         float *dl, float *st) {
    call(be, (call_t){.op = OP_LEGAL_LOSS, .p = {lg, t}, .i = {B, N}, .f = {scale}, .o = {dl, st}});
}
static void w_sumsq(nn_backend_t *be, const float *x, int64_t n, float *out) {
    call(be, (call_t){.op = OP_SUMSQ, .p = {x}, .i = {n}, .o = {out}});
}
static void w_sgd(nn_backend_t *be, float *p, const float *g, float *v, int64_t n, const float *gn2,
                  const nn_sgd_args_t *a) {
    call(be, (call_t){.op = OP_SGD, .o = {p, v}, .p = {g, gn2}, .i = {n}, .sgd = *a});
}

static int w_begin(nn_backend_t *be) {
    stand_t *s = S(be);
    if (s->off || s->recording) return -1;
    s->recording = 1;
    s->cur.n = 0;
    s->begins++;
    return 0;
}
static int w_end(nn_backend_t *be, uint64_t key) {
    stand_t *s = S(be);
    s->recording = 0;
    s->ends++;
    if (s->fail_end || s->overflow) {
        s->off = 1;
        return -1;
    }
    graph_t *g = &s->g[s->next];
    for (int i = 0; i < REC_GRAPHS; i++)
        if (s->g[i].n && s->g[i].key == key) g = &s->g[i];
    if (g == &s->g[s->next]) s->next = (s->next + 1) % REC_GRAPHS;
    memcpy(g->calls, s->cur.calls, sizeof(call_t) * (size_t)s->cur.n);
    g->n = s->cur.n;
    g->key = key;
    return 0;
}
static int w_launch(nn_backend_t *be, uint64_t key) {
    stand_t *s = S(be);
    if (s->off) return 1;
    for (int i = 0; i < REC_GRAPHS; i++) {
        if (!s->g[i].n || s->g[i].key != key) continue;
        s->launches++;
        for (int32_t k = 0; k < s->g[i].n; k++) replay(s->cpu, &s->g[i].calls[k]);
        return 0;
    }
    return 1;
}
static const char *w_error(nn_backend_t *be) { return nn_backend_error(S(be)->cpu); }
static void w_free(nn_backend_t *be) {
    stand_t *s = S(be);
    nn_backend_free(s->cpu);
    free(s->cur.calls);
    for (int i = 0; i < REC_GRAPHS; i++) free(s->g[i].calls);
    free(s);
}

/* Only what a training step needs, every compute op recorded; the optional
 * ops (fused units, fences, gather_rows) absent, so nothing bypasses the recorder. */
static nn_backend_t *stand_new(void) {
    nn_backend_t *cpu = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, NULL, 0);
    stand_t *s = calloc(1, sizeof *s);
    KOMA_ASSERT(cpu && s);
    s->cpu = cpu;
    s->cur.calls = malloc(sizeof(call_t) * REC_MAX);
    for (int i = 0; i < REC_GRAPHS; i++) s->g[i].calls = malloc(sizeof(call_t) * REC_MAX);
    nn_backend_t *be = &s->be;
    be->name = "recording";
    be->memory = cpu->memory;
    be->ctx = cpu->ctx;
    be->free = w_free;
    be->buf_alloc = cpu->buf_alloc;
    be->buf_free = cpu->buf_free;
    be->upload = cpu->upload; /* outside recordings only: checked by the recorder's count below */
    be->download = cpu->download;
    be->memset_zero = w_memset;
    be->copy = w_copy;
    be->copy_2d = cpu->copy_2d ? w_copy_2d : NULL;
    be->error = w_error;
    be->expand_planes = w_expand;
    be->conv_ws_bytes = cpu->conv_ws_bytes;
    be->conv_fwd = w_conv;
    be->conv_bwd_data = w_bwd_data;
    be->conv_bwd_filter = w_bwd_filter;
    be->bn_fwd_train = w_bn_fwd;
    be->bn_bwd = w_bn_bwd;
    be->bn_fold = cpu->bn_fold;
    be->act_fwd = w_act;
    be->add = w_add;
    be->act_bwd = w_act_bwd;
    be->dense_fwd = w_dense;
    be->dense_bwd = w_dense_bwd;
    be->policy_loss = w_policy_loss;
    be->value_target = w_value_target;
    be->value_loss = w_value_loss;
    be->legal_loss = w_legal_loss;
    be->sum_squares = w_sumsq;
    be->sgd_step = w_sgd;
    be->graph_begin = w_begin;
    be->graph_end = w_end;
    be->graph_launch = w_launch;
    return be;
}

#define BMAX 8
#define NB 3 /* batches, reused round robin */

/* The batch uploaded into tr's staging by hand, as gather_rows would put it there. */
static nn_batch_t stage(nn_optim_t *tr, nn_backend_t *be, const t_batch_t *t, const nn_net_config_t *cfg) {
    nn_train_staging_t st;
    nn_optim_staging(tr, &st, NULL);
    const nn_batch_t *b = &t->b;
    int32_t B = b->B;
    uint32_t nnz = b->policy_offsets[B];
    be->upload(be, st.planes, b->planes, (size_t)(B * nn_packed_bytes(cfg->in_planes)));
    be->upload(be, st.hand, b->hand, sizeof(float) * (size_t)B * cfg->in_hand);
    be->upload(be, st.legal, b->legal, (size_t)(B * nn_packed_bytes(NN_POLICY_CH)));
    be->upload(be, st.offsets, b->policy_offsets, sizeof(uint32_t) * (size_t)(B + 1));
    be->upload(be, st.labels, b->policy_label, sizeof(uint16_t) * nnz);
    be->upload(be, st.probs, b->policy_prob, sizeof(float) * nnz);
    be->upload(be, st.result, b->result, (size_t)B);
    be->upload(be, st.q, b->root_q, sizeof(float) * (size_t)B);
    return (nn_batch_t){.B = B, .staged = 1, .policy_offsets = b->policy_offsets};
}

static int same_state(nn_optim_t *a, nn_optim_t *b) {
    int64_t np, ns;
    nn_net_t *na = nn_optim_net(a), *nb = nn_optim_net(b);
    const float *pa = nn_net_params(na, &np, NULL), *pb = nn_net_params(nb, NULL, NULL);
    const float *sa = nn_net_stats(na, &ns), *sb = nn_net_stats(nb, NULL);
    return !memcmp(pa, pb, sizeof(float) * (size_t)np) && !memcmp(sa, sb, sizeof(float) * (size_t)ns) &&
           !memcmp(nn_optim_momentum(a), nn_optim_momentum(b), sizeof(float) * (size_t)np);
}

static void run(nn_act_t act, int merged) {
    nn_net_config_t cfg = {.blocks = 2, .channels = 8, .act = act, .in_planes = 7, .in_hand = 3, .features_version = 1};
    char err[256];
    nn_backend_t *be = stand_new(), *cpu = nn_backend_cpu_new_conv(1, NN_CPU_CONV_REF, NULL, 0);
    stand_t *s = S(be);
    nn_net_t *nr = nn_net_new(be, &cfg, 9, err, sizeof err), *nc = nn_net_new(cpu, &cfg, 9, err, sizeof err);
    KOMA_ASSERT(nr && nc);
    nn_net_set_merge_heads(nr, merged), nn_net_set_merge_heads(nc, merged);
    nn_train_config_t tc = nn_train_config_default();
    tc.warmup_steps = 4, tc.total_steps = 20, tc.weight_decay = 0.01f; /* a new lr every step */
    nn_optim_t *tr = nn_optim_new(nr, &tc, BMAX, err, sizeof err), *tref = nn_optim_new(nc, &tc, BMAX, err, sizeof err);
    KOMA_ASSERT(tr && tref);
    t_batch_t bat[NB + 1];
    for (int i = 0; i < NB; i++) t_batch_init(&bat[i], BMAX, cfg.in_planes, cfg.in_hand, 6);
    t_batch_init(&bat[NB], 5, cfg.in_planes, cfg.in_hand, 6);
    char what[128];
    const char *tag = merged ? " merged" : "";
    int step = 0;

    /* staged batches of 8: ops, ops, recorded, then replays; every step equal to the reference */
    for (int i = 0; i < 8; i++, step++) {
        const t_batch_t *t = &bat[step % NB];
        nn_metrics_t mr, mc;
        nn_batch_t sb = stage(tr, be, t, &cfg);
        int64_t run0 = s->ops_run, l0 = s->launches;
        CHECKF(nn_train_step(tr, &sb, &mr, err, sizeof err) == 0, "staged step: %s", err);
        CHECKF(nn_train_step(tref, &t->b, &mc, err, sizeof err) == 0, "reference step: %s", err);
        int64_t ops = s->ops_run - run0;
        snprintf(what, sizeof what, "%s%s staged step %d", nn_act_name(act), tag, i + 1);
        CHECKF(i < 2 ? ops > 50 && s->begins == 0 : ops == 0 && s->launches == l0 + 1,
               "%s: %lld ops ran, %lld launches, %lld recorded", what, (long long)ops, (long long)(s->launches - l0),
               (long long)s->begins);
        CHECKF(mr.lr == mc.lr && !memcmp(&mr, &mc, sizeof mr), "%s: lr %g / %g, loss %.9g / %.9g", what, mr.lr, mc.lr,
               mr.loss, mc.loss);
        CHECKF(same_state(tr, tref), "%s: weights, statistics or momentum differ from the reference", what);
    }
    CHECKF(s->begins == 1 && s->launches == 6, "%lld recorded, %lld launches (want 1, 6)", (long long)s->begins,
           (long long)s->launches);

    /* new settings: a recording of their own (a replay of the old one would
     * use the old momentum and loss weights) */
    tc.momentum = 0.5f, tc.w_value = 2.0f;
    nn_optim_set_config(tr, &tc), nn_optim_set_config(tref, &tc);
    for (int i = 0; i < 4; i++, step++) {
        const t_batch_t *t = &bat[step % NB];
        nn_batch_t sb = stage(tr, be, t, &cfg);
        CHECK(nn_train_step(tr, &sb, NULL, err, sizeof err) == 0 && nn_train_step(tref, &t->b, NULL, err, sizeof err) == 0);
        snprintf(what, sizeof what, "%s%s new settings, step %d", nn_act_name(act), tag, i + 1);
        CHECKF(same_state(tr, tref), "%s: differs from the reference", what);
    }
    CHECKF(s->begins == 2 && s->launches == 8, "new settings: %lld recorded, %lld launches (want 2, 8)",
           (long long)s->begins, (long long)s->launches);
    /* another batch size: its own recording too */
    for (int i = 0; i < 4; i++, step++) {
        nn_batch_t sb = stage(tr, be, &bat[NB], &cfg);
        CHECK(nn_train_step(tr, &sb, NULL, err, sizeof err) == 0 && nn_train_step(tref, &bat[NB].b, NULL, err, sizeof err) == 0);
        CHECKF(same_state(tr, tref), "%s%s B5 step %d: differs from the reference", nn_act_name(act), tag, i + 1);
    }
    CHECKF(s->begins == 3 && s->launches == 10, "B5: %lld recorded, %lld launches (want 3, 10)", (long long)s->begins,
           (long long)s->launches);
    /* host batches are never recorded (their uploads cannot be replayed) */
    int64_t b0 = s->begins, l0 = s->launches;
    for (int i = 0; i < 4; i++, step++) {
        const t_batch_t *t = &bat[step % NB];
        CHECK(nn_train_step(tr, &t->b, NULL, err, sizeof err) == 0 && nn_train_step(tref, &t->b, NULL, err, sizeof err) == 0);
    }
    CHECKF(s->begins == b0 && s->launches == l0 && same_state(tr, tref), "host batches: %lld recorded, %lld launched",
           (long long)(s->begins - b0), (long long)(s->launches - l0));
    /* a failed recording: the steps run as ops, still right */
    s->fail_end = 1;
    tc.momentum = 0.8f;
    nn_optim_set_config(tr, &tc), nn_optim_set_config(tref, &tc);
    for (int i = 0; i < 5; i++, step++) {
        const t_batch_t *t = &bat[step % NB];
        nn_batch_t sb = stage(tr, be, t, &cfg);
        CHECK(nn_train_step(tr, &sb, NULL, err, sizeof err) == 0 && nn_train_step(tref, &t->b, NULL, err, sizeof err) == 0);
        CHECKF(same_state(tr, tref), "%s%s after a failed recording, step %d: differs", nn_act_name(act), tag, i + 1);
    }
    CHECKF(s->off && s->ends == 4 && !s->overflow, "failed recording: off %d, %lld ended, overflow %d", s->off,
           (long long)s->ends, s->overflow);
    for (int i = 0; i <= NB; i++) t_batch_free(&bat[i]);
    nn_optim_free(tr), nn_optim_free(tref);
    nn_net_free(nr), nn_net_free(nc);
    nn_backend_free(be), nn_backend_free(cpu);
}

int main(void) {
    t_seed(41);
    run(NN_ACT_RELU, 1);
    run(NN_ACT_RELU, 0);
    run(NN_ACT_SILU, 1);
    return t_done("test_nn_graph_train");
}
