/* test_bootstrap.c - the head start from records (docs/LEARNING.md), through
 * the real programs, small sizes:
 *   1. games between USI engines: usi-match --run RUN --csa-dir CSA (two
 *      scripted fake engines), then import --run RUN CSA (the records into
 *      shards, one-hot policy targets on the moves played);
 *   2. train --from-games --run RUN: the untrained net becomes cycle 0 (the
 *      rating anchor), the trained one cycle 1;
 *   3. selfplay --run RUN continues: cycle 2 is the next net, the
 *      bootstrapped net (cycle 1) gets its gauntlet rating (its evaluation
 *      is found undone at start), and every evaluated net also plays the
 *      outside engines given as --gauntlet-engineK: a working one (rated in
 *      the joint list, usi-match's games joining it), a missing one (one
 *      warning naming it; the run goes on) and a bad value (refused before
 *      the run starts, naming the option).
 * Separately: what train --from-games learns from one-hot record targets
 * (no visit counts): trained long on a few imported records, the policy
 * predicts the moves played and the value loss falls well below a uniform
 * guess (its only target there is the game's result); under KOMA_TEST_SCALE
 * (the sanitizer jobs) that training runs its share of the 300 steps and
 * only has to finish.
 * The programs' paths come from CMake (KOMA_*_BIN, KOMA_SOURCE_DIR).
 */
#include "match/rating.h"
#include "sp_test.h"

#if !defined(KOMA_USI_MATCH_BIN) || !defined(KOMA_IMPORT_BIN) || !defined(KOMA_TRAIN_BIN) || \
    !defined(KOMA_SELFPLAY_BIN) || !defined(KOMA_FAKE_USI_BIN)
#define KOMA_BOOTSTRAP_SKIP 1 /* a build without one of the programs */
#define KOMA_USI_MATCH_BIN ""
#define KOMA_IMPORT_BIN ""
#define KOMA_TRAIN_BIN ""
#define KOMA_SELFPLAY_BIN ""
#define KOMA_FAKE_USI_BIN ""
#endif
#ifndef KOMA_SOURCE_DIR
#define KOMA_SOURCE_DIR "."
#endif

static const char *g_match = KOMA_USI_MATCH_BIN, *g_import = KOMA_IMPORT_BIN, *g_train = KOMA_TRAIN_BIN,
                  *g_selfplay = KOMA_SELFPLAY_BIN, *g_fake = KOMA_FAKE_USI_BIN, *g_src = KOMA_SOURCE_DIR;

/* Runs argv with stdout and stderr into log; the exit status (-1: not run). */
static int run_log(const char *const *argv, const char *log) {
    char err[512];
    int status = -1;
    fflush(stdout);
    if (compat_run_io(argv, log, log, &status, err, sizeof err) != 0) {
        fprintf(stderr, "cannot run %s: %s\n", argv[0], err);
        return -1;
    }
    return status;
}

static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The figure after "<key> " in train's "done:" line (NAN when absent). */
static double done_figure(const char *out, const char *key) {
    const char *d = out ? strstr(out, "done: step") : NULL;
    char k[32];
    snprintf(k, sizeof k, " %s ", key);
    const char *p = d ? strstr(d, k) : NULL;
    return p ? strtod(p + strlen(k), NULL) : NAN;
}

/* One-hot targets: a few imported records, trained on until the net knows them. */
static void one_hot_targets(const char *base) {
    char run[800], logf[800], recs[800];
    snprintf(run, sizeof run, "%s/records_run", base);
    snprintf(logf, sizeof logf, "%s/records.log", base);
    snprintf(recs, sizeof recs, "%s/tests/data/records", g_src);
    const char *imp[] = {g_import, "--run", run, "--quiet", recs, NULL};
    CHECK(run_log(imp, logf) == 0);
    char steps[16];
    snprintf(steps, sizeof steps, "%d", t_scaled(300, 20));
    const char *tr[] = {g_train, "--from-games", "--run", run, "--steps", steps, "--batch", "32", "--net", "1x32",
                        "--lr", "0.05", "--train-threads", "1", "--progress", "0", NULL};
    int st = run_log(tr, logf);
    char *out = t_read_file(logf, NULL);
    double acc = done_figure(out, "acc"), value = done_figure(out, "value");
    printf("  records, %s steps: policy accuracy on the moves played %.3f, value loss %.3f (uniform: %.3f)\n", steps,
           acc, value, log(3.0));
    /* a net that ignored the one-hot targets would stay near 1/legal moves;
     * one that ignored the results near ln 3 */
    CHECKF(st == 0 && (!t_full() || (acc > 0.6 && value < 0.85)),
           "train on records: exit %d, acc %.3f, value %.3f:\n%s", st, acc, value, out ? out : "");
    free(out);
}

#define SP_ARGS(run, cycles)                                                                                      \
    g_selfplay, "--run", run, "--cycles", cycles, "--games-per-cycle", "2", "--threads", "1", "--games-per-thread", \
        "2", "--leaves-per-game", "2", "--visits", "8", "--visits-fast", "4", "--gumbel-m", "4", "--max-ply", "40",  \
        "--net", "1x16", "--progress", "0", "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4", "--batch",  \
        "16", "--window-min", "50", "--cpu-threads", "1", "--train-threads", "1", "--cache-mb", "1", "--eval-games", \
        "6", "--eval-visits", "4"

int main(void) {
#ifdef KOMA_BOOTSTRAP_SKIP
    printf("test_bootstrap: skipped (usi-match, import, train, selfplay or fake_usi not built)\n");
    return 77;
#endif
    const char *base = t_scratch("bootstrap");
    int64_t t0 = compat_now_ms();
    one_hot_targets(base);

    char run[800], csa[800], log[800], e1[1200], e2[1200], fake_spec[1400];
    snprintf(run, sizeof run, "%s/run", base);
    snprintf(csa, sizeof csa, "%s/csa", base);
    snprintf(log, sizeof log, "%s/child.log", base);
    snprintf(e1, sizeof e1, "\"%s\" --name alpha --seed 1", g_fake);
    snprintf(e2, sizeof e2, "\"%s\" --name fake --seed 2", g_fake);

    /* 1. engine games stored in the run and written as CSA, then imported */
    const char *um[] = {g_match, "--engine1", e1, "--engine2", e2, "--name2", "fake", "--games", "4", "--byoyomi",
                        "200", "--max-ply", "60", "--run", run, "--csa-dir", csa, "--quiet", NULL};
    CHECK(run_log(um, log) == 0);
    CHECK(run_query(run, "SELECT count(*) FROM matches WHERE engine_b = 'engine2: fake' AND elo IS NOT NULL") == 1);
    const char *imp[] = {g_import, "--run", run, "--quiet", csa, NULL};
    CHECK(run_log(imp, log) == 0);
    CHECK(run_query(run, "SELECT count(*) FROM games WHERE shard_id IS NOT NULL") == 4);

    /* 2. train --from-games: cycle 0 untrained, cycle 1 trained */
    const char *tr[] = {g_train, "--from-games", "--run", run, "--steps", "20", "--batch", "16", "--net", "1x16",
                        "--train-threads", "1", "--progress", "0", NULL};
    int st = run_log(tr, log);
    char *out = t_read_file(log, NULL);
    CHECKF(st == 0 && strstr(out, "registered as cycle 0") && strstr(out, "registered as cycle 1"),
           "train --from-games: exit %d:\n%s", st, out ? out : "");
    free(out);
    CHECK(run_query(run, "SELECT count(*) FROM models WHERE cycle = 0 AND train_steps = 0") == 1);
    CHECK(run_query(run, "SELECT count(*) FROM models WHERE cycle = 1 AND train_steps = 20") == 1);

    /* a bad engine value is refused before anything runs, naming the option */
    const char *bad[] = {SP_ARGS(run, "2"), "--gauntlet-engine3", "no command here", NULL};
    st = run_log(bad, log);
    out = t_read_file(log, NULL);
    CHECKF(st != 0 && strstr(out, "gauntlet-engine3") && strstr(out, "no command here"),
           "a bad --gauntlet-engine3: exit %d:\n%s", st, out ? out : "");
    free(out);
    CHECK(run_query(run, "SELECT count(*) FROM models") == 2);

    /* 3. selfplay continues the run, with a working and a missing outside engine */
    snprintf(fake_spec, sizeof fake_spec, "fake | \"%s\" --name fake --seed 3 | byoyomi 50 | Skill=1", g_fake);
    const char *sp[] = {SP_ARGS(run, "2"), "--gauntlet-engine1", fake_spec, "--gauntlet-engine2",
                        "gone | /no/such/dir/engine | nodes 100", NULL};
    st = run_log(sp, log);
    out = t_read_file(log, NULL);
    CHECKF(st == 0, "selfplay continuing the bootstrapped run: exit %d:\n%s", st, out ? out : "");
    CHECKF(count_of(out, "gauntlet-engine2 'gone' cannot be played") == 1 && strstr(out, "/no/such/dir/engine"),
           "the missing engine is not named exactly once:\n%s", out ? out : "");
    CHECKF(strstr(out, "rating: model 1: ") && strstr(out, "rating: model 2: "),
           "the bootstrapped net or its successor is not rated:\n%s", out ? out : "");
    free(out);
    CHECK(run_query(run, "SELECT max(cycle) FROM models") == 2);
    CHECK(run_query(run, "SELECT count(*) FROM cycle_metrics WHERE cycle = 1 AND elo IS NOT NULL") == 1);
    /* each evaluated net played the working engine; the missing one was never stored */
    CHECK(run_query(run, "SELECT count(DISTINCT model_a) FROM matches WHERE model_b IS NULL AND engine_b = 'fake' AND "
                     "settings LIKE 'eval %' AND elo IS NOT NULL") == 2);
    CHECK(run_query(run, "SELECT count(*) FROM matches WHERE engine_b = 'gone' OR opponent = 'gone'") == 0);

    /* the joint list: the gauntlet's 'fake' and usi-match's 'engine2: fake' are one player, rated */
    char dbp[900], err[DB_ERR_MAX + 64];
    snprintf(dbp, sizeof dbp, "%s/koma.db", run);
    db_t *db = NULL;
    rating_player_t *list = NULL;
    int32_t n = 0, fakes = 0;
    CHECK(db_open(dbp, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK &&
          rating_list(db, &list, &n, err, sizeof err) == DB_OK);
    for (int32_t i = 0; i < n; i++) {
        printf("  rating: %-12s %+6.0f [%+6.0f, %+6.0f] %d games\n", list[i].name, list[i].elo, list[i].lo, list[i].hi,
               list[i].games);
        if (strcmp(list[i].name, "fake") == 0) {
            fakes++;
            CHECK(isfinite(list[i].elo) && list[i].games >= 4 + 4); /* 4 usi-match games + the gauntlets' */
        }
    }
    CHECK(fakes == 1 && rating_of_cycle(list, n, 1) && isfinite(rating_of_cycle(list, n, 1)->elo));
    free(list);
    db_close(db);
    run_state_t rs;
    check_run(run, 0, 40, &rs);
    printf("  %.1f s\n", (compat_now_ms() - t0) / 1000.0);
    if (!atomic_load(&g_fail)) t_rm_rf(base);
    return t_done("test_bootstrap");
}
