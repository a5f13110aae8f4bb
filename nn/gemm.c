/* gemm.c - single-precision GEMM for the CPU backend: CBLAS (OpenBLAS) when
 * the build found one, a portable blocked C fallback otherwise.
 *
 * Owns: nn_gemm and nn_gemm_portable (declared in nn/backend.h). Does not own:
 * threading policy beyond what the BLAS library does itself.
 */
#include "nn/backend.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/bits.h"
#include "compat/compat.h"

#ifdef KOMA_HAVE_CBLAS
#include <cblas.h>
#endif

#if defined(KOMA_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
/* OpenBLAS takes a work buffer (128 MiB + a page in Debian's 0.3.21) for each
 * call in progress, allocated when the number of calls in progress first
 * reaches a new high and kept, and one for each thread of its pool, allocated
 * when a threaded call first starts that thread (which also gets a malloc
 * arena of up to 128 MiB). When such an allocation fails it retries for ever:
 * 100% CPU, deaf to Ctrl-C. So before a call that may need new buffers, this
 * checks that they can be had right now. Where a caller's buffer cannot, the
 * call runs on the portable GEMM (slower but finite); where the pool's cannot,
 * OpenBLAS is kept on one thread from then on. A warning says so, once. */
enum { GEMM_OPENBLAS_BUF_MIB = NN_GEMM_BUFFER_MIB, GEMM_OPENBLAS_BUF_BYTES = (NN_GEMM_BUFFER_MIB << 20) + 8192,
       GEMM_ARENA_MIB = 128 };
static atomic_int g_inflight, g_peak, g_pool_ok, g_pool_denied, g_warned;
static atomic_int g_pool_max; /* the pool's size when nn_gemm_pool_settle ran; 0 before */

static void low_memory_warning(const char *what) {
    if (!atomic_exchange(&g_warned, 1))
        fprintf(stderr, "nn: out of memory for OpenBLAS's %d MiB work buffers: %s\n", GEMM_OPENBLAS_BUF_MIB, what);
}

/* Can n blocks of bytes be allocated at once right now? */
static int probe(int32_t n, size_t bytes) {
    void *p[64] = {0};
    int32_t i = 0, ok = 1;
    for (; i < n && i < 64 && ok; i++) ok = (p[i] = malloc(bytes)) != NULL;
    for (int32_t j = 0; j < i; j++) free(p[j]);
    return ok;
}

int nn_gemm_pool_denied(void) { return atomic_load(&g_pool_denied); }

int nn_gemm_room(int32_t buffers) { return probe(buffers, GEMM_OPENBLAS_BUF_BYTES); }

/* Room for the work buffers (and malloc arenas) of a pool of nt threads, the
 * caller's not counted: 1 (the pool is fine from now on), or 0 after keeping
 * OpenBLAS on one thread for good, with the warning. */
static int pool_room(int32_t nt) {
    if (probe(nt - 1, GEMM_OPENBLAS_BUF_BYTES + ((size_t)GEMM_ARENA_MIB << 20))) {
        atomic_store(&g_pool_ok, 1);
        return 1;
    }
    atomic_store(&g_pool_denied, 1);
    openblas_set_num_threads(1);
    low_memory_warning("OpenBLAS runs on one thread");
    return 0;
}

/* OpenBLAS starts its pool when the library loads, and each pool thread
 * allocates its work buffer as its first act, on its own schedule. Were the
 * program to take the address space first (a hash table sized to what is
 * left), that thread would spin for ever, and with it every threaded call
 * and exit() (which joins the pool). So, first thing in main: if the pool's
 * buffers can be had now, one threaded product waits until every pool thread
 * runs (and so holds its buffer); if they cannot, the pool is denied and the
 * product runs on the caller alone. */
int nn_gemm_pool_settle(void) {
    int32_t nt = openblas_get_num_threads();
    atomic_store(&g_pool_max, nt > 0 ? nt : 1);
    int denied = nt > 1 && !pool_room(nt);
    /* One product, while memory is plentiful: the caller takes its own work
     * buffer (kept for every later call), and with a pool it is big enough
     * that OpenBLAS splits it over every pool thread. */
    int32_t w = denied || 64 * nt < 256 ? 256 : 64 * nt > 1024 ? 1024 : 64 * nt;
    float *a = calloc((size_t)3 * w * w, sizeof(float));
    if (a) nn_gemm(0, 0, w, w, w, 1.0f, a, w, a + (size_t)w * w, w, 0.0f, a + (size_t)2 * w * w, w);
    free(a);
    return denied ? -1 : 0;
}

#if defined(__linux__) && defined(__GLIBC__)
/* Before any library's constructor: OpenBLAS starts its whole pool (one
 * thread per CPU, each with an 8 MiB stack) in its constructor, and exits the
 * program when a thread cannot be created. Under an address-space limit that
 * the libraries nearly fill (a CUDA build maps 650 MiB of cuBLAS alone; on a
 * 16-CPU H100 machine under `ulimit -v 1000000` it died at thread 5 of 16,
 * exit 130, before main), the program starts again at once with
 * OPENBLAS_NUM_THREADS set to the pool it has room for: a thread per
 * PREINIT_THREAD_MIB beyond PREINIT_RESERVE_MIB for the program, at least 1.
 * nn_gemm_pool_settle then checks the buffers as before. Nothing happens
 * without a limit, where the user chose a thread count (OPENBLAS_NUM_THREADS,
 * GOTO_NUM_THREADS, OMP_NUM_THREADS) or with KOMA_NO_REEXEC. The same start
 * again adds OMP_WAIT_POLICY=passive where libgomp is linked and the variable
 * is not set (one exec for both). Runs from
 * .preinit_array (executables only, glibc): environ is not set yet, so the
 * environment is envp and the only way to change it is execve. */
enum { PREINIT_RESERVE_MIB = 2 * NN_GEMM_BUFFER_MIB + 64,
       PREINIT_THREAD_MIB = GEMM_OPENBLAS_BUF_MIB + 1 + GEMM_ARENA_MIB + 8 };

int32_t nn_gemm_preinit_threads(int64_t limit, int64_t used, int32_t ncpu) {
    int64_t room = limit - used, reserve = (int64_t)PREINIT_RESERVE_MIB << 20, per = (int64_t)PREINIT_THREAD_MIB << 20;
    int64_t nt = room > reserve ? 1 + (room - reserve) / per : 1;
    return nt < ncpu ? (int32_t)nt : ncpu;
}

static void gemm_preinit(int argc, char **argv, char **envp) {
    (void)argc;
    if (compat_envp_get(envp, "KOMA_NO_REEXEC")) return;
    const char *add[3] = {NULL, NULL, NULL};
    int na = 0;
#if defined(KOMA_HAVE_DNNL) || defined(_OPENMP)
    /* libgomp reads it when it loads (nn_cpu_blas_reexec_if_generic says why): set here, the program
     * starts again before any library's constructor has run, not from main once all have (a second
     * whole start-up: `koma` answered `usi` twice as late) */
    add[na++] = "OMP_WAIT_POLICY=passive";
#endif
    char v[48];
    int64_t limit = compat_address_space_limit(), used = compat_address_space_used();
    int32_t ncpu = compat_cpu_count();
    if (!compat_envp_get(envp, "OPENBLAS_NUM_THREADS") && !compat_envp_get(envp, "GOTO_NUM_THREADS") &&
        !compat_envp_get(envp, "OMP_NUM_THREADS") && limit >= 0 && used >= 0 && ncpu > 1) {
        int32_t nt = nn_gemm_preinit_threads(limit, used, ncpu);
        snprintf(v, sizeof v, "OPENBLAS_NUM_THREADS=%d", (int)nt);
        if (nt < ncpu) add[na++] = v;
    }
    if (na > 0) compat_reexec_envp_vars(argv, envp, add); /* returns where nothing is to be added */
}
__attribute__((section(".preinit_array"), used)) static void (*const gemm_preinit_p)(int, char **, char **) = gemm_preinit;
#else
int32_t nn_gemm_preinit_threads(int64_t limit, int64_t used, int32_t ncpu) {
    (void)limit, (void)used;
    return ncpu;
}
#endif

int32_t nn_gemm_threads_cap(int32_t want) {
    if (atomic_load(&g_pool_denied)) return 1;
    /* more than the pool had at the start would start threads that allocate
     * their buffers later, unchecked, when memory may be short */
    int32_t max = atomic_load(&g_pool_max);
    if (max <= 0) max = compat_cpu_count();
    return want < 1 ? 1 : want < max ? want : max;
}

static int openblas_room_for_call(int32_t inflight) {
    int32_t nt = openblas_get_num_threads();
    if (nt > 1 && !atomic_load(&g_pool_ok)) pool_room(nt);
    if (inflight <= atomic_load(&g_peak)) return 1;
    if (!probe(1, GEMM_OPENBLAS_BUF_BYTES)) {
        low_memory_warning("matrix products run on the slower portable code");
        return 0;
    }
    int peak = atomic_load(&g_peak);
    while (inflight > peak && !atomic_compare_exchange_weak(&g_peak, &peak, inflight)) {
    }
    return 1;
}
#else
int nn_gemm_pool_denied(void) { return 0; }
int nn_gemm_room(int32_t buffers) {
    (void)buffers;
    return 1;
}
int nn_gemm_pool_settle(void) { return 0; }
int32_t nn_gemm_threads_cap(int32_t want) { return want < 1 ? 1 : want; }
int32_t nn_gemm_preinit_threads(int64_t limit, int64_t used, int32_t ncpu) {
    (void)limit, (void)used;
    return ncpu;
}
#endif

void nn_gemm(int32_t transA, int32_t transB, int32_t M, int32_t N, int32_t K, float alpha,
             const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C,
             int32_t ldc) {
#ifdef KOMA_HAVE_CBLAS
#ifdef OPENBLAS_VERSION
    int32_t inflight = atomic_fetch_add(&g_inflight, 1) + 1;
    if (!openblas_room_for_call(inflight)) {
        nn_gemm_portable(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        atomic_fetch_sub(&g_inflight, 1);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#ifdef OPENBLAS_VERSION
    atomic_fetch_sub(&g_inflight, 1);
#endif
#else
    nn_gemm_portable(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

/* Blocks: a panel of KB rows of op(B) (KB x NB floats) stays in L2 while MB
 * rows of C are updated from it; the inner loop runs over contiguous j and
 * vectorises. op(B) is packed row-major into a stack panel when transposed. */
enum { GEMM_MB = 32, GEMM_KB = 128, GEMM_NB = 256 };

void nn_gemm_portable(int32_t transA, int32_t transB, int32_t M, int32_t N, int32_t K, float alpha,
                      const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
                      float *C, int32_t ldc) {
    for (int32_t i = 0; i < M; i++) {
        float *c = C + (int64_t)i * ldc;
        if (beta == 0.0f) memset(c, 0, sizeof(float) * (size_t)N);
        else if (beta != 1.0f)
            for (int32_t j = 0; j < N; j++) c[j] *= beta;
    }
    if (K == 0 || alpha == 0.0f) return;
    static KOMA_THREAD_LOCAL float panel[GEMM_KB * GEMM_NB]; /* op(B)[k0.., j0..], row-major */
    for (int32_t j0 = 0; j0 < N; j0 += GEMM_NB) {
        int32_t nb = N - j0 < GEMM_NB ? N - j0 : GEMM_NB;
        for (int32_t k0 = 0; k0 < K; k0 += GEMM_KB) {
            int32_t kb = K - k0 < GEMM_KB ? K - k0 : GEMM_KB;
            for (int32_t k = 0; k < kb; k++) {
                float *dst = panel + (int64_t)k * nb;
                if (!transB) {
                    memcpy(dst, B + (int64_t)(k0 + k) * ldb + j0, sizeof(float) * (size_t)nb);
                } else {
                    for (int32_t j = 0; j < nb; j++) dst[j] = B[(int64_t)(j0 + j) * ldb + k0 + k];
                }
            }
            for (int32_t i0 = 0; i0 < M; i0 += GEMM_MB) {
                int32_t mb = M - i0 < GEMM_MB ? M - i0 : GEMM_MB;
                for (int32_t i = i0; i < i0 + mb; i++) {
                    float *restrict c = C + (int64_t)i * ldc + j0;
                    for (int32_t k = 0; k < kb; k++) {
                        float a = transA ? A[(int64_t)(k0 + k) * lda + i] : A[(int64_t)i * lda + k0 + k];
                        a *= alpha;
                        if (a == 0.0f) continue;
                        const float *restrict b = panel + (int64_t)k * nb;
                        for (int32_t j = 0; j < nb; j++) c[j] += a * b[j];
                    }
                }
            }
        }
    }
}
