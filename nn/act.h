/* act.h - SiLU on the CPU, vectorised (internal to nn/).
 *
 * SiLU (swish) y = z * sigmoid(z) = z / (1 + exp(-z)), its derivative
 * sigmoid(z) * (1 + z * (1 - sigmoid(z))), over arrays (the CPU backend's
 * act_fwd / act_bwd) and on one native vector in registers (the Winograd
 * epilogue, nn/conv_wino.c). exp(-z) is computed in float: m = round(z /
 * ln 2), r = z - m ln 2 (two-constant reduction, |r| <= ln 2 / 2), exp(-r)
 * by a degree-5 minimax polynomial, times 2^-m built in the exponent bits;
 * then one division (a reciprocal estimate and a Newton step measured no
 * faster on AVX2). With GCC vector extensions the same code runs 16 lanes
 * (AVX-512), 8 (AVX/AVX2) or 4 (SSE, NEON; scalar code where the target has
 * none); other compilers (MSVC; or -DNN_ACT_SCALAR) run the same formula one
 * float at a time. Cost on AVX2: ~0.4 ns a float, ~12x less than expf.
 *
 * Accuracy (tests/nn/test_nn_act.c against double x / (1 + exp(-x))):
 * within 1e-6 relative (measured 2.3e-7) for z in [-87, +inf); below -87 the
 * exponent is clamped and y = silu(-87) = -1.4e-36 (the true value is smaller
 * in magnitude still: an absolute error under 2e-36). Never Inf or NaN for a
 * finite input: silu(+inf) = +inf, silu(-inf) = -1.4e-36 (the limit is 0),
 * a NaN in gives a NaN out (forward and backward), so a poisoned net still
 * shows. A denormal input gives z / 2 (rounded to the denormal grid).
 *
 * Owns: the formula and its vector code. Does not own: threading (the
 * caller splits arrays over its threads: every element's result is the same
 * whichever block or tail it falls in), ReLU (a compare; kept inline where it
 * is used).
 */
#ifndef KOMA_NN_ACT_H
#define KOMA_NN_ACT_H

#include <stdint.h>

/* y = silu(x + res) (res NULL: silu(x)); y may equal x or res. */
void nn_act_silu_fwd(const float *x, const float *res, int64_t n, float *y);
/* dx = dy * silu'(z); dx may equal dy or z. */
void nn_act_silu_bwd(const float *dy, const float *z, int64_t n, float *dx);
/* one value, the same formula (the array functions' result for it) */
float nn_act_silu1(float z);

/* Clamps (named for the tests): exp's argument stays in [-87, 87], so 2^-m
 * is a normal float and 1 + exp never overflows. */
#define NN_ACT_EXP_MAX 87.0f

#if defined(__GNUC__) && !defined(NN_ACT_SCALAR) /* NN_ACT_SCALAR: MSVC's code, for a check */
/* The target's native vector (the same width as nn/conv_wino.c's). */
#if defined(__AVX512F__)
#define NN_ACT_VW 16
#elif defined(__AVX__)
#define NN_ACT_VW 8
#else
#define NN_ACT_VW 4
#endif
typedef float nn_actv_t __attribute__((vector_size(NN_ACT_VW * 4)));
typedef int32_t nn_actvi_t __attribute__((vector_size(NN_ACT_VW * 4)));
typedef uint32_t nn_actvu_t __attribute__((vector_size(NN_ACT_VW * 4)));

/* max(a, b) and min(a, b) lane by lane, b where b is NaN (x86's max/min
 * return their second operand when either is NaN; GCC's vector extensions in
 * C have no ?: to say it, hence the intrinsics). */
#if defined(__AVX512F__)
#define NN_ACT_MAX_(a, b) _mm512_max_ps(a, b)
#define NN_ACT_MIN_(a, b) _mm512_min_ps(a, b)
#elif defined(__AVX__)
#define NN_ACT_MAX_(a, b) _mm256_max_ps(a, b)
#define NN_ACT_MIN_(a, b) _mm256_min_ps(a, b)
#elif defined(__SSE__)
#define NN_ACT_MAX_(a, b) _mm_max_ps(a, b)
#define NN_ACT_MIN_(a, b) _mm_min_ps(a, b)
#endif
#if defined(NN_ACT_MAX_)
#include <immintrin.h> /* the _mm*_max_ps above */
#else /* a comparison's mask: NaN fails it, b stays */
static inline __attribute__((always_inline)) nn_actv_t nn_act_sel_(nn_actvi_t m, nn_actv_t a, nn_actv_t b) {
    return (nn_actv_t)((m & (nn_actvi_t)a) | (~m & (nn_actvi_t)b));
}
#define NN_ACT_MAX_(a, b) nn_act_sel_((a) > (b), a, b)
#define NN_ACT_MIN_(a, b) nn_act_sel_((a) < (b), a, b)
#endif

/* exp(-z) for z in [-87, 87] (NaN: NaN): m = round(z / ln 2), r = z - m ln 2
 * (ln 2 in two parts), exp(-z) = 2^-m exp(-r), exp(-r) by a degree-5
 * polynomial (constant term 1; the others fitted to exp's relative minimax
 * on [-ln 2 / 2, ln 2 / 2]: 9.2e-8 in exact arithmetic) in Horner's form. */
static inline __attribute__((always_inline)) nn_actv_t nn_act_expnv_(nn_actv_t z) {
    const nn_actv_t magic = (nn_actv_t){0} + 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    nn_actv_t k = z * 1.44269504088896341f + magic;
    nn_actv_t m = k - magic; /* in [-126, 126] */
    nn_actv_t r = z - m * 0.693359375f - m * -2.12194440e-4f;
    nn_actv_t p = -8.290273137e-3f * r + 4.189816117e-2f;
    p = p * r - 1.666763872e-1f;
    p = p * r + 4.999914765e-1f;
    p = p * r - 9.999997020e-1f;
    p = p * r + 1.0f;
    /* 2^-m: k's low bits hold m (its exponent is the magic's) */
    nn_actvu_t e = ((nn_actvu_t)magic - (nn_actvu_t)k + 127u) << 23;
    return p * (nn_actv_t)e;
}

/* *v = silu(*v), lane by lane (by pointer: a 64-byte vector passed by value
 * has another ABI with and without AVX-512). */
static inline __attribute__((always_inline)) void nn_act_silu_v(nn_actv_t *v) {
    const nn_actv_t lo = (nn_actv_t){0} - NN_ACT_EXP_MAX, hi = -lo;
    nn_actv_t z = NN_ACT_MAX_(lo, *v); /* -inf .. -87 -> -87; NaN stays */
    *v = z / (1.0f + nn_act_expnv_(NN_ACT_MIN_(hi, z))); /* z > 87: 1 + exp(-87) == 1 */
}

/* *dy = *dy * silu'(*z) */
static inline __attribute__((always_inline)) void nn_act_silu_dv(nn_actv_t *dy, const nn_actv_t *z) {
    const nn_actv_t lo = (nn_actv_t){0} - NN_ACT_EXP_MAX, hi = -lo;
    nn_actv_t c = NN_ACT_MIN_(hi, NN_ACT_MAX_(lo, *z));
    nn_actv_t e = nn_act_expnv_(c), s = 1.0f / (1.0f + e); /* sigmoid(c); 1 - s = e s without cancelling */
    *dy = *dy * (s * (1.0f + c * (e * s)));
}
#endif

#endif
