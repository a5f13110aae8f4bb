/* record_usi.c - the USI reader (one game a line; see record.h) and the USI
 * move text of a game.
 *
 * Owns: "position startpos|sfen ... moves ..." lines (or the same without
 * "position"), the result word that may end one, the shape of a USI move
 * before the position checks it, and rec_moves_usi (the moves as games.moves
 * holds them). Does not own: the parser and the result of an ending
 * (record.c), the rules and USI move notation (engine/).
 */
#include "data/record_internal.h"

#include <stdlib.h>

#include "engine/movegen.h"

typedef struct {
    const char *s;
    size_t n;
} tok_t;

static bool usi_tok(const char *s, size_t n, size_t *i, tok_t *t) {
    while (*i < n && is_blank(s[*i])) (*i)++;
    if (*i >= n) return false;
    size_t b = *i;
    while (*i < n && !is_blank(s[*i])) (*i)++;
    t->s = s + b;
    t->n = *i - b;
    return true;
}

static bool tok_is(const tok_t *t, const char *lit) { return str_eq(t->s, t->n, lit); }

/* "7g7f", "8h2b+", "P*5e" shapes (not checked against a position). */
static bool usi_move_shape(const char *s, size_t n) {
    if (n == 4 && s[0] && strchr("PLNSGBR", s[0]) && s[1] == '*')
        return s[2] >= '1' && s[2] <= '9' && s[3] >= 'a' && s[3] <= 'i';
    if (n != 4 && n != 5) return false;
    if (n == 5 && s[4] != '+') return false;
    return s[0] >= '1' && s[0] <= '9' && s[1] >= 'a' && s[1] <= 'i' && s[2] >= '1' && s[2] <= '9' && s[3] >= 'a' &&
           s[3] <= 'i';
}

/* A result word at the end of a USI game line: 0 and *e, or -1. */
static int usi_result(const tok_t *t, end_t *e) {
    static const struct {
        const char *word;
        end_t end;
    } W[] = {
        {"resign", END_RESIGN},
        {"win", END_DECLARE},
        {"checkmate", END_MATE},
        {"sennichite", END_REPETITION},
        {"perpetual_check", END_REPETITION},
        {"declaration", END_DECLARE},
        {"max_ply", END_MAX_MOVES},
        {"illegal_move", END_ILLEGAL},
        {"time", END_TIME},
        {"abort", END_ABORT},
    };
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++)
        if (tok_is(t, W[i].word)) {
            *e = W[i].end;
            return 0;
        }
    return -1;
}

static void usi_game(parser_t *p, const line_t *ln, const char *s, size_t n) {
    size_t i = 0;
    tok_t t = {s, 0};
    usi_tok(s, n, &i, &t);
    if (tok_is(&t, "position") && !usi_tok(s, n, &i, &t)) {
        reci_reject(p, false, 0, ln->no, ln->unterminated ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                    "'position' without startpos or sfen");
        return;
    }
    bool more;
    if (tok_is(&t, "startpos")) {
        if (!reci_game_start(p, "startpos", 8, ln->no)) return;
        more = usi_tok(s, n, &i, &t);
    } else if (tok_is(&t, "sfen")) {
        size_t b = i, e = i;
        more = false;
        while (usi_tok(s, n, &i, &t)) {
            if (tok_is(&t, "moves")) {
                more = true;
                break;
            }
            e = i;
        }
        if (!reci_game_start(p, s + b, e - b, ln->no)) return;
    } else {
        char q[256];
        reci_quote(q, sizeof q, t.s, t.n, false);
        reci_reject(p, false, 0, ln->no, REC_ERR_SYNTAX, "expected 'startpos' or 'sfen', not '%s'", q);
        return;
    }
    if (more && !tok_is(&t, "moves")) { /* a result right after the position */
        end_t e;
        if (usi_result(&t, &e) == 0 && !usi_tok(s, n, &i, &t)) {
            reci_game_set_end(p, e);
            return;
        }
        char q[256];
        reci_quote(q, sizeof q, t.s, t.n, false);
        reci_reject(p, false, 0, ln->no, REC_ERR_SYNTAX, "expected 'moves', not '%s'", q);
        return;
    }
    while (more && usi_tok(s, n, &i, &t)) {
        int32_t no = p->g.n_moves + 1;
        char q[256];
        reci_quote(q, sizeof q, t.s, t.n, false);
        end_t e;
        if (usi_result(&t, &e) == 0) {
            tok_t extra;
            if (usi_tok(s, n, &i, &extra)) {
                reci_reject(p, false, no, ln->no, REC_ERR_SYNTAX, "text after the result '%s'", q);
                return;
            }
            reci_game_set_end(p, e);
            return;
        }
        if (tok_is(&t, "pass") || tok_is(&t, "0000")) {
            reci_reject(p, false, no, ln->no, REC_ERR_UNSUPPORTED, "a pass ('%s') is not supported", q);
            return;
        }
        bool last = i >= n;
        if (!usi_move_shape(t.s, t.n)) {
            bool cut = last && ln->unterminated;
            reci_reject(p, false, no, ln->no, cut ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                        cut ? "the input ends inside move '%s'" : "bad move syntax '%s'", q);
            return;
        }
        move_t m = move_from_usi(p->pos, t.s, t.n);
        if (m == MOVE_NONE) {
            reci_reject(p, false, no, ln->no, REC_ERR_ILLEGAL, "illegal move '%s'", q);
            return;
        }
        if (!reci_game_play(p, m, ln->no)) return;
    }
}

void reci_usi_read(parser_t *p) {
    size_t at = 0;
    int32_t lineno = 0;
    line_t ln;
    while (!p->stop && reci_next_line(p->text, p->len, &at, &lineno, &ln)) {
        const char *s = ln.s;
        size_t n = ln.n;
        reci_trim(&s, &n);
        if (n == 0 || s[0] == '#') continue;
        reci_game_begin(p, ln.no);
        usi_game(p, &ln, s, n);
        reci_game_end(p);
    }
}

char *rec_moves_usi(const move_t *moves, int32_t n) {
    size_t cap = (size_t)(n > 0 ? n : 0) * MOVE_USI_MAX + 1, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        if (i) s[len++] = ' ';
        len += (size_t)move_to_usi(moves[i], s + len);
    }
    s[len] = 0;
    return s;
}
