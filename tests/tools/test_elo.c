/* test_elo.c - the Elo arithmetic of match/referee.h: known values of the
 * logistic formula, the trinomial and pentanomial intervals (shrinking with
 * games, symmetric at 50%, agreeing on independent data), the documented
 * handling of perfect and degenerate scores, and the ladder over a database. */
#include "match/referee.h"
#include "tools_test.h"

static void test_formula(void) {
    CHECK_NEAR(ref_elo_from_score(0.5), 0.0, 1e-12);
    CHECK_NEAR(ref_elo_from_score(0.75), 190.848501887865, 1e-6); /* 400 log10(3) */
    CHECK_NEAR(ref_elo_from_score(0.25), -190.848501887865, 1e-6);
    CHECK_NEAR(ref_elo_from_score(10.0 / 11.0), 400.0, 1e-9); /* odds 10:1 = 400 Elo */
    CHECK(isinf(ref_elo_from_score(1.0)) && ref_elo_from_score(1.0) > 0);
    CHECK(isinf(ref_elo_from_score(0.0)) && ref_elo_from_score(0.0) < 0);
    CHECK(isnan(ref_elo_from_score(1.5)) && isnan(ref_elo_from_score(-0.1)) && isnan(ref_elo_from_score(NAN)));
    for (double e = -800; e <= 800; e += 37.5) CHECK_NEAR(ref_elo_from_score(ref_elo_to_score(e)), e, 1e-9);
}

static void test_trinomial(void) {
    ref_elo_t r;
    ref_elo_trinomial(30, 40, 30, &r);
    CHECK_NEAR(r.score, 0.5, 1e-12);
    CHECK_NEAR(r.elo, 0.0, 1e-9);
    CHECK_NEAR(r.elo_lo, -r.elo_hi, 1e-9); /* symmetric at 50% */
    CHECK(r.elo_lo < -20 && r.elo_hi > 20);
    /* Hand computation: var = (30*.25 + 40*0 + 30*.25)/100 = 0.15, se = sqrt(.15/100). */
    double se = sqrt(0.15 / 100);
    CHECK_NEAR(r.elo_hi, ref_elo_from_score(0.5 + REF_ELO_Z95 * se), 1e-9);
    CHECK_NEAR(r.los, 0.5, 1e-12);

    ref_elo_trinomial(60, 30, 10, &r); /* score 0.75 */
    CHECK_NEAR(r.score, 0.75, 1e-12);
    CHECK_NEAR(r.elo, 190.8485, 1e-3);
    CHECK(r.elo_lo < r.elo && r.elo < r.elo_hi);
    CHECK(r.los > 0.999);
    /* The interval shrinks about as 1/sqrt(games) at the same score. */
    ref_elo_t big;
    ref_elo_trinomial(600, 300, 100, &big);
    CHECK_NEAR(big.elo, r.elo, 1e-9);
    double w_small = r.elo_hi - r.elo_lo, w_big = big.elo_hi - big.elo_lo;
    CHECK(w_big < w_small);
    CHECK_NEAR(w_big / w_small, 1.0 / sqrt(10.0), 0.05);
    /* More draws at the same score: a narrower interval. */
    ref_elo_t drawish;
    ref_elo_trinomial(25, 100, 0, &drawish); /* 0.6 */
    ref_elo_t decisive;
    ref_elo_trinomial(75, 0, 50, &decisive); /* 0.6 */
    CHECK_NEAR(drawish.elo, decisive.elo, 1e-9);
    CHECK(drawish.elo_hi - drawish.elo_lo < decisive.elo_hi - decisive.elo_lo);
    /* A loss-heavy score mirrors a win-heavy one. */
    ref_elo_t mirror;
    ref_elo_trinomial(10, 30, 60, &mirror);
    CHECK_NEAR(mirror.elo, -r.elo, 1e-9);
    CHECK_NEAR(mirror.elo_lo, -r.elo_hi, 1e-9);
    CHECK(mirror.los < 0.001);
}

static void test_degenerate(void) {
    ref_elo_t r;
    /* All wins: the point estimate is that of (N + 1/2)/(N + 1), finite; the lower end
     * is the Wilson bound, finite; the upper end is +inf. */
    ref_elo_trinomial(10, 0, 0, &r);
    CHECK_NEAR(r.score, 1.0, 0);
    CHECK(isfinite(r.elo));
    CHECK_NEAR(r.elo, ref_elo_from_score(10.5 / 11), 1e-9);
    CHECK(isfinite(r.elo_lo) && r.elo_lo > 0 && r.elo_lo < r.elo);
    double z2 = REF_ELO_Z95 * REF_ELO_Z95;
    CHECK_NEAR(r.elo_lo, ref_elo_from_score(10.0 / (10.0 + z2)), 1e-6); /* Wilson at p = 1 */
    CHECK(isinf(r.elo_hi) && r.elo_hi > 0);
    /* More wins in a row: a higher lower bound. */
    ref_elo_t r100;
    ref_elo_trinomial(100, 0, 0, &r100);
    CHECK(r100.elo_lo > r.elo_lo && isfinite(r100.elo_lo) && r100.elo > r.elo);
    /* All losses mirror it. */
    ref_elo_trinomial(0, 0, 10, &r);
    CHECK(isfinite(r.elo) && r.elo < 0 && isinf(r.elo_lo) && r.elo_lo < 0 && isfinite(r.elo_hi));
    /* All draws: 0 with a Wilson interval, not a zero-width one. */
    ref_elo_trinomial(0, 8, 0, &r);
    CHECK_NEAR(r.elo, 0.0, 1e-9);
    CHECK(r.elo_lo < -50 && r.elo_hi > 50 && isfinite(r.elo_lo) && isfinite(r.elo_hi));
    /* One game. */
    ref_elo_trinomial(1, 0, 0, &r);
    CHECK_NEAR(r.elo, ref_elo_from_score(0.75), 1e-9);
    /* No games at all: NAN, no crash. */
    ref_elo_trinomial(0, 0, 0, &r);
    CHECK(isnan(r.elo) && isnan(r.elo_lo) && isnan(r.elo_hi) && r.n == 0);
    ref_elo_trinomial(-1, 0, 3, &r);
    CHECK(isnan(r.elo));
}

static void test_pentanomial(void) {
    ref_elo_t p, t;
    /* 100 pairs: 20 won both (WW), 30 W+D, 30 split (W+L or D+D), 15 D+L, 5 LL. */
    int32_t pairs[5] = {5, 15, 30, 30, 20};
    ref_elo_pentanomial(pairs, &p);
    double s = (15 * 0.25 + 30 * 0.5 + 30 * 0.75 + 20 * 1.0) / 100;
    CHECK_NEAR(p.score, s, 1e-12);
    CHECK_NEAR(p.elo, ref_elo_from_score(s), 1e-9);
    CHECK(p.n == 100 && p.elo_lo < p.elo && p.elo < p.elo_hi);
    /* Pairs made of independent games (each pair: W and L split evenly at
     * p(win) = 0.5): the pentanomial variance of a pair mean is half the
     * trinomial per-game variance, so both give the same interval. */
    int32_t ind[5] = {25, 0, 50, 0, 25}; /* WW 25, WL/LW 50, LL 25 */
    ref_elo_pentanomial(ind, &p);
    ref_elo_trinomial(100, 0, 100, &t);
    CHECK_NEAR(p.elo_hi, t.elo_hi, 1e-6);
    /* Correlated pairs (always one win one loss: the opening decides): the
     * pentanomial sees that there is almost no uncertainty left. */
    int32_t corr[5] = {0, 0, 100, 0, 0};
    ref_elo_pentanomial(corr, &p);
    CHECK_NEAR(p.elo, 0.0, 1e-9);
    CHECK(p.elo_hi < t.elo_hi);
    int32_t none[5] = {0, 0, 0, 0, 0};
    ref_elo_pentanomial(none, &p);
    CHECK(isnan(p.elo));
}

/* The ladder: cycle 0 = 0, each rated cycle chains on the one it was measured
 * against, the latest match of a cycle wins, external opponents are ignored,
 * intervals widen along the chain. */
static void test_ladder(void) {
    t_scratch("test_elo");
    char err[DB_ERR_MAX];
    db_t *db = NULL;
    KOMA_ASSERT(db_open(t_path("koma.db"), 0, &db, err, sizeof err) == DB_OK);
    ref_ladder_point_t *pts = NULL;
    int32_t n = -1;
    CHECK(ref_elo_ladder(db, &pts, &n) == DB_OK && n == 0);
    free(pts);
    int64_t ids[5];
    for (int c = 0; c < 5; c++) {
        db_model_t m;
        memset(&m, 0, sizeof m);
        m.cycle = c;
        snprintf(m.path, sizeof m.path, "models/cycle-%04d.safetensors", c);
        strcpy(m.xxh3, "0123456789abcdef");
        m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
        KOMA_ASSERT(db_model_insert(db, &m) == DB_OK);
        ids[c] = m.id;
    }
    struct {
        int a, b, w, d, l;
    } ms[] = {
        {1, 0, 12, 4, 4},  /* +120ish */
        {2, 1, 5, 10, 5},  /* 0, replaced below */
        {2, 1, 10, 5, 5},  /* the latest for cycle 2 */
        {3, 2, 4, 8, 8},   /* negative */
        {4, -1, 20, 0, 0}, /* against an external engine: ignored -> cycle 4 unrated */
    };
    double diff[5] = {0};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        db_match_t m;
        memset(&m, 0, sizeof m);
        m.cycle = ms[i].a;
        m.model_a = ids[ms[i].a];
        m.model_b = ms[i].b >= 0 ? ids[ms[i].b] : 0;
        if (ms[i].b < 0) strcpy(m.opponent, "gpsshogi");
        m.wins = ms[i].w, m.draws = ms[i].d, m.losses = ms[i].l;
        ref_elo_t e;
        ref_elo_trinomial(m.wins, m.draws, m.losses, &e);
        m.elo = e.elo, m.elo_lo = e.elo_lo, m.elo_hi = e.elo_hi;
        KOMA_ASSERT(db_match_insert(db, &m) == DB_OK);
        if (ms[i].b >= 0) diff[ms[i].a] = e.elo;
    }
    CHECK(ref_elo_ladder(db, &pts, &n) == DB_OK);
    CHECK(n == 4);
    if (n == 4) {
        CHECK(pts[0].cycle == 0 && pts[0].elo == 0.0 && pts[0].elo_lo == 0.0);
        CHECK(pts[1].cycle == 1 && pts[2].cycle == 2 && pts[3].cycle == 3);
        CHECK_NEAR(pts[1].elo, diff[1], 1e-9);
        CHECK_NEAR(pts[2].elo, diff[1] + diff[2], 1e-9);
        CHECK_NEAR(pts[3].elo, diff[1] + diff[2] + diff[3], 1e-9);
        CHECK(diff[2] > 50); /* the later of the two cycle-2 matches was used */
        CHECK(pts[2].from_cycle == 1 && pts[2].games == 20);
        /* Intervals widen along the chain. */
        CHECK(pts[2].elo_hi - pts[2].elo_lo > pts[1].elo_hi - pts[1].elo_lo);
        CHECK(pts[3].elo_hi - pts[3].elo_lo > pts[2].elo_hi - pts[2].elo_lo);
        CHECK(pts[1].elo_lo < pts[1].elo && pts[1].elo < pts[1].elo_hi);
    }
    free(pts);
    db_close(db);
    t_rm_rf(t_dir);
}

int main(void) {
    test_formula();
    test_trinomial();
    test_degenerate();
    test_pentanomial();
    test_ladder();
    return t_done("test_elo");
}
