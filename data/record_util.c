/* record_util.c - what the record readers share (record_internal.h): the
 * format and error names, the text helpers, the parser (one game open at a
 * time: begun, played, rejected, ended with a result and a reason from its
 * ending and the rules, handed to the sink) and the boards CSA and KIF
 * position statements build.
 *
 * Owns: those helpers, below the readers. Calls no reader and no entry
 * point: record_csa.c, record_kif.c and record_usi.c call it, and record.c
 * (the dispatcher) calls them, so data/ has no circle (issue 44).
 */
#include "data/record_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "compat/compat.h"
#include "engine/rules.h"

/* ==================================================================================== */
/* names                                                                                */
/* ==================================================================================== */
static const char *const FORMAT_NAMES[REC_FORMAT_NB] = {"auto", "csa", "kif", "usi"};

const char *rec_format_name(rec_format_t f) { return (unsigned)f < REC_FORMAT_NB ? FORMAT_NAMES[f] : "?"; }

int rec_format_parse(const char *name, rec_format_t *out) {
    if (!name) return -1;
    for (int i = 0; i < REC_FORMAT_NB; i++)
        if (strcmp(name, FORMAT_NAMES[i]) == 0) {
            *out = (rec_format_t)i;
            return 0;
        }
    return -1;
}

static const char *const ERROR_NAMES[REC_ERR_NB] = {
    "none",         "unreadable", "encoding", "format",      "bad position",  "bad move syntax",
    "illegal move", "truncated",  "too long", "unsupported", "out of memory",
};

const char *rec_error_name(rec_error_t e) { return (unsigned)e < REC_ERR_NB ? ERROR_NAMES[e] : "?"; }

/* ==================================================================================== */
/* text helpers (explicit lengths everywhere)                                           */
/* ==================================================================================== */
/* Trims ASCII blanks on both sides: *s, *n updated. */
void reci_trim(const char **s, size_t *n) {
    while (*n && is_blank(**s)) (*s)++, (*n)--;
    while (*n && is_blank((*s)[*n - 1])) (*n)--;
}

/* Text for a message: printable ASCII as is, UTF-8 as is when utf8, other
 * bytes as \xNN; at most ~40 input bytes, then "...". */
void reci_quote(char *out, size_t cap, const char *s, size_t n, bool utf8) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 12 < cap; i++) {
        uint8_t ch = (uint8_t)s[i];
        bool cont = (ch & 0xC0) == 0x80;
        if (i >= 40 && !(utf8 && cont)) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (ch >= 0x20 && ch < 0x7F) out[o++] = (char)ch;
        else if (utf8 && ch >= 0x80) out[o++] = (char)ch;
        else o += (size_t)snprintf(out + o, cap - o, "\\x%02X", ch);
    }
    out[o] = 0;
}

/* The line at *at (advanced past it; *lineno counted); false at the end. */
bool reci_next_line(const char *text, size_t len, size_t *at, int32_t *lineno, line_t *ln) {
    if (*at >= len) return false;
    size_t b = *at, e = b;
    while (e < len && text[e] != '\n') e++;
    ln->s = text + b;
    ln->n = e - b;
    ln->no = ++*lineno;
    ln->unterminated = e >= len;
    *at = e < len ? e + 1 : len;
    if (ln->n && ln->s[ln->n - 1] == '\r') ln->n--;
    return true;
}

/* A player's name: control bytes dropped, at most REC_NAME_MAX - 1 bytes,
 * never ending inside a UTF-8 sequence. */
void reci_copy_name(char *dst, const char *s, size_t n) {
    size_t m = 0;
    for (size_t i = 0; i < n && m + 1 < REC_NAME_MAX; i++)
        if ((uint8_t)s[i] >= 0x20 && s[i] != 0x7F) dst[m++] = s[i];
    /* do not end inside a UTF-8 sequence */
    while (m > 0 && ((uint8_t)dst[m - 1] & 0x80)) {
        size_t b = m;
        while (b > 0 && ((uint8_t)dst[b - 1] & 0xC0) == 0x80) b--;
        if (b == 0) {
            m = 0;
            break;
        }
        uint8_t lead = (uint8_t)dst[b - 1];
        size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (m - (b - 1) >= want) break;
        m = b - 1;
    }
    dst[m] = 0;
}

/* ==================================================================================== */
/* the parser: one game open at a time                                                  */
/* ==================================================================================== */
/* Reports a reject: of the open game (game > 0, which is then skipped) or of
 * the whole input. move/line 0 = not shown. */
void reci_reject(parser_t *p, bool whole_file, int32_t move, int32_t line, rec_error_t code, const char *fmt, ...) {
    rec_reject_t r;
    memset(&r, 0, sizeof r);
    r.game = whole_file ? 0 : p->games;
    r.move = move;
    r.line = line;
    r.code = code;
    char where[96] = "";
    size_t w = 0;
    if (r.game > 0) w += (size_t)snprintf(where + w, sizeof where - w, "game %d: ", (int)r.game);
    if (move > 0 && line > 0) snprintf(where + w, sizeof where - w, "move %d (line %d): ", (int)move, (int)line);
    else if (move > 0) snprintf(where + w, sizeof where - w, "move %d: ", (int)move);
    else if (line > 0) snprintf(where + w, sizeof where - w, "line %d: ", (int)line);
    int k = snprintf(r.msg, sizeof r.msg, "%.300s: %s", p->name, where);
    if (k > 0 && (size_t)k < sizeof r.msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r.msg + k, sizeof r.msg - (size_t)k, fmt, ap);
        va_end(ap);
    }
    if (!whole_file && p->in_game) p->failed = true;
    p->rejected++;
    if (p->sink && p->sink->reject) p->sink->reject(p->sink->user, &r);
}

void reci_game_begin(parser_t *p, int32_t line) {
    p->games++;
    p->in_game = true;
    p->failed = p->started = p->ended = false;
    p->end = END_NONE;
    memset(&p->g, 0, sizeof p->g);
    p->g.index = p->games;
    p->g.line = line;
    strcpy(p->g.start_sfen, "startpos");
    p->g.rating[0] = p->g.rating[1] = NAN;
    p->g.moves = p->moves;
}

/* Forgets the open game: it held nothing that makes a game. */
void reci_game_drop(parser_t *p) {
    if (!p->in_game) return;
    p->in_game = false;
    p->games--;
}

/* Sets the open game's start position from SFEN text (or "startpos"). */
bool reci_game_start(parser_t *p, const char *sfen, size_t n, int32_t line) {
    char err[256];
    if (sfen_parse(p->pos, sfen, n, err, sizeof err) != SFEN_OK) {
        char q[256];
        reci_quote(q, sizeof q, sfen, n, p->utf8);
        reci_reject(p, false, 0, line, REC_ERR_POSITION, "bad position '%s': %s", q, err);
        return false;
    }
    char buf[SFEN_MAX_LEN];
    sfen_write(p->pos, buf, sizeof buf);
    if (strcmp(buf, SFEN_STARTPOS) == 0) strcpy(p->g.start_sfen, "startpos");
    else memcpy(p->g.start_sfen, buf, sizeof buf);
    p->started = true;
    return true;
}

/* Plays a legal move in the open game. */
bool reci_game_play(parser_t *p, move_t m, int32_t line) {
    if (p->g.n_moves >= REC_MOVES_MAX) {
        reci_reject(p, false, p->g.n_moves + 1, line, REC_ERR_TOO_LONG, "more than %d moves", REC_MOVES_MAX);
        return false;
    }
    pos_do_move(p->pos, m);
    p->moves[p->g.n_moves++] = m;
    return true;
}

void reci_game_set_end(parser_t *p, end_t e) {
    p->ended = true;
    p->end = e;
}

/* Closes the open game: works out its result and hands it to the sink. */
void reci_game_end(parser_t *p) {
    if (!p->in_game) return;
    p->in_game = false;
    if (p->failed || p->stop) return;
    KOMA_ASSERT(p->started);
    const pos_t *pos = p->pos;
    color_t stm = pos_side_to_move(pos);
    color_t winner = COLOR_NB;
    db_reason_t reason = DB_REASON_ABORT;
    switch (p->end) {
    case END_NONE: {
        rules_status_t st = rules_status(pos, 0);
        if (st.end == RULES_END_CHECKMATE) reason = DB_REASON_CHECKMATE, winner = color_flip(stm);
        else if (st.end == RULES_END_SENNICHITE) reason = DB_REASON_SENNICHITE;
        else if (st.end == RULES_END_PERPETUAL_CHECK) reason = DB_REASON_PERPETUAL_CHECK, winner = st.winner;
        break;
    }
    case END_RESIGN: reason = DB_REASON_RESIGN, winner = color_flip(stm); break;
    case END_MATE:
        reason = rules_has_legal_move(pos) ? DB_REASON_RESIGN : DB_REASON_CHECKMATE;
        winner = color_flip(stm);
        break;
    case END_REPETITION: {
        rules_rep_t r = rules_repetition(pos, NULL);
        if (r == RULES_REP_LOSS) reason = DB_REASON_PERPETUAL_CHECK, winner = color_flip(stm);
        else if (r == RULES_REP_WIN) reason = DB_REASON_PERPETUAL_CHECK, winner = stm;
        else reason = DB_REASON_SENNICHITE;
        break;
    }
    case END_DECLARE: reason = DB_REASON_DECLARATION, winner = stm; break;
    case END_IMPASSE: reason = DB_REASON_DECLARATION; break;
    case END_TIME: reason = DB_REASON_TIME, winner = color_flip(stm); break;
    case END_ILLEGAL: reason = DB_REASON_ILLEGAL_MOVE, winner = color_flip(stm); break;
    case END_ILLEGAL_WIN: reason = DB_REASON_ILLEGAL_MOVE, winner = stm; break;
    case END_ILLEGAL_BLACK: reason = DB_REASON_ILLEGAL_MOVE, winner = COLOR_WHITE; break;
    case END_ILLEGAL_WHITE: reason = DB_REASON_ILLEGAL_MOVE, winner = COLOR_BLACK; break;
    case END_MAX_MOVES: reason = DB_REASON_MAX_PLY; break;
    case END_ABORT: reason = DB_REASON_ABORT; break;
    }
    p->g.reason = reason;
    p->g.result = winner == COLOR_BLACK   ? DB_RESULT_BLACK_WIN
                  : winner == COLOR_WHITE ? DB_RESULT_WHITE_WIN
                                          : DB_RESULT_DRAW;
    p->g.moves = p->moves;
    p->delivered++;
    if (p->sink && p->sink->game && p->sink->game(p->sink->user, &p->g) != 0) p->stop = 1;
}

/* ---- boards built by CSA/KIF position statements --------------------------------- */
void reci_setup_startpos(setup_t *b, pos_t *scratch) {
    pos_set_startpos(scratch);
    memcpy(b->board, scratch->board, sizeof b->board);
    memset(b->hand, 0, sizeof b->hand);
}

/* SFEN text of a setup (validated later by sfen_parse). Returns its length. */
size_t reci_setup_sfen(const setup_t *b, char *out, size_t cap) {
    static const char LETTER[PT_KING + 1] = {'?', 'P', 'L', 'N', 'S', 'B', 'R', 'G', 'K'};
    static const piece_type_t HAND_ORDER[7] = {PT_ROOK, PT_BISHOP, PT_GOLD, PT_SILVER, PT_KNIGHT, PT_LANCE, PT_PAWN};
    char buf[SFEN_MAX_LEN * 2];
    size_t n = 0;
    for (int32_t r = 0; r < RANK_NB; r++) {
        int empty = 0;
        for (int32_t f = FILE_NB - 1; f >= 0; f--) {
            piece_t pc = b->board[sq_make(f, r)];
            if (pc == PIECE_NONE) {
                empty++;
                continue;
            }
            if (empty) buf[n++] = (char)('0' + empty), empty = 0;
            piece_type_t pt = piece_type(pc);
            if (pt_is_promoted(pt)) buf[n++] = '+', pt = pt_demote(pt);
            char ch = (pt >= PT_PAWN && pt <= PT_KING) ? LETTER[pt] : '?';
            if (piece_color(pc) == COLOR_WHITE && ch != '?') ch = (char)(ch - 'A' + 'a');
            buf[n++] = ch;
        }
        if (empty) buf[n++] = (char)('0' + empty);
        if (r < RANK_NB - 1) buf[n++] = '/';
    }
    buf[n++] = ' ';
    buf[n++] = b->side == COLOR_WHITE ? 'w' : 'b';
    buf[n++] = ' ';
    size_t hands_at = n;
    for (color_t c = COLOR_BLACK; c < COLOR_NB; c++)
        for (int i = 0; i < 7; i++) {
            int32_t k = b->hand[c][HAND_ORDER[i]];
            if (k <= 0) continue;
            if (k > 1) n += (size_t)snprintf(buf + n, sizeof buf - n, "%d", (int)(k > 99 ? 99 : k));
            char ch = LETTER[HAND_ORDER[i]];
            buf[n++] = c == COLOR_WHITE ? (char)(ch - 'A' + 'a') : ch;
        }
    if (n == hands_at) buf[n++] = '-';
    memcpy(buf + n, " 1", 3);
    n += 2;
    if (n >= cap) n = cap - 1;
    memcpy(out, buf, n);
    out[n] = 0;
    return n;
}
