/* test_eval_gpsusi.c - a real outside engine in the gauntlet: gpsshogi's
 * gpsusi (Debian package gpsshogi) plays two games at byoyomi 100 ms against
 * a random 1x8 net at 8 visits through match_play_engine, as
 * --gauntlet-engine1 'gpsusi | /usr/games/gpsusi | byoyomi 100' does: both
 * games end by the rules (no time loss, no crash, no illegal move: gpsusi's
 * USI is read correctly; its timeout (usiok, each move) is 60 s, since a loaded machine delays
 * its start-up by over 10 s and its 100 ms moves by hundreds of ms), they are stored under the engine's label, and
 * gpsusi, a strong program, is not beaten by a random net: a game it loses
 * ended by its own `bestmove resign` (at load 8 it resigned, 16 plies in,
 * a position it led by a promoted rook: gpsusi's choice, not Koma's
 * reading of the board), never by checkmate or another rule. Skips (77)
 * without /usr/games/gpsusi. */
#include "eval_engine_test.h"

#define GPSUSI "/usr/games/gpsusi"

int main(void) {
#ifdef _WIN32
    /* gpsshogi is a Debian package; under wine the path may exist on the host
     * but holds a Linux program. */
    printf("test_eval_gpsusi: skipped (gpsusi is a Linux program)\n");
    return 77;
#endif
    if (!compat_file_exists(GPSUSI)) {
        printf("test_eval_gpsusi: skipped (%s is not installed: apt-get install gpsshogi)\n", GPSUSI);
        return 77;
    }
    t_scratch("test_eval_gpsusi");
    eval_engine_run(5);
    char err[1024];
    match_engine_player_t *p = malloc(sizeof *p);
    KOMA_ASSERT(p && match_engine_player_parse("gpsusi | " GPSUSI " | byoyomi 100 | timeout 60000", p, err, sizeof err) == 0);
    match_play_config_t cfg;
    match_play_config_default(&cfg);
    cfg.games = 2;
    cfg.visits = 8;
    cfg.threads = 1;
    cfg.engine_stderr = ""; /* gpsusi talks on stderr */
    match_play_result_t r;
    int rc = match_play_engine(t_dir, "models/0000.safetensors", p, &cfg, &r, err, sizeof err);
    CHECKF(rc == 0, "against gpsusi: %s", err);
    printf("  random net vs gpsusi: +%d =%d -%d, %.1f plies/game, %.1f s\n", r.wins, r.draws, r.losses, r.avg_plies,
           r.seconds);
    CHECK(r.games == 2 && r.reasons[RULES_END_TIME] == 0 && r.reasons[RULES_END_ILLEGAL_MOVE] == 0);
    const char *dbp = t_path("koma.db");
    int64_t resigned = t_sql_int(dbp, "SELECT count(*) FROM match_games WHERE ((black = 'gpsusi' AND result = -1) OR "
                                      "(white = 'gpsusi' AND result = 1)) AND reason = 'resign'");
    CHECKF(r.wins == resigned, "the random net won %d game(s), %lld of them by gpsusi's resignation (want all)",
           r.wins, (long long)resigned);
    if (resigned) printf("  gpsusi resigned %lld game(s) against the random net\n", (long long)resigned);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM matches WHERE engine_b = 'gpsusi' AND model_b IS NULL AND "
                         "elo IS NOT NULL") == 1);
    CHECK(t_sql_int(dbp, "SELECT count(*) FROM match_games WHERE black = 'gpsusi' OR white = 'gpsusi'") == 2);
    free(p);
    return t_done("test_eval_gpsusi");
}
