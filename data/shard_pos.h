/* shard_pos.h - a shard row's position column as an engine position.
 *
 * Owns: the one place where data/shard.h's position column (version 1's 96
 * bytes, version 2's hcp) becomes an engine pos_t and back, for readers
 * of shards that encode moves in a row's position (train/window.c's move
 * labels, tools/export.c's hcpe and psv records). data/shard.h itself never
 * includes engine/.
 * Does not own: the column's bytes (shard_position_pack / _unpack,
 * data/shard.c), the check that a position is legal shogi (engine/).
 * Threads: none of its own; any thread, on its own pos_t.
 * Errors: none (shard_open has checked the column's codes).
 */
#ifndef KOMA_DATA_SHARD_POS_H
#define KOMA_DATA_SHARD_POS_H

#include <stdint.h>

#include "data/shard.h"
#include "engine/position.h"

/* Sets pos's board, hands, side to move and game_ply from row r of c's
 * position column, and nothing else: no bitboards, keys or history. That is
 * what the encoders read (encode_move_label, fmt_hcpe_record, fmt_psv_record),
 * not a position to search or make moves on. */
void shard_row_pos(const shard_columns_t *c, int64_t r, pos_t *pos);

/* Row r as a whole position (bitboards, keys, checkers: what the encoders
 * and move generation need), from either version's column, checked as an
 * SFEN is (sfen_set_position). 0, or -1 with err. */
int shard_row_position(const shard_columns_t *c, int64_t r, pos_t *pos, char *err, size_t errlen);

/* The same from a version-2 row's 32 bytes and a game ply. */
int shard_hcp_position(const uint8_t hcp[SHARD_HCP_BYTES], int32_t game_ply, pos_t *pos, char *err, size_t errlen);

/* pos's board, hands and side as a version-2 row's hcp (all zero for a
 * position with no place in 256 bits: a real game's never). */
void shard_pos_hcp(const pos_t *pos, uint8_t out[SHARD_HCP_BYTES]);

#endif
