/* record_internal.h - what the game record readers share (data/record*.c only).
 *
 * Owns: the parser state (one game open at a time), how a game is begun,
 * played, rejected and handed to the sink, the endings (end_t) the readers
 * find before the rules judge them, the text helpers (explicit lengths: the
 * input need not be NUL-terminated and may hold NUL bytes), and the board
 * a CSA or KIF position statement builds. Does not own: the public API
 * (data/record.h), each format's syntax (record_csa.c, record_kif.c,
 * record_usi.c).
 *
 * The files: record.c (names, the text helpers, the parser, boards, format
 * detection, rec_parse and the entry points, collecting), record_csa.c,
 * record_kif.c (with the UTF-8 / Shift_JIS decoding), record_usi.c (with
 * rec_moves_usi, the USI move text of games.moves).
 *
 * Names: reci_ (internal, defined in record.c or a reader's file); the
 * static inline helpers below keep short names (no link symbol).
 */
#ifndef KOMA_RECORD_INTERNAL_H
#define KOMA_RECORD_INTERNAL_H

#include "data/record.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/position.h"

#if defined(__GNUC__) || defined(__clang__)
#define RECI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RECI_PRINTF(f, a)
#endif

/* ---- small text helpers (explicit lengths everywhere) ----------------------------- */
static inline bool has_prefix(const char *s, size_t n, const char *lit) {
    size_t k = strlen(lit);
    return n >= k && memcmp(s, lit, k) == 0;
}
static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
static inline bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
static inline bool str_eq(const char *s, size_t n, const char *lit) {
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}
/* "77" -> square (CSA squares, KIF origins); -1 unless both digits are 1..9. */
static inline sq_t csa_square(char f, char r) {
    if (f < '1' || f > '9' || r < '1' || r > '9') return -1;
    return sq_make(f - '1', r - '1');
}

/* Trims ASCII blanks on both sides: *s, *n updated. */
void reci_trim(const char **s, size_t *n);
/* Text for a message: printable ASCII as is, UTF-8 as is when utf8, other
 * bytes as \xNN; at most ~40 input bytes, then "...". */
void reci_quote(char *out, size_t cap, const char *s, size_t n, bool utf8);
/* A player's name: control bytes dropped, at most REC_NAME_MAX - 1 bytes,
 * never ending inside a UTF-8 sequence. */
void reci_copy_name(char *dst, const char *s, size_t n);

/* One line of the input: [s, s+n) without its "\r\n"; unterminated when the
 * input ends without a newline after it. */
typedef struct {
    const char *s;
    size_t n;
    int32_t no;
    bool unterminated;
} line_t;

/* The line at *at (advanced past it; *lineno counted); false at the end. */
bool reci_next_line(const char *text, size_t len, size_t *at, int32_t *lineno, line_t *ln);

/* ---- the parser: one game open at a time (record.c) ---------------------------------- */
/* How a record says its game ended (before the rules are asked). */
typedef enum {
    END_NONE,          /* no ending: the rules judge the last position */
    END_RESIGN,        /* side to move resigns */
    END_MATE,          /* side to move is mated (claimed) */
    END_REPETITION,    /* sennichite (or perpetual check, as the rules see it) */
    END_DECLARE,       /* side to move declares a win */
    END_IMPASSE,       /* jishogi / hikiwake: a draw */
    END_TIME,          /* side to move lost on time */
    END_ILLEGAL,       /* side to move loses by an illegal move */
    END_ILLEGAL_WIN,   /* side to move wins: the opponent's illegal move */
    END_ILLEGAL_BLACK, /* Black loses by an illegal action */
    END_ILLEGAL_WHITE, /* White loses by an illegal action */
    END_MAX_MOVES,     /* move limit: a draw */
    END_ABORT,         /* stopped, no result */
} end_t;

typedef struct {
    const char *name;
    const rec_sink_t *sink;
    const char *text; /* the input, decoded (KIF from Shift_JIS) */
    size_t len;
    bool utf8; /* the text is UTF-8: messages may quote it as is */
    pos_t *pos;
    rec_game_t g;
    move_t moves[REC_MOVES_MAX];
    int32_t games;     /* games begun: the open one's index */
    int64_t delivered; /* games handed to the sink */
    int64_t rejected;  /* rejects reported */
    bool in_game;      /* a game is open */
    bool failed;       /* the open game was rejected: skip to its end */
    bool started;      /* the open game's start position is set */
    bool ended;        /* the open game's ending was read */
    end_t end;
    int stop; /* 1: the sink said stop; -1: out of memory */
} parser_t;

/* Reports a reject: of the open game (game > 0, which is then skipped) or of
 * the whole input. move/line 0 = not shown. */
void reci_reject(parser_t *p, bool whole_file, int32_t move, int32_t line, rec_error_t code, const char *fmt, ...)
    RECI_PRINTF(6, 7);
void reci_game_begin(parser_t *p, int32_t line);
/* Forgets the open game: it held nothing that makes a game. */
void reci_game_drop(parser_t *p);
/* Sets the open game's start position from SFEN text (or "startpos"). */
bool reci_game_start(parser_t *p, const char *sfen, size_t n, int32_t line);
/* Plays a legal move in the open game. */
bool reci_game_play(parser_t *p, move_t m, int32_t line);
void reci_game_set_end(parser_t *p, end_t e);
/* Closes the open game: works out its result and hands it to the sink. */
void reci_game_end(parser_t *p);

/* ---- boards built by CSA/KIF position statements (record.c) ------------------------- */
typedef struct {
    uint8_t board[SQ_NB];               /* Piece codes */
    int32_t hand[COLOR_NB][PT_HAND_NB]; /* counts, <= 99 */
    int32_t side;                       /* COLOR_BLACK/WHITE, -1 = not given */
} setup_t;

void reci_setup_startpos(setup_t *b, pos_t *scratch);
/* SFEN text of a setup (validated later by sfen_parse). Returns its length. */
size_t reci_setup_sfen(const setup_t *b, char *out, size_t cap);

/* ---- the readers: the whole of p->text ------------------------------------------------- */
void reci_csa_read(parser_t *p); /* record_csa.c */
void reci_kif_read(parser_t *p); /* record_kif.c */
void reci_usi_read(parser_t *p); /* record_usi.c */
/* Chooses the KIF text encoding; sets p->text/len (and *owned when converted).
 * Returns false after reporting a reject (record_kif.c). */
bool reci_kif_decode(parser_t *p, const uint8_t *data, size_t len, char **owned);

#endif
