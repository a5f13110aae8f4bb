/* select.c - search arithmetic on plain arrays (see select.h). */
#include "mcts/select.h"

#include <float.h>
#include <math.h>

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void mcts_rng_seed(mcts_rng_t *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        r->s[i] = z ^ (z >> 31);
    }
}

uint64_t mcts_rng_u64(mcts_rng_t *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

double mcts_rng_uniform(mcts_rng_t *r) { return (double)(mcts_rng_u64(r) >> 11) * 0x1.0p-53; }

/* Standard normal by Box-Muller (one of the pair). */
static double rng_normal(mcts_rng_t *r) {
    double u1 = mcts_rng_uniform(r), u2 = mcts_rng_uniform(r);
    if (u1 < DBL_MIN) u1 = DBL_MIN;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double mcts_rng_gamma(mcts_rng_t *r, double alpha) {
    if (alpha < 1.0) {
        /* Gamma(a) = Gamma(a + 1) * U^(1/a). */
        double u = mcts_rng_uniform(r);
        if (u < DBL_MIN) u = DBL_MIN;
        return mcts_rng_gamma(r, alpha + 1.0) * pow(u, 1.0 / alpha);
    }
    double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_normal(r), v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = mcts_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (u > 0.0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

double mcts_rng_gumbel(mcts_rng_t *r) {
    double u = mcts_rng_uniform(r);
    if (u < DBL_MIN) u = DBL_MIN;
    return -log(-log(u));
}

void mcts_dirichlet(mcts_rng_t *r, double alpha, int32_t n, float *out) {
    /* Samples below FLT_MIN (common with alpha << 1) become 0: negligible mass. */
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        double g = mcts_rng_gamma(r, alpha);
        out[i] = (float)g;
        sum += g;
    }
    if (!(sum > 0.0) || !isfinite(sum)) { /* every sample underflowed: uniform */
        for (int32_t i = 0; i < n; i++) out[i] = 1.0f / (float)n;
        return;
    }
    for (int32_t i = 0; i < n; i++) out[i] = (float)((double)out[i] / sum);
}

int64_t mcts_gumbel_considered_visit(int32_t m, int64_t budget, int64_t sim) {
    if (m <= 1) return sim;
    int32_t log2max = 0;
    while ((1 << log2max) < m) log2max++;
    int64_t base = 0;
    int64_t considered = m;
    for (;;) {
        int64_t extra = budget / ((int64_t)log2max * considered);
        if (extra < 1) extra = 1;
        int64_t len = extra * considered;
        if (sim < len) return base + sim / considered;
        sim -= len;
        base += extra;
        considered = considered / 2 < 2 ? 2 : considered / 2;
    }
}

float mcts_completed_q(int32_t n, const float *q, const int32_t *visits, const float *prior, float v_net,
                       float c_visit, float c_scale, int rescale, float *out) {
    int64_t sum_n = 0;
    int32_t max_n = 0;
    double sum_p = 0.0, sum_pq = 0.0;
    for (int32_t i = 0; i < n; i++) {
        if (visits[i] <= 0) continue;
        sum_n += visits[i];
        if (visits[i] > max_n) max_n = visits[i];
        double p = prior[i] > FLT_MIN ? prior[i] : FLT_MIN;
        sum_p += p;
        sum_pq += p * q[i];
    }
    double v_mix = v_net;
    if (sum_n > 0) v_mix = (v_net + (double)sum_n * (sum_pq / sum_p)) / (double)(sum_n + 1);
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int32_t i = 0; i < n; i++) {
        float c = visits[i] > 0 ? q[i] : (float)v_mix;
        out[i] = c;
        if (c < lo) lo = c;
        if (c > hi) hi = c;
    }
    float scale = (c_visit + (float)max_n) * c_scale;
    for (int32_t i = 0; i < n; i++) {
        float u;
        if (rescale && hi > lo) u = (out[i] - lo) / (hi - lo);
        else if (rescale) u = 0.5f; /* all equal: no preference */
        else u = (out[i] + 1.0f) * 0.5f;
        out[i] = scale * u;
    }
    return (float)v_mix;
}

void mcts_softmax(int32_t n, const float *x, float *out) {
    if (n <= 0) return;
    float mx = x[0];
    for (int32_t i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += (out[i] = expf(x[i] - mx));
    float inv = (float)(1.0 / sum);
    for (int32_t i = 0; i < n; i++) out[i] *= inv;
}
