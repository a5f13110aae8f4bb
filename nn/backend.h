/* backend.h - the one interface every compute backend implements (ggml-style).
 *
 * Owns: the list of device operations the network is built from, their exact
 * semantics (shapes, layouts, in-place rules, accumulate-or-overwrite), and the
 * constructor of the CPU backend, which is the reference for all others.
 * Does not own: the network (nn/net.c composes these ops into forward, backward
 * and optimizer steps), weights files (nn/weights.c), shogi (nothing here
 * knows what a plane means).
 *
 * Conventions (every op):
 *  - Pointers are DEVICE pointers obtained from buf_alloc of a backend of the
 *    same kind (host pointers for the CPU backend). Scalars are host values.
 *  - Activations are NCHW floats on the 9x9 board: (B, C, 9, 9), i.e.
 *    x[(b*C + c)*81 + sq], sq = rank*9 + file (the caller's square order).
 *  - Conv weights are OIHW: (Cout, Cin, k, k), k = 1 or 3, stride 1, zero
 *    "same" padding. Dense weights are (out, in), y = x W^T + b.
 *  - A NULL optional input (bias, residual) means "absent"; a NULL optional
 *    output (dx, dbias) means "not wanted".
 *  - Backward ops OVERWRITE their outputs unless an `accumulate` argument says
 *    otherwise; loss ops ADD their sums into `stats`.
 *  - Ops run in order on the backend's queue (a CUDA stream); download and
 *    sync wait for everything queued before them.
 *  - A backend instance is used by one thread at a time. Create one instance
 *    per thread / stream; buffers allocated by one instance may be used by any
 *    other instance of the same kind (same device).
 *  - Errors: ops return nothing. A failure inside an op (out of memory
 *    growing a workspace, no algorithm for a shape, a launch error, a fault
 *    injected with KOMA_FAULT, nn/fault.h) becomes the instance's STICKY
 *    error: every later op of the instance is a no-op and `error` returns the
 *    message. Callers check nn_backend_error after a sequence of ops and fail
 *    the call that used the instance (nn/net.c does, in every public call);
 *    outputs written after a failure are undefined, never results.
 *
 * Packed planes (fixed format, shared with engine/ and data/): per position,
 * bit i = plane*81 + square is stored in byte i>>3 at bit (i & 7) (LSB first);
 * a position takes nn_packed_bytes(planes) = ceil(planes*81/8) bytes and the
 * positions of a batch are contiguous. The legal-move mask uses the same
 * format with 27 planes (2187 bits = label = direction*81 + square).
 * Hand values (in_hand floats per position) are broadcast to in_hand constant
 * 9x9 channels placed after the plane channels.
 */
#ifndef KOMA_NN_BACKEND_H
#define KOMA_NN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#define NN_SIDE 9
#define NN_HW 81 /* squares per plane */

static inline int64_t nn_packed_bytes(int32_t planes) { return ((int64_t)planes * NN_HW + 7) / 8; }

typedef enum {
    NN_ACT_RELU, /* max(z, 0) */
    NN_ACT_SILU, /* z * sigmoid(z) (a.k.a. swish) */
    NN_ACT_NB
} nn_act_t;

const char *nn_act_name(nn_act_t act); /* "relu", "silu" */
int nn_act_parse(const char *name);   /* nn_act_t, or -1 */

/* Per-step sums written by the loss ops and read back by the trainer. */
typedef enum {
    NN_STAT_POLICY_LOSS,    /* sum over positions of -sum_i t_i log softmax_i */
    NN_STAT_POLICY_CORRECT, /* positions whose logit argmax == target argmax */
    NN_STAT_VALUE_LOSS,     /* sum over positions of W/D/L cross-entropy */
    NN_STAT_LEGAL_LOSS,     /* sum over positions x labels of BCE-with-logits */
    NN_STAT_LEGAL_TP,       /* sigmoid(logit) >= 0.5 (logit >= 0) and legal */
    NN_STAT_LEGAL_FP,       /* predicted legal, not legal */
    NN_STAT_LEGAL_FN,       /* predicted illegal, legal */
    NN_STAT_GNORM2,         /* squared L2 norm of all gradients (before clipping) */
    NN_STAT_ML_LOSS,        /* moves_left_loss: sum over rows with a target of the Huber loss */
    NN_STAT_ML_ABS,         /* its sum of |scale * max(pred, 0) - target| (plies) */
    NN_STAT_ML_COUNT,       /* its rows with a target */
    NN_STAT_OPP_LOSS,       /* the opponent-reply policy's policy_loss (its stats pointer at OPP_LOSS: */
    NN_STAT_OPP_CORRECT,    /*   the op's POLICY_LOSS and POLICY_CORRECT land here) */
    NN_STAT_NB
} nn_stat_t;

/* Arguments of one SGD step (host values). */
typedef struct {
    float lr;           /* learning rate of this step (schedule applied by caller) */
    float momentum;     /* mu */
    float weight_decay; /* decoupled: p *= 1 - lr*weight_decay, before the update */
    float clip_norm;    /* > 0: scale grads by min(1, clip/(sqrt(gnorm2)+1e-6)); <= 0: off */
    int32_t nesterov;   /* 1: d = g + mu*v (after v = mu*v + g); 0: d = v */
    /* NULL: lr and weight_decay above. Else two floats in the backend's
     * memory, read when the op runs: hyper[0] = lr, hyper[1] = weight_decay
     * (a recorded step then replays with the values of its launch). */
    const float *hyper;
} nn_sgd_args_t;

/* One training shard's columns resident in a backend's memory (gather_rows):
 * device pointers, laid out as the shard's own columns (data/shard.h). */
typedef struct {
    const uint8_t *planes;  /* (rows, planes_bytes) */
    const float *hand;      /* (rows, hand_n); NULL ok when hand_n == 0 */
    const uint8_t *legal;   /* (rows, legal_bytes) */
    const uint16_t *labels; /* (nnz) policy labels */
    const float *probs;     /* (nnz) policy probabilities */
    const int8_t *result;   /* (rows) */
    const float *q;         /* (rows) */
    const int16_t *moves_left; /* (rows) plies left (-1 unknown), or NULL: the shard has no such column */
    const uint16_t *move_label; /* (rows) the played move's label (train/window.c derives it from the
                                   shard's move and position columns), or NULL: none known */
} nn_rows_src_t;

/* Row b of a batch that gather_rows assembles: row `row` of table entry
 * `src`, whose policy entries start at `policy_begin` of that shard. */
typedef struct {
    int32_t src;
    uint32_t row;
    uint32_t policy_begin;
    uint32_t onehot; /* gather_heads's opp_refs only: 1 = the target is a one-hot on the row's move_label */
} nn_row_ref_t;

typedef struct nn_backend nn_backend_t;

#define NN_FENCE_NB 4 /* fences per backend instance (fence_record) */

struct nn_backend {
    const char *name;   /* "cpu", "cuda" */
    const char *memory; /* where buf_alloc's memory lives, for messages: "host", "device" */
    void *ctx;          /* backend private */

    /* ---- lifetime and memory -------------------------------------------- */
    void (*free)(nn_backend_t *be); /* frees be itself */
    /* Device buffer, at least 64-byte aligned, contents undefined. NULL when out of memory. */
    void *(*buf_alloc)(nn_backend_t *be, size_t bytes);
    void (*buf_free)(nn_backend_t *be, void *p); /* NULL ok */
    void (*upload)(nn_backend_t *be, void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(nn_backend_t *be, void *dst_host, const void *src_dev, size_t bytes);
    void (*memset_zero)(nn_backend_t *be, void *dst_dev, size_t bytes);
    void (*copy)(nn_backend_t *be, void *dst_dev, const void *src_dev, size_t bytes);
    /* OPTIONAL (NULL: one copy per row). Row r < rows of `width` bytes from
     * src + r*spitch to dst + r*dpitch (device to device; width <= both
     * pitches; source and destination rows must not overlap). A channel slice
     * of an NCHW tensor and back: (B, C, 81) <-> channels [c0, c0 + C) of
     * (B, C2, 81) is rows = B, width = C*81 floats, pitches C*81 and C2*81. */
    void (*copy_2d)(nn_backend_t *be, void *dst_dev, size_t dpitch, const void *src_dev, size_t spitch,
                    size_t width, size_t rows);
    void (*sync)(nn_backend_t *be); /* OPTIONAL (NULL: ops are synchronous) */
    /* OPTIONAL page-locked host memory (NULL: none, use malloc) for staging
     * that the device reads and writes directly; free with host_free. */
    void *(*host_alloc)(nn_backend_t *be, size_t bytes);
    void (*host_free)(nn_backend_t *be, void *p); /* NULL ok */
    /* OPTIONAL (NULL: use download). Enqueues a copy into dst, memory from
     * host_alloc, and returns at once: dst holds the bytes after the next
     * sync (one wait for several downloads). */
    void (*download_async)(nn_backend_t *be, void *dst_host, const void *src_dev, size_t bytes);
    /* OPTIONAL (NULL: every op is done when it returns; nothing to wait for).
     * Fences: fence_record(be, i), 0 <= i < NN_FENCE_NB, marks the work
     * queued so far (a later record of i moves the mark); fence_wait(be, i)
     * returns once that work is done, WITHOUT waiting for the work queued
     * after the mark (sync waits for all of it): a download_async queued
     * before the mark has then arrived. Both are no-ops on a failed instance
     * (check error after fence_wait). */
    void (*fence_record)(nn_backend_t *be, int32_t i);
    void (*fence_wait)(nn_backend_t *be, int32_t i);
    /* The sticky error (see Errors above): NULL while every op succeeded. */
    const char *(*error)(nn_backend_t *be);
    /* The stopwatch of device time, OPTIONAL (NULL: time the wall clock):
     * timer_mark(be, 0) and timer_mark(be, 1) queue the start and the end of
     * an interval behind the instance's work so far; after a sync, timer_ms
     * gives the device time between them in ms, or -1 when it cannot (no
     * interval marked, a failed instance). The CPU's ops are synchronous, so
     * its stopwatch is the wall clock between the marks; CUDA's uses events. */
    void (*timer_mark)(nn_backend_t *be, int end);
    double (*timer_ms)(nn_backend_t *be);

    /* ---- input ------------------------------------------------------------ */
    /* packed (B, nn_packed_bytes(planes)) bits, hand (B, in_hand) or NULL when
     * in_hand == 0 -> out (B, planes + in_hand, 9, 9): 0/1 for the planes, then
     * hand[b*in_hand + j] in every square of channel planes + j. */
    void (*expand_planes)(nn_backend_t *be, const uint8_t *packed, const float *hand, int32_t B,
                          int32_t planes, int32_t in_hand, float *out);

    /* ---- convolution (k = 1 or 3) ---------------------------------------- */
    /* Scratch bytes the three conv ops need for these sizes (same for each). */
    size_t (*conv_ws_bytes)(nn_backend_t *be, int32_t B, int32_t cin, int32_t cout, int32_t k);
    /* x (B, cin, 9, 9), w (cout, cin, k, k), bias (cout) or NULL -> y (B, cout, 9, 9) */
    void (*conv_fwd)(nn_backend_t *be, const float *x, const float *w, const float *bias, int32_t B,
                     int32_t cin, int32_t cout, int32_t k, float *y, void *ws);
    /* dy (B, cout, 9, 9), w -> dx (B, cin, 9, 9); accumulate: 0 dx = .., 1 dx += .. */
    void (*conv_bwd_data)(nn_backend_t *be, const float *dy, const float *w, int32_t B, int32_t cin,
                          int32_t cout, int32_t k, float *dx, int32_t accumulate, void *ws);
    /* x (B, cin, 9, 9), dy (B, cout, 9, 9) -> dw (cout, cin, k, k), dbias (cout) or NULL */
    void (*conv_bwd_filter)(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t cin,
                            int32_t cout, int32_t k, float *dw, float *dbias, void *ws);

    /* ---- batch norm (per channel over B x HW) ---------------------------- */
    /* Training mode: y = gamma * (x - mean) * invstd + beta with the batch's
     * mean and biased variance, invstd = 1/sqrt(var + eps). Saves mean and
     * invstd (C) for bn_bwd, and updates the running statistics:
     * run = (1 - momentum) * run + momentum * batch, with the UNBIASED batch
     * variance for running_var (PyTorch's convention). y may equal x. */
    void (*bn_fwd_train)(nn_backend_t *be, const float *x, const float *gamma, const float *beta,
                         int32_t B, int32_t C, int32_t HW, float eps, float momentum,
                         float *running_mean, float *running_var, float *y, float *save_mean,
                         float *save_invstd);
    /* x (the forward input), dy -> dx, dgamma (C), dbeta (C). dx may equal dy. */
    void (*bn_bwd)(nn_backend_t *be, const float *x, const float *dy, const float *gamma,
                   const float *save_mean, const float *save_invstd, int32_t B, int32_t C,
                   int32_t HW, float *dx, float *dgamma, float *dbeta);
    /* Folds inference BN into the preceding bias-free conv/dense layer:
     * s = gamma / sqrt(var + eps); w_out[o, :] = w[o, :] * s[o] (w is (cout, kdim));
     * b_out[o] = beta[o] - mean[o] * s[o]. */
    void (*bn_fold)(nn_backend_t *be, const float *w, const float *gamma, const float *beta,
                    const float *mean, const float *var, int32_t cout, int32_t kdim, float eps,
                    float *w_out, float *b_out);

    /* ---- elementwise ------------------------------------------------------ */
    /* y = act(x + res); res (n) or NULL. y may equal x. */
    void (*act_fwd)(nn_backend_t *be, const float *x, const float *res, int64_t n, nn_act_t act,
                    float *y);
    /* y = a + b (n). y may equal a or b. */
    void (*add)(nn_backend_t *be, const float *a, const float *b, int64_t n, float *y);
    /* dst[i] = src[idx[i]] for i < n; idx holds element offsets into src.
     * OPTIONAL (NULL: the inference server downloads whole policy rows): the
     * server gathers each position's legal-move logits on the device, so a
     * batch downloads tens of logits per position, not 2187. */
    void (*gather)(nn_backend_t *be, const float *src, const int32_t *idx, int64_t n, float *dst);
    /* dx = dy * act'(z), z = the pre-activation (x + res). For NN_ACT_RELU the
     * output y may be passed as z (same mask). dx may equal dy. */
    void (*act_bwd)(nn_backend_t *be, const float *dy, const float *z, int64_t n, nn_act_t act,
                    float *dx);

    /* ---- dense ------------------------------------------------------------ */
    /* x (B, in), w (out, in), b (out) or NULL -> y (B, out) */
    void (*dense_fwd)(nn_backend_t *be, const float *x, const float *w, const float *b, int32_t B,
                      int32_t in, int32_t out, float *y);
    /* -> dx (B, in) or NULL, dw (out, in), db (out) or NULL */
    void (*dense_bwd)(nn_backend_t *be, const float *x, const float *w, const float *dy, int32_t B,
                      int32_t in, int32_t out, float *dx, float *dw, float *db);

    /* ---- global pooling (OPTIONAL, all four or none: NULL = the backend runs
     * no global-pooling net; nn_net_new says so) ---------------------------- */
    /* x (B, C, 81) -> y (B, 2C): y[b, c] = the mean of x[b, c, :] over the
     * 81 squares, y[b, C + c] = their max. */
    void (*pool_fwd)(nn_backend_t *be, const float *x, int32_t B, int32_t C, float *y);
    /* pool_fwd's backward, added into dx (B, C, 81): dx[b, c, s] +=
     * dy[b, c] / 81, and dy[b, C + c] at the first square s whose x[b, c, s]
     * is the max (x: pool_fwd's input). */
    void (*pool_bwd)(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t C, float *dx);
    /* y (B, C, 81) = x + bias[b, c] on every square, bias (B, C). y may equal x. */
    void (*chan_bias_fwd)(nn_backend_t *be, const float *x, const float *bias, int32_t B, int32_t C, float *y);
    /* chan_bias_fwd's backward for the bias: dbias (B, C) = the sum of dy[b, c, :] over the squares. */
    void (*chan_bias_bwd)(nn_backend_t *be, const float *dy, int32_t B, int32_t C, float *dbias);
    /* pool_fwd and chan_bias_fwd with x and y in the backend's own activation
     * layout (conv_fwd_act's NN_CONV_*_NATIVE): inference keeps a pooling
     * block on the fused route (OPTIONAL, both or neither: NULL = the block's
     * h1 leaves the native layout, NCHW between its two convolutions). */
    void (*pool_fwd_native)(nn_backend_t *be, const float *x, int32_t B, int32_t C, float *y);
    void (*chan_bias_fwd_native)(nn_backend_t *be, const float *x, const float *bias, int32_t B, int32_t C, float *y);

    /* ---- losses: write dlogits = scale * dLoss/dlogits, add sums to stats ---- */
    /* Softmax cross-entropy against a sparse target: position b's target is
     * labels/probs[offsets[b] .. offsets[b+1]) (offsets (B+1), offsets[0] = 0;
     * probs need not sum to 1: loss = -sum t_i log p_i, grad = p * sum(t) - t).
     * Adds NN_STAT_POLICY_LOSS and NN_STAT_POLICY_CORRECT (target argmax =
     * highest prob, ties to the lower label; logit argmax ties to the lower index). */
    void (*policy_loss)(nn_backend_t *be, const float *logits, const uint32_t *offsets,
                        const uint16_t *labels, const float *probs, int32_t B, int32_t N,
                        float scale, float *dlogits, float *stats);
    /* W/D/L value target (B, 3) = (1 - q_mix) * onehot(result) + q_mix * wdl(q):
     * result +1 = side to move won -> W, 0 -> D, -1 -> L; wdl(q) with
     * d = q_draw * (1 - |q|): W = (1 + q - d)/2, D = d, L = (1 - q - d)/2
     * (so W - L = q and W + D/2 = (1 + q)/2; valid for q in [-1,1], q_draw in [0,1]). */
    void (*value_target)(nn_backend_t *be, const int8_t *result, const float *q, int32_t B,
                         float q_mix, float q_draw, float *target);
    /* Softmax cross-entropy against a dense target (B, K); adds NN_STAT_VALUE_LOSS. */
    void (*value_loss)(nn_backend_t *be, const float *logits, const float *target, int32_t B,
                       int32_t K, float scale, float *dlogits, float *stats);
    /* Binary cross-entropy with logits against a 0/1 target (B, N); adds
     * NN_STAT_LEGAL_LOSS (sum over all B*N), TP, FP, FN (threshold logit >= 0). */
    void (*legal_loss)(nn_backend_t *be, const float *logits, const float *target, int32_t B,
                       int32_t N, float scale, float *dlogits, float *stats);
    /* OPTIONAL (NULL: the backend runs no net with a moves-left head; nn_net_new
     * says so). Huber loss of a scalar regression: for b < B with target[b] >= 0,
     * r = pred[b] - target[b] / tscale, loss = r^2 / 2 when |r| <= delta, else
     * delta * (|r| - delta / 2); dpred[b] = scale * clamp(r, -delta, delta);
     * rows with target[b] < 0 (no target): dpred[b] = 0, nothing added. Adds
     * NN_STAT_ML_LOSS (the losses), NN_STAT_ML_ABS (sum |tscale * max(pred, 0)
     * - target|) and NN_STAT_ML_COUNT (rows with a target). */
    void (*moves_left_loss)(nn_backend_t *be, const float *pred, const float *target, int32_t B, float tscale,
                            float delta, float scale, float *dpred, float *stats);

    /* ---- optimizer -------------------------------------------------------- */
    /* *out += sum x^2 (one float on the device). */
    void (*sum_squares)(nn_backend_t *be, const float *x, int64_t n, float *out);
    /* g' = g * clip_scale(*gnorm2) (gnorm2: one device float, NULL = no clipping);
     * p *= 1 - lr*wd; v = mu*v + g'; p -= lr * (nesterov ? g' + mu*v : v).
     * lr and wd: args->hyper's when set, else args->lr, args->weight_decay. */
    void (*sgd_step)(nn_backend_t *be, float *p, const float *g, float *v, int64_t n,
                     const float *gnorm2, const nn_sgd_args_t *args);

    /* ---- training batches from resident rows (OPTIONAL: NULL = the trainer
     * gathers batches on the host and uploads them) ---------------------------
     * For b < B: refs[b] (device) names row refs[b].row of table entry
     * srcs[refs[b].src] (device, nn_rows_src_t); its planes_bytes of planes,
     * hand_n hand floats, legal_bytes of legal mask, result and q go to row b
     * of planes, hand, legal, result, q; its policy entries, as many as
     * offsets[b + 1] - offsets[b] (offsets: the batch's (B + 1), device), from
     * refs[b].policy_begin of the source to [offsets[b], offsets[b + 1]) of
     * labels and probs. No output may alias a source. */
    void (*gather_rows)(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs,
                        const uint32_t *offsets, int32_t B, int32_t planes_bytes, int32_t hand_n,
                        int32_t legal_bytes, uint8_t *planes, float *hand, uint8_t *legal, uint16_t *labels,
                        float *probs, int8_t *result, float *q);
    /* OPTIONAL (NULL: batches gathered on the device carry no targets for the
     * optional heads). The optional heads' targets of the same batch: for
     * b < B, when moves_left is not NULL, moves_left[b] = the moves_left of
     * row refs[b].row of srcs[refs[b].src] as a float (-1 where that column
     * is NULL); when opp_refs is not NULL, opp_offsets[b + 1] - opp_offsets[b]
     * policy entries (labels and probs) from opp_refs[b].policy_begin of
     * srcs[opp_refs[b].src] to [opp_offsets[b], opp_offsets[b + 1]) of
     * opp_labels and opp_probs (the opponent's reply: the next row's policy
     * target; rows without one have no entries, their opp_refs entry unread),
     * or, when opp_refs[b].onehot, the one entry (move_label[opp_refs[b].row]
     * of that source, 1.0f): the move played where the row has no target.
     * All device pointers; no output may alias a source. */
    void (*gather_heads)(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs,
                         const nn_row_ref_t *opp_refs, const uint32_t *opp_offsets, int32_t B, float *moves_left,
                         uint16_t *opp_labels, float *opp_probs);

    /* ---- fused inference unit (OPTIONAL: NULL = conv_fwd then act_fwd) ----- */
    /* y (B, cout, 9, 9) = act(conv(x, w) + bias + res), res (B, cout, 9, 9) or
     * NULL; y must not alias x or res. The folded-BN unit of inference in one op.
     * flags (NN_CONV_*): X_NATIVE / Y_NATIVE say that x / y and res are in the
     * backend's own activation layout (same size as NCHW), which only
     * conv_fwd_act reads and writes: a chain of these ops skips the layout
     * conversions. NO_ACT: no activation (act ignored, res must be NULL). */
    void (*conv_fwd_act)(nn_backend_t *be, const float *x, const float *w, const float *bias,
                         const float *res, int32_t B, int32_t cin, int32_t cout, int32_t k,
                         nn_act_t act, float *y, void *ws, int32_t flags);

    /* ---- fused training unit, ReLU (OPTIONAL, both or neither: NULL = bn_fwd_train
     * then act_fwd; act_bwd, copy, then bn_bwd) ------------------------------------- */
    /* y = relu(BN(x) + res) in training mode, res (B, C, HW) or NULL: the batch's
     * statistics, save_mean / save_invstd and the running statistics as
     * bn_fwd_train. y may equal x, not res. */
    void (*bn_relu_fwd_train)(nn_backend_t *be, const float *x, const float *gamma, const float *beta,
                              const float *res, int32_t B, int32_t C, int32_t HW, float eps, float momentum,
                              float *running_mean, float *running_var, float *y, float *save_mean,
                              float *save_invstd);
    /* The unit's backward from dy at its output y (= relu(BN(x) + res)):
     * g = dy where y > 0, else 0; dres = g when not NULL (the gradient at the
     * residual sum); then bn_bwd of g: dx, dgamma, dbeta. dy is clobbered; dx
     * may equal dy. */
    void (*bn_relu_bwd)(nn_backend_t *be, const float *x, const float *y, float *dy, const float *gamma,
                        const float *save_mean, const float *save_invstd, int32_t B, int32_t C, int32_t HW,
                        float *dres, float *dx, float *dgamma, float *dbeta);

    /* ---- captured work (OPTIONAL, all three or none: NULL = ops run as called) ----
     * graph_begin: the ops called until graph_end are recorded, not run; 0, or
     * -1 when the instance cannot record now (then nothing is recorded).
     * graph_end: ends the recording and keeps it under key (replacing an older
     * recording of key, or the least recently used one). 0, or -1 when the
     * recording failed: nothing ran, the instance's error is NOT set (an error
     * during a recording is the recording's), and the instance records no more.
     * graph_launch: runs key's recording again, reading and writing the same
     * buffers; 0 (its failures are the instance's error as for any op), or 1
     * when there is no valid recording of key (never made, evicted, or made
     * before a workspace the recorded ops use was reallocated): run the ops. */
    int (*graph_begin)(nn_backend_t *be);
    int (*graph_end)(nn_backend_t *be, uint64_t key);
    int (*graph_launch)(nn_backend_t *be, uint64_t key);
};

#define NN_CONV_X_NATIVE 1
#define NN_CONV_Y_NATIVE 2
#define NN_CONV_NO_ACT 4

/* The CPU reference backend (always built). threads <= 0: all CPUs. It uses
 * CBLAS (OpenBLAS) where KOMA_HAVE_CBLAS, else the portable GEMM below. */
nn_backend_t *nn_backend_cpu_new(int32_t threads);
void nn_backend_free(nn_backend_t *be); /* NULL ok */
/* be's sticky error, or NULL (also for NULL be). */
const char *nn_backend_error(nn_backend_t *be);
/* "host" or "device": where be's buffers live (for "out of ... memory"). */
const char *nn_backend_memory(const nn_backend_t *be);
/* The CPU backend's convolution route. WINO: the 3x3 convolutions with
 * output channels a multiple of 16 on Winograd F(3x3, 3x3) (nn/conv_wino.c),
 * the others on oneDNN where built (KOMA_HAVE_DNNL), else on the reference.
 * DNNL: oneDNN for all, or NULL + err when built without it. REF: the im2col
 * + GEMM reference for all. AUTO: the environment's KOMA_CPU_CONV=ref|dnnl|
 * wino, else WINO; nn_backend_cpu_new(threads) is AUTO. Every other op is
 * the reference's. (oneDNN's BF16 inference was measured and left out; bf16
 * on the Winograd route is nn_backend_cpu_set_precision below: see
 * docs/BENCHMARKS.md.) */
typedef enum { NN_CPU_CONV_AUTO, NN_CPU_CONV_REF, NN_CPU_CONV_DNNL, NN_CPU_CONV_WINO } nn_cpu_conv_t;
nn_backend_t *nn_backend_cpu_new_conv(int32_t threads, nn_cpu_conv_t conv, char *err, size_t errlen);
/* "ref", "dnnl", "wino+dnnl" or "wino+ref" for a CPU backend; NULL for another backend. */
const char *nn_backend_cpu_conv_route(const nn_backend_t *be);
/* The precision of a CPU backend's inference convolutions (conv_fwd_act, the
 * fused unit inference runs; training's ops stay fp32 whatever is set). BF16:
 * the Winograd route's products in bf16 (AVX512_BF16's vdpbf16ps; the
 * transforms, sums, bias, residual and activation fp32), where the CPU has
 * the instructions and the route is Winograd; fp32 elsewhere (an AVX2-only
 * CPU, the dnnl or ref route). AUTO: the environment's KOMA_CPU_PRECISION
 * (fp32, bf16) where set, else bf16 where it can. A new backend is FP32; the
 * inference server sets its workers' (nn_server_config_t.cpu_precision).
 * Returns the precision in effect (FP32 or BF16; FP32 for another backend).
 * Accuracy and speed against fp32: docs/BENCHMARKS.md. */
typedef enum { NN_CPU_PREC_FP32 = 0, NN_CPU_PREC_AUTO = 1, NN_CPU_PREC_BF16 = 2 } nn_cpu_prec_t;
#define NN_CPU_PREC_NAMES "fp32|auto|bf16"
nn_cpu_prec_t nn_backend_cpu_set_precision(nn_backend_t *be, nn_cpu_prec_t want);
/* "fp32" or "bf16" for a CPU backend, NULL for another. */
const char *nn_backend_cpu_precision(const nn_backend_t *be);
/* "fp32" / "auto" / "bf16" -> *out: 0, or -1 for another string. */
int nn_cpu_prec_parse(const char *s, nn_cpu_prec_t *out);
/* OpenBLAS picks its kernels when it loads; Debian's 0.3.21 runs generic SSE3
 * kernels on CPUs it does not know. Returns the OPENBLAS_CORETYPE that this CPU
 * supports and that beats the kernels in use ("SkylakeX", "Haswell"), or NULL
 * (already set, not OpenBLAS, or nothing better). */
const char *nn_cpu_blas_better_coretype(void);
/* Called first thing in main(): where nn_cpu_blas_better_coretype() names a
 * core type, starts the program again (same argv, same pid, open files kept)
 * with OPENBLAS_CORETYPE set; with oneDNN, also with OMP_WAIT_POLICY=passive
 * where it is unset (OpenMP workers that sleep instead of spinning between
 * primitives). KOMA_NO_REEXEC=1 turns that off. Then (always)
 * nn_gemm_pool_settle: the caller and every OpenBLAS pool thread take their
 * work buffers while memory is plentiful (with no room for the pool, the
 * program starts again with OPENBLAS_NUM_THREADS=1). Returns when nothing is to be done or the
 * platform cannot re-execute. */
void nn_cpu_blas_reexec_if_generic(char **argv);
/* Before a part that needs `threads` more OpenBLAS work buffers (the
 * trainer): OpenBLAS spins for ever when a work buffer cannot be had, so this
 * checks that those buffers can be allocated now. Returns
 * 0, or -1 with err saying how much memory was missing and the address-space
 * limit (ulimit -v). Always 0 without OpenBLAS. */
int nn_cpu_blas_room(int32_t threads, char *err, size_t errlen);
/* OpenBLAS's work buffer (BUFFER_SIZE in Debian's 0.3.21, plus a page). */
#define NN_GEMM_BUFFER_MIB 128
/* 1 when `buffers` OpenBLAS work buffers can be allocated at once right now
 * (always 1 without OpenBLAS). */
int nn_gemm_room(int32_t buffers);
/* 1 once nn_gemm found no memory for OpenBLAS's thread pool: OpenBLAS stays
 * on one thread (nn_backend_cpu_new asks for no more). */
int nn_gemm_pool_denied(void);
/* First thing in main (nn_cpu_blas_reexec_if_generic calls it): one product
 * that leaves the caller and every thread of OpenBLAS's pool holding their
 * work buffers; where memory for the pool is short, OpenBLAS stays on one
 * thread and this returns -1 (the caller may start again with
 * OPENBLAS_NUM_THREADS=1). 0, and nothing done, without OpenBLAS. */
int nn_gemm_pool_settle(void);
/* The OpenBLAS thread count to ask for instead of `want`: at most the pool
 * settled at the start (or the core count), 1 once the pool was denied. */
int32_t nn_gemm_threads_cap(int32_t want);
/* The OpenBLAS pool a program starting under an address-space limit of
 * `limit` bytes, `used` of them taken by its libraries, has room for (ncpu
 * without the limit's hook: not glibc, or no OpenBLAS). Executables linked on
 * glibc start again with OPENBLAS_NUM_THREADS set to it before OpenBLAS's
 * constructor runs, when it is below the CPU count (nn/gemm.c). */
int32_t nn_gemm_preinit_threads(int64_t limit, int64_t used, int32_t ncpu);

/* Row-major single-precision GEMM used by the CPU backend:
 * C (M, N) = alpha * op(A) op(B) + beta * C, op = transpose when trans != 0.
 * nn_gemm goes to CBLAS when available; nn_gemm_portable is the blocked
 * fallback (exposed so tests compare the two). */
void nn_gemm(int32_t transA, int32_t transB, int32_t M, int32_t N, int32_t K, float alpha,
             const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C,
             int32_t ldc);
void nn_gemm_portable(int32_t transA, int32_t transB, int32_t M, int32_t N, int32_t K, float alpha,
                      const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
                      float *C, int32_t ldc);

#endif
