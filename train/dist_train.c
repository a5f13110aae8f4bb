/* dist_train.c - data-parallel training steps (see dist_train.h).
 *
 * Owns: the slice view of a global batch, host staging of gradients and BN
 * statistics (one allocation each), the per-step sums, the weights check.
 * Does not own: MPI (dist/), the net and trainer (nn/), the batch memory.
 * Threads: as dist_train.h says (one thread at a time).
 * Errors: -1 with err; never aborts.
 */
#include "train/dist_train.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "nn/backend_cuda.h"
#include "train/dist_nccl.h"

struct train_dist {
    dist_t *d;
    nn_optim_t *nt;
    nn_net_t *net;
    int32_t rank, ranks, B, b; /* global batch, rows per slice */
    int32_t micro;             /* slices per rank, one after the other */
    int64_t n_params, n_stats;
    float *grads;              /* (n_params) host staging of the gradients: sum over slices */
    float *stats;              /* (n_stats) host staging of the BN running statistics: sum over slices */
    float *one;                /* (max(n_params, n_stats)) one slice's gradients or statistics */
    float *stats0;             /* (n_stats) the running statistics before the step */
    uint32_t *offsets;         /* (2 (b + 1)) the slice's policy offsets, from 0, then its opponent-reply offsets */
    dist_nccl_t *nccl;         /* CUDA ranks, one slice each: means on the GPUs, no host copies */
    char route[320];           /* how the sums go, for the log */
};

/* The per-step sums over ranks, as doubles. */
/* Sums over ranks: policy figures weighted by positions with a target (S_NPOL), the objective (S_TOTAL). */
enum { S_FAILED, S_POLICY, S_VALUE, S_LEGAL, S_ACC, S_TP, S_FP, S_FN, S_NPOL, S_TOTAL, S_NB };

int32_t train_dist_local_batch(int32_t global_batch, int32_t slices) {
    return slices > 0 ? global_batch / slices : 0;
}

train_dist_t *train_dist_new(dist_t *d, nn_optim_t *nt, int32_t global_batch, int32_t micro, char *err,
                             size_t errlen) {
    int32_t n = dist_size(d);
    if (micro < 1 || global_batch < n * micro || global_batch % (n * micro) != 0) {
        set_err(err, errlen,
                "--batch %d is the global batch: it must be a multiple of the %d rank(s) x %d micro-batches",
                global_batch, n, micro);
        return NULL;
    }
    train_dist_t *td = calloc(1, sizeof *td);
    if (!td) {
        set_err(err, errlen, "train_dist_new: out of memory");
        return NULL;
    }
    td->d = d;
    td->nt = nt;
    td->net = nn_optim_net(nt);
    td->rank = dist_rank(d);
    td->ranks = n;
    td->B = global_batch;
    td->micro = micro;
    td->b = global_batch / (n * micro);
    nn_net_params(td->net, &td->n_params, NULL);
    nn_net_stats(td->net, &td->n_stats);
    int64_t big = td->n_params > td->n_stats ? td->n_params : td->n_stats;
    td->grads = malloc(sizeof(float) * (size_t)(td->n_params + 1));
    td->stats = malloc(sizeof(float) * (size_t)(td->n_stats + 1));
    td->one = malloc(sizeof(float) * (size_t)(big + 1));
    td->stats0 = malloc(sizeof(float) * (size_t)(td->n_stats + 1));
    td->offsets = malloc(sizeof(uint32_t) * 2 * (size_t)(td->b + 1)); /* the policy's, then the opponent reply's */
    if (!td->grads || !td->stats || !td->one || !td->stats0 || !td->offsets) {
        set_err(err, errlen, "train_dist_new: out of memory (%" PRId64 " parameters)", td->n_params);
        train_dist_free(td);
        return NULL;
    }
    snprintf(td->route, sizeof td->route, "MPI on host copies");
    /* Every rank runs the same command: they all take this branch or none */
    if (n > 1 && micro == 1 && nn_backend_is_cuda(nn_net_backend(td->net))) {
        char e[300];
        td->nccl = dist_nccl_new(d, nn_net_backend(td->net), e, sizeof e);
        snprintf(td->route, sizeof td->route, td->nccl ? "NCCL between the GPUs" : "MPI on host copies (no NCCL: %s)", e);
    }
    return td;
}

const char *train_dist_route(const train_dist_t *td) { return td->route; }

void train_dist_free(train_dist_t *td) {
    if (!td) return;
    dist_nccl_free(td->nccl);
    free(td->grads);
    free(td->stats);
    free(td->one);
    free(td->stats0);
    free(td->offsets);
    free(td);
}

/* Slice k of full: rows [k*b, (k+1)*b), offsets rebased to 0. */
static nn_batch_t slice(train_dist_t *td, const nn_batch_t *full, int32_t k) {
    const nn_net_config_t *nc = nn_net_config(td->net);
    int64_t lo = (int64_t)k * td->b, b = td->b;
    uint32_t base = full->policy_offsets[lo];
    for (int64_t i = 0; i <= b; i++) td->offsets[i] = full->policy_offsets[lo + i] - base;
    nn_batch_t s = *full;
    s.B = td->b;
    s.planes = full->planes + lo * (int64_t)nn_packed_bytes(nc->in_planes);
    s.hand = full->hand ? full->hand + lo * nc->in_hand : NULL;
    s.legal = full->legal + lo * (int64_t)nn_packed_bytes(NN_POLICY_CH);
    s.policy_offsets = td->offsets;
    s.policy_label = full->policy_label + base;
    s.policy_prob = full->policy_prob + base;
    s.result = full->result + lo;
    s.root_q = full->root_q + lo;
    /* the optional heads' targets (nn/net.h), sliced the same way */
    s.moves_left = full->moves_left ? full->moves_left + lo : NULL;
    if (full->opp_offsets) {
        uint32_t *oo = td->offsets + b + 1, obase = full->opp_offsets[lo];
        for (int64_t i = 0; i <= b; i++) oo[i] = full->opp_offsets[lo + i] - obase;
        s.opp_offsets = oo;
        s.opp_label = full->opp_label + obase;
        s.opp_prob = full->opp_prob + obase;
    }
    return s;
}

/* sum (host, n) := dev (first slice) or sum + dev (the next ones). */
static void add_slice(train_dist_t *td, float *sum, const float *dev, int64_t n, int first) {
    nn_backend_t *be = nn_net_backend(td->net);
    if (first) {
        be->download(be, sum, dev, sizeof(float) * (size_t)n);
        return;
    }
    be->download(be, td->one, dev, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) sum[i] += td->one[i];
}

/* dev (n floats) := the mean of the slices' sums in host over ranks. */
static int mean_over_ranks(train_dist_t *td, float *dev, float *host, int64_t n, char *err, size_t errlen) {
    nn_backend_t *be = nn_net_backend(td->net);
    if (dist_sum_f32(td->d, host, n, err, errlen) != 0) return -1;
    float k = (float)(td->ranks * td->micro);
    for (int64_t i = 0; i < n; i++) host[i] /= k;
    be->upload(be, dev, host, sizeof(float) * (size_t)n);
    return 0;
}

/* This rank's slices one after the other: gradients and running statistics
 * summed into the host staging (each slice starts from the running
 * statistics before the step, as every rank does), metrics into s. */
static int grads_of_slices(train_dist_t *td, const nn_batch_t *full, double *s, char *err, size_t errlen) {
    nn_backend_t *be = nn_net_backend(td->net);
    float *st = nn_net_stats(td->net, NULL);
    size_t sb = sizeof(float) * (size_t)td->n_stats;
    if (td->micro > 1) be->download(be, td->stats0, st, sb);
    for (int32_t j = 0; j < td->micro; j++) {
        if (j > 0) {
            be->upload(be, st, td->stats0, sb);
            nn_net_mark_dirty(td->net);
        }
        nn_batch_t part = slice(td, full, td->rank * td->micro + j);
        nn_metrics_t lm;
        memset(&lm, 0, sizeof lm);
        if (nn_train_step_grads(td->nt, &part, &lm, err, errlen) != 0) return -1;
        if (!td->nccl) { /* NCCL averages them where they are */
            add_slice(td, td->grads, nn_optim_grads(td->nt), td->n_params, j == 0);
            add_slice(td, td->stats, st, td->n_stats, j == 0);
        }
        if (lm.policy_positions > 0)
            s[S_POLICY] += lm.policy_loss * lm.policy_positions, s[S_ACC] += lm.policy_acc * lm.policy_positions,
                s[S_NPOL] += lm.policy_positions;
        s[S_VALUE] += lm.value_loss, s[S_LEGAL] += lm.legal_loss, s[S_TOTAL] += lm.loss;
        s[S_TP] += lm.legal_tp, s[S_FP] += lm.legal_fp, s[S_FN] += lm.legal_fn;
    }
    return 0;
}

/* m := the global metrics from the summed ones. */
static void global_metrics(train_dist_t *td, const double *s, nn_metrics_t *m) {
    double k = (double)(td->ranks * td->micro);
    m->policy_positions = (int32_t)s[S_NPOL];
    m->policy_loss = s[S_NPOL] > 0 ? s[S_POLICY] / s[S_NPOL] : NAN; /* over the positions with a target */
    m->value_loss = s[S_VALUE] / k;
    m->legal_loss = s[S_LEGAL] / k;
    m->policy_acc = s[S_NPOL] > 0 ? s[S_ACC] / s[S_NPOL] : NAN;
    m->loss = s[S_TOTAL] / k; /* the objective (nn/net.h), slices of equal size */
    m->legal_tp = s[S_TP], m->legal_fp = s[S_FP], m->legal_fn = s[S_FN];
    double d = 2 * s[S_TP] + s[S_FP] + s[S_FN];
    m->legal_f1 = d > 0 ? 2 * s[S_TP] / d : 1.0;
    m->moves_left_loss = m->moves_left_mae = m->opp_policy_loss = NAN; /* the optional heads': not summed over ranks */
}

/* The start of a step: did a rank fail before it, or was one asked to stop? */
static int step_begin(train_dist_t *td, int failed, int stop, int *stop_all, char *err, size_t errlen) {
    double pre[2] = {failed, stop != 0};
    char e2[512];
    if (dist_sum_f64(td->d, pre, 2, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s", e2);
        return -1;
    }
    if (pre[0] > 0) {
        if (!failed) set_err(err, errlen, "%.0f other rank(s) failed (their messages are above)", pre[0]);
        return -1;
    }
    *stop_all = pre[1] > 0;
    return 0;
}

int train_dist_step(train_dist_t *td, const nn_batch_t *full, int stop, nn_metrics_t *m, int *stop_all, char *err,
                    size_t errlen) {
    double s[S_NB] = {0};
    nn_metrics_t lm;
    memset(&lm, 0, sizeof lm);
    *stop_all = 0;
    int failed = !full;
    if (full && full->B != td->B) {
        set_err(err, errlen, "batch of %d rows, not the global batch %d", full->B, td->B);
        failed = 1;
    }
    /* Agreed first, so that a stop never leaves some ranks' running statistics a step ahead. */
    if (step_begin(td, failed, stop, stop_all, err, errlen) != 0 || *stop_all) return *stop_all ? 0 : -1;
    failed = grads_of_slices(td, full, s, err, errlen) != 0;
    s[S_FAILED] = failed;
    char e2[512];
    if (dist_sum_f64(td->d, s, S_NB, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s", e2);
        return -1;
    }
    if (s[S_FAILED] > 0) {
        if (!failed) set_err(err, errlen, "%.0f other rank(s) failed (their messages are above)", s[S_FAILED]);
        return -1;
    }
    nn_net_t *net = td->net;
    if (td->nccl) {
        if (dist_nccl_mean(td->nccl, nn_optim_grads(td->nt), td->n_params, err, errlen) != 0 ||
            dist_nccl_mean(td->nccl, nn_net_stats(net, NULL), td->n_stats, err, errlen) != 0)
            return -1;
    } else if (mean_over_ranks(td, nn_optim_grads(td->nt), td->grads, td->n_params, err, errlen) != 0 ||
               mean_over_ranks(td, nn_net_stats(net, NULL), td->stats, td->n_stats, err, errlen) != 0) {
        return -1;
    }
    nn_net_mark_dirty(net);
    int ok = nn_train_step_apply(td->nt, &lm, e2, sizeof e2) == 0, all = 0;
    if (!ok) set_err(err, errlen, "%s", e2);
    if (dist_agree(td->d, ok, &all, e2, sizeof e2) != 0) {
        set_err(err, errlen, "%s", e2);
        return -1;
    }
    if (!all) {
        if (ok) set_err(err, errlen, "another rank's SGD step failed (its message is above)");
        return -1;
    }
    global_metrics(td, s, &lm);
    if (m) *m = lm;
    return 0;
}

uint64_t train_dist_weights_hash(train_dist_t *td) {
    nn_backend_t *be = nn_net_backend(td->net);
    int64_t np = 0, ns = 0;
    float *p = nn_net_params(td->net, &np, NULL);
    float *st = nn_net_stats(td->net, &ns);
    /* The gradients' staging is free between steps. */
    be->download(be, td->grads, p, sizeof(float) * (size_t)np);
    be->download(be, td->stats, st, sizeof(float) * (size_t)ns);
    uint64_t h = XXH3_64bits(td->grads, sizeof(float) * (size_t)np);
    return XXH3_64bits_withSeed(td->stats, sizeof(float) * (size_t)ns, h);
}

int train_dist_check(train_dist_t *td, char *err, size_t errlen) {
    uint64_t h = train_dist_weights_hash(td);
    int same = 0;
    int32_t bad = -1;
    if (dist_same_u64(td->d, h, &same, &bad, err, errlen) != 0) return -1;
    if (!same) {
        set_err(err, errlen,
                "the weights differ across ranks at step %" PRId64 ": rank %d's are not rank 0's "
                "(this rank's XXH3 %016" PRIx64 "); the ranks no longer train one net",
                nn_optim_step_count(td->nt), bad, h);
        return -1;
    }
    return 0;
}
