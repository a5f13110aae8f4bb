/* cuda_layers.cu - the CUDA backend's layers (lc0's layers.cc): cuDNN and cuBLAS.
 *
 * Owns: convolutions through cuDNN (descriptors per exact shape, algorithms
 * timed once per batch bucket and shared by the process, the cuDNN workspace,
 * BF16 staging), inference's fused unit (conv_fwd_act: cuDNN conv + bias +
 * residual + ReLU in FP32/TF32, BF16 NHWC activations with one epilogue
 * kernel), dense layers through cuBLAS, and recorded work (CUDA graphs by key).
 * Does not own: the kernels it launches (nn/cuda_kernels.cu), the instance,
 * its errors and memory (nn/backend_cuda.cu), op semantics (nn/backend.h).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "nn/cuda_internal.h"

static const char *const dir_name[DIR_NB] = {"forward", "backward data", "backward filter"};

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

/* ---- recorded forwards (CUDA graphs) -------------------------------------------------- */
void graph_drop(cu_ctx_t *c, int i) {
    if (c->graphs[i].exec) (void)cudaGraphExecDestroy(c->graphs[i].exec);
    memset(&c->graphs[i], 0, sizeof(c->graphs[i]));
}

int cu_graph_begin(nn_backend_t *be) {
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

int cu_graph_end(nn_backend_t *be, uint64_t key) {
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

int cu_graph_launch(nn_backend_t *be, uint64_t key) {
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

/* ---- convolution --------------------------------------------------------------------- */
static cudnnDataType_t conv_dtype(const cu_ctx_t *c) { return c->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }

/* The math type a descriptor starts with (and is forced to without TF32). */
static cudnnMathType_t conv_base_math(const cu_ctx_t *c) {
    if (c->bf16) return CUDNN_TENSOR_OP_MATH;
    return c->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

void plan_destroy_desc(cu_plan_t *p) {
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

size_t cu_conv_ws_bytes(nn_backend_t *be, int32_t B, int32_t cin, int32_t cout, int32_t k) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || cin <= 0 || cout <= 0) return 0;
    /* choose the forward algorithm of the largest batch now, at setup time */
    if (cu_enter(c, "conv_ws_bytes")) (void)conv_plan(c, B, cin, cout, k, DIR_FWD);
    return c->bf16 ? stage_bytes(B, cin, cout, k) + 256 : 0;
}

void cu_conv_fwd(nn_backend_t *be, const float *x, const float *w, const float *bias, int32_t B,
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
        if (bias && !cuk_bias_nchw(c, y, bias, (int64_t)B * cout, cout)) return;
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
void cu_conv_fwd_act(nn_backend_t *be, const float *x, const float *w, const float *bias, const float *res,
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
        if (cuk_epi_nhwc(c, (__nv_bfloat16 *)y, bias, (const __nv_bfloat16 *)res, ny, cout, act) &&
            poison) /* the fault's NaN, in y's own type */
            CUDA_CHECK(c, cudaMemsetAsync(y, 0xFF, sizeof(__nv_bfloat16) * (size_t)ny, c->stream));
        return;
    }
    if (!from_bf16(c, st.y, y, B, cout, NN_HW, bias, 0, p->nhwc)) return;
    if (act >= 0 && !cuk_act_fwd(c, y, res, ny, act, y)) return; /* res, if any, is float NCHW like y */
    c->poison = poison;
    cu_poison(c, y, ny);
}

void cu_conv_bwd_data(nn_backend_t *be, const float *dy, const float *w, int32_t B, int32_t cin,
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

void cu_conv_bwd_filter(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t cin,
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
        cuk_channel_sum(c, dy, B, cout, NN_HW, dbias);
    }
}

/* ---- dense (cuBLAS is column-major: a row-major (r, c) matrix is its (c, r) transpose) ---- */
// x (B, in), w (out, in), b (out) -> y (B, out): y^T (out, B) = W (out, in) . x^T (in, B)
void cu_dense_fwd(nn_backend_t *be, const float *x, const float *w, const float *b, int32_t B, int32_t in,
                  int32_t out, float *y) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || in <= 0 || out <= 0 || !cu_enter(c, "dense_fwd")) return;
    const float one = 1.0f, zero = 0.0f;
    if (!CUBLAS_CHECK(c, cublasSgemm(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, &one, w, in, x, in, &zero, y, out)))
        return;
    if (b && !cuk_bias_rows(c, y, b, B, out)) return;
    cu_poison(c, y, (int64_t)B * out);
}

// dx (B, in) = dy (B, out) . W (out, in);  dw (out, in) = dy^T . x;  db = column sums of dy
void cu_dense_bwd(nn_backend_t *be, const float *x, const float *w, const float *dy, int32_t B, int32_t in,
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
    if (db) cuk_col_sum(c, dy, B, out, db);
}
