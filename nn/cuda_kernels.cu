/* cuda_kernels.cu - the CUDA backend's kernels (lc0's common_kernels.cu).
 *
 * Owns: every __global__ kernel of the backend and the device helpers they
 * share (block sums, arg-max, grid-stride loops), the launchers the layers call
 * (bias, channel and column sums, the BF16 conversions and the NHWC epilogue),
 * and the ops that are kernels alone: plane expansion, batch norm (partials,
 * ordered finalize, apply; training's fused BN + residual + ReLU), activations,
 * add, gather, the three losses, sum of squares and SGD. Each kernel names its
 * CPU twin in nn/backend_cpu.c and mirrors its arithmetic order.
 * Does not own: cuDNN and cuBLAS calls (nn/cuda_layers.cu), the instance, its
 * errors, memory and streams (nn/backend_cuda.cu), op semantics (nn/backend.h).
 */
#include <climits>
#include <cmath>

#include "nn/cuda_internal.h"

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

// CPU twin: cpu_gather_heads. A block per batch row (grid-stride over B): its
// moves_left as a float, its opponent-reply policy entries.
__global__ void k_gather_heads(const nn_rows_src_t *srcs, const nn_row_ref_t *refs, const nn_row_ref_t *opp_refs,
                               const uint32_t *opp_offsets, int B, float *moves_left, uint16_t *opp_labels,
                               float *opp_probs) {
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        if (moves_left && threadIdx.x == 0) {
            const nn_rows_src_t *s = &srcs[refs[b].src];
            moves_left[b] = s->moves_left ? (float)s->moves_left[refs[b].row] : -1.0f;
        }
        if (!opp_refs) continue;
        uint32_t d0 = opp_offsets[b], k = opp_offsets[b + 1] - d0;
        if (!k) continue;
        nn_row_ref_t rf = opp_refs[b];
        const nn_rows_src_t *o = &srcs[rf.src];
        if (rf.onehot) { /* the move played, where the reply row has no policy target */
            if (threadIdx.x == 0) opp_labels[d0] = o->move_label[rf.row], opp_probs[d0] = 1.0f;
            continue;
        }
        for (uint32_t i = threadIdx.x; i < k; i += blockDim.x) {
            opp_labels[d0 + i] = o->labels[rf.policy_begin + i];
            opp_probs[d0 + i] = o->probs[rf.policy_begin + i];
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

// CPU twin: cpu_moves_left_loss. Thread per position: the Huber loss of
// pred - target / tscale on rows with a target >= 0; partial loss, |plies
// error| and count (q 0..2); dpred 0 on the others.
__global__ void k_moves_left_loss(const float *pred, const float *target, int B, float tscale, float delta,
                                  float scale, float *dpred, double *part) {
    __shared__ double sh[33];
    double loss = 0.0, abs_err = 0.0, count = 0.0;
    GRID_STRIDE(b, (int64_t)B) {
        float t = target[b];
        if (!(t >= 0.0f)) {
            dpred[b] = 0.0f;
            continue;
        }
        float r = __fsub_rn(pred[b], __fdiv_rn(t, tscale)), a = fabsf(r);
        loss += a <= delta ? 0.5 * (double)r * r : (double)delta * (a - 0.5 * (double)delta);
        dpred[b] = __fmul_rn(scale, r < -delta ? -delta : r > delta ? delta : r);
        abs_err += fabs((double)tscale * (pred[b] > 0.0f ? pred[b] : 0.0f) - (double)t);
        count += 1.0;
    }
    loss = block_sum(loss, sh);
    abs_err = block_sum(abs_err, sh);
    count = block_sum(count, sh);
    if (threadIdx.x == 0) {
        int G = gridDim.x, g = blockIdx.x;
        part[g] = loss;
        part[G + g] = abs_err;
        part[2 * G + g] = count;
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

/* ---- launchers ------------------------------------------------------------------ */
bool cuk_setup(cu_ctx_t *c) {
    cudaFuncAttributes fa; /* fails cleanly when the binary has no kernels for this GPU */
    if (!CUDA_CHECK(c, cudaFuncGetAttributes(&fa, k_add))) return false;
    /* batch norm's partial blocks per SM: the lesser of its two kernels; 8 where the runtime cannot say */
    int f = 0, b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f, k_bn_part_fwd, CU_THREADS, 0) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, k_bn_part_bwd, CU_THREADS, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        f = b = 8;
    }
    c->bn_resident = f < 1 || b < 1 ? 1 : f < b ? f : b;
    return true;
}

// y (planes, 9, 9) += bias[c], C channels
bool cuk_bias_nchw(cu_ctx_t *c, float *y, const float *bias, int64_t planes, int C) {
    int64_t n = planes * NN_HW;
    IDX_LAUNCH(k_bias_nchw, n, y, bias, planes, C);
    return LAUNCH_CHECK(c, "k_bias_nchw");
}

bool cuk_bias_rows(cu_ctx_t *c, float *y, const float *b, int64_t B, int out) {
    int64_t n = B * out;
    k_bias_rows<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(y, b, B, out);
    return LAUNCH_CHECK(c, "k_bias_rows");
}

bool cuk_channel_sum(cu_ctx_t *c, const float *x, int B, int C, int HW, float *out) {
    k_channel_sum<<<C, CU_CH_THREADS, 0, c->stream>>>(x, B, C, HW, out);
    return LAUNCH_CHECK(c, "k_channel_sum");
}

bool cuk_col_sum(cu_ctx_t *c, const float *dy, int B, int out, float *db) {
    k_col_sum<<<out, CU_THREADS, 0, c->stream>>>(dy, B, out, db);
    return LAUNCH_CHECK(c, "k_col_sum");
}

bool cuk_act_fwd(cu_ctx_t *c, const float *x, const float *res, int64_t n, int act, float *y) {
    k_act_fwd<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(x, res, n, act, y);
    return LAUNCH_CHECK(c, "k_act_fwd");
}

// k_epi_nhwc8 where C % 8 == 0 and y, res are 16-byte aligned, else k_epi_nhwc
bool cuk_epi_nhwc(cu_ctx_t *c, __nv_bfloat16 *y, const float *bias, const __nv_bfloat16 *res, int64_t n, int C,
                  int act) {
    if (C % 8 == 0 && ((uintptr_t)y | (uintptr_t)res) % 16 == 0)
        IDX_LAUNCH(k_epi_nhwc8, n / 8, y, bias, res, n / 8, C / 8, act);
    else
        IDX_LAUNCH(k_epi_nhwc, n, y, bias, res, n, C, act);
    return LAUNCH_CHECK(c, "k_epi_nhwc");
}

/* (B, R, S) -> (B, S, R) bf16, from float or bf16 (k_to_bf_t) */
template <typename T>
bool transpose_bf(cu_ctx_t *c, const T *x, __nv_bfloat16 *y, int B, int R, int S) {
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
template bool transpose_bf<float>(cu_ctx_t *, const float *, __nv_bfloat16 *, int, int, int);
template bool transpose_bf<__nv_bfloat16>(cu_ctx_t *, const __nv_bfloat16 *, __nv_bfloat16 *, int, int, int);

/* (B, R, S) float -> bf16, as (B, S, R) where nhwc: NCHW activations (R = C,
 * S = 81) to NHWC, KCRS filters (B = cout, R = cin, S = k*k) to KRSC. */
bool to_bf16(cu_ctx_t *c, const float *x, __nv_bfloat16 *y, int B, int R, int S, int nhwc) {
    if (!nhwc) {
        int64_t n = (int64_t)B * R * S;
        k_f2bf<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(x, y, n);
        return LAUNCH_CHECK(c, "k_f2bf");
    }
    return transpose_bf(c, x, y, B, R, S);
}

/* The way back: (B, S, R) bf16 -> (B, R, S) float, + bias[r] or += */
bool from_bf16(cu_ctx_t *c, const __nv_bfloat16 *x, float *y, int B, int R, int S, const float *bias,
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

/* ---- input ------------------------------------------------------------------------- */
void cu_expand_planes(nn_backend_t *be, const uint8_t *packed, const float *hand, int32_t B,
                      int32_t planes, int32_t in_hand, float *out) {
    cu_ctx_t *c = CTX(be);
    int64_t n = (int64_t)B * (planes + in_hand) * NN_HW;
    if (B <= 0 || n <= 0 || !cu_enter(c, "expand_planes")) return;
    k_expand_planes<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(packed, in_hand ? hand : NULL, B, planes,
                                                               in_hand, nn_packed_bytes(planes), out);
    LAUNCH_CHECK(c, "k_expand_planes");
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

void cu_bn_fwd_train(nn_backend_t *be, const float *x, const float *gamma, const float *beta, int32_t B,
                     int32_t C, int32_t HW, float eps, float momentum, float *running_mean,
                     float *running_var, float *y, float *save_mean, float *save_invstd) {
    bn_fwd_impl(be, x, gamma, beta, NULL, 0, B, C, HW, eps, momentum, running_mean, running_var, y, save_mean,
                save_invstd);
}

void cu_bn_relu_fwd_train(nn_backend_t *be, const float *x, const float *gamma, const float *beta,
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

void cu_bn_bwd(nn_backend_t *be, const float *x, const float *dy, const float *gamma, const float *save_mean,
               const float *save_invstd, int32_t B, int32_t C, int32_t HW, float *dx, float *dgamma,
               float *dbeta) {
    bn_bwd_impl(be, x, NULL, dy, gamma, save_mean, save_invstd, B, C, HW, NULL, dx, dgamma, dbeta);
}

void cu_bn_relu_bwd(nn_backend_t *be, const float *x, const float *y, float *dy, const float *gamma,
                    const float *save_mean, const float *save_invstd, int32_t B, int32_t C, int32_t HW,
                    float *dres, float *dx, float *dgamma, float *dbeta) {
    bn_bwd_impl(be, x, y, dy, gamma, save_mean, save_invstd, B, C, HW, dres, dx, dgamma, dbeta);
}

void cu_bn_fold(nn_backend_t *be, const float *w, const float *gamma, const float *beta, const float *mean,
                const float *var, int32_t cout, int32_t kdim, float eps, float *w_out, float *b_out) {
    cu_ctx_t *c = CTX(be);
    int64_t n = (int64_t)cout * kdim;
    if (n <= 0 || !cu_enter(c, "bn_fold")) return;
    k_bn_fold<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(w, gamma, beta, mean, var, cout, kdim, eps, w_out, b_out);
    LAUNCH_CHECK(c, "k_bn_fold");
}

/* ---- elementwise ------------------------------------------------------------------------ */
void cu_act_fwd(nn_backend_t *be, const float *x, const float *res, int64_t n, nn_act_t act, float *y) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "act_fwd")) return;
    k_act_fwd<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(x, res, n, (int)act, y);
    LAUNCH_CHECK(c, "k_act_fwd");
}

void cu_add(nn_backend_t *be, const float *a, const float *b, int64_t n, float *y) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "add")) return;
    k_add<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(a, b, n, y);
    LAUNCH_CHECK(c, "k_add");
}

void cu_gather(nn_backend_t *be, const float *src, const int32_t *idx, int64_t n, float *dst) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "gather")) return;
    k_gather<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(src, idx, n, dst);
    LAUNCH_CHECK(c, "k_gather");
}

void cu_gather_rows(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs,
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

void cu_gather_heads(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs,
                     const nn_row_ref_t *opp_refs, const uint32_t *opp_offsets, int32_t B, float *moves_left,
                     uint16_t *opp_labels, float *opp_probs) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || (!moves_left && !opp_refs) || !cu_enter(c, "gather_heads")) return;
    k_gather_heads<<<B < 4096 ? B : 4096, 128, 0, c->stream>>>(srcs, refs, opp_refs, opp_offsets, B, moves_left,
                                                                opp_labels, opp_probs);
    LAUNCH_CHECK(c, "k_gather_heads");
}

void cu_act_bwd(nn_backend_t *be, const float *dy, const float *z, int64_t n, nn_act_t act, float *dx) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "act_bwd")) return;
    k_act_bwd<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(dy, z, n, (int)act, dx);
    LAUNCH_CHECK(c, "k_act_bwd");
}

/* ---- losses ----------------------------------------------------------------------------- */
static void red_finalize(cu_ctx_t *c, int G, int nq, float *d0, float *d1, float *d2, float *d3) {
    cu_red_dst_t t = {{d0, d1, d2, d3}};
    k_red_finalize<<<nq, CU_THREADS, 0, c->stream>>>(c->red, G, t);
    LAUNCH_CHECK(c, "k_red_finalize");
}

void cu_policy_loss(nn_backend_t *be, const float *logits, const uint32_t *offsets, const uint16_t *labels,
                    const float *probs, int32_t B, int32_t N, float scale, float *dlogits, float *stats) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || N <= 0 || !cu_enter(c, "policy_loss")) return;
    int G = B < CU_RED_MAX ? B : CU_RED_MAX;
    k_policy_loss<<<G, CU_THREADS, 0, c->stream>>>(logits, offsets, labels, probs, B, N, scale, dlogits, c->red);
    if (!LAUNCH_CHECK(c, "k_policy_loss")) return;
    red_finalize(c, G, 2, stats + NN_STAT_POLICY_LOSS, stats + NN_STAT_POLICY_CORRECT, NULL, NULL);
}

void cu_value_target(nn_backend_t *be, const int8_t *result, const float *q, int32_t B, float q_mix,
                     float q_draw, float *target) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || !cu_enter(c, "value_target")) return;
    k_value_target<<<cu_grid(c, B), CU_THREADS, 0, c->stream>>>(result, q, B, q_mix, q_draw, target);
    LAUNCH_CHECK(c, "k_value_target");
}

void cu_value_loss(nn_backend_t *be, const float *logits, const float *target, int32_t B, int32_t K,
                   float scale, float *dlogits, float *stats) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || K <= 0 || !cu_enter(c, "value_loss")) return;
    int G = cu_red_grid(B);
    k_value_loss<<<G, CU_THREADS, 0, c->stream>>>(logits, target, B, K, scale, dlogits, c->red);
    if (!LAUNCH_CHECK(c, "k_value_loss")) return;
    red_finalize(c, G, 1, stats + NN_STAT_VALUE_LOSS, NULL, NULL, NULL);
}

void cu_legal_loss(nn_backend_t *be, const float *logits, const float *target, int32_t B, int32_t N,
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

void cu_moves_left_loss(nn_backend_t *be, const float *pred, const float *target, int32_t B, float tscale, float delta,
                        float scale, float *dpred, float *stats) {
    cu_ctx_t *c = CTX(be);
    if (B <= 0 || !cu_enter(c, "moves_left_loss")) return;
    int G = cu_red_grid(B);
    k_moves_left_loss<<<G, CU_THREADS, 0, c->stream>>>(pred, target, B, tscale, delta, scale, dpred, c->red);
    if (!LAUNCH_CHECK(c, "k_moves_left_loss")) return;
    red_finalize(c, G, 3, stats + NN_STAT_ML_LOSS, stats + NN_STAT_ML_ABS, stats + NN_STAT_ML_COUNT, NULL);
}

/* ---- optimizer -------------------------------------------------------------------------- */
void cu_sum_squares(nn_backend_t *be, const float *x, int64_t n, float *out) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !cu_enter(c, "sum_squares")) return;
    int G = cu_red_grid(n);
    k_sum_squares<<<G, CU_THREADS, 0, c->stream>>>(x, n, c->red);
    if (!LAUNCH_CHECK(c, "k_sum_squares")) return;
    red_finalize(c, G, 1, out, NULL, NULL, NULL);
}

void cu_sgd_step(nn_backend_t *be, float *p, const float *g, float *v, int64_t n, const float *gnorm2,
                 const nn_sgd_args_t *a) {
    cu_ctx_t *c = CTX(be);
    if (n <= 0 || !a || !cu_enter(c, "sgd_step")) return;
    k_sgd_step<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(p, g, v, n, gnorm2, a->clip_norm, a->hyper, a->lr,
                                                          a->weight_decay, a->momentum, a->nesterov);
    if (LAUNCH_CHECK(c, "k_sgd_step")) cu_poison(c, p, n);
}
