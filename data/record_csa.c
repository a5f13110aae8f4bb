/* record_csa.c - the CSA reader (V2, V2.1, V2.2, V3.0; see record.h).
 *
 * Owns: CSA's statements: names (N+ N-), game information ($) and comments
 * (with floodgate's ratings), the board (PI, P1..P9, P+/P-, 00AL), the side
 * to move, moves ("+7776FU": a change of piece type is a promotion), T time
 * lines, the % endings, several statements on a line (','), several games
 * in a file ('/'); an illegal move kept pending until a %ILLEGAL_MOVE
 * explains it. Does not own: the parser and the result of an ending
 * (record.c), the rules (engine/).
 */
#include "data/record_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/movegen.h"

static const char CSA_PIECES[PT_NB][3] = {"",   "FU", "KY", "KE", "GI", "KA", "HI", "KI",
                                          "OU", "TO", "NY", "NK", "NG", "UM", "RY"};

static piece_type_t csa_piece(const char *s) {
    for (piece_type_t pt = PT_PAWN; pt < PT_NB; pt++)
        if (s[0] == CSA_PIECES[pt][0] && s[1] == CSA_PIECES[pt][1]) return pt;
    return PT_NONE;
}

typedef struct {
    setup_t b;
    int mode;      /* 0: no board statement, 1: PI, 2: P1..P9 rows, 3: P+/P- on an empty board */
    uint16_t rows; /* P1..P9 rows read (bit r-1) */
    int32_t al;    /* the colour of a 00AL, -1 none */
    bool content;  /* a statement that makes a game (board, side, move, ending) */
    bool pending;  /* an illegal move waits for a %ILLEGAL_MOVE that would explain it */
    int32_t pend_move, pend_line;
    char pend_msg[REC_MSG_MAX - 128];
} csa_t;

static void csa_reset(csa_t *c) {
    memset(c, 0, sizeof *c);
    c->b.side = -1;
    c->al = -1;
}

static void csa_reject_pending(parser_t *p, csa_t *c) {
    c->pending = false;
    reci_reject(p, false, c->pend_move, c->pend_line, REC_ERR_ILLEGAL, "%s", c->pend_msg);
}

/* Fixes the open game's start position from its board statements. */
static bool csa_start(parser_t *p, csa_t *c, int32_t line, bool at_eof) {
    if (p->started) return true;
    if (c->mode == 2 && c->rows != 0x1FF) {
        int got = 0;
        for (int r = 0; r < 9; r++) got += (c->rows >> r) & 1;
        if (at_eof)
            reci_reject(p, false, 0, line, REC_ERR_TRUNCATED, "the input ends inside the board (%d of 9 rows)", got);
        else reci_reject(p, false, 0, line, REC_ERR_POSITION, "the board has %d of its 9 rows P1..P9", got);
        return false;
    }
    if (c->mode == 0) reci_setup_startpos(&c->b, p->pos);
    if (c->al >= 0) { /* 00AL: every piece not on the board or in a hand */
        int32_t used[PT_HAND_NB] = {0};
        for (sq_t sq = 0; sq < SQ_NB; sq++) {
            piece_type_t pt = pt_demote(piece_type(c->b.board[sq]));
            if (pt >= PT_PAWN && pt <= PT_GOLD) used[pt]++;
        }
        for (piece_type_t pt = PT_PAWN; pt <= PT_GOLD; pt++) {
            int32_t left = PIECE_TOTAL[pt] - used[pt] - c->b.hand[0][pt] - c->b.hand[1][pt];
            if (left > 0) c->b.hand[c->al][pt] += left;
        }
    }
    char sfen[SFEN_MAX_LEN];
    size_t n = reci_setup_sfen(&c->b, sfen, sizeof sfen);
    return reci_game_start(p, sfen, n, line);
}

/* P1..P9, PI, P+, P- */
static void csa_board(parser_t *p, csa_t *c, const char *s, size_t n, int32_t line, bool at_eof) {
    char q[256];
    reci_quote(q, sizeof q, s, n, false);
    rec_error_t bad = at_eof ? REC_ERR_TRUNCATED : REC_ERR_POSITION;
    if (n < 2) {
        reci_reject(p, false, 0, line, bad, "bad board line '%s'", q);
        return;
    }
    char k = s[1];
    if (k >= '1' && k <= '9') { /* one row, files 9..1 */
        int r = k - '1';
        if (c->mode != 0 && c->mode != 2) {
            reci_reject(p, false, 0, line, REC_ERR_POSITION, "board row '%s' after another kind of board statement", q);
            return;
        }
        if (c->rows & (1u << r)) {
            reci_reject(p, false, 0, line, REC_ERR_POSITION, "board row P%c given twice", k);
            return;
        }
        char cells[27];
        size_t m = n - 2;
        if (m > 27) {
            for (size_t i = 29; i < n; i++)
                if (!is_blank(s[i])) {
                    reci_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': more than 9 squares", q);
                    return;
                }
            m = 27;
        }
        memset(cells, ' ', sizeof cells);
        memcpy(cells, s + 2, m);
        if (c->mode == 0) memset(c->b.board, 0, sizeof c->b.board);
        c->mode = 2;
        for (int i = 0; i < 9; i++) {
            const char *cell = cells + 3 * i;
            sq_t sq = sq_make(8 - i, r);
            if (cell[0] == ' ' && cell[1] == '*' && cell[2] == ' ') {
                c->b.board[sq] = PIECE_NONE;
                continue;
            }
            piece_type_t pt = (cell[0] == '+' || cell[0] == '-') ? csa_piece(cell + 1) : PT_NONE;
            if (pt == PT_NONE) {
                /* a row cut short by the end of the input reads as blanks */
                reci_reject(p, false, 0, line, (at_eof && 3 * (size_t)i + 3 > m) ? REC_ERR_TRUNCATED : REC_ERR_POSITION,
                            "bad board line '%s': square %d%d is not ' * ' or a piece", q, 9 - i, r + 1);
                return;
            }
            c->b.board[sq] = (uint8_t)piece_make(cell[0] == '-' ? COLOR_WHITE : COLOR_BLACK, pt);
        }
        c->rows |= (uint16_t)(1u << r);
        return;
    }
    if (k != 'I' && k != '+' && k != '-') {
        reci_reject(p, false, 0, line, bad, "bad board line '%s'", q);
        return;
    }
    if (k == 'I') {
        if (c->mode != 0) {
            reci_reject(p, false, 0, line, REC_ERR_POSITION, "PI after another board statement");
            return;
        }
        reci_setup_startpos(&c->b, p->pos);
        c->mode = 1;
    } else if (c->mode == 0 && n > 2) { /* pieces on an empty board ("P+" alone says nothing) */
        memset(c->b.board, 0, sizeof c->b.board);
        c->mode = 3;
    }
    if ((n - 2) % 4 != 0) {
        reci_reject(p, false, 0, line, bad, "bad board line '%s': pieces come as 4 characters (square, piece)", q);
        return;
    }
    color_t col = k == '-' ? COLOR_WHITE : COLOR_BLACK;
    for (size_t i = 2; i + 4 <= n; i += 4) {
        const char *g = s + i;
        bool hand = g[0] == '0' && g[1] == '0';
        sq_t sq = csa_square(g[0], g[1]);
        if (k != 'I' && hand && g[2] == 'A' && g[3] == 'L') {
            c->al = col;
            continue;
        }
        piece_type_t pt = csa_piece(g + 2);
        if (pt == PT_NONE || (!hand && sq < 0) || (k == 'I' && hand)) {
            reci_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': '%.4s' is no square and piece", q,
                        g);
            return;
        }
        if (k == 'I') {
            if (piece_type(c->b.board[sq]) != pt) {
                reci_reject(p, false, 0, line, REC_ERR_POSITION,
                            "bad board line '%s': PI removes a %s from %.2s, which is not there", q, CSA_PIECES[pt], g);
                return;
            }
            c->b.board[sq] = PIECE_NONE;
        } else if (hand) {
            if (pt < PT_PAWN || pt > PT_GOLD) {
                reci_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': a %s cannot be in hand", q,
                            CSA_PIECES[pt]);
                return;
            }
            if (c->b.hand[col][pt] >= 99) {
                reci_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': too many pieces in hand", q);
                return;
            }
            c->b.hand[col][pt]++;
        } else {
            if (c->b.board[sq] != PIECE_NONE) {
                reci_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': square %.2s is taken", q, g);
                return;
            }
            c->b.board[sq] = (uint8_t)piece_make(col, pt);
        }
    }
}

/* +7776FU */
static void csa_move(parser_t *p, csa_t *c, const char *s, size_t n, int32_t line, bool at_eof) {
    char q[256];
    reci_quote(q, sizeof q, s, n, false);
    int32_t no = p->g.n_moves + 1;
    if (p->ended) {
        reci_reject(p, false, no, line, REC_ERR_SYNTAX, "move '%s' after the game's ending", q);
        return;
    }
    if (!csa_start(p, c, line, false)) return;
    piece_type_t after = n == 7 ? csa_piece(s + 5) : PT_NONE;
    bool drop = n == 7 && s[1] == '0' && s[2] == '0';
    sq_t from = n == 7 ? csa_square(s[1], s[2]) : -1, to = n == 7 ? csa_square(s[3], s[4]) : -1;
    if (n != 7 || after == PT_NONE || to < 0 || (!drop && from < 0)) {
        reci_reject(p, false, no, line, at_eof ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                    at_eof ? "the input ends inside move '%s'" : "bad move syntax '%s' (a move is like +7776FU)", q);
        return;
    }
    const pos_t *pos = p->pos;
    color_t stm = pos_side_to_move(pos), mover = s[0] == '-' ? COLOR_WHITE : COLOR_BLACK;
    char why[160] = "";
    move_t m = MOVE_NONE;
    if (mover != stm) {
        snprintf(why, sizeof why, "it is %s's move", stm == COLOR_BLACK ? "Black" : "White");
    } else if (drop) {
        if (after > PT_GOLD) snprintf(why, sizeof why, "a %s cannot be dropped", CSA_PIECES[after]);
        else if (pos_hand_count(pos, stm, after) == 0) snprintf(why, sizeof why, "no %s in hand", CSA_PIECES[after]);
        else m = move_make_drop(after, to);
    } else {
        piece_t pc = pos_piece_on(pos, from);
        piece_type_t before = piece_type(pc);
        if (pc == PIECE_NONE || piece_color(pc) != stm)
            snprintf(why, sizeof why, "no piece of the side to move on %.2s", s + 1);
        else if (after == before) m = move_make(from, to, false);
        else if (pt_can_promote(before) && after == pt_promote(before)) m = move_make(from, to, true);
        else
            snprintf(why, sizeof why, "the %s on %.2s cannot become a %s", CSA_PIECES[before], s + 1,
                     CSA_PIECES[after]);
    }
    if (m != MOVE_NONE && !pos_is_valid_move(pos, m)) {
        snprintf(why, sizeof why, "not a legal move here");
        m = MOVE_NONE;
    }
    if (m == MOVE_NONE) { /* rejected unless %ILLEGAL_MOVE follows */
        c->pending = true;
        c->pend_move = no;
        c->pend_line = line;
        snprintf(c->pend_msg, sizeof c->pend_msg, "illegal move '%s': %s", q, why);
        return;
    }
    reci_game_play(p, m, line);
}

static void csa_ending(parser_t *p, csa_t *c, const char *s, size_t n, int32_t line, bool at_eof) {
    /* clang-format off */
    static const struct {
        const char *name;
        end_t end;
    } ENDS[] = {
        {"TORYO", END_RESIGN},      {"CHUDAN", END_ABORT},     {"SENNICHITE", END_REPETITION},
        {"TIME_UP", END_TIME},      {"ILLEGAL_MOVE", END_ILLEGAL}, {"+ILLEGAL_ACTION", END_ILLEGAL_BLACK},
        {"-ILLEGAL_ACTION", END_ILLEGAL_WHITE}, {"JISHOGI", END_IMPASSE}, {"KACHI", END_DECLARE},
        {"HIKIWAKE", END_IMPASSE},  {"MAX_MOVES", END_MAX_MOVES}, {"TSUMI", END_MATE},
        {"FUZUMI", END_ABORT},      {"MATTA", END_ABORT},      {"ERROR", END_ABORT},
    };
    /* clang-format on */
    int found = -1;
    for (int i = 0; i < (int)(sizeof ENDS / sizeof ENDS[0]); i++)
        if (n - 1 == strlen(ENDS[i].name) && memcmp(s + 1, ENDS[i].name, n - 1) == 0) found = i;
    if (c->pending) {
        if (found >= 0 && (ENDS[found].end == END_ILLEGAL || ENDS[found].end == END_ILLEGAL_BLACK ||
                           ENDS[found].end == END_ILLEGAL_WHITE)) {
            c->pending = false; /* the record keeps the game up to the illegal move */
            reci_game_set_end(p, ENDS[found].end);
        } else {
            csa_reject_pending(p, c);
        }
        return;
    }
    if (p->ended) return; /* the first ending counts */
    if (!csa_start(p, c, line, false)) return;
    if (found < 0) {
        char q[256];
        reci_quote(q, sizeof q, s, n, false);
        reci_reject(p, false, p->g.n_moves + 1, line, at_eof ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                    at_eof ? "the input ends inside '%s'" : "unknown ending '%s'", q);
        return;
    }
    reci_game_set_end(p, ENDS[found].end);
}

/* 'black_rate:NAME:1234.5 (floodgate) */
static void csa_comment(parser_t *p, const char *s, size_t n) {
    int c = has_prefix(s, n, "'black_rate:") ? 0 : has_prefix(s, n, "'white_rate:") ? 1 : -1;
    if (c < 0) return;
    size_t k = n;
    while (k > 0 && s[k - 1] != ':') k--;
    char buf[64];
    size_t m = n - k;
    if (m == 0 || m >= sizeof buf) return;
    memcpy(buf, s + k, m);
    buf[m] = 0;
    char *end = NULL;
    double v = strtod(buf, &end);
    if (end == buf + m && isfinite(v)) p->g.rating[c] = v;
}

static void csa_statement(parser_t *p, csa_t *c, const char *s, size_t n, int32_t line, bool at_eof) {
    char k = s[0];
    if (k == 'T') return; /* time of the last move */
    if (c->pending && k != '%') {
        csa_reject_pending(p, c);
        return;
    }
    c->content = true;
    if (k == 'P') {
        if (p->started)
            reci_reject(p, false, p->g.n_moves + 1, line, REC_ERR_POSITION, "board statement after the game started");
        else csa_board(p, c, s, n, line, at_eof);
        return;
    }
    if ((k == '+' || k == '-') && n == 1) {
        if (p->started)
            reci_reject(p, false, p->g.n_moves + 1, line, REC_ERR_POSITION,
                        "side to move given after the game started");
        else c->b.side = k == '-' ? COLOR_WHITE : COLOR_BLACK;
        return;
    }
    if (k == '+' || k == '-') {
        csa_move(p, c, s, n, line, at_eof);
        return;
    }
    if (k == '%') {
        csa_ending(p, c, s, n, line, at_eof);
        return;
    }
    char q[256];
    reci_quote(q, sizeof q, s, n, false);
    reci_reject(p, false, p->started ? p->g.n_moves + 1 : 0, line, at_eof ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                "unknown statement '%s'", q);
}

/* Closes a CSA game at "/" or at the end of the input. */
static void csa_game_end(parser_t *p, csa_t *c, int32_t line, bool at_eof) {
    if (!p->in_game) return;
    if (!p->failed) {
        if (c->pending) csa_reject_pending(p, c);
        else if (!c->content) {
            reci_game_drop(p); /* comments and names only */
            return;
        } else csa_start(p, c, line, at_eof);
    }
    reci_game_end(p);
}

void reci_csa_read(parser_t *p) {
    csa_t *c = malloc(sizeof *c);
    if (!c) {
        p->stop = -1;
        return;
    }
    csa_reset(c);
    size_t at = 0;
    int32_t lineno = 0;
    line_t ln;
    while (!p->stop && reci_next_line(p->text, p->len, &at, &lineno, &ln)) {
        const char *s = ln.s;
        size_t n = ln.n;
        reci_trim(&s, &n);
        if (n == 0) continue;
        if (n == 1 && s[0] == '/') {
            csa_game_end(p, c, ln.no, false);
            continue;
        }
        if (!p->in_game) {
            reci_game_begin(p, ln.no);
            csa_reset(c);
        }
        if (p->failed) continue;
        if (s[0] == '\'') {
            csa_comment(p, s, n);
            continue;
        }
        if (s[0] == 'N' && n >= 2 && (s[1] == '+' || s[1] == '-')) {
            reci_copy_name(s[1] == '+' ? p->g.black : p->g.white, s + 2, n - 2);
            continue;
        }
        if (s[0] == '$' || s[0] == 'V') continue; /* game information, version */
        size_t b = 0;
        while (b < n && !p->failed && !p->stop) {
            size_t e = b;
            while (e < n && s[e] != ',') e++;
            const char *t = s + b;
            size_t tn = e - b;
            reci_trim(&t, &tn);
            if (tn && t[0] == '\'') break; /* a comment ends the line */
            if (tn) csa_statement(p, c, t, tn, ln.no, ln.unterminated && e >= n);
            b = e + 1;
        }
    }
    if (!p->stop) csa_game_end(p, c, lineno, true);
    free(c);
}
