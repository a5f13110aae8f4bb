/* sfen.c - SFEN and USI move text.
 *
 * Owns: sfen_parse / sfen_write, move_from_usi / move_to_usi.
 * Does not own: the USI command loop.
 *
 * The reader works on a (pointer, length) window and never reads outside it;
 * every loop advances the cursor, so it ends on any input.
 */
#include "engine/sfen.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/movegen.h"

static const char *const ERROR_NAMES[SFEN_ERR_NB] = {
    "ok",
    "empty SFEN",
    "bad board character",
    "bad promoted piece",
    "rank too long",
    "rank too short",
    "wrong number of ranks",
    "king missing",
    "two kings of one colour",
    "piece that can never move",
    "two pawns on a file (nifu)",
    "more pieces than a game has",
    "bad side to move",
    "bad hand character",
    "king in hand",
    "promoted piece in hand",
    "bad hand count",
    "bad ply",
    "text after the ply",
    "side not to move is in check",
};

const char *sfen_error_name(sfen_error_t e) {
    if ((int)e < 0 || e >= SFEN_ERR_NB) return "unknown SFEN error";
    return ERROR_NAMES[e];
}

/* Piece letters by type (upper case = Black). Index 0 and promoted entries unused. */
static const char PIECE_CHARS[PT_KING + 1] = {' ', 'P', 'L', 'N', 'S', 'B', 'R', 'G', 'K'};

static piece_type_t pt_from_char(char ch) {
    char u = (ch >= 'a' && ch <= 'z') ? (char)(ch - 'a' + 'A') : ch;
    for (piece_type_t pt = PT_PAWN; pt <= PT_KING; pt++)
        if (PIECE_CHARS[pt] == u) return pt;
    return PT_NONE;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

typedef struct {
    const char *s;
    size_t len, i;
    char *err;
    size_t errlen;
} sfen_reader_t;

static sfen_error_t fail(sfen_reader_t *r, sfen_error_t e, const char *fmt, ...) {
    if (r->err && r->errlen) {
        int k = snprintf(r->err, r->errlen, "SFEN: %s: ", sfen_error_name(e));
        if (k >= 0 && (size_t)k < r->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + k, r->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return e;
}

/* An offset for messages (printf's %zu is not everywhere). */
static long offset_of(size_t i) { return i > 0x7FFFFFFF ? 0x7FFFFFFFL : (long)i; }

static void skip_space(sfen_reader_t *r) {
    while (r->i < r->len && is_space(r->s[r->i])) r->i++;
}

/* Next whitespace-delimited token [*b, *e); returns false at end of text. */
static bool next_token(sfen_reader_t *r, size_t *b, size_t *e) {
    skip_space(r);
    if (r->i >= r->len) return false;
    *b = r->i;
    while (r->i < r->len && !is_space(r->s[r->i])) r->i++;
    *e = r->i;
    return true;
}

static bool token_is(const sfen_reader_t *r, size_t b, size_t e, const char *word) {
    size_t n = strlen(word);
    return e - b == n && memcmp(r->s + b, word, n) == 0;
}

/* Printable form of a byte for messages. */
static const char *show_char(char c, char buf[8]) {
    if (c > 32 && c < 127)
        snprintf(buf, 8, "'%c'", c);
    else
        snprintf(buf, 8, "0x%02X", (unsigned char)c);
    return buf;
}

static sfen_error_t parse_board(sfen_reader_t *r, size_t b, size_t e, uint8_t board[SQ_NB]) {
    int rank = 0, file_count = 0;
    char cb[8];
    memset(board, 0, SQ_NB);
    for (size_t i = b; i < e; i++) {
        char c = r->s[i];
        if (c == '/') {
            if (file_count < 9)
                return fail(r, SFEN_ERR_RANK_SHORT, "rank %c has %d squares, needs 9", 'a' + rank, file_count);
            rank++;
            file_count = 0;
            if (rank >= 9) return fail(r, SFEN_ERR_RANK_COUNT, "more than 9 ranks");
            continue;
        }
        if (c >= '1' && c <= '9') {
            file_count += c - '0';
            if (file_count > 9)
                return fail(r, SFEN_ERR_RANK_LONG, "rank %c has more than 9 squares", 'a' + rank);
            continue;
        }
        bool promoted = false;
        if (c == '+') {
            promoted = true;
            if (i + 1 >= e) return fail(r, SFEN_ERR_PROMOTED, "'+' at the end of the board");
            c = r->s[++i];
        }
        piece_type_t pt = pt_from_char(c);
        if (pt == PT_NONE) {
            if (promoted) return fail(r, SFEN_ERR_PROMOTED, "'+' followed by %s", show_char(c, cb));
            return fail(r, SFEN_ERR_BOARD_CHAR, "%s at offset %ld", show_char(c, cb), offset_of(i));
        }
        if (promoted) {
            if (!pt_can_promote(pt)) return fail(r, SFEN_ERR_PROMOTED, "'+%c' cannot be promoted", c);
            pt = pt_promote(pt);
        }
        if (file_count >= 9) return fail(r, SFEN_ERR_RANK_LONG, "rank %c has more than 9 squares", 'a' + rank);
        color_t col = (c >= 'a' && c <= 'z') ? COLOR_WHITE : COLOR_BLACK;
        board[sq_make(8 - file_count, rank)] = (uint8_t)piece_make(col, pt);
        file_count++;
    }
    if (file_count < 9)
        return fail(r, SFEN_ERR_RANK_SHORT, "rank %c has %d squares, needs 9", 'a' + rank, file_count);
    if (rank != 8) return fail(r, SFEN_ERR_RANK_COUNT, "%d ranks, needs 9", rank + 1);
    return SFEN_OK;
}

static sfen_error_t parse_hands(sfen_reader_t *r, size_t b, size_t e, hand_t hand[COLOR_NB]) {
    char cb[8];
    hand[0] = hand[1] = 0;
    if (e - b == 1 && r->s[b] == '-') return SFEN_OK;
    size_t i = b;
    while (i < e) {
        int count = 1;
        if (r->s[i] >= '0' && r->s[i] <= '9') {
            if (r->s[i] == '0') return fail(r, SFEN_ERR_HAND_COUNT, "count starting with 0 in the hand");
            count = 0;
            int digits = 0;
            while (i < e && r->s[i] >= '0' && r->s[i] <= '9') {
                if (++digits > 2) return fail(r, SFEN_ERR_HAND_COUNT, "hand count with more than 2 digits");
                count = count * 10 + (r->s[i] - '0');
                i++;
            }
            if (i >= e) return fail(r, SFEN_ERR_HAND_COUNT, "hand count %d not followed by a piece", count);
        }
        char c = r->s[i];
        if (c == '+') return fail(r, SFEN_ERR_HAND_PROMOTED, "promoted piece in the hand");
        piece_type_t pt = pt_from_char(c);
        if (pt == PT_KING) return fail(r, SFEN_ERR_HAND_KING, "%s in the hand", show_char(c, cb));
        if (pt == PT_NONE) return fail(r, SFEN_ERR_HAND_CHAR, "%s in the hand", show_char(c, cb));
        color_t col = (c >= 'a' && c <= 'z') ? COLOR_WHITE : COLOR_BLACK;
        int total = hand_count(hand[col], pt) + count;
        if (total > PIECE_TOTAL[pt])
            return fail(r, SFEN_ERR_HAND_COUNT, "%d x %c in the hand, a game has %d", total, c, PIECE_TOTAL[pt]);
        hand[col] += (uint32_t)count << HAND_SHIFT[pt];
        i++;
    }
    return SFEN_OK;
}

static sfen_error_t check_position(sfen_reader_t *r, const pos_t *pos) {
    static const char *const COLOR_NAME[2] = {"Black", "White"};
    int kings[COLOR_NB] = {0, 0};
    int count[PT_HAND_NB] = {0};
    int pawns_on_file[COLOR_NB][FILE_NB] = {{0}};
    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        piece_t pc = pos->board[sq];
        if (pc == PIECE_NONE) continue;
        piece_type_t pt = piece_type(pc);
        color_t c = piece_color(pc);
        if (pt == PT_KING) {
            kings[c]++;
            continue;
        }
        count[pt_demote(pt)]++;
        int rr = rank_relative(c, sq_rank(sq));
        if (((pt == PT_PAWN || pt == PT_LANCE) && rr == 0) || (pt == PT_KNIGHT && rr <= 1))
            return fail(r, SFEN_ERR_DEAD_PIECE, "%s %c on %d%c can never move", COLOR_NAME[c], PIECE_CHARS[pt],
                        sq_file(sq) + 1, 'a' + sq_rank(sq));
        if (pt == PT_PAWN && ++pawns_on_file[c][sq_file(sq)] > 1)
            return fail(r, SFEN_ERR_NIFU, "two %s pawns on file %d", COLOR_NAME[c], sq_file(sq) + 1);
    }
    for (color_t c = 0; c < COLOR_NB; c++) {
        if (kings[c] == 0) return fail(r, SFEN_ERR_KING_MISSING, "%s has no king", COLOR_NAME[c]);
        if (kings[c] > 1) return fail(r, SFEN_ERR_KING_TWO, "%s has %d kings", COLOR_NAME[c], kings[c]);
        for (piece_type_t pt = PT_PAWN; pt < PT_HAND_NB; pt++) count[pt] += hand_count(pos->hand[c], pt);
    }
    for (piece_type_t pt = PT_PAWN; pt < PT_HAND_NB; pt++)
        if (count[pt] > PIECE_TOTAL[pt])
            return fail(r, SFEN_ERR_PIECE_COUNT, "%d pieces of kind %c on board and in hand, a game has %d", count[pt],
                        PIECE_CHARS[pt], PIECE_TOTAL[pt]);
    return SFEN_OK;
}

sfen_error_t sfen_parse(pos_t *pos, const char *s, size_t len, char *err, size_t errlen) {
    sfen_reader_t rd = {s, 0, 0, err, errlen};
    sfen_reader_t *r = &rd;
    if (err && errlen) err[0] = '\0';
    engine_init();
    if (s) {
        const char *nul = memchr(s, '\0', len);
        rd.len = nul ? (size_t)(nul - s) : len;
    }
    size_t b, e;
    if (!next_token(r, &b, &e)) return fail(r, SFEN_ERR_EMPTY, "no text");
    if (token_is(r, b, e, "startpos")) {
        skip_space(r);
        if (r->i < r->len) return fail(r, SFEN_ERR_TRAILING, "text after 'startpos' at offset %ld", offset_of(r->i));
        pos_set_startpos(pos);
        return SFEN_OK;
    }
    if (token_is(r, b, e, "sfen") && !next_token(r, &b, &e)) return fail(r, SFEN_ERR_EMPTY, "nothing after 'sfen'");

    sfen_error_t rc = parse_board(r, b, e, pos->board);
    if (rc) return rc;

    if (!next_token(r, &b, &e)) return fail(r, SFEN_ERR_SIDE, "side to move missing");
    if (e - b != 1 || (r->s[b] != 'b' && r->s[b] != 'w'))
        return fail(r, SFEN_ERR_SIDE, "side must be 'b' or 'w', got '%.*s'", (int)(e - b > 16 ? 16 : e - b), r->s + b);
    pos->side = r->s[b] == 'b' ? COLOR_BLACK : COLOR_WHITE;

    pos->hand[0] = pos->hand[1] = 0;
    pos->game_ply = 1;
    if (next_token(r, &b, &e)) {
        rc = parse_hands(r, b, e, pos->hand);
        if (rc) return rc;
    }
    if (next_token(r, &b, &e)) {
        int64_t ply = 0;
        if (e - b > 9)
            return fail(r, SFEN_ERR_PLY, "ply '%.*s' is not in 1..%d", (int)(e - b > 16 ? 16 : e - b), r->s + b,
                        SFEN_PLY_MAX);
        for (size_t i = b; i < e; i++) {
            char c = r->s[i];
            if (c < '0' || c > '9')
                return fail(r, SFEN_ERR_PLY, "ply '%.*s' is not a positive number", (int)(e - b), r->s + b);
            ply = ply * 10 + (c - '0');
        }
        if (ply < 1) return fail(r, SFEN_ERR_PLY, "ply must be at least 1");
        pos->game_ply = (int32_t)ply;
        skip_space(r);
        if (r->i < r->len) return fail(r, SFEN_ERR_TRAILING, "text after the ply at offset %ld", offset_of(r->i));
    }

    rc = check_position(r, pos);
    if (rc) return rc;
    pos_reset_state(pos);
    color_t them = color_flip(pos->side);
    if (pos_is_attacked(pos, pos->side, pos->king_sq[them], pos->bb[POS_BB_OCC]))
        return fail(r, SFEN_ERR_OPPONENT_IN_CHECK, "%s is to move but %s's king is attacked",
                    pos->side == COLOR_BLACK ? "Black" : "White", them == COLOR_BLACK ? "Black" : "White");
    return SFEN_OK;
}

sfen_error_t sfen_set_position(pos_t *pos, const uint8_t board[SQ_NB], const hand_t hand[COLOR_NB], color_t side,
                               int32_t ply, char *err, size_t errlen) {
    sfen_reader_t rd = {NULL, 0, 0, err, errlen};
    sfen_reader_t *r = &rd;
    if (err && errlen) err[0] = '\0';
    engine_init();
    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        piece_t pc = board[sq];
        piece_type_t pt = piece_type(pc);
        if (pc != PIECE_NONE && ((pc & ~(15 | 16)) || pt == 0 || pt == 15))
            return fail(r, SFEN_ERR_BOARD_CHAR, "piece code %d on square %d is no piece", (int)pc, (int)sq);
        pos->board[sq] = pc;
    }
    for (color_t c = 0; c < COLOR_NB; c++) {
        for (piece_type_t pt = PT_PAWN; pt < PT_HAND_NB; pt++)
            if (hand_count(hand[c], pt) > PIECE_TOTAL[pt])
                return fail(r, SFEN_ERR_HAND_COUNT, "%d x %c in a hand, a game has %d", hand_count(hand[c], pt),
                            PIECE_CHARS[pt], PIECE_TOTAL[pt]);
        pos->hand[c] = hand[c];
    }
    if (side != COLOR_BLACK && side != COLOR_WHITE) return fail(r, SFEN_ERR_SIDE, "side to move %d", (int)side);
    if (ply < 1 || ply > SFEN_PLY_MAX) return fail(r, SFEN_ERR_PLY, "ply %d is not in 1..%d", ply, SFEN_PLY_MAX);
    pos->side = side;
    pos->game_ply = ply;
    sfen_error_t rc = check_position(r, pos);
    if (rc) return rc;
    pos_reset_state(pos);
    color_t them = color_flip(pos->side);
    if (pos_is_attacked(pos, pos->side, pos->king_sq[them], pos->bb[POS_BB_OCC]))
        return fail(r, SFEN_ERR_OPPONENT_IN_CHECK, "%s is to move but %s's king is attacked",
                    pos->side == COLOR_BLACK ? "Black" : "White", them == COLOR_BLACK ? "Black" : "White");
    return SFEN_OK;
}

sfen_error_t sfen_parse_cstr(pos_t *pos, const char *s, char *err, size_t errlen) {
    return sfen_parse(pos, s, s ? strlen(s) : 0, err, errlen);
}

int32_t sfen_write(const pos_t *pos, char *buf, size_t buflen) {
    char tmp[SFEN_MAX_LEN];
    int n = 0;
    for (int r = 0; r < 9; r++) {
        int empty = 0;
        for (int f = 8; f >= 0; f--) {
            piece_t pc = pos->board[sq_make(f, r)];
            if (pc == PIECE_NONE) {
                empty++;
                continue;
            }
            if (empty) tmp[n++] = (char)('0' + empty);
            empty = 0;
            piece_type_t pt = piece_type(pc);
            if (pt_is_promoted(pt)) tmp[n++] = '+';
            char ch = PIECE_CHARS[pt_demote(pt)];
            tmp[n++] = piece_color(pc) == COLOR_WHITE ? (char)(ch - 'A' + 'a') : ch;
        }
        if (empty) tmp[n++] = (char)('0' + empty);
        if (r < 8) tmp[n++] = '/';
    }
    tmp[n++] = ' ';
    tmp[n++] = pos->side == COLOR_BLACK ? 'b' : 'w';
    tmp[n++] = ' ';
    static const piece_type_t ORDER[7] = {PT_ROOK, PT_BISHOP, PT_GOLD, PT_SILVER, PT_KNIGHT, PT_LANCE, PT_PAWN};
    int before = n;
    for (color_t c = 0; c < COLOR_NB; c++)
        for (int i = 0; i < 7; i++) {
            int k = hand_count(pos->hand[c], ORDER[i]);
            if (!k) continue;
            if (k > 1) n += snprintf(tmp + n, sizeof tmp - (size_t)n, "%d", k);
            char ch = PIECE_CHARS[ORDER[i]];
            tmp[n++] = c == COLOR_WHITE ? (char)(ch - 'A' + 'a') : ch;
        }
    if (n == before) tmp[n++] = '-';
    int32_t ply = pos->game_ply < 1 ? 1 : pos->game_ply > SFEN_PLY_MAX ? SFEN_PLY_MAX : pos->game_ply;
    n += snprintf(tmp + n, sizeof tmp - (size_t)n, " %d", (int)ply);
    if (!buf || buflen == 0) return n;
    size_t k = (size_t)n < buflen ? (size_t)n : buflen - 1;
    memcpy(buf, tmp, k);
    buf[k] = '\0';
    return n;
}

int32_t move_to_usi(move_t m, char *buf) {
    if (m == MOVE_NONE) return (int32_t)(memcpy(buf, "none", 5), 4);
    if (m == MOVE_NULL) return (int32_t)(memcpy(buf, "pass", 5), 4);
    sq_t to = move_to(m);
    int n = 0;
    if (move_is_drop(m)) {
        piece_type_t pt = move_drop_pt(m);
        buf[n++] = pt >= PT_PAWN && pt <= PT_GOLD ? PIECE_CHARS[pt] : '?';
        buf[n++] = '*';
    } else {
        sq_t from = move_from(m);
        buf[n++] = (char)('1' + sq_file(from));
        buf[n++] = (char)('a' + sq_rank(from));
    }
    buf[n++] = (char)('1' + sq_file(to));
    buf[n++] = (char)('a' + sq_rank(to));
    if (move_is_promote(m)) buf[n++] = '+';
    buf[n] = '\0';
    return n;
}

static sq_t parse_square(const char *s) {
    if (s[0] < '1' || s[0] > '9' || s[1] < 'a' || s[1] > 'i') return SQ_NONE;
    return sq_make(s[0] - '1', s[1] - 'a');
}

move_t move_from_usi(const pos_t *pos, const char *s, size_t len) {
    if (!s) return MOVE_NONE;
    const char *nul = memchr(s, '\0', len);
    if (nul) len = (size_t)(nul - s);
    while (len && is_space(*s)) s++, len--;
    while (len && is_space(s[len - 1])) len--;
    move_t m;
    if (len == 4 && s[1] == '*') {
        piece_type_t pt = pt_from_char(s[0]);
        sq_t to = parse_square(s + 2);
        if (pt == PT_NONE || pt == PT_KING || to == SQ_NONE) return MOVE_NONE;
        m = move_make_drop(pt, to);
    } else if (len == 4 || (len == 5 && s[4] == '+')) {
        sq_t from = parse_square(s), to = parse_square(s + 2);
        if (from == SQ_NONE || to == SQ_NONE) return MOVE_NONE;
        m = move_make(from, to, len == 5);
    } else {
        return MOVE_NONE;
    }
    return pos_is_valid_move(pos, m) ? m : MOVE_NONE;
}
