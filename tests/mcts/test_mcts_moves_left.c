/* test_mcts_moves_left.c - lc0's moves-left utility in the search (mcts.h,
 * "Moves left"), with a fake network that answers moves left:
 *   - won: of two winning moves, the one that ends the game sooner gets most
 *     visits (PUCT) and is played (PUCT and Gumbel), although the network's
 *     prior prefers the other; with the utility off (MovesLeftMaxEffect 0)
 *     the prior's move does;
 *   - lost: of two losing moves, the one that resists longer is preferred;
 *   - off (ml_max_effect 0 or ml_slope 0) or no estimate (a net without the
 *     head: NAN, the batch's default): every visit, Q, policy target and
 *     move equal, bit for bit, a search without moves left, on fixed seeds
 *     with root noise, in PUCT and Gumbel;
 *   - the root's mean plies left (result root_moves_left), terminal and mate
 *     leaves count their exact plies;
 *   - a soft deadline: a shorter win with a slightly lower Q (which the
 *     utility makes the most visited move) counts as stable, so the search
 *     stops there instead of running on to the hard deadline.
 */
#include "mcts_test.h"

#include "compat/compat.h"
#include "mcts/batch.h"

static pos_t pos;
static mcts_result_t res, res2;

/* The fake network of the won/lost cases: `winner` wins everywhere
 * (W 0.95 for it to move, L 0.95 for the other: |Q| 0.91, above the 0.8
 * threshold); at the root, the prior gives `other` 0.6 and `pref` 0.4 and
 * the other moves almost nothing; a leaf below root move `pref` has
 * pref_plies left at depth 1 (one fewer per ply deeper), any other
 * other_plies; the root itself their mean + 1. handicap: the leaves below
 * `pref` are a little less won (W 0.94, L 0.05: Q 0.89 against 0.91). */
typedef struct {
    color_t winner;
    uint64_t root_key;
    int32_t root_hist;
    move_t pref, other;
    float pref_plies, other_plies;
    bool handicap;
} ml_net_t;

static void eval_ml(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *pol, float *wdl,
                    float *ml) {
    ml_net_t *net = user;
    static pos_t leaf;
    for (int32_t i = 0; i < n; i++) {
        mcts_request_position(t, &reqs[i], &leaf);
        float *p = pol + (size_t)i * ENC_LABEL_NB;
        for (int32_t l = 0; l < ENC_LABEL_NB; l++) p[l] = -10.0f;
        if (reqs[i].key == net->root_key) {
            p[encode_move_label(&leaf, net->other)] = logf(0.6f);
            p[encode_move_label(&leaf, net->pref)] = logf(0.4f);
        }
        bool win = pos_side_to_move(&leaf) == net->winner;
        int32_t depth = leaf.hist_n - net->root_hist;
        float hi = depth >= 1 && net->handicap && leaf.hist[net->root_hist + 1].move == net->pref ? 0.94f : 0.95f;
        wdl[3 * i + 0] = logf(win ? hi : 0.99f - hi);
        wdl[3 * i + 1] = logf(0.01f);
        wdl[3 * i + 2] = logf(win ? 0.99f - hi : hi);
        if (depth == 0) {
            ml[i] = 0.5f * (net->pref_plies + net->other_plies) + 1.0f;
        } else {
            move_t first = leaf.hist[net->root_hist + 1].move;
            float base = first == net->pref ? net->pref_plies : net->other_plies;
            ml[i] = base - (float)(depth - 1);
            if (ml[i] < 0.0f) ml[i] = 0.0f;
        }
    }
}

static int32_t index_of(const mcts_result_t *r, move_t m) {
    for (int32_t i = 0; i < r->n; i++)
        if (r->moves[i] == m) return i;
    return -1;
}

static mcts_params_t params(mcts_root_mode_t mode, float max_effect) {
    mcts_params_t p;
    mcts_params_default(&p);
    p.root_mode = mode;
    p.ml_max_effect = max_effect;
    p.node_limit = 1 << 14;
    p.search_batch = 8;
    return p;
}

static mcts_limits_t visits(int64_t n) {
    mcts_limits_t l = {0};
    l.visits = n;
    l.full = 1;
    return l;
}

/* Kings only: five king moves for Black, no mates, no declaration. */
static void search_case(const char *what, color_t winner, float pref_plies, float other_plies, mcts_root_mode_t mode,
                        float max_effect, mcts_result_t *r) {
    set_sfen(&pos, "4k4/9/9/9/9/9/9/9/4K4 b - 1");
    ml_net_t net = {.winner = winner, .root_key = pos_key(&pos), .root_hist = pos.hist_n,
                    .pref = usi(&pos, "5i4h"), .other = usi(&pos, "5i6h"),
                    .pref_plies = pref_plies, .other_plies = other_plies};
    mcts_params_t p = params(mode, max_effect);
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_limits_t l = visits(800);
    mcts_search_ml(t, &l, eval_ml, &net, r);
    const char *e = mcts_tree_validate(t);
    CHECKF(e == NULL, "%s: tree invalid: %s", what, e ? e : "");
    mcts_tree_free(t);
}

/* (a) the shorter win, (b) the longer loss: the move the utility should
 * prefer is 5i4h, the one the prior does not favour (0.4 against 0.6). */
static void test_prefers(void) {
    set_sfen(&pos, "4k4/9/9/9/9/9/9/9/4K4 b - 1");
    move_t pref = usi(&pos, "5i4h"), other = usi(&pos, "5i6h");
    static const struct {
        const char *what;
        color_t winner;
        float pref_plies, other_plies;
    } cases[] = {
        {"won: the shorter win", COLOR_BLACK, 9.0f, 41.0f},
        {"lost: the longer loss", COLOR_WHITE, 41.0f, 9.0f},
    };
    for (int c = 0; c < 2; c++) {
        float pp = cases[c].pref_plies, op = cases[c].other_plies;
        for (int mode = 0; mode < 2; mode++) {
            mcts_root_mode_t rm = mode == 0 ? MCTS_ROOT_PUCT : MCTS_ROOT_GUMBEL;
            const char *mn = mode == 0 ? "puct" : "gumbel";
            search_case(cases[c].what, cases[c].winner, pp, op, rm, 0.0345f, &res);
            search_case(cases[c].what, cases[c].winner, pp, op, rm, 0.0f, &res2);
            int32_t kp = index_of(&res, pref), ko = index_of(&res, other);
            CHECKF(kp >= 0 && ko >= 0, "%s: moves missing", cases[c].what);
            if (kp < 0 || ko < 0) continue;
            float sign = cases[c].winner == COLOR_BLACK ? 1.0f : -1.0f;
            CHECKF(res.root_q * sign > 0.8f, "%s %s: root Q %.3f, the case needs |Q| > 0.8", cases[c].what, mn,
                   res.root_q);
            CHECKF(res.best == pref, "%s %s: played %s (visits %s %d, %s %d), want %s", cases[c].what, mn,
                   usi_str(res.best), usi_str(pref), res.visits[kp], usi_str(other), res.visits[ko], usi_str(pref));
            CHECKF(res2.best == other, "%s %s, utility off: played %s, want the prior's %s", cases[c].what, mn,
                   usi_str(res2.best), usi_str(other));
            if (rm == MCTS_ROOT_PUCT)
                CHECKF(res.visits[kp] > res.visits[ko] && res2.visits[kp] < res2.visits[ko],
                       "%s: visits %s %d / %s %d with the utility, %d / %d without", cases[c].what, usi_str(pref),
                       res.visits[kp], usi_str(other), res.visits[ko], res2.visits[kp], res2.visits[ko]);
            /* The root's mean plies left lies between the two lines' (+1 for the root's own ply). */
            float lo = fminf(pp, op), hi = fmaxf(pp, op) + 1.0f;
            CHECKF(res.root_moves_left >= lo && res.root_moves_left <= hi, "%s %s: root moves left %.2f outside [%.0f, %.0f]",
                   cases[c].what, mn, res.root_moves_left, lo, hi);
            printf("%s, %s: %s %d / %s %d visits with the utility, %d / %d without; root moves left %.1f\n",
                   cases[c].what, mn, usi_str(pref), res.visits[kp], usi_str(other), res.visits[ko], res2.visits[kp],
                   res2.visits[ko], res.root_moves_left);
        }
    }
}

/* A hashed network (mcts_test.h's eval_hash) that also answers moves left
 * from the key, or NAN for every leaf (a net without the head). */
static int g_ml_mode; /* 0: NAN, 1: hashed plies */
static void eval_hash_ml(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *pol, float *wdl,
                         float *ml) {
    eval_hash(user, t, reqs, n, pol, wdl);
    for (int32_t i = 0; i < n; i++) ml[i] = g_ml_mode ? (float)(t_mix64(reqs[i].key ^ 77) % 200) : NAN;
}

static bool same_result(const mcts_result_t *a, const mcts_result_t *b) {
    if (a->n != b->n || a->best != b->best || a->root_visits != b->root_visits) return false;
    if (memcmp(&a->root_q, &b->root_q, sizeof a->root_q) != 0) return false;
    size_t n = (size_t)a->n;
    return memcmp(a->visits, b->visits, n * sizeof a->visits[0]) == 0 &&
           memcmp(a->q, b->q, n * sizeof a->q[0]) == 0 && memcmp(a->policy, b->policy, n * sizeof a->policy[0]) == 0 &&
           a->pv_len == b->pv_len && memcmp(a->pv, b->pv, (size_t)a->pv_len * sizeof a->pv[0]) == 0;
}

/* (c) off or no head: the search of today, bit for bit. */
static void test_off_identical(void) {
    static const char *const sfens[] = {
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
        "ln1g3nl/1r1sk1g2/p2ppp1pp/1pp3p2/9/2P1P4/PPBP1PPPP/2S4R1/LN1GKGSNL w Bs 15",
    };
    for (int mode = 0; mode < 2; mode++)
        for (int s = 0; s < 2; s++) {
            set_sfen(&pos, sfens[s]);
            mcts_params_t p = params(mode == 0 ? MCTS_ROOT_PUCT : MCTS_ROOT_GUMBEL, 0.0345f);
            p.noise = true;
            p.noise_alpha_scale = 10.0f;
            p.seed = 12345 + (uint64_t)s;
            mcts_limits_t l = visits(400);
            /* today: no moves-left evaluator at all */
            mcts_tree_t *t = mcts_tree_new(&p, NULL);
            mcts_tree_set_position(t, &pos);
            mcts_search(t, &l, eval_hash, NULL, &res);
            mcts_tree_free(t);
            static const struct {
                const char *what;
                float max_effect, slope;
                int ml_mode;
            } variants[] = {
                {"no head (NAN), utility on", 0.0345f, 0.0027f, 0},
                {"MovesLeftMaxEffect 0", 0.0f, 0.0027f, 1},
                {"MovesLeftSlope 0", 0.0345f, 0.0f, 1},
            };
            for (int v = 0; v < 3; v++) {
                mcts_params_t pv = p;
                pv.ml_max_effect = variants[v].max_effect;
                pv.ml_slope = variants[v].slope;
                g_ml_mode = variants[v].ml_mode;
                t = mcts_tree_new(&pv, NULL);
                mcts_tree_set_position(t, &pos);
                mcts_search_ml(t, &l, eval_hash_ml, NULL, &res2);
                CHECKF(same_result(&res, &res2), "%s, sfen %d, %s: the search differs from today's", 
                       mode == 0 ? "puct" : "gumbel", s, variants[v].what);
                CHECKF(variants[v].ml_mode ? isfinite(res2.root_moves_left) : isnan(res2.root_moves_left),
                       "%s: root moves left %.3f", variants[v].what, res2.root_moves_left);
                mcts_tree_free(t);
            }
        }
}

/* The batch: commit sets NAN (no head), answers reach the tree; a terminal
 * mate leaf counts its exact plies. */
static void test_batch_and_terminals(void) {
    /* Black mates in one with G*5b: the leaf after any Black move where White
     * is mated has 0 plies left, so the root's child G*5b has m = 0. */
    set_sfen(&pos, "4k4/9/4P4/9/9/9/9/9/4K4 b G 1");
    mcts_params_t p = params(MCTS_ROOT_PUCT, 0.0345f);
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_batch_t *b = mcts_batch_new(16);
    CHECKF(b != NULL, "batch");
    mcts_limits_t l = visits(1000);
    mcts_search_begin(t, &l);
    int rounds = 0;
    while (!mcts_search_done(t) && rounds++ < 100000) {
        mcts_batch_clear(b);
        int32_t got = mcts_collect(t, 8, mcts_batch_slots(b));
        mcts_batch_commit(b, got, 0);
        for (int32_t i = 0; i < b->n; i++) CHECKF(isnan(b->moves_left[i]), "commit: moves_left not NAN");
        mcts_batch_uniform(b);
        for (int32_t i = 0; i < b->n; i++) b->moves_left[i] = 30.0f;
        mcts_batch_deliver(b, t);
    }
    mcts_search_result(t, &res);
    CHECKF(res.best == usi(&pos, "G*5b"), "mate in one: played %s", usi_str(res.best));
    /* Every leaf answered 30 (31 at the root) or was the mate (0 at the
     * child, 1 at the root), which takes most visits: the root's mean lies
     * near 1. */
    CHECKF(res.root_moves_left >= 1.0f && res.root_moves_left < 10.0f, "root moves left %.3f",
           res.root_moves_left);
    const char *e = mcts_tree_validate(t);
    CHECKF(e == NULL, "batch: tree invalid: %s", e ? e : "");
    mcts_batch_free(b);
    mcts_tree_free(t);
}

/* The soft deadline with the utility: stable at the shorter win. */
static void test_soft_deadline(void) {
    set_sfen(&pos, "4k4/9/9/9/9/9/9/9/4K4 b - 1");
    ml_net_t net = {.winner = COLOR_BLACK, .root_key = pos_key(&pos), .root_hist = pos.hist_n,
                    .pref = usi(&pos, "5i4h"), .other = usi(&pos, "5i6h"), .pref_plies = 9.0f,
                    .other_plies = 41.0f, .handicap = true};
    mcts_params_t p = params(MCTS_ROOT_PUCT, 0.0345f);
    p.node_limit = 1 << 16;
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    /* The tree first gets its visits from a visit-limited search; then a search
     * whose soft deadline has already passed stops at the first playout where
     * the root is stable with the utility counted (without it, never: it ends
     * at its visit cap instead). No wall-clock bound decides the result: under load, the old
     * 20 ms deadline could pass with one child visited (Q 0 against 0, ASan
     * under load, session 23). */
    mcts_limits_t l = visits(3000);
    mcts_search_ml(t, &l, eval_ml, &net, &res);
    l = visits(1000000);
    int64_t t0 = compat_now_ms();
    l.soft_deadline_ms = t0;
    mcts_search_ml(t, &l, eval_ml, &net, &res);
    int64_t dt = compat_now_ms() - t0;
    int32_t kp = index_of(&res, net.pref), ko = index_of(&res, net.other);
    CHECKF(res.stop == MCTS_STOP_TIME, "soft deadline: stopped by %s after %lld ms (%lld playouts)",
           mcts_stop_name(res.stop), (long long)dt, (long long)res.playouts);
    CHECKF(res.best == net.pref && kp >= 0 && ko >= 0 && res.q[kp] < res.q[ko],
           "soft deadline: played %s, want 5i4h, the shorter win with the lower Q (%.4f against %.4f)",
           usi_str(res.best), kp >= 0 ? res.q[kp] : 0.0f, ko >= 0 ? res.q[ko] : 0.0f);
    printf("soft deadline: stopped by %s after %lld ms, %lld playouts, Q 5i4h %.4f < 5i6h %.4f\n",
           mcts_stop_name(res.stop), (long long)dt, (long long)res.playouts, kp >= 0 ? res.q[kp] : 0.0f,
           ko >= 0 ? res.q[ko] : 0.0f);
    mcts_tree_free(t);
}

int main(void) {
    test_prefers();
    test_soft_deadline();
    test_off_identical();
    test_batch_and_terminals();
    return t_done("test_mcts_moves_left");
}
