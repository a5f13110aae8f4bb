/* cuda_gpool.cu - the CUDA backend's global-pooling ops (KataGo's bias
 * structure, nn/net.h): the board's mean and max per channel, its backward,
 * the per-channel bias broadcast over the squares and its sum.
 *
 * Owns: k_pool_fwd, k_pool_bwd, k_chan_bias_fwd, k_chan_bias_bwd and their
 * ops (cu_pool_fwd, cu_pool_bwd, cu_chan_bias_fwd, cu_chan_bias_bwd). Each
 * kernel's CPU twin is the op of the same name in nn/backend_cpu.c, and each
 * mirrors its arithmetic order (a float sum over the 81 squares in square
 * order, the first square of the max): the same bits for the same inputs.
 * Does not own: the instance, errors and streams (nn/backend_cuda.cu), op
 * semantics (nn/backend.h).
 * Shapes are small (B*C rows of 81 floats): one thread per (b, c) row, rows
 * in a grid-stride loop; the broadcast add is one thread per element.
 */
#include "nn/cuda_internal.h"

#define GP_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// x (B, C, 81) -> y (B, 2C): y[b, c] = mean, y[b, C + c] = max (CPU twin: cpu_pool_fwd)
__global__ void k_pool_fwd(const float *x, int64_t rows, int C, float *y) {
    GP_STRIDE(r, rows) {
        const float *p = x + r * NN_HW;
        float s = 0.0f, m = p[0];
        for (int q = 0; q < NN_HW; q++) {
            float v = p[q];
            s += v;
            if (v > m) m = v;
        }
        int64_t b = r / C, c = r - b * C;
        y[b * 2 * C + c] = s * (1.0f / NN_HW);
        y[b * 2 * C + C + c] = m;
    }
}

// dy (B, 2C) -> dx (B, C, 81) += mean's share on every square, max's at its first square (CPU twin: cpu_pool_bwd)
__global__ void k_pool_bwd(const float *x, const float *dy, int64_t rows, int C, float *dx) {
    GP_STRIDE(r, rows) {
        const float *p = x + r * NN_HW;
        float *d = dx + r * NN_HW;
        int64_t b = r / C, c = r - b * C;
        float gm = dy[b * 2 * C + c] * (1.0f / NN_HW), gx = dy[b * 2 * C + C + c];
        int am = 0;
        for (int q = 1; q < NN_HW; q++)
            if (p[q] > p[am]) am = q;
        for (int q = 0; q < NN_HW; q++) d[q] += gm;
        d[am] += gx;
    }
}

// y (B, C, 81) = x + bias (B, C) on every square; y may equal x (CPU twin: cpu_chan_bias_fwd)
__global__ void k_chan_bias_fwd(const float *x, const float *bias, int64_t n, float *y) {
    GP_STRIDE(i, n) y[i] = x[i] + bias[i / NN_HW];
}

// dy (B, C, 81) -> dbias (B, C) = sum over the squares (CPU twin: cpu_chan_bias_bwd)
__global__ void k_chan_bias_bwd(const float *dy, int64_t rows, float *dbias) {
    GP_STRIDE(r, rows) {
        const float *p = dy + r * NN_HW;
        float s = 0.0f;
        for (int q = 0; q < NN_HW; q++) s += p[q];
        dbias[r] = s;
    }
}

void cu_pool_fwd(nn_backend_t *be, const float *x, int32_t B, int32_t C, float *y) {
    cu_ctx_t *c = CTX(be);
    int64_t rows = (int64_t)B * C;
    if (rows <= 0 || !cu_enter(c, "pool_fwd")) return;
    k_pool_fwd<<<cu_grid(c, rows), CU_THREADS, 0, c->stream>>>(x, rows, C, y);
    LAUNCH_CHECK(c, "k_pool_fwd");
}

void cu_pool_bwd(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t C, float *dx) {
    cu_ctx_t *c = CTX(be);
    int64_t rows = (int64_t)B * C;
    if (rows <= 0 || !cu_enter(c, "pool_bwd")) return;
    k_pool_bwd<<<cu_grid(c, rows), CU_THREADS, 0, c->stream>>>(x, dy, rows, C, dx);
    LAUNCH_CHECK(c, "k_pool_bwd");
}

void cu_chan_bias_fwd(nn_backend_t *be, const float *x, const float *bias, int32_t B, int32_t C, float *y) {
    cu_ctx_t *c = CTX(be);
    int64_t n = (int64_t)B * C * NN_HW;
    if (n <= 0 || !cu_enter(c, "chan_bias_fwd")) return;
    k_chan_bias_fwd<<<cu_grid(c, n), CU_THREADS, 0, c->stream>>>(x, bias, n, y);
    LAUNCH_CHECK(c, "k_chan_bias_fwd");
}

void cu_chan_bias_bwd(nn_backend_t *be, const float *dy, int32_t B, int32_t C, float *dbias) {
    cu_ctx_t *c = CTX(be);
    int64_t rows = (int64_t)B * C;
    if (rows <= 0 || !cu_enter(c, "chan_bias_bwd")) return;
    k_chan_bias_bwd<<<cu_grid(c, rows), CU_THREADS, 0, c->stream>>>(dy, rows, dbias);
    LAUNCH_CHECK(c, "k_chan_bias_bwd");
}
