/* gemm.c - single-precision GEMM for the CPU backend: CBLAS (OpenBLAS) when
 * the build found one, a portable blocked C fallback otherwise.
 *
 * Owns: nn_gemm and nn_gemm_portable (declared in nn/backend.h). Does not own:
 * threading policy beyond what the BLAS library does itself.
 */
#include "nn/backend.h"

#include <string.h>

#include "compat/bits.h"

#ifdef KOMA_HAVE_CBLAS
#include <cblas.h>
#endif

void nn_gemm(int32_t transA, int32_t transB, int32_t M, int32_t N, int32_t K, float alpha,
             const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C,
             int32_t ldc) {
#ifdef KOMA_HAVE_CBLAS
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
