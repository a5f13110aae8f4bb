/* test_nn_graph.c - recorded device forwards (nn_forward_dev with a backend's
 * graph_begin / graph_end / graph_launch, nn/backend.h), on the CPU: a stand-in
 * backend records the ops between graph_begin and graph_end instead of running
 * them, and graph_launch replays them, as CUDA graphs do. Checks that:
 *  - the first forwards of a shape run as ops, the third is recorded, and the
 *    later ones are replays (one launch, no ops), with outputs identical bit
 *    for bit to a plain CPU context on the same net, for new inputs each time;
 *  - another batch size and another set of heads are other recordings (never
 *    a replay of the wrong one); a context's recordings never serve another;
 *  - new weights (nn_net_copy_weights, as a publish does) reach a replay:
 *    the fold runs outside the recording;
 *  - a failed recording (graph_end returns -1) costs nothing: the forward runs
 *    as ops and is right, and later forwards run as ops.
 * The CUDA backend's recordings themselves (stream capture) are device-only:
 * test_nn_cuda_gpu's nets run with them on. */
#include "nn_test.h"

#include <stdint.h>
#include <string.h>

enum { OP_EXPAND, OP_CONV, OP_CONV_ACT, OP_ACT, OP_DENSE, OP_COPY, OP_COPY_2D };

typedef struct {
    int op;
    const void *a, *b, *c, *d;
    void *y, *ws;
    int32_t i[6];
    int64_t n;
    int32_t act, flags;
} rec_op_t;

#define REC_MAX_OPS 512
#define REC_GRAPHS 4

typedef struct {
    uint64_t key;
    int32_t n;
    rec_op_t ops[REC_MAX_OPS];
} rec_graph_t;

typedef struct {
    nn_backend_t be; /* first: a rec_t * is its nn_backend_t * */
    nn_backend_t *cpu;
    int recording, off, fail_end, overflow; /* overflow: a recording that could not be kept whole */
    rec_graph_t cur, g[REC_GRAPHS];
    int next;
    int64_t ops_run, begins, ends, launches, misses;
} rec_t;

static rec_t *R(nn_backend_t *be) { return (rec_t *)be; }

/* Records op when recording; returns 1 then (the caller skips the op). */
static int rec(nn_backend_t *be, rec_op_t op) {
    rec_t *r = R(be);
    if (!r->recording) {
        r->ops_run++;
        return 0;
    }
    if (r->cur.n >= REC_MAX_OPS) r->overflow = 1;
    else r->cur.ops[r->cur.n++] = op;
    return 1;
}

static void w_expand(nn_backend_t *be, const uint8_t *packed, const float *hand, int32_t B, int32_t planes,
                     int32_t in_hand, float *out) {
    if (rec(be, (rec_op_t){.op = OP_EXPAND, .a = packed, .b = hand, .y = out, .i = {B, planes, in_hand}})) return;
    R(be)->cpu->expand_planes(R(be)->cpu, packed, hand, B, planes, in_hand, out);
}
static void w_conv(nn_backend_t *be, const float *x, const float *w, const float *bias, int32_t B, int32_t cin,
                   int32_t cout, int32_t k, float *y, void *ws) {
    if (rec(be, (rec_op_t){.op = OP_CONV, .a = x, .b = w, .c = bias, .y = y, .ws = ws, .i = {B, cin, cout, k}})) return;
    R(be)->cpu->conv_fwd(R(be)->cpu, x, w, bias, B, cin, cout, k, y, ws);
}
static void w_conv_act(nn_backend_t *be, const float *x, const float *w, const float *bias, const float *res, int32_t B,
                       int32_t cin, int32_t cout, int32_t k, nn_act_t act, float *y, void *ws, int32_t flags) {
    if (rec(be, (rec_op_t){.op = OP_CONV_ACT, .a = x, .b = w, .c = bias, .d = res, .y = y, .ws = ws,
                           .i = {B, cin, cout, k}, .act = (int32_t)act, .flags = flags}))
        return;
    R(be)->cpu->conv_fwd_act(R(be)->cpu, x, w, bias, res, B, cin, cout, k, act, y, ws, flags);
}
static void w_act(nn_backend_t *be, const float *x, const float *res, int64_t n, nn_act_t act, float *y) {
    if (rec(be, (rec_op_t){.op = OP_ACT, .a = x, .b = res, .n = n, .act = (int32_t)act, .y = y})) return;
    R(be)->cpu->act_fwd(R(be)->cpu, x, res, n, act, y);
}
static void w_dense(nn_backend_t *be, const float *x, const float *w, const float *b, int32_t B, int32_t in, int32_t out,
                    float *y) {
    if (rec(be, (rec_op_t){.op = OP_DENSE, .a = x, .b = w, .c = b, .y = y, .i = {B, in, out}})) return;
    R(be)->cpu->dense_fwd(R(be)->cpu, x, w, b, B, in, out, y);
}
static void w_copy(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    if (rec(be, (rec_op_t){.op = OP_COPY, .a = src, .y = dst, .n = (int64_t)bytes})) return;
    R(be)->cpu->copy(R(be)->cpu, dst, src, bytes);
}
static void w_copy_2d(nn_backend_t *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                      size_t height) {
    if (rec(be, (rec_op_t){.op = OP_COPY_2D, .a = src, .y = dst, .i = {(int32_t)dpitch, (int32_t)spitch, (int32_t)width,
                                                                       (int32_t)height}}))
        return;
    R(be)->cpu->copy_2d(R(be)->cpu, dst, dpitch, src, spitch, width, height);
}
/* An op the recorded forward must not call (it would run at once, not at replay). */
static void w_bn_fold(nn_backend_t *be, const float *w, const float *gamma, const float *beta, const float *mean,
                      const float *var, int32_t cout, int32_t kdim, float eps, float *w_out, float *b_out) {
    if (R(be)->recording) R(be)->overflow = 1; /* it would not run at replay */
    R(be)->cpu->bn_fold(R(be)->cpu, w, gamma, beta, mean, var, cout, kdim, eps, w_out, b_out);
}

static int w_begin(nn_backend_t *be) {
    rec_t *r = R(be);
    if (r->off || r->recording) return -1;
    r->recording = 1;
    r->cur.n = 0;
    r->begins++;
    return 0;
}
static int w_end(nn_backend_t *be, uint64_t key) {
    rec_t *r = R(be);
    r->recording = 0;
    r->ends++;
    if (r->fail_end || r->overflow) {
        r->off = 1;
        return -1;
    }
    rec_graph_t *g = &r->g[r->next];
    for (int i = 0; i < REC_GRAPHS; i++)
        if (r->g[i].n && r->g[i].key == key) g = &r->g[i];
    if (g == &r->g[r->next]) r->next = (r->next + 1) % REC_GRAPHS;
    *g = r->cur;
    g->key = key;
    return 0;
}
static int w_launch(nn_backend_t *be, uint64_t key) {
    rec_t *r = R(be);
    nn_backend_t *c = r->cpu;
    if (r->off) return 1;
    for (int gi = 0; gi < REC_GRAPHS; gi++) {
        rec_graph_t *g = &r->g[gi];
        if (!g->n || g->key != key) continue;
        r->launches++;
        for (int32_t k = 0; k < g->n; k++) {
            const rec_op_t *o = &g->ops[k];
            switch (o->op) {
            case OP_EXPAND:
                c->expand_planes(c, o->a, o->b, o->i[0], o->i[1], o->i[2], o->y);
                break;
            case OP_CONV:
                c->conv_fwd(c, o->a, o->b, o->c, o->i[0], o->i[1], o->i[2], o->i[3], o->y, o->ws);
                break;
            case OP_CONV_ACT:
                c->conv_fwd_act(c, o->a, o->b, o->c, o->d, o->i[0], o->i[1], o->i[2], o->i[3], (nn_act_t)o->act, o->y,
                                o->ws, o->flags);
                break;
            case OP_ACT:
                c->act_fwd(c, o->a, o->b, o->n, (nn_act_t)o->act, o->y);
                break;
            case OP_DENSE:
                c->dense_fwd(c, o->a, o->b, o->c, o->i[0], o->i[1], o->i[2], o->y);
                break;
            case OP_COPY:
                c->copy(c, o->y, o->a, (size_t)o->n);
                break;
            case OP_COPY_2D:
                c->copy_2d(c, o->y, (size_t)o->i[0], o->a, (size_t)o->i[1], (size_t)o->i[2], (size_t)o->i[3]);
                break;
            default:
                KOMA_ASSERT(0);
            }
        }
        return 0;
    }
    r->misses++;
    return 1;
}
static void w_free(nn_backend_t *be) {
    nn_backend_free(R(be)->cpu);
    free(be);
}

static nn_backend_t *rec_new(void) {
    nn_backend_t *cpu = nn_backend_cpu_new(1);
    rec_t *r = calloc(1, sizeof *r);
    KOMA_ASSERT(cpu && r);
    r->be = *cpu; /* the CPU ops use be->ctx, the CPU instance's */
    r->cpu = cpu;
    nn_backend_t *be = &r->be;
    be->name = "recording";
    be->free = w_free;
    be->expand_planes = w_expand;
    be->conv_fwd = w_conv;
    if (cpu->conv_fwd_act) be->conv_fwd_act = w_conv_act;
    be->act_fwd = w_act;
    be->dense_fwd = w_dense;
    be->copy = w_copy;
    if (cpu->copy_2d) be->copy_2d = w_copy_2d;
    be->bn_fold = w_bn_fold;
    be->graph_begin = w_begin;
    be->graph_end = w_end;
    be->graph_launch = w_launch;
    return be;
}

#define BMAX 6

typedef struct {
    uint8_t packed[BMAX * 64];
    float hand[BMAX * 16];
    float policy[BMAX * NN_POLICY_NB], value[BMAX * NN_VALUE_NB], legal[BMAX * NN_POLICY_NB];
} io_t;

static void rand_input(io_t *io, const nn_net_config_t *cfg, int32_t B) {
    int64_t pb = nn_packed_bytes(cfg->in_planes);
    KOMA_ASSERT(pb * B <= (int64_t)sizeof io->packed && cfg->in_hand * B <= 16 * BMAX);
    for (int64_t i = 0; i < pb * B; i++) io->packed[i] = (uint8_t)(t_randn() * 1000.0f);
    for (int64_t i = 0; i < (int64_t)cfg->in_hand * B; i++) io->hand[i] = (float)(i % 3) * 0.5f + t_randn() * 0.1f;
}

/* One forward on both contexts, same input; every head asked for must match bit for bit. */
static void both(nn_ctx_t *cr, nn_ctx_t *cc, const nn_net_config_t *cfg, int32_t B, int legal, const char *what) {
    static io_t a, b;
    rand_input(&a, cfg, B);
    CHECK(nn_forward(cr, B, a.packed, a.hand, a.policy, a.value, legal ? a.legal : NULL) == 0);
    CHECK(nn_forward(cc, B, a.packed, a.hand, b.policy, b.value, legal ? b.legal : NULL) == 0);
    char w[160];
    snprintf(w, sizeof w, "%s: policy", what);
    t_compare(w, a.policy, b.policy, (int64_t)B * NN_POLICY_NB, 0, 0);
    snprintf(w, sizeof w, "%s: value", what);
    t_compare(w, a.value, b.value, (int64_t)B * NN_VALUE_NB, 0, 0);
    if (legal) {
        snprintf(w, sizeof w, "%s: legal", what);
        t_compare(w, a.legal, b.legal, (int64_t)B * NN_POLICY_NB, 0, 0);
    }
}

static void run(nn_act_t act, int merged) {
    nn_net_config_t cfg = {.blocks = 2, .channels = 16, .act = act, .in_planes = 7, .in_hand = 3, .features_version = 1};
    char err[256];
    nn_backend_t *be = rec_new(), *cpu = nn_backend_cpu_new(1);
    rec_t *r = R(be);
    nn_net_t *net = nn_net_new(be, &cfg, 5, err, sizeof err), *other = nn_net_new(be, &cfg, 6, err, sizeof err);
    KOMA_ASSERT(net && other);
    nn_net_set_merge_heads(net, merged);
    nn_ctx_t *cr = nn_ctx_new(net, be, BMAX, err, sizeof err), *cc = nn_ctx_new(net, cpu, BMAX, err, sizeof err);
    nn_ctx_t *cr2 = nn_ctx_new(net, be, BMAX, err, sizeof err);
    KOMA_ASSERT(cr && cc && cr2);
    char what[96];

    /* B 5: two forwards as ops, the third recorded (and launched), then replays */
    for (int i = 0; i < 6; i++) {
        int64_t run0 = r->ops_run;
        snprintf(what, sizeof what, "%s%s B5 forward %d", nn_act_name(act), merged ? " merged" : "", i + 1);
        both(cr, cc, &cfg, 5, 1, what);
        int64_t ops = r->ops_run - run0;
        CHECKF(i < 2 ? ops > 10 && r->begins == 0 : ops == 0, "%s: %lld ops ran, %lld recordings", what,
               (long long)ops, (long long)r->begins);
    }
    CHECKF(r->begins == 1 && r->ends == 1 && r->launches == 4, "B5: %lld recorded, %lld launches (want 1, 4)",
           (long long)r->begins, (long long)r->launches);

    /* another batch size, then the policy and value heads alone: other recordings */
    for (int i = 0; i < 4; i++) both(cr, cc, &cfg, 3, 1, "B3");
    for (int i = 0; i < 4; i++) both(cr, cc, &cfg, 5, 0, "B5 no legal head");
    CHECKF(r->begins == 3 && r->launches == 4 + 2 + 2, "B3 and no-legal: %lld recorded, %lld launches (want 3, 8)",
           (long long)r->begins, (long long)r->launches);
    /* another context of the same net: its own recordings (its own buffers) */
    for (int i = 0; i < 3; i++) both(cr2, cc, &cfg, 5, 1, "second context B5");
    CHECKF(r->begins == 4 && r->launches == 9, "second context: %lld recorded, %lld launches (want 4, 9)",
           (long long)r->begins, (long long)r->launches);

    /* new weights, as a publish copies them: the replay reads the refolded weights */
    static io_t before, after;
    rand_input(&before, &cfg, 5);
    CHECK(nn_forward(cr, 5, before.packed, before.hand, before.policy, before.value, before.legal) == 0);
    CHECKF(nn_net_copy_weights(net, other, err, sizeof err) == 0, "nn_net_copy_weights: %s", err);
    int64_t l0 = r->launches;
    memcpy(after.packed, before.packed, sizeof after.packed), memcpy(after.hand, before.hand, sizeof after.hand);
    CHECK(nn_forward(cr, 5, after.packed, after.hand, after.policy, after.value, after.legal) == 0);
    CHECK(r->launches == l0 + 1 && memcmp(before.value, after.value, sizeof(float) * 5 * NN_VALUE_NB) != 0);
    both(cr, cc, &cfg, 5, 1, "B5 after new weights");
    CHECK(r->launches == l0 + 2);

    /* a failed recording: that forward and every later one runs as ops, all right */
    r->fail_end = 1;
    for (int i = 0; i < 3; i++) both(cr, cc, &cfg, 2, 1, "B2, recording fails");
    CHECKF(r->off && r->ends == 5, "failed recording: off %d, %lld ended", r->off, (long long)r->ends);
    int64_t run0 = r->ops_run;
    both(cr, cc, &cfg, 5, 1, "B5 after a failed recording");
    CHECK(r->ops_run > run0);
    CHECK(!r->overflow);

    nn_ctx_free(cr), nn_ctx_free(cr2), nn_ctx_free(cc);
    nn_net_free(net), nn_net_free(other);
    nn_backend_free(be), nn_backend_free(cpu);
}

int main(void) {
    run(NN_ACT_RELU, 1);
    run(NN_ACT_SILU, 0);
    return t_done("test_nn_graph");
}
