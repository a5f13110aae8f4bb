/* rating.h - one rating list from every match of a run: a joint
 * maximum-likelihood fit (the method of BayesElo and Ordo) instead of summed
 * pairwise differences.
 *
 * Owns: the model and its fit. Each game between players i and j scores s
 * (1 win, 1/2 draw, 0 loss) for i with probability model
 *     E[s] = 1 / (1 + 10^(-(r_i - r_j) / 400)),
 * and the ratings r maximise the likelihood of all games together, a draw
 * counting as half a win and half a loss (Ordo's choice). One player, the
 * anchor (a run's cycle-0 net), is fixed at 0. A prior of one virtual draw
 * per pair of players that met keeps a 100% score finite (BayesElo's idea,
 * in its smallest form). The 95% interval of each rating is 1.96 standard
 * errors from the inverse of the observed information (the Hessian) with the
 * anchor fixed: it is the uncertainty relative to the anchor. Players with
 * no chain of games to the anchor get no rating (NAN).
 * Does not own: playing matches (match/referee.c, match/play.c,
 * tools/usi_match.c), storing them (data/db.h).
 *
 * Threads: no shared state. Errors: status returns; nothing aborts.
 */
#ifndef KOMA_MATCH_RATING_H
#define KOMA_MATCH_RATING_H

#include <stddef.h>
#include <stdint.h>

#include "data/db.h"

typedef struct {
    char name[DB_NAME_MAX]; /* "cycle 12" for a net of the run, else the engine's name */
    int64_t model_id;       /* 0: not a net of this run */
    int32_t cycle;          /* -1: not a net of this run */
    int32_t games;          /* games played, in all matches */
    double elo;             /* rating; 0 for the anchor; NAN: no chain of games to the anchor */
    double lo, hi;          /* 95% interval */
} rating_player_t;

/* The games between two players, from a's side (several matches may add up). */
typedef struct {
    int32_t a, b;    /* indices into the player list */
    int32_t games;
    double points_a; /* wins + draws / 2 of a */
} rating_pair_t;

/* Fits the ratings of players[0..n) to the pairs, players[anchor] at 0.
 * Returns 0, or -1 with err (bad indices, out of memory; a fit that does
 * not converge in 100 Newton steps, which the concave likelihood and the
 * prior rule out). */
int rating_fit(rating_player_t *players, int32_t n, const rating_pair_t *pairs, int32_t npairs, int32_t anchor,
               char *err, size_t errlen);

/* Every match in the run's database (in-loop evaluations, gauntlets,
 * usi-match --run): its players are the run's nets (by model) and outside
 * engines (by name; usi-match's "engine1: " / "engine2: " seat prefix is
 * dropped, so "engine2: gpsusi" and the gauntlet's "gpsusi" are one
 * player). A match counts once it has finished (its row has an Elo): the
 * games of an unfinished one (killed, stopped: data/db.h) stay stored and
 * count in no rating; the in-loop evaluation plays such a match again
 * (selfplay/gauntlet.h).
 * Anchor: the cycle-0 net (or, without one, the first player). *out is
 * malloc'ed (free()), sorted: nets by cycle, then engines by name. n = 0
 * when the run has no match. */
db_status_t rating_list(db_t *db, rating_player_t **out, int32_t *n, char *err, size_t errlen);

/* The entry of a run's net in a list (NULL if absent). */
const rating_player_t *rating_of_cycle(const rating_player_t *list, int32_t n, int32_t cycle);

#endif
