/* backend_cuda.cu - the CUDA backend: every op of nn/backend.h on one stream.
 *
 * Owns: the CUDA implementation of the ops (cuDNN convolutions with algorithms
 * chosen once per shape, cuBLAS dense layers, hand-written kernels for plane
 * expansion, bias/activation, batch norm, the three losses, sum of squares
 * and SGD), pinned staging for upload/download, the per-instance workspaces
 * and the sticky error of an instance. Each kernel names its CPU twin in
 * nn/backend_cpu.c (the reference it is tested against, op by op, in
 * tests/nn/test_nn_cuda_gpu.c) and mirrors its arithmetic order.
 * Does not own: op semantics (nn/backend.h), the order ops run in (nn/net.c).
 *
 * Design notes
 *  - One instance = one non-blocking stream + its cuDNN and cuBLAS handles
 *    bound to it. Ops only enqueue; nothing synchronises the host except
 *    download, sync, fence_wait (the work before its mark only: one event per
 *    fence), buffer frees, workspace growth without memory pools, and the
 *    first use of a convolution shape (algorithm choice, below).
 *  - Callers' own staging: host_alloc gives page-locked memory (the server's
 *    worker staging, the trainer's metric records) and download_async only
 *    enqueues a copy into it, so a worker waits once per batch (its sync)
 *    instead of once per output, and the trainer waits for a step's metrics
 *    behind that step's fence while the next step runs.
 *  - Convolutions: NCHW float (or NHWC BF16 copies, see NN_CUDA_BF16), cross-correlation,
 *    pad k/2. Algorithms are timed with cudnnFind* once per (power-of-two batch
 *    bucket, cin, cout, k, direction, math) and shared by all instances of the
 *    process on that device; each exact shape then takes the fastest candidate
 *    whose workspace query succeeds (NN_CUDA_HEURISTIC: cudnnGet*_v7 instead,
 *    no timing). The cuDNN workspace is private to the instance and grows
 *    (stream-ordered with cudaMallocAsync where the device has memory pools);
 *    the caller's conv workspace (conv_ws_bytes) only holds the BF16 copies.
 *  - Math: TF32 tensor cores for FP32 convs/GEMMs on cc >= 8.0 (cuDNN
 *    DEFAULT_MATH, cuBLAS TF32_TENSOR_OP_MATH); NN_CUDA_NO_TF32 forces cuDNN
 *    FMA_MATH and cuBLAS DEFAULT_MATH. BF16: x, w and y of each conv are
 *    converted to BF16 in the conv workspace (transposed to NHWC / KRSC on
 *    the way, cuDNN's tensor-core layout, where the channel counts are
 *    multiples of 8), cuDNN computes in FP32 (PSEUDO_BFLOAT16 config), results
 *    come back to FP32 NCHW (+bias, +=); the backward passes use
 *    deterministic algorithms only (see take_perf).
 *  - Reductions (BN, losses, sums) accumulate in double with a fixed grid and
 *    a fixed tree, so results are deterministic run to run; loss ops write one
 *    partial per block and a finalize kernel adds the total into stats.
 *  - KOMA_CUDA_OPTIME=1: device time per op (and per part of a conv) from
 *    CUDA events, printed when the instance is freed; for profiling where no
 *    nsys is installed (it synchronises once per CU_OT_EV events).
 *  - Inference's fused unit (conv_fwd_act, BN folded by nn/net.c): FP32/TF32
 *    through cudnnConvolutionBiasActivationForward (bias + residual + ReLU in
 *    the conv's epilogue); BF16 keeps the trunk's activations BF16 NHWC
 *    between units with one epilogue kernel (bias + residual + act) per conv.
 *    KOMA_CUDA_NO_FUSE=1: the unfused route (conv_fwd then act_fwd; in training,
 *    bn_fwd_train then act_fwd, act_bwd then bn_bwd).
 *  - Recorded work (graph_begin/graph_end/graph_launch): stream capture
 *    into CUDA graphs, CU_GRAPHS per instance by key (nn/net.c records a
 *    device forward, and a training step on a staged batch, whose shape came
 *    back; a step's lr and weight decay are read from device memory by
 *    k_sgd_step, so a replay follows the schedule); a workspace that grows
 *    drops the recordings made before; a failed capture turns recording off
 *    for the instance and leaves no error. KOMA_CUDA_GRAPHS=0,
 *    KOMA_CUDA_OPTIME and an armed KOMA_FAULT turn recording off.
 *  - Training batches from the resident window: k_gather_rows.
 *  - Not here: NHWC activations in training.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

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
static const char *const dir_name[DIR_NB] = {"forward", "backward data", "backward filter"};

/* ---- types -------------------------------------------------------------------- */
typedef struct {
    void *p;
    size_t n;
} cu_dbuf_t; /* a private device buffer that grows on demand */

typedef struct {
    int algo;             /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    cudnnMathType_t math; /* the math type cuDNN reported for it */
} cu_cand_t;

/* Ranked algorithm candidates for one (bucket) shape and direction, shared by
 * every instance of the process (g_algo_mu). */
typedef struct cu_algo_set {
    int device, B, cin, cout, k, bf16, tf32, det, dir;
    int n;
    cu_cand_t c[CU_MAX_CANDS];
    struct cu_algo_set *next;
} cu_algo_set_t;

static std::mutex g_algo_mu;
static cu_algo_set_t *g_algo_sets; /* process lifetime (reachable: not a leak) */

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

static cu_ctx_t *CTX(nn_backend_t *be) { return (cu_ctx_t *)be->ctx; }

/* ---- errors ------------------------------------------------------------------- */
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static const char *hint_cuda(cudaError_t e) {
    switch (e) {
    case cudaErrorMemoryAllocation:
        return "out of device memory: lower the batch size, the number of backend instances or the net size";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
        return "no usable GPU/driver: check nvidia-smi and that the driver supports this CUDA runtime";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorInvalidPtx:
        return "this binary has no kernels for this GPU: rebuild with -DCMAKE_CUDA_ARCHITECTURES=native";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
        return "a kernel faulted (bad pointer or size?): rerun under compute-sanitizer";
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
        return "bad argument: is every pointer a buffer of a CUDA backend on this device?";
    case cudaErrorLaunchTimeout:
        return "kernel timed out (display watchdog?)";
    default: return "see the CUDA runtime documentation for this error";
    }
}

static const char *hint_cudnn(cudnnStatus_t s) {
    switch (s) {
    case CUDNN_STATUS_NOT_SUPPORTED:
        return "cuDNN does not support this shape/data type/algorithm (BF16 needs cc >= 8.0)";
    case CUDNN_STATUS_BAD_PARAM: return "a descriptor or pointer is invalid (internal bug?)";
    case CUDNN_STATUS_ALLOC_FAILED: return "cuDNN ran out of device memory";
    case CUDNN_STATUS_EXECUTION_FAILED: return "a cuDNN kernel failed on the device";
    case CUDNN_STATUS_NOT_INITIALIZED:
        return "cuDNN could not initialise: is libcudnn.so.9 with its sub-libraries (libcudnn_cnn, libcudnn_ops, engines) on the library path, and the driver recent enough?";
    default: return "see the cuDNN documentation for this status";
    }
}

static const char *hint_cublas(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS ran out of device memory";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS could not initialise (driver/library mismatch?)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "this GPU lacks a feature cuBLAS was asked for";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "a cuBLAS kernel failed on the device";
    default: return "see the cuBLAS documentation for this status";
    }
}

/* Records the first failure of an instance (printed once), then every op of
 * the instance is a no-op; NN_CUDA_ABORT_ON_ERROR aborts instead. */
static void cu_fail(cu_ctx_t *c, const char *file, int line, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = 1;
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof(c->err), "%s:%d: %s", file, line, msg);
    if (c->capturing) return; /* the recording's failure, not the instance's: graph_end says it */
    if (!c->quiet) fprintf(stderr, "koma cuda (device %d): %s\n", c->device, c->err);
    if (c->flags & NN_CUDA_ABORT_ON_ERROR) abort();
}

static bool ok_cuda(cu_ctx_t *c, cudaError_t e, const char *expr, const char *file, int line) {
    if (e == cudaSuccess) return true;
    cu_fail(c, file, line, "%s: %s (%s); hint: %s", expr, cudaGetErrorName(e), cudaGetErrorString(e), hint_cuda(e));
    return false;
}
static bool ok_cudnn(cu_ctx_t *c, cudnnStatus_t s, const char *expr, const char *file, int line) {
    if (s == CUDNN_STATUS_SUCCESS) return true;
    cu_fail(c, file, line, "%s: %s (%d); hint: %s", expr, cudnnGetErrorString(s), (int)s, hint_cudnn(s));
    return false;
}
static bool ok_cublas(cu_ctx_t *c, cublasStatus_t s, const char *expr, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    cu_fail(c, file, line, "%s: %s (%d); hint: %s", expr, cublasGetStatusString(s), (int)s, hint_cublas(s));
    return false;
}

/* Each evaluates to true on success; on failure records the sticky error. */
#define CUDA_CHECK(c, call) ok_cuda((c), (call), #call, __FILE__, __LINE__)
#define CUDNN_CHECK(c, call) ok_cudnn((c), (call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(c, call) ok_cublas((c), (call), #call, __FILE__, __LINE__)
/* After every kernel launch: launch-configuration errors show here, faults
 * inside the kernel at the next synchronising call. */
#define LAUNCH_CHECK(c, name) ok_cuda((c), cudaGetLastError(), "launch " name, __FILE__, __LINE__)

/* ---- op timing (KOMA_CUDA_OPTIME) ------------------------------------------------- */
/* Adds the intervals between the recorded events to their ops' sums, keeping
 * the last event as the start of the next window. Synchronises the stream's
 * last event: a profiling mode. */
static void cu_optime_harvest(cu_ctx_t *c) {
    if (c->ot_n < 2 || cudaEventSynchronize(c->ot_ev[c->ot_n - 1]) != cudaSuccess) return;
    for (int i = 0; i + 1 < c->ot_n; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, c->ot_ev[i], c->ot_ev[i + 1]) != cudaSuccess) continue;
        int j = 0;
        while (j < c->ot_nsum && strcmp(c->ot_sum[j].name, c->ot_name[i]) != 0) j++;
        if (j == c->ot_nsum) {
            if (j == CU_OT_OPS) continue;
            c->ot_sum[c->ot_nsum++].name = c->ot_name[i];
        }
        c->ot_sum[j].ms += ms;
        c->ot_sum[j].n++;
    }
    cudaEvent_t last = c->ot_ev[c->ot_n - 1];
    c->ot_ev[c->ot_n - 1] = c->ot_ev[0];
    c->ot_ev[0] = last;
    c->ot_name[0] = c->ot_name[c->ot_n - 1];
    c->ot_n = 1;
}

/* Marks the start of `what` (a string literal) on the stream. */
static void cu_mark(cu_ctx_t *c, const char *what) {
    if (!c->optime) return;
    if (c->ot_n == CU_OT_EV) cu_optime_harvest(c);
    if (cudaEventRecord(c->ot_ev[c->ot_n], c->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    c->ot_name[c->ot_n++] = what;
}

/* The table: op (or part), device ms in all, calls, ms per call, share. The
 * time after a sync or download until the next op is the device waiting for
 * the host, counted under that sync/download. */
static void cu_optime_report(cu_ctx_t *c) {
    cu_mark(c, "(end)");
    cu_optime_harvest(c);
    double total = 0;
    for (int i = 0; i < c->ot_nsum; i++) total += c->ot_sum[i].ms;
    if (total <= 0) return;
    fprintf(stderr, "koma cuda (device %d, %s): device time by op (KOMA_CUDA_OPTIME), %.1f ms in all\n", c->device,
            c->bf16 ? "bf16" : c->tf32 ? "tf32" : "fp32", total);
    for (int k = 0; k < c->ot_nsum; k++) {
        int m = k; /* selection sort, largest first: a few dozen rows */
        for (int i = k + 1; i < c->ot_nsum; i++)
            if (c->ot_sum[i].ms > c->ot_sum[m].ms) m = i;
        if (m != k) {
            auto t = c->ot_sum[k];
            c->ot_sum[k] = c->ot_sum[m];
            c->ot_sum[m] = t;
        }
        fprintf(stderr, "  %-26s %10.2f ms %9lld calls %9.4f ms/call %5.1f%%\n", c->ot_sum[k].name, c->ot_sum[k].ms,
                c->ot_sum[k].n, c->ot_sum[k].ms / (double)(c->ot_sum[k].n ? c->ot_sum[k].n : 1),
                100.0 * c->ot_sum[k].ms / total);
    }
}

/* Entry of every op: no-op after a failure; asks the fault switch
 * (nn/fault.h: an injected failure becomes the sticky error, an injected NaN
 * sets c->poison for the op's cu_poison); binds the calling thread to the
 * instance's device (instances may move between threads). */
static bool cu_enter(cu_ctx_t *c, const char *op) {
    if (c->failed) return false;
    nn_fault_t f = c->mute ? NN_FAULT_NONE : nn_fault_hit(op); /* muted: an op inside another, counted there */
    if (!c->mute) c->poison = f == NN_FAULT_NAN;
    if (f == NN_FAULT_FAIL) {
        char msg[128];
        nn_fault_message(op, msg, sizeof msg);
        cu_fail(c, __FILE__, __LINE__, "%s", msg);
        return false;
    }
    if (!CUDA_CHECK(c, cudaSetDevice(c->device))) return false;
    /* Clear a stale non-sticky error left by someone else's call on this thread,
     * so that LAUNCH_CHECK reports our launches only. (Errors of our own calls
     * were checked where they happened; kernel faults are sticky and show again.) */
    (void)cudaGetLastError();
    cu_mark(c, op);
    return true;
}

/* End of conv_fwd, dense_fwd, sgd_step: NaN into their output (n floats)
 * when cu_enter was told to (KOMA_FAULT=<op>:<n>:nan). */
static void cu_poison(cu_ctx_t *c, float *x, int64_t n) {
    if (!c->poison || n <= 0) return;
    c->poison = 0;
    CUDA_CHECK(c, cudaMemsetAsync(x, 0xFF, sizeof(float) * (size_t)n, c->stream));
}

static int cu_grid(const cu_ctx_t *c, int64_t n) {
    int64_t g = (n + CU_THREADS - 1) / CU_THREADS;
    int64_t cap = (int64_t)c->sm_count * 16;
    if (cap < 1) cap = 1;
    if (g > cap) g = cap;
    return g < 1 ? 1 : (int)g;
}
/* Grid of a reduction kernel: deterministic in n alone (not the device). */
static int cu_red_grid(int64_t n) {
    int64_t g = (n + CU_THREADS - 1) / CU_THREADS;
    if (g > CU_RED_MAX) g = CU_RED_MAX;
    return g < 1 ? 1 : (int)g;
}

/* Grows a private device buffer (stream-ordered where the device has memory
 * pools; otherwise after synchronising the stream). */
static bool dbuf_ensure(cu_ctx_t *c, cu_dbuf_t *b, size_t need) {
    if (b->n >= need) return true;
    if (c->capturing) { /* an allocation would become part of the recording: fail it instead */
        cu_fail(c, __FILE__, __LINE__, "a workspace must grow to %zu bytes during a recording", need);
        return false;
    }
    c->ws_gen++;
    size_t n = need + need / 4;
    n = (n + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    void *p = NULL;
    if (c->pools) {
        if (b->p && !CUDA_CHECK(c, cudaFreeAsync(b->p, c->stream))) return false;
        b->p = NULL;
        b->n = 0;
        if (!CUDA_CHECK(c, cudaMallocAsync(&p, n, c->stream))) return false;
    } else {
        if (!CUDA_CHECK(c, cudaStreamSynchronize(c->stream))) return false;
        if (b->p && !CUDA_CHECK(c, cudaFree(b->p))) return false;
        b->p = NULL;
        b->n = 0;
        if (!CUDA_CHECK(c, cudaMalloc(&p, n))) return false;
    }
    b->p = p;
    b->n = n;
    return true;
}

/* ---- device helpers -------------------------------------------------------------- */
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_MASK, v, o);
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, every thread calls it);
 * every thread gets the total. sh: __shared__ double[33]. */
__device__ double block_sum(double v, double *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); /* sh may still be read from the previous call */
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        double t = lane < nw ? sh[lane] : 0.0;
        t = warp_sum(t);
        if (lane == 0) sh[32] = t;
    }
    __syncthreads();
    return sh[32];
}

/* (v, i) beats (bv, bi): larger value, ties to the lower index. */
__device__ __forceinline__ void arg_better(float &bv, int &bi, float v, int i) {
    if (v > bv || (v == bv && i < bi)) {
        bv = v;
        bi = i;
    }
}

__device__ void block_argmax(float &v, int &i, float *shv, int *shi) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        float v2 = __shfl_down_sync(FULL_MASK, v, o);
        int i2 = __shfl_down_sync(FULL_MASK, i, o);
        arg_better(v, i, v2, i2);
    }
    __syncthreads();
    if (lane == 0) {
        shv[w] = v;
        shi[w] = i;
    }
    __syncthreads();
    if (w == 0) {
        float tv = lane < nw ? shv[lane] : -INFINITY;
        int ti = lane < nw ? shi[lane] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            float v2 = __shfl_down_sync(FULL_MASK, tv, o);
            int i2 = __shfl_down_sync(FULL_MASK, ti, o);
            arg_better(tv, ti, v2, i2);
        }
        if (lane == 0) {
            shv[32] = tv;
            shi[32] = ti;
        }
    }
    __syncthreads();
    v = shv[32];
    i = shi[32];
}

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
/* The same over an index type I: the kernels that divide their index (an
 * element's channel) are templates on I and run with 32-bit unsigned indices
 * wherever the tensor allows (IDX_LAUNCH): a 64-bit division is a long
 * subroutine on the GPU, and two of them per element made memory-bound
 * elementwise kernels (batch norm's apply passes, the BF16 epilogue)
 * compute-bound. */
#define GRID_STRIDE_I(I, i, n) \
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)(n); i += (I)gridDim.x * blockDim.x)
/* kern<uint32_t> where n elements (plus one grid's stride) fit in 32 bits, else
 * kern<int64_t>; on c->stream with cu_grid's grid */
#define IDX_LAUNCH(kern, n, ...)                                                                   \
    do {                                                                                           \
        if ((int64_t)(n) < ((int64_t)1 << 31))                                                     \
            kern<uint32_t><<<cu_grid(c, (n)), CU_THREADS, 0, c->stream>>>(__VA_ARGS__);            \
        else                                                                                       \
            kern<int64_t><<<cu_grid(c, (n)), CU_THREADS, 0, c->stream>>>(__VA_ARGS__);             \
    } while (0)

/* ---- kernels ------------------------------------------------------------------------ */
/* Every reduction kernel writes part[q * gridDim.x + blockIdx.x] for its
 * quantities q; k_red_finalize adds the totals: block q -> *dst[q] += sum. */
typedef struct {
    float *dst[CU_RED_Q];
} cu_red_dst_t;

__global__ void k_red_finalize(const double *part, int G, cu_red_dst_t t) {
    __shared__ double sh[33];
    int q = blockIdx.x;
    double s = 0.0;
    for (int i = threadIdx.x; i < G; i += blockDim.x) s += part[(int64_t)q * G + i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0 && t.dst[q]) *t.dst[q] += (float)s;
}

// CPU twin: cpu_expand_planes. packed (B, bpp), hand (B, in_hand) or NULL (= 0)
// -> out (B, planes + in_hand, 9, 9)
__global__ void k_expand_planes(const uint8_t *packed, const float *hand, int B, int planes,
                                int in_hand, int64_t bpp, float *out) {
    int64_t per = (int64_t)(planes + in_hand) * NN_HW, nbits = (int64_t)planes * NN_HW;
    int64_t n = (int64_t)B * per;
    GRID_STRIDE(idx, n) {
        int64_t b = idx / per, r = idx - b * per; /* r = c*81 + square = bit index for c < planes */
        float v;
        if (r < nbits) {
            v = (float)((packed[b * bpp + (r >> 3)] >> (r & 7)) & 1);
        } else {
            int64_t j = (r - nbits) / NN_HW;
            v = hand ? hand[b * in_hand + j] : 0.0f;
        }
        out[idx] = v;
    }
}

// y (B, C, 9, 9) += bias[c]   (conv bias; CPU twin: the bias loop of cpu_conv_fwd)
template <typename I>
__global__ void k_bias_nchw(float *y, const float *bias, int64_t planes, int C) {
    int64_t n = planes * NN_HW;
    GRID_STRIDE_I(I, idx, n) {
        int c = (int)((idx / (I)NN_HW) % (I)C);
        y[idx] += bias[c];
    }
}

// y (B, out) += b[o]   (CPU twin: the bias loop of cpu_dense_fwd)
__global__ void k_bias_rows(float *y, const float *b, int64_t B, int out) {
    int64_t n = B * out;
    GRID_STRIDE(idx, n) y[idx] += b[idx % out];
}

// x (B, C, HW) -> out[c] = sum over B, HW (block c; CPU twin: dbias in cpu_conv_bwd_filter)
__global__ void __launch_bounds__(CU_CH_THREADS) k_channel_sum(const float *x, int B, int C, int HW, float *out) {
    __shared__ double sh[33];
    int c = blockIdx.x, n = B * HW;
    double s = 0.0;
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        int b = e / HW, i = e - b * HW;
        s += x[((int64_t)b * C + c) * HW + i];
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) out[c] = (float)s;
}

// dy (B, out) -> db[o] = sum over rows (block o; CPU twin: db in cpu_dense_bwd)
__global__ void k_col_sum(const float *dy, int B, int out, float *db) {
    __shared__ double sh[33];
    int o = blockIdx.x;
    double s = 0.0;
    for (int i = threadIdx.x; i < B; i += blockDim.x) s += dy[(int64_t)i * out + o];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) db[o] = (float)s;
}

// BF16 conversions around cuDNN (round to nearest even)
// BF16 convolutions run on NHWC tensors and KRSC filters (cuDNN's tensor-core
// layout: on NCHW BF16 it adds transposes of its own; on an H100 a B1024
// 128->128 3x3 forward took 0.21 ms/call, slower than TF32's 0.15). These two
// convert and transpose in one pass, through 32x32 shared-memory tiles so
// that both the reads and the writes are coalesced. No CPU twin: layout only,
// the conv ops around them are compared with the CPU's.
#define CU_TILE 32
// Channel counts that are not multiples of 8 (the stem's 82 input planes,
// odd test shapes) stay NCHW: cuDNN's NHWC tensor-core kernels need C % 8 == 0.
__global__ void k_f2bf(const float *x, __nv_bfloat16 *y, int64_t n) {
    GRID_STRIDE(i, n) y[i] = __float2bfloat16_rn(x[i]);
}
// x (bf16) -> y (float): y = x (+ bias[c] for NCHW with C channels) or y += x
template <typename I>
__global__ void k_bf2f(const __nv_bfloat16 *x, float *y, int64_t n, const float *bias, int C, int accumulate) {
    GRID_STRIDE_I(I, i, n) {
        float v = __bfloat162float(x[i]);
        if (bias) v += bias[(int)((i / (I)NN_HW) % (I)C)];
        y[i] = accumulate ? y[i] + v : v;
    }
}
__device__ __forceinline__ __nv_bfloat16 to_bf(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ __nv_bfloat16 to_bf(__nv_bfloat16 v) { return v; }
// x (B, R, S) -> y (B, S, R) bf16, x float or bf16; blockIdx.z = b, grid
// (S/32, R/32). NCHW float to NHWC BF16 copies, KCRS filters to KRSC, and a
// native BF16 NHWC activation to NCHW (R = 81, S = C) or back (R = C, S = 81).
template <typename T>
__global__ void k_to_bf_t(const T *x, __nv_bfloat16 *y, int R, int S) {
    __shared__ T t[CU_TILE][CU_TILE + 1];
    int64_t off = (int64_t)blockIdx.z * R * S;
    int r0 = blockIdx.y * CU_TILE, s0 = blockIdx.x * CU_TILE;
    for (int j = threadIdx.y; j < CU_TILE; j += blockDim.y) {
        int r = r0 + j, s = s0 + threadIdx.x;
        if (r < R && s < S) t[j][threadIdx.x] = x[off + (int64_t)r * S + s];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < CU_TILE; j += blockDim.y) {
        int s = s0 + j, r = r0 + threadIdx.x;
        if (r < R && s < S) y[off + (int64_t)s * R + r] = to_bf(t[threadIdx.x][j]);
    }
}
// x (B, S, R) bf16 -> y (B, R, S) float: y = x (+ bias[r]) or y += x
__global__ void k_bf2f_t(const __nv_bfloat16 *x, float *y, int R, int S, const float *bias, int accumulate) {
    __shared__ float t[CU_TILE][CU_TILE + 1];
    int64_t off = (int64_t)blockIdx.z * R * S;
    int r0 = blockIdx.y * CU_TILE, s0 = blockIdx.x * CU_TILE;
    for (int j = threadIdx.y; j < CU_TILE; j += blockDim.y) {
        int s = s0 + j, r = r0 + threadIdx.x;
        if (r < R && s < S) t[j][threadIdx.x] = __bfloat162float(x[off + (int64_t)s * R + r]);
    }
    __syncthreads();
    for (int j = threadIdx.y; j < CU_TILE; j += blockDim.y) {
        int r = r0 + j, s = s0 + threadIdx.x;
        if (r < R && s < S) {
            float v = t[threadIdx.x][j];
            if (bias) v += bias[r];
            int64_t o = off + (int64_t)r * S + s;
            y[o] = accumulate ? y[o] + v : v;
        }
    }
}

// CPU twin: the epilogue of cpu conv_fwd_act (conv_fwd's bias, then
// cpu_act_fwd). y (n elements, NHWC with C channels, BF16, in place) =
// act(y + bias[c] + res), res (NHWC BF16) or NULL, act < 0: none; one
// rounding to BF16 at the end.
__device__ __forceinline__ float epi_act(float z, int act) {
    if (act == NN_ACT_RELU) return z > 0.0f ? z : 0.0f;
    if (act == NN_ACT_SILU) return z / (1.0f + expf(-z));
    return z;
}
template <typename I>
__global__ void k_epi_nhwc(__nv_bfloat16 *y, const float *bias, const __nv_bfloat16 *res, int64_t n, int C, int act) {
    GRID_STRIDE_I(I, i, n) {
        float z = __bfloat162float(y[i]);
        if (bias) z += bias[(int)(i % (I)C)];
        if (res) z += __bfloat162float(res[i]);
        y[i] = __float2bfloat16_rn(epi_act(z, act));
    }
}

// k_epi_nhwc eight elements (16 bytes) at a time, where C % 8 == 0 and y, res
// are 16-byte aligned: the same arithmetic in the same order (bit-identical),
// one channel index per eight elements and full-width loads and stores.
template <typename I>
__global__ void k_epi_nhwc8(__nv_bfloat16 *y, const float *bias, const __nv_bfloat16 *res, int64_t n8, int C8,
                            int act) {
    GRID_STRIDE_I(I, v, n8) {
        uint4 yv = reinterpret_cast<uint4 *>(y)[v], rv = make_uint4(0, 0, 0, 0);
        if (res) rv = reinterpret_cast<const uint4 *>(res)[v];
        __nv_bfloat162 *yp = reinterpret_cast<__nv_bfloat162 *>(&yv);
        const __nv_bfloat162 *rp = reinterpret_cast<const __nv_bfloat162 *>(&rv);
        int c0 = (int)(v % (I)C8) * 8;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float2 z = __bfloat1622float2(yp[j]);
            if (bias) {
                z.x += bias[c0 + 2 * j];
                z.y += bias[c0 + 2 * j + 1];
            }
            if (res) {
                float2 r = __bfloat1622float2(rp[j]);
                z.x += r.x;
                z.y += r.y;
            }
            yp[j] = __floats2bfloat162_rn(epi_act(z.x, act), epi_act(z.y, act));
        }
        reinterpret_cast<uint4 *>(y)[v] = yv;
    }
}

// CPU twin: cpu_bn_fwd_train and cpu_bn_bwd, in three kernels each, so that
// a channel's reduction is spread over P blocks (one block per channel left
// most of the device idle: 0.23 ms per 128-channel B1024 call on an H100).
// Block (c, p) of a partial kernel sums batches [p*B/P, (p+1)*B/P) of channel c
// into part[q*C*P + c*P + p]; the finalize kernel adds a channel's P partials
// in order (the result does not depend on scheduling); the apply kernel is
// elementwise. part holds (2, C, P) doubles, then res: per channel floats.

// Forward sums, shifted by the channel's first element (x[c*HW]) so that the
// one-pass variance does not cancel: s = sum (x - K), ss = sum (x - K)^2.
__global__ void k_bn_part_fwd(const float *x, int B, int C, int HW, int P, double *part) {
    __shared__ double sh[33];
    int c = blockIdx.x, p = blockIdx.y;
    int b0 = (int)((int64_t)p * B / P), b1 = (int)((int64_t)(p + 1) * B / P);
    int n = (b1 - b0) * HW;
    double K = x[(int64_t)c * HW], s = 0.0, ss = 0.0;
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        int b = e / HW, i = e - b * HW;
        double d = (double)x[((int64_t)(b0 + b) * C + c) * HW + i] - K;
        s += d;
        ss += d * d;
    }
    s = block_sum(s, sh);
    ss = block_sum(ss, sh);
    if (threadIdx.x == 0) {
        part[(int64_t)c * P + p] = s;
        part[(int64_t)C * P + (int64_t)c * P + p] = ss;
    }
}

// mean, biased variance -> invstd; res (2, C) floats: mean, gamma*invstd;
// running stats with the unbiased variance
__global__ void k_bn_fin_fwd(const double *part, const float *x, const float *gamma, int B, int C, int HW, int P,
                             float eps, float momentum, float *running_mean, float *running_var, float *save_mean,
                             float *save_invstd, float *res) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0.0, ss = 0.0, n = (double)B * HW;
    for (int p = 0; p < P; p++) s += part[(int64_t)c * P + p], ss += part[(int64_t)C * P + (int64_t)c * P + p];
    double ms = s / n, var = ss / n - ms * ms;
    if (var < 0.0) var = 0.0;
    double mean = (double)x[(int64_t)c * HW] + ms;
    float invstd = (float)(1.0 / sqrt(var + eps));
    res[c] = (float)mean;
    res[C + c] = gamma[c] * invstd;
    if (save_mean) save_mean[c] = (float)mean;
    if (save_invstd) save_invstd[c] = invstd;
    double unbiased = n > 1 ? var * n / (n - 1) : var;
    if (running_mean)
        running_mean[c] = __fadd_rn(__fmul_rn(1.0f - momentum, running_mean[c]), __fmul_rn(momentum, (float)mean));
    if (running_var)
        running_var[c] = __fadd_rn(__fmul_rn(1.0f - momentum, running_var[c]), __fmul_rn(momentum, (float)unbiased));
}

// y = (x - mean) * (gamma*invstd) + beta; y may equal x. relu (the fused
// training unit, CPU twin: cpu_bn_relu_fwd_train): y = relu(that + r), r or NULL
template <typename I>
__global__ void k_bn_apply_fwd(const float *x, const float *beta, const float *res, const float *r, int relu,
                               int64_t planes, int C, int HW, float *y) {
    int64_t n = planes * HW;
    GRID_STRIDE_I(I, k, n) {
        int c = (int)((k / (I)HW) % (I)C);
        float z = __fadd_rn(__fmul_rn(x[k] - res[c], res[C + c]), beta[c]);
        if (relu) {
            if (r) z = __fadd_rn(z, r[k]);
            z = z > 0.0f ? z : 0.0f;
        }
        y[k] = z;
    }
}

// Backward sums: sdy = sum dy, sdyx = sum dy*xhat; with y (the fused
// training unit, CPU twin: cpu_bn_relu_bwd) of dy masked where y <= 0
__global__ void k_bn_part_bwd(const float *x, const float *dy, const float *y, const float *save_mean,
                              const float *save_invstd, int B, int C, int HW, int P, double *part) {
    __shared__ double sh[33];
    int c = blockIdx.x, p = blockIdx.y;
    int b0 = (int)((int64_t)p * B / P), b1 = (int)((int64_t)(p + 1) * B / P);
    int n = (b1 - b0) * HW;
    float m = save_mean[c], is = save_invstd[c];
    double sdy = 0.0, sdyx = 0.0;
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        int b = e / HW, i = e - b * HW;
        int64_t k = ((int64_t)(b0 + b) * C + c) * HW + i;
        float g = y && !(y[k] > 0.0f) ? 0.0f : dy[k];
        sdy += g;
        sdyx += (double)g * (double)((x[k] - m) * is);
    }
    sdy = block_sum(sdy, sh);
    sdyx = block_sum(sdyx, sh);
    if (threadIdx.x == 0) {
        part[(int64_t)c * P + p] = sdy;
        part[(int64_t)C * P + (int64_t)c * P + p] = sdyx;
    }
}

// dbeta = sum dy, dgamma = sum dy*xhat; res (3, C) floats: gamma*invstd,
// mean(dy), mean(dy*xhat)
__global__ void k_bn_fin_bwd(const double *part, const float *gamma, const float *save_invstd, int B, int C, int HW,
                             int P, float *dgamma, float *dbeta, float *res) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double sdy = 0.0, sdyx = 0.0, n = (double)B * HW;
    for (int p = 0; p < P; p++) sdy += part[(int64_t)c * P + p], sdyx += part[(int64_t)C * P + (int64_t)c * P + p];
    res[c] = gamma[c] * save_invstd[c];
    res[C + c] = (float)(sdy / n);
    res[2 * C + c] = (float)(sdyx / n);
    if (dbeta) dbeta[c] = (float)sdy;
    if (dgamma) dgamma[c] = (float)sdyx;
}

// dx = gamma*invstd * (dy - mean(dy) - xhat*mean(dy*xhat)); dx may equal dy.
// With y, dy masked as in k_bn_part_bwd, and dres (or NULL) = the masked dy.
template <typename I>
__global__ void k_bn_apply_bwd(const float *x, const float *dy, const float *y, const float *save_mean,
                               const float *save_invstd, const float *res, int64_t planes, int C, int HW, float *dres,
                               float *dx) {
    int64_t n = planes * HW;
    GRID_STRIDE_I(I, k, n) {
        int c = (int)((k / (I)HW) % (I)C);
        float m = save_mean[c], is = save_invstd[c];
        float g = y && !(y[k] > 0.0f) ? 0.0f : dy[k];
        if (dres) dres[k] = g;
        dx[k] = res[c] * (g - res[C + c] - __fmul_rn((x[k] - m) * is, res[2 * C + c]));
    }
}

// CPU twin: cpu_bn_fold. w (cout, kdim) -> w_out, b_out (cout)
__global__ void k_bn_fold(const float *w, const float *gamma, const float *beta, const float *mean,
                          const float *var, int cout, int64_t kdim, float eps, float *w_out,
                          float *b_out) {
    int64_t n = (int64_t)cout * kdim;
    GRID_STRIDE(idx, n) {
        int o = (int)(idx / kdim);
        float s = (float)(gamma[o] / sqrt((double)var[o] + eps));
        w_out[idx] = w[idx] * s;
        if (idx - (int64_t)o * kdim == 0) b_out[o] = __fsub_rn(beta[o], __fmul_rn(mean[o], s));
    }
}

// CPU twin: cpu_act_fwd. y = act(x + res), res NULL ok, y may equal x
__global__ void k_act_fwd(const float *x, const float *res, int64_t n, int act, float *y) {
    GRID_STRIDE(i, n) {
        float z = res ? x[i] + res[i] : x[i];
        y[i] = act == NN_ACT_RELU ? (z > 0.0f ? z : 0.0f) : z / (1.0f + expf(-z));
    }
}

// CPU twin: cpu_add
__global__ void k_add(const float *a, const float *b, int64_t n, float *y) {
    GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

// CPU twin: cpu_gather. dst[i] = src[idx[i]]
__global__ void k_gather(const float *src, const int32_t *idx, int64_t n, float *dst) {
    GRID_STRIDE(i, n) dst[i] = src[idx[i]];
}

// CPU twin: cpu_gather_rows. A block per batch row (grid-stride over B);
// its threads copy the row's bytes and policy entries.
__global__ void k_gather_rows(const nn_rows_src_t *srcs, const nn_row_ref_t *refs, const uint32_t *offsets, int B,
                              int pb, int hn, int lb, uint8_t *planes, float *hand, uint8_t *legal, uint16_t *labels,
                              float *probs, int8_t *result, float *q) {
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        nn_row_ref_t rf = refs[b];
        const nn_rows_src_t *s = &srcs[rf.src];
        size_t r = rf.row;
        uint32_t d0 = offsets[b], k = offsets[b + 1] - d0;
        for (int i = threadIdx.x; i < pb; i += blockDim.x) planes[(size_t)b * pb + i] = s->planes[r * pb + i];
        for (int i = threadIdx.x; i < hn; i += blockDim.x) hand[(size_t)b * hn + i] = s->hand[r * hn + i];
        for (int i = threadIdx.x; i < lb; i += blockDim.x) legal[(size_t)b * lb + i] = s->legal[r * lb + i];
        for (uint32_t i = threadIdx.x; i < k; i += blockDim.x) {
            labels[d0 + i] = s->labels[rf.policy_begin + i];
            probs[d0 + i] = s->probs[rf.policy_begin + i];
        }
        if (threadIdx.x == 0) {
            result[b] = s->result[r];
            q[b] = s->q[r];
        }
    }
}

// CPU twin: cpu_act_bwd. dx = dy * act'(z), dx may equal dy
__global__ void k_act_bwd(const float *dy, const float *z, int64_t n, int act, float *dx) {
    GRID_STRIDE(i, n) {
        float zi = z[i];
        if (act == NN_ACT_RELU) {
            dx[i] = zi > 0.0f ? dy[i] : 0.0f;
        } else {
            float s = 1.0f / (1.0f + expf(-zi));
            dx[i] = dy[i] * s * __fadd_rn(1.0f, __fmul_rn(zi, 1.0f - s));
        }
    }
}

// CPU twin: cpu_policy_loss. Block per position (grid-stride over B). Adds
// partial loss (q 0) and correct count (q 1).
__global__ void k_policy_loss(const float *logits, const uint32_t *offsets, const uint16_t *labels,
                              const float *probs, int B, int N, float scale, float *dlogits,
                              double *part) {
    __shared__ double shd[33];
    __shared__ float shv[33];
    __shared__ int shi[33];
    double acc_loss = 0.0, acc_correct = 0.0; /* thread 0 */
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        const float *z = logits + (int64_t)b * N;
        float *d = dlogits + (int64_t)b * N;
        float mx = -INFINITY;
        int am = INT_MAX;
        for (int i = threadIdx.x; i < N; i += blockDim.x) arg_better(mx, am, z[i], i);
        block_argmax(mx, am, shv, shi);
        double s = 0.0;
        for (int i = threadIdx.x; i < N; i += blockDim.x) s += (double)expf(z[i] - mx);
        s = block_sum(s, shd);
        double lse = (double)mx + log(s);
        float inv = (float)(1.0 / s);
        uint32_t o0 = offsets[b], o1 = offsets[b + 1];
        double tsum = 0.0, loss = 0.0;
        float tbest = -INFINITY;
        int lbest = INT_MAX;
        for (uint32_t j = o0 + threadIdx.x; j < o1; j += blockDim.x) {
            int l = labels[j];
            if (l >= N) continue; /* invalid label: ignored (net.c rejects it on the host) */
            float t = probs[j];
            tsum += t;
            loss += t * (lse - z[l]);
            arg_better(tbest, lbest, t, l);
        }
        tsum = block_sum(tsum, shd);
        loss = block_sum(loss, shd);
        block_argmax(tbest, lbest, shv, shi);
        float ts = (float)tsum * scale;
        for (int i = threadIdx.x; i < N; i += blockDim.x) d[i] = (expf(z[i] - mx) * inv) * ts;
        __syncthreads(); /* the dense writes above before the sparse updates below */
        for (uint32_t j = o0 + threadIdx.x; j < o1; j += blockDim.x) {
            int l = labels[j];
            if (l < N) atomicAdd(&d[l], -(scale * probs[j]));
        }
        if (threadIdx.x == 0) {
            acc_loss += loss;
            if (lbest != INT_MAX && lbest == am) acc_correct += 1.0;
        }
    }
    if (threadIdx.x == 0) {
        part[blockIdx.x] = acc_loss;
        part[gridDim.x + blockIdx.x] = acc_correct;
    }
}

// CPU twin: cpu_value_target. result, q (B) -> target (B, 3)
__global__ void k_value_target(const int8_t *result, const float *q, int B, float q_mix,
                               float q_draw, float *target) {
    GRID_STRIDE(b, (int64_t)B) {
        float *t = target + b * 3;
        int r = result[b];
        float rr[3] = {r > 0 ? 1.0f : 0.0f, r == 0 ? 1.0f : 0.0f, r < 0 ? 1.0f : 0.0f};
        float v = q[b] < -1.0f ? -1.0f : q[b] > 1.0f ? 1.0f : q[b];
        float d = q_draw * (1.0f - fabsf(v));
        float s[3] = {0.5f * (1.0f + v - d), d, 0.5f * (1.0f - v - d)};
        for (int i = 0; i < 3; i++) t[i] = __fadd_rn(__fmul_rn(1.0f - q_mix, rr[i]), __fmul_rn(q_mix, s[i]));
    }
}

// CPU twin: cpu_value_loss. Thread per position; partial loss (q 0).
__global__ void k_value_loss(const float *logits, const float *target, int B, int K, float scale,
                             float *dlogits, double *part) {
    __shared__ double sh[33];
    double loss = 0.0;
    GRID_STRIDE(b, (int64_t)B) {
        const float *z = logits + b * K, *t = target + b * K;
        float *d = dlogits + b * K;
        float mx = z[0];
        for (int i = 1; i < K; i++) mx = z[i] > mx ? z[i] : mx;
        double s = 0.0;
        for (int i = 0; i < K; i++) s += (double)expf(z[i] - mx);
        double lse = (double)mx + log(s);
        float inv = (float)(1.0 / s);
        double tsum = 0.0;
        for (int i = 0; i < K; i++) {
            loss += t[i] * (lse - z[i]);
            tsum += t[i];
        }
        for (int i = 0; i < K; i++) {
            float p = expf(z[i] - mx) * inv;
            d[i] = scale * __fsub_rn(__fmul_rn(p, (float)tsum), t[i]);
        }
    }
    loss = block_sum(loss, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = loss;
}

// CPU twin: cpu_legal_loss. Elementwise BCE with logits; partial loss, TP, FP, FN (q 0..3).
__global__ void k_legal_loss(const float *logits, const float *target, int64_t n, float scale,
                             float *dlogits, double *part) {
    __shared__ double sh[33];
    double loss = 0.0, tp = 0.0, fp = 0.0, fn = 0.0;
    GRID_STRIDE(i, n) {
        float z = logits[i], t = target[i];
        float az = fabsf(z);
        loss += (double)(z > 0.0f ? z : 0.0f) - (double)z * t + (double)log1pf(expf(-az));
        float s = z >= 0.0f ? 1.0f / (1.0f + expf(-z)) : expf(z) / (1.0f + expf(z));
        dlogits[i] = scale * (s - t);
        bool pred = z >= 0.0f, pos = t > 0.5f;
        tp += (pred && pos) ? 1.0 : 0.0;
        fp += (pred && !pos) ? 1.0 : 0.0;
        fn += (!pred && pos) ? 1.0 : 0.0;
    }
    loss = block_sum(loss, sh);
    tp = block_sum(tp, sh);
    fp = block_sum(fp, sh);
    fn = block_sum(fn, sh);
    if (threadIdx.x == 0) {
        int G = gridDim.x, g = blockIdx.x;
        part[g] = loss;
        part[G + g] = tp;
        part[2 * G + g] = fp;
        part[3 * G + g] = fn;
    }
}

// CPU twin: cpu_sum_squares. Partial sum of x^2 (q 0).
__global__ void k_sum_squares(const float *x, int64_t n, double *part) {
    __shared__ double sh[33];
    double s = 0.0;
    GRID_STRIDE(i, n) s += (double)x[i] * x[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

// CPU twin: cpu_sgd_step. The clipping scale is computed here from the device
// gnorm2 (no host round trip); float ops in the CPU's order, no contraction.
__global__ void k_sgd_step(float *p, const float *g, float *v, int64_t n, const float *gnorm2,
                           float clip_norm, const float *hyper, float lr, float wd, float mu, int nesterov) {
    if (hyper) lr = hyper[0], wd = hyper[1]; /* device values: what a recorded step replays with */
    float decay = __fsub_rn(1.0f, __fmul_rn(lr, wd)), scale = 1.0f;
    if (gnorm2 && clip_norm > 0.0f) {
        float norm = sqrtf(*gnorm2);
        float c = __fdiv_rn(clip_norm, __fadd_rn(norm, 1e-6f));
        if (c < 1.0f) scale = c;
    }
    GRID_STRIDE(i, n) {
        float gi = __fmul_rn(g[i], scale);
        float vi = __fadd_rn(__fmul_rn(mu, v[i]), gi);
        v[i] = vi;
        float d = nesterov ? __fadd_rn(gi, __fmul_rn(mu, vi)) : vi;
        p[i] = __fsub_rn(__fmul_rn(p[i], decay), __fmul_rn(lr, d));
    }
}

/* ---- memory ops ------------------------------------------------------------------- */
/* ---- recorded forwards (CUDA graphs) -------------------------------------------------- */
static void graph_drop(cu_ctx_t *c, int i) {
    if (c->graphs[i].exec) (void)cudaGraphExecDestroy(c->graphs[i].exec);
    memset(&c->graphs[i], 0, sizeof(c->graphs[i]));
}

static int cu_graph_begin(nn_backend_t *be) {
    cu_ctx_t *c = CTX(be);
    if (c->graphs_off || c->capturing || nn_fault_armed() || !cu_enter(c, "graph_begin")) return -1;
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "koma cuda (device %d): cudaStreamBeginCapture: %s; this instance runs without CUDA graphs\n",
                c->device, cudaGetErrorString(e));
        c->graphs_off = 1;
        return -1;
    }
    c->capturing = 1;
    return 0;
}

static int cu_graph_end(nn_backend_t *be, uint64_t key) {
    cu_ctx_t *c = CTX(be);
    if (!c->capturing) return -1;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ex = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    c->capturing = 0;
    char why[800];
    why[0] = 0;
    if (c->failed) snprintf(why, sizeof why, "%s", c->err);
    else if (e != cudaSuccess || !g) snprintf(why, sizeof why, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
    else if ((e = cudaGraphInstantiate(&ex, g, 0)) != cudaSuccess)
        snprintf(why, sizeof why, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
    if (g) (void)cudaGraphDestroy(g);
    if (why[0]) { /* nothing ran: the instance is as it was before graph_begin */
        if (ex) (void)cudaGraphExecDestroy(ex);
        (void)cudaGetLastError();
        c->failed = 0;
        c->err[0] = 0;
        c->graphs_off = 1;
        fprintf(stderr, "koma cuda (device %d): recording a forward failed (%s); this instance runs without CUDA graphs\n",
                c->device, why);
        return -1;
    }
    for (int i = 0; i < CU_GRAPHS; i++) /* an older recording of key goes */
        if (c->graphs[i].exec && c->graphs[i].key == key) graph_drop(c, i);
    int slot = 0; /* an empty slot (used 0), else the least recently used */
    for (int i = 1; i < CU_GRAPHS; i++)
        if (c->graphs[i].used < c->graphs[slot].used) slot = i;
    graph_drop(c, slot);
    c->graphs[slot].key = key;
    c->graphs[slot].exec = ex;
    c->graphs[slot].gen = c->ws_gen;
    c->graphs[slot].used = ++c->graph_tick;
    return 0;
}

static int cu_graph_launch(nn_backend_t *be, uint64_t key) {
    cu_ctx_t *c = CTX(be);
    if (c->graphs_off || c->capturing || c->failed || nn_fault_armed()) return 1;
    for (int i = 0; i < CU_GRAPHS; i++) {
        if (!c->graphs[i].exec || c->graphs[i].key != key) continue;
        if (c->graphs[i].gen != c->ws_gen) { /* recorded with a workspace since freed */
            graph_drop(c, i);
            return 1;
        }
        if (!cu_enter(c, "graph_launch")) return 0;
        c->graphs[i].used = ++c->graph_tick;
        CUDA_CHECK(c, cudaGraphLaunch(c->graphs[i].exec, c->stream));
        return 0;
    }
    return 1;
}

static void cu_destroy(cu_ctx_t *c);

static void cu_free(nn_backend_t *be) {
    if (!be) return;
    if (be->ctx) cu_destroy(CTX(be));
    free(be);
}

static const char *cu_error(nn_backend_t *be) {
    const cu_ctx_t *c = CTX(be);
    return c->failed ? c->err : NULL;
}

static void *cu_buf_alloc(nn_backend_t *be, size_t bytes) {
    cu_ctx_t *c = CTX(be);
    if (c->failed || nn_fault_hit("buf_alloc") == NN_FAULT_FAIL || cudaSetDevice(c->device) != cudaSuccess) return NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256); /* 256-byte aligned */
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is the caller's to report, not sticky */
        return NULL;
    }
    return p;
}

static void cu_buf_free(nn_backend_t *be, void *p) {
    if (!p) return;
    cu_ctx_t *c = CTX(be);
    /* cudaFree waits for the device: safe even while our stream still uses p */
    if (cudaSetDevice(c->device) == cudaSuccess) CUDA_CHECK(c, cudaFree(p));
}

/* Host bytes go through pinned staging (two halves): the caller may reuse its
 * memory as soon as upload returns, and the copy stays asynchronous. We wait
 * only when returning to a half whose previous copies are still queued. */
static void cu_upload(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    cu_ctx_t *c = CTX(be);
    if (!bytes || !cu_enter(c, "upload")) return;
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    while (bytes) {
        size_t chunk = bytes < CU_STAGE_HALF ? bytes : CU_STAGE_HALF;
        if (c->up_off + chunk > CU_STAGE_HALF) {
            if (!CUDA_CHECK(c, cudaEventRecord(c->up_ev[c->up_cur], c->stream))) return;
            c->up_cur ^= 1;
            c->up_off = 0;
            if (!CUDA_CHECK(c, cudaEventSynchronize(c->up_ev[c->up_cur]))) return;
        }
        unsigned char *h = c->up_host + (size_t)c->up_cur * CU_STAGE_HALF + c->up_off;
        memcpy(h, s, chunk);
        if (!CUDA_CHECK(c, cudaMemcpyAsync(d, h, chunk, cudaMemcpyHostToDevice, c->stream))) return;
        c->up_off += (chunk + 255) & ~(size_t)255;
        s += chunk;
        d += chunk;
        bytes -= chunk;
    }
}

/* Waits for everything queued before it. Pinned destinations are copied into
 * directly; others through the double-buffered pinned staging. */
static void cu_download(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    cu_ctx_t *c = CTX(be);
    if (!bytes) return;
    if (!cu_enter(c, "download")) {
        memset(dst, 0xFF, bytes); /* NaN floats: a failed result never looks plausible */
        return;
    }
    cudaPointerAttributes attr;
    memset(&attr, 0, sizeof(attr));
    bool pinned = cudaPointerGetAttributes(&attr, dst) == cudaSuccess && attr.type == cudaMemoryTypeHost;
    (void)cudaGetLastError();
    bool ok = true;
    if (pinned) {
        ok = CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream)) &&
             CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    } else {
        size_t nch = (bytes + CU_STAGE_HALF - 1) / CU_STAGE_HALF;
        const unsigned char *s = (const unsigned char *)src;
        unsigned char *d = (unsigned char *)dst;
        for (size_t i = 0; ok && i <= nch; i++) {
            if (i < nch) { /* enqueue chunk i into half i&1 (its previous chunk is consumed) */
                size_t off = i * CU_STAGE_HALF, len = bytes - off < CU_STAGE_HALF ? bytes - off : CU_STAGE_HALF;
                unsigned char *h = c->down_host + (i & 1) * (size_t)CU_STAGE_HALF;
                ok = CUDA_CHECK(c, cudaMemcpyAsync(h, s + off, len, cudaMemcpyDeviceToHost, c->stream)) &&
                     CUDA_CHECK(c, cudaEventRecord(c->down_ev[i & 1], c->stream));
            }
            if (ok && i > 0) { /* consume chunk i-1 */
                size_t j = i - 1, off = j * CU_STAGE_HALF;
                size_t len = bytes - off < CU_STAGE_HALF ? bytes - off : CU_STAGE_HALF;
                ok = CUDA_CHECK(c, cudaEventSynchronize(c->down_ev[j & 1]));
                if (ok) memcpy(d + off, c->down_host + (j & 1) * (size_t)CU_STAGE_HALF, len);
            }
        }
    }
    if (!ok) memset(dst, 0xFF, bytes);
}

/* dst: page-locked (cu_host_alloc). Only enqueued; valid after cu_sync. */
static void cu_download_async(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    cu_ctx_t *c = CTX(be);
    if (!bytes) return;
    if (!cu_enter(c, "download_async")) {
        memset(dst, 0xFF, bytes); /* nothing of ours is queued into dst after a failure */
        return;
    }
    CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
}

/* NULL when out of page-locked memory: the caller falls back or reports it. */
static void *cu_host_alloc(nn_backend_t *be, size_t bytes) {
    cu_ctx_t *c = CTX(be);
    void *p = NULL;
    if (cudaSetDevice(c->device) != cudaSuccess ||
        cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: nothing of the instance failed */
        return NULL;
    }
    return p;
}

static void cu_host_free(nn_backend_t *be, void *p) {
    (void)be;
    if (p) (void)cudaFreeHost(p); /* waits for the copies into p */
}

static void cu_memset_zero(nn_backend_t *be, void *dst, size_t bytes) {
    cu_ctx_t *c = CTX(be);
    if (!bytes || !cu_enter(c, "memset_zero")) return;
    CUDA_CHECK(c, cudaMemsetAsync(dst, 0, bytes, c->stream));
}

/* memmove semantics (overlapping ranges are copied in non-overlapping chunks). */
static void cu_copy(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    cu_ctx_t *c = CTX(be);
    if (!bytes || dst == src || !cu_enter(c, "copy")) return;
    uintptr_t a = (uintptr_t)dst, b = (uintptr_t)src;
    size_t gap = a > b ? a - b : b - a;
    char *d = (char *)dst;
    const char *s = (const char *)src;
    if (gap >= bytes) {
        CUDA_CHECK(c, cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, c->stream));
    } else if (a < b) {
        for (size_t off = 0; off < bytes; off += gap) {
            size_t len = bytes - off < gap ? bytes - off : gap;
            if (!CUDA_CHECK(c, cudaMemcpyAsync(d + off, s + off, len, cudaMemcpyDeviceToDevice, c->stream))) return;
        }
    } else {
        for (size_t end = bytes; end > 0;) {
            size_t len = end < gap ? end : gap;
            end -= len;
            if (!CUDA_CHECK(c, cudaMemcpyAsync(d + end, s + end, len, cudaMemcpyDeviceToDevice, c->stream))) return;
        }
    }
}

/* One cudaMemcpy2DAsync: a channel slice of an NCHW tensor in one call, not B. */
static void cu_copy_2d(nn_backend_t *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                       size_t rows) {
    cu_ctx_t *c = CTX(be);
    if (!width || !rows || !cu_enter(c, "copy_2d")) return;
    CUDA_CHECK(c, cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, c->stream));
}

static void cu_sync(nn_backend_t *be) {
    cu_ctx_t *c = CTX(be);
    if (!cu_enter(c, "sync")) return;
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
}

/* Fences: events on the stream; a wait blocks for the work before the mark only. */
static void cu_fence_record(nn_backend_t *be, int32_t i) {
    cu_ctx_t *c = CTX(be);
    if (i < 0 || i >= NN_FENCE_NB || !cu_enter(c, "fence_record")) return;
    CUDA_CHECK(c, cudaEventRecord(c->fence[i], c->stream));
}
static void cu_fence_wait(nn_backend_t *be, int32_t i) {
    cu_ctx_t *c = CTX(be);
    if (i < 0 || i >= NN_FENCE_NB || !cu_enter(c, "fence_wait")) return;
    CUDA_CHECK(c, cudaEventSynchronize(c->fence[i]));
}

/* ---- input ------------------------------------------------------------------------- */
static void cu_expand_planes(nn_backend_t *be, const uint8_t *packed, const float *hand, int32_t B,
                             int32_t planes, int32_t in_hand, float *out) {
    cu_ctx_t *c = CTX(be);
    int64_t n = (int64_t)B * (planes + in_hand) * NN_HW;
    if (B <= 0 || n <= 0 || !cu_enter(c, "expand_planes")) return;
    k_expand_planes<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(packed, in_hand ? hand : NULL, B, planes,
                                                               in_hand, nn_packed_bytes(planes), out);
    LAUNCH_CHECK(c, "k_expand_planes");
}

/* ---- convolution --------------------------------------------------------------------- */
static cudnnDataType_t conv_dtype(const cu_ctx_t *c) { return c->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }

/* The math type a descriptor starts with (and is forced to without TF32). */
static cudnnMathType_t conv_base_math(const cu_ctx_t *c) {
    if (c->bf16) return CUDNN_TENSOR_OP_MATH;
    return c->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

static void plan_destroy_desc(cu_plan_t *p) {
    if (p->xd) cudnnDestroyTensorDescriptor(p->xd);
    if (p->yd) cudnnDestroyTensorDescriptor(p->yd);
    if (p->wd) cudnnDestroyFilterDescriptor(p->wd);
    for (int d = 0; d < DIR_NB; d++)
        if (p->cd[d]) cudnnDestroyConvolutionDescriptor(p->cd[d]);
}

/* Descriptors of (B, cin, cout, k) in p (zeroed by the caller). */
static bool plan_make_desc(cu_ctx_t *c, cu_plan_t *p, int B, int cin, int cout, int k) {
    cudnnDataType_t dt = conv_dtype(c);
    p->B = B;
    p->cin = cin;
    p->cout = cout;
    p->k = k;
    if (!CUDNN_CHECK(c, cudnnCreateTensorDescriptor(&p->xd)) || !CUDNN_CHECK(c, cudnnCreateTensorDescriptor(&p->yd)) ||
        !CUDNN_CHECK(c, cudnnCreateFilterDescriptor(&p->wd)))
        return false;
    /* BF16 with channels in multiples of 8: the staged copies are NHWC / KRSC (to_bf16) */
    p->nhwc = c->bf16 && cin % 8 == 0 && cout % 8 == 0;
    cudnnTensorFormat_t fmt = p->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    if (!CUDNN_CHECK(c, cudnnSetTensor4dDescriptor(p->xd, fmt, dt, B, cin, NN_SIDE, NN_SIDE)) ||
        !CUDNN_CHECK(c, cudnnSetTensor4dDescriptor(p->yd, fmt, dt, B, cout, NN_SIDE, NN_SIDE)) ||
        !CUDNN_CHECK(c, cudnnSetFilter4dDescriptor(p->wd, dt, fmt, cout, cin, k, k)))
        return false;
    for (int d = 0; d < DIR_NB; d++) {
        if (!CUDNN_CHECK(c, cudnnCreateConvolutionDescriptor(&p->cd[d])) ||
            !CUDNN_CHECK(c, cudnnSetConvolution2dDescriptor(p->cd[d], k / 2, k / 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                            CUDNN_DATA_FLOAT)) ||
            !CUDNN_CHECK(c, cudnnSetConvolutionMathType(p->cd[d], conv_base_math(c))))
            return false;
    }
    return true;
}

/* Appends the usable results of a Find/Get call to out (ranked by cuDNN).
 * BF16 backward passes take deterministic algorithms only: the others add
 * partial sums with atomics into the BF16 output, rounding at every add. On an
 * H100 (cuDNN 9.14) the one cudnnFind chose for dw of B64 64->64 k3 was off by
 * 4.9 (8%) on an element of 58, 30 times the error of BF16 inputs. */
static bool conv_det(const cu_ctx_t *c, int dir) { return c->det || (c->bf16 && dir != DIR_FWD); }

template <typename Perf>
static int take_perf(const cu_ctx_t *c, int dir, const Perf *perf, int n, cu_cand_t *out) {
    bool det = conv_det(c, dir);
    int m = 0;
    for (int i = 0; i < n && m < CU_MAX_CANDS; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (det && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
        if (perf[i].memory > CU_WS_CAP) continue;
        out[m].algo = (int)perf[i].algo;
        out[m].math = perf[i].mathType;
        m++;
    }
    return m;
}

/* Ranked candidates for direction dir of the shape described by p: timed
 * (cudnnFind*, synchronises) or from the heuristics (cudnnGet*_v7). */
static int conv_candidates(cu_ctx_t *c, cu_plan_t *p, int dir, bool timed, cu_cand_t *out) {
    int got = 0, n = 0;
    cudnnHandle_t h = c->cudnn;
    cudnnStatus_t s;
    const char *what;
    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        what = timed ? "cudnnFindConvolutionForwardAlgorithm" : "cudnnGetConvolutionForwardAlgorithm_v7";
        s = timed ? cudnnFindConvolutionForwardAlgorithm(h, p->xd, p->wd, p->cd[dir], p->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                         &got, perf)
                  : cudnnGetConvolutionForwardAlgorithm_v7(h, p->xd, p->wd, p->cd[dir], p->yd,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf);
        if (s == CUDNN_STATUS_SUCCESS) n = take_perf(c, dir, perf, got, out);
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        what = timed ? "cudnnFindConvolutionBackwardDataAlgorithm" : "cudnnGetConvolutionBackwardDataAlgorithm_v7";
        s = timed ? cudnnFindConvolutionBackwardDataAlgorithm(h, p->wd, p->yd, p->cd[dir], p->xd,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf)
                  : cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->wd, p->yd, p->cd[dir], p->xd,
                                                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf);
        if (s == CUDNN_STATUS_SUCCESS) n = take_perf(c, dir, perf, got, out);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        what = timed ? "cudnnFindConvolutionBackwardFilterAlgorithm" : "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
        s = timed ? cudnnFindConvolutionBackwardFilterAlgorithm(h, p->xd, p->yd, p->cd[dir], p->wd,
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf)
                  : cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->xd, p->yd, p->cd[dir], p->wd,
                                                                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf);
        if (s == CUDNN_STATUS_SUCCESS) n = take_perf(c, dir, perf, got, out);
    }
    if (s == CUDNN_STATUS_SUCCESS) return n;
    /* Timing may fail for want of memory for its trial buffers: not fatal, the
     * caller falls back to the heuristics. The heuristics failing is. */
    (void)cudaGetLastError(); /* a failed allocation inside cuDNN must not be blamed on our next launch */
    if (timed) {
        fprintf(stderr, "koma cuda (device %d): %s for conv B=%d cin=%d cout=%d k=%d: %s; using cuDNN's heuristics\n",
                c->device, what, p->B, p->cin, p->cout, p->k, cudnnGetErrorString(s));
        return 0;
    }
    ok_cudnn(c, s, what, __FILE__, __LINE__);
    return -1;
}

/* Workspace of algorithm cand for direction dir on p's exact shape, with the
 * math type set on p->cd[dir]; false (no error recorded) if unsupported. */
static bool conv_try(cu_ctx_t *c, cu_plan_t *p, int dir, cu_cand_t cand, size_t *ws) {
    /* FP32 without TF32: never an algorithm that cuDNN runs on tensor cores */
    if (!c->tf32 && !c->bf16 && (cand.math == CUDNN_TENSOR_OP_MATH || cand.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
        return false;
    cudnnMathType_t math = (c->bf16 || c->tf32) ? cand.math : CUDNN_FMA_MATH;
    if (cudnnSetConvolutionMathType(p->cd[dir], math) != CUDNN_STATUS_SUCCESS) return false;
    cudnnStatus_t s;
    if (dir == DIR_FWD)
        s = cudnnGetConvolutionForwardWorkspaceSize(c->cudnn, p->xd, p->wd, p->cd[dir], p->yd,
                                                    (cudnnConvolutionFwdAlgo_t)cand.algo, ws);
    else if (dir == DIR_BWD_DATA)
        s = cudnnGetConvolutionBackwardDataWorkspaceSize(c->cudnn, p->wd, p->yd, p->cd[dir], p->xd,
                                                         (cudnnConvolutionBwdDataAlgo_t)cand.algo, ws);
    else
        s = cudnnGetConvolutionBackwardFilterWorkspaceSize(c->cudnn, p->xd, p->yd, p->cd[dir], p->wd,
                                                           (cudnnConvolutionBwdFilterAlgo_t)cand.algo, ws);
    return s == CUDNN_STATUS_SUCCESS && *ws <= CU_WS_CAP;
}

static int bucket_batch(int B) {
    int b = 1;
    while (b < B && b < (1 << 20)) b <<= 1;
    return b < B ? B : b;
}

/* Candidates for the bucket of p's shape, from the process-wide cache or
 * computed now (timed on a bucket-sized shape). Returns the count, -1 on error. */
static int bucket_candidates(cu_ctx_t *c, cu_plan_t *p, int dir, cu_cand_t *out) {
    int Bb = bucket_batch(p->B);
    std::lock_guard<std::mutex> lock(g_algo_mu);
    for (cu_algo_set_t *s = g_algo_sets; s; s = s->next)
        if (s->device == c->device && s->B == Bb && s->cin == p->cin && s->cout == p->cout && s->k == p->k &&
            s->bf16 == c->bf16 && s->tf32 == c->tf32 && s->det == c->det && s->dir == dir) {
            memcpy(out, s->c, sizeof(cu_cand_t) * (size_t)s->n);
            return s->n;
        }
    cu_plan_t tmp;
    memset(&tmp, 0, sizeof(tmp));
    int n = -1;
    if (plan_make_desc(c, &tmp, Bb, p->cin, p->cout, p->k)) n = conv_candidates(c, &tmp, dir, true, out);
    plan_destroy_desc(&tmp);
    if (n < 0) return -1;
    cu_algo_set_t *s = (cu_algo_set_t *)calloc(1, sizeof(*s));
    if (s) {
        s->device = c->device, s->B = Bb, s->cin = p->cin, s->cout = p->cout, s->k = p->k;
        s->bf16 = c->bf16, s->tf32 = c->tf32, s->det = c->det, s->dir = dir, s->n = n;
        memcpy(s->c, out, sizeof(cu_cand_t) * (size_t)n);
        s->next = g_algo_sets;
        g_algo_sets = s;
    }
    return n;
}

/* The plan of an exact shape with direction dir ready (algorithm chosen, the
 * instance's cuDNN workspace large enough); NULL after recording an error. */
static cu_plan_t *conv_plan(cu_ctx_t *c, int B, int cin, int cout, int k, int dir) {
    if (k != 1 && k != 3) {
        cu_fail(c, __FILE__, __LINE__, "conv kernel size %d: only 1 and 3 are supported", k);
        return NULL;
    }
    uint64_t hsh = ((uint64_t)B * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)cin * 0xC2B2AE3D27D4EB4Full) ^
                   ((uint64_t)cout * 0x165667B19E3779F9ull) ^ (uint64_t)k;
    hsh ^= hsh >> 29;
    cu_plan_t **slot = &c->plans[hsh % CU_PLAN_BUCKETS], *p = *slot;
    while (p && !(p->B == B && p->cin == cin && p->cout == cout && p->k == k)) p = p->next;
    if (!p) {
        p = (cu_plan_t *)calloc(1, sizeof(*p));
        if (!p) {
            cu_fail(c, __FILE__, __LINE__, "out of host memory for a conv plan");
            return NULL;
        }
        if (!plan_make_desc(c, p, B, cin, cout, k)) {
            plan_destroy_desc(p);
            free(p);
            return NULL;
        }
        p->next = *slot;
        *slot = p;
    }
    if (p->ready[dir]) return p;
    cu_cand_t cand[CU_MAX_CANDS];
    int n = c->heuristic ? conv_candidates(c, p, dir, false, cand) : bucket_candidates(c, p, dir, cand);
    if (n < 0) return NULL;
    size_t ws = 0;
    int chosen = -1;
    for (int i = 0; i < n && chosen < 0; i++)
        if (conv_try(c, p, dir, cand[i], &ws)) chosen = i;
    if (chosen < 0) { /* nothing from the bucket fits this exact shape: heuristics on it */
        n = c->heuristic ? 0 : conv_candidates(c, p, dir, false, cand);
        if (n < 0) return NULL;
        for (int i = 0; i < n && chosen < 0; i++)
            if (conv_try(c, p, dir, cand[i], &ws)) chosen = i;
    }
    if (chosen < 0) {
        cu_fail(c, __FILE__, __LINE__,
                "no cuDNN %s algorithm for conv B=%d cin=%d cout=%d k=%d (%s%s); hint: %s", dir_name[dir], B, cin, cout, k,
                c->bf16 ? "bf16" : c->tf32 ? "fp32/tf32" : "fp32",
                conv_det(c, dir) ? ", deterministic" : "",
                c->det ? "retry without NN_CUDA_DETERMINISTIC"
                : c->bf16 && dir != DIR_FWD ? "train in fp32/tf32 (bf16 backward passes need a deterministic algorithm)"
                                            : "check the cuDNN installation");
        return NULL;
    }
    if (!dbuf_ensure(c, &c->cws, ws)) return NULL;
    p->algo[dir] = cand[chosen].algo;
    p->ws[dir] = ws;
    p->ready[dir] = 1;
    return p;
}

/* BF16 copies of x (B, cin, 81), w (cout, cin, k, k) and y (B, cout, 81). */
typedef struct {
    __nv_bfloat16 *x, *w, *y;
} cu_stage_t;

static size_t al256(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t stage_bytes(int B, int cin, int cout, int k) {
    return al256(sizeof(__nv_bfloat16) * (size_t)B * cin * NN_HW) + al256(sizeof(__nv_bfloat16) * (size_t)cout * cin * k * k) +
           al256(sizeof(__nv_bfloat16) * (size_t)B * cout * NN_HW);
}

static bool stage_get(cu_ctx_t *c, void *ws, int B, int cin, int cout, int k, cu_stage_t *st) {
    char *base = (char *)ws;
    if (!base) { /* defensive: caller gave no workspace */
        if (!dbuf_ensure(c, &c->stage, stage_bytes(B, cin, cout, k))) return false;
        base = (char *)c->stage.p;
    }
    base = (char *)(((uintptr_t)base + 255) & ~(uintptr_t)255); /* ws is 64-aligned; we reserved slack */
    st->x = (__nv_bfloat16 *)base;
    base += al256(sizeof(__nv_bfloat16) * (size_t)B * cin * NN_HW);
    st->w = (__nv_bfloat16 *)base;
    base += al256(sizeof(__nv_bfloat16) * (size_t)cout * cin * k * k);
    st->y = (__nv_bfloat16 *)base;
    return true;
}

/* (B, R, S) -> (B, S, R) bf16, from float or bf16 (k_to_bf_t) */
template <typename T>
static bool transpose_bf(cu_ctx_t *c, const T *x, __nv_bfloat16 *y, int B, int R, int S) {
    dim3 blk(CU_TILE, 8);
    for (int b0 = 0; b0 < B; b0 += 65535) { /* gridDim.z's limit */
        int nb = B - b0 < 65535 ? B - b0 : 65535;
        int64_t off = (int64_t)b0 * R * S;
        k_to_bf_t<T><<<dim3((S + CU_TILE - 1) / CU_TILE, (R + CU_TILE - 1) / CU_TILE, nb), blk, 0, c->stream>>>(
            x + off, y + off, R, S);
        if (!LAUNCH_CHECK(c, "k_to_bf_t")) return false;
    }
    return true;
}

/* (B, R, S) float -> bf16, as (B, S, R) where nhwc: NCHW activations (R = C,
 * S = 81) to NHWC, KCRS filters (B = cout, R = cin, S = k*k) to KRSC. */
static bool to_bf16(cu_ctx_t *c, const float *x, __nv_bfloat16 *y, int B, int R, int S, int nhwc) {
    if (!nhwc) {
        int64_t n = (int64_t)B * R * S;
        k_f2bf<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(x, y, n);
        return LAUNCH_CHECK(c, "k_f2bf");
    }
    return transpose_bf(c, x, y, B, R, S);
}

/* The way back: (B, S, R) bf16 -> (B, R, S) float, + bias[r] or += */
static bool from_bf16(cu_ctx_t *c, const __nv_bfloat16 *x, float *y, int B, int R, int S, const float *bias,
                      int accumulate, int nhwc) {
    if (!nhwc) { /* bias is per R (channel) of an NCHW tensor, S = NN_HW */
        int64_t n = (int64_t)B * R * S;
        IDX_LAUNCH(k_bf2f, n, x, y, n, bias, R, accumulate);
        return LAUNCH_CHECK(c, "k_bf2f");
    }
    dim3 blk(CU_TILE, 8);
    for (int b0 = 0; b0 < B; b0 += 65535) {
        int nb = B - b0 < 65535 ? B - b0 : 65535;
        int64_t off = (int64_t)b0 * R * S;
        k_bf2f_t<<<dim3((S + CU_TILE - 1) / CU_TILE, (R + CU_TILE - 1) / CU_TILE, nb), blk, 0, c->stream>>>(
            x + off, y + off, R, S, bias, accumulate);
        if (!LAUNCH_CHECK(c, "k_bf2f_t")) return false;
    }
    return true;
}

static size_t cu_conv_ws_bytes(nn_backend_t *be, int32_t B, int32_t cin, int32_t cout, int32_t k) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || cin <= 0 || cout <= 0) return 0;
    /* choose the forward algorithm of the largest batch now, at setup time */
    if (cu_enter(c, "conv_ws_bytes")) (void)conv_plan(c, B, cin, cout, k, DIR_FWD);
    return c->bf16 ? stage_bytes(B, cin, cout, k) + 256 : 0;
}

static void cu_conv_fwd(nn_backend_t *be, const float *x, const float *w, const float *bias, int32_t B,
                        int32_t cin, int32_t cout, int32_t k, float *y, void *ws) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || !cu_enter(c, "conv_fwd")) return;
    cu_plan_t *p = conv_plan(c, B, cin, cout, k, DIR_FWD);
    if (!p) return;
    const float one = 1.0f, zero = 0.0f;
    cudnnConvolutionFwdAlgo_t algo = (cudnnConvolutionFwdAlgo_t)p->algo[DIR_FWD];
    int64_t ny = (int64_t)B * cout * NN_HW;
    cu_mark(c, "conv_fwd.cudnn");
    if (!c->bf16) {
        if (!CUDNN_CHECK(c, cudnnConvolutionForward(c->cudnn, &one, p->xd, x, p->wd, w, p->cd[DIR_FWD], algo, c->cws.p,
                                                    p->ws[DIR_FWD], &zero, p->yd, y)))
            return;
        cu_mark(c, "conv_fwd.bias");
        if (bias) {
            IDX_LAUNCH(k_bias_nchw, ny, y, bias, (int64_t)B * cout, cout);
            if (!LAUNCH_CHECK(c, "k_bias_nchw")) return;
        }
        cu_poison(c, y, ny);
        return;
    }
    cu_stage_t st;
    if (!stage_get(c, ws, B, cin, cout, k, &st) || !to_bf16(c, x, st.x, B, cin, NN_HW, p->nhwc) ||
        !to_bf16(c, w, st.w, cout, cin, k * k, p->nhwc))
        return;
    cu_mark(c, "conv_fwd.cudnn");
    if (!CUDNN_CHECK(c, cudnnConvolutionForward(c->cudnn, &one, p->xd, st.x, p->wd, st.w, p->cd[DIR_FWD], algo, c->cws.p,
                                                p->ws[DIR_FWD], &zero, p->yd, st.y)))
        return;
    cu_mark(c, "conv_fwd.from_bf16");
    if (from_bf16(c, st.y, y, B, cout, NN_HW, bias, 0, p->nhwc)) cu_poison(c, y, ny);
}

static void cu_act_fwd(nn_backend_t *be, const float *x, const float *res, int64_t n, nn_act_t act, float *y);

/* The backend's native activation layout (NN_CONV_*_NATIVE) for a tensor of
 * C channels: BF16 NHWC where the instance runs BF16 and C % 8 == 0 (the
 * layout cuDNN's tensor-core kernels read and write, in the first half of the
 * bytes of the float NCHW tensor it stands for), else float NCHW. */
static bool native_bf16(const cu_ctx_t *c, int C) { return c->bf16 && C % 8 == 0; }

/* FP32 / TF32: y = act(conv(x, w) + bias + res) in one cuDNN call, where cuDNN
 * takes the shape (ReLU; the identity only with IMPLICIT_PRECOMP_GEMM). Returns
 * false, with no error recorded, where it does not: the caller runs the two ops. */
static bool fused_fp32(cu_ctx_t *c, cu_plan_t *p, const float *x, const float *w, const float *bias,
                       const float *res, int cout, int act, float *y) {
    cudnnConvolutionFwdAlgo_t algo = (cudnnConvolutionFwdAlgo_t)p->algo[DIR_FWD];
    if (p->unfused || !bias || (act != NN_ACT_RELU && act >= 0) ||
        (act < 0 && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM))
        return false;
    if (!CUDNN_CHECK(c, cudnnSetTensor4dDescriptor(c->biasd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, cout, 1, 1)))
        return true; /* error recorded */
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
        c->cudnn, &one, p->xd, x, p->wd, w, p->cd[DIR_FWD], algo, c->cws.p, p->ws[DIR_FWD], res ? &one : &zero, p->yd,
        res ? (const void *)res : (const void *)y, c->biasd, bias, act < 0 ? c->act_id : c->act_relu, p->yd, y);
    if (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM) {
        fprintf(stderr, "koma cuda (device %d): cudnnConvolutionBiasActivationForward: %s for conv B=%d cin=%d cout=%d k=%d; "
                        "that shape runs unfused\n", c->device, cudnnGetErrorString(st), p->B, p->cin, p->cout, p->k);
        p->unfused = 1;
        (void)cudaGetLastError();
        return false;
    }
    ok_cudnn(c, st, "cudnnConvolutionBiasActivationForward", __FILE__, __LINE__);
    return true;
}

/* Inference's fused unit (nn/backend.h). FP32 / TF32: NCHW float throughout,
 * cuDNN's conv + bias + residual + ReLU in one call (fused_fp32). BF16: the
 * activations between units stay BF16 NHWC (native_bf16), so a trunk conv
 * reads its input as cuDNN wants it and writes its output in place for one
 * epilogue kernel (bias, residual, activation): no float round trip and no
 * transposes inside the trunk; only the ends (the stem's 82 planes, heads with
 * fewer than 8 or not a multiple of 8 channels, float outputs) convert. */
static void cu_conv_fwd_act(nn_backend_t *be, const float *x, const float *w, const float *bias, const float *res,
                            int32_t B, int32_t cin, int32_t cout, int32_t k, nn_act_t act_in, float *y, void *ws,
                            int32_t flags) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || !cu_enter(c, "conv_fwd")) return; /* the unit counts as its convolution (KOMA_FAULT), as on the CPU */
    int act = (flags & NN_CONV_NO_ACT) ? -1 : (int)act_in;
    int64_t ny = (int64_t)B * cout * NN_HW;
    int poison = c->poison; /* an injected NaN goes into the unit's output, after its activation */
    c->poison = 0;
    cu_plan_t *p = conv_plan(c, B, cin, cout, k, DIR_FWD);
    if (!p) return;
    if (!c->bf16) {
        cu_mark(c, "conv_fwd_act.cudnn_fused");
        if (!fused_fp32(c, p, x, w, bias, res, cout, act, y)) {
            c->mute = 1;
            cu_conv_fwd(be, x, w, bias, B, cin, cout, k, y, ws);
            if (act >= 0) cu_act_fwd(be, y, res, ny, (nn_act_t)act, y);
            c->mute = 0;
        }
        c->poison = poison;
        cu_poison(c, y, ny);
        return;
    }
    bool xn = (flags & NN_CONV_X_NATIVE) && native_bf16(c, cin);
    bool yn = (flags & NN_CONV_Y_NATIVE) && native_bf16(c, cout);
    cu_stage_t st;
    if (!stage_get(c, ws, B, cin, cout, k, &st)) return;
    cu_mark(c, "conv_fwd_act.to_bf16");
    const __nv_bfloat16 *xs = st.x;
    if (xn && p->nhwc) xs = (const __nv_bfloat16 *)x; /* as cuDNN reads it */
    else if (xn && !transpose_bf(c, (const __nv_bfloat16 *)x, st.x, B, NN_HW, cin)) return; /* NHWC -> NCHW */
    else if (!xn && !to_bf16(c, x, st.x, B, cin, NN_HW, p->nhwc)) return;
    if (!to_bf16(c, w, st.w, cout, cin, k * k, p->nhwc)) return;
    __nv_bfloat16 *yb = yn && p->nhwc ? (__nv_bfloat16 *)y : st.y;
    const float one = 1.0f, zero = 0.0f;
    cu_mark(c, "conv_fwd_act.cudnn");
    if (!CUDNN_CHECK(c, cudnnConvolutionForward(c->cudnn, &one, p->xd, xs, p->wd, st.w, p->cd[DIR_FWD],
                                                (cudnnConvolutionFwdAlgo_t)p->algo[DIR_FWD], c->cws.p, p->ws[DIR_FWD],
                                                &zero, p->yd, yb)))
        return;
    cu_mark(c, "conv_fwd_act.epilogue");
    if (yn) {
        if (!p->nhwc && !transpose_bf(c, (const __nv_bfloat16 *)st.y, (__nv_bfloat16 *)y, B, cout, NN_HW)) return; /* NCHW -> NHWC */
        if (cout % 8 == 0 && ((uintptr_t)y | (uintptr_t)res) % 16 == 0)
            IDX_LAUNCH(k_epi_nhwc8, ny / 8, (__nv_bfloat16 *)y, bias, (const __nv_bfloat16 *)res, ny / 8, cout / 8, act);
        else
            IDX_LAUNCH(k_epi_nhwc, ny, (__nv_bfloat16 *)y, bias, (const __nv_bfloat16 *)res, ny, cout, act);
        if (LAUNCH_CHECK(c, "k_epi_nhwc") && poison) /* the fault's NaN, in y's own type */
            CUDA_CHECK(c, cudaMemsetAsync(y, 0xFF, sizeof(__nv_bfloat16) * (size_t)ny, c->stream));
        return;
    }
    if (!from_bf16(c, st.y, y, B, cout, NN_HW, bias, 0, p->nhwc)) return;
    if (act >= 0) { /* res, if any, is float NCHW like y */
        k_act_fwd<<<cu_grid(c, ny), CU_THREADS, 0, c->stream>>>(y, res, ny, act, y);
        if (!LAUNCH_CHECK(c, "k_act_fwd")) return;
    }
    c->poison = poison;
    cu_poison(c, y, ny);
}

static void cu_conv_bwd_data(nn_backend_t *be, const float *dy, const float *w, int32_t B, int32_t cin,
                             int32_t cout, int32_t k, float *dx, int32_t accumulate, void *ws) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || !cu_enter(c, "conv_bwd_data")) return;
    cu_plan_t *p = conv_plan(c, B, cin, cout, k, DIR_BWD_DATA);
    if (!p) return;
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f, zero = 0.0f;
    cudnnConvolutionBwdDataAlgo_t algo = (cudnnConvolutionBwdDataAlgo_t)p->algo[DIR_BWD_DATA];
    cu_mark(c, "conv_bwd_data.cudnn");
    if (!c->bf16) {
        CUDNN_CHECK(c, cudnnConvolutionBackwardData(c->cudnn, &one, p->wd, w, p->yd, dy, p->cd[DIR_BWD_DATA], algo, c->cws.p,
                                                    p->ws[DIR_BWD_DATA], &beta, p->xd, dx));
        return;
    }
    cu_stage_t st; /* dy -> st.y, w -> st.w, dx <- st.x */
    if (!stage_get(c, ws, B, cin, cout, k, &st) || !to_bf16(c, dy, st.y, B, cout, NN_HW, p->nhwc) ||
        !to_bf16(c, w, st.w, cout, cin, k * k, p->nhwc))
        return;
    cu_mark(c, "conv_bwd_data.cudnn");
    if (!CUDNN_CHECK(c, cudnnConvolutionBackwardData(c->cudnn, &one, p->wd, st.w, p->yd, st.y, p->cd[DIR_BWD_DATA], algo,
                                                     c->cws.p, p->ws[DIR_BWD_DATA], &zero, p->xd, st.x)))
        return;
    cu_mark(c, "conv_bwd_data.from_bf16");
    from_bf16(c, st.x, dx, B, cin, NN_HW, NULL, accumulate, p->nhwc);
}

static void cu_conv_bwd_filter(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t cin,
                               int32_t cout, int32_t k, float *dw, float *dbias, void *ws) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || !cu_enter(c, "conv_bwd_filter")) return;
    cu_plan_t *p = conv_plan(c, B, cin, cout, k, DIR_BWD_FILTER);
    if (!p) return;
    const float one = 1.0f, zero = 0.0f;
    cudnnConvolutionBwdFilterAlgo_t algo = (cudnnConvolutionBwdFilterAlgo_t)p->algo[DIR_BWD_FILTER];
    cu_mark(c, "conv_bwd_filter.cudnn");
    if (!c->bf16) {
        if (!CUDNN_CHECK(c, cudnnConvolutionBackwardFilter(c->cudnn, &one, p->xd, x, p->yd, dy, p->cd[DIR_BWD_FILTER], algo,
                                                           c->cws.p, p->ws[DIR_BWD_FILTER], &zero, p->wd, dw)))
            return;
    } else {
        cu_stage_t st; /* x -> st.x, dy -> st.y, dw <- st.w */
        if (!stage_get(c, ws, B, cin, cout, k, &st) || !to_bf16(c, x, st.x, B, cin, NN_HW, p->nhwc) ||
            !to_bf16(c, dy, st.y, B, cout, NN_HW, p->nhwc))
            return;
        cu_mark(c, "conv_bwd_filter.cudnn");
        if (!CUDNN_CHECK(c, cudnnConvolutionBackwardFilter(c->cudnn, &one, p->xd, st.x, p->yd, st.y, p->cd[DIR_BWD_FILTER],
                                                           algo, c->cws.p, p->ws[DIR_BWD_FILTER], &zero, p->wd, st.w)))
            return;
        cu_mark(c, "conv_bwd_filter.from_bf16");
        if (!from_bf16(c, st.w, dw, cout, cin, k * k, NULL, 0, p->nhwc)) return;
    }
    if (dbias) {
        cu_mark(c, "conv_bwd_filter.dbias");
        k_channel_sum<<<cout, CU_CH_THREADS, 0, c->stream>>>(dy, B, cout, NN_HW, dbias);
        LAUNCH_CHECK(c, "k_channel_sum");
    }
}

/* ---- batch norm ----------------------------------------------------------------------- */
/* Partial blocks per channel for batch norm: as many as fit on the device in
 * one wave (C * P <= SMs x resident blocks per SM; rounding up, as before,
 * made 1152 blocks of 128 channels on 132 SMs: a second wave of 96 blocks that
 * took as long as the first), at least CU_BN_PER_BLOCK elements each, at most
 * one per batch row, and (2, C, P) partials + (2, C) results within c->red.
 * 0: too many channels. */
static int bn_parts(const cu_ctx_t *c, int32_t B, int32_t C, int32_t HW) {
    int64_t p = (int64_t)c->sm_count * c->bn_resident / C;
    int64_t by_n = ((int64_t)B * HW + CU_BN_PER_BLOCK - 1) / CU_BN_PER_BLOCK;
    int64_t by_red = CU_RED_N / (2 * (int64_t)C) - 1;
    if (p > by_n) p = by_n;
    if (p > B) p = B;
    if (p > by_red) p = by_red;
    return p < 1 ? (by_red < 1 ? 0 : 1) : (int)p;
}

/* The start of a batch-norm op: the op's entry (fault switch, timing), its
 * partial blocks per channel *P, and the per-channel results' place after
 * the partials in c->red; NULL when the op must not run. */
static float *bn_enter(cu_ctx_t *c, const char *op, int32_t B, int32_t C, int32_t HW, int *P) {
    if (B <= 0 || C <= 0 || HW <= 0 || !cu_enter(c, op)) return NULL;
    *P = bn_parts(c, B, C, HW);
    if (*P == 0) {
        cu_fail(c, __FILE__, __LINE__, "batch norm of %d channels: more than %d", C, CU_RED_N / 4);
        return NULL;
    }
    return (float *)(c->red + (int64_t)2 * C * *P);
}

/* bn_fwd_train (r = NULL, relu 0) and bn_relu_fwd_train (relu 1): the fault
 * switch and KOMA_CUDA_OPTIME count both as bn_fwd_train */
static void bn_fwd_impl(nn_backend_t *be, const float *x, const float *gamma, const float *beta, const float *r,
                        int relu, int32_t B, int32_t C, int32_t HW, float eps, float momentum, float *running_mean,
                        float *running_var, float *y, float *save_mean, float *save_invstd) {
    cu_ctx_t *c = CTX(be);
    int P;
    float *res = bn_enter(c, "bn_fwd_train", B, C, HW, &P);
    if (!res) return;
    k_bn_part_fwd<<<dim3(C, P), CU_THREADS, 0, c->stream>>>(x, B, C, HW, P, c->red);
    LAUNCH_CHECK(c, "k_bn_part_fwd");
    cu_mark(c, "bn_fwd_train.apply");
    k_bn_fin_fwd<<<(C + 127) / 128, 128, 0, c->stream>>>(c->red, x, gamma, B, C, HW, P, eps, momentum, running_mean,
                                                         running_var, save_mean, save_invstd, res);
    LAUNCH_CHECK(c, "k_bn_fin_fwd");
    IDX_LAUNCH(k_bn_apply_fwd, (int64_t)B * C * HW, x, beta, res, r, relu, (int64_t)B * C, C, HW, y);
    LAUNCH_CHECK(c, "k_bn_apply_fwd");
}

static void cu_bn_fwd_train(nn_backend_t *be, const float *x, const float *gamma, const float *beta, int32_t B,
                            int32_t C, int32_t HW, float eps, float momentum, float *running_mean,
                            float *running_var, float *y, float *save_mean, float *save_invstd) {
    bn_fwd_impl(be, x, gamma, beta, NULL, 0, B, C, HW, eps, momentum, running_mean, running_var, y, save_mean,
                save_invstd);
}

static void cu_bn_relu_fwd_train(nn_backend_t *be, const float *x, const float *gamma, const float *beta,
                                 const float *res, int32_t B, int32_t C, int32_t HW, float eps, float momentum,
                                 float *running_mean, float *running_var, float *y, float *save_mean,
                                 float *save_invstd) {
    bn_fwd_impl(be, x, gamma, beta, res, 1, B, C, HW, eps, momentum, running_mean, running_var, y, save_mean,
                save_invstd);
}

/* bn_bwd (y = NULL) and bn_relu_bwd: both count as bn_bwd */
static void bn_bwd_impl(nn_backend_t *be, const float *x, const float *y, const float *dy, const float *gamma,
                        const float *save_mean, const float *save_invstd, int32_t B, int32_t C, int32_t HW,
                        float *dres, float *dx, float *dgamma, float *dbeta) {
    cu_ctx_t *c = CTX(be);
    int P;
    float *res = bn_enter(c, "bn_bwd", B, C, HW, &P);
    if (!res) return;
    k_bn_part_bwd<<<dim3(C, P), CU_THREADS, 0, c->stream>>>(x, dy, y, save_mean, save_invstd, B, C, HW, P, c->red);
    LAUNCH_CHECK(c, "k_bn_part_bwd");
    cu_mark(c, "bn_bwd.apply");
    k_bn_fin_bwd<<<(C + 127) / 128, 128, 0, c->stream>>>(c->red, gamma, save_invstd, B, C, HW, P, dgamma, dbeta, res);
    LAUNCH_CHECK(c, "k_bn_fin_bwd");
    IDX_LAUNCH(k_bn_apply_bwd, (int64_t)B * C * HW, x, dy, y, save_mean, save_invstd, res, (int64_t)B * C, C, HW,
               dres, dx);
    LAUNCH_CHECK(c, "k_bn_apply_bwd");
}

static void cu_bn_bwd(nn_backend_t *be, const float *x, const float *dy, const float *gamma, const float *save_mean,
                      const float *save_invstd, int32_t B, int32_t C, int32_t HW, float *dx, float *dgamma,
                      float *dbeta) {
    bn_bwd_impl(be, x, NULL, dy, gamma, save_mean, save_invstd, B, C, HW, NULL, dx, dgamma, dbeta);
}

static void cu_bn_relu_bwd(nn_backend_t *be, const float *x, const float *y, float *dy, const float *gamma,
                           const float *save_mean, const float *save_invstd, int32_t B, int32_t C, int32_t HW,
                           float *dres, float *dx, float *dgamma, float *dbeta) {
    bn_bwd_impl(be, x, y, dy, gamma, save_mean, save_invstd, B, C, HW, dres, dx, dgamma, dbeta);
}

static void cu_bn_fold(nn_backend_t *be, const float *w, const float *gamma, const float *beta, const float *mean,
                       const float *var, int32_t cout, int32_t kdim, float eps, float *w_out, float *b_out) {
    cu_ctx_t *c = CTX(be);
    int64_t n = (int64_t)cout * kdim;
    if (n <= 0 || !cu_enter(c, "bn_fold")) return;
    k_bn_fold<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(w, gamma, beta, mean, var, cout, kdim, eps, w_out, b_out);
    LAUNCH_CHECK(c, "k_bn_fold");
}

/* ---- elementwise ------------------------------------------------------------------------ */
static void cu_act_fwd(nn_backend_t *be, const float *x, const float *res, int64_t n, nn_act_t act, float *y) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "act_fwd")) return;
    k_act_fwd<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(x, res, n, (int)act, y);
    LAUNCH_CHECK(c, "k_act_fwd");
}

static void cu_add(nn_backend_t *be, const float *a, const float *b, int64_t n, float *y) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "add")) return;
    k_add<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(a, b, n, y);
    LAUNCH_CHECK(c, "k_add");
}

/* The stopwatch: events on the stream; a failure only makes timer_ms say -1
 * (the caller falls back to wall time), it does not fail the instance. */
static void cu_timer_mark(nn_backend_t *be, int end) {
    cu_ctx_t *c = CTX(be);
    if (c->failed || cudaSetDevice(c->device) != cudaSuccess) return;
    int i = end ? 1 : 0;
    if (!end) c->tm_marked = 0;
    if (cudaEventRecord(c->tm_ev[i], c->stream) == cudaSuccess) c->tm_marked |= 1 << i;
}
static double cu_timer_ms(nn_backend_t *be) {
    cu_ctx_t *c = CTX(be);
    float ms = 0.0f;
    if (c->failed || c->tm_marked != 3 || cudaSetDevice(c->device) != cudaSuccess || cudaEventSynchronize(c->tm_ev[1]) != cudaSuccess ||
        cudaEventElapsedTime(&ms, c->tm_ev[0], c->tm_ev[1]) != cudaSuccess)
        return -1.0;
    return (double)ms;
}

static void cu_gather(nn_backend_t *be, const float *src, const int32_t *idx, int64_t n, float *dst) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "gather")) return;
    k_gather<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(src, idx, n, dst);
    LAUNCH_CHECK(c, "k_gather");
}

static void cu_gather_rows(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs,
                           const uint32_t *offsets, int32_t B, int32_t planes_bytes, int32_t hand_n,
                           int32_t legal_bytes, uint8_t *planes, float *hand, uint8_t *legal, uint16_t *labels,
                           float *probs, int8_t *result, float *q) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || !cu_enter(c, "gather_rows")) return;
    k_gather_rows<<<B < 4096 ? B : 4096, 128, 0, c->stream>>>(srcs, refs, offsets, B, planes_bytes, hand_n,
                                                               legal_bytes, planes, hand, legal, labels, probs,
                                                               result, q);
    LAUNCH_CHECK(c, "k_gather_rows");
}

static void cu_act_bwd(nn_backend_t *be, const float *dy, const float *z, int64_t n, nn_act_t act, float *dx) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "act_bwd")) return;
    k_act_bwd<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(dy, z, n, (int)act, dx);
    LAUNCH_CHECK(c, "k_act_bwd");
}

/* ---- dense (cuBLAS is column-major: a row-major (r, c) matrix is its (c, r) transpose) ---- */
// x (B, in), w (out, in), b (out) -> y (B, out): y^T (out, B) = W (out, in) . x^T (in, B)
static void cu_dense_fwd(nn_backend_t *be, const float *x, const float *w, const float *b, int32_t B, int32_t in,
                         int32_t out, float *y) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || in <= 0 || out <= 0 || !cu_enter(c, "dense_fwd")) return;
    const float one = 1.0f, zero = 0.0f;
    if (!CUBLAS_CHECK(c, cublasSgemm(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, &one, w, in, x, in, &zero, y, out)))
        return;
    if (b) {
        int64_t n = (int64_t)B * out;
        k_bias_rows<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(y, b, B, out);
        if (!LAUNCH_CHECK(c, "k_bias_rows")) return;
    }
    cu_poison(c, y, (int64_t)B * out);
}

// dx (B, in) = dy (B, out) . W (out, in);  dw (out, in) = dy^T . x;  db = column sums of dy
static void cu_dense_bwd(nn_backend_t *be, const float *x, const float *w, const float *dy, int32_t B, int32_t in,
                         int32_t out, float *dx, float *dw, float *db) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || in <= 0 || out <= 0 || !cu_enter(c, "dense_bwd")) return;
    const float one = 1.0f, zero = 0.0f;
    if (dx && !CUBLAS_CHECK(c, cublasSgemm(c->cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, B, out, &one, w, in, dy, out, &zero,
                                           dx, in)))
        return;
    if (dw && !CUBLAS_CHECK(c, cublasSgemm(c->cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, B, &one, x, in, dy, out, &zero,
                                           dw, in)))
        return;
    if (db) {
        k_col_sum<<<out, CU_THREADS, 0, c->stream>>>(dy, B, out, db);
        LAUNCH_CHECK(c, "k_col_sum");
    }
}

/* ---- losses ----------------------------------------------------------------------------- */
static void red_finalize(cu_ctx_t *c, int G, int nq, float *d0, float *d1, float *d2, float *d3) {
    cu_red_dst_t t = {{d0, d1, d2, d3}};
    k_red_finalize<<<nq, CU_THREADS, 0, c->stream>>>(c->red, G, t);
    LAUNCH_CHECK(c, "k_red_finalize");
}

static void cu_policy_loss(nn_backend_t *be, const float *logits, const uint32_t *offsets, const uint16_t *labels,
                           const float *probs, int32_t B, int32_t N, float scale, float *dlogits, float *stats) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || N <= 0 || !cu_enter(c, "policy_loss")) return;
    int G = B < CU_RED_MAX ? B : CU_RED_MAX;
    k_policy_loss<<<G, CU_THREADS, 0, c->stream>>>(logits, offsets, labels, probs, B, N, scale, dlogits, c->red);
    if (!LAUNCH_CHECK(c, "k_policy_loss")) return;
    red_finalize(c, G, 2, stats + NN_STAT_POLICY_LOSS, stats + NN_STAT_POLICY_CORRECT, NULL, NULL);
}

static void cu_value_target(nn_backend_t *be, const int8_t *result, const float *q, int32_t B, float q_mix,
                            float q_draw, float *target) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || !cu_enter(c, "value_target")) return;
    k_value_target<<<cu_grid(c, B), CU_THREADS, 0, c->stream>>>(result, q, B, q_mix, q_draw, target);
    LAUNCH_CHECK(c, "k_value_target");
}

static void cu_value_loss(nn_backend_t *be, const float *logits, const float *target, int32_t B, int32_t K,
                          float scale, float *dlogits, float *stats) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || K <= 0 || !cu_enter(c, "value_loss")) return;
    int G = cu_red_grid(B);
    k_value_loss<<<G, CU_THREADS, 0, c->stream>>>(logits, target, B, K, scale, dlogits, c->red);
    if (!LAUNCH_CHECK(c, "k_value_loss")) return;
    red_finalize(c, G, 1, stats + NN_STAT_VALUE_LOSS, NULL, NULL, NULL);
}

static void cu_legal_loss(nn_backend_t *be, const float *logits, const float *target, int32_t B, int32_t N,
                          float scale, float *dlogits, float *stats) {
    cu_ctx_t *c = CTX(be);
    int64_t n = (int64_t)B * N;
    if (n <= 0 || !cu_enter(c, "legal_loss")) return;
    int G = cu_red_grid(n);
    k_legal_loss<<<G, CU_THREADS, 0, c->stream>>>(logits, target, n, scale, dlogits, c->red);
    if (!LAUNCH_CHECK(c, "k_legal_loss")) return;
    red_finalize(c, G, 4, stats + NN_STAT_LEGAL_LOSS, stats + NN_STAT_LEGAL_TP, stats + NN_STAT_LEGAL_FP,
                 stats + NN_STAT_LEGAL_FN);
}

/* ---- optimizer -------------------------------------------------------------------------- */
static void cu_sum_squares(nn_backend_t *be, const float *x, int64_t n, float *out) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "sum_squares")) return;
    int G = cu_red_grid(n);
    k_sum_squares<<<G, CU_THREADS, 0, c->stream>>>(x, n, c->red);
    if (!LAUNCH_CHECK(c, "k_sum_squares")) return;
    red_finalize(c, G, 1, out, NULL, NULL, NULL);
}

static void cu_sgd_step(nn_backend_t *be, float *p, const float *g, float *v, int64_t n, const float *gnorm2,
                        const nn_sgd_args_t *a) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !a || !cu_enter(c, "sgd_step")) return;
    k_sgd_step<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(p, g, v, n, gnorm2, a->clip_norm, a->hyper, a->lr,
                                                          a->weight_decay, a->momentum, a->nesterov);
    if (LAUNCH_CHECK(c, "k_sgd_step")) cu_poison(c, p, n);
}

/* ---- lifetime ----------------------------------------------------------------------------- */
static void cu_destroy(cu_ctx_t *c) {
    if (!c) return;
    if (cudaSetDevice(c->device) == cudaSuccess) {
        if (c->stream) (void)cudaStreamSynchronize(c->stream);
        if (c->optime && !c->failed) cu_optime_report(c);
        for (int i = 0; c->ot_ev && i < CU_OT_EV; i++)
            if (c->ot_ev[i]) (void)cudaEventDestroy(c->ot_ev[i]);
        free(c->ot_ev);
        free(c->ot_name);
        for (int i = 0; i < CU_GRAPHS; i++) graph_drop(c, i);
        for (int i = 0; i < CU_PLAN_BUCKETS; i++)
            for (cu_plan_t *p = c->plans[i], *nx; p; p = nx) {
                nx = p->next;
                plan_destroy_desc(p);
                free(p);
            }
        if (c->biasd) cudnnDestroyTensorDescriptor(c->biasd);
        if (c->act_relu) cudnnDestroyActivationDescriptor(c->act_relu);
        if (c->act_id) cudnnDestroyActivationDescriptor(c->act_id);
        if (c->cudnn) cudnnDestroy(c->cudnn);
        if (c->cublas) cublasDestroy(c->cublas);
        cu_dbuf_t *bufs[2] = {&c->cws, &c->stage};
        for (int i = 0; i < 2; i++) {
            if (!bufs[i]->p) continue;
            if (c->pools && c->stream) (void)cudaFreeAsync(bufs[i]->p, c->stream);
            else (void)cudaFree(bufs[i]->p);
        }
        if (c->stream) {
            (void)cudaStreamSynchronize(c->stream);
            (void)cudaStreamDestroy(c->stream);
        }
        for (int i = 0; i < 2; i++) {
            if (c->up_ev[i]) (void)cudaEventDestroy(c->up_ev[i]);
            if (c->down_ev[i]) (void)cudaEventDestroy(c->down_ev[i]);
            if (c->tm_ev[i]) (void)cudaEventDestroy(c->tm_ev[i]);
        }
        for (int i = 0; i < NN_FENCE_NB; i++)
            if (c->fence[i]) (void)cudaEventDestroy(c->fence[i]);
        if (c->up_host) (void)cudaFreeHost(c->up_host);
        if (c->down_host) (void)cudaFreeHost(c->down_host);
        if (c->red) (void)cudaFree(c->red);
        if (c->blas_ws) (void)cudaFree(c->blas_ws);
    }
    (void)cudaGetLastError();
    free(c);
}

extern "C" int nn_cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n < 0 ? 0 : n;
}

extern "C" int nn_cuda_device_info(int32_t device, nn_cuda_device_info_t *info, char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        set_err(err, errlen, "no CUDA device: %s (%s); hint: %s", e == cudaSuccess ? "device count 0" : cudaGetErrorName(e),
                e == cudaSuccess ? "" : cudaGetErrorString(e), hint_cuda(e == cudaSuccess ? cudaErrorNoDevice : e));
        (void)cudaGetLastError();
        return -1;
    }
    if (device < 0 || device >= n) {
        set_err(err, errlen, "CUDA device %d out of range (0..%d)", (int)device, n - 1);
        return -1;
    }
    memset(info, 0, sizeof(*info));
    cudaDeviceProp prop;
    memset(&prop, 0, sizeof(prop));
    if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
        set_err(err, errlen, "cudaGetDeviceProperties(%d): %s", (int)device, cudaGetErrorString(e));
        (void)cudaGetLastError();
        return -1;
    }
    snprintf(info->name, sizeof(info->name), "%s", prop.name);
    info->mem_bytes = (int64_t)prop.totalGlobalMem;
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess) info->cc_major = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess) info->cc_minor = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device) == cudaSuccess) info->sm_count = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, device) == cudaSuccess) info->clock_khz = v;
    if (cudaDriverGetVersion(&v) == cudaSuccess) info->driver_version = v;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) info->runtime_version = v;
    (void)cudaGetLastError();
    return 0;
}

extern "C" nn_backend_t *nn_backend_cuda_new(int32_t device, uint32_t flags, char *err, size_t errlen) {
    nn_cuda_device_info_t info;
    if (nn_cuda_device_info(device, &info, err, errlen) != 0) return NULL;
    if ((flags & NN_CUDA_BF16) && info.cc_major < 8) {
        set_err(err, errlen, "CUDA device %d (%s, cc %d.%d): BF16 needs compute capability >= 8.0", (int)device, info.name,
                info.cc_major, info.cc_minor);
        return NULL;
    }
    size_t cudnn_ver = cudnnGetVersion();
    if (cudnn_ver / 10000 != CUDNN_MAJOR) {
        set_err(err, errlen, "cuDNN at run time is %zu, built against %d.%d: install cuDNN %d", cudnn_ver, CUDNN_MAJOR,
                CUDNN_MINOR, CUDNN_MAJOR);
        return NULL;
    }
    cu_ctx_t *c = (cu_ctx_t *)calloc(1, sizeof(*c));
    nn_backend_t *be = (nn_backend_t *)calloc(1, sizeof(*be));
    if (!c || !be) {
        free(c);
        free(be);
        set_err(err, errlen, "nn_backend_cuda_new: out of host memory");
        return NULL;
    }
    c->device = device;
    c->cc_major = info.cc_major;
    c->cc_minor = info.cc_minor;
    c->sm_count = info.sm_count > 0 ? info.sm_count : 1;
    c->bf16 = (flags & NN_CUDA_BF16) != 0;
    c->tf32 = !(flags & NN_CUDA_NO_TF32) && info.cc_major >= 8;
    c->det = (flags & NN_CUDA_DETERMINISTIC) != 0;
    c->heuristic = (flags & NN_CUDA_HEURISTIC) != 0;
    c->flags = flags | (c->tf32 ? 0u : (uint32_t)NN_CUDA_NO_TF32);
    /* setup failures go to err, not stderr, and never abort */
    c->flags &= ~(uint32_t)NN_CUDA_ABORT_ON_ERROR;
    c->quiet = 1;
    int v = 0;
    const char *step = "";
#define SETUP(ok, what)  \
    do {                 \
        step = (what);   \
        if (!(ok)) goto fail; \
    } while (0)
    SETUP(CUDA_CHECK(c, cudaSetDevice(device)), "select the device");
    {
        cudaFuncAttributes fa; /* fails cleanly when the binary has no kernels for this GPU */
        SETUP(CUDA_CHECK(c, cudaFuncGetAttributes(&fa, k_add)), "load Koma's kernels (built for CMAKE_CUDA_ARCHITECTURES)");
        /* batch norm's partial blocks per SM: the lesser of its two kernels; 8 where the runtime cannot say */
        int f = 0, b = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f, k_bn_part_fwd, CU_THREADS, 0) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, k_bn_part_bwd, CU_THREADS, 0) != cudaSuccess) {
            (void)cudaGetLastError();
            f = b = 8;
        }
        c->bn_resident = f < 1 || b < 1 ? 1 : f < b ? f : b;
    }
    c->pools = cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess && v;
    (void)cudaGetLastError();
    SETUP(CUDA_CHECK(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)), "create a stream");
    SETUP(CUDNN_CHECK(c, cudnnCreate(&c->cudnn)), "create the cuDNN handle");
    SETUP(CUDNN_CHECK(c, cudnnSetStream(c->cudnn, c->stream)), "bind cuDNN to the stream");
    SETUP(CUBLAS_CHECK(c, cublasCreate(&c->cublas)), "create the cuBLAS handle");
    SETUP(CUBLAS_CHECK(c, cublasSetStream(c->cublas, c->stream)), "bind cuBLAS to the stream");
    SETUP(CUBLAS_CHECK(c, cublasSetMathMode(c->cublas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH)),
          "set the cuBLAS math mode");
    /* cuBLAS's workspace of our own (its default sizes: 32 MiB on Hopper, 4 MiB before), so that a
     * GEMM inside a recorded forward (CUDA graph) never allocates */
    c->blas_ws_n = (size_t)(info.cc_major >= 9 ? 32 : 4) << 20;
    SETUP(CUDA_CHECK(c, cudaMalloc(&c->blas_ws, c->blas_ws_n)) &&
              CUBLAS_CHECK(c, cublasSetWorkspace(c->cublas, c->blas_ws, c->blas_ws_n)),
          "give cuBLAS its workspace");
    SETUP(CUDA_CHECK(c, cudaHostAlloc((void **)&c->up_host, 2 * (size_t)CU_STAGE_HALF, cudaHostAllocPortable)),
          "allocate pinned upload staging");
    SETUP(CUDA_CHECK(c, cudaHostAlloc((void **)&c->down_host, 2 * (size_t)CU_STAGE_HALF, cudaHostAllocPortable)),
          "allocate pinned download staging");
    for (int i = 0; i < 2; i++) {
        SETUP(CUDA_CHECK(c, cudaEventCreateWithFlags(&c->up_ev[i], cudaEventDisableTiming)), "create events");
        SETUP(CUDA_CHECK(c, cudaEventCreateWithFlags(&c->down_ev[i], cudaEventDisableTiming)), "create events");
    }
    for (int i = 0; i < 2; i++) SETUP(CUDA_CHECK(c, cudaEventCreate(&c->tm_ev[i])), "create timing events");
    for (int i = 0; i < NN_FENCE_NB; i++)
        SETUP(CUDA_CHECK(c, cudaEventCreateWithFlags(&c->fence[i], cudaEventDisableTiming)), "create fence events");
    SETUP(CUDA_CHECK(c, cudaMalloc((void **)&c->red, sizeof(double) * CU_RED_N)),
          "allocate reduction partials");
    SETUP(CUDNN_CHECK(c, cudnnCreateTensorDescriptor(&c->biasd)) &&
              CUDNN_CHECK(c, cudnnCreateActivationDescriptor(&c->act_relu)) &&
              CUDNN_CHECK(c, cudnnSetActivationDescriptor(c->act_relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0)) &&
              CUDNN_CHECK(c, cudnnCreateActivationDescriptor(&c->act_id)) &&
              CUDNN_CHECK(c, cudnnSetActivationDescriptor(c->act_id, CUDNN_ACTIVATION_IDENTITY, CUDNN_NOT_PROPAGATE_NAN, 0.0)),
          "create the fused convolution's descriptors");
    {
        const char *ot = getenv("KOMA_CUDA_OPTIME");
        if (ot && *ot && strcmp(ot, "0") != 0) {
            c->ot_ev = (cudaEvent_t *)calloc(CU_OT_EV, sizeof(cudaEvent_t));
            c->ot_name = (const char **)calloc(CU_OT_EV, sizeof(const char *));
            SETUP(c->ot_ev && c->ot_name, "allocate KOMA_CUDA_OPTIME's events");
            for (int i = 0; i < CU_OT_EV; i++)
                SETUP(CUDA_CHECK(c, cudaEventCreate(&c->ot_ev[i])), "create KOMA_CUDA_OPTIME's events");
            c->optime = 1;
        }
    }
#undef SETUP
    c->flags = flags | (c->tf32 ? 0u : (uint32_t)NN_CUDA_NO_TF32);
    c->quiet = 0;
    be->name = "cuda";
    be->memory = "device";
    be->ctx = c;
    be->free = cu_free;
    be->buf_alloc = cu_buf_alloc;
    be->buf_free = cu_buf_free;
    be->upload = cu_upload;
    be->download = cu_download;
    be->memset_zero = cu_memset_zero;
    be->copy = cu_copy;
    be->copy_2d = cu_copy_2d;
    be->sync = cu_sync;
    be->fence_record = cu_fence_record;
    be->fence_wait = cu_fence_wait;
    be->host_alloc = cu_host_alloc;
    be->host_free = cu_host_free;
    be->download_async = cu_download_async;
    be->error = cu_error;
    be->expand_planes = cu_expand_planes;
    be->conv_ws_bytes = cu_conv_ws_bytes;
    be->conv_fwd = cu_conv_fwd;
    be->conv_bwd_data = cu_conv_bwd_data;
    be->conv_bwd_filter = cu_conv_bwd_filter;
    be->bn_fwd_train = cu_bn_fwd_train;
    be->bn_bwd = cu_bn_bwd;
    be->bn_fold = cu_bn_fold;
    be->act_fwd = cu_act_fwd;
    be->add = cu_add;
    be->gather = cu_gather;
    be->gather_rows = cu_gather_rows;
    be->timer_mark = cu_timer_mark;
    be->timer_ms = cu_timer_ms;
    be->act_bwd = cu_act_bwd;
    be->dense_fwd = cu_dense_fwd;
    be->dense_bwd = cu_dense_bwd;
    be->policy_loss = cu_policy_loss;
    be->value_target = cu_value_target;
    be->value_loss = cu_value_loss;
    be->legal_loss = cu_legal_loss;
    be->sum_squares = cu_sum_squares;
    be->sgd_step = cu_sgd_step;
    {
        const char *nf = getenv("KOMA_CUDA_NO_FUSE"); /* the unfused route, for comparisons */
        if (!(nf && *nf && strcmp(nf, "0") != 0)) {
            be->conv_fwd_act = cu_conv_fwd_act;
            be->bn_relu_fwd_train = cu_bn_relu_fwd_train; /* training's unit: BN + residual + ReLU */
            be->bn_relu_bwd = cu_bn_relu_bwd;
        }
        /* Recorded forwards, unless turned off or profiled op by op (see also nn_fault_armed) */
        const char *gr = getenv("KOMA_CUDA_GRAPHS");
        if (!(gr && strcmp(gr, "0") == 0) && !c->optime) {
            be->graph_begin = cu_graph_begin;
            be->graph_end = cu_graph_end;
            be->graph_launch = cu_graph_launch;
        }
    }
    return be;
fail:
    set_err(err, errlen, "CUDA backend on device %d (%s, cc %d.%d): cannot %s: %s", (int)device, info.name,
            info.cc_major, info.cc_minor, step, c->err);
    cu_destroy(c);
    free(be);
    return NULL;
}

extern "C" int nn_backend_is_cuda(const nn_backend_t *be) { return be && be->free == cu_free; }

extern "C" int32_t nn_cuda_device_of(const nn_backend_t *be) {
    return nn_backend_is_cuda(be) ? ((const cu_ctx_t *)be->ctx)->device : -1;
}

extern "C" void *nn_cuda_stream(const nn_backend_t *be) {
    return nn_backend_is_cuda(be) ? (void *)((const cu_ctx_t *)be->ctx)->stream : NULL;
}

extern "C" uint32_t nn_cuda_flags(const nn_backend_t *be) {
    return nn_backend_is_cuda(be) ? ((const cu_ctx_t *)be->ctx)->flags : 0u;
}

extern "C" const char *nn_cuda_error(const nn_backend_t *be) {
    if (!nn_backend_is_cuda(be)) return NULL;
    const cu_ctx_t *c = (const cu_ctx_t *)be->ctx;
    return c->failed ? c->err : NULL;
}
