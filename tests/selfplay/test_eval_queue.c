/* test_eval_queue.c - every published net gets its rating, whatever stops
 * the run (issue 30.2), against the real `selfplay` binary:
 *  1. kill -9 while evaluations are queued behind a running one (the log
 *     says "model 3 queued (model 1 is still being evaluated, 2 waiting)"),
 *     then the same command (a shorter evaluation): every cycle 1..4 is
 *     rated (before, the queued models stayed unrated for good);
 *  2. Ctrl-C at the same moment: the queue is left to the next run, which
 *     rates every cycle (before, "2 queued evaluation(s) dropped");
 *  3. Ctrl-C during a long evaluation ends the process promptly (before, it
 *     waited for the whole match: "it cannot be interrupted"), the match's
 *     finished games stay stored under a row with no Elo, a resumed run
 *     that only finishes that evaluation stops promptly on Ctrl-C too, and
 *     the next run rates the net. The games of the interrupted match count
 *     in no rating (issue 30.8): the net's rating counts the games of its
 *     finished matches only. `inspect` lists the matches with the models
 *     numbered by cycle, as the log does ("model 1 vs model 0").
 * Every wait is for a log line or a database row, bounded; never a sleep.
 * The interrupt is compat_proc_interrupt; where it cannot be sent, the
 * Ctrl-C parts are skipped. Under TSan only part 3 runs (the stop crossing
 * from the driver to the match thread): the evaluations of parts 1 and 2
 * take minutes each there (an evaluation of 8 games x 64 visits: 4 min). */
#include "sp_test.h"

#include "match/rating.h"
#include "selfplay/driver.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif
#ifndef KOMA_INSPECT_BIN
#define KOMA_INSPECT_BIN "inspect"
#endif

#define MAX_PLY "80"
/* Cycles that take a fraction of one evaluation: the evaluations queue. */
#define SP_ARGS(dir, cycles, egames, evisits)                                                                  \
    KOMA_SELFPLAY_BIN, "--run", dir, "--cycles", cycles, "--games-per-cycle", "4", "--threads", "1",           \
        "--games-per-thread", "2", "--visits", "8", "--visits-fast", "4", "--max-ply", MAX_PLY, "--net", "2x16", \
        "--progress", "0", "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4", "--cpu-threads", "1",     \
        "--train-threads", "1", "--cache-mb", "1", "--eval-every", "1", "--eval-games", egames, "--eval-visits", \
        evisits

static compat_proc_t *spawn(const char *const *argv, const char *log) {
    char err[512];
    compat_proc_t *p = compat_proc_spawn(argv, log, err, sizeof err);
    if (!p) {
        fprintf(stderr, "cannot start %s: %s\n", argv[0], err);
        exit(2);
    }
    return p;
}

/* Waits (at most ms) until the run's log has a line with a and b (b may be
 * NULL) after offset `from`, or the process exits. 1 when seen. */
static int wait_log(compat_proc_t *p, const char *dir, size_t from, const char *a, const char *b, int64_t ms) {
    char path[760];
    snprintf(path, sizeof path, "%s/log", dir);
    int64_t t0 = compat_now_ms();
    int status = 0;
    for (;;) {
        size_t n = 0;
        char *text = compat_read_file(path, &n, NULL, 0);
        int seen = 0;
        for (char *l = text && n > from ? text + from : NULL; l && *l && !seen;) {
            char *e = strchr(l, '\n');
            if (!e) break; /* a line still being written */
            *e = 0;
            seen = strstr(l, a) && (!b || strstr(l, b));
            l = e + 1;
        }
        free(text);
        if (seen) return 1;
        if (compat_now_ms() - t0 > ms || compat_proc_wait(p, 50, &status) == 0) return 0;
    }
}

static size_t log_size(const char *dir) {
    char path[760];
    snprintf(path, sizeof path, "%s/log", dir);
    size_t n = 0;
    char *text = compat_read_file(path, &n, NULL, 0);
    free(text);
    return text ? n : 0;
}

/* After a first compat_proc_interrupt: waits at most 60 s for the exit,
 * sending Ctrl-C again every 2 s (a signal that lands on a busy thread of a
 * TSan build is handled only when that thread next calls into the runtime;
 * a normal build acts on the first; the handler only sets the stop flag, so
 * more of them change nothing). 0 when it exited (*status), 1 if not;
 * *took: seconds since the first. */
static int wait_interrupted(compat_proc_t *p, int *status, double *took) {
    int64_t t0 = compat_now_ms();
    int still = compat_proc_wait(p, 2000, status);
    while (still == 1 && compat_now_ms() - t0 < 60000 && compat_proc_interrupt(p) == 0)
        still = compat_proc_wait(p, 2000, status);
    *took = (double)(compat_now_ms() - t0) / 1000.0;
    return still;
}

static void dump(const char *what, const char *path) {
    size_t n = 0;
    char *t = compat_read_file(path, &n, NULL, 0);
    fprintf(stderr, "---- %s (last 4000 bytes) ----\n%s\n", what, t ? (n > 4000 ? t + n - 4000 : t) : "(none)");
    free(t);
}

/* Every cycle 1..cycles has a rating in cycle_metrics and a finished
 * evaluation match against each opponent of its gauntlet (--gauntlet 2:
 * the previous net and cycle 0). */
static void check_all_rated(const char *dir, int cycles, const char *when) {
    for (int c = 1; c <= cycles; c++) {
        char q[400];
        snprintf(q, sizeof q, "SELECT count(*) FROM cycle_metrics WHERE cycle = %d AND elo IS NOT NULL", c);
        CHECKF(run_query(dir, q) == 1, "%s: cycle %d has no rating in cycle_metrics", when, c);
        snprintf(q, sizeof q,
                 "SELECT count(DISTINCT b.cycle) FROM matches m JOIN models b ON m.model_b = b.id WHERE m.cycle = %d "
                 "AND m.elo IS NOT NULL AND m.settings LIKE 'eval %%' AND b.cycle IN (0, %d)", c, c - 1);
        CHECKF(run_query(dir, q) == (c == 1 ? 1 : 2), "%s: cycle %d: %lld of its gauntlet's matches finished", when, c,
               (long long)run_query(dir, q));
    }
}

/* Kill (kill9) or Ctrl-C the run once two evaluations wait behind a running
 * one, then the same command to the end. 0 when the interrupt could not be
 * sent (skipped). */
static int queued(const char *base, int kill9) {
    char dir[700], log[760];
    snprintf(dir, sizeof dir, "%s/%s", base, kill9 ? "kill" : "sigint");
    snprintf(log, sizeof log, "%s/%s.txt", base, kill9 ? "kill" : "sigint");
    const char *argv[] = {SP_ARGS(dir, "4", "8", "64"), NULL};
    compat_proc_t *p = spawn(argv, log);
    int64_t t0 = compat_now_ms();
    int seen = wait_log(p, dir, 0, "queued (model 1 is still being evaluated", "2 waiting", 240000);
    int status = -1, still = 1;
    if (seen) {
        if (kill9) {
            compat_proc_kill(p);
        } else if (compat_proc_interrupt(p) != 0) {
            fprintf(stderr, "cannot interrupt the child here: the Ctrl-C part is skipped\n");
            compat_proc_free(p);
            return 0;
        }
        double took = 0;
        still = kill9 ? compat_proc_wait(p, 60000, &status) : wait_interrupted(p, &status, &took);
    }
    if (still) compat_proc_kill(p);
    compat_proc_free(p);
    CHECKF(seen, "%s: two evaluations never queued behind model 1's", kill9 ? "kill -9" : "Ctrl-C");
    if (!seen) {
        dump("child", log);
        return 1;
    }
    printf("  %s with models 2 and 3 queued behind model 1's evaluation (after %.1f s): status %d\n",
           kill9 ? "kill -9" : "Ctrl-C", (double)(compat_now_ms() - t0) / 1000.0, status);
    if (!kill9) {
        CHECKF(still == 0 && status == SP_EXIT_INTERRUPTED, "Ctrl-C: %s, status %d", still ? "still running" : "exited",
               status);
        char *out = t_read_file(log, NULL);
        CHECKF(strstr(out, "not started") && strstr(out, "the next run evaluates them") && !strstr(out, "dropped"),
               "Ctrl-C did not leave the queue to the next run:\n%s", out);
        free(out);
    }
    CHECKF(run_query(dir, "SELECT count(*) FROM cycle_metrics WHERE cycle IN (2, 3) AND elo IS NOT NULL") == 0,
           "models 2 and 3 were rated before the interrupt: the test did not interrupt their queue");

    /* The same command with a shorter evaluation (the flags of the evaluation
     * may change between sessions; what is owed is played with the current
     * ones): four evaluations at 8 x 64 take minutes under ASan. */
    const char *resume[] = {SP_ARGS(dir, "4", "2", "8"), NULL};
    int st = run_to_end(resume, log);
    char *out = t_read_file(log, NULL);
    CHECKF(st == 0, "the resumed run exited with %d:\n%s", st, out);
    CHECKF(strstr(out, "without a rating (2, 3"), "the resumed run did not name the unrated models:\n%s", out);
    free(out);
    check_all_rated(dir, 4, kill9 ? "after kill -9" : "after Ctrl-C");
    run_state_t rs;
    check_run(dir, CHECK_RUN_CLEAN, 80, &rs);
    if (atomic_load(&g_fail)) dump("child", log);
    return 1;
}

/* Ctrl-C during a long evaluation. 0 when skipped. */
static int stop_running(const char *base) {
    char dir[700], log[760];
    snprintf(dir, sizeof dir, "%s/running", base);
    snprintf(log, sizeof log, "%s/running.txt", base);
    /* One net, then an evaluation of 400 games x 100 visits: minutes (a game: about a second). */
    const char *heavy[] = {SP_ARGS(dir, "1", "400", "100"), NULL};
    const char *open_games = "SELECT count(*) FROM games g JOIN matches m ON g.match_id = m.id WHERE m.elo IS NULL";
    compat_proc_t *p = spawn(heavy, log);
    int64_t t0 = compat_now_ms();
    int status = -1, still = 1;
    int seen = wait_log(p, dir, 0, "eval: model 1 vs 0: ", "started", 240000);
    while (seen && (still = compat_proc_wait(p, 50, &status)) == 1 && run_query(dir, open_games) < 1 &&
           compat_now_ms() - t0 < 480000) {
    }
    CHECKF(seen && still == 1 && run_query(dir, open_games) >= 1, "the evaluation did not start or store a game");
    if (!seen || still != 1) {
        compat_proc_free(p);
        dump("child", log);
        return 1;
    }
    if (compat_proc_interrupt(p) != 0) {
        fprintf(stderr, "cannot interrupt the child here: skipped\n");
        compat_proc_free(p);
        return 0;
    }
    double took = 0;
    still = wait_interrupted(p, &status, &took);
    if (still) compat_proc_kill(p);
    compat_proc_free(p);
    printf("  Ctrl-C during the evaluation: status %d after %.2f s\n", status, took);
    CHECKF(still == 0 && status == SP_EXIT_INTERRUPTED && took < 30.0,
           "Ctrl-C during the evaluation: %s, status %d, %.1f s (the match must stop at its next move)",
           still ? "still running after 60 s" : "exited", status, took);
    int64_t kept = run_query(dir, open_games);
    CHECKF(kept >= 1 && run_query(dir, "SELECT count(*) FROM matches WHERE elo IS NOT NULL") == 0,
           "after Ctrl-C: %lld game(s) of the unfinished match kept, %lld match(es) rated", (long long)kept,
           (long long)run_query(dir, "SELECT count(*) FROM matches WHERE elo IS NOT NULL"));
    char *out = t_read_file(log, NULL);
    CHECKF(strstr(out, "stopped after") && strstr(out, "the next run plays the rest"),
           "the log does not say the evaluation was stopped and left to the next run:\n%s", out);
    free(out);

    /* The same command only finishes that evaluation (the run has its net):
     * Ctrl-C there stops it promptly too. */
    size_t from = log_size(dir);
    p = spawn(heavy, log);
    seen = wait_log(p, dir, from, "eval: model 1 vs 0: ", "started", 240000);
    CHECKF(seen, "the resumed run did not start the evaluation again");
    still = 1;
    if (seen && compat_proc_interrupt(p) == 0) {
        still = wait_interrupted(p, &status, &took);
        printf("  Ctrl-C during the resumed run's evaluation: status %d after %.2f s\n", status, took);
        CHECKF(still == 0 && status == SP_EXIT_INTERRUPTED && took < 30.0,
               "Ctrl-C during the resumed evaluation: %s, status %d, %.1f s",
               still ? "still running after 60 s" : "exited", status, took);
    }
    if (still) compat_proc_kill(p);
    compat_proc_free(p);
    int64_t kept2 = run_query(dir, open_games);

    /* A run with a short evaluation (the flags of the evaluation may change
     * between sessions; the match is played again with the current ones)
     * rates the net; the unfinished matches keep their games and count in
     * no rating. */
    const char *light[] = {SP_ARGS(dir, "1", "4", "8"), NULL};
    int st = run_to_end(light, log);
    out = t_read_file(log, NULL);
    CHECKF(st == 0 && strstr(out, "was interrupted") && strstr(out, "rating: model 1: "),
           "the run after the Ctrl-Cs did not rate model 1 (exit %d):\n%s", st, out);
    free(out);
    check_all_rated(dir, 1, "after Ctrl-C during the evaluation");
    CHECKF(run_query(dir, open_games) == kept2, "the unfinished matches' games changed: %lld, were %lld",
           (long long)run_query(dir, open_games), (long long)kept2);
    char dbp[760], err[DB_ERR_MAX];
    snprintf(dbp, sizeof dbp, "%s/koma.db", dir);
    db_t *db = NULL;
    CHECK(db_open(dbp, DB_OPEN_READONLY, &db, err, sizeof err) == DB_OK);
    rating_player_t *list = NULL;
    int32_t n = 0;
    CHECK(db && rating_list(db, &list, &n, err, sizeof err) == DB_OK);
    const rating_player_t *me = rating_of_cycle(list, n, 1);
    CHECKF(me && me->games == 4 && isfinite(me->elo),
           "model 1's rating counts %d games (want the 4 of its finished match; %lld unfinished games count in none)",
           me ? me->games : -1, (long long)kept2);
    free(list);
    db_close(db);
    /* inspect numbers the models of a match by cycle, as the log does (models row ids are one more) */
    const char *insp[] = {KOMA_INSPECT_BIN, dir, NULL};
    CHECK(run_to_end(insp, log) == 0);
    out = t_read_file(log, NULL);
    CHECKF(strstr(out, "model 1 vs model 0: ") && !strstr(out, "model 2 vs model 1"),
           "inspect does not number the match's models by cycle:\n%s", out);
    free(out);
    if (atomic_load(&g_fail)) dump("child", log);
    return 1;
}

int main(void) {
    const char *base = t_scratch("eval_queue");
    char b[600];
    snprintf(b, sizeof b, "%.500s", base);
    int ran = 0;
    if (UNDER_TSAN) printf("  under TSan: the queued parts are left out (minutes per evaluation)\n");
    else ran += queued(b, 1) + queued(b, 0);
    ran += stop_running(b);
    if (!atomic_load(&g_fail)) t_rm_rf(b);
    int rc = t_done("test_eval_queue");
    return rc == 0 && ran == 0 ? 77 : rc;
}
