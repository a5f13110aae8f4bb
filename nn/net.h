/* net.h - the Koma network: definition, inference and training on any backend.
 *
 * Owns: the architecture, the parameter layout (one allocation, named tensors
 * carved into it), inference contexts (one arena per (net, max batch)), the
 * training step (forward, three losses and the optional heads' two, backward,
 * SGD) and its metrics.
 * Implemented in nn/net.c (definition, parameters, inference) and
 * nn/net_train.c (schedule, trainer, training step, metrics), sharing
 * nn/net_int.h.
 * Does not own: the ops (nn/backend.h), files (nn/weights.h), shogi: the
 * input is `in_planes` bit-packed 9x9 planes plus `in_hand` floats per
 * position, in the packed format documented in nn/backend.h.
 *
 * Architecture ("BxC": B residual blocks of C channels, e.g. "6x64";
 * "BxCgK": the same with global pooling in every K-th block, e.g. "6x64g2";
 * a suffix "m" adds the moves-left head, "o" the opponent-reply policy
 * head, in that order: "4x32m", "6x64g2mo"):
 *   input  (B, in_planes + in_hand, 9, 9)      expanded from packed bits + hand
 *   stem   conv3x3 -> BN -> act                 (B, C, 9, 9)
 *   blocks x N: h + [conv3x3 BN act conv3x3 BN] -> act
 *          a global-pooling block (KataGo's bias structure; block i when
 *          gpool > 0 and (i + 1) % gpool == 0) adds, between its two convs,
 *          a per-channel bias computed from the whole board:
 *          h1 = act(BN(conv1(h)))               (B, C, 9, 9)
 *          p  = [mean over 81 squares, max over 81 squares] of h1  (B, 2C)
 *          h1 = h1 + dense(p) broadcast over the squares  (dense 2C -> C + bias,
 *               tensors "blocks.i.gpool.weight" (C, 2C), "blocks.i.gpool.bias" (C))
 *          the block's output as above from conv2(h1)
 *   policy conv3x3 C->C BN act, conv1x1 C->27 + bias -> (B, 27, 9, 9) = 2187 logits,
 *          label = direction*81 + square (the channel is the direction)
 *   legal  same shape as policy, its own weights -> 2187 logits (BCE vs mask)
 *          (when both heads run, their two 3x3 convolutions run as one of
 *          2C output channels: nn_net_set_merge_heads)
 *   value  conv1x1 C->8 BN act, dense 648->128 + bias, act, dense 128->3 + bias
 *          -> W/D/L logits from the side to move
 *   moves_left (heads & NN_HEAD_MOVES_LEFT; lc0's MLH): conv1x1 C->8 BN act,
 *          dense 648->32 + bias, act, dense 32->1 + bias -> one raw value r
 *          in units of NN_ML_SCALE plies; the plies left until the game ends
 *          = NN_ML_SCALE * max(r, 0) (nn_moves_left_plies; nn_forward_out
 *          returns plies >= 0). Trained with lc0's loss: a Huber loss of
 *          delta NN_ML_HUBER on r - target / NN_ML_SCALE (delta 0.5 = 10
 *          plies: squared error within 10 plies, absolute beyond, so the
 *          long tail of game lengths cannot dominate the trunk's gradient).
 *          The output is left linear while training (no ReLU: a ReLU output
 *          that goes negative stops learning); the clamp is inference's.
 *          Tensors "moves_left.conv.weight", "moves_left.bn.*",
 *          "moves_left.fc1.{weight,bias}" (32, 648), "moves_left.fc2.*" (1, 32).
 *   opp_policy (heads & NN_HEAD_OPP_POLICY; KataGo's opponent-reply policy,
 *          training only): conv1x1 C->27 + bias on the policy head's hidden
 *          activation (after its conv3x3 BN act) -> 2187 logits of the move
 *          the opponent plays next (in the next position's side-to-move
 *          frame), cross-entropy as the policy's. Tensors
 *          "opp_policy.out.{weight,bias}". No inference output.
 *
 * Normalisation: batch norm. Training uses batch statistics and updates
 * running statistics (PyTorch convention, momentum cfg.bn_momentum); inference
 * folds the running statistics into the conv weights and a bias
 * (w' = w*gamma/sqrt(var+eps), b' = beta - mean*gamma/sqrt(var+eps)), so an
 * inference conv costs exactly one conv + bias. Chosen because it is the
 * standard for AlphaZero-style nets, costs nothing at inference, and has a
 * first-class cuDNN implementation for training.
 *
 * Threads: a net's weights are read-only during nn_forward; any number of
 * contexts may run concurrently on one net. Training changes the weights of
 * the net it was created on: train a separate net and publish with
 * nn_net_copy_weights into the inference net while no forward runs on it.
 */
#ifndef KOMA_NN_NET_H
#define KOMA_NN_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

#define NN_POLICY_CH 27
#define NN_POLICY_NB (NN_POLICY_CH * NN_HW) /* 2187 */
#define NN_LEGAL_NB NN_POLICY_NB
#define NN_VALUE_NB 3 /* W, D, L */
#define NN_VALUE_CH 8
#define NN_VALUE_HIDDEN 128
#define NN_BN_EPS 1e-5f
#define NN_MAX_BLOCKS 64
#define NN_MAX_CHANNELS 1024
#define NN_ML_CH 8       /* moves-left head: conv1x1 output channels */
#define NN_ML_HIDDEN 32  /* its dense layer */
#define NN_ML_SCALE 20.0f /* plies per unit of its raw output (lc0) */
#define NN_ML_HUBER 0.5f  /* Huber delta on the raw output (10 plies) */

/* Optional heads (nn_net_config_t.heads, a bitmask). */
enum { NN_HEAD_MOVES_LEFT = 1, NN_HEAD_OPP_POLICY = 2, NN_HEAD_ALL = 3 };

typedef struct {
    int32_t blocks;           /* residual blocks, 1..NN_MAX_BLOCKS */
    int32_t channels;         /* trunk channels, 1..NN_MAX_CHANNELS */
    nn_act_t act;             /* activation everywhere */
    int32_t in_planes;        /* binary input planes (> 0) */
    int32_t in_hand;          /* hand floats per position (>= 0) */
    int32_t features_version; /* caller's encoding version, stored in files */
    int32_t gpool;            /* 0: no global pooling; K in 1..blocks: blocks K-1, 2K-1, ... pool */
    int32_t heads;            /* NN_HEAD_* bits: optional heads (0: none, the nets before them) */
} nn_net_config_t;

/* "6x64" -> blocks 6, channels 64; "6x64g2" (global pooling every 2nd block)
 * and the head suffixes ("6x64m", "6x64g2mo") too. Returns 0, or -1 for
 * anything else (missing 'x', non-digits, out of range, K not in 1..blocks,
 * an unknown or repeated suffix, "o" before "m"). */
int nn_net_size_parse(const char *s, int32_t *blocks, int32_t *channels);
/* blocks x channels as "6x64" into buf; returns buf. */
char *nn_net_size_format(int32_t blocks, int32_t channels, char *buf, size_t len);
/* The whole architecture string: "6x64" -> blocks 6, channels 64, gpool 0,
 * heads 0; "6x64g2" -> gpool 2; "6x64mo" -> heads NN_HEAD_MOVES_LEFT |
 * NN_HEAD_OPP_POLICY. Sets only those four fields of cfg; 0 or -1 as
 * nn_net_size_parse (cfg unchanged). */
int nn_net_arch_parse(const char *s, nn_net_config_t *cfg);
/* cfg's architecture string ("6x64", "6x64g2", "6x64g2mo") into buf; returns buf. */
char *nn_net_arch_format(const nn_net_config_t *cfg, char *buf, size_t len);
/* 1 when s names cfg's architecture (blocks, channels, gpool and heads), else 0. */
int nn_net_arch_is(const char *s, const nn_net_config_t *cfg);
/* 1 when block i (0-based) of cfg has global pooling. */
int nn_net_gpool_block(const nn_net_config_t *cfg, int32_t i);

/* ---- parameters --------------------------------------------------------- */
typedef enum {
    NN_TENSOR_PARAM, /* trained; has a gradient and a momentum buffer */
    NN_TENSOR_STAT,  /* BN running statistics; saved, not trained */
} nn_tensor_kind_t;

typedef struct {
    char name[64];  /* PyTorch-style: "blocks.3.conv1.weight", "stem.bn.running_var" */
    nn_tensor_kind_t kind;
    int32_t decay;  /* 1: weight decay applies (conv/dense weights); 0: BN, biases */
    int32_t ndim;
    int64_t shape[4];
    int64_t numel;
    int64_t offset; /* floats into the params (PARAM) or stats (STAT) allocation */
} nn_tensor_info_t;

typedef struct nn_net nn_net_t;

/* New net with random initialisation (He-normal weights, gamma 1, beta 0,
 * zero biases, running mean 0 / var 1) from seed. NULL with err on bad config
 * or out of memory. */
nn_net_t *nn_net_new(nn_backend_t *be, const nn_net_config_t *cfg, uint64_t seed, char *err,
                     size_t errlen);
void nn_net_free(nn_net_t *net); /* NULL ok */

const nn_net_config_t *nn_net_config(const nn_net_t *net);
nn_backend_t *nn_net_backend(const nn_net_t *net);
int32_t nn_net_tensor_count(const nn_net_t *net);
const nn_tensor_info_t *nn_net_tensor(const nn_net_t *net, int32_t i);
int32_t nn_net_tensor_find(const nn_net_t *net, const char *name); /* index or -1 */
/* Device pointer to tensor i's data. */
float *nn_net_tensor_data(nn_net_t *net, int32_t i);
/* Whole allocations (device). Trained params: decayed tensors first, then the
 * others, contiguously: [0, n_decay) and [n_decay, n_params). */
float *nn_net_params(nn_net_t *net, int64_t *n_params, int64_t *n_decay);
float *nn_net_stats(nn_net_t *net, int64_t *n_stats);
/* Call after writing params or stats directly (refolds BN before the next forward). */
void nn_net_mark_dirty(nn_net_t *net);
/* The policy and legal heads each start with a 3x3 convolution (+ BN, act)
 * of the trunk's output. When both heads are computed (training, and
 * nn_forward / nn_forward_dev with the legal head) they run as ONE
 * convolution of 2C output channels, one BN over 2C channels and one
 * backward pass, and the output is split for the two 1x1 output
 * convolutions. The two units' tensors sit next to each other in the
 * parameter, statistics and folded allocations (the legal one right after
 * its policy twin), so the pair IS the merged weight: loading, SGD, copies
 * and publishing keep it as they keep every tensor; files still hold
 * "policy.conv.weight" and "legal.conv.weight" apart. The policy head alone
 * (self-play) runs its half only. on = 0 runs the two convolutions apart,
 * the route before the merge (tests compare the two; within float
 * tolerance, not bit for bit: the products are summed in another order).
 * Default on; KOMA_MERGE_HEADS=0 in the environment makes new nets default
 * off (timing comparisons). Not while the net is in use. */
void nn_net_set_merge_heads(nn_net_t *net, int32_t on);
int32_t nn_net_merge_heads(const nn_net_t *net);
/* Copies params and stats from src (same config, any backend of the same
 * kind). Waits for src's queued work first (src's backend sync), then for the
 * copy. The caller must own both backends (nn/backend.h: one thread at a
 * time). -1 with err when either backend has failed. */
int nn_net_copy_weights(nn_net_t *dst, nn_net_t *src, char *err, size_t errlen);
/* Index of the first tensor with a NaN or infinite value in host copies of
 * the params and stats allocations (*elem = its element), or -1. */
int32_t nn_net_nonfinite_tensor(const nn_net_t *net, const float *params, const float *stats, int64_t *elem);
/* Downloads the weights and checks them: 0, or -1 with err naming the first
 * non-finite tensor ("tensor 'stem.conv.weight' has a non-finite value ...")
 * or the backend's failure. */
int nn_net_check_finite(nn_net_t *net, char *err, size_t errlen);

/* ---- inference ---------------------------------------------------------- */
typedef struct nn_ctx nn_ctx_t;

/* An arena for batches up to max_batch on backend be (NULL: the net's). */
nn_ctx_t *nn_ctx_new(nn_net_t *net, nn_backend_t *be, int32_t max_batch, char *err, size_t errlen);
void nn_ctx_free(nn_ctx_t *ctx); /* NULL ok */

/* Host in, host out. packed (B, nn_packed_bytes(in_planes)), hand (B, in_hand)
 * (NULL ok when in_hand == 0). Outputs are raw logits; each may be NULL, and
 * a head whose output is NULL is not computed (self-play asks for policy and
 * value only: the legal-move head is a training target):
 * policy (B, 2187), value (B, 3) W/D/L, legal (B, 2187). 1 <= B <= max_batch.
 * Returns 0, or -1 when the context's backend has failed (now or before;
 * nn_backend_error says why): the outputs are then not results. */
int nn_forward(nn_ctx_t *ctx, int32_t B, const uint8_t *packed, const float *hand, float *policy,
               float *value, float *legal);
/* The heads a device forward computes (nn_forward_dev's outputs).
 * NN_OUT_MOVES_LEFT only on a net with NN_HEAD_MOVES_LEFT (NN_OUT_ALL does
 * not include it). */
enum { NN_OUT_POLICY = 1, NN_OUT_VALUE = 2, NN_OUT_LEGAL = 4, NN_OUT_ALL = 7, NN_OUT_MOVES_LEFT = 8 };
/* Where nn_forward_out writes each head (host memory); a NULL member: that
 * head is not computed. policy (B, 2187) and legal (B, 2187) logits, value
 * (B, 3) W/D/L logits, moves_left (B) plies from the position until the game
 * ends (>= 0; only on a net with NN_HEAD_MOVES_LEFT). */
typedef struct {
    float *policy;
    float *value;
    float *legal;
    float *moves_left;
} nn_outputs_t;
/* nn_forward with every head in out. Returns 0, -1 when the backend has
 * failed (as nn_forward), or -1 (nothing computed) when out asks for
 * moves_left on a net without the head: the caller checks
 * nn_net_config(net)->heads first. */
int nn_forward_out(nn_ctx_t *ctx, int32_t B, const uint8_t *packed, const float *hand, const nn_outputs_t *out);
/* The moves-left head's raw output (nn_ctx_moves_left, on the device) as
 * plies >= 0: NN_ML_SCALE * max(raw, 0). */
static inline float nn_moves_left_plies(float raw) { return raw > 0.0f ? NN_ML_SCALE * raw : 0.0f; }
/* Same with device inputs; the heads in outputs (NN_OUT_*) are computed into
 * the context's buffers on the device (nn_ctx_buffers); the others' buffers
 * keep what they held. Returns -1 for a failure seen so far; the work only
 * being queued (CUDA), a fault inside it shows in the download or sync that
 * follows: check nn_backend_error after that. */
int nn_forward_dev(nn_ctx_t *ctx, int32_t B, const uint8_t *packed_dev, const float *hand_dev, int32_t outputs);
/* Device pointers of the context's input staging and output buffers (max_batch rows). */
void nn_ctx_buffers(nn_ctx_t *ctx, uint8_t **packed, float **hand, float **policy, float **value,
                    float **legal);
/* Device pointer of the moves-left head's RAW outputs (max_batch floats;
 * nn_moves_left_plies turns one into plies), or NULL on a net without it. */
float *nn_ctx_moves_left(nn_ctx_t *ctx);

/* ---- training ----------------------------------------------------------- */
typedef enum {
    NN_SCHED_CONSTANT, /* lr */
    NN_SCHED_COSINE,   /* lr * (min_frac + (1-min_frac) * (1 + cos(pi * t)) / 2), t = progress
                          after warmup in [0, 1], then lr * min_frac */
    NN_SCHED_STEP,     /* lr * step_gamma ^ floor((step - warmup) / step_size) */
} nn_sched_t;

typedef struct {
    float lr;            /* peak learning rate (default 0.02) */
    float momentum;      /* Nesterov momentum (0.9) */
    int32_t nesterov;    /* 1 */
    float weight_decay;  /* decoupled, conv/dense weights only (1e-4) */
    float clip_norm;     /* global gradient-norm clip, <= 0 off (10) */
    int64_t warmup_steps;/* linear warmup from lr/warmup to lr (100) */
    nn_sched_t schedule; /* NN_SCHED_COSINE */
    int64_t total_steps; /* cosine: steps until lr*min_frac (100000) */
    float lr_min_frac;   /* 0.01 */
    int64_t step_size;   /* step schedule (20000) */
    float step_gamma;    /* 0.1 */
    float w_policy, w_value, w_legal; /* loss weights (1, 1, 1) */
    float w_moves_left;  /* moves-left head's Huber loss (1, lc0's); nets without the head ignore it */
    float w_opp_policy;  /* opponent-reply policy cross-entropy (0.15, KataGo's); idem */
    float q_mix;         /* value target: share of the search value q (0.75) */
    float q_draw;        /* draw share at q = 0 in the q -> W/D/L conversion (0) */
    float bn_momentum;   /* running statistics (0.01) */
} nn_train_config_t;

nn_train_config_t nn_train_config_default(void);
/* Learning rate of step `step` (0-based, the step about to be taken). */
float nn_lr_at(const nn_train_config_t *cfg, int64_t step);

/* A training batch in host memory (nn_train_step uploads it), or, with
 * staged = 1, already in the trainer's device staging (nn_optim_staging,
 * filled on the device by gather_rows): then only B and the HOST copy of
 * policy_offsets are read (the offsets are checked and counted for the
 * metrics; the staging must hold the same ones), the other pointers not. */
typedef struct {
    int32_t B;
    int32_t staged;
    const uint8_t *planes;          /* (B, nn_packed_bytes(in_planes)) */
    const float *hand;              /* (B, in_hand), NULL ok when in_hand == 0 */
    const uint8_t *legal;           /* (B, nn_packed_bytes(27)) legal-move mask bits */
    const uint32_t *policy_offsets; /* (B+1), [0] = 0: position b's targets are [off[b], off[b+1]) */
    const uint16_t *policy_label;   /* (nnz) labels < 2187 */
    const float *policy_prob;       /* (nnz) target probabilities (visit shares) */
    const int8_t *result;           /* (B) +1 side to move won, 0 draw, -1 lost */
    const float *root_q;            /* (B) search value in [-1, 1], side to move */
    /* Targets of the optional heads (read only when the net has the head):
     * NULL = no target for any row. */
    const float *moves_left;        /* (B) target plies left, < 0 = no target for this row; staged: any
                                       non-NULL pointer (not read) = the staging holds them */
    const uint32_t *opp_offsets;    /* (B+1) like policy_offsets: the opponent's reply (row b: none when
                                       empty); staged: the HOST copy (checked, counted; the staging holds
                                       the same ones), NULL = none (the staged ones are then ignored) */
    const uint16_t *opp_label;      /* (nnz) labels < 2187, in the NEXT position's side-to-move frame */
    const float *opp_prob;          /* (nnz) */
} nn_batch_t;

typedef struct {
    int64_t step;        /* steps taken, after this one */
    float lr;            /* lr used */
    /* The objective minimised: w_p * (policy cross-entropy summed over the
     * positions with a target / all B positions) + w_v * value + w_l * legal.
     * Positions without a policy target (fast searches under playout-cap
     * randomization) add nothing to the policy term or its gradient, so each
     * target position's policy gradient has weight w_p / B. */
    double loss;
    double policy_loss;  /* mean cross-entropy over the positions with a policy target (NAN: none) */
    double value_loss;   /* mean W/D/L cross-entropy per position */
    double legal_loss;   /* mean BCE per (position, label) */
    double policy_acc;   /* top-1 (logit argmax == target argmax) over the positions with a target (NAN: none) */
    int32_t policy_positions; /* positions of the batch with a policy target */
    double legal_f1;     /* F1 of (logit >= 0) vs mask; 1 when no positives at all */
    double grad_norm;    /* before clipping (0 for nn_eval_batch) */
    double legal_tp, legal_fp, legal_fn; /* the counts behind legal_f1 (sums over ranks give the F1 of a
                                            data-parallel step) */
    /* Optional heads (NAN on a net without the head, or without targets in the batch). The objective
     * adds w_moves_left * (Huber sum over rows with a target / B) and w_opp_policy * (opponent
     * cross-entropy sum / B). */
    double moves_left_loss;  /* mean Huber loss over the rows with a target (raw units, NN_ML_SCALE plies) */
    double moves_left_mae;   /* mean |plies predicted (clamped at 0) - target| over those rows */
    double opp_policy_loss;  /* mean cross-entropy over the rows with an opponent target */
    int32_t moves_left_positions, opp_positions; /* rows with a target */
} nn_metrics_t;

/* The optimizer state of one net being trained (nn_optim_new): not the trainer
 * thread, which is train/trainer.h's train_trainer_t. */
typedef struct nn_optim nn_optim_t;

/* The trainer's device buffers that a batch is uploaded into (device pointers
 * of the net's backend), for a caller that assembles batches on the device:
 * room for max_batch rows and max_batch * 2187 policy entries. */
typedef struct {
    uint8_t *planes;
    float *hand;
    uint8_t *legal;
    uint32_t *offsets;
    uint16_t *labels;
    float *probs;
    int8_t *result;
    float *q;
    float *moves_left;     /* (max_batch); NULL on a net without the head */
    uint32_t *opp_offsets; /* (max_batch + 1); the three NULL on a net without the opponent head */
    uint16_t *opp_labels;  /* (max_batch * 2187) */
    float *opp_probs;      /* (max_batch * 2187) */
} nn_train_staging_t;

/* Owns gradients, momentum, a training arena for max_batch and the step count
 * for `net` (whose weights it updates). */
nn_optim_t *nn_optim_new(nn_net_t *net, const nn_train_config_t *cfg, int32_t max_batch,
                             char *err, size_t errlen);
void nn_optim_free(nn_optim_t *tr); /* NULL ok */
nn_net_t *nn_optim_net(const nn_optim_t *tr);
void nn_optim_set_config(nn_optim_t *tr, const nn_train_config_t *cfg);

/* One SGD step on the batch. Returns 0, or -1 with err for an invalid batch
 * (B out of range, offsets not increasing, label >= 2187) or a failed
 * backend (the step count is then unchanged and the weights are undefined:
 * reload them). Non-finite losses are not an error here: the caller looks at
 * the metrics (train/trainer.c does). nn_train_grad and nn_eval_batch fail
 * the same way. */
int nn_train_step(nn_optim_t *tr, const nn_batch_t *batch, nn_metrics_t *m, char *err,
                  size_t errlen);
/* nn_train_step one step late, for a loop that must not wait for the device
 * every step: nn_train_step_launch queues the step (the same ops as
 * nn_train_step, so the same weights and metrics bit for bit) and the copy of
 * its metrics into one of two metric records (page-locked host memory where
 * the backend has host_alloc; the copy behind a fence, nn/backend.h), counts
 * the step and returns without waiting: *step (NULL ok) = the step count
 * after it, the record's name. nn_train_step_metrics(tr, step, m) then waits
 * for that step only (not for a step queued after it) and fills m as
 * nn_train_step would have (m NULL: the record is dropped). A loop launches
 * step s + 1, then reads step s: at most two records are unread; a third
 * launch is refused. On a backend without fences (the CPU) the record is
 * downloaded at launch, the bookkeeping is the same.
 * Failures: the launch fails as nn_train_step does for what is seen while
 * queueing (bad batch, a failed backend; the step is then not counted); a
 * failure inside the queued work shows at the read (-1 with err): the
 * weights are then undefined, reload them. A step's non-finite loss is only
 * known at its read, after the next step was queued: whoever saves or
 * publishes the weights reads every record first (train/loop.c does). */
int nn_train_step_launch(nn_optim_t *tr, const nn_batch_t *batch, int64_t *step, char *err, size_t errlen);
int nn_train_step_metrics(nn_optim_t *tr, int64_t step, nn_metrics_t *m, char *err, size_t errlen);
/* Launched steps whose metrics are not read yet (0..2). */
int32_t nn_train_steps_pending(const nn_optim_t *tr);
/* Forward (training-mode BN) + losses + backward into the gradients, no
 * update (running stats are not changed). For gradient checks. */
int nn_train_grad(nn_optim_t *tr, const nn_batch_t *batch, nn_metrics_t *m, char *err,
                  size_t errlen);
/* nn_train_step in two halves, for data-parallel training (train/dist_train.c):
 * nn_train_step_grads runs forward, losses and backward into
 * nn_optim_grads and updates the BN running statistics, without changing
 * the weights or the step count; the caller may then change the gradients
 * and the running statistics (average them over processes), and
 * nn_train_step_apply takes the SGD step with the gradients as they are then
 * (their norm is recomputed for clipping and m->grad_norm; it also sets
 * m->lr and m->step, the other fields stay as nn_train_step_grads left
 * them). Called back to back they give the same weights, bit for bit, as
 * nn_train_step. Failures as nn_train_step. */
int nn_train_step_grads(nn_optim_t *tr, const nn_batch_t *batch, nn_metrics_t *m, char *err,
                        size_t errlen);
int nn_train_step_apply(nn_optim_t *tr, nn_metrics_t *m, char *err, size_t errlen);
/* Losses and metrics in inference mode (folded BN), no gradients. */
int nn_eval_batch(nn_optim_t *tr, const nn_batch_t *batch, nn_metrics_t *m, char *err,
                  size_t errlen);

/* Optimizer state: gradients and momentum share the params layout (device). */
float *nn_optim_grads(nn_optim_t *tr);
float *nn_optim_momentum(nn_optim_t *tr);
int64_t nn_optim_step_count(const nn_optim_t *tr);
void nn_optim_set_step_count(nn_optim_t *tr, int64_t step);
/* The staging buffers of a batch (see nn_train_staging_t); *max_batch (NULL
 * ok) = the rows they hold. */
void nn_optim_staging(nn_optim_t *tr, nn_train_staging_t *st, int32_t *max_batch);

#endif
