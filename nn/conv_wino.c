/* conv_wino.c - Winograd F(3x3, 3x3) convolutions for the CPU backend; see
 * nn/conv_wino.h for what it owns and why F(3x3, 3x3).
 *
 * With d a 5x5 input tile, g a 3x3 filter and Y the 3x3 output tile:
 *     Y = A^T [ (G g G^T) (.) (B^T d B) ] A
 * summed over input channels inside the bracket, so each of the 25 points of
 * the bracket is a matrix product over channels. Backward data is the forward
 * with the filter turned 180 degrees and cin/cout swapped; backward filter is
 *     dg = G^T [ (A dY A^T) (.) (B^T d B) ] G
 * summed over tiles: again 25 matrix products, with the tiles as the inner
 * dimension.
 *
 * Layouts: positions are processed in chunks of CHUNK; a chunk's input is
 * copied into a zero-padded 11x11 NHWC buffer (channels rounded up to 16),
 * transformed into V[point][tile][channel], multiplied by the transformed
 * filters U[point][cin][cout] into M[point][tile][cout] and transformed back
 * into the output, where bias, residual and activation are applied.
 */
#include "nn/conv_wino.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "compat/compat.h"
#include "nn/act.h"
#include "nn/backend.h"
#include "nn/par.h"

/* 16 floats: one AVX-512 register where the build targets it; GCC splits it
 * into narrower ones otherwise. Values are v16 (naturally aligned, also on
 * the stack); memory is read and written through v16u (aligned(4): unaligned
 * moves), as buffers and rows need not be 64-byte aligned. */
typedef float v16 __attribute__((vector_size(64)));
typedef int32_t i16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));
#define LD(p) ((v16)(*(const v16u *)(const void *)(p)))
#define ST(p, v) (*(v16u *)(void *)(p) = (v))
#define R16(c) (((c) + 15) & ~15)

/* r[i][j] <-> r[j][i]: four rounds, each swapping one bit of the row index
 * with the same bit of the column index (16 two-vector shuffles a round). */
static inline __attribute__((always_inline)) void transpose16(v16 *r) {
    static const i16 lo8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                     hi8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
                     lo4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                     hi4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
                     lo2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                     hi2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                     lo1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                     hi1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
#define ROUND(S, LO, HI)                                   \
    for (int32_t i = 0; i < 16; i++)                       \
        if (!(i & (S))) {                                  \
            v16 a = r[i], b = r[i + (S)];                  \
            r[i] = __builtin_shuffle(a, b, LO);            \
            r[i + (S)] = __builtin_shuffle(a, b, HI);      \
        }
    ROUND(8, lo8, hi8)
    ROUND(4, lo4, hi4)
    ROUND(2, lo2, hi2)
    ROUND(1, lo1, hi1)
#undef ROUND
}

/* The target's own vector width, in floats: the kernel and the per-tile
 * transforms work in it (a v16 wider than the registers makes GCC go through
 * the stack: 10x slower on AVX2). */
#if defined(__AVX512F__)
#define NVW 16
#elif defined(__AVX__)
#define NVW 8
#else
#define NVW 4
#endif
typedef float vn __attribute__((vector_size(NVW * 4)));
typedef int32_t in_ __attribute__((vector_size(NVW * 4)));
typedef float vnu __attribute__((vector_size(NVW * 4), aligned(4)));
#define LDN(p) ((vn)(*(const vnu *)(const void *)(p)))
#define STN(p, v) (*(vnu *)(void *)(p) = (v))
_Static_assert(NVW == NN_ACT_VW, "nn/act.h's native vector is this file's");

/* The padded position of square q in an (11, 11, CP) buffer. */
#define PADQ(q) (((q) / 9 + 1) * PADW + (q) % 9 + 1)

enum {
    CHUNK = 8,     /* positions per chunk: 72 tiles, V and M ~0.5 MB each at 128 channels */
    TILES = 9,     /* 3x3 output tiles per 9x9 board */
    PTS = 25,      /* 5x5 points per tile */
    PADW = 11,     /* 9 + 2 padding */
    PV = 16 / NVW, /* native vectors per 16 columns */
    /* kernel rows: the MR x 32 accumulators stay in registers (AVX-512: 12 rows
     * = 24 of 32; with 16 registers, 3 rows = 12, B read from memory) */
    MR = NVW == 16 ? 12 : 3,
    MAX_THREADS = 64,
    FILTERS_KEPT = 32 /* forward convolutions whose transformed filters are kept (a net's layers) */
};

/* A forward convolution's transformed filters, kept while its weights (same
 * pointer, same XXH3 of the values) do not change: inference reuses them
 * from call to call; a training step's new weights are a miss. */
typedef struct {
    const float *wt;
    int32_t cin, cout;
    uint64_t h, used;
    float *u;     /* PTS x R16(cin) x cout */
    uint16_t *ub; /* the same in bf16 (filters_bf16) when ub_ok, made when first asked for */
    int32_t ub_ok;
} filters_t;

struct nn_wino {
    int32_t threads;
    float *u;
    size_t ucap;
    filters_t kept[FILTERS_KEPT];
    uint64_t clock;
    float *scr[MAX_THREADS];
    size_t cap[MAX_THREADS];
    char err[192];
};

nn_wino_t *nn_wino_new(int32_t threads) {
    nn_wino_t *w = calloc(1, sizeof(*w));
    if (!w) return NULL;
    w->threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    return w;
}

void nn_wino_free(nn_wino_t *w) {
    if (!w) return;
    compat_aligned_free(w->u);
    for (int32_t i = 0; i < FILTERS_KEPT; i++) compat_aligned_free(w->kept[i].u), compat_aligned_free(w->kept[i].ub);
    for (int32_t i = 0; i < MAX_THREADS; i++) compat_aligned_free(w->scr[i]);
    free(w);
}

const char *nn_wino_error(const nn_wino_t *w) { return w ? w->err : ""; }

int nn_wino_takes_fwd(int32_t k, int32_t cin, int32_t cout) { return k == 3 && cin > 0 && cout > 0 && cout % 16 == 0; }
int nn_wino_takes_bwd_data(int32_t k, int32_t cin, int32_t cout) { return nn_wino_takes_fwd(k, cout, cin); }
int nn_wino_takes_bwd_filter(int32_t k, int32_t cin, int32_t cout) { return k == 3 && cin > 0 && cout > 0; }

/* ---- memory ------------------------------------------------------------------ */
static float *grow(nn_wino_t *w, float **p, size_t *cap, size_t floats, const char *what) {
    if (*cap >= floats) return *p;
    compat_aligned_free(*p);
    *p = compat_aligned_alloc(64, (floats * sizeof(float) + 63) & ~(size_t)63);
    *cap = *p ? floats : 0;
    if (!*p)
        snprintf(w->err, sizeof w->err, "Winograd convolution: out of memory for %s (%.1f MiB)", what,
                 (double)floats * sizeof(float) / (1 << 20));
    return *p;
}

static int32_t team(const nn_wino_t *w, int32_t chunks) { return chunks < w->threads ? chunks : w->threads; }

/* Every thread's scratch before the parallel part, so that running out of
 * memory is one clean failure. */
static int scratch(nn_wino_t *w, int32_t nt, size_t floats) {
    for (int32_t i = 0; i < nt; i++)
        if (!grow(w, &w->scr[i], &w->cap[i], floats, "the per-thread buffers")) return -1;
    return 0;
}

/* ---- the matrix kernel ------------------------------------------------------------ */
/* C (mr x 16*nv) (+)= A (mr x K, element (r, k) at A[r*rsa + k*csa]) * B (K x
 * 16*nv, row k at B + k*ldb). Inlined with constant mr and nv, the
 * accumulators live in registers (AVX-512: 24 of 32; AVX2: 12 of 16). */
static inline __attribute__((always_inline)) void kern(int32_t mr, int32_t nv, int32_t K, const float *A,
                                                       int64_t rsa, int64_t csa, const float *B, int64_t ldb,
                                                       float *C, int64_t ldc, int32_t acc) {
    vn c[MR][2 * PV];
    for (int32_t r = 0; r < MR; r++)
        for (int32_t j = 0; j < 2 * PV; j++) c[r][j] = (vn){0};
    for (int32_t k = 0; k < K; k++) {
        const float *bk = B + k * ldb, *a = A + k * csa;
        vn b[2 * PV];
        for (int32_t j = 0; j < 2 * PV; j++) b[j] = j < nv * PV ? LDN(bk + j * NVW) : b[0];
#pragma GCC unroll 12
        for (int32_t r = 0; r < MR; r++) {
            if (r >= mr) break;
            float s = a[r * rsa];
            for (int32_t j = 0; j < 2 * PV; j++)
                if (j < nv * PV) c[r][j] += s * b[j];
        }
    }
    for (int32_t r = 0; r < mr; r++) {
        float *cr = C + r * ldc;
        for (int32_t j = 0; j < nv * PV; j++) STN(cr + NVW * j, acc ? c[r][j] + LDN(cr + NVW * j) : c[r][j]);
    }
}

static __attribute__((noinline)) void kern_mrx32(int32_t K, const float *A, int64_t rsa, int64_t csa,
                                                 const float *B, int64_t ldb, float *C, int64_t ldc, int32_t acc) {
    kern(MR, 2, K, A, rsa, csa, B, ldb, C, ldc, acc);
}
static __attribute__((noinline)) void kern_mrx16(int32_t K, const float *A, int64_t rsa, int64_t csa,
                                                 const float *B, int64_t ldb, float *C, int64_t ldc, int32_t acc) {
    kern(MR, 1, K, A, rsa, csa, B, ldb, C, ldc, acc);
}
static __attribute__((noinline)) void kern_tail(int32_t mr, int32_t nv, int32_t K, const float *A, int64_t rsa,
                                                int64_t csa, const float *B, int64_t ldb, float *C, int64_t ldc,
                                                int32_t acc) {
    kern(mr, nv, K, A, rsa, csa, B, ldb, C, ldc, acc);
}

/* C (M x N) (+)= A (M x K, strides rsa, csa) * B (K x N, ldb); N % 16 == 0.
 * Column panels of 32 outer, so B's panel (K x 32) stays in L1 across rows. */
static void gemm(int32_t M, int32_t N, int32_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                 int64_t ldb, float *C, int64_t ldc, int32_t acc) {
    for (int32_t n0 = 0; n0 < N; n0 += 32) {
        int32_t nv = N - n0 >= 32 ? 2 : 1;
        for (int32_t m0 = 0; m0 < M; m0 += MR) {
            int32_t mr = M - m0 < MR ? M - m0 : MR;
            const float *a = A + m0 * rsa;
            float *c = C + m0 * ldc + n0;
            if (mr == MR && nv == 2) kern_mrx32(K, a, rsa, csa, B + n0, ldb, c, ldc, acc);
            else if (mr == MR) kern_mrx16(K, a, rsa, csa, B + n0, ldb, c, ldc, acc);
            else kern_tail(mr, nv, K, a, rsa, csa, B + n0, ldb, c, ldc, acc);
        }
    }
}

/* ---- the bf16 kernel (AVX512_BF16) -------------------------------------------------- */
/* Inference only (NN_WINO_BF16): V and U rounded to bf16 (round to nearest
 * even), their products summed in fp32 by vdpbf16ps, two channels per
 * instruction: C (M x N) = A (M x K, bf16, row stride lda) * B (K/2 x N x 2:
 * rows k and k+1 interleaved), K even, N % 16 == 0. Compiled for its own
 * target whatever the build's, taken only where the CPU has the instructions
 * (nn_wino_bf16_supported), so one binary runs on AVX2-only CPUs too. */
#if NN_WINO_HAVE_BF16
#include <immintrin.h>
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
enum { MRB = 12 };

BF16_TARGET static inline __attribute__((always_inline)) void kern_bf16(int32_t mr, int32_t nv, int32_t K2,
                                                                        const uint16_t *A, int64_t lda,
                                                                        const uint16_t *B, int64_t N, float *C,
                                                                        int64_t ldc) {
    __m512 c[MRB][2];
    for (int32_t r = 0; r < MRB; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
    for (int32_t k = 0; k < K2; k++) {
        const uint16_t *bk = B + (size_t)k * N * 2;
        __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)bk);
        __m512bh b1 = nv > 1 ? (__m512bh)_mm512_loadu_si512((const void *)(bk + 32)) : b0;
#pragma GCC unroll 12
        for (int32_t r = 0; r < MRB; r++) {
            if (r >= mr) break;
            int32_t pair;
            memcpy(&pair, A + r * lda + 2 * k, sizeof pair);
            __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
            c[r][0] = _mm512_dpbf16_ps(c[r][0], a, b0);
            if (nv > 1) c[r][1] = _mm512_dpbf16_ps(c[r][1], a, b1);
        }
    }
    for (int32_t r = 0; r < mr; r++) {
        _mm512_storeu_ps(C + r * ldc, c[r][0]);
        if (nv > 1) _mm512_storeu_ps(C + r * ldc + 16, c[r][1]);
    }
}

BF16_TARGET static __attribute__((noinline)) void kern_bf16_full(int32_t K2, const uint16_t *A, int64_t lda,
                                                                 const uint16_t *B, int64_t N, float *C, int64_t ldc) {
    kern_bf16(MRB, 2, K2, A, lda, B, N, C, ldc);
}
BF16_TARGET static __attribute__((noinline)) void kern_bf16_tail(int32_t mr, int32_t nv, int32_t K2, const uint16_t *A,
                                                                 int64_t lda, const uint16_t *B, int64_t N, float *C,
                                                                 int64_t ldc) {
    kern_bf16(mr, nv, K2, A, lda, B, N, C, ldc);
}

/* C (M x N) = A * B as above; B's panel of 32 columns starts at B + 2 * n0. */
BF16_TARGET static void gemm_bf16(int32_t M, int32_t N, int32_t K, const uint16_t *A, int64_t lda, const uint16_t *B,
                                  float *C, int64_t ldc) {
    for (int32_t n0 = 0; n0 < N; n0 += 32) {
        int32_t nv = N - n0 >= 32 ? 2 : 1;
        for (int32_t m0 = 0; m0 < M; m0 += MRB) {
            int32_t mr = M - m0 < MRB ? M - m0 : MRB;
            if (mr == MRB && nv == 2) kern_bf16_full(K / 2, A + m0 * lda, lda, B + 2 * n0, N, C + m0 * ldc + n0, ldc);
            else kern_bf16_tail(mr, nv, K / 2, A + m0 * lda, lda, B + 2 * n0, N, C + m0 * ldc + n0, ldc);
        }
    }
}

/* dst (n bf16) = src (n floats) rounded to nearest even; n % 16 == 0. */
BF16_TARGET static void to_bf16(const float *src, size_t n, uint16_t *dst) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
        _mm512_storeu_si512((void *)(dst + i), (__m512i)h);
    }
    for (; i < n; i += 16) {
        __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), (__m256i)h);
    }
}

int nn_wino_bf16_supported(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
    }
    return known;
}
#else
int nn_wino_bf16_supported(void) { return 0; }
#endif

/* ub[p][k/2][col][k%2] = U[p][k][col] in bf16 (rows KP, cols % 16 == 0). */
static void filters_bf16(const float *U, int32_t KP, int32_t cols, uint16_t *ub) {
    for (int32_t p = 0; p < PTS; p++)
        for (int32_t k = 0; k < KP; k++)
            for (int32_t c = 0; c < cols; c++) {
                uint32_t b;
                memcpy(&b, U + ((size_t)p * KP + k) * cols + c, sizeof b);
                b += 0x7fffu + ((b >> 16) & 1u); /* round to nearest even (finite weights) */
                ub[(((size_t)p * KP + (k & ~1)) * cols + (size_t)c * 2) + (k & 1)] = (uint16_t)(b >> 16);
            }
}

/* ---- transforms -------------------------------------------------------------------- */
/* U[p][r][col] (R16(rows) x cols, zero rows past `rows`) = G g G^T of the
 * filter at (row r, column col): fwd: rows = cin, cols = cout, g = w[col][r];
 * flip (backward data): rows = cout, cols = cin, g = w[r][col] turned 180.
 * cols % 16 == 0: 16 columns at a time. */
static void filter_transform(const float *wt, int32_t rows, int32_t cols, int32_t flip, float *U) {
    int32_t KP = R16(rows);
    int64_t rs = flip ? (int64_t)cols * 9 : 9, cs = flip ? 9 : (int64_t)rows * 9; /* strides in wt */
    for (int32_t p = 0; p < PTS; p++) /* the padding rows */
        memset(U + ((size_t)p * KP + rows) * cols, 0, sizeof(float) * (size_t)(KP - rows) * cols);
    for (int32_t r = 0; r < rows; r++)
        for (int32_t c0 = 0; c0 < cols; c0 += 16) {
            const float *src = wt + r * rs + c0 * cs;
            v16 g[3][3], t[5][3];
            for (int32_t i = 0; i < 9; i++)
                for (int32_t l = 0; l < 16; l++) g[i / 3][i % 3][l] = src[l * cs + (flip ? 8 - i : i)];
            for (int32_t j = 0; j < 3; j++) { /* t = G g */
                t[0][j] = 0.5f * g[0][j];
                t[1][j] = -0.5f * (g[0][j] + g[1][j] + g[2][j]);
                t[2][j] = (g[1][j] - g[0][j] - g[2][j]) * (1.0f / 6);
                t[3][j] = g[0][j] * (1.0f / 6) + g[1][j] * (1.0f / 3) + g[2][j] * (2.0f / 3);
                t[4][j] = g[2][j];
            }
            for (int32_t i = 0; i < 5; i++) { /* (G g) G^T */
                v16 u[5] = {0.5f * t[i][0], -0.5f * (t[i][0] + t[i][1] + t[i][2]),
                            (t[i][1] - t[i][0] - t[i][2]) * (1.0f / 6),
                            t[i][0] * (1.0f / 6) + t[i][1] * (1.0f / 3) + t[i][2] * (2.0f / 3), t[i][2]};
                for (int32_t j = 0; j < 5; j++) ST(U + ((size_t)(i * 5 + j) * KP + r) * cols + c0, u[j]);
            }
        }
}

/* xp (nb, 11, 11, CP) = the chunk's positions [b0, b0+nb) of x (C channels,
 * NHWC or NCHW), zero-padded around the board and past C. */
static void pad_input(const float *x, int32_t nhwc, int32_t C, int32_t CP, int32_t b0, int32_t nb, float *xp) {
    memset(xp, 0, sizeof(float) * (size_t)nb * PADW * PADW * CP);
    for (int32_t b = 0; b < nb; b++) {
        float *xb = xp + (size_t)b * PADW * PADW * CP;
        if (nhwc) {
            const float *src = x + (size_t)(b0 + b) * NN_HW * C;
            for (int32_t q = 0; q < NN_HW; q++)
                memcpy(xb + PADQ(q) * CP, src + (size_t)q * C, sizeof(float) * C);
        } else {
            const float *src = x + (size_t)(b0 + b) * C * NN_HW;
            int32_t c0 = 0;
            for (; c0 + 16 <= C; c0 += 16) { /* 16 planes x 16 squares through registers */
                const float *s0 = src + (size_t)c0 * NN_HW;
                for (int32_t q0 = 0; q0 + 16 <= NN_HW; q0 += 16) {
                    v16 r[16];
                    for (int32_t l = 0; l < 16; l++) r[l] = LD(s0 + l * NN_HW + q0);
                    transpose16(r);
                    for (int32_t k = 0; k < 16; k++) ST(xb + PADQ(q0 + k) * CP + c0, r[k]);
                }
                for (int32_t l = 0; l < 16; l++) xb[PADQ(NN_HW - 1) * CP + c0 + l] = s0[l * NN_HW + NN_HW - 1];
            }
            for (int32_t c = c0; c < C; c++)
                for (int32_t q = 0; q < NN_HW; q++) xb[PADQ(q) * CP + c] = src[c * NN_HW + q];
        }
    }
}

/* V[p][t][CP] = B^T d B for every tile t of the chunk (T = nb * 9). */
static void input_transform(const float *xp, int32_t nb, int32_t CP, float *V) {
    int32_t T = nb * TILES;
    for (int32_t t = 0; t < T; t++) {
        int32_t b = t / TILES, ty = t % TILES / 3, tx = t % 3;
        const float *base = xp + ((size_t)(b * PADW + 3 * ty) * PADW + 3 * tx) * CP;
        for (int32_t c0 = 0; c0 < CP; c0 += NVW) {
            vn s[5][5];
            for (int32_t j = 0; j < 5; j++) { /* s = B^T d, column by column */
                vn d0 = LDN(base + (0 * PADW + j) * CP + c0), d1 = LDN(base + (1 * PADW + j) * CP + c0),
                    d2 = LDN(base + (2 * PADW + j) * CP + c0), d3 = LDN(base + (3 * PADW + j) * CP + c0),
                    d4 = LDN(base + (4 * PADW + j) * CP + c0);
                s[0][j] = 2 * (d0 - d2) - d1 + d3;
                s[1][j] = d3 - 2 * d1 - d2;
                s[2][j] = 2 * d1 - 3 * d2 + d3;
                s[3][j] = d3 - d1;
                s[4][j] = 2 * (d1 - d3) - d2 + d4;
            }
            for (int32_t i = 0; i < 5; i++) { /* (B^T d) B, row by row */
                vn e0 = s[i][0], e1 = s[i][1], e2 = s[i][2], e3 = s[i][3], e4 = s[i][4];
                vn r[5] = {2 * (e0 - e2) - e1 + e3, e3 - 2 * e1 - e2, 2 * e1 - 3 * e2 + e3, e3 - e1,
                            2 * (e1 - e3) - e2 + e4};
                for (int32_t j = 0; j < 5; j++) STN(V + ((size_t)(i * 5 + j) * T + t) * CP + c0, r[j]);
            }
        }
    }
}

typedef struct {
    const float *bias, *res;
    int32_t act, accumulate, nhwc;
    int32_t bf16; /* the products in bf16 (w->ub) */
} epilogue_t;

/* in the native width (by pointer: a 64-byte vector passed by value has a
 * different ABI with and without AVX-512); SiLU: nn/act.h */
static inline void activate(vn *v, int32_t act) {
    if (act == NN_ACT_RELU) *v = (vn)((in_)*v & (*v > (vn){0})); /* max(v, 0) */
    else if (act == NN_ACT_SILU) nn_act_silu_v(v);
}

/* NCHW out's chunk [b0, b0+nb) = epilogue(tmp), tmp (nb, 81, C) NHWC with the
 * bias added, C % 16 == 0: 16 squares x 16 channels at a time through
 * registers, so that NCHW is written in order. */
static void nchw_epilogue(const float *tmp, int32_t nb, int32_t C, int32_t b0, const epilogue_t *ep, float *out) {
    for (int32_t b = 0; b < nb; b++)
        for (int32_t c0 = 0; c0 < C; c0 += 16) {
            const float *t0 = tmp + (size_t)b * NN_HW * C + c0;
            size_t o0 = ((size_t)(b0 + b) * C + c0) * NN_HW;
            for (int32_t q0 = 0; q0 + 16 <= NN_HW; q0 += 16) {
                v16 r[16];
                for (int32_t k = 0; k < 16; k++) r[k] = LD(t0 + (size_t)(q0 + k) * C);
                transpose16(r);
                for (int32_t l = 0; l < 16; l++) {
                    size_t o = o0 + (size_t)l * NN_HW + q0;
                    v16 v = r[l];
                    if (ep->res) v += LD(ep->res + o);
                    if (ep->accumulate) v += LD(out + o);
                    vn w[PV];
                    memcpy(w, &v, sizeof w);
                    for (int32_t j = 0; j < PV; j++) activate(&w[j], ep->act);
                    memcpy(&v, w, sizeof w);
                    ST(out + o, v);
                }
            }
            vn w[PV]; /* the last square: its 16 channels, one register's worth */
            for (int32_t l = 0; l < 16; l++) {
                size_t o = o0 + (size_t)l * NN_HW + NN_HW - 1;
                float v = t0[(size_t)(NN_HW - 1) * C + l];
                if (ep->res) v += ep->res[o];
                if (ep->accumulate) v += out[o];
                w[l / NVW][l % NVW] = v;
            }
            for (int32_t j = 0; j < PV; j++) activate(&w[j], ep->act);
            for (int32_t l = 0; l < 16; l++) out[o0 + (size_t)l * NN_HW + NN_HW - 1] = w[l / NVW][l % NVW];
        }
}

/* out's chunk [b0, b0+nb) = epilogue(A^T M A) from M[p][t][C]; NCHW goes
 * through tmp (nb, 81, C). */
static void output_transform(const float *M, int32_t nb, int32_t C, int32_t b0, const epilogue_t *ep, float *out,
                             float *tmp) {
    int32_t T = nb * TILES;
    for (int32_t t = 0; t < T; t++) {
        int32_t b = b0 + t / TILES, ty = t % TILES / 3, tx = t % 3;
        for (int32_t c0 = 0; c0 < C; c0 += NVW) {
            vn s[3][5];
            for (int32_t j = 0; j < 5; j++) { /* s = A^T M, column by column */
                vn m0 = LDN(M + ((size_t)(0 * 5 + j) * T + t) * C + c0), m1 = LDN(M + ((size_t)(1 * 5 + j) * T + t) * C + c0),
                    m2 = LDN(M + ((size_t)(2 * 5 + j) * T + t) * C + c0), m3 = LDN(M + ((size_t)(3 * 5 + j) * T + t) * C + c0),
                    m4 = LDN(M + ((size_t)(4 * 5 + j) * T + t) * C + c0);
                s[0][j] = m0 + m1 + m2 + m3;
                s[1][j] = m1 - m2 + 2 * m3;
                s[2][j] = m1 + m2 + 4 * m3 + m4;
            }
            vn bias = ep->bias ? LDN(ep->bias + c0) : (vn){0};
            for (int32_t i = 0; i < 3; i++) {
                vn y[3] = {s[i][0] + s[i][1] + s[i][2] + s[i][3], s[i][1] - s[i][2] + 2 * s[i][3],
                            s[i][1] + s[i][2] + 4 * s[i][3] + s[i][4]};
                for (int32_t j = 0; j < 3; j++) {
                    int32_t q = (3 * ty + i) * 9 + 3 * tx + j;
                    vn v = y[j] + bias;
                    if (!ep->nhwc) {
                        STN(tmp + ((size_t)(b - b0) * NN_HW + q) * C + c0, v);
                        continue;
                    }
                    float *o = out + ((size_t)b * NN_HW + q) * C + c0;
                    if (ep->res) v += LDN(ep->res + ((size_t)b * NN_HW + q) * C + c0);
                    if (ep->accumulate) v += LDN(o);
                    activate(&v, ep->act);
                    STN(o, v);
                }
            }
        }
    }
    if (!ep->nhwc) nchw_epilogue(tmp, nb, C, b0, ep, out);
}

/* out (B, C2) = epilogue(conv(in (B, C1), U)) with U from filter_transform. */
static int run_fwd(nn_wino_t *w, const float *in, int32_t in_nhwc, int32_t C1, int32_t C2, int32_t B,
                   const epilogue_t *ep, const float *U, const uint16_t *ub, float *out) {
    int32_t CP = R16(C1), T = CHUNK * TILES, chunks = (B + CHUNK - 1) / CHUNK, nt = team(w, chunks);
    size_t xp_n = (size_t)CHUNK * PADW * PADW * CP, v_n = (size_t)PTS * T * CP, m_n = (size_t)PTS * T * C2,
           o_n = ep->nhwc ? 0 : (size_t)CHUNK * NN_HW * C2;
    if (scratch(w, nt, xp_n + v_n + m_n + o_n)) return -1;
    NN_OMP(omp parallel for num_threads(nt) schedule(dynamic, 1))
    for (int32_t ch = 0; ch < chunks; ch++) {
        float *xp = w->scr[NN_THREAD_NUM()];
        float *V = xp + xp_n, *M = V + v_n;
        int32_t b0 = ch * CHUNK, nb = B - b0 < CHUNK ? B - b0 : CHUNK, tn = nb * TILES;
        pad_input(in, in_nhwc, C1, CP, b0, nb, xp);
        input_transform(xp, nb, CP, V);
#if NN_WINO_HAVE_BF16
        if (ep->bf16) { /* V in bf16 where xp was (PTS * tn * CP halves fit its nb * 121 * CP floats) */
            uint16_t *vb = (uint16_t *)(void *)xp;
            to_bf16(V, (size_t)PTS * tn * CP, vb);
            for (int32_t p = 0; p < PTS; p++)
                gemm_bf16(tn, C2, CP, vb + (size_t)p * tn * CP, CP, ub + (size_t)p * CP * C2, M + (size_t)p * tn * C2,
                          C2);
        } else
#endif
            for (int32_t p = 0; p < PTS; p++)
                gemm(tn, C2, CP, V + (size_t)p * tn * CP, CP, 1, U + (size_t)p * CP * C2, C2, M + (size_t)p * tn * C2,
                     C2, 0);
        output_transform(M, nb, C2, b0, ep, out, M + m_n);
    }
    return 0;
}

/* The transformed filters of wt (cin -> cout), from the kept ones when wt's
 * values are those they were made from, else made now into the entry of wt
 * (or the least recently used one); bf16: also in bf16. NULL when out of
 * memory (w->err says so). */
static filters_t *kept_filters(nn_wino_t *w, const float *wt, int32_t cin, int32_t cout, int32_t bf16) {
    uint64_t h = XXH3_64bits(wt, sizeof(float) * (size_t)cout * cin * 9);
    filters_t *f = NULL;
    for (int32_t i = 0; i < FILTERS_KEPT && !f; i++)
        if (w->kept[i].wt == wt && w->kept[i].cin == cin && w->kept[i].cout == cout) f = &w->kept[i];
    int32_t hit = f && f->h == h;
    if (!f) { /* a free entry, else the least recently used */
        f = &w->kept[0];
        for (int32_t i = 1; i < FILTERS_KEPT && f->wt; i++)
            if (!w->kept[i].wt || w->kept[i].used < f->used) f = &w->kept[i];
        compat_aligned_free(f->u), compat_aligned_free(f->ub);
        *f = (filters_t){0};
    }
    f->used = ++w->clock;
    size_t n = (size_t)PTS * R16(cin) * cout;
    if (!f->u) f->u = compat_aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
    if (bf16 && !f->ub) f->ub = compat_aligned_alloc(64, (n * sizeof(uint16_t) + 63) & ~(size_t)63);
    if (!f->u || (bf16 && !f->ub)) {
        compat_aligned_free(f->u), compat_aligned_free(f->ub);
        *f = (filters_t){0};
        snprintf(w->err, sizeof w->err, "Winograd convolution: out of memory for the transformed filters (%.1f MiB)",
                 (double)n * 6 / (1 << 20));
        return NULL;
    }
    if (!hit) {
        f->wt = wt, f->cin = cin, f->cout = cout, f->h = h;
        filter_transform(wt, cin, cout, 0, f->u);
        f->ub_ok = 0;
    }
    if (bf16 && !f->ub_ok) {
        filters_bf16(f->u, R16(cin), cout, f->ub);
        f->ub_ok = 1;
    }
    return f;
}

int nn_wino_conv_fwd(nn_wino_t *w, const float *x, const float *wt, const float *bias, const float *res,
                     int32_t act, int32_t B, int32_t cin, int32_t cout, float *y, int32_t layout) {
    if (!nn_wino_takes_fwd(3, cin, cout)) {
        snprintf(w->err, sizeof w->err, "Winograd convolution: %d -> %d channels not taken", cin, cout);
        return -1;
    }
    filters_t *f = kept_filters(w, wt, cin, cout, (layout & NN_WINO_BF16) && nn_wino_bf16_supported());
    if (!f) return -1;
    int32_t bf16 = (layout & NN_WINO_BF16) && f->ub_ok;
    epilogue_t ep = {bias, res, act, 0, (layout & NN_CONV_Y_NATIVE) != 0, bf16};
    return run_fwd(w, x, (layout & NN_CONV_X_NATIVE) != 0, cin, cout, B, &ep, f->u, bf16 ? f->ub : NULL, y);
}

int nn_wino_conv_bwd_data(nn_wino_t *w, const float *dy, const float *wt, int32_t B, int32_t cin,
                          int32_t cout, float *dx, int32_t accumulate) {
    if (!nn_wino_takes_bwd_data(3, cin, cout)) {
        snprintf(w->err, sizeof w->err, "Winograd convolution: backward data to %d channels not taken", cin);
        return -1;
    }
    if (!grow(w, &w->u, &w->ucap, (size_t)PTS * R16(cout) * cin, "the transformed filters")) return -1;
    filter_transform(wt, cout, cin, 1, w->u);
    epilogue_t ep = {NULL, NULL, -1, accumulate != 0, 0, 0};
    return run_fwd(w, dy, 0, cout, cin, B, &ep, w->u, NULL, dx);
}

/* W[p][t][CP] = A dY A^T for every tile of the chunk, from dyp (nb, 11, 11,
 * CP): the chunk's dy as pad_input lays it out (the board at offset 1, 1). */
static void grad_transform(const float *dyp, int32_t nb, int32_t CP, float *W) {
    int32_t T = nb * TILES;
    for (int32_t t = 0; t < T; t++) {
        int32_t b = t / TILES, ty = t % TILES / 3, tx = t % 3;
        const float *base = dyp + ((size_t)(b * PADW + 3 * ty + 1) * PADW + 3 * tx + 1) * CP;
        for (int32_t c0 = 0; c0 < CP; c0 += NVW) {
            vn g[3][3];
            for (int32_t i = 0; i < 3; i++)
                for (int32_t j = 0; j < 3; j++) g[i][j] = LDN(base + (i * PADW + j) * CP + c0);
            vn s[5][3];
            for (int32_t j = 0; j < 3; j++) { /* s = A dY */
                s[0][j] = g[0][j];
                s[1][j] = g[0][j] + g[1][j] + g[2][j];
                s[2][j] = g[0][j] - g[1][j] + g[2][j];
                s[3][j] = g[0][j] + 2 * g[1][j] + 4 * g[2][j];
                s[4][j] = g[2][j];
            }
            for (int32_t i = 0; i < 5; i++) { /* (A dY) A^T */
                vn r[5] = {s[i][0], s[i][0] + s[i][1] + s[i][2], s[i][0] - s[i][1] + s[i][2],
                            s[i][0] + 2 * s[i][1] + 4 * s[i][2], s[i][2]};
                for (int32_t j = 0; j < 5; j++) STN(W + ((size_t)(i * 5 + j) * T + t) * CP + c0, r[j]);
            }
        }
    }
}

int nn_wino_conv_bwd_filter(nn_wino_t *w, const float *x, const float *dy, int32_t B, int32_t cin,
                            int32_t cout, float *dw, float *dbias) {
    if (!nn_wino_takes_bwd_filter(3, cin, cout)) {
        snprintf(w->err, sizeof w->err, "Winograd convolution: backward filter %d -> %d not taken", cin, cout);
        return -1;
    }
    int32_t CP = R16(cin), OP = R16(cout), T = CHUNK * TILES, chunks = (B + CHUNK - 1) / CHUNK, nt = team(w, chunks);
    size_t xp_n = (size_t)CHUNK * PADW * PADW * (CP > OP ? CP : OP), v_n = (size_t)PTS * T * CP,
           w_n = (size_t)PTS * T * OP, z_n = (size_t)PTS * OP * CP;
    if (scratch(w, nt, xp_n + v_n + w_n + z_n)) return -1;
    NN_OMP(omp parallel num_threads(nt))
    {
        float *xp = w->scr[NN_THREAD_NUM()];
        float *V = xp + xp_n, *W = V + v_n, *Z = W + w_n;
        memset(Z, 0, sizeof(float) * z_n);
        NN_OMP(omp for schedule(dynamic, 1))
        for (int32_t ch = 0; ch < chunks; ch++) {
            int32_t b0 = ch * CHUNK, nb = B - b0 < CHUNK ? B - b0 : CHUNK, tn = nb * TILES;
            pad_input(x, 0, cin, CP, b0, nb, xp);
            input_transform(xp, nb, CP, V);
            pad_input(dy, 0, cout, OP, b0, nb, xp); /* xp is free again */
            grad_transform(xp, nb, OP, W);
            /* Z[p] (OP x CP) += W[p]^T (OP x tn) * V[p] (tn x CP) */
            for (int32_t p = 0; p < PTS; p++)
                gemm(OP, CP, tn, W + (size_t)p * tn * OP, 1, OP, V + (size_t)p * tn * CP, CP, Z + (size_t)p * OP * CP, CP, 1);
        }
    }
    /* the threads' sums, then dg = G^T Z G for every (cout, cin) */
    float *Z = w->scr[0] + xp_n + v_n + w_n;
    for (int32_t i = 1; i < nt; i++) {
        const float *Zi = w->scr[i] + xp_n + v_n + w_n;
        for (size_t j = 0; j < z_n; j++) Z[j] += Zi[j];
    }
    static const float GT[3][5] = {{0.5f, -0.5f, -1.0f / 6, 1.0f / 6, 0.0f},
                                   {0.0f, -0.5f, 1.0f / 6, 1.0f / 3, 0.0f},
                                   {0.0f, -0.5f, -1.0f / 6, 2.0f / 3, 1.0f}};
    for (int32_t co = 0; co < cout; co++)
        for (int32_t ci = 0; ci < cin; ci++) {
            float z[5][5], t[3][5];
            for (int32_t p = 0; p < PTS; p++) z[p / 5][p % 5] = Z[((size_t)p * OP + co) * CP + ci];
            for (int32_t kh = 0; kh < 3; kh++)
                for (int32_t j = 0; j < 5; j++) {
                    float s = 0;
                    for (int32_t i = 0; i < 5; i++) s += GT[kh][i] * z[i][j];
                    t[kh][j] = s;
                }
            float *d = dw + ((size_t)co * cin + ci) * 9;
            for (int32_t kh = 0; kh < 3; kh++)
                for (int32_t kw = 0; kw < 3; kw++) {
                    float s = 0;
                    for (int32_t j = 0; j < 5; j++) s += t[kh][j] * GT[kw][j];
                    d[kh * 3 + kw] = s;
                }
        }
    if (dbias)
        for (int32_t co = 0; co < cout; co++) {
            double s = 0;
            for (int32_t b = 0; b < B; b++)
                for (int32_t q = 0; q < NN_HW; q++) s += dy[((size_t)b * cout + co) * NN_HW + q];
            dbias[co] = (float)s;
        }
    return 0;
}
