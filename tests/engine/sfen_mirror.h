/* sfen_mirror.h - colour-flipped mirrors of SFEN positions and USI moves,
 * built as text, for the engine tests (test_encode, test_mate1, test_rules).
 *
 * The mirror of a position rotates the board 180 degrees and swaps the
 * colours of every piece, swaps the hands and gives the move to the other
 * side: the same game seen from the other chair.
 */
#ifndef KOMA_TESTS_SFEN_MIRROR_H
#define KOMA_TESTS_SFEN_MIRROR_H

#include <stdio.h>
#include <string.h>

#include "engine/sfen.h"

static inline void mirror_swap_case(char *s) {
    for (; *s; s++) {
        if (*s >= 'a' && *s <= 'z')
            *s = (char)(*s - 'a' + 'A');
        else if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
    }
}

/* Mirror of an SFEN (or "startpos") into out. Returns 0 on success, -1 when
 * the board field is not 81 squares. Hands and ply are optional in the input. */
static inline int mirror_sfen(const char *in, char *out, size_t outlen) {
    if (strncmp(in, "startpos", 8) == 0) in = SFEN_STARTPOS;
    char tok[81][3];
    int n = 0;
    const char *p = in;
    while (*p == ' ') p++;
    for (; *p && *p != ' '; p++) {
        if (*p == '/') continue;
        if (n >= 81) return -1;
        if (*p >= '1' && *p <= '9') {
            for (int k = 0; k < *p - '0'; k++) {
                if (n >= 81) return -1;
                strcpy(tok[n++], ".");
            }
        } else if (*p == '+' && p[1]) {
            tok[n][0] = '+', tok[n][1] = p[1], tok[n][2] = 0, n++, p++;
        } else {
            tok[n][0] = *p, tok[n][1] = 0, n++;
        }
    }
    if (n != 81) return -1;
    char board[128];
    int bl = 0;
    for (int rank = 0; rank < 9; rank++) {
        int empty = 0;
        for (int i = 0; i < 9; i++) {
            const char *t = tok[80 - (rank * 9 + i)]; /* reading order reversed = 180 degrees */
            if (t[0] == '.') {
                empty++;
                continue;
            }
            if (empty) board[bl++] = (char)('0' + empty), empty = 0;
            for (const char *q = t; *q; q++) board[bl++] = *q;
        }
        if (empty) board[bl++] = (char)('0' + empty);
        if (rank < 8) board[bl++] = '/';
    }
    board[bl] = 0;
    mirror_swap_case(board);
    char side[8] = "b", hand[128] = "-";
    int ply = 1;
    if (sscanf(p, " %7s %127s %d", side, hand, &ply) < 1) return -1;
    mirror_swap_case(hand);
    snprintf(out, outlen, "%s %c %s %d", board, side[0] == 'b' ? 'w' : 'b', hand, ply);
    return 0;
}

/* USI move text seen from the other side ("7g7f" -> "3c3d", "G*5b" -> "G*5h"). */
static inline void mirror_usi(const char *in, char *out) {
    strcpy(out, in);
    for (int i = 0; i < 4 && out[i] && out[i + 1]; i += 2) {
        if (out[i] >= '1' && out[i] <= '9') {
            out[i] = (char)('9' - (out[i] - '1'));
            out[i + 1] = (char)('i' - (out[i + 1] - 'a'));
        }
    }
}

#endif
