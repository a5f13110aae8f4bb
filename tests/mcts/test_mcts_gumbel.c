/* test_mcts_gumbel.c - Gumbel root search:
 *   - the sequential-halving schedule (mctx's sequence of considered visits)
 *     and that a search spends exactly its budget, in the visit pattern the
 *     schedule prescribes;
 *   - without noise the candidates are the top-m moves by prior; with noise
 *     exactly m moves are visited and the final move is one of them, with
 *     the most visits;
 *   - the improved policy sums to one over legal moves, equals
 *     softmax(logits + sigma(completed Q)) recomputed from the result, and
 *     moves mass towards a better-valued move;
 *   - completed Q / mixed value arithmetic on hand-made arrays.
 */
#include "mcts_test.h"

#include "mcts/select.h"

static pos_t pos;
static mcts_result_t res;

/* mctx get_sequence_of_considered_visits, literally (the reference). */
static int32_t ref_sequence(int32_t m, int32_t budget, int32_t *seq) {
    if (m <= 1) {
        for (int32_t i = 0; i < budget; i++) seq[i] = i;
        return budget;
    }
    int32_t log2max = (int32_t)ceil(log2((double)m));
    int32_t visits[1024] = {0};
    int32_t n = 0, considered = m;
    while (n < budget) {
        int32_t extra = budget / (log2max * considered);
        if (extra < 1) extra = 1;
        for (int32_t e = 0; e < extra; e++) {
            for (int32_t i = 0; i < considered && n < budget; i++) seq[n++] = visits[i];
            for (int32_t i = 0; i < considered; i++) visits[i]++;
        }
        considered = considered / 2 > 2 ? considered / 2 : 2;
    }
    return n;
}

static void test_schedule(void) {
    static int32_t seq[20000];
    const int32_t ms[] = {1, 2, 3, 4, 7, 8, 16, 32};
    const int32_t budgets[] = {1, 5, 16, 50, 64, 200, 800, 1000};
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
            int32_t m = ms[a], B = budgets[b];
            ref_sequence(m, B, seq);
            for (int32_t s = 0; s < B; s++) {
                int64_t got = mcts_gumbel_considered_visit(m, B, s);
                if (got != seq[s]) {
                    CHECKF(got == seq[s], "schedule m=%d budget=%d sim=%d: %lld, mctx %d", m, B, s, (long long)got, seq[s]);
                    break;
                }
            }
        }
}

/* Final visit counts the schedule prescribes, sorted descending. */
static int32_t schedule_counts(int32_t m, int32_t budget, int32_t *counts) {
    for (int32_t i = 0; i < m; i++) counts[i] = 0;
    for (int32_t s = 0; s < budget; s++) {
        int64_t cv = mcts_gumbel_considered_visit(m, budget, s);
        int32_t k = 0;
        while (k < m && counts[k] != cv) k++; /* the first action with that count: any would do */
        if (k < m) counts[k]++;
    }
    return m;
}

static int cmp_desc(const void *a, const void *b) { return *(const int32_t *)b - *(const int32_t *)a; }

static mcts_params_t gumbel_params(int32_t m, bool noise) {
    mcts_params_t p;
    mcts_params_default(&p);
    p.root_mode = MCTS_ROOT_GUMBEL;
    p.gumbel_m = m;
    p.noise = noise;
    p.seed = 7;
    return p;
}

static void test_budget(void) {
    pos_set_startpos(&pos);
    const int32_t budgets[] = {16, 50, 200, 333};
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        for (int batch = 1; batch <= 16; batch += 15) {
            mcts_params_t p = gumbel_params(16, true);
            p.search_batch = batch;
            mcts_tree_t *t = mcts_tree_new(&p, NULL);
            mcts_tree_set_position(t, &pos);
            mcts_limits_t l = {.visits = budgets[b], .full = 1};
            mcts_search(t, &l, eval_hash, NULL, &res);
            int32_t got[MCTS_MOVES_MAX], want[64];
            int64_t sum = 0;
            for (int32_t i = 0; i < res.n; i++) sum += (got[i] = res.visits[i]);
            CHECKF(sum == budgets[b] && res.playouts == budgets[b], "budget %d batch %d: spent %lld", budgets[b], batch,
                   (long long)sum);
            CHECKF(res.root_visits == budgets[b] + 1, "root visits %lld", (long long)res.root_visits);
            qsort(got, (size_t)res.n, sizeof got[0], cmp_desc);
            schedule_counts(16, budgets[b], want);
            qsort(want, 16, sizeof want[0], cmp_desc);
            if (batch == 1) { /* one leaf at a time follows the schedule exactly */
                bool same = true;
                for (int32_t i = 0; i < 16; i++) same &= got[i] == want[i];
                for (int32_t i = 16; i < res.n; i++) same &= got[i] == 0;
                CHECKF(same, "budget %d: visit pattern %d %d %d %d .. differs from the schedule %d %d %d %d ..",
                       budgets[b], got[0], got[1], got[2], got[3], want[0], want[1], want[2], want[3]);
            }
            int32_t visited = 0;
            for (int32_t i = 0; i < res.n; i++) visited += res.visits[i] > 0;
            CHECKF(visited == (budgets[b] < 16 ? budgets[b] : 16), "budget %d batch %d: %d moves visited, want m = 16",
                   budgets[b], batch, visited);
            const char *err = mcts_tree_validate(t);
            CHECKF(err == NULL, "invariant: %s", err ? err : "");
            mcts_tree_free(t);
        }
    }
}

static int cmp_float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The root's raw value under eval_hash. */
static float hash_root_value(const pos_t *p) {
    static mcts_request_t r;
    static float pol[ENC_LABEL_NB];
    float wdl[3];
    r.key = pos_key(p);
    eval_hash(NULL, NULL, &r, 1, pol, wdl);
    mcts_softmax(3, wdl, wdl);
    return wdl[0] - wdl[2];
}

static void test_candidates(void) {
    pos_set_startpos(&pos);
    /* No noise: the visited moves are exactly the top-m by prior. */
    mcts_params_t p = gumbel_params(8, false);
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_limits_t l = {.visits = 100, .full = 1};
    mcts_search(t, &l, eval_hash, NULL, &res);
    float pr[MCTS_MOVES_MAX];
    memcpy(pr, res.prior, sizeof(float) * (size_t)res.n);
    qsort(pr, (size_t)res.n, sizeof pr[0], cmp_float_desc);
    CHECKF(pr[7] > pr[8], "test needs distinct priors around rank 8");
    for (int32_t i = 0; i < res.n; i++)
        CHECKF((res.visits[i] > 0) == (res.prior[i] >= pr[7]), "move %s prior %.4f (8th %.4f) visits %d",
               usi_str(res.moves[i]), res.prior[i], pr[7], res.visits[i]);
    check_result_policy(&pos, &res, "gumbel no noise");
    /* The target is softmax(logits + sigma(completed Q)) of the result's numbers. */
    float cq[MCTS_MOVES_MAX], want[MCTS_MOVES_MAX];
    mcts_completed_q(res.n, res.q, res.visits, res.prior, hash_root_value(&pos), p.gumbel_c_visit, p.gumbel_c_scale,
                     p.gumbel_rescale, cq);
    for (int32_t i = 0; i < res.n; i++) want[i] = logf(res.prior[i]) + cq[i];
    mcts_softmax(res.n, want, want);
    float maxdiff = 0.0f;
    for (int32_t i = 0; i < res.n; i++) maxdiff = fmaxf(maxdiff, fabsf(want[i] - res.policy[i]));
    CHECKF(maxdiff < 1e-5f, "improved policy differs from its definition by %g", maxdiff);
    /* Mass moves towards the best-valued visited move, away from the worst. */
    int32_t hi = -1, lo = -1;
    for (int32_t i = 0; i < res.n; i++) {
        if (res.visits[i] == 0) continue;
        if (hi < 0 || res.q[i] > res.q[hi]) hi = i;
        if (lo < 0 || res.q[i] < res.q[lo]) lo = i;
    }
    CHECKF(hi >= 0 && res.q[hi] > res.q[lo] && res.policy[hi] > res.prior[hi] && res.policy[lo] < res.prior[lo],
           "improved policy: best-Q move %.4f -> %.4f, worst %.4f -> %.4f", res.prior[hi], res.policy[hi],
           res.prior[lo], res.policy[lo]);
    mcts_tree_free(t);

    /* Noise: exactly m moves get visits; the final move is one of them, with the most visits. */
    int differ = 0;
    move_t first = MOVE_NONE;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        p = gumbel_params(8, true);
        p.seed = seed;
        t = mcts_tree_new(&p, NULL);
        mcts_tree_set_position(t, &pos);
        mcts_search(t, &l, eval_hash, NULL, &res);
        int32_t visited = 0, maxv = 0, k = -1;
        for (int32_t i = 0; i < res.n; i++) {
            visited += res.visits[i] > 0;
            if (res.visits[i] > maxv) maxv = res.visits[i];
            if (res.moves[i] == res.best) k = i;
        }
        CHECKF(visited == 8, "seed %llu: %d moves visited, want 8", (unsigned long long)seed, visited);
        CHECKF(k >= 0 && res.visits[k] == maxv, "seed %llu: final move %s has %d visits, max %d",
               (unsigned long long)seed, usi_str(res.best), k >= 0 ? res.visits[k] : -1, maxv);
        check_result_policy(&pos, &res, "gumbel noise");
        if (seed == 1) first = res.best;
        differ += res.best != first;
        mcts_tree_free(t);
    }
    CHECKF(differ > 0, "Gumbel noise never changed the final move over 20 seeds");
}

static void test_completed_q(void) {
    const float q[3] = {0.5f, -0.5f, 123.0f}; /* q[2] unvisited: ignored */
    const int32_t vis[3] = {2, 1, 0};
    const float prior[3] = {0.5f, 0.25f, 0.25f};
    float out[3];
    float v_mix = mcts_completed_q(3, q, vis, prior, 0.1f, 50.0f, 0.1f, 1, out);
    /* v_mix = (0.1 + 3 * (0.5*0.5 - 0.25*0.5) / 0.75) / 4 = 0.15; rescaled {1, 0, 0.65}; scale 5.2 */
    CHECKF(fabsf(v_mix - 0.15f) < 1e-6f, "v_mix %.6f, want 0.15", v_mix);
    CHECKF(fabsf(out[0] - 5.2f) < 1e-5f && fabsf(out[1]) < 1e-6f && fabsf(out[2] - 3.38f) < 1e-5f,
           "sigma(completed q) = %.5f %.5f %.5f, want 5.2 0 3.38", out[0], out[1], out[2]);
    /* Nothing visited: v_mix is the network value. */
    const int32_t none[3] = {0, 0, 0};
    v_mix = mcts_completed_q(3, q, none, prior, -0.3f, 50.0f, 1.0f, 0, out);
    CHECKF(v_mix == -0.3f && fabsf(out[0] - 50.0f * 0.35f) < 1e-4f, "unvisited: v_mix %.3f sigma %.4f", v_mix, out[0]);
}

int main(void) {
    test_schedule();
    test_budget();
    test_candidates();
    test_completed_q();
    return t_done("test_mcts_gumbel");
}
