/* test_usi_match_gpsshogi.c - usi-match against a real engine: gpsshogi's
 * gpsusi (Debian package gpsshogi) against the random fake engine, two games
 * at byoyomi 1 s (gpsusi's shallowest search, LimitDepth=4) with a minute of
 * tolerance: gpsusi mostly answers in 0.1-0.3 s, but now and then, in
 * positions where it runs its mate search, it overshoots a 1 s byoyomi by
 * 300-500 ms on a busy machine and by over 1 s on a loaded one (ASan job at
 * load 10: 2,007 ms), which the referee would rightly score as a time loss;
 * what this test reads is gpsusi's USI, not its clock (time keeping itself
 * is tested with the fake engine, test_referee). Every
 * move must replay legally, the games must end by the rules (gpsshogi mating
 * or out-playing a random mover, never on time or by an illegal move), and
 * the result must be recorded. Then one game with a
 * Fischer clock: gpsusi 0.7.0 does not know "binc" and aborts, which the
 * match must record as its loss (illegal action) and survive.
 * Skips (77) only when no gpsusi binary is found, or it cannot be started
 * here (a Windows build under wine cannot run the Linux gpsusi).
 *
 *   test_usi_match_gpsshogi USI_MATCH FAKE_USI
 */
#include "match_check.h"

static const char *find_gpsusi(void) {
    static char path[1200];
    const char *fixed[] = {"/usr/games/gpsusi", "/usr/bin/gpsusi", "/usr/local/games/gpsusi", "/usr/local/bin/gpsusi"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (compat_file_exists(fixed[i])) return fixed[i];
    const char *env = getenv("PATH");
    while (env && *env) {
        const char *c = strchr(env, ':');
        size_t n = c ? (size_t)(c - env) : strlen(env);
        snprintf(path, sizeof path, "%.*s/gpsusi", (int)n, env);
        if (n && compat_file_exists(path)) return path;
        env = c ? c + 1 : NULL;
    }
    return NULL;
}

/* 1 when gps starts and answers `usi` with `usiok` within 20 s. A Windows
 * build under wine cannot start the Linux gpsusi at all. */
static int gpsusi_answers(const char *gps) {
    const char *argv[] = {gps, NULL};
    char err[512], line[1024];
    compat_proc_t *p = compat_proc_spawn(argv, "", err, sizeof err);
    if (!p) {
        fprintf(stderr, "%s\n", err);
        return 0;
    }
    int ok = 0;
    if (compat_proc_write_line(p, "usi") == 0) {
        int64_t until = compat_now_ms() + 20000;
        for (int64_t left; !ok && (left = until - compat_now_ms()) > 0;) {
            if (compat_proc_read_line(p, line, sizeof line, left) < 0) break;
            ok = strncmp(line, "usiok", 5) == 0;
        }
    }
    compat_proc_write_line(p, "quit");
    compat_proc_wait(p, 2000, NULL);
    compat_proc_free(p); /* kills it if it is still running */
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_usi_match_gpsshogi USI_MATCH FAKE_USI\n");
        return 2;
    }
    const char *gps = find_gpsusi();
    if (!gps) {
        fprintf(stderr, "gpsusi not found (apt-get install gpsshogi): skipped\n");
        return 77;
    }
    if (!gpsusi_answers(gps)) {
        fprintf(stderr, "%s does not start or answer `usi` here: skipped\n", gps);
        return 77;
    }
    t_scratch("test_usi_match_gpsshogi");
    char e1[1200], e2[1200];
    snprintf(e1, sizeof e1, "\"%.1000s\"", gps);
    snprintf(e2, sizeof e2, "\"%s\" --name random --seed 7", argv[2]);
    const char *run[] = {argv[1], "--engine1", e1, "--engine2", e2, "--option1", "Thread=1", "--option1",
                         "LimitDepth=4", "--games", "2", "--byoyomi", "1000", "--tolerance", "60000", "--db",
                         t_path("gps.db"), "--csa-dir", t_path("csa"), "--engine-stderr", t_path("gps.stderr"), NULL};
    CHECK(t_run(run) == 0);
    mc_games_t g;
    CHECK(mc_read(t_path("gps.db"), &g) == 2);
    for (int i = 0; i < g.n; i++) {
        fprintf(stderr, "game %d: black %s, result %d, %s after %d plies: %s\n", i + 1, g.black[i], g.result[i],
                g.reason[i], g.plies[i], g.detail[i]);
        mc_check_game(&g, i, 320);
        int gps_black = strstr(g.black[i], "gpsshogi") != NULL;
        /* gpsshogi beats a random mover, by the rules. */
        CHECK(g.result[i] == (gps_black ? 1 : -1));
        CHECK(!strcmp(g.reason[i], "checkmate") || !strcmp(g.reason[i], "resign") || !strcmp(g.reason[i], "declaration"));
        CHECK(strstr(g.black[i], gps_black ? "engine1" : "engine2") == g.black[i]);
    }
    for (int gi = 1; gi <= 2; gi++) mc_check_csa(t_path("csa"), gi, &g);

    /* Fischer clock: gpsusi aborts on "binc"; the match records its loss. */
    const char *fischer[] = {argv[1], "--engine1", e1, "--engine2", e2, "--option1", "Thread=1", "--games", "1",
                             "--time", "5000", "--inc", "200", "--db", t_path("fischer.db"), "--engine-stderr",
                             t_path("gps.stderr"), NULL};
    CHECK(t_run(fischer) == 0);
    CHECK(mc_read(t_path("fischer.db"), &g) == 1);
    if (g.n == 1) {
        fprintf(stderr, "fischer game: result %d, %s: %s\n", g.result[0], g.reason[0], g.detail[0]);
        mc_check_game(&g, 0, 320);
        if (g.result[0] == -1) CHECK(!strcmp(g.reason[0], "illegal_move") && strstr(g.detail[0], "exited"));
        else CHECK(g.result[0] == 1); /* a later gpsusi that knows binc wins it */
    }
    int rc = t_done("test_usi_match_gpsshogi");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
