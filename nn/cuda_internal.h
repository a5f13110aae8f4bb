/* cuda_internal.h - what the three files of the CUDA backend share (C++, nvcc only).
 *
 * Owns: the instance (cu_ctx_t) and its sizes, the conv plan type, the error
 * macros (CUDA_CHECK, CUDNN_CHECK, CUBLAS_CHECK, LAUNCH_CHECK), and the
 * declarations that cross between the files, by banner:
 *   nn/backend_cuda.cu  the assembly: errors, op entry, timing, memory, streams,
 *                       the op table, lifetime, the public functions of
 *                       nn/backend_cuda.h;
 *   nn/cuda_kernels.cu  every __global__ kernel, its launcher, and the ops that
 *                       are kernels alone (plane expansion, batch norm,
 *                       elementwise, gather, losses, optimizer);
 *   nn/cuda_layers.cu   cuDNN convolutions (plans, algorithm choice), the fused
 *                       unit, cuBLAS dense layers, recorded forwards (CUDA graphs);
 *   nn/cuda_gpool.cu    global pooling: the board's mean and max, the channel bias.
 * Does not own: the public interface (nn/backend.h, nn/backend_cuda.h); the
 * design notes of the backend (nn/backend_cuda.cu's opening comment).
 */
#ifndef KOMA_NN_CUDA_INTERNAL_H
#define KOMA_NN_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>

extern "C" {
#include "nn/backend.h"
#include "nn/backend_cuda.h"
#include "nn/fault.h"
}

/* ---- sizes ------------------------------------------------------------------ */
#define CU_THREADS 256                     /* block size of the kernels... */
#define CU_CH_THREADS 512                  /* ...except one-block-per-channel reductions */
#define CU_RED_MAX 1024                    /* max blocks of a reduction kernel = partial slots */
#define CU_RED_Q 4                         /* max quantities per reduction */
#define CU_RED_N 65536                     /* doubles in c->red: the above, or batch norm's (2, C, P) + (2, C) */
#define CU_BN_PER_BLOCK 2048               /* batch norm: elements per partial block, at least */
#define CU_STAGE_HALF (8u << 20)           /* pinned staging: 2 halves each way */
#define CU_WS_CAP ((size_t)1 << 30)        /* largest cuDNN workspace we accept */
#define CU_PLAN_BUCKETS 512                /* exact-shape plan hash table */
#define CU_MAX_CANDS 16
#define CU_OT_EV 1024                      /* KOMA_CUDA_OPTIME: events per harvest */
#define CU_OT_OPS 48                       /* ...and distinct op names */
#define CU_GRAPHS 16                       /* recorded forwards kept per instance */

enum { DIR_FWD = 0, DIR_BWD_DATA = 1, DIR_BWD_FILTER = 2, DIR_NB = 3 };

/* ---- types -------------------------------------------------------------------- */
typedef struct {
    void *p;
    size_t n;
} cu_dbuf_t; /* a private device buffer that grows on demand */

/* Descriptors and chosen algorithms for one exact conv shape of one instance. */
typedef struct cu_plan {
    int B, cin, cout, k;
    int nhwc; /* BF16 copies in NHWC / KRSC (plan_make_desc) */
    int unfused; /* cudnnConvolutionBiasActivationForward refused this shape: conv_fwd + act_fwd */
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd[DIR_NB]; /* one per direction: math types differ */
    int ready[DIR_NB];
    int algo[DIR_NB];
    size_t ws[DIR_NB];
    struct cu_plan *next;
} cu_plan_t;

typedef struct {
    int device;
    uint32_t flags; /* effective flags */
    int cc_major, cc_minor, sm_count;
    int bn_resident; /* blocks of the batch-norm partial kernels resident per SM at once (set at creation) */
    int tf32, bf16, det, heuristic, pools;
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    void *blas_ws; /* cuBLAS's workspace (cublasSetWorkspace) */
    size_t blas_ws_n;
    /* upload staging: pinned (2, CU_STAGE_HALF); the half being filled, its fill
     * offset, and one event per half recorded when we leave it */
    unsigned char *up_host;
    int up_cur;
    size_t up_off;
    cudaEvent_t up_ev[2];
    /* download staging: pinned (2, CU_STAGE_HALF), double buffered */
    unsigned char *down_host;
    cudaEvent_t down_ev[2];
    cudaEvent_t tm_ev[2]; /* timer_mark's start and end (timing events) */
    cudaEvent_t fence[NN_FENCE_NB]; /* fence_record / fence_wait (no timing) */
    int tm_marked;        /* bit 0: start recorded, bit 1: end recorded */
    double *red;       /* CU_RED_N doubles: (CU_RED_Q, CU_RED_MAX) reduction partials, or batch norm's */
    cu_dbuf_t cws;     /* cuDNN workspace */
    cu_dbuf_t stage;   /* BF16 copies when the caller passes no conv workspace */
    cu_plan_t *plans[CU_PLAN_BUCKETS];
    /* conv_fwd_act (FP32 / TF32): bias (1, C, 1, 1) and the two activations */
    cudnnTensorDescriptor_t biasd;
    cudnnActivationDescriptor_t act_relu, act_id;
    /* KOMA_CUDA_OPTIME=1: an event at the start of every op (and of the parts
     * of a conv); the device time between two events is the earlier one's.
     * Printed to stderr when the instance is freed (cu_optime_report). */
    int optime, ot_n, ot_nsum;
    cudaEvent_t *ot_ev;
    const char **ot_name;
    struct {
        const char *name;
        double ms;
        long long n;
    } ot_sum[CU_OT_OPS];
    /* graph_begin / graph_end / graph_launch: recordings by key, least
     * recently used evicted; ws_gen counts workspace reallocations (a recording
     * made before one reads freed memory and is dropped) */
    struct {
        uint64_t key, used;
        unsigned gen;
        cudaGraphExec_t exec;
    } graphs[CU_GRAPHS];
    uint64_t graph_tick;
    unsigned ws_gen;
    int capturing, graphs_off;
    int failed;
    int poison; /* the current op's output gets NaN (an injected ":nan" fault) */
    int mute;   /* ops called by another op: not counted by the fault switch */
    int quiet;  /* setup: failures go to the constructor's err only */
    char err[768];
} cu_ctx_t;

static inline cu_ctx_t *CTX(nn_backend_t *be) { return (cu_ctx_t *)be->ctx; }

/* ---- nn/backend_cuda.cu: errors, op entry, timing, workspaces ------------------- */
void cu_fail(cu_ctx_t *c, const char *file, int line, const char *fmt, ...);
bool ok_cuda(cu_ctx_t *c, cudaError_t e, const char *expr, const char *file, int line);
bool ok_cudnn(cu_ctx_t *c, cudnnStatus_t s, const char *expr, const char *file, int line);
bool ok_cublas(cu_ctx_t *c, cublasStatus_t s, const char *expr, const char *file, int line);

/* Each evaluates to true on success; on failure records the sticky error. */
#define CUDA_CHECK(c, call) ok_cuda((c), (call), #call, __FILE__, __LINE__)
#define CUDNN_CHECK(c, call) ok_cudnn((c), (call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(c, call) ok_cublas((c), (call), #call, __FILE__, __LINE__)
/* After every kernel launch: launch-configuration errors show here, faults
 * inside the kernel at the next synchronising call. */
#define LAUNCH_CHECK(c, name) ok_cuda((c), cudaGetLastError(), "launch " name, __FILE__, __LINE__)

void cu_mark(cu_ctx_t *c, const char *what);
bool cu_enter(cu_ctx_t *c, const char *op);
void cu_poison(cu_ctx_t *c, float *x, int64_t n);
int cu_grid(const cu_ctx_t *c, int64_t n);
int cu_red_grid(int64_t n);
bool dbuf_ensure(cu_ctx_t *c, cu_dbuf_t *b, size_t need);

/* ---- nn/cuda_kernels.cu: launchers (true on success; a failure is recorded) ----- */
/* The kernels' entry points for the setup: loads them (fails cleanly where the
 * binary has no kernels for this GPU) and sets c->bn_resident. */
bool cuk_setup(cu_ctx_t *c);
bool cuk_bias_nchw(cu_ctx_t *c, float *y, const float *bias, int64_t planes, int C);
bool cuk_bias_rows(cu_ctx_t *c, float *y, const float *b, int64_t B, int out);
bool cuk_channel_sum(cu_ctx_t *c, const float *x, int B, int C, int HW, float *out);
bool cuk_col_sum(cu_ctx_t *c, const float *dy, int B, int out, float *db);
bool cuk_act_fwd(cu_ctx_t *c, const float *x, const float *res, int64_t n, int act, float *y);
bool cuk_epi_nhwc(cu_ctx_t *c, __nv_bfloat16 *y, const float *bias, const __nv_bfloat16 *res, int64_t n, int C,
                  int act);
template <typename T>
bool transpose_bf(cu_ctx_t *c, const T *x, __nv_bfloat16 *y, int B, int R, int S);
bool to_bf16(cu_ctx_t *c, const float *x, __nv_bfloat16 *y, int B, int R, int S, int nhwc);
bool from_bf16(cu_ctx_t *c, const __nv_bfloat16 *x, float *y, int B, int R, int S, const float *bias, int accumulate,
               int nhwc);

/* ---- nn/cuda_kernels.cu: ops (nn/backend.h) ------------------------------------- */
void cu_expand_planes(nn_backend_t *be, const uint8_t *packed, const float *hand, int32_t B, int32_t planes,
                      int32_t in_hand, float *out);
void cu_bn_fwd_train(nn_backend_t *be, const float *x, const float *gamma, const float *beta, int32_t B, int32_t C,
                     int32_t HW, float eps, float momentum, float *running_mean, float *running_var, float *y,
                     float *save_mean, float *save_invstd);
void cu_bn_relu_fwd_train(nn_backend_t *be, const float *x, const float *gamma, const float *beta, const float *res,
                          int32_t B, int32_t C, int32_t HW, float eps, float momentum, float *running_mean,
                          float *running_var, float *y, float *save_mean, float *save_invstd);
void cu_bn_bwd(nn_backend_t *be, const float *x, const float *dy, const float *gamma, const float *save_mean,
               const float *save_invstd, int32_t B, int32_t C, int32_t HW, float *dx, float *dgamma, float *dbeta);
void cu_bn_relu_bwd(nn_backend_t *be, const float *x, const float *y, float *dy, const float *gamma,
                    const float *save_mean, const float *save_invstd, int32_t B, int32_t C, int32_t HW, float *dres,
                    float *dx, float *dgamma, float *dbeta);
void cu_bn_fold(nn_backend_t *be, const float *w, const float *gamma, const float *beta, const float *mean,
                const float *var, int32_t cout, int32_t kdim, float eps, float *w_out, float *b_out);
void cu_act_fwd(nn_backend_t *be, const float *x, const float *res, int64_t n, nn_act_t act, float *y);
void cu_add(nn_backend_t *be, const float *a, const float *b, int64_t n, float *y);
void cu_gather(nn_backend_t *be, const float *src, const int32_t *idx, int64_t n, float *dst);
void cu_gather_rows(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs, const uint32_t *offsets,
                    int32_t B, int32_t planes_bytes, int32_t hand_n, int32_t legal_bytes, uint8_t *planes, float *hand,
                    uint8_t *legal, uint16_t *labels, float *probs, int8_t *result, float *q);
void cu_gather_heads(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs,
                     const nn_row_ref_t *opp_refs, const uint32_t *opp_offsets, int32_t B, float *moves_left,
                     uint16_t *opp_labels, float *opp_probs);
void cu_act_bwd(nn_backend_t *be, const float *dy, const float *z, int64_t n, nn_act_t act, float *dx);
void cu_policy_loss(nn_backend_t *be, const float *logits, const uint32_t *offsets, const uint16_t *labels,
                    const float *probs, int32_t B, int32_t N, float scale, float *dlogits, float *stats);
void cu_value_target(nn_backend_t *be, const int8_t *result, const float *q, int32_t B, float q_mix, float q_draw,
                     float *target);
void cu_value_loss(nn_backend_t *be, const float *logits, const float *target, int32_t B, int32_t K, float scale,
                   float *dlogits, float *stats);
void cu_legal_loss(nn_backend_t *be, const float *logits, const float *target, int32_t B, int32_t N, float scale,
                   float *dlogits, float *stats);
void cu_moves_left_loss(nn_backend_t *be, const float *pred, const float *target, int32_t B, float tscale, float delta,
                        float scale, float *dpred, float *stats);
void cu_sum_squares(nn_backend_t *be, const float *x, int64_t n, float *out);
void cu_sgd_step(nn_backend_t *be, float *p, const float *g, float *v, int64_t n, const float *gnorm2,
                 const nn_sgd_args_t *a);

/* ---- nn/cuda_layers.cu: ops (nn/backend.h) and what the lifetime frees ---------- */
size_t cu_conv_ws_bytes(nn_backend_t *be, int32_t B, int32_t cin, int32_t cout, int32_t k);
void cu_conv_fwd(nn_backend_t *be, const float *x, const float *w, const float *bias, int32_t B, int32_t cin,
                 int32_t cout, int32_t k, float *y, void *ws);
void cu_conv_fwd_act(nn_backend_t *be, const float *x, const float *w, const float *bias, const float *res, int32_t B,
                     int32_t cin, int32_t cout, int32_t k, nn_act_t act_in, float *y, void *ws, int32_t flags);
void cu_conv_bwd_data(nn_backend_t *be, const float *dy, const float *w, int32_t B, int32_t cin, int32_t cout,
                      int32_t k, float *dx, int32_t accumulate, void *ws);
void cu_conv_bwd_filter(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t cin, int32_t cout,
                        int32_t k, float *dw, float *dbias, void *ws);
void cu_dense_fwd(nn_backend_t *be, const float *x, const float *w, const float *b, int32_t B, int32_t in, int32_t out,
                  float *y);
void cu_dense_bwd(nn_backend_t *be, const float *x, const float *w, const float *dy, int32_t B, int32_t in,
                  int32_t out, float *dx, float *dw, float *db);
int cu_graph_begin(nn_backend_t *be);
int cu_graph_end(nn_backend_t *be, uint64_t key);
int cu_graph_launch(nn_backend_t *be, uint64_t key);
void graph_drop(cu_ctx_t *c, int i);
void plan_destroy_desc(cu_plan_t *p);

/* ---- nn/cuda_gpool.cu: global pooling (twins of nn/backend_cpu.c's) ----------------- */
void cu_pool_fwd(nn_backend_t *be, const float *x, int32_t B, int32_t C, float *y);
void cu_pool_bwd(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t C, float *dx);
void cu_chan_bias_fwd(nn_backend_t *be, const float *x, const float *bias, int32_t B, int32_t C, float *y);
void cu_chan_bias_bwd(nn_backend_t *be, const float *dy, int32_t B, int32_t C, float *dbias);

#endif
