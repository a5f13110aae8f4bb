/* match_check.h - checks shared by the usi-match tests against real
 * engines: every recorded game replays legally from its start with the
 * referee, its recorded end agrees with the final position, and its CSA file
 * replays to the same moves. Header-only. */
#ifndef KOMA_TESTS_TOOLS_MATCH_CHECK_H
#define KOMA_TESTS_TOOLS_MATCH_CHECK_H

#include "match/referee.h"
#include "tools_test.h"

typedef struct {
    int n;
    int result[16], plies[16];
    char black[16][128], start[16][256], reason[16][32], detail[16][200], moves[16][8192];
} mc_games_t;

static void mc_collect(int nc, const char *const *c, void *user) {
    mc_games_t *g = user;
    if (g->n >= 16 || nc < 7) return;
    g->result[g->n] = atoi(c[0]);
    g->plies[g->n] = atoi(c[1]);
    snprintf(g->black[g->n], sizeof g->black[0], "%s", c[2]);
    snprintf(g->start[g->n], sizeof g->start[0], "%s", c[3]);
    snprintf(g->moves[g->n], sizeof g->moves[0], "%s", c[4]);
    snprintf(g->reason[g->n], sizeof g->reason[0], "%s", c[5]);
    snprintf(g->detail[g->n], sizeof g->detail[0], "%s", c[6]);
    g->n++;
}

static inline int mc_read(const char *db, mc_games_t *g) {
    memset(g, 0, sizeof *g);
    return t_sql_rows(db, "SELECT result, plies, black, start_sfen, moves, reason, detail FROM match_games ORDER BY id",
                      mc_collect, g);
}

/* Replays game i with the referee: every move legal, and where the game
 * ended by the rules (mate, repetition, move limit) the rules agree. */
static inline void mc_check_game(const mc_games_t *g, int i, int32_t max_ply) {
    static char buf[8192 + 300];
    static ref_game_t *r;
    if (!r) r = ref_game_new();
    char err[256];
    snprintf(buf, sizeof buf, "%s%s%s", g->start[i], g->moves[i][0] ? " moves " : "", g->moves[i]);
    int rc = ref_game_start(r, buf, max_ply, err, sizeof err);
    CHECKF(rc == 0, "game %d does not replay: %s", i + 1, err);
    if (rc != 0) return;
    CHECK(r->n_moves == g->plies[i]);
    const char *why = g->reason[i];
    if (!strcmp(why, "checkmate") || !strcmp(why, "sennichite") || !strcmp(why, "perpetual_check") ||
        !strcmp(why, "max_ply")) {
        CHECK(ref_game_over(r) && strcmp(db_reason_name(ref_db_reason(r->end)), why) == 0);
        CHECK(ref_game_result(r) == g->result[i]);
    } else {
        CHECK(!ref_game_over(r)); /* ended by a player: the rules alone would have gone on */
    }
    if (!strcmp(why, "declaration")) CHECK(rules_can_declare(&r->pos));
}

static t_csa_t mc_csa;

/* The CSA file of game gi (1-based) replays legally to one of the db games. */
static inline void mc_check_csa(const char *csa_dir, int gi, const mc_games_t *g) {
    char p[1000];
    snprintf(p, sizeof p, "%s/game-%04d.csa", csa_dir, gi);
    CHECK(t_csa_read(p, &mc_csa) == 0);
    CHECK(mc_csa.bad_line == 0 && mc_csa.ending[0] == '%');
    int found = 0;
    for (int i = 0; i < g->n; i++) found |= strcmp(g->moves[i], mc_csa.moves_usi) == 0;
    CHECK(found);
}

#endif
