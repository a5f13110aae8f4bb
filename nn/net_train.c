/* net_train.c - the Koma network's training: schedule, trainer, training
 * step (forward, three losses and the optional heads' two, backward, SGD),
 * one-step-late metrics.
 *
 * Owns: the trainer (gradients, momentum, training arena), the order in
 * which the training ops run, and the metrics of a step.
 * Does not own: the net's definition and inference (nn/net.c), how an op
 * computes (the backend).
 * Errors: every public call that runs ops checks the backend's sticky error
 * (nn/backend.h) before and after them and fails with its message; out of
 * memory names host or device memory and the bytes asked.
 */
#include "nn/net.h"
#include "nn/net_int.h"
#include "compat/bits.h"
#include "compat/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

/* ---- schedule ---------------------------------------------------------------- */
nn_train_config_t nn_train_config_default(void) {
    nn_train_config_t c;
    memset(&c, 0, sizeof(c));
    c.lr = 0.02f;
    c.momentum = 0.9f;
    c.nesterov = 1;
    c.weight_decay = 1e-4f;
    c.clip_norm = 10.0f;
    c.warmup_steps = 100;
    c.schedule = NN_SCHED_COSINE;
    c.total_steps = 100000;
    c.lr_min_frac = 0.01f;
    c.step_size = 20000;
    c.step_gamma = 0.1f;
    c.w_policy = 1.0f;
    c.w_value = 1.0f;
    c.w_legal = 1.0f;
    c.w_moves_left = 1.0f;  /* lc0's moves_left_loss_weight */
    c.w_opp_policy = 0.15f; /* KataGo's opponent-reply policy weight */
    c.q_mix = 0.75f; /* docs/LEARNING.md: +186 Elo over 0.25 at equal CPU time */
    c.q_draw = 0.0f;
    c.bn_momentum = 0.01f;
    return c;
}

float nn_lr_at(const nn_train_config_t *c, int64_t step) {
    if (step < 0) step = 0;
    if (c->warmup_steps > 0 && step < c->warmup_steps)
        return c->lr * (float)(step + 1) / (float)c->warmup_steps;
    int64_t s = step - (c->warmup_steps > 0 ? c->warmup_steps : 0);
    switch (c->schedule) {
    case NN_SCHED_COSINE: {
        int64_t T = c->total_steps - (c->warmup_steps > 0 ? c->warmup_steps : 0);
        double t = T > 0 ? (double)s / (double)T : 1.0;
        if (t > 1.0) t = 1.0;
        double f = c->lr_min_frac + (1.0 - c->lr_min_frac) * 0.5 * (1.0 + cos(3.14159265358979323846 * t));
        return (float)(c->lr * f);
    }
    case NN_SCHED_STEP: {
        int64_t k = c->step_size > 0 ? s / c->step_size : 0;
        return (float)(c->lr * pow(c->step_gamma, (double)k));
    }
    default: return c->lr;
    }
}

/* ---- trainer ----------------------------------------------------------------- */
struct nn_optim {
    nn_net_t *net;
    nn_backend_t *be;
    nn_train_config_t cfg;
    int32_t max_batch;
    int64_t step;
    uint64_t uid;
    graph_seen_t seen; /* steps on staged batches */
    float *grads;    /* (n_params) same layout as the params */
    float *momentum; /* (n_params) optimizer state */
    void *arena;     /* one allocation: everything below */
    /* batch staging */
    uint8_t *planes;   /* (max_batch, nn_packed_bytes(in_planes)) */
    float *hand;       /* (max_batch, in_hand) */
    uint8_t *legal;    /* (max_batch, nn_packed_bytes(27)) */
    uint32_t *offsets; /* (max_batch + 1) */
    uint16_t *labels;  /* (max_batch * 2187) */
    float *probs;      /* (max_batch * 2187) */
    int8_t *result;    /* (max_batch) */
    float *q;          /* (max_batch) */
    float *ml_t;          /* (max_batch) moves-left target plies (NULL: no such head) */
    uint32_t *opp_offsets; /* (max_batch + 1) opponent-reply targets (the three NULL: no such head) */
    uint16_t *opp_labels;  /* (max_batch * 2187) */
    float *opp_probs;      /* (max_batch * 2187) */
    /* targets */
    float *legal_t; /* (B, 2187) 0/1 */
    float *value_t; /* (B, 3) */
    /* activations, per unit u: c (B, cout, 81) conv out, z pre-activation
     * (aliases y for relu), y (B, cout, 81) output, mean/invstd (cout) */
    float *x0;                 /* (B, cin, 9, 9) */
    float **c, **z, **y, **mean, **invstd;
    float *fc1_z, *fc1_y;      /* (B, 128) */
    float *policy, *legal_out; /* (B, 2187) logits */
    float *value;              /* (B, 3) */
    /* gradients of activations */
    float *g[3];               /* (B, C, 9, 9) */
    float *gh;                 /* (B, 2C, 9, 9) head scratch (the merged heads' gradient) */
    float *hsplit;             /* the merged head conv's output, one head after the other: policy (B, C, 9, 9)
                                  at 0, legal at head_stride */
    int64_t head_stride;       /* max_batch*C*81 rounded up to 16 floats: where the second head starts (hsplit,
                                  and the legal unit's buffers inside the policy unit's) */
    float *gv;                 /* (B, 8, 9, 9) */
    float *gfc1;               /* (B, 128) */
    float *dpolicy, *dlegal;   /* (B, 2187) */
    float *dvalue;             /* (B, 3) */
    /* the optional heads (NULL on a net without them) */
    float *ml_fc1_z, *ml_fc1_y; /* (B, 32) moves-left hidden layer */
    float *ml_out, *dml;       /* (B) raw output, its gradient */
    float *gml_fc1;            /* (B, 32) */
    float *gmlv;               /* (B, 8, 9, 9) gradient at the moves-left conv unit's output */
    float *opp_out, *dopp;     /* (B, 2187) opponent-reply logits, their gradient */
    float *ml_none;            /* (max_batch) host: -1 (no target), uploaded for a batch without moves_left */
    /* global-pooling blocks (the others' entries NULL) */
    float *gp_pool[NN_MAX_BLOCKS]; /* (B, 2C) block i's pooled h1: mean, max */
    float *gp_h[NN_MAX_BLOCKS];    /* (B, C, 9, 9) block i's h1 + channel bias: its conv2's input */
    float *gp_gb;              /* (B, C) channel biases, then their gradient */
    float *gp_dpool;           /* (B, 2C) gradient at the pooled values */
    float *stats;              /* (NN_STAT_NB) */
    float *hyper;              /* (4) the step's lr and weight decay, then lr and 0 (sgd_step's hyper) */
    void *ws;
    infer_bufs_t f;            /* for nn_eval_batch (aliases the above) */
    float *rm_backup;          /* (n_stats) running stats saved by nn_train_grad */
    /* One step late (nn_train_step_launch): two metric records, each the
     * step's stats copied into host memory (page-locked where the backend has
     * host_alloc) and what turns them into nn_metrics_t. */
    float *late_host;          /* (2, NN_LATE_STRIDE) host; late_pinned: from host_alloc */
    int32_t late_pinned;
    struct {
        int32_t pending;       /* launched, metrics not read yet */
        int32_t fenced;        /* the copy was queued behind fence `slot`: wait for it */
        int64_t step;          /* the step count after this step: the record's name */
        int32_t B, n_policy, n_opp;
        nn_train_config_t cfg; /* loss weights and schedule at launch */
    } late[2];
    float *ptrs[];             /* storage for c, z, y, mean, invstd */
};

#define NN_LATE_STRIDE 16 /* floats per record (>= NN_STAT_NB, 64 bytes) */

/* One pass of nn_optim_new's carving: every device buffer of the trainer at
 * its offset in the arena (c->base NULL: offsets only, to size the arena). */
static void optim_carve(nn_optim_t *tr, carve_t *c, size_t ws) {
    const nn_net_t *net = tr->net;
    const nn_net_config_t *nc = &net->cfg;
    int32_t nu = net->n_units;
    int32_t B = tr->max_batch, C = nc->channels, cin = nc->in_planes + nc->in_hand;
    tr->planes = nnet_take(c, (size_t)(B * nn_packed_bytes(nc->in_planes)));
    tr->hand = TAKEF(c, (int64_t)B * nc->in_hand);
    tr->legal = nnet_take(c, (size_t)(B * nn_packed_bytes(NN_POLICY_CH)));
    tr->offsets = nnet_take(c, sizeof(uint32_t) * (size_t)(B + 1));
    tr->labels = nnet_take(c, sizeof(uint16_t) * (size_t)B * NN_POLICY_NB);
    tr->probs = TAKEF(c, (int64_t)B * NN_POLICY_NB);
    tr->result = nnet_take(c, (size_t)B);
    tr->q = TAKEF(c, B);
    int ml = net->u_ml >= 0, opp = net->u_opp >= 0;
    tr->ml_t = ml ? TAKEF(c, B) : NULL;
    tr->opp_offsets = opp ? nnet_take(c, sizeof(uint32_t) * (size_t)(B + 1)) : NULL;
    tr->opp_labels = opp ? nnet_take(c, sizeof(uint16_t) * (size_t)B * NN_POLICY_NB) : NULL;
    tr->opp_probs = opp ? TAKEF(c, (int64_t)B * NN_POLICY_NB) : NULL;
    tr->legal_t = TAKEF(c, (int64_t)B * NN_POLICY_NB);
    tr->value_t = TAKEF(c, (int64_t)B * NN_VALUE_NB);
    tr->x0 = TAKEF(c, (int64_t)B * cin * NN_HW);
    int32_t pu = U_PCONV(nc->blocks), lu = U_LCONV(nc->blocks);
    for (int32_t u = 0; u < nu; u++) {
        const nn_unit_t *un = &net->units[u];
        int64_t n = (int64_t)B * un->cout * NN_HW;
        if (un->gamma < 0 || u == lu) { /* head outputs: the logits buffers below; legal: see below */
            tr->c[u] = tr->z[u] = tr->y[u] = tr->mean[u] = tr->invstd[u] = NULL;
            continue;
        }
        /* the head pair: (B, 2C, 81) merged, or the two units one after the other */
        int64_t k = u == pu ? 2 * tr->head_stride : n;
        tr->c[u] = TAKEF(c, k);
        tr->y[u] = TAKEF(c, k);
        tr->z[u] = nc->act == NN_ACT_RELU ? tr->y[u] : TAKEF(c, k);
        tr->mean[u] = TAKEF(c, (u == pu ? 2 : 1) * un->cout);
        tr->invstd[u] = TAKEF(c, (u == pu ? 2 : 1) * un->cout);
    }
    if (tr->c[pu]) {
        tr->c[lu] = tr->c[pu] + tr->head_stride;
        tr->y[lu] = tr->y[pu] + tr->head_stride;
        tr->z[lu] = tr->z[pu] + tr->head_stride;
        tr->mean[lu] = tr->mean[pu] + C;
        tr->invstd[lu] = tr->invstd[pu] + C;
    }
    tr->fc1_z = TAKEF(c, (int64_t)B * NN_VALUE_HIDDEN);
    tr->fc1_y = nc->act == NN_ACT_RELU ? tr->fc1_z : TAKEF(c, (int64_t)B * NN_VALUE_HIDDEN);
    tr->policy = TAKEF(c, (int64_t)B * NN_POLICY_NB);
    tr->legal_out = TAKEF(c, (int64_t)B * NN_POLICY_NB);
    tr->value = TAKEF(c, (int64_t)B * NN_VALUE_NB);
    for (int i = 0; i < 3; i++) tr->g[i] = TAKEF(c, (int64_t)B * C * NN_HW);
    tr->gh = TAKEF(c, (int64_t)B * 2 * C * NN_HW);
    tr->hsplit = TAKEF(c, 2 * tr->head_stride);
    tr->gv = TAKEF(c, (int64_t)B * NN_VALUE_CH * NN_HW);
    tr->gfc1 = TAKEF(c, (int64_t)B * NN_VALUE_HIDDEN);
    tr->dpolicy = TAKEF(c, (int64_t)B * NN_POLICY_NB);
    tr->dlegal = TAKEF(c, (int64_t)B * NN_POLICY_NB);
    tr->dvalue = TAKEF(c, (int64_t)B * NN_VALUE_NB);
    tr->ml_fc1_z = ml ? TAKEF(c, (int64_t)B * NN_ML_HIDDEN) : NULL;
    tr->ml_fc1_y = ml ? (nc->act == NN_ACT_RELU ? tr->ml_fc1_z : TAKEF(c, (int64_t)B * NN_ML_HIDDEN)) : NULL;
    tr->ml_out = ml ? TAKEF(c, B) : NULL;
    tr->dml = ml ? TAKEF(c, B) : NULL;
    tr->gml_fc1 = ml ? TAKEF(c, (int64_t)B * NN_ML_HIDDEN) : NULL;
    tr->gmlv = ml ? TAKEF(c, (int64_t)B * NN_ML_CH * NN_HW) : NULL;
    tr->opp_out = opp ? TAKEF(c, (int64_t)B * NN_POLICY_NB) : NULL;
    tr->dopp = opp ? TAKEF(c, (int64_t)B * NN_POLICY_NB) : NULL;
    for (int32_t i = 0; i < nc->blocks; i++) {
        int gp = net->gp_w[i] >= 0;
        tr->gp_pool[i] = gp ? TAKEF(c, (int64_t)B * 2 * C) : NULL;
        tr->gp_h[i] = gp ? TAKEF(c, (int64_t)B * C * NN_HW) : NULL;
    }
    tr->gp_gb = nc->gpool > 0 ? TAKEF(c, (int64_t)B * C) : NULL;
    tr->gp_dpool = nc->gpool > 0 ? TAKEF(c, (int64_t)B * 2 * C) : NULL;
    tr->stats = TAKEF(c, NN_STAT_NB);
    tr->hyper = TAKEF(c, 4);
    tr->rm_backup = TAKEF(c, net->n_stats);
    tr->ws = nnet_take(c, ws);
}

/* nn_eval_batch runs the inference forward inside the training arena. */
static void optim_alias_infer(nn_optim_t *tr) {
    tr->f.x0 = tr->x0;
    tr->f.h[0] = tr->g[0];
    tr->f.h[1] = tr->g[1];
    tr->f.h[2] = tr->g[2];
    tr->f.v = tr->gv;
    tr->f.fc1 = tr->gfc1;
    tr->f.policy = tr->policy;
    tr->f.legal = tr->legal_out;
    tr->f.value = tr->value;
    tr->f.gp = tr->gp_dpool;
    tr->f.gb = tr->gp_gb;
    tr->f.mlv = tr->gmlv;
    tr->f.mlfc1 = tr->gml_fc1;
    tr->f.ml = tr->ml_out;
    tr->f.opp = tr->opp_out;
    tr->f.ws = tr->ws;
}

nn_optim_t *nn_optim_new(nn_net_t *net, const nn_train_config_t *cfg, int32_t max_batch, char *err, size_t errlen) {
    if (max_batch < 1 || max_batch > (1 << 20)) {
        set_err(err, errlen, "nn_optim_new: max_batch %d out of range", max_batch);
        return NULL;
    }
    int32_t nu = net->n_units;
    nn_optim_t *tr = calloc(1, sizeof(*tr) + sizeof(float *) * 5 * (size_t)nu);
    if (!tr) {
        set_err(err, errlen, "nn_optim_new: out of memory");
        return NULL;
    }
    nn_backend_t *be = net->be;
    tr->net = net;
    tr->be = be;
    tr->cfg = cfg ? *cfg : nn_train_config_default();
    tr->max_batch = max_batch;
    tr->uid = nnet_next_uid();
    tr->c = tr->ptrs;
    tr->z = tr->ptrs + nu;
    tr->y = tr->ptrs + 2 * nu;
    tr->mean = tr->ptrs + 3 * nu;
    tr->invstd = tr->ptrs + 4 * nu;
    size_t ws = nnet_max_conv_ws(net, be, max_batch);
    tr->head_stride = ((int64_t)max_batch * net->cfg.channels * NN_HW + 15) & ~(int64_t)15;
    for (int pass = 0; pass < 2; pass++) {
        carve_t c = {pass ? tr->arena : NULL, 0};
        optim_carve(tr, &c, ws);
        if (pass == 0) {
            tr->arena = be->buf_alloc(be, c.off);
            tr->grads = be->buf_alloc(be, sizeof(float) * (size_t)net->n_params);
            tr->momentum = be->buf_alloc(be, sizeof(float) * (size_t)net->n_params);
            if (!tr->arena || !tr->grads || !tr->momentum) {
                nn_optim_free(tr);
                nnet_set_oom(err, errlen, "nn_optim_new", be, c.off + 2 * sizeof(float) * (size_t)net->n_params);
                return NULL;
            }
        }
    }
    optim_alias_infer(tr);
    _Static_assert(NN_STAT_NB <= NN_LATE_STRIDE, "a metric record holds the stats");
    size_t late_bytes = 2 * NN_LATE_STRIDE * sizeof(float);
    if (be->host_alloc && (tr->late_host = be->host_alloc(be, late_bytes)) != NULL) tr->late_pinned = 1;
    else if (!(tr->late_host = malloc(late_bytes))) {
        nn_optim_free(tr);
        set_err(err, errlen, "nn_optim_new: out of host memory");
        return NULL;
    }
    if (net->u_ml >= 0) {
        if (!(tr->ml_none = malloc(sizeof(float) * (size_t)max_batch))) {
            nn_optim_free(tr);
            set_err(err, errlen, "nn_optim_new: out of host memory");
            return NULL;
        }
        for (int32_t b = 0; b < max_batch; b++) tr->ml_none[b] = -1.0f;
    }
    be->memset_zero(be, tr->grads, sizeof(float) * (size_t)net->n_params);
    be->memset_zero(be, tr->momentum, sizeof(float) * (size_t)net->n_params);
    if (nnet_be_check(be, "nn_optim_new", err, errlen) != 0) {
        nn_optim_free(tr);
        return NULL;
    }
    return tr;
}

void nn_optim_free(nn_optim_t *tr) {
    if (!tr) return;
    tr->be->buf_free(tr->be, tr->arena);
    tr->be->buf_free(tr->be, tr->grads);
    tr->be->buf_free(tr->be, tr->momentum);
    if (tr->late_pinned) tr->be->host_free(tr->be, tr->late_host);
    else free(tr->late_host);
    free(tr->ml_none);
    free(tr);
}

nn_net_t *nn_optim_net(const nn_optim_t *tr) { return tr->net; }
void nn_optim_set_config(nn_optim_t *tr, const nn_train_config_t *cfg) { tr->cfg = *cfg; }
float *nn_optim_grads(nn_optim_t *tr) { return tr->grads; }
float *nn_optim_momentum(nn_optim_t *tr) { return tr->momentum; }
int64_t nn_optim_step_count(const nn_optim_t *tr) { return tr->step; }
void nn_optim_set_step_count(nn_optim_t *tr, int64_t step) { tr->step = step; }
void nn_optim_staging(nn_optim_t *tr, nn_train_staging_t *st, int32_t *max_batch) {
    *st = (nn_train_staging_t){tr->planes, tr->hand, tr->legal, tr->offsets, tr->labels, tr->probs, tr->result, tr->q,
                               tr->ml_t, tr->opp_offsets, tr->opp_labels, tr->opp_probs};
    if (max_batch) *max_batch = tr->max_batch;
}

/* The columns of a host batch (policy offsets checked already): labels
 * checked, then everything uploaded into the staging. */
static int upload_columns(nn_optim_t *tr, const nn_batch_t *bt, char *err, size_t errlen) {
    const nn_net_config_t *nc = &tr->net->cfg;
    nn_backend_t *be = tr->be;
    int32_t B = bt->B;
    uint32_t nnz = bt->policy_offsets[B];
    for (uint32_t j = 0; j < nnz; j++)
        if (bt->policy_label[j] >= NN_POLICY_NB) {
            set_err(err, errlen, "policy_label[%u] = %u >= %d", j, bt->policy_label[j], NN_POLICY_NB);
            return -1;
        }
    be->upload(be, tr->planes, bt->planes, (size_t)(B * nn_packed_bytes(nc->in_planes)));
    if (nc->in_hand) be->upload(be, tr->hand, bt->hand, sizeof(float) * (size_t)B * nc->in_hand);
    be->upload(be, tr->legal, bt->legal, (size_t)(B * nn_packed_bytes(NN_POLICY_CH)));
    be->upload(be, tr->offsets, bt->policy_offsets, sizeof(uint32_t) * (size_t)(B + 1));
    if (nnz) {
        be->upload(be, tr->labels, bt->policy_label, sizeof(uint16_t) * nnz);
        be->upload(be, tr->probs, bt->policy_prob, sizeof(float) * nnz);
    }
    be->upload(be, tr->result, bt->result, (size_t)B);
    be->upload(be, tr->q, bt->root_q, sizeof(float) * (size_t)B);
    if (tr->ml_t) be->upload(be, tr->ml_t, bt->moves_left ? bt->moves_left : tr->ml_none, sizeof(float) * (size_t)B);
    if (tr->opp_offsets && bt->opp_offsets) {
        uint32_t onz = bt->opp_offsets[B];
        for (uint32_t j = 0; j < onz; j++)
            if (bt->opp_label[j] >= NN_POLICY_NB) {
                set_err(err, errlen, "opp_label[%u] = %u >= %d", j, bt->opp_label[j], NN_POLICY_NB);
                return -1;
            }
        be->upload(be, tr->opp_offsets, bt->opp_offsets, sizeof(uint32_t) * (size_t)(B + 1));
        if (onz) {
            be->upload(be, tr->opp_labels, bt->opp_label, sizeof(uint16_t) * onz);
            be->upload(be, tr->opp_probs, bt->opp_prob, sizeof(float) * onz);
        }
    }
    return 0;
}

/* What a batch without targets for the net's optional heads stands for:
 * moves_left -1 (no target) in every row, no opponent-reply targets (empty
 * offsets). Queued before the step's ops (outside any recording). */
static void fill_absent_targets(nn_optim_t *tr, const nn_batch_t *bt) {
    nn_backend_t *be = tr->be;
    if (tr->ml_t && !bt->moves_left && bt->staged) /* a host batch uploaded them with its columns */
        be->upload(be, tr->ml_t, tr->ml_none, sizeof(float) * (size_t)bt->B);
    if (tr->opp_offsets && !bt->opp_offsets) be->memset_zero(be, tr->opp_offsets, sizeof(uint32_t) * (size_t)(bt->B + 1));
}

/* Checks a batch's size and policy offsets on the host. */
static int check_batch(nn_optim_t *tr, const nn_batch_t *bt, char *err, size_t errlen) {
    const nn_net_config_t *nc = &tr->net->cfg;
    int32_t B = bt->B;
    if (B < 1 || B > tr->max_batch) {
        set_err(err, errlen, "batch size %d out of range 1..%d", B, tr->max_batch);
        return -1;
    }
    if (!bt->policy_offsets || (!bt->staged && (!bt->planes || !bt->legal || !bt->result || !bt->root_q ||
                                                 (nc->in_hand && !bt->hand)))) {
        set_err(err, errlen, "batch is missing a column");
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        const uint32_t *off = k ? bt->opp_offsets : bt->policy_offsets;
        const char *name = k ? "opp_offsets" : "policy_offsets";
        if (k && (!off || tr->net->u_opp < 0)) break;
        if (k && !bt->staged && off[B] && (!bt->opp_label || !bt->opp_prob)) {
            set_err(err, errlen, "batch has opp_offsets without opp_label or opp_prob");
            return -1;
        }
        if (off[0] != 0) {
            set_err(err, errlen, "%s[0] is %u, not 0", name, off[0]);
            return -1;
        }
        for (int32_t b = 0; b < B; b++)
            if (off[b + 1] < off[b] || off[b + 1] - off[b] > NN_POLICY_NB) {
                set_err(err, errlen, "%s[%d..%d] = %u..%u invalid", name, b, b + 1, off[b], off[b + 1]);
                return -1;
            }
    }
    return 0;
}

/* The staged batch's inputs and targets expanded on the device. */
static void expand_batch(nn_optim_t *tr, int32_t B) {
    const nn_net_config_t *nc = &tr->net->cfg;
    nn_backend_t *be = tr->be;
    be->expand_planes(be, tr->planes, tr->hand, B, nc->in_planes, nc->in_hand, tr->x0);
    be->expand_planes(be, tr->legal, NULL, B, NN_POLICY_CH, 0, tr->legal_t);
    be->value_target(be, tr->result, tr->q, B, tr->cfg.q_mix, tr->cfg.q_draw, tr->value_t);
}

/* Checks the batch, uploads a host batch's columns, expands: the batch ready
 * for a forward. */
static int upload_batch(nn_optim_t *tr, const nn_batch_t *bt, char *err, size_t errlen) {
    if (check_batch(tr, bt, err, errlen) != 0) return -1;
    if (!bt->staged && upload_columns(tr, bt, err, errlen) != 0) return -1;
    fill_absent_targets(tr, bt);
    expand_batch(tr, bt->B);
    return 0;
}

/* Training-mode unit forward: y = act(BN(conv(in)) + res), unit un (the
 * merged head pair: the policy unit with 2C output channels) into the
 * buffers of unit u. */
static void unit_fwd_train(nn_optim_t *tr, const nn_unit_t *un, int32_t u, int32_t B, const float *in,
                           const float *res) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    int64_t n = (int64_t)B * un->cout * NN_HW;
    nn_act_t act = net->cfg.act;
    be->conv_fwd(be, in, P(net, un->w), NULL, B, un->cin, un->cout, un->k, tr->c[u], tr->ws);
    if (act == NN_ACT_RELU && be->bn_relu_fwd_train) { /* one op: z == y */
        be->bn_relu_fwd_train(be, tr->c[u], P(net, un->gamma), P(net, un->beta), res, B, un->cout, NN_HW,
                              NN_BN_EPS, tr->cfg.bn_momentum, S(net, un->rmean), S(net, un->rvar), tr->y[u],
                              tr->mean[u], tr->invstd[u]);
        return;
    }
    be->bn_fwd_train(be, tr->c[u], P(net, un->gamma), P(net, un->beta), B, un->cout, NN_HW,
                     NN_BN_EPS, tr->cfg.bn_momentum, S(net, un->rmean), S(net, un->rvar), tr->z[u],
                     tr->mean[u], tr->invstd[u]);
    if (act == NN_ACT_RELU) {
        be->act_fwd(be, tr->z[u], res, n, act, tr->y[u]); /* z == y */
    } else {
        if (res) be->add(be, tr->z[u], res, n, tr->z[u]);
        be->act_fwd(be, tr->z[u], NULL, n, act, tr->y[u]);
    }
}

/* Training-mode unit backward from dy (B, cout, 81) = gradient at the unit's
 * output; dy is overwritten (dBN input). Writes dW, dgamma, dbeta, and the
 * input gradient into dx (accumulate: +=) when dx != NULL. If dres != NULL the
 * gradient at the residual sum is copied there first. */
static void unit_bwd(nn_optim_t *tr, const nn_unit_t *un, int32_t u, int32_t B, const float *in, float *dy,
                     float *dres, float *dx, int32_t accumulate) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    int64_t n = (int64_t)B * un->cout * NN_HW;
    float *g = tr->grads;
    if (net->cfg.act == NN_ACT_RELU && be->bn_relu_bwd) { /* one op: z == y */
        be->bn_relu_bwd(be, tr->c[u], tr->z[u], dy, P(net, un->gamma), tr->mean[u], tr->invstd[u], B, un->cout,
                        NN_HW, dres, dy, g + net->tensors[un->gamma].offset, g + net->tensors[un->beta].offset);
    } else {
        be->act_bwd(be, dy, tr->z[u], n, net->cfg.act, dy);
        if (dres) be->copy(be, dres, dy, sizeof(float) * (size_t)n);
        be->bn_bwd(be, tr->c[u], dy, P(net, un->gamma), tr->mean[u], tr->invstd[u], B, un->cout, NN_HW,
                   dy, g + net->tensors[un->gamma].offset, g + net->tensors[un->beta].offset);
    }
    be->conv_bwd_filter(be, in, dy, B, un->cin, un->cout, un->k, g + net->tensors[un->w].offset,
                        NULL, tr->ws);
    if (dx) be->conv_bwd_data(be, dy, P(net, un->w), B, un->cin, un->cout, un->k, dx, accumulate, tr->ws);
}

static void losses(nn_optim_t *tr, int32_t B) {
    nn_backend_t *be = tr->be;
    const nn_train_config_t *c = &tr->cfg;
    be->policy_loss(be, tr->policy, tr->offsets, tr->labels, tr->probs, B, NN_POLICY_NB,
                    c->w_policy / (float)B, tr->dpolicy, tr->stats);
    be->value_loss(be, tr->value, tr->value_t, B, NN_VALUE_NB, c->w_value / (float)B, tr->dvalue,
                   tr->stats);
    be->legal_loss(be, tr->legal_out, tr->legal_t, B, NN_POLICY_NB,
                   c->w_legal / ((float)B * NN_POLICY_NB), tr->dlegal, tr->stats);
    if (tr->ml_out)
        be->moves_left_loss(be, tr->ml_out, tr->ml_t, B, NN_ML_SCALE, NN_ML_HUBER, c->w_moves_left / (float)B, tr->dml,
                            tr->stats);
    if (tr->opp_out) /* its loss and top-1 count land in NN_STAT_OPP_LOSS, NN_STAT_OPP_CORRECT */
        be->policy_loss(be, tr->opp_out, tr->opp_offsets, tr->opp_labels, tr->opp_probs, B, NN_POLICY_NB,
                        c->w_opp_policy / (float)B, tr->dopp, tr->stats + NN_STAT_OPP_LOSS);
}

static void forward_backward(nn_optim_t *tr, int32_t B) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    const nn_net_config_t *nc = &net->cfg;
    int32_t n = nc->blocks, C = nc->channels;
    nn_act_t act = nc->act;
    float *g = tr->grads;
    const nn_unit_t *U = net->units;
#define GRAD(t) (g + net->tensors[(t)].offset)
    /* forward */
    unit_fwd_train(tr, &U[U_STEM], U_STEM, B, tr->x0, NULL);
    for (int32_t i = 0; i < n; i++) {
        unit_fwd_train(tr, &U[1 + 2 * i], 1 + 2 * i, B, tr->y[2 * i], NULL);
        const float *h1 = tr->y[1 + 2 * i];
        if (tr->gp_h[i]) { /* global pooling: conv2 reads h1 + the board's channel biases */
            nnet_gpool_fwd(net, be, i, B, tr->y[1 + 2 * i], tr->gp_pool[i], tr->gp_gb, tr->gp_h[i]);
            h1 = tr->gp_h[i];
        }
        unit_fwd_train(tr, &U[2 + 2 * i], 2 + 2 * i, B, h1, tr->y[2 * i]);
    }
    const float *T = tr->y[2 * n]; /* trunk output (B, C, 9, 9) */
    const nn_unit_t *po = &U[U_POUT(n)], *lo = &U[U_LOUT(n)];
    const int32_t PC = U_PCONV(n), LC = U_LCONV(n);
    /* The head pair: one unit of 2C channels (merged; its output split into
     * hsplit, one head after the other), or two units. hp / hl: the inputs
     * of the two output convolutions, (B, C, 9, 9) each. */
    nn_unit_t pair = U[PC];
    pair.cout = 2 * C;
    const float *hp, *hl;
    if (net->merge_heads) {
        unit_fwd_train(tr, &pair, PC, B, T, NULL); /* y[PC] (B, 2C, 9, 9) */
        nnet_channel_slice(be, tr->hsplit, tr->y[PC], B, C, 2 * C, 0, 0);
        nnet_channel_slice(be, tr->hsplit + tr->head_stride, tr->y[PC], B, C, 2 * C, C, 0);
        hp = tr->hsplit;
        hl = tr->hsplit + tr->head_stride; /* 64-byte aligned, as every conv operand */
    } else {
        unit_fwd_train(tr, &U[PC], PC, B, T, NULL);
        unit_fwd_train(tr, &U[LC], LC, B, T, NULL);
        hp = tr->y[PC];
        hl = tr->y[LC];
    }
    be->conv_fwd(be, hp, P(net, po->w), P(net, po->bias), B, C, NN_POLICY_CH, 1, tr->policy, tr->ws);
    be->conv_fwd(be, hl, P(net, lo->w), P(net, lo->bias), B, C, NN_POLICY_CH, 1, tr->legal_out, tr->ws);
    unit_fwd_train(tr, &U[U_VCONV(n)], U_VCONV(n), B, T, NULL);
    const float *vy = tr->y[U_VCONV(n)];
    be->dense_fwd(be, vy, P(net, net->fc1_w), P(net, net->fc1_b), B, NN_VALUE_CH * NN_HW,
                  NN_VALUE_HIDDEN, tr->fc1_z);
    be->act_fwd(be, tr->fc1_z, NULL, (int64_t)B * NN_VALUE_HIDDEN, act, tr->fc1_y);
    be->dense_fwd(be, tr->fc1_y, P(net, net->fc2_w), P(net, net->fc2_b), B, NN_VALUE_HIDDEN,
                  NN_VALUE_NB, tr->value);
    const int32_t MU = net->u_ml;
    const nn_unit_t *oo = net->u_opp >= 0 ? &U[net->u_opp] : NULL;
    if (MU >= 0) { /* moves left: conv unit, dense, act, dense -> ml_out (B), linear (no clamp while training) */
        unit_fwd_train(tr, &U[MU], MU, B, T, NULL);
        be->dense_fwd(be, tr->y[MU], P(net, net->ml_fc1_w), P(net, net->ml_fc1_b), B, NN_ML_CH * NN_HW, NN_ML_HIDDEN,
                      tr->ml_fc1_z);
        be->act_fwd(be, tr->ml_fc1_z, NULL, (int64_t)B * NN_ML_HIDDEN, act, tr->ml_fc1_y);
        be->dense_fwd(be, tr->ml_fc1_y, P(net, net->ml_fc2_w), P(net, net->ml_fc2_b), B, NN_ML_HIDDEN, 1, tr->ml_out);
    }
    if (oo) /* the opponent's reply from the policy head's hidden activation */
        be->conv_fwd(be, hp, P(net, oo->w), P(net, oo->bias), B, C, NN_POLICY_CH, 1, tr->opp_out, tr->ws);
    losses(tr, B);

    /* backward: heads into dT = g[0]; g[1], g[2] are free until the trunk's turn */
    float *dT = tr->g[0];
    be->conv_bwd_filter(be, hp, tr->dpolicy, B, C, NN_POLICY_CH, 1, GRAD(po->w), GRAD(po->bias), tr->ws);
    be->conv_bwd_filter(be, hl, tr->dlegal, B, C, NN_POLICY_CH, 1, GRAD(lo->w), GRAD(lo->bias), tr->ws);
    if (oo) be->conv_bwd_filter(be, hp, tr->dopp, B, C, NN_POLICY_CH, 1, GRAD(oo->w), GRAD(oo->bias), tr->ws);
    if (net->merge_heads) {
        /* both halves of the pair's gradient, then one backward pass (one
         * backward-data, one backward-filter) for the 2C channels */
        be->conv_bwd_data(be, tr->dpolicy, P(net, po->w), B, C, NN_POLICY_CH, 1, tr->g[1], 0, tr->ws);
        if (oo) be->conv_bwd_data(be, tr->dopp, P(net, oo->w), B, C, NN_POLICY_CH, 1, tr->g[1], 1, tr->ws);
        be->conv_bwd_data(be, tr->dlegal, P(net, lo->w), B, C, NN_POLICY_CH, 1, tr->g[2], 0, tr->ws);
        nnet_channel_slice(be, tr->g[1], tr->gh, B, C, 2 * C, 0, 1);
        nnet_channel_slice(be, tr->g[2], tr->gh, B, C, 2 * C, C, 1);
        unit_bwd(tr, &pair, PC, B, T, tr->gh, NULL, dT, 0);
    } else {
        be->conv_bwd_data(be, tr->dpolicy, P(net, po->w), B, C, NN_POLICY_CH, 1, tr->gh, 0, tr->ws);
        if (oo) be->conv_bwd_data(be, tr->dopp, P(net, oo->w), B, C, NN_POLICY_CH, 1, tr->gh, 1, tr->ws);
        unit_bwd(tr, &U[PC], PC, B, T, tr->gh, NULL, dT, 0);
        be->conv_bwd_data(be, tr->dlegal, P(net, lo->w), B, C, NN_POLICY_CH, 1, tr->gh, 0, tr->ws);
        unit_bwd(tr, &U[LC], LC, B, T, tr->gh, NULL, dT, 1);
    }
    be->dense_bwd(be, tr->fc1_y, P(net, net->fc2_w), tr->dvalue, B, NN_VALUE_HIDDEN, NN_VALUE_NB,
                  tr->gfc1, GRAD(net->fc2_w), GRAD(net->fc2_b));
    be->act_bwd(be, tr->gfc1, tr->fc1_z, (int64_t)B * NN_VALUE_HIDDEN, act, tr->gfc1);
    be->dense_bwd(be, vy, P(net, net->fc1_w), tr->gfc1, B, NN_VALUE_CH * NN_HW, NN_VALUE_HIDDEN,
                  tr->gv, GRAD(net->fc1_w), GRAD(net->fc1_b));
    unit_bwd(tr, &U[U_VCONV(n)], U_VCONV(n), B, T, tr->gv, NULL, dT, 1);
    if (MU >= 0) {
        be->dense_bwd(be, tr->ml_fc1_y, P(net, net->ml_fc2_w), tr->dml, B, NN_ML_HIDDEN, 1, tr->gml_fc1,
                      GRAD(net->ml_fc2_w), GRAD(net->ml_fc2_b));
        be->act_bwd(be, tr->gml_fc1, tr->ml_fc1_z, (int64_t)B * NN_ML_HIDDEN, act, tr->gml_fc1);
        be->dense_bwd(be, tr->y[MU], P(net, net->ml_fc1_w), tr->gml_fc1, B, NN_ML_CH * NN_HW, NN_ML_HIDDEN, tr->gmlv,
                      GRAD(net->ml_fc1_w), GRAD(net->ml_fc1_b));
        unit_bwd(tr, &U[MU], MU, B, T, tr->gmlv, NULL, dT, 1);
    }

    /* trunk: D = gradient at the block output, S = at the block input */
    float *D = tr->g[0], *Sg = tr->g[1], *E = tr->g[2];
    for (int32_t i = n - 1; i >= 0; i--) {
        int32_t u1 = 1 + 2 * i, u2 = 2 + 2 * i;
        /* u2: D -> skip gradient copied to Sg, conv input grad into E */
        unit_bwd(tr, &U[u2], u2, B, tr->gp_h[i] ? tr->gp_h[i] : tr->y[u1], D, Sg, E, 0);
        if (tr->gp_h[i]) { /* E is also the bias's gradient, summed over the squares, back through the pool */
            be->chan_bias_bwd(be, E, B, C, tr->gp_gb);
            be->dense_bwd(be, tr->gp_pool[i], P(net, net->gp_w[i]), tr->gp_gb, B, 2 * C, C, tr->gp_dpool,
                          GRAD(net->gp_w[i]), GRAD(net->gp_b[i]));
            be->pool_bwd(be, tr->y[u1], tr->gp_dpool, B, C, E);
        }
        /* u1: E -> input grad added to Sg */
        unit_bwd(tr, &U[u1], u1, B, tr->y[2 * i], E, NULL, Sg, 1);
        float *t = D;
        D = Sg;
        Sg = t;
    }
    unit_bwd(tr, &U[U_STEM], U_STEM, B, tr->x0, D, NULL, NULL, 0);
#undef GRAD
}

/* Positions of a batch that carry a policy target (playout-cap randomization
 * leaves the fast-search positions without one). */
static int32_t policy_positions(const nn_batch_t *bt) {
    int32_t n = 0;
    for (int32_t b = 0; b < bt->B; b++) n += bt->policy_offsets[b + 1] > bt->policy_offsets[b];
    return n;
}

/* Positions with an opponent-reply target (0 without the column). */
static int32_t opp_positions(const nn_batch_t *bt) {
    int32_t n = 0;
    for (int32_t b = 0; bt->opp_offsets && b < bt->B; b++) n += bt->opp_offsets[b + 1] > bt->opp_offsets[b];
    return n;
}

/* The metrics of a step from its stats s (host copy): config c, step = the
 * step count before it (m->step; callers of an update set step + 1). */
static void metrics_from_stats(const float *s, const nn_train_config_t *c, const nn_net_t *net, int64_t step,
                               int32_t B, int32_t n_policy, int32_t n_opp, int grad, nn_metrics_t *m) {
    memset(m, 0, sizeof(*m));
    m->step = step;
    m->lr = nn_lr_at(c, step);
    m->policy_positions = n_policy;
    /* The objective the step minimised: the policy sum over all B positions. */
    double policy_per_position = s[NN_STAT_POLICY_LOSS] / (double)B;
    m->value_loss = s[NN_STAT_VALUE_LOSS] / (double)B;
    m->legal_loss = s[NN_STAT_LEGAL_LOSS] / ((double)B * NN_POLICY_NB);
    m->loss = c->w_policy * policy_per_position + c->w_value * m->value_loss + c->w_legal * m->legal_loss;
    /* What a person reads: over the positions that have a target. */
    m->policy_loss = n_policy > 0 ? s[NN_STAT_POLICY_LOSS] / (double)n_policy : NAN;
    m->policy_acc = n_policy > 0 ? s[NN_STAT_POLICY_CORRECT] / (double)n_policy : NAN;
    double tp = s[NN_STAT_LEGAL_TP], fp = s[NN_STAT_LEGAL_FP], fn = s[NN_STAT_LEGAL_FN];
    m->legal_f1 = (2 * tp + fp + fn) > 0 ? 2 * tp / (2 * tp + fp + fn) : 1.0;
    m->legal_tp = tp, m->legal_fp = fp, m->legal_fn = fn;
    m->grad_norm = grad ? sqrt((double)s[NN_STAT_GNORM2]) : 0.0;
    /* the optional heads: in the objective over all B rows, read over the rows with a target */
    m->moves_left_loss = m->moves_left_mae = m->opp_policy_loss = NAN;
    if (net->u_ml >= 0) {
        double n_ml = s[NN_STAT_ML_COUNT];
        m->moves_left_positions = (int32_t)n_ml;
        m->loss += c->w_moves_left * s[NN_STAT_ML_LOSS] / (double)B;
        if (n_ml > 0) m->moves_left_loss = s[NN_STAT_ML_LOSS] / n_ml, m->moves_left_mae = s[NN_STAT_ML_ABS] / n_ml;
    }
    if (net->u_opp >= 0) {
        m->opp_positions = n_opp;
        m->loss += c->w_opp_policy * s[NN_STAT_OPP_LOSS] / (double)B;
        if (n_opp > 0) m->opp_policy_loss = s[NN_STAT_OPP_LOSS] / (double)n_opp;
    }
}

static void fill_metrics(nn_optim_t *tr, const nn_batch_t *bt, int grad, nn_metrics_t *m) {
    float s[NN_STAT_NB];
    tr->be->download(tr->be, s, tr->stats, sizeof(s));
    metrics_from_stats(s, &tr->cfg, tr->net, tr->step, bt->B, policy_positions(bt), opp_positions(bt), grad, m);
}

/* The learning rate of the step about to be queued, and the weight decay,
 * into tr->hyper (queued before the step: the step reads them on the device,
 * so a recorded step replays with this step's values). */
static void hyper_upload(nn_optim_t *tr) {
    float lr = nn_lr_at(&tr->cfg, tr->step), h[4] = {lr, tr->cfg.weight_decay, lr, 0.0f};
    tr->be->upload(tr->be, tr->hyper, h, sizeof h);
}

/* The SGD step with the gradients in tr->grads and their squared norm in
 * tr->stats[NN_STAT_GNORM2] (clipping), lr and weight decay from tr->hyper. */
static void sgd_apply(nn_optim_t *tr) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    nn_sgd_args_t a = {.momentum = tr->cfg.momentum,
                       .nesterov = tr->cfg.nesterov,
                       .clip_norm = tr->cfg.clip_norm,
                       .hyper = tr->hyper};
    be->sgd_step(be, net->params, tr->grads, tr->momentum, net->n_decay, tr->stats + NN_STAT_GNORM2, &a);
    a.hyper = tr->hyper + 2; /* no decay: BN parameters and biases */
    be->sgd_step(be, net->params + net->n_decay, tr->grads + net->n_decay, tr->momentum + net->n_decay,
                 net->n_params - net->n_decay, tr->stats + NN_STAT_GNORM2, &a);
}

/* The ops of a step, queued: the batch uploaded, forward, losses, backward,
 * the gradient norm into tr->stats and, when update, the SGD step. 0, or -1
 * with err for a failed backend or an invalid batch (nothing queued). */
typedef struct {
    nn_optim_t *tr;
    int32_t B, update;
} step_args_t;

/* A step's device work, from the staged batch to the updated weights: what
 * a recording of the step holds. */
static void step_ops(void *arg) {
    const step_args_t *a = arg;
    nn_optim_t *tr = a->tr;
    nn_backend_t *be = tr->be;
    expand_batch(tr, a->B);
    be->memset_zero(be, tr->stats, sizeof(float) * NN_STAT_NB);
    forward_backward(tr, a->B);
    be->sum_squares(be, tr->grads, tr->net->n_params, tr->stats + NN_STAT_GNORM2);
    if (a->update) sgd_apply(tr);
}

/* The key of a recorded step: the trainer, the batch size and every setting
 * the recorded ops hold as a value (the lr and weight decay are read from
 * tr->hyper instead). */
static uint64_t step_key(const nn_optim_t *tr, int32_t B) {
    const nn_train_config_t *c = &tr->cfg;
    float v[11] = {c->momentum, c->clip_norm, c->w_policy, c->w_value,     c->w_legal,     c->q_mix,
                   c->q_draw,   c->bn_momentum, (float)c->nesterov, c->w_moves_left, c->w_opp_policy};
    uint64_t h = compat_mix64(tr->uid * 0x9E3779B97F4A7C15ull + (uint64_t)B);
    h = compat_mix64(h ^ (uint64_t)tr->net->merge_heads ^ 0x7472616E00000000ull); /* "tran" */
    for (int i = 0; i < 11; i++) {
        uint32_t u;
        memcpy(&u, &v[i], sizeof u);
        h = compat_mix64(h ^ u);
    }
    return h;
}

static int queue_step(nn_optim_t *tr, const nn_batch_t *bt, int update, const char *what, char *err,
                      size_t errlen) {
    nn_backend_t *be = tr->be;
    if (nnet_be_check(be, what, err, errlen) != 0) return -1;
    if (check_batch(tr, bt, err, errlen) != 0) return -1;
    if (!bt->staged && upload_columns(tr, bt, err, errlen) != 0) return -1;
    fill_absent_targets(tr, bt);
    if (update) hyper_upload(tr);
    step_args_t a = {tr, bt->B, update};
    /* A step on a staged batch (gathered on the device) is device work only,
     * from the same buffers every time: recorded where the backend records.
     * A host batch's uploads stay outside any recording. */
    if (bt->staged && update) nnet_run_recorded(be, &tr->seen, step_key(tr, bt->B), step_ops, &a);
    else step_ops(&a);
    return 0;
}

static int train_common(nn_optim_t *tr, const nn_batch_t *bt, nn_metrics_t *m, int update,
                        char *err, size_t errlen) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    const char *what = update ? "nn_train_step" : "nn_train_grad";
    size_t stats_bytes = sizeof(float) * (size_t)net->n_stats;
    if (!update) be->copy(be, tr->rm_backup, net->stats, stats_bytes); /* the forward moves them */
    if (queue_step(tr, bt, update, what, err, errlen) != 0) return -1;
    if (!update) be->copy(be, net->stats, tr->rm_backup, stats_bytes);
    if (m) fill_metrics(tr, bt, 1, m);
    if (be->sync) be->sync(be);
    if (update) nn_net_mark_dirty(net); /* whatever happened, the weights were written */
    if (nnet_be_check(be, what, err, errlen) != 0) return -1;
    if (m && update) m->step = tr->step + 1;
    if (update) tr->step++;
    return 0;
}

int nn_train_step(nn_optim_t *tr, const nn_batch_t *bt, nn_metrics_t *m, char *err, size_t errlen) {
    return train_common(tr, bt, m, 1, err, errlen);
}

/* ---- one step late ----------------------------------------------------------- */
int nn_train_step_launch(nn_optim_t *tr, const nn_batch_t *bt, int64_t *step, char *err, size_t errlen) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    const char *what = "nn_train_step";
    int32_t slot = tr->late[0].pending ? 1 : 0;
    if (tr->late[slot].pending) {
        set_err(err, errlen, "%s: the metrics of steps %lld and %lld were not read (nn_train_step_metrics)", what,
                (long long)tr->late[0].step, (long long)tr->late[1].step);
        return -1;
    }
    if (queue_step(tr, bt, 1, what, err, errlen) != 0) return -1;
    int32_t B = bt->B;
    /* The stats into this slot's record: queued behind a fence where the
     * backend can (the next step is queued before anyone waits for it), else
     * a download (the CPU's ops are done already: nothing to wait for). */
    float *h = tr->late_host + (size_t)slot * NN_LATE_STRIDE;
    int fenced = tr->late_pinned && be->download_async && be->fence_record && be->fence_wait;
    if (fenced) {
        be->download_async(be, h, tr->stats, sizeof(float) * NN_STAT_NB);
        be->fence_record(be, slot);
    } else {
        be->download(be, h, tr->stats, sizeof(float) * NN_STAT_NB);
    }
    nn_net_mark_dirty(net); /* whatever happened, the weights were written */
    if (nnet_be_check(be, what, err, errlen) != 0) return -1; /* a failure seen so far (queued work: at the read) */
    tr->late[slot].pending = 1;
    tr->late[slot].fenced = fenced;
    tr->late[slot].step = tr->step + 1;
    tr->late[slot].B = B;
    tr->late[slot].n_policy = policy_positions(bt);
    tr->late[slot].n_opp = opp_positions(bt);
    tr->late[slot].cfg = tr->cfg;
    tr->step++;
    if (step) *step = tr->step;
    return 0;
}

int nn_train_step_metrics(nn_optim_t *tr, int64_t step, nn_metrics_t *m, char *err, size_t errlen) {
    nn_backend_t *be = tr->be;
    int32_t slot = -1;
    for (int32_t i = 0; i < 2; i++)
        if (tr->late[i].pending && tr->late[i].step == step) slot = i;
    if (slot < 0) {
        set_err(err, errlen, "nn_train_step_metrics: no metrics of step %lld on their way", (long long)step);
        return -1;
    }
    tr->late[slot].pending = 0;
    /* A record copied by a download was complete at launch; a fenced one is
     * complete once its fence has passed on a backend that has not failed. */
    if (tr->late[slot].fenced) {
        be->fence_wait(be, slot);
        if (nnet_be_check(be, "nn_train_step", err, errlen) != 0) return -1;
    }
    if (m) {
        metrics_from_stats(tr->late_host + (size_t)slot * NN_LATE_STRIDE, &tr->late[slot].cfg, tr->net, step - 1,
                           tr->late[slot].B, tr->late[slot].n_policy, tr->late[slot].n_opp, 1, m);
        m->step = step;
    }
    return 0;
}

int32_t nn_train_steps_pending(const nn_optim_t *tr) { return tr->late[0].pending + tr->late[1].pending; }

int nn_train_grad(nn_optim_t *tr, const nn_batch_t *bt, nn_metrics_t *m, char *err, size_t errlen) {
    return train_common(tr, bt, m, 0, err, errlen);
}

int nn_train_step_grads(nn_optim_t *tr, const nn_batch_t *bt, nn_metrics_t *m, char *err, size_t errlen) {
    nn_backend_t *be = tr->be;
    if (nnet_be_check(be, "nn_train_step_grads", err, errlen) != 0) return -1;
    if (upload_batch(tr, bt, err, errlen) != 0) return -1;
    be->memset_zero(be, tr->stats, sizeof(float) * NN_STAT_NB);
    forward_backward(tr, bt->B); /* running statistics updated, as in nn_train_step */
    be->sum_squares(be, tr->grads, tr->net->n_params, tr->stats + NN_STAT_GNORM2);
    if (m) fill_metrics(tr, bt, 1, m);
    if (be->sync) be->sync(be);
    nn_net_mark_dirty(tr->net); /* the running statistics changed */
    return nnet_be_check(be, "nn_train_step_grads", err, errlen);
}

int nn_train_step_apply(nn_optim_t *tr, nn_metrics_t *m, char *err, size_t errlen) {
    nn_backend_t *be = tr->be;
    if (nnet_be_check(be, "nn_train_step_apply", err, errlen) != 0) return -1;
    float *g2 = tr->stats + NN_STAT_GNORM2;
    be->memset_zero(be, g2, sizeof(float));
    be->sum_squares(be, tr->grads, tr->net->n_params, g2); /* the norm of the gradients as they are now */
    hyper_upload(tr);
    sgd_apply(tr);
    float h = 0.0f;
    if (m) be->download(be, &h, g2, sizeof h);
    if (be->sync) be->sync(be);
    nn_net_mark_dirty(tr->net);
    if (nnet_be_check(be, "nn_train_step_apply", err, errlen) != 0) return -1;
    if (m) {
        m->lr = nn_lr_at(&tr->cfg, tr->step);
        m->grad_norm = sqrt((double)h);
        m->step = tr->step + 1;
    }
    tr->step++;
    return 0;
}

int nn_eval_batch(nn_optim_t *tr, const nn_batch_t *bt, nn_metrics_t *m, char *err, size_t errlen) {
    nn_backend_t *be = tr->be;
    if (nnet_be_check(be, "nn_eval_batch", err, errlen) != 0) return -1;
    if (upload_batch(tr, bt, err, errlen) != 0) return -1;
    int32_t B = bt->B;
    nnet_fold(tr->net, be);
    nnet_forward_infer(tr->net, be, B, &tr->f,
                       NN_OUT_ALL | (tr->ml_out ? NN_OUT_MOVES_LEFT : 0) | (tr->opp_out ? NNET_OUT_OPP : 0));
    be->memset_zero(be, tr->stats, sizeof(float) * NN_STAT_NB);
    losses(tr, B);
    if (m) fill_metrics(tr, bt, 0, m);
    if (be->sync) be->sync(be);
    return nnet_be_check(be, "nn_eval_batch", err, errlen);
}
