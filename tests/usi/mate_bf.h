/* mate_bf.h - brute-force mate checks for the usi tests, from movegen alone
 * (no mate1, no usi/mate.c): the reference the mate search is held to. */
#ifndef KOMA_TESTS_USI_MATE_BF_H
#define KOMA_TESTS_USI_MATE_BF_H

#include <stdlib.h>

#include "engine/movegen.h"
#include "engine/sfen.h"

static inline bool bf_mated(pos_t *pos) { return pos_in_check(pos) && movegen_count_legal(pos) == 0; }

static bool bf_and(pos_t *pos, int d);
/* Does the side to move mate within d plies (d odd), by checks only? */
static inline bool bf_or(pos_t *pos, int d) {
    if (d < 1) return false;
    move_list_t *l = malloc(sizeof *l);
    movegen_legal(pos, l);
    bool r = false;
    for (int32_t i = 0; i < l->n && !r; i++) {
        if (!pos_gives_check(pos, l->moves[i])) continue;
        pos_do_move(pos, l->moves[i]);
        r = bf_and(pos, d - 1);
        pos_undo_move(pos);
    }
    free(l);
    return r;
}
/* Is the side to move (in check) mated within d plies whatever it plays? */
static bool bf_and(pos_t *pos, int d) {
    move_list_t *l = malloc(sizeof *l);
    movegen_legal(pos, l);
    bool r = true;
    if (l->n == 0) r = pos_in_check(pos);
    else if (d < 2) r = false;
    for (int32_t i = 0; i < l->n && r && d >= 2; i++) {
        pos_do_move(pos, l->moves[i]);
        r = bf_or(pos, d - 1);
        pos_undo_move(pos);
    }
    free(l);
    return r;
}

/* Is the move list (USI text, space separated) a mate from pos: every move
 * legal, the attacker's every move a check, the last position mated? */
static inline bool bf_verify_line(const pos_t *root, const char *line, int *plies) {
    pos_t *pos = malloc(sizeof *pos);
    pos_copy(pos, root);
    bool ok = true;
    int n = 0;
    const char *p = line;
    while (ok && *p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        move_t m = move_from_usi(pos, p, (size_t)(e - p));
        move_list_t *l = malloc(sizeof *l);
        movegen_legal(pos, l);
        ok = m != MOVE_NONE && movegen_list_contains(l, m) && (n % 2 == 1 || pos_gives_check(pos, m));
        free(l);
        if (ok) pos_do_move(pos, m);
        n++;
        p = e;
    }
    ok = ok && n % 2 == 1 && bf_mated(pos);
    if (plies) *plies = n;
    free(pos);
    return ok;
}

#endif
