/* test_rate_net.c - tools/rate-net.sh, the rating method of docs/LEARNING.md's
 * curve, with the scripted fake engine standing in for koma, fairy-stockfish
 * and gpsusi (KOMA, FAIRY, GPSUSI):
 *   1. three matches (fs0, gpsusi, another net) of 2 games: exit 0, each
 *      match's summary printed (W/D/L, Elo, both clocks), its log and CSA
 *      games under OUT; the fairy-stockfish match asked for Skill Level 0
 *      and UCI_Variant shogi, koma for its Net and Threads=1;
 *   2. the same OUT again: the matches there are refused, not overwritten
 *      (exit 1), the files left as they were;
 *   3. a bad opponent, a missing net, a missing engine, a bad GAMES: exit 2
 *      with a message naming it, before any game (no file made).
 *
 *   test_rate_net SH SCRIPT USI_MATCH FAKE_USI NET
 */
#include "tests/run_prog.h"
#include "tools_test.h"

static const char *g_sh, *g_script, *g_fake, *g_net;

/* The script on NET with OUT_DIR and the opponents (up to three, NULL-ended); its
 * stdout and stderr into *out / *errt (run_prog.h's g_out / g_err, read back). */
static int rate(const char *out_dir, const char *const *opp, char **out, char **errt) {
    int status = run(g_sh, g_script, g_net, out_dir, opp[0], opp[0] ? opp[1] : NULL,
                     opp[0] && opp[1] ? opp[2] : NULL, NULL);
    *out = t_read_file(g_out, NULL);
    *errt = t_read_file(g_err, NULL);
    fprintf(stderr, "%s%s", *out, *errt);
    return status;
}

static int count(const char *t, const char *s) {
    int n = 0;
    for (const char *p = t ? strstr(t, s) : NULL; p; p = strstr(p + 1, s)) n++;
    return n;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: test_rate_net SH SCRIPT USI_MATCH FAKE_USI NET\n");
        return 2;
    }
    g_sh = argv[1], g_script = argv[2], g_fake = argv[4], g_net = argv[5];
    compat_setenv("USI_MATCH", argv[3]);
    t_scratch("test_rate_net");
    snprintf(g_out, sizeof g_out, "%s", t_path("rate.out"));
    snprintf(g_err, sizeof g_err, "%s", t_path("rate.err"));
    char log[900], fake_koma[2000], fake_fs[2000];
    snprintf(log, sizeof log, "%s", t_path("commands.log"));
    /* each engine a fake that logs what it is sent (the script runs KOMA and FAIRY as single programs:
     * a wrapper script passes the flags) */
    snprintf(fake_koma, sizeof fake_koma, "%s", t_path("koma.sh"));
    snprintf(fake_fs, sizeof fake_fs, "%s", t_path("fs.sh"));
    char text[3000];
    snprintf(text, sizeof text, "#!/bin/sh\nexec \"%s\" --name koma --seed 5 --log \"%s\"\n", g_fake, log);
    CHECK(compat_write_file_durable(fake_koma, text, strlen(text), NULL, 0) == 0);
    snprintf(text, sizeof text, "#!/bin/sh\nexec \"%s\" --name fs --seed 6 --log \"%s\"\n", g_fake, log);
    CHECK(compat_write_file_durable(fake_fs, text, strlen(text), NULL, 0) == 0);
    const char *chmod[] = {"chmod", "+x", fake_koma, fake_fs, NULL};
    CHECK(t_run(chmod) == 0);
    compat_setenv("KOMA", fake_koma);
    compat_setenv("FAIRY", fake_fs);
    compat_setenv("GPSUSI", fake_fs);
    compat_setenv("GAMES", "2");

    char out_dir[900];
    snprintf(out_dir, sizeof out_dir, "%s", t_path("out"));
    char *out = NULL, *errt = NULL;
    const char *three[] = {"fs0", "gpsusi", g_net, NULL};
    CHECKF(rate(out_dir, three, &out, &errt) == 0, "three matches: exit 0");
    CHECKF(count(out, "== ") == 3 && count(out, " of 2 games played") == 3, "three summaries");
    CHECKF(strstr(out, "== fs0: 2 games at byoyomi 200 ms, seed 45") != NULL, "the method in the header");
    CHECKF(count(out, "time, engine1 koma: ") == 3 && count(out, "time, engine2 ") == 3, "both clocks of each match");
    CHECKF(count(out, "lost on time 0\n") == 6, "no time loss");
    CHECKF(strstr(out, "vs fairy-stockfish-skill0 (engine2)") && strstr(out, "vs gpsusi (engine2)"),
           "the opponents named");
    const char *names[] = {"fs0", "gpsusi", "vs-koma-default"};
    for (int i = 0; i < 3; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s.log", out_dir, names[i]);
        CHECKF(compat_file_exists(p), "%s", p);
        snprintf(p, sizeof p, "%s/%s/game-0002.csa", out_dir, names[i]);
        CHECKF(compat_file_exists(p), "%s", p);
    }
    char *cmds = t_read_file(log, NULL);
    CHECKF(strstr(cmds, "setoption name Skill Level value 0") && strstr(cmds, "setoption name UCI_Variant value shogi"),
           "fairy-stockfish at Skill Level 0, shogi");
    CHECKF(strstr(cmds, "setoption name Net value ") && strstr(cmds, "setoption name Threads value 1"),
           "koma given its net and one thread");
    CHECKF(strstr(cmds, "byoyomi 200"), "byoyomi 200 ms");
    free(cmds);
    free(out), free(errt);

    /* the same folder again: refused, the first logs kept */
    char p[1200];
    snprintf(p, sizeof p, "%s/fs0.log", out_dir);
    char *before = t_read_file(p, NULL);
    const char *again[] = {"fs0", NULL};
    CHECKF(rate(out_dir, again, &out, &errt) == 1, "a match already in OUT: exit 1");
    CHECKF(strstr(errt, "fs0.log or ") && strstr(errt, "exists: fs0 skipped"), "the refusal names it");
    char *after = t_read_file(p, NULL);
    CHECKF(before[0] && strcmp(before, after) == 0, "the first fs0.log unchanged");
    free(before), free(after), free(out), free(errt);

    /* bad command lines: exit 2 before any game */
    char fresh[900];
    snprintf(fresh, sizeof fresh, "%s", t_path("fresh"));
    const char *bad[] = {"fs9", NULL};
    CHECKF(rate(fresh, bad, &out, &errt) == 2 && strstr(errt, "fs9: not fs-5, fs0, fs5, gpsusi or a net file"),
           "an unknown opponent named");
    CHECKF(!compat_file_exists(fresh), "no folder made for a refused command");
    free(out), free(errt);
    compat_setenv("GPSUSI", "/no/such/gpsusi");
    const char *gps[] = {"fs0", "gpsusi", NULL};
    CHECKF(rate(fresh, gps, &out, &errt) == 2 && strstr(errt, "/no/such/gpsusi: no such program"),
           "a missing engine named, before the fs0 match");
    CHECKF(!compat_file_exists(fresh), "no match played");
    free(out), free(errt);
    compat_setenv("GAMES", "two");
    CHECKF(rate(fresh, again, &out, &errt) == 2 && strstr(errt, "GAMES=two: not a whole number"), "bad GAMES");
    free(out), free(errt);
    compat_setenv("GAMES", "2");
    CHECKF(run(g_sh, g_script, "/no/such/net.safetensors", fresh, NULL) == 2 &&
               has(g_err, "/no/such/net.safetensors: no such net file"),
           "a missing net named");
    CHECK(!compat_file_exists(fresh));
    t_rm_rf(t_dir);
    return t_done("test_rate_net");
}
