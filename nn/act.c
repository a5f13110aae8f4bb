/* act.c - SiLU over arrays; see nn/act.h for the formula and its accuracy.
 *
 * Each array runs in native vectors; its tail goes through the same inlined
 * code on a zero-padded copy, so an element's result does not depend on where
 * an array (or a thread's share of it) begins or ends.
 */
#include "nn/act.h"

#include <string.h>

#if defined(__GNUC__) && !defined(NN_ACT_SCALAR)
void nn_act_silu_fwd(const float *x, const float *res, int64_t n, float *y) {
    int64_t i = 0;
    for (; i + NN_ACT_VW <= n; i += NN_ACT_VW) {
        nn_actv_t v, r;
        memcpy(&v, x + i, sizeof v); /* unaligned loads and stores */
        if (res) {
            memcpy(&r, res + i, sizeof r);
            v += r;
        }
        nn_act_silu_v(&v);
        memcpy(y + i, &v, sizeof v);
    }
    if (i < n) {
        size_t m = (size_t)(n - i);
        nn_actv_t v = {0}, r = {0};
        memcpy(&v, x + i, sizeof(float) * m);
        if (res) {
            memcpy(&r, res + i, sizeof(float) * m);
            v += r; /* not without: -0 + 0 would be +0 */
        }
        nn_act_silu_v(&v);
        memcpy(y + i, &v, sizeof(float) * m);
    }
}

void nn_act_silu_bwd(const float *dy, const float *z, int64_t n, float *dx) {
    int64_t i = 0;
    for (; i + NN_ACT_VW <= n; i += NN_ACT_VW) {
        nn_actv_t d, v;
        memcpy(&d, dy + i, sizeof d);
        memcpy(&v, z + i, sizeof v);
        nn_act_silu_dv(&d, &v);
        memcpy(dx + i, &d, sizeof d);
    }
    if (i < n) {
        size_t m = (size_t)(n - i);
        nn_actv_t d = {0}, v = {0};
        memcpy(&d, dy + i, sizeof(float) * m);
        memcpy(&v, z + i, sizeof(float) * m);
        nn_act_silu_dv(&d, &v);
        memcpy(dx + i, &d, sizeof(float) * m);
    }
}

float nn_act_silu1(float z) {
    float y;
    nn_act_silu_fwd(&z, NULL, 1, &y);
    return y;
}

#else /* one float at a time, the same steps */
/* x < lo ? lo : x, x > hi ? hi : x: NaN stays */
static float clamp_lo(float x, float lo) { return x < lo ? lo : x; }
static float clamp_hi(float x, float hi) { return x > hi ? hi : x; }

static float expnf_(float z) { /* exp(-z), z in [-87, 87] */
    const float magic = 12582912.0f;
    float k = z * 1.44269504088896341f + magic, m = k - magic;
    float r = z - m * 0.693359375f - m * -2.12194440e-4f;
    float p = -8.290273137e-3f * r + 4.189816117e-2f;
    p = p * r - 1.666763872e-1f;
    p = p * r + 4.999914765e-1f;
    p = p * r - 9.999997020e-1f;
    p = p * r + 1.0f;
    uint32_t kb, mb;
    memcpy(&kb, &k, 4);
    memcpy(&mb, &magic, 4);
    uint32_t eb = (mb - kb + 127u) << 23;
    float e;
    memcpy(&e, &eb, 4);
    return p * e;
}

float nn_act_silu1(float z) {
    z = clamp_lo(z, -NN_ACT_EXP_MAX);
    return z / (1.0f + expnf_(clamp_hi(z, NN_ACT_EXP_MAX)));
}

void nn_act_silu_fwd(const float *x, const float *res, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = nn_act_silu1(res ? x[i] + res[i] : x[i]);
}

void nn_act_silu_bwd(const float *dy, const float *z, int64_t n, float *dx) {
    for (int64_t i = 0; i < n; i++) {
        float c = clamp_hi(clamp_lo(z[i], -NN_ACT_EXP_MAX), NN_ACT_EXP_MAX);
        float e = expnf_(c), s = 1.0f / (1.0f + e);
        dx[i] = dy[i] * (s * (1.0f + c * (e * s)));
    }
}
#endif
