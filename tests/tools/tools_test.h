/* tools_test.h - helpers shared by the tests/tools programs, on top of
 * tests/koma_test.h (checks, t_done, the scratch directory t_dir): running a
 * program, reading a SQLite table back, and a CSA reader that replays records
 * with the engine (independent of usi-match's writer). Header-only; every
 * function is static. */
#ifndef KOMA_TESTS_TOOLS_TEST_H
#define KOMA_TESTS_TOOLS_TEST_H

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/rules.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"

/* ---- running programs ------------------------------------------------------------- */
/* Runs argv (no shell; its stdout and stderr are ours, so ctest logs them)
 * and returns its exit status, or -1 when it could not start. */
static inline int t_run(const char *const *argv) {
    char err[512];
    int status = -1;
    fprintf(stderr, "+");
    for (int i = 0; argv[i]; i++) fprintf(stderr, " '%s'", argv[i]);
    fprintf(stderr, "\n");
    if (compat_run(argv, &status, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return status;
}

/* ---- SQLite, read back directly -------------------------------------------------------- */
/* One integer from a query (or -999 on error). */
static inline long long t_sql_int(const char *db_path, const char *sql) {
    sqlite3 *db = NULL;
    long long v = -999;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
            v = sqlite3_column_int64(s, 0);
        else
            fprintf(stderr, "query '%s': %s\n", sql, sqlite3_errmsg(db));
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return v;
}

/* Calls fn for every row of a query (columns as text). Returns rows, -1 on error. */
typedef void (*t_row_fn)(int ncol, const char *const *cols, void *user);
static inline int t_sql_rows(const char *db_path, const char *sql, t_row_fn fn, void *user) {
    sqlite3 *db = NULL;
    int n = -1;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
            n = 0;
            int rc;
            while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                const char *cols[32];
                int nc = sqlite3_column_count(s);
                if (nc > 32) nc = 32;
                for (int i = 0; i < nc; i++) {
                    const char *c = (const char *)sqlite3_column_text(s, i);
                    cols[i] = c ? c : "";
                }
                fn(nc, cols, user);
                n++;
            }
            if (rc != SQLITE_DONE) n = -1;
        }
        if (n < 0) fprintf(stderr, "query '%s': %s\n", sql, sqlite3_errmsg(db));
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return n;
}

/* ---- CSA records, read back ------------------------------------------------------------ */
typedef struct {
    char black[128], white[128];
    int n_moves;       /* moves replayed */
    int bad_line;      /* line number of the first move that did not replay legally, 0 = none */
    char ending[32];   /* "%TORYO", ... ("" when none) */
    int has_version;   /* "V2.2" first line */
    pos_t pos;      /* the position after the last move */
    char moves_usi[4096 * 6];
} t_csa_t;

static int t_csa_piece(const char *s) {
    static const char *const names[PT_NB] = {"", "FU", "KY", "KE", "GI", "KA", "HI", "KI",
                                             "OU", "TO", "NY", "NK", "NG", "UM", "RY"};
    for (int i = 1; i < PT_NB; i++)
        if (s[0] == names[i][0] && s[1] == names[i][1]) return i;
    return 0;
}

/* Parses a CSA file written with either "PI" or P1..P9 (+ P+/P- hands) and
 * replays its moves; a move is matched against the legal moves by origin,
 * destination and the piece after it. Returns 0 when the file could be
 * read (check bad_line for replay failures), -1 otherwise. */
static inline int t_csa_read(const char *path, t_csa_t *c) {
    char err[256];
    size_t len;
    char *text = compat_read_file(path, &len, err, sizeof err);
    memset(c, 0, sizeof *c);
    if (!text) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    char board[9][9][4]; /* [rank][file 9..1] */
    int have_board = 0;
    char hands[2][64] = {"", ""};
    int lineno = 0, side_set = 0;
    for (char *p = text; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        char *ln = p;
        p = nl ? nl + 1 : NULL;
        lineno++;
        size_t l = strlen(ln);
        if (l && ln[l - 1] == '\r') ln[--l] = 0;
        if (lineno == 1 && strcmp(ln, "V2.2") == 0) c->has_version = 1;
        else if (!strncmp(ln, "N+", 2)) snprintf(c->black, sizeof c->black, "%s", ln + 2);
        else if (!strncmp(ln, "N-", 2)) snprintf(c->white, sizeof c->white, "%s", ln + 2);
        else if (!strcmp(ln, "PI")) {
            pos_set_startpos(&c->pos);
            have_board = 2;
        } else if (ln[0] == 'P' && ln[1] >= '1' && ln[1] <= '9' && l >= 29) {
            int r = ln[1] - '1';
            for (int f = 0; f < 9; f++) memcpy(board[r][f], ln + 2 + 3 * f, 3), board[r][f][3] = 0;
            have_board = 1;
        } else if (ln[0] == 'P' && (ln[1] == '+' || ln[1] == '-')) {
            int k = ln[1] == '-';
            for (const char *q = ln + 2; q[0] && q[1] && q[2] && q[3]; q += 4) {
                int pt = t_csa_piece(q + 2);
                static const char up[] = " PLNSBRGK";
                if (q[0] == '0' && q[1] == '0' && pt >= 1 && pt <= 7) {
                    size_t hl = strlen(hands[k]);
                    hands[k][hl] = k ? (char)(up[pt] + 32) : up[pt];
                    hands[k][hl + 1] = 0;
                }
            }
        } else if ((ln[0] == '+' || ln[0] == '-') && l == 1 && !side_set) {
            side_set = 1;
            if (have_board == 1) { /* build an SFEN from the board lines */
                char sfen[256], *o = sfen;
                for (int r = 0; r < 9; r++) {
                    int empty = 0;
                    for (int f = 0; f < 9; f++) {
                        const char *cell = board[r][f];
                        int pt = t_csa_piece(cell + 1);
                        if (cell[0] != '+' && cell[0] != '-') {
                            empty++;
                            continue;
                        }
                        if (empty) o += sprintf(o, "%d", empty), empty = 0;
                        static const char *const sf[PT_NB] = {"",  "P",  "L",  "N",  "S",  "B",  "R", "G",
                                                              "K", "+P", "+L", "+N", "+S", "+B", "+R"};
                        for (const char *q = sf[pt]; *q; q++)
                            *o++ = (cell[0] == '-' && *q != '+') ? (char)(*q + 32) : *q;
                    }
                    if (empty) o += sprintf(o, "%d", empty);
                    if (r < 8) *o++ = '/';
                }
                char hand[160];
                snprintf(hand, sizeof hand, "%s%s", hands[0], hands[1]);
                sprintf(o, " %c %s 1", ln[0] == '+' ? 'b' : 'w', hand[0] ? hand : "-");
                if (sfen_parse_cstr(&c->pos, sfen, err, sizeof err) != SFEN_OK) {
                    fprintf(stderr, "%s: board %s: %s\n", path, sfen, err);
                    free(text);
                    return -1;
                }
            }
        } else if ((ln[0] == '+' || ln[0] == '-') && l == 7) {
            if (c->bad_line) continue;
            int from = (ln[1] - '0') * 10 + (ln[2] - '0'), to = (ln[3] - '0') * 10 + (ln[4] - '0');
            int pt = t_csa_piece(ln + 5);
            color_t side = ln[0] == '+' ? COLOR_BLACK : COLOR_WHITE;
            move_list_t ml;
            movegen_legal(&c->pos, &ml);
            move_t found = MOVE_NONE;
            for (int i = 0; i < ml.n; i++) {
                move_t m = ml.moves[i];
                int mto = (sq_file(move_to(m)) + 1) * 10 + sq_rank(move_to(m)) + 1;
                int mfrom = move_is_drop(m) ? 0 : (sq_file(move_from(m)) + 1) * 10 + sq_rank(move_from(m)) + 1;
                if (mto == to && mfrom == from && piece_type(pos_moved_piece_after(&c->pos, m)) == pt) found = m;
            }
            if (found == MOVE_NONE || side != pos_side_to_move(&c->pos)) {
                c->bad_line = lineno;
                continue;
            }
            char u[8];
            move_to_usi(found, u);
            size_t ml_ = strlen(c->moves_usi);
            if (ml_ + 8 < sizeof c->moves_usi) sprintf(c->moves_usi + ml_, "%s%s", ml_ ? " " : "", u);
            pos_do_move(&c->pos, found);
            c->n_moves++;
        } else if (ln[0] == '%') {
            snprintf(c->ending, sizeof c->ending, "%s", ln);
        }
    }
    free(text);
    return have_board ? 0 : -1;
}

#endif
