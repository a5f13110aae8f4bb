/* backend_cuda.cu - the CUDA backend: every op of nn/backend.h on one stream;
 * this file assembles it (lc0's network_cuda.cc).
 *
 * Owns: the instance (creation, the op table, lifetime), its sticky error and
 * the hints of CUDA, cuDNN and cuBLAS failures, the entry of every op (fault
 * switch, device binding, KOMA_CUDA_OPTIME timing), buffers, pinned staging for
 * upload/download, copies, fences, the stopwatch, the growable private
 * workspaces, and the public functions of nn/backend_cuda.h.
 * Does not own: the ops' device work: nn/cuda_kernels.cu (hand-written kernels
 * for plane expansion, bias/activation, batch norm, the three losses, sum of
 * squares and SGD; each names its CPU twin in nn/backend_cpu.c, the reference
 * it is tested against, op by op, in tests/nn/test_nn_cuda_gpu.c, and mirrors
 * its arithmetic order) and nn/cuda_layers.cu (cuDNN convolutions with
 * algorithms chosen once per shape, the fused unit, cuBLAS dense layers, CUDA
 * graphs); what the three share is nn/cuda_internal.h. Op semantics
 * (nn/backend.h), the order ops run in (nn/net.c).
 *
 * Design notes (the whole backend)
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
 *  - Training batches from the resident window: k_gather_rows, and the
 *    optional heads' targets (moves left, the opponent's reply): k_gather_heads;
 *    the moves-left head's Huber loss: k_moves_left_loss.
 *  - Not here: NHWC activations in training.
 */
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "compat/err.h"
#include "nn/cuda_internal.h"

/* ---- errors ------------------------------------------------------------------- */
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
void cu_fail(cu_ctx_t *c, const char *file, int line, const char *fmt, ...) {
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

bool ok_cuda(cu_ctx_t *c, cudaError_t e, const char *expr, const char *file, int line) {
    if (e == cudaSuccess) return true;
    cu_fail(c, file, line, "%s: %s (%s); hint: %s", expr, cudaGetErrorName(e), cudaGetErrorString(e), hint_cuda(e));
    return false;
}
bool ok_cudnn(cu_ctx_t *c, cudnnStatus_t s, const char *expr, const char *file, int line) {
    if (s == CUDNN_STATUS_SUCCESS) return true;
    cu_fail(c, file, line, "%s: %s (%d); hint: %s", expr, cudnnGetErrorString(s), (int)s, hint_cudnn(s));
    return false;
}
bool ok_cublas(cu_ctx_t *c, cublasStatus_t s, const char *expr, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    cu_fail(c, file, line, "%s: %s (%d); hint: %s", expr, cublasGetStatusString(s), (int)s, hint_cublas(s));
    return false;
}

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
void cu_mark(cu_ctx_t *c, const char *what) {
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
bool cu_enter(cu_ctx_t *c, const char *op) {
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
void cu_poison(cu_ctx_t *c, float *x, int64_t n) {
    if (!c->poison || n <= 0) return;
    c->poison = 0;
    CUDA_CHECK(c, cudaMemsetAsync(x, 0xFF, sizeof(float) * (size_t)n, c->stream));
}

int cu_grid(const cu_ctx_t *c, int64_t n) {
    int64_t g = (n + CU_THREADS - 1) / CU_THREADS;
    int64_t cap = (int64_t)c->sm_count * 16;
    if (cap < 1) cap = 1;
    if (g > cap) g = cap;
    return g < 1 ? 1 : (int)g;
}
/* Grid of a reduction kernel: deterministic in n alone (not the device). */
int cu_red_grid(int64_t n) {
    int64_t g = (n + CU_THREADS - 1) / CU_THREADS;
    if (g > CU_RED_MAX) g = CU_RED_MAX;
    return g < 1 ? 1 : (int)g;
}

/* Grows a private device buffer (stream-ordered where the device has memory
 * pools; otherwise after synchronising the stream). */
bool dbuf_ensure(cu_ctx_t *c, cu_dbuf_t *b, size_t need) {
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

/* ---- memory ops ------------------------------------------------------------------- */
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

/* ---- stopwatch ------------------------------------------------------------------- */
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

/* Why there is no device, in a user's words first, the runtime's name of it after. */
static void no_device_err(cudaError_t e, char *err, size_t errlen) {
    int rt = 0;
    (void)cudaRuntimeGetVersion(&rt);
    switch (e) {
    case cudaSuccess:
    case cudaErrorNoDevice:
        set_err(err, errlen, "no NVIDIA GPU on this machine (the driver sees none): use the cpu backend");
        break;
    case cudaErrorInsufficientDriver:
        set_err(err, errlen,
                "the NVIDIA driver on this machine is older than the CUDA %d.%d runtime Koma was built with "
                "(cudaErrorInsufficientDriver): update the driver (nvidia-smi shows its CUDA version), or use the cpu "
                "backend",
                rt / 1000, rt % 1000 / 10);
        break;
    case cudaErrorStubLibrary:
        set_err(err, errlen,
                "no NVIDIA driver on this machine: only the CUDA toolkit's stub libcuda.so was found "
                "(cudaErrorStubLibrary): use the cpu backend");
        break;
    default:
        set_err(err, errlen, "no usable NVIDIA GPU: %s (%s); hint: %s", cudaGetErrorName(e), cudaGetErrorString(e),
                hint_cuda(e));
        break;
    }
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
        no_device_err(e, err, errlen);
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

/* The op table of a ready instance: every op, the fused units unless
 * KOMA_CUDA_NO_FUSE, recorded work unless KOMA_CUDA_GRAPHS=0 or KOMA_CUDA_OPTIME. */
static void cu_fill_ops(nn_backend_t *be, const cu_ctx_t *c) {
    be->name = "cuda";
    be->memory = "device";
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
    be->gather_heads = cu_gather_heads;
    be->timer_mark = cu_timer_mark;
    be->timer_ms = cu_timer_ms;
    be->act_bwd = cu_act_bwd;
    be->dense_fwd = cu_dense_fwd;
    be->dense_bwd = cu_dense_bwd;
    be->pool_fwd = cu_pool_fwd;
    be->pool_bwd = cu_pool_bwd;
    be->chan_bias_fwd = cu_chan_bias_fwd;
    be->chan_bias_bwd = cu_chan_bias_bwd;
    be->policy_loss = cu_policy_loss;
    be->value_target = cu_value_target;
    be->value_loss = cu_value_loss;
    be->legal_loss = cu_legal_loss;
    be->moves_left_loss = cu_moves_left_loss;
    be->sum_squares = cu_sum_squares;
    be->sgd_step = cu_sgd_step;
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
    SETUP(cuk_setup(c), "load Koma's kernels (built for CMAKE_CUDA_ARCHITECTURES)");
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
    be->ctx = c;
    cu_fill_ops(be, c);
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
