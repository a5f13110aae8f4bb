/* net_int.h - what nn/net.c (the network, inference) and nn/net_train.c
 * (the trainer) share; internal to nn/, never included outside it.
 *
 * Owns: the net's struct and unit table, arena carving, the inference
 * buffers and forward, BN folding, recorded work and the error helpers.
 * Does not own: anything public (nn/net.h).
 */
#ifndef KOMA_NN_NET_INT_H
#define KOMA_NN_NET_INT_H

#include <stddef.h>
#include <stdint.h>

#include "compat/compat.h"
#include "nn/net.h"

/* A conv unit: conv (no bias) -> BN -> act, or conv + bias (head outputs). */
typedef struct {
    int32_t cin, cout, k;
    int32_t w, bias;                  /* tensor indices; bias -1 when BN follows */
    int32_t gamma, beta, rmean, rvar; /* BN tensors, -1 for head outputs */
    int64_t fw, fb;                   /* folded weight / bias offsets (BN units) */
} nn_unit_t;

/* Units: 0 stem; 1 + 2i, 2 + 2i block i; then the heads; then the optional
 * heads' units (nn_net.u_ml, u_opp; -1 when absent). */
#define U_STEM 0
#define U_PCONV(n) (1 + 2 * (n))
#define U_POUT(n) (2 + 2 * (n))
#define U_LCONV(n) (3 + 2 * (n))
#define U_LOUT(n) (4 + 2 * (n))
#define U_VCONV(n) (5 + 2 * (n))
#define U_COUNT(n) (6 + 2 * (n))

struct nn_net {
    nn_backend_t *be;
    nn_net_config_t cfg;
    int32_t n_tensors;
    nn_tensor_info_t *tensors;
    int32_t n_units;
    nn_unit_t *units;
    int32_t fc1_w, fc1_b, fc2_w, fc2_b;
    int32_t u_ml, u_opp;              /* the moves-left conv unit and the opponent policy's output unit, or -1 */
    int32_t ml_fc1_w, ml_fc1_b, ml_fc2_w, ml_fc2_b; /* the moves-left dense layers' tensors, or -1 */
    int32_t gp_w[NN_MAX_BLOCKS], gp_b[NN_MAX_BLOCKS]; /* block i's global-pooling dense (C, 2C) and bias
                                                         (C): tensor indices, -1 in a block without */
    int64_t n_params, n_decay, n_stats, n_folded;
    float *params; /* (n_params) all trained tensors, decayed first */
    float *stats;  /* (n_stats) BN running mean / var */
    float *folded; /* (n_folded) BN folded into conv weights + bias, for inference */
    int dirty;     /* folded is stale */
    /* The policy and legal heads' 3x3 convolutions run as ONE (cout 2C) when
     * both heads are wanted: the legal unit's tensors sit right after their
     * policy twins (params, stats, folded; no padding between), so the pair
     * is one (2C, C, 3, 3) weight with (2C) BN tensors, whatever changes the
     * weights. 0: two convolutions (the route before; tests compare). */
    int32_t merge_heads;
    compat_mutex_t mu;
};

static inline const float *P(const nn_net_t *net, int32_t t) { return net->params + net->tensors[t].offset; }
static inline float *S(nn_net_t *net, int32_t t) { return net->stats + net->tensors[t].offset; }

/* ---- arena carving --------------------------------------------------------- */
typedef struct {
    char *base; /* NULL on the sizing pass */
    size_t off;
} carve_t;

static inline void *nnet_take(carve_t *c, size_t bytes) {
    void *p = c->base ? c->base + c->off : NULL;
    c->off += (bytes + 63) & ~(size_t)63;
    return p;
}
#define TAKEF(c, n) ((float *)nnet_take((c), sizeof(float) * (size_t)(n)))

/* ---- inference --------------------------------------------------------------- */
typedef struct {
    float *x0;             /* (B, in_planes + in_hand, 9, 9) */
    float *h[3];           /* (B, C, 9, 9) ping-pong trunk buffers, carved one after the other: the two
                              that do not hold the trunk's output hold the merged head conv's (B, 2C, 9, 9) */
    float *v;              /* (B, 8, 9, 9) value conv output */
    float *fc1;            /* (B, 128) */
    float *policy, *legal; /* (B, 2187) logits */
    float *value;          /* (B, 3) logits */
    float *gp;             /* (B, 2C) a global-pooling block's pooled mean and max (NULL: no such block) */
    float *gb;             /* (B, C) its channel biases */
    float *mlv;            /* (B, 8, 9, 9) moves-left conv output (NULL: no such head) */
    float *mlfc1;          /* (B, 32) */
    float *ml;             /* (B) moves-left raw output */
    float *opp;            /* (B, 2187) opponent-reply logits (NNET_OUT_OPP; NULL outside nn_eval_batch) */
    void *ws;              /* conv workspace */
} infer_bufs_t;

/* Device work of the same shape (a forward: batch, heads, input buffers; a
 * training step: batch and settings) seen this many times is recorded once
 * (graph_begin/graph_end) and then replayed with graph_launch: one launch
 * instead of a hundred ops (a thousand for a step), on backends that record. */
#define NN_GRAPH_AFTER 3
#define NN_GRAPH_SEEN 16

typedef struct {
    struct {
        uint64_t key;
        int32_t n;
    } e[NN_GRAPH_SEEN]; /* keys seen, round robin */
    int32_t next;
} graph_seen_t;

/* 0, or -1 with err when be has failed (its sticky error names the cause). */
int nnet_be_check(nn_backend_t *be, const char *what, char *err, size_t errlen);
/* "out of host memory allocating N bytes (cpu backend)" and the like. */
void nnet_set_oom(char *err, size_t errlen, const char *what, const nn_backend_t *be, size_t bytes);
/* Refolds BN into the inference weights when params or stats changed. */
void nnet_fold(nn_net_t *net, nn_backend_t *be);
/* The largest convolution workspace of the net's units at batch B. */
size_t nnet_max_conv_ws(const nn_net_t *net, nn_backend_t *be, int32_t B);
/* Queues ops(arg) on be, recorded and replayed where the backend records. */
void nnet_run_recorded(nn_backend_t *be, graph_seen_t *seen, uint64_t key, void (*ops)(void *), void *arg);
/* A number never handed out twice. */
uint64_t nnet_next_uid(void);
/* Channel slice copies between (B, C, 9, 9) and channels [c0, c0 + C) of (B, C2, 9, 9). */
void nnet_channel_slice(nn_backend_t *be, float *slice, float *full, int32_t B, int32_t C, int32_t C2, int32_t c0,
                        int to_full);
/* A global-pooling block's bias on h1 (B, C, 9, 9, NCHW): the board's mean
 * and max per channel into gp (B, 2C), the dense layer of block i into gb
 * (B, C); out = h1 + gb on every square (out may equal h1). */
void nnet_gpool_fwd(nn_net_t *net, nn_backend_t *be, int32_t i, int32_t B, float *h1, float *gp, float *gb,
                    float *out);
/* The opponent-reply logits, for nn_eval_batch only (beside NN_OUT_*). */
#define NNET_OUT_OPP 16
/* The inference forward with folded BN (f->x0 holds the expanded input). */
void nnet_forward_infer(nn_net_t *net, nn_backend_t *be, int32_t B, infer_bufs_t *f, int32_t outputs);

#endif
