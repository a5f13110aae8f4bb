/* nn_test.h - helpers shared by the nn/ tests: Gaussian samples, random
 * batches, llm.c-style comparisons (first mismatches + max diff) and
 * finite-difference checks; checks, t_done and the RNG (t_next, t_unif) come
 * from tests/koma_test.h. Header-only; every function is static. */
#ifndef KOMA_TESTS_NN_TEST_H
#define KOMA_TESTS_NN_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "nn/net.h"
#include "tests/koma_test.h"

static inline float t_randn(void) {
    double u1 = t_unif() + 1e-12, u2 = t_unif();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline void t_fill_randn(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * t_randn();
}

/* |a - ref| <= atol + rtol*|ref| elementwise; prints the first 5 mismatches
 * and the max difference. Returns the number of mismatches. */
static inline int64_t t_compare(const char *what, const float *a, const float *ref, int64_t n, double atol,
                         double rtol) {
    int64_t bad = 0;
    double maxd = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]);
        if (d > maxd || isnan(d)) maxd = isnan(d) ? INFINITY : d;
        if (!(d <= atol + rtol * fabs((double)ref[i]))) {
            if (bad < 5) fprintf(stderr, "  %s[%lld]: got %.9g, expected %.9g\n", what, (long long)i, a[i], ref[i]);
            bad++;
        }
    }
    fprintf(stderr, "%-36s n=%-8lld max|diff| %.3g %s\n", what, (long long)n, maxd,
            bad ? "MISMATCH" : "ok");
    t_judge(bad == 0);
    return bad;
}

/* Finite differences: loss(ctx) evaluated with x[i] +- eps against grad[i]
 * for `checks` indices (all when n <= checks; else the largest |grad| ones
 * and random ones). Points where the left and right one-sided slopes
 * disagree by more than kink_tol (a ReLU kink inside [x-eps, x+eps]) are
 * skipped and counted. Tolerance: |num - ana| <= atol + rtol*max(|num|,|ana|). */
typedef double (*t_loss_fn)(void *ctx);
static inline int64_t t_fd_check(const char *what, float *x, int64_t n, const float *grad, t_loss_fn f,
                          void *ctx, double eps, double atol, double rtol, int64_t checks,
                          double kink_tol) {
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(checks > 0 ? checks : 1));
    int64_t m = 0;
    if (n <= checks) {
        for (int64_t i = 0; i < n; i++) idx[m++] = i;
    } else {
        int64_t top = checks / 2;
        /* largest |grad| (simple selection; n is small in tests) */
        char *used = calloc((size_t)n, 1);
        for (int64_t k = 0; k < top; k++) {
            int64_t best = -1;
            for (int64_t i = 0; i < n; i++)
                if (!used[i] && (best < 0 || fabsf(grad[i]) > fabsf(grad[best]))) best = i;
            used[best] = 1;
            idx[m++] = best;
        }
        while (m < checks) {
            int64_t i = (int64_t)(t_next() % (uint64_t)n);
            if (used[i]) continue;
            used[i] = 1;
            idx[m++] = i;
        }
        free(used);
    }
    double l0 = f(ctx);
    int64_t bad = 0, kinks = 0;
    double maxd = 0;
    for (int64_t k = 0; k < m; k++) {
        int64_t i = idx[k];
        float x0 = x[i];
        x[i] = (float)(x0 + eps);
        double lp = f(ctx);
        x[i] = (float)(x0 - eps);
        double lm = f(ctx);
        x[i] = x0;
        double h = ((double)(float)(x0 + eps) - (double)(float)(x0 - eps)) / 2.0;
        double num = (lp - lm) / (2 * h);
        double right = (lp - l0) / h, left = (l0 - lm) / h;
        double ana = grad[i];
        double scale = fmax(fabs(num), fabs(ana));
        if (kink_tol > 0 && fabs(right - left) > kink_tol * fmax(fabs(right), fabs(left)) + atol) {
            kinks++;
            continue;
        }
        double d = fabs(num - ana);
        if (d > maxd) maxd = d;
        if (!(d <= atol + rtol * scale)) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: analytic %.7g, numeric %.7g\n", what, (long long)i, ana, num);
            bad++;
        }
    }
    fprintf(stderr, "%-36s checked %-4lld kinks %-3lld max|diff| %.3g %s\n", what, (long long)m,
            (long long)kinks, maxd, bad ? "MISMATCH" : "ok");
    t_judge(bad == 0);
    if (!t_judge(kinks <= m / 4 + 1))
        fprintf(stderr, "  %s: too many kinks skipped (%lld of %lld)\n", what, (long long)kinks, (long long)m);
    free(idx);
    return bad;
}

/* ---- random training batches ---------------------------------------------- */
typedef struct {
    nn_batch_t b;
    uint8_t *planes, *legal;
    float *hand, *probs, *q;
    uint32_t *off;
    uint16_t *labels;
    int8_t *result;
} t_batch_t;

/* Random batch: planes with density ~0.2, hand in [0, 3], 1..max_labels
 * policy labels with random probabilities (one-hot when max_labels == 1),
 * legal mask ~5% plus every policy label, results uniform in {-1,0,1}. */
static inline void t_batch_init(t_batch_t *t, int32_t B, int32_t in_planes, int32_t in_hand, int32_t max_labels) {
    memset(t, 0, sizeof(*t));
    int64_t bpp = nn_packed_bytes(in_planes), lpp = nn_packed_bytes(NN_POLICY_CH);
    t->planes = calloc((size_t)(B * bpp), 1);
    t->legal = calloc((size_t)(B * lpp), 1);
    t->hand = calloc((size_t)B * (in_hand ? in_hand : 1), sizeof(float));
    t->off = calloc((size_t)B + 1, sizeof(uint32_t));
    t->labels = calloc((size_t)B * max_labels, sizeof(uint16_t));
    t->probs = calloc((size_t)B * max_labels, sizeof(float));
    t->result = calloc((size_t)B, 1);
    t->q = calloc((size_t)B, sizeof(float));
    for (int32_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < (int64_t)in_planes * NN_HW; i++)
            if (t_unif() < 0.2) t->planes[b * bpp + (i >> 3)] |= (uint8_t)(1u << (i & 7));
        for (int32_t j = 0; j < in_hand; j++) t->hand[b * in_hand + j] = (float)(t_next() % 4);
        for (int32_t i = 0; i < NN_POLICY_NB; i++)
            if (t_unif() < 0.05) t->legal[b * lpp + (i >> 3)] |= (uint8_t)(1u << (i & 7));
        int32_t k = 1 + (int32_t)(t_next() % (uint64_t)max_labels);
        uint32_t o = t->off[b];
        double sum = 0;
        for (int32_t j = 0; j < k; j++) {
            uint16_t l;
            int dup;
            do {
                l = (uint16_t)(t_next() % NN_POLICY_NB);
                dup = 0;
                for (uint32_t q = t->off[b]; q < o + (uint32_t)j; q++) dup |= t->labels[q] == l;
            } while (dup);
            t->labels[o + j] = l;
            t->probs[o + j] = (float)(0.1 + t_unif());
            sum += t->probs[o + j];
            t->legal[b * lpp + (l >> 3)] |= (uint8_t)(1u << (l & 7));
        }
        for (int32_t j = 0; j < k; j++) t->probs[o + j] = (float)(t->probs[o + j] / sum);
        t->off[b + 1] = o + (uint32_t)k;
        t->result[b] = (int8_t)((int)(t_next() % 3) - 1);
        t->q[b] = (float)(2 * t_unif() - 1);
    }
    t->b.B = B;
    t->b.planes = t->planes;
    t->b.hand = in_hand ? t->hand : NULL;
    t->b.legal = t->legal;
    t->b.policy_offsets = t->off;
    t->b.policy_label = t->labels;
    t->b.policy_prob = t->probs;
    t->b.result = t->result;
    t->b.root_q = t->q;
}

static inline void t_batch_free(t_batch_t *t) {
    free(t->planes);
    free(t->legal);
    free(t->hand);
    free(t->off);
    free(t->labels);
    free(t->probs);
    free(t->result);
    free(t->q);
}

#endif
