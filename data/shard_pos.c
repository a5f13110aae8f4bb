/* shard_pos.c - a shard row's position column as an engine position (shard_pos.h). */
#include "data/shard_pos.h"

#include <string.h>

void shard_row_pos(const shard_columns_t *c, int64_t r, pos_t *pos) {
    shard_position_t p;
    shard_position_unpack(c->position + r * SHARD_POSITION_BYTES, &p);
    memcpy(pos->board, p.board, sizeof pos->board);
    pos->hand[COLOR_BLACK] = p.hand[0];
    pos->hand[COLOR_WHITE] = p.hand[1];
    pos->side = p.side;
    pos->game_ply = p.ply;
}
