/* test_eval_engine.c - outside USI engines as gauntlet opponents
 * (match/engine.h, match_play_engine) with the scripted fake engine:
 *  - the engine text: label, command, budget, timeout, setoption fields; each
 *    bad text refused with a message quoting what is wrong;
 *  - a match against it: every game played and stored as it ends under one
 *    matches row (model_b none, engine_b = the label), colours alternating,
 *    its setoption sent (the engine refuses to start without it), a new game
 *    and a gameover per game, the budget's go line;
 *  - an engine that never answers go loses each game on time within its
 *    timeout (bounded: the match does not hang); one that crashes loses the
 *    game and is restarted for the next; a missing program and one that never
 *    says usiok fail the match at once or within the start-up bound, naming
 *    the engine, with nothing stored.
 *   test_eval_engine FAKE_USI */
#include "eval_engine_test.h"

static const char *g_fake;

static void parse_texts(void) {
    char err[600];
    match_engine_player_t *p = malloc(sizeof *p);
    KOMA_ASSERT(p);
    CHECK(match_engine_player_parse("fairy-stockfish skill 0 | /usr/games/fairy-stockfish -x 'a b' | nodes 2000 | "
                                    "Skill Level=0 | UCI_Variant=shogi | timeout 5000",
                                    p, err, sizeof err) == 0);
    CHECK(strcmp(p->label, "fairy-stockfish skill 0") == 0 && strcmp(p->spec.name, p->label) == 0);
    CHECK(strcmp(p->spec.cmd, "/usr/games/fairy-stockfish -x 'a b'") == 0);
    CHECK(p->spec.n_options == 2 && strcmp(p->spec.options[0], "Skill Level=0") == 0);
    CHECK(strcmp(p->go, "go nodes 2000") == 0 && p->move_timeout_ms == 5000);
    CHECK(p->init_timeout_ms == 10000); /* a timeout bounds the start-up too, to 10 s at least */
    CHECK(match_engine_player_parse("gpsusi|/usr/games/gpsusi", p, err, sizeof err) == 0);
    CHECK(strcmp(p->go, "go btime 0 wtime 0 byoyomi 100") == 0 && p->move_timeout_ms == 1100);
    CHECK(p->init_timeout_ms == 60000); /* none given: a minute to start (gpsusi on a busy machine) */
    CHECK(match_engine_player_parse("g | x | depth 3", p, err, sizeof err) == 0 && strcmp(p->go, "go depth 3") == 0);
    CHECK(p->move_timeout_ms == 10000);
    /* refused, each naming what is wrong */
    CHECK(match_engine_player_parse("just a label", p, err, sizeof err) != 0 && strstr(err, "just a label"));
    CHECK(match_engine_player_parse(" | /bin/x", p, err, sizeof err) != 0 && strstr(err, "LABEL | COMMAND"));
    CHECK(match_engine_player_parse("a | /bin/x | fast please", p, err, sizeof err) != 0 && strstr(err, "fast please"));
    CHECK(match_engine_player_parse("a | /bin/x | nodes 0", p, err, sizeof err) != 0 && strstr(err, "nodes 0"));
    CHECK(match_engine_player_parse("a | /bin/x | nodes 5 | byoyomi 9", p, err, sizeof err) != 0 &&
          strstr(err, "one budget"));
    CHECK(match_engine_player_parse("cycle 3 | /bin/x", p, err, sizeof err) != 0 && strstr(err, "cycle 3"));
    CHECK(match_engine_player_parse("a | 'unbalanced", p, err, sizeof err) != 0 && strstr(err, "unbalanced"));
    free(p);
}

/* A match of the run's cycle 0 against `text`; its result in r. */
static int play(const char *text, int32_t games, int32_t threads, match_play_result_t *r, char *err, size_t len) {
    match_engine_player_t *p = malloc(sizeof *p);
    KOMA_ASSERT(p);
    int rc = match_engine_player_parse(text, p, err, len);
    CHECKF(rc == 0, "%s: %s", text, err);
    match_play_config_t cfg;
    match_play_config_default(&cfg);
    cfg.games = games;
    cfg.visits = 8;
    cfg.max_ply = 60;
    cfg.temp_plies = 6;
    cfg.threads = threads;
    cfg.engine_stderr = "";
    if (rc == 0) rc = match_play_engine(t_dir, "models/0000.safetensors", p, &cfg, r, err, len);
    free(p);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_eval_engine FAKE_USI\n");
        return 2;
    }
    g_fake = argv[1];
    t_scratch("test_eval_engine");
    eval_engine_run(11);
    parse_texts();
    const char *dbp = t_path("koma.db");
    char text[2048], err[1024];
    match_play_result_t r;

    /* a random mover that insists on its option */
    snprintf(text, sizeof text, "fake r | \"%s\" --seed 4 --require-option Skill=3 --log \"%s\" | nodes 50 | Skill=3",
             g_fake, t_path("fake.log"));
    int rc = play(text, 4, 2, &r, err, sizeof err);
    CHECKF(rc == 0, "against the fake engine: %s", err);
    CHECK(r.games == 4 && r.wins + r.draws + r.losses == 4 && r.match_id > 0 && r.cycle_a == 0 && !r.engine_failed);
    CHECK(r.reasons[RULES_END_TIME] == 0 && r.reasons[RULES_END_NONE] == 0);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM matches WHERE model_b IS NULL AND engine_b = 'fake r' AND "
                         "opponent = 'fake r' AND settings LIKE 'eval % vs go nodes 50' AND elo IS NOT NULL") == 1);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM match_games WHERE black = 'fake r'") == 2);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM match_games WHERE white = 'fake r'") == 2);
    char *lg = t_read_file(t_path("fake.log"), NULL);
    int newgames = 0, overs = 0, gos = 0;
    for (const char *q = lg; q && (q = strstr(q, "usinewgame")); q++) newgames++;
    for (const char *q = lg; q && (q = strstr(q, "gameover ")); q++) overs++;
    for (const char *q = lg; q && (q = strstr(q, "go nodes 50")); q++) gos++;
    CHECKF(newgames == 4 && overs == 4 && gos > 4, "the engine got %d usinewgame, %d gameover, %d go", newgames, overs,
           gos);
    free(lg);

    /* never answers go: every game lost on time, within the timeout */
    snprintf(text, sizeof text, "hang | \"%s\" --script hang | byoyomi 50 | timeout 300", g_fake);
    int64_t t0 = compat_now_ms();
    rc = play(text, 2, 1, &r, err, sizeof err);
    double s = (compat_now_ms() - t0) / 1000.0;
    CHECKF(rc == 0 && r.games == 2 && r.reasons[RULES_END_TIME] == 2 && r.wins == 2 && s < 30,
           "against a silent engine: rc %d (%s), %d time losses, %.1f s", rc, err, r.reasons[RULES_END_TIME], s);

    /* crashes at its first move of every game: loses it, restarted */
    snprintf(text, sizeof text, "crash | \"%s\" --script crash | byoyomi 50", g_fake);
    rc = play(text, 2, 1, &r, err, sizeof err);
    CHECKF(rc == 0 && r.games == 2 && r.wins == 2 && r.reasons[RULES_END_ILLEGAL_MOVE] == 2,
           "against a crashing engine: rc %d (%s), +%d", rc, err, r.wins);

    /* cannot be played: named, nothing stored, bounded */
    long long rows = t_sql_int(dbp, "SELECT count(*) FROM matches");
    rc = play("gone | /no/such/dir/engine | byoyomi 50", 2, 1, &r, err, sizeof err);
    CHECKF(rc != 0 && r.engine_failed && strstr(err, "'gone'") && strstr(err, "/no/such/dir/engine"),
           "a missing engine: rc %d, failed %d, '%s'", rc, r.engine_failed, err);
    t0 = compat_now_ms();
    /* a timeout bounds the start-up too (at least 10 s; without one it waits up to 60 s) */
    snprintf(text, sizeof text, "mute | \"%s\" --mute | byoyomi 50 | timeout 5000", g_fake);
    rc = play(text, 2, 1, &r, err, sizeof err);
    s = (compat_now_ms() - t0) / 1000.0;
    CHECKF(rc != 0 && r.engine_failed && strstr(err, "'mute'") && strstr(err, "usiok") && s < 20,
           "an engine that never says usiok: rc %d, '%s', %.1f s", rc, err, s);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM matches") == rows);
    return t_done("test_eval_engine");
}
