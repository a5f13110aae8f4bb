/* report_games.h - the games of tools/report's page: which games it embeds,
 * what it knows of each, and the board section that shows them.
 *
 * Owns: the choice of games (for each net shown, by its cycle: the longest
 * self-play game it played, the first that ended by checkmate, by
 * declaration and by resignation, the first game it lost in its evaluation,
 * plus every game named with --game), the choice of nets on a long run (the
 * newest RG_CYCLES_NEWEST and RG_CYCLES_SPREAD spread over the earlier ones,
 * within RG_BYTE_BUDGET bytes of game data), each game's replay with the
 * engine (a record whose move does not replay is cut there, and says so),
 * its values and search moves read from its shard through data/shard.h's
 * public reader (root_q, ply, game_id, policy_offsets/label/prob; labels to
 * moves with engine/encode.h), and the section's HTML, data and script
 * (tools/report_board.js, embedded at build time).
 * Does not own: the page around it and every other figure (report.c), the
 * database and the shard format (data/).
 *
 * Use: rg_new; rg_see for every self-play game read (report.c's pass over
 * the shards); rg_finish (match games, shards, the choice); rg_render.
 * Errors: a game named with --game that the run does not hold fails
 * rg_finish with a message naming it; a shard that is missing or bad only
 * leaves its games without values (the page says why).
 */
#ifndef KOMA_TOOLS_REPORT_GAMES_H
#define KOMA_TOOLS_REPORT_GAMES_H

#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "tools/strbuf.h"

#define RG_CYCLES_NEWEST 20    /* the newest cycles with games are all shown */
#define RG_CYCLES_SPREAD 20    /* and this many earlier ones, evenly spread */
#define RG_BYTE_BUDGET 1200000 /* bytes of game data at most (named games are always in) */
#define RG_TOP_MOVES 3         /* search moves shown at a position */
#define RG_NAMED_MAX 64        /* --game IDs */

typedef struct rg rg_t;

/* named: game ids (> 0 self-play, < 0 match games) to embed whatever the
 * choice; NULL when out of memory. */
rg_t *rg_new(const int64_t *named, int32_t n_named);
void rg_free(rg_t *rg); /* NULL ok */
/* One self-play game of shard s, played by the net of cycle net (its strings are copied when the game is a
 * candidate). */
void rg_see(rg_t *rg, const db_shard_t *s, const db_game_t *g, int32_t net);
/* The choice, the evaluation games and the shards' values. base_dir: the
 * directory shard paths are relative to (the run). The run's search
 * ("gumbel" or "puct", "" unknown) names what the stored policy is.
 * 0, or -1 with err (database failure, a named game not found, out of memory). */
int rg_finish(rg_t *rg, db_t *db, const char *base_dir, const char *search, char *err, size_t errlen);
/* The section: "Games on the board" with its data and script. */
void rg_render(sb_t *o, const rg_t *rg);
/* Games embedded, and bytes of their data (for the program's summary line). */
int32_t rg_games(const rg_t *rg);
size_t rg_bytes(const rg_t *rg);

#endif
