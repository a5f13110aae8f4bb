/* test_rating.c - match/rating.c: the joint maximum-likelihood rating list.
 * A hand-computed two-player case (rating and interval), transitivity over a
 * chain with no direct games, a perfect score kept finite by the prior, a
 * player out of reach of the anchor, bad input, simulated round robins with
 * known strengths (ratings found within their intervals about 95% of the
 * time), and the list built from a run's koma.db (nets and an outside engine,
 * unfinished matches counted). */
#include "tests/koma_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/db.h"
#include "match/rating.h"

static rating_player_t g_p[16];

static void hand_computed(void) {
    /* A (anchor) vs B: A won 3, lost 1. With the virtual draw A scores 3.5 of 5:
     * q = 0.7, B = -400 log10(0.7/0.3); se = 1/sqrt(5 * 0.7 * 0.3) log-odds. */
    rating_pair_t pr = {0, 1, 4, 3.0};
    CHECK(rating_fit(g_p, 2, &pr, 1, 0, NULL, 0) == 0);
    double want = -400.0 * log10(0.7 / 0.3);
    double se = 1.0 / sqrt(5 * 0.7 * 0.3) * 400.0 / log(10.0);
    CHECK_NEAR(g_p[0].elo, 0.0, 1e-12);
    CHECK_NEAR(g_p[1].elo, want, 1e-6);
    CHECK_NEAR(g_p[1].lo, want - 1.959964 * se, 1e-4);
    CHECK_NEAR(g_p[1].hi, want + 1.959964 * se, 1e-4);
    CHECK(g_p[0].games == 4 && g_p[1].games == 4);
    /* The same games from B's side, anchor B: A is +want. */
    rating_pair_t rev = {1, 0, 4, 1.0};
    CHECK(rating_fit(g_p, 2, &rev, 1, 1, NULL, 0) == 0);
    CHECK_NEAR(g_p[0].elo, -want, 1e-6);
}

static void chain_and_edges(void) {
    /* A-B: B scores 75% of 4000; B-C: C 75% of 4000; A and C never meet. */
    rating_pair_t pr[2] = {{0, 1, 4000, 1000.0}, {1, 2, 4000, 1000.0}};
    CHECK(rating_fit(g_p, 3, pr, 2, 0, NULL, 0) == 0);
    double step = 400.0 * log10(3.0);
    CHECK_NEAR(g_p[1].elo, step, 1.0);
    CHECK_NEAR(g_p[2].elo, 2 * step, 2.0);
    CHECK(g_p[2].hi - g_p[2].lo > g_p[1].hi - g_p[1].lo); /* two links: wider */
    /* A perfect score stays finite; a player with no games toward the anchor gets none. */
    rating_pair_t perfect[2] = {{0, 1, 10, 10.0}, {2, 3, 6, 3.0}};
    CHECK(rating_fit(g_p, 4, perfect, 2, 0, NULL, 0) == 0);
    CHECK(isfinite(g_p[1].elo) && g_p[1].elo < -300 && g_p[1].elo > -1000);
    CHECK(isnan(g_p[2].elo) && isnan(g_p[3].elo));
    /* Bad input. */
    char err[256];
    rating_pair_t same = {1, 1, 2, 1.0}, over = {0, 1, 2, 3.0}, out = {0, 7, 2, 1.0};
    CHECK(rating_fit(g_p, 2, &same, 1, 0, err, sizeof err) == -1 && strstr(err, "pair 0"));
    CHECK(rating_fit(g_p, 2, &over, 1, 0, err, sizeof err) == -1);
    CHECK(rating_fit(g_p, 2, &out, 1, 0, err, sizeof err) == -1);
    CHECK(rating_fit(g_p, 2, NULL, 0, 5, err, sizeof err) == -1);
    CHECK(rating_fit(g_p, 1, NULL, 0, 0, err, sizeof err) == 0 && g_p[0].elo == 0.0);
}

/* Round robins among players of known strength; returns how many of the
 * non-anchor ratings had the truth inside their interval, of *total. */
static int simulate(uint64_t seed, int *total) {
    static const double truth[6] = {0, 50, 120, 200, 300, 450};
    rating_pair_t pr[15];
    int np = 0;
    t_seed(seed);
    for (int a = 0; a < 6; a++)
        for (int b = a + 1; b < 6; b++) {
            double e = 1.0 / (1.0 + pow(10.0, -(truth[a] - truth[b]) / 400.0));
            double pd = fmin(0.2, 2 * fmin(e, 1 - e)), pw = e - pd / 2;
            double pts = 0;
            for (int g = 0; g < 200; g++) {
                double u = t_unif();
                pts += u < pw ? 1.0 : u < pw + pd ? 0.5 : 0.0;
            }
            pr[np++] = (rating_pair_t){a, b, 200, pts};
        }
    CHECK(rating_fit(g_p, 6, pr, np, 0, NULL, 0) == 0);
    int in = 0;
    for (int i = 1; i < 6; i++) {
        in += g_p[i].lo <= truth[i] && truth[i] <= g_p[i].hi;
        double se = (g_p[i].hi - g_p[i].lo) / (2 * 1.959964);
        CHECKF(fabs(g_p[i].elo - truth[i]) < 4.5 * se, "player %d: %.1f for %.0f (se %.1f)", i, g_p[i].elo, truth[i], se);
    }
    *total += 5;
    return in;
}

static void tournaments(void) {
    int in = 0, total = 0;
    for (uint64_t s = 1; s <= 40; s++) in += simulate(s * 7919, &total);
    double cover = (double)in / total;
    printf("  simulated round robins: %d of %d intervals hold the true rating (%.1f%%)\n", in, total, 100 * cover);
    CHECKF(cover > 0.88 && cover < 0.995, "95%% intervals cover %.1f%%", 100 * cover);
}

static void from_database(void) {
    const char *dir = t_scratch("rating");
    char path[700], err[DB_ERR_MAX];
    snprintf(path, sizeof path, "%s/koma.db", dir);
    db_t *db = NULL;
    CHECK(db_open(path, 0, &db, err, sizeof err) == DB_OK);
    if (!db) return;
    int64_t id[3];
    for (int c = 0; c < 3; c++) {
        db_model_t m;
        memset(&m, 0, sizeof m);
        m.cycle = c;
        m.features_version = 1;
        snprintf(m.path, sizeof m.path, "models/%04d.safetensors", c);
        snprintf(m.xxh3, sizeof m.xxh3, "%016d", c);
        snprintf(m.arch, sizeof m.arch, "resnet1x8");
        m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
        CHECK(db_model_insert(db, &m) == DB_OK);
        id[c] = m.id;
    }
    /* 1 vs 0, 2 vs 1, an outside engine vs 2 (finished: an Elo each), and an
     * unfinished 2 vs 1 (games but no Elo), which counts in no rating. */
    db_match_t m;
    memset(&m, 0, sizeof m);
    m.cycle = 1, m.model_a = id[1], m.model_b = id[0], m.wins = 12, m.draws = 2, m.losses = 6;
    m.elo = m.elo_lo = m.elo_hi = 0;
    CHECK(db_match_insert(db, &m) == DB_OK);
    memset(&m, 0, sizeof m);
    m.cycle = 2, m.model_a = id[2], m.model_b = id[1], m.wins = 5, m.draws = 0, m.losses = 5;
    m.elo = m.elo_lo = m.elo_hi = 0;
    CHECK(db_match_insert(db, &m) == DB_OK);
    memset(&m, 0, sizeof m);
    m.cycle = 2, m.model_a = id[2], m.model_b = id[1], m.wins = 7, m.draws = 0, m.losses = 0;
    m.elo = m.elo_lo = m.elo_hi = NAN;
    CHECK(db_match_insert(db, &m) == DB_OK);
    memset(&m, 0, sizeof m);
    m.cycle = -1, m.model_a = 0, m.model_b = id[2], m.wins = 3, m.draws = 1, m.losses = 6;
    snprintf(m.engine_a, sizeof m.engine_a, "fairy-stockfish skill 0");
    snprintf(m.opponent, sizeof m.opponent, "cycle 2");
    m.elo = -70, m.elo_lo = -300, m.elo_hi = 150;
    CHECK(db_match_insert(db, &m) == DB_OK);
    rating_player_t *list = NULL;
    int32_t n = 0;
    CHECK(rating_list(db, &list, &n, err, sizeof err) == DB_OK && n == 4);
    if (n == 4) {
        /* before the usi-match row below: the engine's 10 games */
        CHECK(list[3].games == 10 && list[2].games == 20);
    }
    free(list);
    /* usi-match --run stores "engine2: NAME": the same player as the gauntlet's
     * label, whichever seat it had (no fifth player); cycle 2 lost 2 more to it. */
    memset(&m, 0, sizeof m);
    m.cycle = 2, m.model_a = id[2], m.model_b = 0, m.wins = 0, m.draws = 0, m.losses = 2;
    snprintf(m.engine_a, sizeof m.engine_a, "engine1: koma");
    snprintf(m.engine_b, sizeof m.engine_b, "engine2: fairy-stockfish skill 0");
    snprintf(m.opponent, sizeof m.opponent, "engine2: fairy-stockfish skill 0");
    m.elo = -400, m.elo_lo = -INFINITY, m.elo_hi = 0;
    CHECK(db_match_insert(db, &m) == DB_OK);
    list = NULL;
    CHECK(rating_list(db, &list, &n, err, sizeof err) == DB_OK && n == 4);
    if (n == 4) {
        CHECK(list[0].cycle == 0 && list[0].elo == 0.0 && list[1].cycle == 1 && list[2].cycle == 2);
        CHECK(list[3].cycle == -1 && strcmp(list[3].name, "fairy-stockfish skill 0") == 0);
        CHECK(list[1].elo > 0 && list[1].games == 30 && list[3].games == 12);
        /* the same fit by hand: the pairs as the list saw them */
        rating_pair_t pr[3] = {{1, 0, 20, 13.0}, {2, 1, 10, 5.0}, {3, 2, 12, 5.5}};
        rating_player_t q[4];
        CHECK(rating_fit(q, 4, pr, 3, 0, NULL, 0) == 0);
        for (int i = 0; i < 4; i++) CHECK_NEAR(list[i].elo, q[i].elo, 1e-9);
        CHECK(rating_of_cycle(list, n, 2) == &list[2] && rating_of_cycle(list, n, 7) == NULL);
    }
    free(list);
    db_close(db);
    if (!atomic_load(&g_fail)) t_rm_rf(dir);
}

int main(void) {
    hand_computed();
    chain_and_edges();
    tournaments();
    from_database();
    return t_done("test_rating");
}
