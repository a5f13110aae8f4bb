/* sfen.h - SFEN positions and USI moves as text.
 *
 * Owns: reading and writing SFEN (and "startpos"), reading and writing USI
 * move strings ("7g7f", "8h2b+", "P*5e").
 * Does not own: the USI protocol loop, game records.
 *
 * SFEN fields: board, side ('b'/'w'), hands ('-' for none), ply.
 *   - board and side are required. Hands are optional (default none) and
 *     so is the ply (default 1; a ply can only follow a hand field); a ply
 *     must be a decimal integer 1..SFEN_PLY_MAX without sign. sfen_write
 *     writes at most SFEN_PLY_MAX, so what it writes always reads back.
 *   - fields are separated by one or more spaces; leading/trailing
 *     whitespace (space, tab, CR, LF) is ignored; anything else after the
 *     ply is an error.
 *   - both kings must be on the board (tsume positions without a White
 *     king are rejected: Koma's rules need both kings).
 *   - hand pieces may come in any order; a count is 1..18 without leading
 *     zero ("2P", "10p"); a kind listed again adds up ("PPP" = "3P", as
 *     some generators write), the total still bounded by the game's pieces.
 *   - the position must be possible: no dead pieces (pawn/lance on the
 *     last rank, knight on the last two), no nifu, no more pieces of a kind
 *     than the game has (counting hands), the side not to move not in check.
 * The text is read from s[0..len): never past len, and a NUL byte before
 * len ends the text. Nothing is read past the end; the parser never loops
 * forever on any input.
 */
#ifndef KOMA_ENGINE_SFEN_H
#define KOMA_ENGINE_SFEN_H

#include <stddef.h>

#include "engine/position.h"

#define SFEN_STARTPOS "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"
/* Longest SFEN sfen_write produces, with its NUL. */
enum { SFEN_MAX_LEN = 256 };
/* Largest ply field read or written (9 digits). */
enum { SFEN_PLY_MAX = 999999999 };
/* Longest USI move text with its NUL ("8h2b+"). */
enum { MOVE_USI_MAX = 6 };

typedef enum {
    SFEN_OK = 0,
    SFEN_ERR_EMPTY,          /* no text at all */
    SFEN_ERR_BOARD_CHAR,     /* a character that is no piece, digit 1-9, '+' or '/' */
    SFEN_ERR_PROMOTED,       /* '+' not followed by P L N S B R (either case) */
    SFEN_ERR_RANK_LONG,      /* a rank describes more than 9 squares */
    SFEN_ERR_RANK_SHORT,     /* a rank describes fewer than 9 squares */
    SFEN_ERR_RANK_COUNT,     /* the board has not exactly 9 ranks */
    SFEN_ERR_KING_MISSING,   /* a side has no king */
    SFEN_ERR_KING_TWO,       /* a side has more than one king */
    SFEN_ERR_DEAD_PIECE,     /* pawn/lance on its last rank, knight on its last two */
    SFEN_ERR_NIFU,           /* two unpromoted pawns of a side on one file */
    SFEN_ERR_PIECE_COUNT,    /* more pieces of a kind (board + hands) than a game has */
    SFEN_ERR_SIDE,           /* side field missing or not 'b' / 'w' */
    SFEN_ERR_HAND_CHAR,      /* hand has a character that is no hand piece or count */
    SFEN_ERR_HAND_KING,      /* a king in hand */
    SFEN_ERR_HAND_PROMOTED,  /* a promoted piece in hand */
    SFEN_ERR_HAND_COUNT,     /* count 0, with a leading zero, too large, or dangling */
    SFEN_ERR_PLY,            /* ply not a decimal integer in 1..SFEN_PLY_MAX */
    SFEN_ERR_TRAILING,       /* text after the ply */
    SFEN_ERR_OPPONENT_IN_CHECK, /* the side that just moved is in check */
    SFEN_ERR_NB
} sfen_error_t;

/* Short fixed name of an error code ("bad board character", ...). */
const char *sfen_error_name(sfen_error_t e);

/* Sets pos from SFEN text or "startpos". On error returns the code, writes a
 * message naming what is wrong (and where) into err (if err != NULL) and
 * leaves pos in an unspecified but safe state (set it again before use). */
sfen_error_t sfen_parse(pos_t *pos, const char *s, size_t len, char *err, size_t errlen);
/* The position of a board, hands, side and ply given as values (a decoded
 * 32-byte position, a shard row), checked exactly as sfen_parse checks a
 * text's: piece codes and counts, dead pieces, two pawns, kings, the side
 * not to move in check. Much faster than writing and parsing an SFEN. On
 * failure pos is in an unspecified but safe state. */
sfen_error_t sfen_set_position(pos_t *pos, const uint8_t board[SQ_NB], const hand_t hand[COLOR_NB], color_t side,
                               int32_t ply, char *err, size_t errlen);
/* Same for a NUL-terminated string. */
sfen_error_t sfen_parse_cstr(pos_t *pos, const char *s, char *err, size_t errlen);
/* Writes pos as SFEN (NUL-terminated) into buf of size >= SFEN_MAX_LEN;
 * returns the length without the NUL (like snprintf: a smaller buffer gets
 * a truncated, still NUL-terminated text and the full length is returned). Hands are written in the order
 * R B G S N L P, Black's first. */
int32_t sfen_write(const pos_t *pos, char *buf, size_t buflen);

/* USI move text of m (NUL-terminated) into buf of size >= MOVE_USI_MAX;
 * returns the length. MOVE_NONE is written as "none", MOVE_NULL as "pass"
 * (so buf must then hold 5 bytes; MOVE_USI_MAX covers it). */
int32_t move_to_usi(move_t m, char *buf);
/* Reads a USI move from s[0..len) and checks it against pos: returns the
 * legal move, or MOVE_NONE when the text is malformed or the move is not
 * legal here. */
move_t move_from_usi(const pos_t *pos, const char *s, size_t len);

#endif
