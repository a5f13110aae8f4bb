/* test_mcts_search.c - PUCT search behaviour a user would notice:
 *   - forced mates in one (with and without the mate-in-one leaf check) and
 *     in three (tsume positions generated and verified by brute force with
 *     the engine: unique mating first move, several other checks), found
 *     with a uniform-policy, zero-value evaluator;
 *   - the mate-in-three leaf check (leaf_mate 3) against brute force on the
 *     tsume positions and on every position of random games, and the tsume
 *     solved by the search with it on;
 *   - repetition inside the tree: a draw when repeating is the only
 *     non-losing option, a loss when the repetition is a perpetual check;
 *   - the entering-king declaration under params.declare: a leaf whose side
 *     to move may declare is a win under its rule, and not under none (or
 *     the 24-point rule short of 31 points);
 *   - virtual loss: k leaves collected at once are distinct, collisions are
 *     undone, the tree invariants hold mid-search and after delivery;
 *   - tree reuse keeps the played subtree; pool exhaustion ends the search;
 *   - policy targets sum to one over legal moves; playout cap
 *     randomization, noise and move temperature; stop flag and deadlines;
 *   - search quality: with uniform priors and a material evaluator, the one
 *     move that saves a rook and wins one takes most of a small search
 *     (first-play urgency below the parent's value makes it focus).
 */
#include "mcts_test.h"

#include "compat/compat.h"

static pos_t pos, pos2;
static mcts_result_t res, res2;

static mcts_params_t base_params(void) {
    mcts_params_t p;
    mcts_params_default(&p);
    p.node_limit = 1 << 16;
    return p;
}

static mcts_limits_t visits(int64_t n) {
    mcts_limits_t l = {0};
    l.visits = n;
    l.full = 1;
    return l;
}

static int32_t index_of(const mcts_result_t *r, move_t m) {
    for (int32_t i = 0; i < r->n; i++)
        if (r->moves[i] == m) return i;
    return -1;
}

static void validate(const mcts_tree_t *t, const char *what) {
    const char *err = mcts_tree_validate(t);
    CHECKF(err == NULL, "%s: tree invariant: %s", what, err ? err : "");
}

/* ---- search quality ------------------------------------------------------------ */

/* Root key and priors for eval_material: at the root, these labels get these
 * logits (the rest 0); every other position gets a uniform policy. */
typedef struct {
    uint64_t root_key;
    int32_t n;
    int32_t labels[8];
    float logits[8];
} material_priors_t;

/* Material from the packed planes and hand floats (encode.h: side to move's
 * view), as WDL logits: value = tanh(material difference / 10). */
static void eval_material(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *pol, float *wdl) {
    (void)t;
    const material_priors_t *mp = user;
    static const float VAL[14] = {1, 3, 3, 5, 8, 10, 6, 0, 6, 6, 6, 6, 10, 12};
    static const float HAND_VAL[7] = {1, 3, 3, 5, 8, 10, 6};
    static const float HAND_MAX[7] = {18, 4, 4, 4, 2, 2, 4};
    memset(pol, 0, (size_t)n * ENC_LABEL_NB * sizeof(float));
    for (int32_t i = 0; i < n; i++) {
        if (mp && reqs[i].key == mp->root_key)
            for (int32_t j = 0; j < mp->n; j++) pol[(size_t)i * ENC_LABEL_NB + mp->labels[j]] = mp->logits[j];
        float diff = 0.0f;
        for (int side = 0; side < 2; side++) {
            float sign = side == 0 ? 1.0f : -1.0f;
            for (int pt = 0; pt < 14; pt++) {
                int plane = side * ENC_SIDE_PLANES + pt;
                for (int sq = 0; sq < 81; sq++) {
                    int bit = plane * 81 + sq;
                    if (reqs[i].packed[bit >> 3] >> (bit & 7) & 1) diff += sign * VAL[pt];
                }
            }
            for (int k = 0; k < 7; k++) diff += sign * HAND_VAL[k] * reqs[i].hand[side * 7 + k] * HAND_MAX[k];
        }
        float a = diff / 10.0f; /* softmax(a, -40, -a): P(W) - P(L) = tanh(a) */
        wdl[3 * i + 0] = a;
        wdl[3 * i + 1] = -40.0f;
        wdl[3 * i + 2] = -a;
    }
}

/* Black's rook on 5h and White's on 5e attack each other; a gold in hand
 * gives Black about a hundred legal moves. Only 5h5e keeps the rook (and it
 * wins White's). The policy ranks four king moves (which lose the rook) above
 * it and it above the rest. Below the parent's value, first-play urgency lets
 * the search leave the decoys, find 5h5e and then spend most visits on it; a
 * search that tries every unvisited move before it returns to a good one
 * (urgency above the parent's value) spends half its visits on the list.
 * One leaf at a time (search_batch 1): what is measured is the choice of
 * the next leaf, not virtual loss. */
static void test_one_good_move(void) {
    set_sfen(&pos, "4k4/9/9/9/4r4/9/9/4R4/4K4 b G 1");
    move_t good = usi(&pos, "5h5e");
    material_priors_t mp = {.root_key = pos_key(&pos), .n = 5};
    const char *decoys[4] = {"5i4i", "5i6i", "5i4h", "5i6h"};
    for (int j = 0; j < 4; j++) {
        mp.labels[j] = encode_move_label(&pos, usi(&pos, decoys[j]));
        mp.logits[j] = 1.5f;
    }
    mp.labels[4] = encode_move_label(&pos, good);
    mp.logits[4] = 1.0f;
    for (int gumbel = 0; gumbel <= 1; gumbel++) {
        mcts_params_t p = base_params();
        p.encode_leaves = true;
        p.leaf_mate = 0;
        p.search_batch = 1;
        if (gumbel) p.root_mode = MCTS_ROOT_GUMBEL;
        mcts_tree_t *t = mcts_tree_new(&p, NULL);
        mcts_tree_set_position(t, &pos);
        mcts_limits_t l = visits(200);
        mcts_search(t, &l, eval_material, &mp, &res);
        int32_t k = index_of(&res, good);
        CHECKF(res.n > 80, "one good move: %d legal moves, want a long list", res.n);
        CHECKF(res.best == good, "one good move (gumbel %d): played %s, want 5h5e", gumbel, usi_str(res.best));
        /* Gumbel's sequential halving shares the visits among its candidates by design */
        CHECKF(gumbel || (k >= 0 && res.visits[k] >= 150), "one good move: 5h5e has %d of 200 visits, want 150",
               k >= 0 ? res.visits[k] : -1);
        CHECKF(k >= 0 && res.q[k] > 0.5f, "one good move (gumbel %d): Q of 5h5e %.3f", gumbel,
               k >= 0 ? res.q[k] : -9.0f);
        validate(t, "one good move");
        mcts_tree_free(t);
    }
}

/* ---- mates ------------------------------------------------------------------------ */

static void test_mate1(void) {
    /* G*5b mates (pawn on 5c guards it); G*4b, G*6b, 5c5b+, ... are other checks. */
    set_sfen(&pos, "4k4/9/4P4/9/9/9/9/9/4K4 b G 1");
    move_t mate = usi(&pos, "G*5b");
    CHECKF(bf_count_checks(&pos) >= 4, "mate-in-one position should have several checks");
    for (int mate1 = 0; mate1 <= 1; mate1++) {
        for (int gumbel = 0; gumbel <= 1; gumbel++) {
            mcts_params_t p = base_params();
            p.leaf_mate = mate1 ? 1 : 0;
            if (gumbel) {
                p.root_mode = MCTS_ROOT_GUMBEL;
                p.gumbel_m = 1000; /* every move is a candidate: uniform priors rank none first */
            }
            mcts_tree_t *t = mcts_tree_new(&p, NULL);
            mcts_tree_set_position(t, &pos);
            mcts_limits_t l = visits(800);
            mcts_search(t, &l, eval_uniform, NULL, &res);
            CHECKF(res.best == mate, "mate1 (leaf check %d, gumbel %d): played %s, want G*5b", mate1, gumbel,
                   usi_str(res.best));
            int32_t k = index_of(&res, mate);
            CHECKF(k >= 0 && fabsf(res.q[k] - 1.0f) < 1e-6f, "mate1: Q of the mate %.3f", k >= 0 ? res.q[k] : -9.0f);
            /* Gumbel's root mean averages the halving phases over many moves; the value of
             * its target policy is the estimate that must see the mate. */
            CHECKF(gumbel || res.root_q > 0.5f, "mate1 (leaf check %d): root value %.3f", mate1, res.root_q);
            CHECKF(res.policy_q > 0.5f, "mate1 (leaf check %d, gumbel %d): policy value %.3f", mate1, gumbel,
                   res.policy_q);
            check_result_policy(&pos, &res, "mate1");
            validate(t, "mate1");
            mcts_tree_free(t);
        }
    }
}

/* Generated by brute force (unique mating check, no mate in one, no quiet
 * mate in three, >= 4 checks, >= 2 defences); re-verified below. */
static const struct {
    const char *sfen, *answer;
} TSUME3[] = {
    {"2gk5/9/1L2R4/9/9/9/9/9/K8 b S 1", "S*5b"},
    {"9/2kB5/4S4/1g2b4/9/9/9/9/2K6 b 2GN 1", "G*7c"},
    {"4g4/3k5/9/4G4/9/9/9/9/K8 b L2G 1", "G*6c"},
    {"9/1k7/2RG5/s8/9/9/9/9/K8 b R 1", "6c7b"},
};

static void test_mate3(int leaf_mate) {
    for (int i = 0; i < (int)(sizeof TSUME3 / sizeof TSUME3[0]); i++) {
        set_sfen(&pos, TSUME3[i].sfen);
        move_t answer = usi(&pos, TSUME3[i].answer);
        CHECKF(!bf_mate1(&pos), "tsume %d has a mate in one", i);
        CHECKF(bf_forces_mate3(&pos, answer), "tsume %d: %s does not force mate", i, TSUME3[i].answer);
        CHECKF(bf_count_checks(&pos) >= 4, "tsume %d: too few checks", i);
        mcts_params_t p = base_params();
        p.leaf_mate = leaf_mate;
        mcts_tree_t *t = mcts_tree_new(&p, NULL);
        mcts_tree_set_position(t, &pos);
        mcts_limits_t l = visits(6000);
        mcts_search(t, &l, eval_uniform, NULL, &res);
        CHECKF(res.best == answer, "tsume %d (%s): played %s, want %s (root q %.3f)", i, TSUME3[i].sfen,
               usi_str(res.best), TSUME3[i].answer, res.root_q);
        CHECKF(bf_forces_mate3(&pos, res.best), "tsume %d: played move does not force mate", i);
        CHECKF(res.root_q > 0.5f, "tsume %d: root value %.3f", i, res.root_q);
        CHECKF(res.pv_len == 3, "tsume %d: pv length %d", i, res.pv_len);
        if (res.pv_len == 3) { /* the PV ends with the mate in one found at the leaf */
            pos_copy(&pos2, &pos);
            for (int k = 0; k < 3; k++) pos_do_move(&pos2, res.pv[k]);
            CHECKF(movegen_count_legal(&pos2) == 0 && pos_in_check(&pos2), "tsume %d: PV does not end in mate", i);
        }
        validate(t, "mate3");
        mcts_tree_free(t);
    }
}

/* Brute force: a check after which every reply allows a mate in one. */
static bool bf_check_mate3(pos_t *p) {
    move_list_t l;
    movegen_legal(p, &l);
    for (int32_t i = 0; i < l.n; i++)
        if (pos_gives_check(p, l.moves[i]) && bf_forces_mate3(p, l.moves[i])) return true;
    return false;
}

static void test_leaf_mate3(void) {
    move_list_t l;
    for (int i = 0; i < (int)(sizeof TSUME3 / sizeof TSUME3[0]); i++) {
        set_sfen(&pos, TSUME3[i].sfen);
        uint64_t key = pos_key(&pos);
        movegen_legal(&pos, &l);
        CHECKF(mcts_leaf_mate3(&pos, &l, 320) != MOVE_NONE, "tsume %d: no mate in three at the leaf", i);
        CHECKF(mcts_leaf_mate3(&pos, &l, pos_game_ply(&pos) + 1) == MOVE_NONE, "tsume %d: a mate after the max-ply draw", i);
        CHECKF(pos_key(&pos) == key, "tsume %d: the position changed", i);
    }
    /* Every position of random games: the leaf check agrees with brute force
     * (where there is no mate in one, as the tree asks it). */
    uint64_t st = 12345;
    int32_t positions = 0, mates = 0, mated2 = 0, wrong = 0;
    for (int g = 0; g < 60; g++) {
        pos_set_startpos(&pos);
        for (int ply = 0; ply < 160; ply++) {
            movegen_legal(&pos, &l);
            if (l.n == 0) break;
            if (pos_in_check(&pos)) { /* mated in two: every evasion allows a mate in one */
                bool want2 = true;
                for (int32_t i = 0; i < l.n && want2; i++) {
                    pos_do_move(&pos, l.moves[i]);
                    want2 = bf_mate1(&pos);
                    pos_undo_move(&pos);
                }
                mated2 += want2;
                CHECKF(mcts_leaf_mated2(&pos, &l, 0) == want2, "mated in two: brute force %d", want2);
            }
            if (!bf_mate1(&pos)) {
                move_t m3 = mcts_leaf_mate3(&pos, &l, 0);
                bool want = bf_check_mate3(&pos), got = m3 != MOVE_NONE;
                if (got) { /* its check leaves the other side mated in two */
                    CHECKF(bf_forces_mate3(&pos, m3), "the leaf's mate in three starts with %s", usi_str(m3));
                    pos_do_move(&pos, m3);
                    move_list_t ev;
                    movegen_legal(&pos, &ev);
                    CHECKF(mcts_leaf_mated2(&pos, &ev, 0), "not mated in two after %s", usi_str(m3));
                    mated2++;
                    pos_undo_move(&pos);
                }
                positions++;
                mates += want;
                if (want != got && wrong++ < 5) {
                    char sfen[SFEN_MAX_LEN];
                    sfen_write(&pos, sfen, sizeof sfen);
                    CHECKF(want == got, "%s: brute force %d, leaf check %d", sfen, want, got);
                }
            }
            pos_do_move(&pos, l.moves[t_splitmix64(&st) % (uint64_t)l.n]);
        }
    }
    CHECKF(wrong == 0, "%d of %d random positions disagree", wrong, positions);
    CHECKF(mates >= 20, "only %d mates in three among %d random positions: the sweep tests too little", mates,
           positions);
    CHECKF(mated2 >= 20, "only %d positions mated in two: the sweep tests too little", mated2);
    printf("leaf mate in three: %d of %d random positions, mated in two: %d, all as brute force\n", mates,
           positions, mated2);
}

/* ---- repetition -------------------------------------------------------------------- */

/* White is winning everywhere: -0.8 for Black to move, +0.8 for White to move. */
static void eval_white_wins(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *pol, float *wdl) {
    (void)user;
    static pos_t leaf;
    memset(pol, 0, (size_t)n * ENC_LABEL_NB * sizeof(float));
    for (int32_t i = 0; i < n; i++) {
        mcts_request_position(t, &reqs[i], &leaf);
        CHECKF(pos_key(&leaf) == reqs[i].key, "request position key differs from the request");
        float good = logf(0.85f), draw = logf(0.10f), bad = logf(0.05f);
        bool white = pos_side_to_move(&leaf) == COLOR_WHITE;
        wdl[3 * i + 0] = white ? good : bad;
        wdl[3 * i + 1] = draw;
        wdl[3 * i + 2] = white ? bad : good;
    }
}

/* The mirror image: Black is winning everywhere. */
static void eval_black_wins(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *pol, float *wdl) {
    eval_white_wins(user, t, reqs, n, pol, wdl);
    for (int32_t i = 0; i < n; i++) {
        float w = wdl[3 * i];
        wdl[3 * i] = wdl[3 * i + 2];
        wdl[3 * i + 2] = w;
    }
}

static void play(pos_t *p, const char *const *moves) {
    for (; *moves; moves++) pos_do_move(p, usi(p, *moves));
}

static void test_repetition(void) {
    /* Kings shuffle back: the root equals the start, and 5i4h repeats the
     * position after Black's first move. Everything else is -0.8. */
    set_sfen(&pos, "4k4/9/9/9/9/9/9/9/4K4 b - 1");
    static const char *const shuffle[] = {"5i4h", "5a4b", "4h5i", "4b5a", NULL};
    play(&pos, shuffle);
    move_t rep = usi(&pos, "5i4h");
    mcts_params_t p = base_params();
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_limits_t l = visits(600);
    mcts_search(t, &l, eval_white_wins, NULL, &res);
    int32_t k = index_of(&res, rep);
    CHECKF(res.best == rep, "repetition draw: played %s, want 5i4h", usi_str(res.best));
    CHECKF(k >= 0 && res.q[k] == 0.0f, "repetition draw: Q(5i4h) = %.4f, want exactly 0", k >= 0 ? res.q[k] : -9.0f);
    CHECKF(res.root_q > -0.3f, "repetition draw: root value %.3f (draw available)", res.root_q);
    validate(t, "repetition");
    mcts_tree_free(t);

    /* Contempt (draw_value): the same draw is worth -0.5 to Black, still
     * better than -0.8; at -0.9 it is worse, and Black plays on. */
    static const float worth[2] = {-0.5f, -0.9f};
    for (int i = 0; i < 2; i++) {
        mcts_params_t pc = base_params();
        pc.draw_value[COLOR_BLACK] = worth[i];
        pc.draw_value[COLOR_WHITE] = -worth[i];
        t = mcts_tree_new(&pc, NULL);
        mcts_tree_set_position(t, &pos);
        mcts_search(t, &l, eval_white_wins, NULL, &res);
        k = index_of(&res, rep);
        CHECKF(k >= 0 && res.visits[k] > 0 && fabsf(res.q[k] - worth[i]) < 1e-6f,
               "contempt %.1f: Q(5i4h) = %.4f (visits %d), want the draw value", worth[i], k >= 0 ? res.q[k] : -9.0f,
               k >= 0 ? res.visits[k] : -1);
        if (i == 0)
            CHECKF(res.best == rep, "contempt -0.5: played %s, want the draw 5i4h (-0.5 > -0.8)", usi_str(res.best));
        else
            CHECKF(res.best != rep, "contempt -0.9: played the draw 5i4h, worse than playing on (-0.8)");
        validate(t, "contempt");
        mcts_tree_free(t);
    }

    /* A batch in flight: the same draw, but now Black wins everywhere else
     * (+0.8), 200 visits gathered 32 at a time as the USI engine does. While
     * the other moves' leaves wait for the network, their virtual losses make
     * them look lost, and the draw, resolved at once, took nearly every
     * visit (180 of 200): a won position drawn by repetition. */
    {
        mcts_params_t pb = base_params();
        pb.search_batch = 32;
        t = mcts_tree_new(&pb, NULL);
        mcts_tree_set_position(t, &pos);
        mcts_limits_t l200 = visits(200);
        mcts_search(t, &l200, eval_black_wins, NULL, &res);
        k = index_of(&res, rep);
        int32_t total = 0;
        for (int32_t i = 0; i < res.n; i++) total += res.visits[i];
        CHECKF(res.best != rep, "batched search: played the repetition draw 5i4h in a won position (visits %d of %d)",
               k >= 0 ? res.visits[k] : -1, total);
        CHECKF(k >= 0 && res.visits[k] * 10 <= total, "batched search: the draw 5i4h took %d of %d visits",
               k >= 0 ? res.visits[k] : -1, total);
        validate(t, "batched repetition");
        mcts_tree_free(t);
    }

    /* Perpetual check: R5i+, K4a, R4i+, K5a; R5i+ again would repeat with
     * Black checking on every move: a loss for Black, worse than -0.8. */
    set_sfen(&pos, "4k4/9/9/9/9/9/9/9/K5R2 b - 1");
    static const char *const checks[] = {"3i5i", "5a4a", "5i4i", "4a5a", NULL};
    play(&pos, checks);
    move_t perp = usi(&pos, "4i5i");
    t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_search(t, &l, eval_white_wins, NULL, &res);
    k = index_of(&res, perp);
    CHECKF(k >= 0 && res.visits[k] > 0 && res.q[k] == -1.0f, "perpetual check: Q(4i5i) = %.4f (visits %d), want -1",
           k >= 0 ? res.q[k] : -9.0f, k >= 0 ? res.visits[k] : -1);
    CHECKF(res.best != perp, "perpetual check: played the losing repetition");
    validate(t, "perpetual");
    mcts_tree_free(t);
}

/* ---- entering-king declaration ------------------------------------------------------- */

/* Black's king on 5b with 10 pieces in White's camp (18 points): with R B
 * in hand 28 points, a declaration under the 27-point rule only; with
 * R B 3P 31, under the 24-point rule too. */
static void test_declaration(void) {
    static const struct {
        const char *sfen;
        bool by[RULES_DECLARE_NB]; /* CSA27, CSA24, NONE */
    } leaves[] = {{"+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b RB 1", {true, false, false}},
                  {"+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b RB3P 1", {true, true, false}},
                  {"+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 b R4P 1", {false, false, false}}};
    for (size_t i = 0; i < sizeof leaves / sizeof leaves[0]; i++) {
        set_sfen(&pos, leaves[i].sfen);
        for (int r = 0; r < RULES_DECLARE_NB; r++) {
            float v = -9.0f;
            bool end = mcts_leaf_end(&pos, 320, (rules_declare_t)r, &v);
            CHECKF(end == leaves[i].by[r] && (!end || v == 1.0f), "leaf %d, rule %d: end %d (v %.1f), want %d", (int)i, r,
                   end, v, leaves[i].by[r]);
        }
    }
    /* White to move: after any reply (the king's; none gives check) Black
     * may declare under the 27-point rule, a loss for White at every child.
     * Under no rule, or the 24-point rule (28 points are short of 31), the
     * children are ordinary positions the zero-value network scores 0. */
    set_sfen(&pos, "+L+NSG1GS+N+L/1R2K2B1/9/9/9/9/9/9/4k4 w RB 1");
    for (int r = 0; r < RULES_DECLARE_NB; r++) {
        mcts_params_t p = base_params();
        p.leaf_mate = 0; /* only the declaration resolves a leaf */
        p.declare = (rules_declare_t)r;
        mcts_tree_t *t = mcts_tree_new(&p, NULL);
        mcts_tree_set_position(t, &pos);
        mcts_limits_t l = visits(200);
        mcts_search(t, &l, eval_uniform, NULL, &res);
        int32_t lost = 0, visited = 0;
        for (int32_t k = 0; k < res.n; k++)
            if (res.visits[k] > 0) visited++, lost += res.q[k] == -1.0f;
        if (r == RULES_DECLARE_CSA27)
            CHECKF(visited == res.n && lost == visited && res.root_q < -0.9f,
                   "27-point rule: %d of %d moves lost to the declaration (visited %d), root value %.3f", lost, res.n,
                   visited, res.root_q);
        else
            CHECKF(visited > 0 && lost == 0 && res.root_q > -0.5f,
                   "rule %d: %d of %d visited moves scored a declaration loss, root value %.3f", r, lost, visited,
                   res.root_q);
        validate(t, "declaration");
        mcts_tree_free(t);
    }
    /* self-play and the referee rely on the default */
    mcts_params_t p = base_params();
    CHECKF(p.declare == RULES_DECLARE_CSA27, "the default rule is the 27-point one");
}

/* ---- virtual loss and batching ------------------------------------------------------ */

static mcts_request_t reqs[64];
static float pol[64 * ENC_LABEL_NB], wdl[64 * 3];

static void deliver_all(mcts_tree_t *t, int32_t n, mcts_eval_fn_t f) {
    f(NULL, t, reqs, n, pol, wdl);
    for (int32_t i = n - 1; i >= 0; i--) mcts_deliver(t, &reqs[i], pol + (size_t)i * ENC_LABEL_NB, wdl + 3 * i);
}

static void test_virtual_loss(void) {
    pos_set_startpos(&pos);
    mcts_params_t p = base_params();
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_limits_t l = visits(200);
    mcts_search_begin(t, &l);
    int32_t n = mcts_collect(t, 8, reqs);
    CHECKF(n == 1, "first collect returns the root alone, got %d", n);
    CHECKF(n == 1 && reqs[0].key == pos_key(&pos) && reqs[0].n_moves == 30, "root request key/moves");
    /* The root request carries the encoding of the position. */
    static uint8_t packed[ENC_PACKED_BYTES];
    static float hand[ENC_HAND];
    encode_position(&pos, packed, hand);
    CHECKF(memcmp(packed, reqs[0].packed, sizeof packed) == 0 && memcmp(hand, reqs[0].hand, sizeof hand) == 0,
           "request planes differ from encode_position");
    CHECKF(mcts_collect(t, 8, reqs + 1) == 0, "root in flight: nothing else to collect");
    deliver_all(t, 1, eval_hash);
    for (int round = 0; round < 6; round++) {
        n = mcts_collect(t, 16, reqs);
        CHECKF(n == 16, "round %d: collected %d of 16 (30 root moves allow 16 distinct leaves)", round, n);
        /* Distinct nodes (in round 0 all are root children, so distinct positions too). */
        for (int32_t i = 0; i < n; i++)
            for (int32_t j = 0; j < i; j++) {
                CHECKF(reqs[i].node_ != reqs[j].node_, "round %d: leaves %d and %d are the same node", round, i, j);
                if (round == 0)
                    CHECKF(reqs[i].key != reqs[j].key, "round 0: leaves %d and %d are the same position", i, j);
            }
        CHECKF(mcts_pending(t) == n, "pending %d", mcts_pending(t));
        validate(t, "virtual loss mid-flight");
        /* A second collect while these are in flight gives further distinct leaves. */
        int32_t m = mcts_collect(t, 8, reqs + n);
        for (int32_t i = n; i < n + m; i++)
            for (int32_t j = 0; j < i; j++)
                CHECKF(reqs[i].node_ != reqs[j].node_, "overlapping collect repeated a leaf in flight");
        validate(t, "two collects in flight");
        deliver_all(t, n + m, eval_hash);
        validate(t, "after delivery");
        CHECKF(mcts_pending(t) == 0, "pending after delivery");
    }
    mcts_tree_free(t);

    /* Two legal moves: only two distinct leaves exist; the rest collide and are undone. */
    set_sfen(&pos, "8k/9/9/9/9/9/9/9/K8 b - 1"); /* Black king in the corner: 9h, 8h, 8i */
    t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_search_begin(t, &l);
    n = mcts_collect(t, 8, reqs);
    deliver_all(t, n, eval_hash);
    n = mcts_collect(t, 8, reqs);
    CHECKF(n == 3, "three root moves: collected %d distinct leaves, want 3", n);
    validate(t, "collisions undone");
    deliver_all(t, n, eval_hash);
    validate(t, "collisions delivered");
    mcts_search_result(t, &res);
    CHECKF(res.collisions > 0, "collisions not counted");

    /* A game abandoned with leaves in flight: their late results are ignored. */
    n = mcts_collect(t, 8, reqs);
    CHECKF(n > 0 && mcts_pending(t) == n, "collect before abandoning");
    pos_set_startpos(&pos);
    mcts_tree_set_position(t, &pos);
    eval_hash(NULL, t, reqs, n, pol, wdl);
    bool any = false;
    for (int32_t i = 0; i < n; i++) any |= mcts_deliver(t, &reqs[i], pol + (size_t)i * ENC_LABEL_NB, wdl + 3 * i);
    CHECKF(!any && mcts_pending(t) == 0 && mcts_tree_nodes(t) == 1, "stale delivery changed the new tree");
    validate(t, "after stale delivery");
    mcts_search(t, &l, eval_hash, NULL, &res);
    check_result_policy(&pos, &res, "after stale delivery");
    mcts_tree_free(t);
}

/* ---- reuse, pool ----------------------------------------------------------------------- */

static void test_reuse(void) {
    pos_set_startpos(&pos);
    mcts_params_t p = base_params();
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_limits_t l = visits(600);
    mcts_search(t, &l, eval_hash, NULL, &res);
    int32_t k = index_of(&res, res.best);
    int32_t kept_visits = res.visits[k];
    int32_t nodes_before = res.nodes;
    CHECKF(kept_visits > 1, "best move has %d visits", kept_visits);
    CHECKF(mcts_tree_advance(t, res.best), "advance did not keep the searched subtree");
    validate(t, "after advance");
    CHECKF(mcts_tree_nodes(t) < nodes_before && mcts_tree_nodes(t) <= kept_visits,
           "compaction: %d nodes kept of %d (subtree had %d visits)", mcts_tree_nodes(t), nodes_before, kept_visits);
    pos_copy(&pos2, &pos);
    pos_do_move(&pos2, res.best);
    CHECKF(pos_key(mcts_tree_position(t)) == pos_key(&pos2), "root position after advance");
    /* The kept subtree is what the search built: an empty search reports its visits and PV. */
    mcts_limits_t none = visits(1);
    mcts_search_begin(t, &none);
    mcts_search_result(t, &res2);
    CHECKF(res2.root_visits == kept_visits, "root visits %lld after advance, want %d", (long long)res2.root_visits,
           kept_visits);
    CHECKF(res.pv_len > 2 && res2.pv_len >= 1 && res2.pv[0] == res.pv[1], "PV after advance starts with %s, want %s",
           usi_str(res2.pv[0]), usi_str(res.pv[1]));
    mcts_search(t, &l, eval_hash, NULL, &res2);
    CHECKF(res2.root_visits == kept_visits + 600, "visits after the next search %lld, want %d",
           (long long)res2.root_visits, kept_visits + 600);
    check_result_policy(&pos2, &res2, "after reuse");
    validate(t, "search after advance");
    /* A move never searched starts a fresh tree. */
    mcts_tree_set_position(t, &pos);
    mcts_limits_t few = visits(5);
    mcts_search(t, &few, eval_hash, NULL, &res);
    move_t unsearched = MOVE_NONE;
    for (int32_t i = 0; i < res.n; i++)
        if (res.visits[i] == 0) unsearched = res.moves[i];
    CHECKF(unsearched != MOVE_NONE, "5 visits searched all 30 moves");
    if (unsearched != MOVE_NONE) {
        CHECKF(!mcts_tree_advance(t, unsearched), "advance on an unsearched move kept something");
        CHECKF(mcts_tree_nodes(t) == 1, "fresh tree has %d nodes", mcts_tree_nodes(t));
        validate(t, "advance to an unsearched move");
    }
    mcts_tree_free(t);
}

static void test_pool(void) {
    pos_set_startpos(&pos);
    for (int which = 0; which < 2; which++) {
        mcts_params_t p = base_params();
        if (which == 0) p.node_limit = 40;
        else p.node_limit = 1000, p.edge_limit = 700; /* edges run out first */
        mcts_tree_t *t = mcts_tree_new(&p, NULL);
        mcts_tree_set_position(t, &pos);
        mcts_limits_t l = visits(5000);
        mcts_search(t, &l, eval_hash, NULL, &res);
        CHECKF(res.stop == MCTS_STOP_POOL, "pool %d: stopped by %s", which, mcts_stop_name(res.stop));
        CHECKF(res.playouts < 5000 && res.playouts > 0, "pool %d: %lld playouts", which, (long long)res.playouts);
        check_result_policy(&pos, &res, "pool full");
        validate(t, "pool full");
        /* Reuse still works on a full pool and frees room. */
        mcts_tree_advance(t, res.best);
        validate(t, "advance on a full pool");
        mcts_search(t, &l, eval_hash, NULL, &res);
        CHECKF(res.best != MOVE_NONE, "search after a full pool");
        validate(t, "search after a full pool");
        mcts_tree_free(t);
    }
}

/* ---- results, noise, playout cap, temperature -------------------------------------------- */

static void test_targets(void) {
    pos_set_startpos(&pos);
    mcts_params_t p = base_params();
    p.noise = true;
    p.full_prob = 0.5f;
    p.visits_full = 120;
    p.visits_fast = 20;
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    int full = 0;
    for (int i = 0; i < 40; i++) {
        mcts_tree_set_position(t, &pos);
        mcts_search(t, NULL, eval_hash, NULL, &res);
        full += res.full_search;
        CHECKF(res.playouts == (res.full_search ? 120 : 20), "playout cap: %lld playouts for a %s search",
               (long long)res.playouts, res.full_search ? "full" : "fast");
        check_result_policy(&pos, &res, "playout cap");
        int64_t sum = 0;
        for (int32_t k = 0; k < res.n; k++) sum += res.visits[k];
        CHECKF(sum == res.playouts, "child visits %lld != playouts %lld", (long long)sum, (long long)res.playouts);
    }
    CHECKF(full >= 8 && full <= 32, "full searches %d of 40 with p = 0.5", full);

    /* Noise only on full searches: a fast search with noise on equals one with it off. */
    mcts_params_t q = p;
    q.noise = false;
    mcts_tree_t *u = mcts_tree_new(&q, NULL);
    mcts_limits_t fast = visits(60);
    fast.full = 0;
    mcts_tree_set_position(t, &pos);
    mcts_tree_set_position(u, &pos);
    mcts_search(t, &fast, eval_hash, NULL, &res);
    mcts_search(u, &fast, eval_hash, NULL, &res2);
    CHECKF(!res.full_search && memcmp(res.visits, res2.visits, sizeof(int32_t) * (size_t)res.n) == 0,
           "fast search with noise on differs from noise off");
    /* ... while a full search with noise differs (30 moves, 60 visits). */
    mcts_limits_t full_l = visits(60);
    mcts_tree_set_position(t, &pos);
    mcts_tree_set_position(u, &pos);
    mcts_search(t, &full_l, eval_hash, NULL, &res);
    mcts_search(u, &full_l, eval_hash, NULL, &res2);
    CHECKF(res.full_search && memcmp(res.visits, res2.visits, sizeof(int32_t) * (size_t)res.n) != 0,
           "Dirichlet noise changed nothing");
    mcts_tree_free(u);
    mcts_tree_free(t);

    /* Move temperature: samples among visited moves while ply <= move_temp_plies. */
    p = base_params();
    p.move_temp = 1.0f;
    p.move_temp_plies = 10;
    t = mcts_tree_new(&p, NULL);
    int differ = 0;
    for (int i = 0; i < 30; i++) {
        mcts_tree_set_position(t, &pos);
        mcts_limits_t l = visits(100);
        mcts_search(t, &l, eval_uniform, NULL, &res);
        int32_t k = index_of(&res, res.best);
        CHECKF(k >= 0 && res.visits[k] > 0, "temperature picked an unvisited move");
        differ += res.best != res.best_greedy;
    }
    CHECKF(differ > 5, "temperature 1 over 30 uniform searches: only %d differ from the greedy move", differ);
    set_sfen(&pos2, "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 11");
    for (int i = 0; i < 10; i++) {
        mcts_tree_set_position(t, &pos2);
        mcts_limits_t l = visits(100);
        mcts_search(t, &l, eval_uniform, NULL, &res);
        CHECKF(res.best == res.best_greedy, "temperature applied after move_temp_plies");
    }
    mcts_tree_free(t);

    /* A single legal move needs no search. */
    set_sfen(&pos, "k8/9/9/9/9/9/9/r8/8K b - 1"); /* rook on rank h: the king 1i can only go to 2i */
    move_list_t ml;
    movegen_legal(&pos, &ml);
    if (ml.n == 1) {
        t = mcts_tree_new(&p, NULL);
        mcts_tree_set_position(t, &pos);
        mcts_limits_t l = visits(100);
        mcts_search(t, &l, eval_uniform, NULL, &res);
        CHECKF(res.stop == MCTS_STOP_SINGLE && res.best == ml.moves[0] && res.policy[0] == 1.0f,
               "single move: stop %s", mcts_stop_name(res.stop));
        mcts_tree_free(t);
    } else {
        CHECKF(ml.n == 1, "single-move position has %d moves", ml.n);
    }

    /* A mated root: no move, stop "terminal". */
    set_sfen(&pos, "4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1");
    t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    mcts_limits_t l = visits(100);
    mcts_search(t, &l, eval_uniform, NULL, &res);
    CHECKF(res.stop == MCTS_STOP_TERMINAL && res.best == MOVE_NONE && res.n == 0, "mated root: stop %s best %s",
           mcts_stop_name(res.stop), usi_str(res.best));
    mcts_tree_free(t);
}

/* ---- stop flag, deadlines -------------------------------------------------------------------- */

typedef struct {
    atomic_int *flag;
    int64_t after_ms;
} stopper_t;

static void *stopper(void *arg) {
    stopper_t *s = arg;
    compat_sleep_ms(s->after_ms);
    atomic_store(s->flag, 1);
    return NULL;
}

static void test_stop(void) {
    pos_set_startpos(&pos);
    mcts_params_t p = base_params();
    p.node_limit = 1 << 18;
    mcts_tree_t *t = mcts_tree_new(&p, NULL);
    mcts_tree_set_position(t, &pos);
    atomic_int flag = 0;
    stopper_t s = {&flag, 50};
    compat_thread_t th;
    CHECKF(compat_thread_create(&th, stopper, &s) == 0, "thread");
    mcts_limits_t l = visits(INT64_MAX / 2);
    l.stop = &flag;
    int64_t t0 = compat_now_ms();
    mcts_search(t, &l, eval_uniform, NULL, &res);
    int64_t dt = compat_now_ms() - t0;
    compat_thread_join(th);
    CHECKF(res.stop == MCTS_STOP_FLAG || res.stop == MCTS_STOP_POOL, "stopped by %s", mcts_stop_name(res.stop));
    CHECKF(dt < 5000, "stop flag took %lld ms", (long long)dt);
    CHECKF(res.best != MOVE_NONE, "stopped search has no move");

    /* Flag already set: the root is still evaluated, so there is a move. */
    mcts_tree_set_position(t, &pos);
    mcts_search(t, &l, eval_uniform, NULL, &res);
    CHECKF(res.stop == MCTS_STOP_FLAG && res.best != MOVE_NONE && res.playouts == 0, "pre-set flag: %s, %lld playouts",
           mcts_stop_name(res.stop), (long long)res.playouts);

    /* Hard deadline. */
    mcts_tree_set_position(t, &pos);
    l.stop = NULL;
    t0 = compat_now_ms();
    l.hard_deadline_ms = t0 + 80;
    mcts_search(t, &l, eval_uniform, NULL, &res);
    dt = compat_now_ms() - t0;
    CHECKF(res.stop == MCTS_STOP_TIME || res.stop == MCTS_STOP_POOL, "deadline: stopped by %s", mcts_stop_name(res.stop));
    CHECKF(dt >= 80 || res.stop == MCTS_STOP_POOL, "deadline: stopped after %lld ms", (long long)dt);
    CHECKF(dt < 2000, "deadline: took %lld ms", (long long)dt);

    /* Soft deadline: a clear best move (a mate) stops the search at it, long before the hard one. */
    set_sfen(&pos, "4k4/9/4P4/9/9/9/9/9/4K4 b G 1");
    mcts_tree_set_position(t, &pos);
    t0 = compat_now_ms();
    l.soft_deadline_ms = t0 + 30;
    l.hard_deadline_ms = t0 + 20000;
    mcts_search(t, &l, eval_uniform, NULL, &res);
    dt = compat_now_ms() - t0;
    CHECKF((res.stop == MCTS_STOP_TIME && dt >= 30 && dt < 10000) || res.stop == MCTS_STOP_POOL,
           "soft deadline: stopped by %s after %lld ms", mcts_stop_name(res.stop), (long long)dt);
    CHECKF(res.best == usi(&pos, "G*5b"), "soft deadline: played %s", usi_str(res.best));
    mcts_tree_free(t);
}

int main(void) {
    test_mate1();
    test_mate3(1);
    test_mate3(3);
    test_leaf_mate3();
    test_repetition();
    test_declaration();
    test_virtual_loss();
    test_reuse();
    test_pool();
    test_targets();
    test_stop();
    test_one_good_move();
    return t_done("test_mcts_search");
}
