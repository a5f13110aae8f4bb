/* shard_pos.c - a shard row's position column as an engine position (shard_pos.h). */
#include "data/shard_pos.h"

#include <stdio.h>
#include <string.h>

#include "data/fmt_pack.h"
#include "engine/sfen.h"

/* Board, hands, side and game ply of row r, from either version's column. 0, or -1 (a version-2 code that does
 * not decode; shard_open has checked every row, so only a caller's own columns can fail). */
static int row_board(const shard_columns_t *c, int64_t r, pos_t *pos) {
    if (c->hcp) {
        fmt_board_t b;
        if (fmt_pack_decode(FMT_PACK_HCP, c->hcp + r * SHARD_HCP_BYTES, &b)) return -1;
        memcpy(pos->board, b.board, sizeof pos->board);
        pos->hand[COLOR_BLACK] = b.hand[0];
        pos->hand[COLOR_WHITE] = b.hand[1];
        pos->side = b.side;
        pos->game_ply = c->ply[r] + 1;
        return 0;
    }
    shard_position_t p;
    shard_position_unpack(c->position + r * SHARD_POSITION_BYTES, &p);
    memcpy(pos->board, p.board, sizeof pos->board);
    pos->hand[COLOR_BLACK] = p.hand[0];
    pos->hand[COLOR_WHITE] = p.hand[1];
    pos->side = p.side;
    pos->game_ply = p.ply;
    return 0;
}

void shard_row_pos(const shard_columns_t *c, int64_t r, pos_t *pos) {
    if (row_board(c, r, pos) != 0) memset(pos->board, 0, sizeof pos->board);
}

int shard_hcp_position(const uint8_t hcp[SHARD_HCP_BYTES], int32_t game_ply, pos_t *pos, char *err, size_t errlen) {
    fmt_board_t b;
    const char *why = fmt_pack_decode(FMT_PACK_HCP, hcp, &b);
    if (why) {
        snprintf(err, errlen, "the position does not decode: %s", why);
        return -1;
    }
    int32_t ply = game_ply < 1 ? 1 : game_ply > SFEN_PLY_MAX ? SFEN_PLY_MAX : game_ply;
    return sfen_set_position(pos, b.board, b.hand, (color_t)b.side, ply, err, errlen) == SFEN_OK ? 0 : -1;
}

int shard_row_position(const shard_columns_t *c, int64_t r, pos_t *pos, char *err, size_t errlen) {
    if (c->hcp) return shard_hcp_position(c->hcp + r * SHARD_HCP_BYTES, c->ply[r] + 1, pos, err, errlen);
    pos_t tmp;
    if (row_board(c, r, &tmp) != 0) {
        snprintf(err, errlen, "row %lld: the position does not decode", (long long)r);
        return -1;
    }
    int32_t ply = tmp.game_ply < 1 ? 1 : tmp.game_ply > SFEN_PLY_MAX ? SFEN_PLY_MAX : tmp.game_ply;
    if (sfen_set_position(pos, tmp.board, tmp.hand, tmp.side, ply, err, errlen) != SFEN_OK) return -1;
    return 0;
}

void shard_pos_hcp(const pos_t *pos, uint8_t out[SHARD_HCP_BYTES]) {
    fmt_board_t b;
    memcpy(b.board, pos->board, sizeof b.board);
    b.hand[0] = pos->hand[COLOR_BLACK];
    b.hand[1] = pos->hand[COLOR_WHITE];
    b.side = (uint8_t)pos->side;
    if (fmt_pack_encode(FMT_PACK_HCP, &b, out) != 0) memset(out, 0, SHARD_HCP_BYTES);
}
