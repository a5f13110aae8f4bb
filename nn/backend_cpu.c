/* backend_cpu.c - the CPU reference backend: every op of nn/backend.h.
 *
 * Owns: the CPU implementation of the ops (plain C, one function per op,
 * forward and backward side by side) and the vtable that exposes them.
 * Convolutions are im2col + one GEMM (nn_gemm: OpenBLAS, threaded by the
 * library) over chunks of the batch; reductions accumulate in double.
 * With oneDNN (KOMA_HAVE_DNNL) the three convolution ops and the fused
 * inference unit go to nn/conv_dnnl.c instead (nn_backend_cpu_new_conv picks
 * the route; KOMA_CPU_CONV=ref|dnnl in the environment); a oneDNN failure is
 * reported once on stderr and that call runs on the reference route.
 * Also owns the instance's sticky error: every op first asks the fault
 * switch (nn/fault.h); an injected failure is recorded and turns every later
 * op of the instance into a no-op, as a device failure does on CUDA.
 * Does not own: the order ops run in (nn/net.c), the fault spec (nn/fault.c),
 * oneDNN's primitives (nn/conv_dnnl.c).
 * Threads: an instance is used by one thread at a time (nn/backend.h);
 * `threads` goes to OpenBLAS (process-wide) and to this instance's oneDNN
 * calls (per calling thread).
 * Errors: buf_alloc returns NULL when the host is out of memory; nothing
 * else fails except by injection (a oneDNN failure falls back, see above).
 */
#include "nn/backend.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/bits.h"
#include "compat/compat.h"
#include "compat/err.h"
#include "nn/act.h"
#include "nn/conv_dnnl.h"
#include "nn/conv_wino.h"
#include "nn/fault.h"
#include "nn/par.h"

#ifdef KOMA_HAVE_CBLAS
#include <cblas.h>
#endif

const char *nn_act_name(nn_act_t act) {
    switch (act) {
    case NN_ACT_RELU: return "relu";
    case NN_ACT_SILU: return "silu";
    default: return "?";
    }
}

int nn_act_parse(const char *name) {
    if (!name) return -1;
    for (int a = 0; a < NN_ACT_NB; a++)
        if (strcmp(name, nn_act_name((nn_act_t)a)) == 0) return a;
    return -1;
}

void nn_backend_free(nn_backend_t *be) {
    if (be && be->free) be->free(be);
}

const char *nn_backend_error(nn_backend_t *be) { return be && be->error ? be->error(be) : NULL; }

const char *nn_backend_memory(const nn_backend_t *be) { return be && be->memory ? be->memory : "device"; }

/* ---- the sticky error --------------------------------------------------------- */
/* Ops compute on the calling thread, so they cannot fail on their own (the
 * caller allocates every workspace); the only failure is an injected one. */
typedef struct {
    int failed;
    char err[256];
    nn_dnnl_t *dnnl;  /* the oneDNN route, NULL = reference convolutions */
    nn_wino_t *wino;  /* Winograd for the 3x3 convolutions it takes, NULL = none */
    nn_backend_t base; /* the convolution ops under Winograd (oneDNN or the reference) */
    int32_t warned;   /* a oneDNN / Winograd failure was reported */
    int32_t fallback; /* a oneDNN op runs the reference: its fault was counted already */
    int64_t mark_ns[2]; /* timer_mark's start and end, 0: not marked */
    int32_t threads;  /* OpenMP threads of the ops below (BN, elementwise, losses) */
    int32_t bf16;     /* inference's Winograd products in bf16 (nn_backend_cpu_set_precision) */
} cpu_ctx_t;

/* Threads for an op over n floats: the instance's, or 1 when n is small
 * (named in the ops' NN_OMP num_threads clauses; inline: unused without OpenMP). */
static inline int32_t team_for(const nn_backend_t *be, int64_t n) {
    const cpu_ctx_t *c = be->ctx;
    return n >= NN_PAR_MIN && c->threads > 1 ? c->threads : 1;
}

/* Entry of every op: returns 1 when the op must be skipped (the instance has
 * failed, before or at this call); else 0 and, when nan is given, whether
 * this call's output must be overwritten with NaN. */
static int cpu_skip(nn_backend_t *be, const char *op, nn_fault_t *nan) {
    cpu_ctx_t *c = be->ctx;
    if (c->failed) return 1;
    if (c->fallback) {
        if (nan) *nan = NN_FAULT_NONE;
        return 0;
    }
    nn_fault_t f = nn_fault_hit(op);
    if (f == NN_FAULT_FAIL) {
        c->failed = 1;
        nn_fault_message(op, c->err, sizeof c->err);
        fprintf(stderr, "koma cpu backend: %s\n", c->err);
        return 1;
    }
    if (nan) *nan = f;
    return 0;
}

static void poison(float *x, int64_t n) {
    if (n > 0) memset(x, 0xFF, sizeof(float) * (size_t)n); /* NaN */
}

static const char *cpu_error(nn_backend_t *be) {
    const cpu_ctx_t *c = be->ctx;
    return c->failed ? c->err : NULL;
}

/* ---- memory ---------------------------------------------------------------- */
static void cpu_free(nn_backend_t *be) {
    if (!be) return;
    cpu_ctx_t *c = be->ctx;
    if (c) nn_dnnl_free(c->dnnl);
    if (c) nn_wino_free(c->wino);
    free(c);
    free(be);
}

/* NULL when out of memory (or at an injected buf_alloc fault); never sticky. */
static void *cpu_buf_alloc(nn_backend_t *be, size_t bytes) {
    if (((cpu_ctx_t *)be->ctx)->failed || nn_fault_hit("buf_alloc") == NN_FAULT_FAIL) return NULL;
    size_t n = (bytes + 63) & ~(size_t)63;
    return compat_aligned_alloc(64, n ? n : 64);
}
static void cpu_buf_free(nn_backend_t *be, void *p) {
    (void)be;
    compat_aligned_free(p);
}
static void cpu_upload(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    if (cpu_skip(be, "upload", NULL)) return;
    if (bytes) memcpy(dst, src, bytes);
}
/* After a failure the destination gets NaN bytes: a failed result never looks plausible. */
static void cpu_download(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    if (cpu_skip(be, "download", NULL)) {
        if (bytes) memset(dst, 0xFF, bytes);
        return;
    }
    if (bytes) memcpy(dst, src, bytes);
}
static void cpu_memset_zero(nn_backend_t *be, void *dst, size_t bytes) {
    if (cpu_skip(be, "memset_zero", NULL)) return;
    if (bytes) memset(dst, 0, bytes);
}
static void cpu_copy(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    if (cpu_skip(be, "copy", NULL)) return;
    if (bytes && dst != src) memmove(dst, src, bytes);
}

static void cpu_copy_2d(nn_backend_t *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t rows) {
    if (cpu_skip(be, "copy_2d", NULL)) return;
    for (size_t r = 0; width && r < rows; r++)
        memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
}

/* ---- input ------------------------------------------------------------------ */
// packed (B, ceil(planes*81/8)), hand (B, in_hand) -> out (B, planes + in_hand, 9, 9)
static void cpu_expand_planes(nn_backend_t *be, const uint8_t *packed, const float *hand, int32_t B,
                              int32_t planes, int32_t in_hand, float *out) {
    if (cpu_skip(be, "expand_planes", NULL)) return;
    int64_t bpp = nn_packed_bytes(planes);
    int32_t C = planes + in_hand;
    for (int32_t b = 0; b < B; b++) {
        const uint8_t *bits = packed + b * bpp;
        float *o = out + (int64_t)b * C * NN_HW;
        int64_t nbits = (int64_t)planes * NN_HW;
        for (int64_t i = 0; i < nbits; i++) o[i] = (float)((bits[i >> 3] >> (i & 7)) & 1);
        for (int32_t j = 0; j < in_hand; j++) {
            float v = hand[(int64_t)b * in_hand + j];
            float *p = o + (int64_t)(planes + j) * NN_HW;
            for (int32_t s = 0; s < NN_HW; s++) p[s] = v;
        }
    }
}

/* ---- convolution ------------------------------------------------------------ */
/* The batch is processed in chunks of `nb` positions so the im2col matrix
 * stays near NN_CPU_COL_BYTES whatever B is; each chunk is one GEMM with
 * N = nb*81 columns. Workspace: col (cin*k*k, nb*81) + tmp (cout, nb*81). */
#define NN_CPU_COL_BYTES (4u << 20)

static int32_t conv_chunk(int32_t B, int32_t cin, int32_t k) {
    int64_t per = (int64_t)cin * k * k * NN_HW * (int64_t)sizeof(float);
    int64_t nb = NN_CPU_COL_BYTES / per;
    if (nb < 1) nb = 1;
    if (nb > B) nb = B;
    return (int32_t)nb;
}

static size_t cpu_conv_ws_bytes(nn_backend_t *be, int32_t B, int32_t cin, int32_t cout, int32_t k) {
    (void)be;
    int64_t nb = conv_chunk(B, cin, k);
    return (size_t)(((int64_t)cin * k * k + cout) * nb * NN_HW * (int64_t)sizeof(float));
}

// x (nb, cin, 9, 9) -> col (cin*k*k, nb*81); row r = (c*k + ky)*k + kx
static void im2col(const float *x, int32_t nb, int32_t cin, int32_t k, float *col) {
    int32_t p = k / 2;
    int64_t N = (int64_t)nb * NN_HW;
    for (int32_t c = 0; c < cin; c++)
        for (int32_t ky = 0; ky < k; ky++)
            for (int32_t kx = 0; kx < k; kx++) {
                float *row = col + ((int64_t)(c * k + ky) * k + kx) * N;
                int32_t dy = ky - p, dx = kx - p;
                int32_t x0 = dx < 0 ? -dx : 0, x1 = dx > 0 ? NN_SIDE - dx : NN_SIDE;
                for (int32_t b = 0; b < nb; b++) {
                    const float *src = x + ((int64_t)b * cin + c) * NN_HW;
                    float *dst = row + (int64_t)b * NN_HW;
                    for (int32_t yy = 0; yy < NN_SIDE; yy++) {
                        int32_t sy = yy + dy;
                        float *d = dst + yy * NN_SIDE;
                        if (sy < 0 || sy >= NN_SIDE) {
                            memset(d, 0, sizeof(float) * NN_SIDE);
                            continue;
                        }
                        const float *s = src + sy * NN_SIDE + dx;
                        for (int32_t xx = 0; xx < x0; xx++) d[xx] = 0.0f;
                        for (int32_t xx = x0; xx < x1; xx++) d[xx] = s[xx];
                        for (int32_t xx = x1; xx < NN_SIDE; xx++) d[xx] = 0.0f;
                    }
                }
            }
}

// col (cin*k*k, nb*81) -> dx (nb, cin, 9, 9) += scatter-add (dx must be initialised)
static void col2im_add(const float *col, int32_t nb, int32_t cin, int32_t k, float *dx) {
    int32_t p = k / 2;
    int64_t N = (int64_t)nb * NN_HW;
    for (int32_t c = 0; c < cin; c++)
        for (int32_t ky = 0; ky < k; ky++)
            for (int32_t kx = 0; kx < k; kx++) {
                const float *row = col + ((int64_t)(c * k + ky) * k + kx) * N;
                int32_t dy = ky - p, ddx = kx - p;
                int32_t x0 = ddx < 0 ? -ddx : 0, x1 = ddx > 0 ? NN_SIDE - ddx : NN_SIDE;
                for (int32_t b = 0; b < nb; b++) {
                    float *dst = dx + ((int64_t)b * cin + c) * NN_HW;
                    const float *src = row + (int64_t)b * NN_HW;
                    for (int32_t yy = 0; yy < NN_SIDE; yy++) {
                        int32_t sy = yy + dy;
                        if (sy < 0 || sy >= NN_SIDE) continue;
                        float *d = dst + sy * NN_SIDE + ddx;
                        const float *s = src + yy * NN_SIDE;
                        for (int32_t xx = x0; xx < x1; xx++) d[xx] += s[xx];
                    }
                }
            }
}

// (nb, C, 81) <-> (C, nb*81)
static void nchw_to_cn(const float *x, int32_t nb, int32_t C, float *t) {
    for (int32_t b = 0; b < nb; b++)
        for (int32_t c = 0; c < C; c++)
            memcpy(t + ((int64_t)c * nb + b) * NN_HW, x + ((int64_t)b * C + c) * NN_HW,
                   sizeof(float) * NN_HW);
}

static void cpu_conv_fwd(nn_backend_t *be, const float *x, const float *w, const float *bias,
                         int32_t B, int32_t cin, int32_t cout, int32_t k, float *y, void *ws) {
    nn_fault_t fault_;
    if (cpu_skip(be, "conv_fwd", &fault_)) return;
    int32_t chunk = conv_chunk(B, cin, k);
    int32_t K = cin * k * k;
    float *col = (float *)ws;
    float *tmp = col + (int64_t)K * chunk * NN_HW;
    for (int32_t b0 = 0; b0 < B; b0 += chunk) {
        int32_t nb = B - b0 < chunk ? B - b0 : chunk;
        int32_t N = nb * NN_HW;
        const float *xb = x + (int64_t)b0 * cin * NN_HW;
        float *yb = y + (int64_t)b0 * cout * NN_HW;
        const float *colp = col;
        if (k == 1 && nb == 1) {
            colp = xb; /* a single position is already (cin, 81) */
        } else {
            im2col(xb, nb, cin, k, col);
        }
        if (nb == 1) { /* output (cout, 81) is already NCHW */
            nn_gemm(0, 0, cout, N, K, 1.0f, w, K, colp, N, 0.0f, yb, N);
            if (bias)
                for (int32_t o = 0; o < cout; o++)
                    for (int32_t s = 0; s < NN_HW; s++) yb[o * NN_HW + s] += bias[o];
            continue;
        }
        // tmp (cout, nb*81) = w (cout, K) . col (K, nb*81)
        nn_gemm(0, 0, cout, N, K, 1.0f, w, K, colp, N, 0.0f, tmp, N);
        for (int32_t b = 0; b < nb; b++)
            for (int32_t o = 0; o < cout; o++) {
                const float *s = tmp + ((int64_t)o * nb + b) * NN_HW;
                float *d = yb + ((int64_t)b * cout + o) * NN_HW;
                float bo = bias ? bias[o] : 0.0f;
                for (int32_t q = 0; q < NN_HW; q++) d[q] = s[q] + bo;
            }
    }
    if (fault_ == NN_FAULT_NAN) poison(y, (int64_t)B * cout * NN_HW);
}

static void cpu_conv_bwd_data(nn_backend_t *be, const float *dy, const float *w, int32_t B,
                              int32_t cin, int32_t cout, int32_t k, float *dx, int32_t accumulate,
                              void *ws) {
    if (cpu_skip(be, "conv_bwd_data", NULL)) return;
    int32_t chunk = conv_chunk(B, cin, k);
    int32_t K = cin * k * k;
    float *col = (float *)ws;
    float *tmp = col + (int64_t)K * chunk * NN_HW;
    if (!accumulate) memset(dx, 0, sizeof(float) * (size_t)B * cin * NN_HW);
    for (int32_t b0 = 0; b0 < B; b0 += chunk) {
        int32_t nb = B - b0 < chunk ? B - b0 : chunk;
        int32_t N = nb * NN_HW;
        nchw_to_cn(dy + (int64_t)b0 * cout * NN_HW, nb, cout, tmp);
        // col (K, nb*81) = w^T (K, cout) . tmp (cout, nb*81)
        nn_gemm(1, 0, K, N, cout, 1.0f, w, K, tmp, N, 0.0f, col, N);
        col2im_add(col, nb, cin, k, dx + (int64_t)b0 * cin * NN_HW);
    }
}

static void cpu_conv_bwd_filter(nn_backend_t *be, const float *x, const float *dy, int32_t B,
                                int32_t cin, int32_t cout, int32_t k, float *dw, float *dbias,
                                void *ws) {
    if (cpu_skip(be, "conv_bwd_filter", NULL)) return;
    int32_t chunk = conv_chunk(B, cin, k);
    int32_t K = cin * k * k;
    float *col = (float *)ws;
    float *tmp = col + (int64_t)K * chunk * NN_HW;
    if (dbias) memset(dbias, 0, sizeof(float) * (size_t)cout);
    for (int32_t b0 = 0; b0 < B; b0 += chunk) {
        int32_t nb = B - b0 < chunk ? B - b0 : chunk;
        int32_t N = nb * NN_HW;
        im2col(x + (int64_t)b0 * cin * NN_HW, nb, cin, k, col);
        nchw_to_cn(dy + (int64_t)b0 * cout * NN_HW, nb, cout, tmp);
        // dw (cout, K) (+)= tmp (cout, nb*81) . col^T (nb*81, K)
        nn_gemm(0, 1, cout, K, N, 1.0f, tmp, N, col, N, b0 ? 1.0f : 0.0f, dw, K);
        if (dbias)
            for (int32_t o = 0; o < cout; o++) {
                double s = 0;
                const float *t = tmp + (int64_t)o * N;
                for (int32_t q = 0; q < N; q++) s += t[q];
                dbias[o] += (float)s;
            }
    }
}

/* ---- batch norm ------------------------------------------------------------- */
// x, y (B, C, HW); gamma, beta, running_*, save_* (C)
/* BN runs one channel per iteration over the instance's threads; its sums
 * are in double, vectorised (omp simd) segment by segment. */
static void cpu_bn_fwd_train(nn_backend_t *be, const float *x, const float *gamma,
                             const float *beta, int32_t B, int32_t C, int32_t HW, float eps,
                             float momentum, float *running_mean, float *running_var, float *y,
                             float *save_mean, float *save_invstd) {
    if (cpu_skip(be, "bn_fwd_train", NULL)) return;
    int64_t n = (int64_t)B * HW;
    NN_OMP(omp parallel for num_threads(team_for(be, n * C)) schedule(static))
    for (int32_t c = 0; c < C; c++) {
        double s = 0;
        for (int32_t b = 0; b < B; b++) {
            const float *p = x + ((int64_t)b * C + c) * HW;
            NN_OMP(omp simd reduction(+ : s))
            for (int32_t i = 0; i < HW; i++) s += p[i];
        }
        double mean = s / (double)n, ss = 0;
        for (int32_t b = 0; b < B; b++) {
            const float *p = x + ((int64_t)b * C + c) * HW;
            NN_OMP(omp simd reduction(+ : ss))
            for (int32_t i = 0; i < HW; i++) {
                double d = p[i] - mean;
                ss += d * d;
            }
        }
        double var = ss / (double)n;
        float invstd = (float)(1.0 / sqrt(var + eps));
        float m = (float)mean, g = gamma[c] * invstd, bt = beta[c];
        for (int32_t b = 0; b < B; b++) {
            const float *p = x + ((int64_t)b * C + c) * HW;
            float *q = y + ((int64_t)b * C + c) * HW;
            for (int32_t i = 0; i < HW; i++) q[i] = (p[i] - m) * g + bt;
        }
        save_mean[c] = m;
        save_invstd[c] = invstd;
        double unbiased = n > 1 ? ss / (double)(n - 1) : var;
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)mean;
        running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)unbiased;
    }
}

static void cpu_bn_bwd(nn_backend_t *be, const float *x, const float *dy, const float *gamma,
                       const float *save_mean, const float *save_invstd, int32_t B, int32_t C,
                       int32_t HW, float *dx, float *dgamma, float *dbeta) {
    if (cpu_skip(be, "bn_bwd", NULL)) return;
    int64_t n = (int64_t)B * HW;
    NN_OMP(omp parallel for num_threads(team_for(be, n * C)) schedule(static))
    for (int32_t c = 0; c < C; c++) {
        float m = save_mean[c], is = save_invstd[c];
        double sdy = 0, sdyx = 0;
        for (int32_t b = 0; b < B; b++) {
            const float *p = x + ((int64_t)b * C + c) * HW;
            const float *g = dy + ((int64_t)b * C + c) * HW;
            NN_OMP(omp simd reduction(+ : sdy, sdyx))
            for (int32_t i = 0; i < HW; i++) {
                sdy += g[i];
                sdyx += (double)g[i] * (double)((p[i] - m) * is);
            }
        }
        dbeta[c] = (float)sdy;
        dgamma[c] = (float)sdyx;
        // dx = gamma*invstd * (dy - mean(dy) - xhat * mean(dy*xhat))
        float k = gamma[c] * is, a = (float)(sdy / (double)n), bb = (float)(sdyx / (double)n);
        for (int32_t b = 0; b < B; b++) {
            const float *p = x + ((int64_t)b * C + c) * HW;
            const float *g = dy + ((int64_t)b * C + c) * HW;
            float *q = dx + ((int64_t)b * C + c) * HW;
            for (int32_t i = 0; i < HW; i++) q[i] = k * (g[i] - a - (p[i] - m) * is * bb);
        }
    }
}

// w (cout, kdim) -> w_out (cout, kdim), b_out (cout)
static void cpu_bn_fold(nn_backend_t *be, const float *w, const float *gamma, const float *beta,
                        const float *mean, const float *var, int32_t cout, int32_t kdim, float eps,
                        float *w_out, float *b_out) {
    if (cpu_skip(be, "bn_fold", NULL)) return;
    for (int32_t o = 0; o < cout; o++) {
        float s = (float)(gamma[o] / sqrt((double)var[o] + eps));
        for (int32_t i = 0; i < kdim; i++) w_out[(int64_t)o * kdim + i] = w[(int64_t)o * kdim + i] * s;
        b_out[o] = beta[o] - mean[o] * s;
    }
}

/* ---- elementwise ------------------------------------------------------------ */
static void cpu_act_fwd(nn_backend_t *be, const float *x, const float *res, int64_t n, nn_act_t act,
                        float *y) {
    if (cpu_skip(be, "act_fwd", NULL)) return;
    if (act == NN_ACT_RELU) {
        NN_OMP(omp parallel for simd num_threads(team_for(be, n)) schedule(static))
        for (int64_t i = 0; i < n; i++) {
            float z = res ? x[i] + res[i] : x[i];
            y[i] = z > 0.0f ? z : 0.0f;
        }
    } else { /* SiLU, vectorised (nn/act.c): a share of the array per thread */
        int32_t nt = team_for(be, n);
        int64_t per = (n + nt - 1) / nt;
        NN_OMP(omp parallel for num_threads(nt) schedule(static))
        for (int32_t t = 0; t < nt; t++) {
            int64_t i0 = t * per, m = n - i0 < per ? n - i0 : per;
            if (m > 0) nn_act_silu_fwd(x + i0, res ? res + i0 : NULL, m, y + i0);
        }
    }
}

static void cpu_add(nn_backend_t *be, const float *a, const float *b, int64_t n, float *y) {
    if (cpu_skip(be, "add", NULL)) return;
    NN_OMP(omp parallel for simd num_threads(team_for(be, n)) schedule(static))
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void cpu_timer_mark(nn_backend_t *be, int end) {
    cpu_ctx_t *c = be->ctx;
    c->mark_ns[end ? 1 : 0] = compat_now_ns();
    if (!end) c->mark_ns[1] = 0;
}
static double cpu_timer_ms(nn_backend_t *be) {
    cpu_ctx_t *c = be->ctx;
    if (c->failed || !c->mark_ns[0] || !c->mark_ns[1]) return -1.0;
    return (double)(c->mark_ns[1] - c->mark_ns[0]) * 1e-6;
}

static void cpu_gather(nn_backend_t *be, const float *src, const int32_t *idx, int64_t n, float *dst) {
    if (cpu_skip(be, "gather", NULL)) return;
    for (int64_t i = 0; i < n; i++) dst[i] = src[idx[i]];
}

/* The reference of gather_rows (nn/backend.h); CUDA's k_gather_rows is its twin. */
static void cpu_gather_rows(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs,
                            const uint32_t *offsets, int32_t B, int32_t planes_bytes, int32_t hand_n,
                            int32_t legal_bytes, uint8_t *planes, float *hand, uint8_t *legal, uint16_t *labels,
                            float *probs, int8_t *result, float *q) {
    if (cpu_skip(be, "gather_rows", NULL)) return;
    for (int32_t b = 0; b < B; b++) {
        const nn_rows_src_t *s = &srcs[refs[b].src];
        size_t r = refs[b].row, k = offsets[b + 1] - offsets[b];
        memcpy(planes + (size_t)b * planes_bytes, s->planes + r * planes_bytes, (size_t)planes_bytes);
        if (hand_n) memcpy(hand + (size_t)b * hand_n, s->hand + r * hand_n, sizeof(float) * (size_t)hand_n);
        if (legal_bytes) memcpy(legal + (size_t)b * legal_bytes, s->legal + r * legal_bytes, (size_t)legal_bytes);
        if (k) {
            memcpy(labels + offsets[b], s->labels + refs[b].policy_begin, sizeof(uint16_t) * k);
            memcpy(probs + offsets[b], s->probs + refs[b].policy_begin, sizeof(float) * k);
        }
        result[b] = s->result[r];
        q[b] = s->q[r];
    }
}

static void cpu_gather_heads(nn_backend_t *be, const nn_rows_src_t *srcs, const nn_row_ref_t *refs,
                             const nn_row_ref_t *opp_refs, const uint32_t *opp_offsets, int32_t B, float *moves_left,
                             uint16_t *opp_labels, float *opp_probs) {
    if (cpu_skip(be, "gather_heads", NULL)) return;
    for (int32_t b = 0; b < B; b++) {
        if (moves_left) {
            const nn_rows_src_t *s = &srcs[refs[b].src];
            moves_left[b] = s->moves_left ? (float)s->moves_left[refs[b].row] : -1.0f;
        }
        size_t k = opp_refs ? opp_offsets[b + 1] - opp_offsets[b] : 0;
        if (k && opp_refs[b].onehot) {
            opp_labels[opp_offsets[b]] = srcs[opp_refs[b].src].move_label[opp_refs[b].row];
            opp_probs[opp_offsets[b]] = 1.0f;
        } else if (k) {
            const nn_rows_src_t *o = &srcs[opp_refs[b].src];
            memcpy(opp_labels + opp_offsets[b], o->labels + opp_refs[b].policy_begin, sizeof(uint16_t) * k);
            memcpy(opp_probs + opp_offsets[b], o->probs + opp_refs[b].policy_begin, sizeof(float) * k);
        }
    }
}

static void cpu_act_bwd(nn_backend_t *be, const float *dy, const float *z, int64_t n, nn_act_t act,
                        float *dx) {
    if (cpu_skip(be, "act_bwd", NULL)) return;
    if (act == NN_ACT_RELU) {
        NN_OMP(omp parallel for simd num_threads(team_for(be, n)) schedule(static))
        for (int64_t i = 0; i < n; i++) dx[i] = z[i] > 0.0f ? dy[i] : 0.0f;
    } else { /* SiLU, as act_fwd */
        int32_t nt = team_for(be, n);
        int64_t per = (n + nt - 1) / nt;
        NN_OMP(omp parallel for num_threads(nt) schedule(static))
        for (int32_t t = 0; t < nt; t++) {
            int64_t i0 = t * per, m = n - i0 < per ? n - i0 : per;
            if (m > 0) nn_act_silu_bwd(dy + i0, z + i0, m, dx + i0);
        }
    }
}

/* ---- fused training unit (ReLU) ------------------------------------------------
 * The CPU's are its own ops in sequence, as net.c runs them unfused (the same
 * results bit for bit); the CUDA backend's are the fused kernels these twin. */
static void cpu_bn_relu_fwd_train(nn_backend_t *be, const float *x, const float *gamma, const float *beta,
                                  const float *res, int32_t B, int32_t C, int32_t HW, float eps, float momentum,
                                  float *running_mean, float *running_var, float *y, float *save_mean,
                                  float *save_invstd) {
    cpu_bn_fwd_train(be, x, gamma, beta, B, C, HW, eps, momentum, running_mean, running_var, y, save_mean,
                     save_invstd);
    cpu_act_fwd(be, y, res, (int64_t)B * C * HW, NN_ACT_RELU, y);
}

static void cpu_bn_relu_bwd(nn_backend_t *be, const float *x, const float *y, float *dy, const float *gamma,
                            const float *save_mean, const float *save_invstd, int32_t B, int32_t C, int32_t HW,
                            float *dres, float *dx, float *dgamma, float *dbeta) {
    int64_t n = (int64_t)B * C * HW;
    cpu_act_bwd(be, dy, y, n, NN_ACT_RELU, dy);
    if (dres) cpu_copy(be, dres, dy, sizeof(float) * (size_t)n);
    cpu_bn_bwd(be, x, dy, gamma, save_mean, save_invstd, B, C, HW, dx, dgamma, dbeta);
}

/* ---- dense ------------------------------------------------------------------ */
// x (B, in), w (out, in), b (out) -> y (B, out)
static void cpu_dense_fwd(nn_backend_t *be, const float *x, const float *w, const float *b,
                          int32_t B, int32_t in, int32_t out, float *y) {
    nn_fault_t fault_;
    if (cpu_skip(be, "dense_fwd", &fault_)) return;
    nn_gemm(0, 1, B, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (b)
        for (int32_t i = 0; i < B; i++)
            for (int32_t o = 0; o < out; o++) y[(int64_t)i * out + o] += b[o];
    if (fault_ == NN_FAULT_NAN) poison(y, (int64_t)B * out);
}

static void cpu_dense_bwd(nn_backend_t *be, const float *x, const float *w, const float *dy,
                          int32_t B, int32_t in, int32_t out, float *dx, float *dw, float *db) {
    if (cpu_skip(be, "dense_bwd", NULL)) return;
    if (dx) nn_gemm(0, 0, B, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in); // dx = dy . w
    nn_gemm(1, 0, out, in, B, 1.0f, dy, out, x, in, 0.0f, dw, in);         // dw = dy^T . x
    if (db)
        for (int32_t o = 0; o < out; o++) {
            double s = 0;
            for (int32_t i = 0; i < B; i++) s += dy[(int64_t)i * out + o];
            db[o] = (float)s;
        }
}

/* ---- global pooling ------------------------------------------------------------ */
// x (B, C, 81) -> y (B, 2C): means, then maxes
static void cpu_pool_fwd(nn_backend_t *be, const float *x, int32_t B, int32_t C, float *y) {
    if (cpu_skip(be, "pool_fwd", NULL)) return;
    for (int32_t b = 0; b < B; b++)
        for (int32_t c = 0; c < C; c++) {
            const float *r = x + ((int64_t)b * C + c) * NN_HW;
            float s = 0.0f, m = r[0];
            for (int32_t q = 0; q < NN_HW; q++) {
                s += r[q];
                if (r[q] > m) m = r[q];
            }
            y[(int64_t)b * 2 * C + c] = s * (1.0f / NN_HW);
            y[(int64_t)b * 2 * C + C + c] = m;
        }
}

// dy (B, 2C) -> dx (B, C, 81) +=
static void cpu_pool_bwd(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t C, float *dx) {
    if (cpu_skip(be, "pool_bwd", NULL)) return;
    for (int32_t b = 0; b < B; b++)
        for (int32_t c = 0; c < C; c++) {
            const float *r = x + ((int64_t)b * C + c) * NN_HW;
            float *d = dx + ((int64_t)b * C + c) * NN_HW;
            float gm = dy[(int64_t)b * 2 * C + c] * (1.0f / NN_HW), gx = dy[(int64_t)b * 2 * C + C + c];
            int32_t am = 0;
            for (int32_t q = 1; q < NN_HW; q++)
                if (r[q] > r[am]) am = q;
            for (int32_t q = 0; q < NN_HW; q++) d[q] += gm;
            d[am] += gx;
        }
}

// x (B, C, 81) + bias (B, C) on every square -> y
static void cpu_chan_bias_fwd(nn_backend_t *be, const float *x, const float *bias, int32_t B, int32_t C, float *y) {
    if (cpu_skip(be, "chan_bias_fwd", NULL)) return;
    for (int64_t i = 0; i < (int64_t)B * C; i++)
        for (int32_t q = 0; q < NN_HW; q++) y[i * NN_HW + q] = x[i * NN_HW + q] + bias[i];
}

/* The two in the CPU's native layout, NHWC (B, 81, C), as conv_fwd_act's on
 * the oneDNN and Winograd routes; the same sums in the same order. */
static void cpu_pool_fwd_native(nn_backend_t *be, const float *x, int32_t B, int32_t C, float *y) {
    if (cpu_skip(be, "pool_fwd", NULL)) return;
    for (int32_t b = 0; b < B; b++) {
        float *s = y + (int64_t)b * 2 * C, *m = s + C;
        const float *r = x + (int64_t)b * NN_HW * C;
        for (int32_t c = 0; c < C; c++) s[c] = 0.0f, m[c] = r[c];
        for (int32_t q = 0; q < NN_HW; q++)
            for (int32_t c = 0; c < C; c++) {
                float v = r[(int64_t)q * C + c];
                s[c] += v;
                if (v > m[c]) m[c] = v;
            }
        for (int32_t c = 0; c < C; c++) s[c] *= 1.0f / NN_HW;
    }
}

static void cpu_chan_bias_fwd_native(nn_backend_t *be, const float *x, const float *bias, int32_t B, int32_t C,
                                     float *y) {
    if (cpu_skip(be, "chan_bias_fwd", NULL)) return;
    for (int64_t i = 0; i < (int64_t)B * NN_HW; i++) {
        const float *bb = bias + i / NN_HW * C;
        for (int32_t c = 0; c < C; c++) y[i * C + c] = x[i * C + c] + bb[c];
    }
}

// dy (B, C, 81) -> dbias (B, C) = sum over squares
static void cpu_chan_bias_bwd(nn_backend_t *be, const float *dy, int32_t B, int32_t C, float *dbias) {
    if (cpu_skip(be, "chan_bias_bwd", NULL)) return;
    for (int64_t i = 0; i < (int64_t)B * C; i++) {
        float s = 0.0f;
        for (int32_t q = 0; q < NN_HW; q++) s += dy[i * NN_HW + q];
        dbias[i] = s;
    }
}

/* ---- losses ----------------------------------------------------------------- */
// logits (N) -> p (N) = softmax (written to dl), returns log-sum-exp
static double softmax_row(const float *z, int32_t N, float *p) {
    float mx = z[0];
    for (int32_t i = 1; i < N; i++) mx = z[i] > mx ? z[i] : mx;
    double s = 0;
    for (int32_t i = 0; i < N; i++) {
        float e = expf(z[i] - mx);
        p[i] = e;
        s += e;
    }
    float inv = (float)(1.0 / s);
    for (int32_t i = 0; i < N; i++) p[i] *= inv;
    return (double)mx + log(s);
}

// logits, dlogits (B, N); offsets (B+1); labels, probs (nnz)
static void cpu_policy_loss(nn_backend_t *be, const float *logits, const uint32_t *offsets,
                            const uint16_t *labels, const float *probs, int32_t B, int32_t N,
                            float scale, float *dlogits, float *stats) {
    if (cpu_skip(be, "policy_loss", NULL)) return;
    double loss = 0, correct = 0;
    NN_OMP(omp parallel for num_threads(team_for(be, (int64_t)B * N)) schedule(static) reduction(+ : loss, correct))
    for (int32_t b = 0; b < B; b++) {
        const float *z = logits + (int64_t)b * N;
        float *d = dlogits + (int64_t)b * N;
        double lse = softmax_row(z, N, d);
        int32_t am = 0;
        for (int32_t i = 1; i < N; i++)
            if (z[i] > z[am]) am = i;
        double tsum = 0;
        int32_t tbest = -1;
        float pbest = 0;
        for (uint32_t j = offsets[b]; j < offsets[b + 1]; j++) {
            int32_t l = labels[j];
            float t = probs[j];
            tsum += t;
            loss += t * (lse - z[l]);
            if (tbest < 0 || t > pbest || (t == pbest && l < tbest)) {
                tbest = l;
                pbest = t;
            }
        }
        float ts = (float)tsum * scale;
        for (int32_t i = 0; i < N; i++) d[i] *= ts;
        for (uint32_t j = offsets[b]; j < offsets[b + 1]; j++) d[labels[j]] -= scale * probs[j];
        if (tbest >= 0 && am == tbest) correct += 1;
    }
    stats[NN_STAT_POLICY_LOSS] += (float)loss;
    stats[NN_STAT_POLICY_CORRECT] += (float)correct;
}

// result, q (B) -> target (B, 3)
static void cpu_value_target(nn_backend_t *be, const int8_t *result, const float *q, int32_t B,
                             float q_mix, float q_draw, float *target) {
    if (cpu_skip(be, "value_target", NULL)) return;
    for (int32_t b = 0; b < B; b++) {
        float *t = target + (int64_t)b * 3;
        float r[3] = {result[b] > 0, result[b] == 0, result[b] < 0};
        float v = q[b] < -1.0f ? -1.0f : q[b] > 1.0f ? 1.0f : q[b];
        float d = q_draw * (1.0f - fabsf(v));
        float s[3] = {0.5f * (1.0f + v - d), d, 0.5f * (1.0f - v - d)};
        for (int32_t i = 0; i < 3; i++) t[i] = (1.0f - q_mix) * r[i] + q_mix * s[i];
    }
}

// logits, target, dlogits (B, K)
static void cpu_value_loss(nn_backend_t *be, const float *logits, const float *target, int32_t B,
                           int32_t K, float scale, float *dlogits, float *stats) {
    if (cpu_skip(be, "value_loss", NULL)) return;
    double loss = 0;
    for (int32_t b = 0; b < B; b++) {
        const float *z = logits + (int64_t)b * K, *t = target + (int64_t)b * K;
        float *d = dlogits + (int64_t)b * K;
        double lse = softmax_row(z, K, d);
        double tsum = 0;
        for (int32_t i = 0; i < K; i++) {
            loss += t[i] * (lse - z[i]);
            tsum += t[i];
        }
        for (int32_t i = 0; i < K; i++) d[i] = scale * (d[i] * (float)tsum - t[i]);
    }
    stats[NN_STAT_VALUE_LOSS] += (float)loss;
}

// logits, target, dlogits (B, N)
static void cpu_legal_loss(nn_backend_t *be, const float *logits, const float *target, int32_t B,
                           int32_t N, float scale, float *dlogits, float *stats) {
    if (cpu_skip(be, "legal_loss", NULL)) return;
    double loss = 0;
    int64_t tp = 0, fp = 0, fn = 0;
    int64_t n = (int64_t)B * N;
    NN_OMP(omp parallel for num_threads(team_for(be, n)) schedule(static) reduction(+ : loss, tp, fp, fn))
    for (int64_t i = 0; i < n; i++) {
        float z = logits[i], t = target[i];
        float e = expf(-fabsf(z)); /* in (0, 1]: no overflow */
        loss += (double)(z > 0 ? z : 0) - (double)z * t + (double)log1pf(e);
        float s = z >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
        dlogits[i] = scale * (s - t);
        int pred = z >= 0.0f, pos = t > 0.5f;
        tp += pred && pos;
        fp += pred && !pos;
        fn += !pred && pos;
    }
    stats[NN_STAT_LEGAL_LOSS] += (float)loss;
    stats[NN_STAT_LEGAL_TP] += (float)tp;
    stats[NN_STAT_LEGAL_FP] += (float)fp;
    stats[NN_STAT_LEGAL_FN] += (float)fn;
}

// pred, target, dpred (B)
static void cpu_moves_left_loss(nn_backend_t *be, const float *pred, const float *target, int32_t B, float tscale,
                                float delta, float scale, float *dpred, float *stats) {
    if (cpu_skip(be, "moves_left_loss", NULL)) return;
    double loss = 0, abs_err = 0;
    int64_t count = 0;
    for (int32_t b = 0; b < B; b++) {
        if (!(target[b] >= 0.0f)) { /* no target (NaN included) */
            dpred[b] = 0.0f;
            continue;
        }
        float r = pred[b] - target[b] / tscale, a = fabsf(r);
        loss += a <= delta ? 0.5 * (double)r * r : (double)delta * (a - 0.5 * (double)delta);
        dpred[b] = scale * (r < -delta ? -delta : r > delta ? delta : r);
        abs_err += fabs((double)tscale * (pred[b] > 0.0f ? pred[b] : 0.0f) - (double)target[b]);
        count++;
    }
    stats[NN_STAT_ML_LOSS] += (float)loss;
    stats[NN_STAT_ML_ABS] += (float)abs_err;
    stats[NN_STAT_ML_COUNT] += (float)count;
}

/* ---- optimizer -------------------------------------------------------------- */
static void cpu_sum_squares(nn_backend_t *be, const float *x, int64_t n, float *out) {
    if (cpu_skip(be, "sum_squares", NULL)) return;
    double s = 0;
    NN_OMP(omp parallel for simd num_threads(team_for(be, n)) schedule(static) reduction(+ : s))
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    *out += (float)s;
}

// p, g, v (n)
static void cpu_sgd_step(nn_backend_t *be, float *p, const float *g, float *v, int64_t n,
                         const float *gnorm2, const nn_sgd_args_t *a) {
    nn_fault_t fault_;
    if (cpu_skip(be, "sgd_step", &fault_)) return;
    float scale = 1.0f;
    if (gnorm2 && a->clip_norm > 0.0f) {
        float norm = sqrtf(*gnorm2);
        float c = a->clip_norm / (norm + 1e-6f);
        if (c < 1.0f) scale = c;
    }
    float lr = a->hyper ? a->hyper[0] : a->lr, wd = a->hyper ? a->hyper[1] : a->weight_decay;
    float decay = 1.0f - lr * wd, mu = a->momentum;
    int32_t nesterov = a->nesterov;
    NN_OMP(omp parallel for simd num_threads(team_for(be, n)) schedule(static))
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * scale;
        float vi = mu * v[i] + gi;
        v[i] = vi;
        float d = nesterov ? gi + mu * vi : vi;
        p[i] = p[i] * decay - lr * d;
    }
    if (fault_ == NN_FAULT_NAN) poison(p, n);
}

/* ---- the oneDNN route -------------------------------------------------------- */
/* Each op below asks the fault switch once, as the reference op would, then
 * runs oneDNN; on a oneDNN failure (reported once) the reference op runs with
 * the switch muted (c->fallback) so the fault count stays one per op. */
static void fell_back(nn_backend_t *be, const char *route, const char *instead, const char *why) {
    cpu_ctx_t *c = be->ctx;
    c->fallback = 1;
    if (c->warned) return;
    c->warned = 1;
    fprintf(stderr, "nn: %s convolution failed, running the %s route instead: %s\n", route, instead, why);
}
static void dnnl_fell_back(nn_backend_t *be) {
    fell_back(be, "oneDNN", "reference", nn_dnnl_error(((cpu_ctx_t *)be->ctx)->dnnl));
}

static void dnnl_conv_fwd(nn_backend_t *be, const float *x, const float *w, const float *bias,
                          int32_t B, int32_t cin, int32_t cout, int32_t k, float *y, void *ws) {
    cpu_ctx_t *c = be->ctx;
    nn_fault_t f;
    if (cpu_skip(be, "conv_fwd", &f)) return;
    if (nn_dnnl_conv_fwd(c->dnnl, x, w, bias, NULL, -1, B, cin, cout, k, y, 0) != 0) {
        dnnl_fell_back(be);
        cpu_conv_fwd(be, x, w, bias, B, cin, cout, k, y, ws);
        c->fallback = 0;
    }
    if (f == NN_FAULT_NAN) poison(y, (int64_t)B * cout * NN_HW);
}

// (B, C, 81) <-> (B, 81, C)
static void nhwc_nchw(const float *x, int32_t B, int32_t C, int to_nchw, float *y) {
    for (int32_t b = 0; b < B; b++)
        for (int32_t c = 0; c < C; c++)
            for (int32_t q = 0; q < NN_HW; q++) {
                int64_t i = ((int64_t)b * C + c) * NN_HW + q, j = ((int64_t)b * NN_HW + q) * C + c;
                if (to_nchw) y[i] = x[j];
                else y[j] = x[i];
            }
}

/* The reference unit on NCHW copies of the native (NHWC) operands. */
static void ref_unit_native(nn_backend_t *be, const float *x, const float *w, const float *bias,
                            const float *res, int32_t B, int32_t cin, int32_t cout, int32_t k,
                            nn_act_t act, float *y, void *ws, int32_t flags) {
    int64_t nx = (int64_t)B * cin * NN_HW, ny = (int64_t)B * cout * NN_HW;
    float *xt = (flags & NN_CONV_X_NATIVE) ? malloc(sizeof(float) * (size_t)nx) : NULL;
    float *rt = (flags & NN_CONV_Y_NATIVE) && res ? malloc(sizeof(float) * (size_t)ny) : NULL;
    float *yt = (flags & NN_CONV_Y_NATIVE) ? malloc(sizeof(float) * (size_t)ny) : y;
    if (((flags & NN_CONV_X_NATIVE) && !xt) || ((flags & NN_CONV_Y_NATIVE) && (!yt || (res && !rt)))) {
        fprintf(stderr, "nn: out of memory in the reference convolution; output left unset\n");
    } else {
        if (xt) nhwc_nchw(x, B, cin, 1, xt), x = xt;
        if (rt) nhwc_nchw(res, B, cout, 1, rt), res = rt;
        cpu_conv_fwd(be, x, w, bias, B, cin, cout, k, yt, ws);
        if (!(flags & NN_CONV_NO_ACT)) cpu_act_fwd(be, yt, res, ny, act, yt);
        if (yt != y) nhwc_nchw(yt, B, cout, 0, y);
    }
    free(xt);
    free(rt);
    if (yt != y) free(yt);
}

static void dnnl_conv_fwd_act(nn_backend_t *be, const float *x, const float *w, const float *bias,
                              const float *res, int32_t B, int32_t cin, int32_t cout, int32_t k,
                              nn_act_t act, float *y, void *ws, int32_t flags) {
    cpu_ctx_t *c = be->ctx;
    nn_fault_t f;
    if (cpu_skip(be, "conv_fwd", &f)) return; /* the unit counts as its convolution */
    int32_t a = (flags & NN_CONV_NO_ACT) ? -1 : (int32_t)act;
    if (nn_dnnl_conv_fwd(c->dnnl, x, w, bias, res, a, B, cin, cout, k, y,
                         flags & (NN_CONV_X_NATIVE | NN_CONV_Y_NATIVE)) != 0) {
        dnnl_fell_back(be);
        ref_unit_native(be, x, w, bias, res, B, cin, cout, k, act, y, ws, flags);
        c->fallback = 0;
    }
    if (f == NN_FAULT_NAN) poison(y, (int64_t)B * cout * NN_HW);
}

static void dnnl_conv_bwd_data(nn_backend_t *be, const float *dy, const float *w, int32_t B,
                               int32_t cin, int32_t cout, int32_t k, float *dx, int32_t accumulate,
                               void *ws) {
    cpu_ctx_t *c = be->ctx;
    if (cpu_skip(be, "conv_bwd_data", NULL)) return;
    if (nn_dnnl_conv_bwd_data(c->dnnl, dy, w, B, cin, cout, k, dx, accumulate) == 0) return;
    dnnl_fell_back(be);
    cpu_conv_bwd_data(be, dy, w, B, cin, cout, k, dx, accumulate, ws);
    c->fallback = 0;
}

static void dnnl_conv_bwd_filter(nn_backend_t *be, const float *x, const float *dy, int32_t B,
                                 int32_t cin, int32_t cout, int32_t k, float *dw, float *dbias,
                                 void *ws) {
    cpu_ctx_t *c = be->ctx;
    if (cpu_skip(be, "conv_bwd_filter", NULL)) return;
    if (nn_dnnl_conv_bwd_filter(c->dnnl, x, dy, B, cin, cout, k, dw, dbias) == 0) return;
    dnnl_fell_back(be);
    cpu_conv_bwd_filter(be, x, dy, B, cin, cout, k, dw, dbias, ws);
    c->fallback = 0;
}

/* ---- the Winograd route ------------------------------------------------------ */
/* The 3x3 convolutions nn/conv_wino.c takes; every other one, and a call that
 * fails (out of memory), goes to the route below it (c->base: oneDNN or the
 * reference), with the fault switch muted for the fallback as above. */
static void wino_fell_back(nn_backend_t *be) {
    cpu_ctx_t *c = be->ctx;
    fell_back(be, "Winograd", c->dnnl ? "oneDNN" : "reference", nn_wino_error(c->wino));
}

static void wino_conv_fwd(nn_backend_t *be, const float *x, const float *w, const float *bias, int32_t B,
                          int32_t cin, int32_t cout, int32_t k, float *y, void *ws) {
    cpu_ctx_t *c = be->ctx;
    if (!nn_wino_takes_fwd(k, cin, cout)) {
        c->base.conv_fwd(be, x, w, bias, B, cin, cout, k, y, ws);
        return;
    }
    nn_fault_t f;
    if (cpu_skip(be, "conv_fwd", &f)) return;
    if (nn_wino_conv_fwd(c->wino, x, w, bias, NULL, -1, B, cin, cout, y, 0) != 0) {
        wino_fell_back(be);
        c->base.conv_fwd(be, x, w, bias, B, cin, cout, k, y, ws);
        c->fallback = 0;
    }
    if (f == NN_FAULT_NAN) poison(y, (int64_t)B * cout * NN_HW);
}

static void wino_conv_fwd_act(nn_backend_t *be, const float *x, const float *w, const float *bias,
                              const float *res, int32_t B, int32_t cin, int32_t cout, int32_t k,
                              nn_act_t act, float *y, void *ws, int32_t flags) {
    cpu_ctx_t *c = be->ctx;
    int32_t taken = nn_wino_takes_fwd(k, cin, cout);
    nn_fault_t f = NN_FAULT_NONE;
    if (taken) {
        if (cpu_skip(be, "conv_fwd", &f)) return; /* the unit counts as its convolution */
        if (nn_wino_conv_fwd(c->wino, x, w, bias, res, (flags & NN_CONV_NO_ACT) ? -1 : (int32_t)act, B, cin, cout, y,
                             (flags & (NN_CONV_X_NATIVE | NN_CONV_Y_NATIVE)) | (c->bf16 ? NN_WINO_BF16 : 0)) == 0)
            goto done;
        wino_fell_back(be);
    }
    /* not taken (the base counts its own faults), or the fallback (muted) */
    if (c->base.conv_fwd_act) c->base.conv_fwd_act(be, x, w, bias, res, B, cin, cout, k, act, y, ws, flags);
    else ref_unit_native(be, x, w, bias, res, B, cin, cout, k, act, y, ws, flags);
    c->fallback = 0;
done:
    if (f == NN_FAULT_NAN) poison(y, (int64_t)B * cout * NN_HW);
}

static void wino_conv_bwd_data(nn_backend_t *be, const float *dy, const float *w, int32_t B, int32_t cin,
                               int32_t cout, int32_t k, float *dx, int32_t accumulate, void *ws) {
    cpu_ctx_t *c = be->ctx;
    if (!nn_wino_takes_bwd_data(k, cin, cout)) {
        c->base.conv_bwd_data(be, dy, w, B, cin, cout, k, dx, accumulate, ws);
        return;
    }
    if (cpu_skip(be, "conv_bwd_data", NULL)) return;
    if (nn_wino_conv_bwd_data(c->wino, dy, w, B, cin, cout, dx, accumulate) == 0) return;
    wino_fell_back(be);
    c->base.conv_bwd_data(be, dy, w, B, cin, cout, k, dx, accumulate, ws);
    c->fallback = 0;
}

static void wino_conv_bwd_filter(nn_backend_t *be, const float *x, const float *dy, int32_t B, int32_t cin,
                                 int32_t cout, int32_t k, float *dw, float *dbias, void *ws) {
    cpu_ctx_t *c = be->ctx;
    if (!nn_wino_takes_bwd_filter(k, cin, cout)) {
        c->base.conv_bwd_filter(be, x, dy, B, cin, cout, k, dw, dbias, ws);
        return;
    }
    if (cpu_skip(be, "conv_bwd_filter", NULL)) return;
    if (nn_wino_conv_bwd_filter(c->wino, x, dy, B, cin, cout, dw, dbias) == 0) return;
    wino_fell_back(be);
    c->base.conv_bwd_filter(be, x, dy, B, cin, cout, k, dw, dbias, ws);
    c->fallback = 0;
}

/* OpenBLAS 0.3.21 does not know recent Xeons (e.g. family 6 model 207
 * under KVM) and falls back to its SSE3 "Prescott" kernels, 4x slower than
 * its AVX-512 ones here. The choice is made when the library loads, before
 * any of our code runs: programs fix it by starting again with
 * OPENBLAS_CORETYPE set (nn_cpu_blas_reexec_if_generic), and the backend
 * says how to fix it, once, where that did not happen. */
const char *nn_cpu_blas_better_coretype(void) {
#if defined(KOMA_HAVE_CBLAS) && defined(OPENBLAS_VERSION) && defined(KOMA_CPU_X86)
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    const char *core = openblas_get_corename();
    if (!core || (strcmp(core, "Prescott") != 0 && strcmp(core, "Core2") != 0 && strcmp(core, "Nehalem") != 0 &&
                  strcmp(core, "Sandybridge") != 0))
        return NULL;
    if (compat_cpu_has_avx512_skx()) return "SkylakeX";
    if (compat_cpu_has_avx2_fma()) return "Haswell";
#endif
    return NULL;
}

void nn_cpu_blas_reexec_if_generic(char **argv) {
    if (!getenv("KOMA_NO_REEXEC")) {
        const char *better = nn_cpu_blas_better_coretype();
        /* Each returns only when nothing is to be done (the variable is set) or
         * the platform cannot start the program again. */
        if (better) compat_reexec_with_env("OPENBLAS_CORETYPE", better, argv);
#if defined(KOMA_HAVE_DNNL) || defined(_OPENMP)
        /* libgomp (oneDNN's and the Winograd route's runtime) reads this when it loads: its workers spin
         * between primitives by default and then take the cores from Koma's own
         * threads (search, BN, OpenBLAS): 3-5x slower nets on a busy 2-core box. */
        compat_reexec_with_env("OMP_WAIT_POLICY", "passive", argv);
#endif
    }
    /* The caller and every pool thread hold their work buffers before the
     * program goes on; where memory is already too short for the pool, start
     * again without one (OpenBLAS would otherwise spin in a pool thread for
     * ever, see nn_gemm_pool_settle). */
    if (nn_gemm_pool_settle() != 0 && !getenv("KOMA_NO_REEXEC"))
        compat_reexec_with_env("OPENBLAS_NUM_THREADS", "1", argv);
}

/* OpenBLAS takes a work buffer of BUFFER_SIZE (128 MiB in Debian's 0.3.21)
 * for each thread that calls it, the first time that thread does, and when
 * that allocation fails it retries for ever: the program spins at 100% CPU
 * and no longer heeds Ctrl-C. So before BLAS first runs, the buffers that
 * `threads` callers will take at once are allocated together and given back;
 * if that fails, the caller refuses to start with a message instead of
 * hanging. (A later call that needs one more buffer than ever before checks
 * again in nn_gemm, and runs the portable GEMM where it cannot be had.) */
int nn_cpu_blas_room(int32_t threads, char *err, size_t errlen) {
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    if (nn_gemm_room(threads)) return 0;
    char l[96];
    compat_address_space_note(l, sizeof l);
    set_err(err, errlen,
            "out of memory%s: OpenBLAS needs a %d MiB work buffer for each of %d thread(s), "
            "which could not be allocated; raise the limit or use fewer threads",
            l, NN_GEMM_BUFFER_MIB, (int)threads);
    return -1;
}

static void check_openblas_core(void) {
    static atomic_int warned = 0;
    const char *better = nn_cpu_blas_better_coretype();
    if (!better || atomic_exchange(&warned, 1)) return;
    fprintf(stderr, "nn: OpenBLAS runs its generic kernels on this CPU; "
                    "set OPENBLAS_CORETYPE=%s for several times faster convolutions\n", better);
}

const char *nn_backend_cpu_conv_route(const nn_backend_t *be) {
    if (!be || strcmp(be->name, "cpu") != 0) return NULL;
    const cpu_ctx_t *c = be->ctx;
    if (!c) return "ref";
    if (c->wino) return c->dnnl ? "wino+dnnl" : "wino+ref";
    return c->dnnl ? "dnnl" : "ref";
}

int nn_cpu_prec_parse(const char *s, nn_cpu_prec_t *out) {
    static const char *const names[] = {"fp32", "auto", "bf16"};
    for (int32_t i = 0; i < 3; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *out = (nn_cpu_prec_t)i;
            return 0;
        }
    return -1;
}

nn_cpu_prec_t nn_backend_cpu_set_precision(nn_backend_t *be, nn_cpu_prec_t want) {
    if (!be || strcmp(be->name, "cpu") != 0 || !be->ctx) return NN_CPU_PREC_FP32;
    cpu_ctx_t *c = be->ctx;
    if (want == NN_CPU_PREC_AUTO) {
        const char *env = getenv("KOMA_CPU_PRECISION");
        nn_cpu_prec_t e;
        if (env && *env && nn_cpu_prec_parse(env, &e) == 0) want = e;
        else if (env && *env) {
            static atomic_int warned = 0;
            if (!atomic_exchange(&warned, 1))
                fprintf(stderr, "nn: KOMA_CPU_PRECISION=%s is not fp32, bf16 or auto; using auto\n", env);
        }
        if (want == NN_CPU_PREC_AUTO) want = NN_CPU_PREC_BF16; /* where it can: below */
    }
    c->bf16 = want == NN_CPU_PREC_BF16 && c->wino && nn_wino_bf16_supported();
    return c->bf16 ? NN_CPU_PREC_BF16 : NN_CPU_PREC_FP32;
}

const char *nn_backend_cpu_precision(const nn_backend_t *be) {
    if (!be || strcmp(be->name, "cpu") != 0) return NULL;
    const cpu_ctx_t *c = be->ctx;
    return c && c->bf16 ? "bf16" : "fp32";
}

nn_backend_t *nn_backend_cpu_new(int32_t threads) {
    char err[256];
    nn_backend_t *be = nn_backend_cpu_new_conv(threads, NN_CPU_CONV_AUTO, err, sizeof(err));
    if (!be) fprintf(stderr, "nn: %s\n", err);
    return be;
}

/* AUTO resolved: the environment's KOMA_CPU_CONV (ref, dnnl, wino), else
 * Winograd over oneDNN where built, over the reference otherwise. */
static nn_cpu_conv_t resolve_conv(nn_cpu_conv_t conv) {
    if (conv != NN_CPU_CONV_AUTO) return conv;
    static atomic_int warned = 0;
    const char *env = getenv("KOMA_CPU_CONV");
    if (!env || !*env || strcmp(env, "wino") == 0) return NN_CPU_CONV_WINO;
    if (strcmp(env, "ref") == 0) return NN_CPU_CONV_REF;
#ifdef KOMA_HAVE_DNNL
    if (strcmp(env, "dnnl") == 0) return NN_CPU_CONV_DNNL;
    const char *known = "wino, dnnl or ref";
#else
    const char *known = "wino or ref: this build has no oneDNN";
#endif
    if (!atomic_exchange(&warned, 1))
        fprintf(stderr, "nn: KOMA_CPU_CONV=%s is not a convolution route (%s); using wino\n", env, known);
    return NN_CPU_CONV_WINO;
}

nn_backend_t *nn_backend_cpu_new_conv(int32_t threads, nn_cpu_conv_t conv, char *err, size_t errlen) {
    nn_backend_t *be = calloc(1, sizeof(*be));
    cpu_ctx_t *c = calloc(1, sizeof(*c));
    if (!be || !c) {
        free(be);
        free(c);
        set_err(err, errlen, "CPU backend: out of memory");
        return NULL;
    }
    conv = resolve_conv(conv);
    int32_t nt = threads > 0 ? threads : compat_cpu_count();
    c->threads = nt;
#ifdef KOMA_HAVE_DNNL
    int32_t want_dnnl = conv == NN_CPU_CONV_DNNL || conv == NN_CPU_CONV_WINO;
#else
    int32_t want_dnnl = conv == NN_CPU_CONV_DNNL;
#endif
    if (want_dnnl) {
        c->dnnl = nn_dnnl_new(nt, err, errlen);
        if (!c->dnnl && conv == NN_CPU_CONV_DNNL) {
            free(c);
            free(be);
            return NULL;
        }
        static atomic_int warned = 0;
        if (!c->dnnl && !atomic_exchange(&warned, 1))
            fprintf(stderr, "nn: %s; the convolutions the Winograd route does not take run on the reference\n",
                    err && errlen ? err : "oneDNN did not start");
    }
    if (conv == NN_CPU_CONV_WINO && !(c->wino = nn_wino_new(nt))) {
        nn_dnnl_free(c->dnnl);
        free(c);
        free(be);
        set_err(err, errlen, "CPU backend: out of memory");
        return NULL;
    }
#if defined(KOMA_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
    if (threads > 0) openblas_set_num_threads(nn_gemm_threads_cap(threads));
#else
    (void)threads;
#endif
    check_openblas_core();
    be->name = "cpu";
    be->memory = "host";
    be->ctx = c;
    be->free = cpu_free;
    be->buf_alloc = cpu_buf_alloc;
    be->buf_free = cpu_buf_free;
    be->upload = cpu_upload;
    be->download = cpu_download;
    be->memset_zero = cpu_memset_zero;
    be->copy = cpu_copy;
    be->copy_2d = cpu_copy_2d;
    be->sync = NULL; /* and no fences: every op is done when it returns */
    be->error = cpu_error;
    be->expand_planes = cpu_expand_planes;
    be->conv_ws_bytes = cpu_conv_ws_bytes;
    be->conv_fwd = cpu_conv_fwd;
    be->conv_bwd_data = cpu_conv_bwd_data;
    be->conv_bwd_filter = cpu_conv_bwd_filter;
    be->bn_fwd_train = cpu_bn_fwd_train;
    be->bn_bwd = cpu_bn_bwd;
    be->bn_fold = cpu_bn_fold;
    be->bn_relu_fwd_train = cpu_bn_relu_fwd_train;
    be->bn_relu_bwd = cpu_bn_relu_bwd;
    be->act_fwd = cpu_act_fwd;
    be->add = cpu_add;
    be->gather = cpu_gather;
    be->gather_rows = cpu_gather_rows;
    be->gather_heads = cpu_gather_heads;
    be->timer_mark = cpu_timer_mark;
    be->timer_ms = cpu_timer_ms;
    be->act_bwd = cpu_act_bwd;
    be->dense_fwd = cpu_dense_fwd;
    be->dense_bwd = cpu_dense_bwd;
    be->pool_fwd = cpu_pool_fwd;
    be->pool_bwd = cpu_pool_bwd;
    be->chan_bias_fwd = cpu_chan_bias_fwd;
    be->chan_bias_bwd = cpu_chan_bias_bwd;
    be->policy_loss = cpu_policy_loss;
    be->value_target = cpu_value_target;
    be->value_loss = cpu_value_loss;
    be->legal_loss = cpu_legal_loss;
    be->moves_left_loss = cpu_moves_left_loss;
    be->sum_squares = cpu_sum_squares;
    be->sgd_step = cpu_sgd_step;
    if (c->dnnl) {
        be->pool_fwd_native = cpu_pool_fwd_native; /* the native layout of conv_fwd_act: NHWC */
        be->chan_bias_fwd_native = cpu_chan_bias_fwd_native;
        be->conv_fwd = dnnl_conv_fwd;
        be->conv_bwd_data = dnnl_conv_bwd_data;
        be->conv_bwd_filter = dnnl_conv_bwd_filter;
        be->conv_fwd_act = dnnl_conv_fwd_act;
    }
    if (c->wino) {
        c->base = *be;
        be->conv_fwd = wino_conv_fwd;
        be->conv_bwd_data = wino_conv_bwd_data;
        be->conv_bwd_filter = wino_conv_bwd_filter;
        be->conv_fwd_act = wino_conv_fwd_act;
        be->pool_fwd_native = cpu_pool_fwd_native;
        be->chan_bias_fwd_native = cpu_chan_bias_fwd_native;
    }
    return be;
}
