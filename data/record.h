/* record.h - game records in the common text formats (CSA, KIF, USI) read
 * into checked games: a start position, legal moves, a result and a reason.
 *
 * Owns: the three readers (prefix rec_), the detection of a file's format
 * and text encoding (UTF-8, Shift_JIS for KIF), the check of every move
 * against the rules (engine/), and the mapping of each format's endings to
 * a result and a db_reason_t. Does not own: the rules (engine/), the
 * database and shards (data/db.h, data/shard.h; tools/import.c writes the
 * games there), rating filters and deduplication (the importer's).
 *
 * ---- Formats ------------------------------------------------------------------
 * CSA (V2, V2.1, V2.2, V3.0): N+/N- names, $ info, ' comments (floodgate's
 *   'black_rate:NAME:R / 'white_rate:NAME:R give the ratings), board by PI
 *   with removals ("PI82HI22KA"), by P1..P9 rows (all nine), by P+/P- pieces
 *   ("P+00FU" to the hand, "P-51OU" on a square, "P-00AL" all remaining
 *   pieces to the hand), side line "+"/"-", moves "+7776FU" (the piece
 *   after the move: a change of type is a promotion), T time lines, several
 *   statements on one line separated by ',', endings %TORYO %CHUDAN
 *   %SENNICHITE %TIME_UP %ILLEGAL_MOVE %+ILLEGAL_ACTION %-ILLEGAL_ACTION
 *   %JISHOGI %KACHI %HIKIWAKE %MAX_MOVES %TSUMI %FUZUMI %MATTA %ERROR, and
 *   several games in one file separated by "/" lines.
 * KIF (Kifu for Windows style; UTF-8, or Shift_JIS converted for the
 *   characters records use): 手合割 (平手 and the usual handicaps, where
 *   White moves first), a board diagram (持駒 lines, the 9 "|...|" rows,
 *   後手番), 先手/後手 (下手/上手) names, move lines "   1 ７六歩(77)   ( 0:01/...)"
 *   with 同, 成, 不成, 打 and promoted pieces (成香 成桂 成銀 と 馬 龍/竜,
 *   杏 圭 全), endings 投了 詰み 千日手 持将棋 入玉勝ち 宣言勝ち 中断
 *   切れ負け 時間切れ 反則負け 反則勝ち 不詰; comments (* # &) are skipped and
 *   variations (変化：) are ignored: the main line is read.
 * USI: one game per line, "position startpos moves 7g7f ...", "position sfen
 *   <sfen> moves ...", or the same without "position" ("sfen records"). A
 *   game may end with one result word: "resign" or "win" (USI's: the side to
 *   move resigns / declares), or a reason name ("checkmate", "sennichite",
 *   "max_ply", "time", "illegal_move", "abort", ...).
 * Not read: KI2 (move lines "▲７六歩　△３四歩" without numbers and origins:
 *   rejected as unsupported), CSA/KIF variations (the main line is read),
 *   JKF/JSON, PSN, EUC-JP/UTF-16 text (rejected: encoding).
 *
 * ---- Results --------------------------------------------------------------------
 * The side to move at an ending is the one it concerns: resign (%TORYO, 投了),
 * time (%TIME_UP, 切れ負け, 時間切れ) and illegal_move (%ILLEGAL_MOVE,
 * 反則負け) lose for it; declaration (%KACHI, 入玉勝ち) wins for it; a
 * checkmate claim (%TSUMI, 詰み) loses for it ("checkmate" when it has no
 * legal move, else "resign"); sennichite (%SENNICHITE, 千日手) is a draw
 * unless the rules see a perpetual check in the record ("perpetual_check",
 * the checker loses); %JISHOGI/%HIKIWAKE/持将棋 are draws "declaration";
 * %MAX_MOVES is a draw "max_ply"; %CHUDAN/中断 and the rest are "abort"
 * (draw). A record without an ending gets what the rules say of its last
 * position (checkmate, sennichite, perpetual_check) or "abort".
 * A CSA %ILLEGAL_MOVE (or ±ILLEGAL_ACTION) keeps the game up to that point;
 * an illegal move written just before it is dropped and its mover loses.
 *
 * ---- Errors ----------------------------------------------------------------------
 * A game that cannot be read is rejected as a whole, with a message naming
 * the file, the game's index in the file (1-based), the move number and the
 * line: "a.csa: game 2: move 37 (line 45): illegal move '+5544FU': ...".
 * The other games of the file are still read. Readers never read past the
 * given length, never loop forever, and do not crash on any input.
 */
#ifndef KOMA_RECORD_H
#define KOMA_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "engine/sfen.h"
#include "engine/types.h"

/* Longest game read (engine history limit); longer records are rejected. */
#define REC_MOVES_MAX 2047
#define REC_NAME_MAX 64
#define REC_MSG_MAX 512

typedef enum {
    REC_FORMAT_AUTO = 0, /* from the file name's extension, else from the content */
    REC_FORMAT_CSA,
    REC_FORMAT_KIF,
    REC_FORMAT_USI,
    REC_FORMAT_NB
} rec_format_t;

/* "auto", "csa", "kif", "usi". */
const char *rec_format_name(rec_format_t f);
/* Inverse of rec_format_name; returns 0, or -1 for an unknown name. */
int rec_format_parse(const char *name, rec_format_t *out);
/* The format of a file: by extension (.csa; .kif .kifu; .usi .sfen), else by
 * its first lines. REC_FORMAT_AUTO when nothing fits. name may be NULL. */
rec_format_t rec_format_guess(const char *name, const void *data, size_t len);

/* Why a game (or a whole file) was rejected. */
typedef enum {
    REC_ERR_NONE = 0,
    REC_ERR_IO,          /* "unreadable": the file could not be read */
    REC_ERR_ENCODING,    /* "encoding": not UTF-8 or Shift_JIS (or a cut/invalid byte sequence) */
    REC_ERR_FORMAT,      /* "format": no known format, or no game in the file */
    REC_ERR_POSITION,    /* "bad position": board line, PI, hands, SFEN, handicap */
    REC_ERR_SYNTAX,      /* "bad move syntax": a move or statement that cannot be read */
    REC_ERR_ILLEGAL,     /* "illegal move": readable, but not legal in the position */
    REC_ERR_TRUNCATED,   /* "truncated": the input ends inside a statement or a board */
    REC_ERR_TOO_LONG,    /* "too long": more than REC_MOVES_MAX moves */
    REC_ERR_UNSUPPORTED, /* "unsupported": a feature not read (unknown handicap, pass, ...) */
    REC_ERR_MEMORY,      /* "out of memory" */
    REC_ERR_NB
} rec_error_t;

const char *rec_error_name(rec_error_t e); /* the short names above; "?" if out of range */

typedef struct {
    int32_t index;                     /* 1-based game number in the file */
    int32_t line;                      /* line where the game starts (1-based) */
    char start_sfen[SFEN_MAX_LEN];     /* "startpos" or an SFEN (ply field included) */
    const move_t *moves;                 /* (n_moves) legal moves from the start position */
    int32_t n_moves;
    int32_t result;                    /* db_result_t: from Black's side */
    db_reason_t reason;
    char black[REC_NAME_MAX];          /* player names, "" when not given */
    char white[REC_NAME_MAX];
    double rating[2];                  /* Black's, White's; NAN when not given */
} rec_game_t;

typedef struct {
    int32_t game;                      /* 1-based game index; 0 = the whole file */
    int32_t move;                      /* 1-based move number; 0 = not at a move */
    int32_t line;                      /* 1-based line; 0 = none */
    rec_error_t code;
    char msg[REC_MSG_MAX];             /* "<file>: game G: move M (line L): what" */
} rec_reject_t;

/* Where the games go. game: called once per accepted game (the game and its
 * moves are valid during the call only); returns 0 to go on, nonzero to stop
 * reading. reject: once per rejected game or file (NULL ok). */
typedef struct {
    int (*game)(void *user, const rec_game_t *g);
    void (*reject)(void *user, const rec_reject_t *r);
    void *user;
} rec_sink_t;

/* Reads the records in data[0..len) (name is used in messages only; NULL =
 * "<input>"). fmt REC_FORMAT_AUTO guesses it (rec_format_guess). Returns 0
 * when the input was read to its end, 1 when the game callback stopped it,
 * -1 when out of memory (also reported as a reject). Everything wrong with
 * the input is reported through the sink, never by the return value. */
int rec_parse(const char *name, const void *data, size_t len, rec_format_t fmt, const rec_sink_t *sink);
/* Same for a file (mapped, not copied); an unreadable file is a REC_ERR_IO reject. */
int rec_parse_file(const char *path, rec_format_t fmt, const rec_sink_t *sink);

/* ---- convenience: every game of an input in memory (tests, small files) -------- */
typedef struct {
    rec_game_t *games;     /* (n_games) with their own copies of the moves */
    int32_t n_games;
    rec_reject_t *rejects; /* (n_rejects) */
    int32_t n_rejects;
} rec_list_t;

/* Collects rec_parse's output into *out (zeroed first). Returns rec_parse's value. */
int rec_parse_list(const char *name, const void *data, size_t len, rec_format_t fmt, rec_list_t *out);
void rec_list_free(rec_list_t *l); /* NULL ok */

/* The moves as USI text separated by single spaces into a malloc'ed string
 * ("" for none), as games.moves holds them; NULL when out of memory. */
char *rec_moves_usi(const move_t *moves, int32_t n);

#endif
