/* play.h - the in-loop evaluation: a match between two nets, played in
 * process, and the Elo ladder by cycle.
 *
 * Owns: playing a match of two weights files against each other on the CPU
 * backend (each net searched by its own MCTS tree at a fixed number of
 * visits, colours alternating game by game, moves sampled with a temperature
 * over the first plies so that the games differ), judged by the referee
 * (match/referee.h, the same rules as tools/usi-match), and recording it
 * in the run database as it is played: one matches row opened before the
 * first game (db_match_begin), every game stored under it when it ends, and
 * at the end model a's W/D/L and Elo with its 95% interval (trinomial). A
 * match that fails or whose process dies midway keeps the games it finished
 * under a row with no Elo (data/db.h: unfinished).
 * Does not own: the rules, the Elo formulas, the ladder arithmetic
 * (referee.h), when to evaluate (the cycle driver), self-play's inference
 * server (evaluation loads its own copies of both nets).
 *
 * Against an outside USI engine (match_play_engine) the same, with the
 * engine's processes in place of net b (match/engine.h).
 *
 * Threads: match_play_nets blocks; it runs cfg.threads game threads of its own,
 * each with one CPU backend (1 BLAS thread) and two inference contexts over
 * nets shared read-only. It opens its own connection to koma.db (WAL lets it
 * write while the driver's writer thread holds its own; SQLite serialises
 * the two writers with its busy timeout); the game threads store their games
 * through it one at a time, under the match's mutex.
 */
#ifndef KOMA_MATCH_PLAY_H
#define KOMA_MATCH_PLAY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "engine/rules.h"
#include "match/engine.h"
#include "match/referee.h"

typedef struct {
    int32_t games;             /* colours alternate (game 2k: a is Black) */
    int32_t visits;            /* playouts per move, both sides */
    uint64_t seed;             /* of each game's search (mixed with the game's index) */
    int32_t temp_plies;        /* moves up to this game ply are sampled ... */
    float temp;                /* ... proportionally to visits^(1/temp); greedy after */
    int32_t max_ply;           /* a draw after this many moves */
    int32_t threads;           /* game threads (0: min(games, CPUs)) */
    int32_t batch;             /* leaves per network call */
    int32_t store;             /* nonzero: record the match in <run_dir>/koma.db */
    const char *engine_stderr; /* match_play_engine: the engine's stderr (NULL: ours, "": discarded, else appended) */
    const atomic_int *stop;    /* NULL, or nonzero ends the match at the next move: the games finished stay
                                  stored under the unfinished row, the game in progress is dropped, and the
                                  call returns -1 with res->interrupted set */
} match_play_config_t;

void match_play_config_default(match_play_config_t *cfg);

typedef struct {
    int32_t games, wins, draws, losses; /* of model a */
    int32_t a_black_wins, a_white_wins; /* a's wins by colour */
    int32_t reasons[RULES_END_NB];      /* games by how they ended */
    double avg_plies;
    ref_elo_t elo;             /* a minus b, trinomial 95% interval */
    int32_t cycle_a, cycle_b;  /* cycles of the two models in the run (-1: not registered) */
    int64_t match_id;          /* the matches row written (0: nothing stored) */
    ref_ladder_point_t ladder; /* model a on the ladder after this match
                                  (ladder.cycle = -1 when it is not on it) */
    double seconds;            /* wall time of the match */
    int32_t engine_failed;     /* match_play_engine: the engine could not be started or
                                  restarted (the match failed because of it) */
    int32_t interrupted;       /* cfg->stop ended the match early; stored = its finished games */
    int32_t stored;            /* games finished (and, with a run, stored) when it ended */
} match_play_result_t;

/* Plays model_a_path against model_b_path (weights files; a path is used as
 * given when the file exists, else relative to run_dir) and fills res.
 * With run_dir (may be NULL: play only) and cfg->store, records the match
 * (res->match_id): the models are found in the run's models table by path
 * (relative to the run directory, as stored). A net that is not registered
 * plays under its file name (engine_a / opponent; no cycle, not on the
 * ladder). Returns 0, or -1 with err (unreadable weights, nets with other
 * input features, database failure; the games finished before a failure
 * stay stored under the unfinished row).
 */
int match_play_nets(const char *run_dir, const char *model_a_path, const char *model_b_path,
                    const match_play_config_t *cfg, match_play_result_t *res, char *err, size_t errlen);

/* match_play_nets with an outside USI engine (match/engine.h) as player b:
 * model a searches at cfg->visits as above, the engine thinks with its own
 * budget (engine->go); colours alternate. Each game thread runs its own
 * engine process, readied with isready/usinewgame before every game. An
 * engine move that does not come within engine->move_timeout_ms loses on
 * time (the engine gets "stop" and one second, else it is restarted for the
 * next game); an engine that exits loses the game it is in (illegal action)
 * and is restarted. An engine that cannot be started or restarted fails the
 * match (-1, res->engine_failed set, err naming engine->label and its
 * command); every wait is bounded, so a broken engine never hangs it. The
 * matches row: model_b 0, engine_b and opponent = engine->label (its name
 * in the rating list), settings "eval ... vs <go line>". */
int match_play_engine(const char *run_dir, const char *model_a_path, const match_engine_player_t *engine,
                      const match_play_config_t *cfg, match_play_result_t *res, char *err, size_t errlen);

/* match_play_nets between the nets of two cycles of the run in run_dir, their
 * files taken from its models table (run-relative paths). -1 with err when
 * either cycle has no model. */
int match_play_cycles(const char *run_dir, int32_t cycle_a, int32_t cycle_b, const match_play_config_t *cfg,
                      match_play_result_t *res, char *err, size_t errlen);

/* match_play_nets with the defaults except games, visits and seed. */
int match_play(const char *run_dir, const char *model_a_path, const char *model_b_path, int32_t games, int32_t visits,
               uint64_t seed, match_play_result_t *res, char *err, size_t errlen);

#endif
