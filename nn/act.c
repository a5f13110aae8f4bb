/* act.c - SiLU over arrays; see nn/act.h for the formula and its accuracy.
 *
 * Each array is run in native vectors; its tail goes through the same
 * arithmetic on a zero-padded copy, so an element's result does not depend on where an
 * array (or a thread's share of it) begins or ends.
 */
#include "nn/act.h"

#include <string.h>

#if defined(__GNUC__) && !defined(NN_ACT_SCALAR)
void nn_act_silu_fwd(const float *x, const float *res, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i += NN_ACT_VW) {
        int64_t m = n - i < NN_ACT_VW ? n - i : NN_ACT_VW;
        nn_actv_t v = {0}, r = {0};
        if (m == NN_ACT_VW) { /* unaligned loads of the whole width */
            memcpy(&v, x + i, sizeof v);
            if (res) memcpy(&r, res + i, sizeof r);
        } else {
            memcpy(&v, x + i, sizeof(float) * (size_t)m);
            if (res) memcpy(&r, res + i, sizeof(float) * (size_t)m);
        }
        if (res) v += r; /* not without: -0 + 0 would be +0 */
        nn_act_silu_v(&v);
        if (m == NN_ACT_VW) memcpy(y + i, &v, sizeof v);
        else memcpy(y + i, &v, sizeof(float) * (size_t)m);
    }
}

void nn_act_silu_bwd(const float *dy, const float *z, int64_t n, float *dx) {
    for (int64_t i = 0; i < n; i += NN_ACT_VW) {
        int64_t m = n - i < NN_ACT_VW ? n - i : NN_ACT_VW;
        nn_actv_t d = {0}, v = {0};
        if (m == NN_ACT_VW) {
            memcpy(&d, dy + i, sizeof d);
            memcpy(&v, z + i, sizeof v);
        } else {
            memcpy(&d, dy + i, sizeof(float) * (size_t)m);
            memcpy(&v, z + i, sizeof(float) * (size_t)m);
        }
        nn_act_silu_dv(&d, &v);
        if (m == NN_ACT_VW) memcpy(dx + i, &d, sizeof d);
        else memcpy(dx + i, &d, sizeof(float) * (size_t)m);
    }
}

float nn_act_silu1(float z) {
    float y;
    nn_act_silu_fwd(&z, NULL, 1, &y);
    return y;
}

#else /* one float at a time, the same steps */
static float expf_(float t) {
    const float magic = 12582912.0f;
    float k = t * 1.44269504088896341f + magic, n = k - magic;
    float r = t - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    uint32_t kb, mb;
    memcpy(&kb, &k, 4);
    memcpy(&mb, &magic, 4);
    uint32_t eb = (kb - mb + 127u) << 23;
    float e;
    memcpy(&e, &eb, 4);
    return p * e;
}

float nn_act_silu1(float z) {
    z = z < -NN_ACT_EXP_MAX ? -NN_ACT_EXP_MAX : z;
    float t = -z;
    t = t < -NN_ACT_EXP_MAX ? -NN_ACT_EXP_MAX : t;
    return z / (1.0f + expf_(t));
}

void nn_act_silu_fwd(const float *x, const float *res, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = nn_act_silu1(res ? x[i] + res[i] : x[i]);
}

void nn_act_silu_bwd(const float *dy, const float *z, int64_t n, float *dx) {
    for (int64_t i = 0; i < n; i++) {
        float c = z[i] < -NN_ACT_EXP_MAX ? -NN_ACT_EXP_MAX : z[i];
        c = c > NN_ACT_EXP_MAX ? NN_ACT_EXP_MAX : c;
        float e = expf_(-c), s = 1.0f / (1.0f + e);
        dx[i] = dy[i] * (s * (1.0f + c * (e * s)));
    }
}
#endif
