/* test_record.c - data/record.c: the CSA, KIF and USI readers on the
 * hand-written records in tests/data/records/ (moves against expected USI
 * text, start positions, results and reasons, names, ratings), every ending
 * of each format, Shift_JIS = UTF-8, malformed records rejected with the
 * right kind of error naming the file, game, move and line, every prefix of
 * every fixture (no over-read: run it under ASan), random corruptions (every
 * game read back replays legally), and format detection. */
#include "compat/compat.h"
#include "data/record.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a == b as strings; both printed when not */
#define CHECK_STR(a, b)                                                                                  \
    do {                                                                                                 \
        const char *a_ = (a), *b_ = (b);                                                                 \
        if (!t_judge(strcmp(a_, b_) == 0))                                                               \
            fprintf(stderr, "%s:%d: \"%s\"\n    != \"%s\"\n", __FILE__, __LINE__, a_, b_);                 \
    } while (0)

#define FIX(name) KOMA_SOURCE_DIR "/tests/data/records/" name

static pos_t g_pos;

static int contains(const char *d, size_t len, const char *what) {
    size_t k = strlen(what);
    for (size_t i = 0; i + k <= len; i++)
        if (memcmp(d + i, what, k) == 0) return 1;
    return 0;
}

static rec_list_t parse_file(const char *path, rec_format_t fmt) {
    size_t len = 0;
    char err[512];
    char *data = compat_read_file(path, &len, err, sizeof err);
    if (!data) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(data);
    rec_list_t l;
    KOMA_ASSERT(rec_parse_list(path, data, len, fmt, &l) == 0);
    free(data);
    return l;
}

static rec_list_t parse_text(const char *name, const char *text, rec_format_t fmt) {
    rec_list_t l;
    KOMA_ASSERT(rec_parse_list(name, text, strlen(text), fmt, &l) == 0);
    return l;
}

static char *moves_of(const rec_game_t *g) {
    char *s = rec_moves_usi(g->moves, g->n_moves);
    KOMA_ASSERT(s);
    return s;
}

/* One game with these moves, result and reason. */
static void check_game(const rec_game_t *g, const char *start, const char *moves, int result, db_reason_t reason) {
    char *m = moves_of(g);
    CHECK_STR(g->start_sfen, start);
    CHECK_STR(m, moves);
    CHECK(g->result == result);
    CHECK(g->reason == reason);
    if (g->result != result || g->reason != reason)
        fprintf(stderr, "    game %d: result %d reason %s, expected %d %s\n", (int)g->index, (int)g->result,
                db_reason_name(g->reason), result, db_reason_name(reason));
    free(m);
}

/* Exactly one reject, with this code, game, move, line, naming the input. */
static void check_reject(const rec_list_t *l, const char *name, rec_error_t code, int game, int move, int line) {
    CHECK(l->n_rejects == 1);
    if (l->n_rejects != 1) {
        fprintf(stderr, "    %s: %d rejects, %d games\n", name, (int)l->n_rejects, (int)l->n_games);
        for (int32_t i = 0; i < l->n_rejects; i++) fprintf(stderr, "    %s\n", l->rejects[i].msg);
        return;
    }
    const rec_reject_t *r = &l->rejects[0];
    CHECK(r->code == code);
    CHECK(r->game == game);
    CHECK(r->move == move);
    CHECK(r->line == line);
    CHECK(strncmp(r->msg, name, strlen(name)) == 0);
    char want[64];
    if (game > 0) {
        snprintf(want, sizeof want, "game %d: ", game);
        CHECK(strstr(r->msg, want) != NULL);
    }
    if (move > 0) {
        snprintf(want, sizeof want, "move %d ", move);
        CHECK(strstr(r->msg, want) != NULL);
    }
    if (r->code != code || r->game != game || r->move != move || r->line != line)
        fprintf(stderr, "    got [%s] game %d move %d line %d: %s\n", rec_error_name(r->code), (int)r->game, (int)r->move,
                (int)r->line, r->msg);
}

/* ---- the fixtures ------------------------------------------------------------------------ */
static void test_csa_game(void) {
    rec_list_t l = parse_file(FIX("game1.csa"), REC_FORMAT_AUTO);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1) {
        const rec_game_t *g = &l.games[0];
        /* bishop trade with a promotion, drops on both sides, a promoting check; Black resigns */
        check_game(g, "startpos", "7g7f 3c3d 8h2b+ 3a2b B*4e B*5e 4e3d 5e7g+", DB_RESULT_WHITE_WIN, DB_REASON_RESIGN);
        CHECK_STR(g->black, "Sente Bot");
        CHECK_STR(g->white, "Gote Bot");
        CHECK(g->rating[0] == 2510.5 && g->rating[1] == 2480.0);
        CHECK(g->index == 1 && g->line == 1);
    }
    rec_list_free(&l);
}

static void test_kif_game(void) {
    const char *files[2] = {FIX("game1.kif"), FIX("game1_sjis.kif")};
    for (int i = 0; i < 2; i++) {
        rec_list_t l = parse_file(files[i], REC_FORMAT_AUTO);
        CHECK(l.n_games == 1 && l.n_rejects == 0);
        if (l.n_games == 1) {
            const rec_game_t *g = &l.games[0];
            /* 同 twice, 打 twice, 成 and 不成; White resigns at move 10; the variation is not read */
            check_game(g, "startpos", "7g7f 3c3d 8h2b+ 3a2b B*4e B*5e 4e6c 5e7g+ 8i7g", DB_RESULT_BLACK_WIN,
                       DB_REASON_RESIGN);
            CHECK_STR(g->black, "Sente Bot");
            CHECK_STR(g->white, "Gote Bot");
            CHECK(isnan(g->rating[0]) && isnan(g->rating[1]));
        }
        for (int32_t k = 0; k < l.n_rejects; k++) fprintf(stderr, "    %s\n", l.rejects[k].msg);
        rec_list_free(&l);
    }
    /* The Shift_JIS fixture is really Shift_JIS (not UTF-8 by accident). */
    size_t len = 0;
    char err[256];
    char *d = compat_read_file(FIX("game1_sjis.kif"), &len, err, sizeof err);
    KOMA_ASSERT(d);
    CHECK(contains(d, len, "\x95\xE0"));      /* 歩 in Shift_JIS */
    CHECK(!contains(d, len, "\xE6\xAD\xA9")); /* 歩 in UTF-8 */
    free(d);
}

static void test_multi_csa(void) {
    const char *name = FIX("multi.csa");
    rec_list_t l = parse_file(name, REC_FORMAT_AUTO);
    CHECK(l.n_games == 4);
    if (l.n_games == 4) {
        check_game(&l.games[0], "startpos", "2g2f 8c8d 2f2e 8d8e", DB_RESULT_WHITE_WIN, DB_REASON_RESIGN);
        CHECK_STR(l.games[0].black, "A");
        CHECK(l.games[0].index == 1);
        check_game(&l.games[1], "startpos", "2h3h 8b7b 3h2h 7b8b 2h3h 8b7b 3h2h 7b8b 2h3h 8b7b 3h2h 7b8b", DB_RESULT_DRAW,
                   DB_REASON_SENNICHITE);
        CHECK(l.games[1].index == 2 && l.games[1].line == 13);
        /* game 3 is rejected; game 4's illegal move is explained by %ILLEGAL_MOVE */
        check_game(&l.games[2], "startpos", "7g7f 3c3d", DB_RESULT_WHITE_WIN, DB_REASON_ILLEGAL_MOVE);
        CHECK(l.games[2].index == 4);
        check_game(&l.games[3], "startpos", "7g7f", DB_RESULT_BLACK_WIN, DB_REASON_TIME);
        CHECK(l.games[3].index == 5);
    }
    check_reject(&l, name, REC_ERR_ILLEGAL, 3, 3, 37);
    if (l.n_rejects == 1) CHECK(strstr(l.rejects[0].msg, "+7674FU") != NULL);
    rec_list_free(&l);
}

static void test_setups(void) {
    /* PI with removals: a two-piece handicap, White first */
    rec_list_t l = parse_file(FIX("pi.csa"), REC_FORMAT_AUTO);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1)
        check_game(&l.games[0], "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1", "3c3d 7g7f 4a3b",
                   DB_RESULT_DRAW, DB_REASON_ABORT);
    rec_list_free(&l);
    /* P1..P9 rows, P+00KI, P-00AL; %TSUMI on a real mate */
    l = parse_file(FIX("board.csa"), REC_FORMAT_AUTO);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1)
        check_game(&l.games[0], "4k4/9/4G4/9/9/9/9/9/4K4 b G2r2b2g4s4n4l18p 1", "G*5b", DB_RESULT_BLACK_WIN,
                   DB_REASON_CHECKMATE);
    rec_list_free(&l);
    /* KIF board diagram, hands, 後手番 */
    l = parse_file(FIX("board.kif"), REC_FORMAT_AUTO);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1)
        check_game(&l.games[0], "lnsgkgsnl/1r7/1ppppppp1/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w B2P 1", "3c3d 8h2b+ 3a2b",
                   DB_RESULT_DRAW, DB_REASON_ABORT);
    rec_list_free(&l);
    /* KIF handicap header */
    l = parse_text("h.kif", "手合割：香落ち\n   1 ３四歩(33)\n   2 ７六歩(77)\n   3 投了\n", REC_FORMAT_AUTO);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1)
        check_game(&l.games[0], "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1", "3c3d 7g7f",
                   DB_RESULT_BLACK_WIN, DB_REASON_RESIGN);
    rec_list_free(&l);
}

static void test_usi_file(void) {
    rec_list_t l = parse_file(FIX("games.usi"), REC_FORMAT_AUTO);
    CHECK(l.n_games == 4 && l.n_rejects == 0);
    if (l.n_games == 4) {
        check_game(&l.games[0], "startpos", "7g7f 3c3d 8h2b+ 3a2b B*4e B*5e 4e6c 5e7g+ 8i7g", DB_RESULT_BLACK_WIN,
                   DB_REASON_RESIGN);
        CHECK(l.games[0].line == 2);
        check_game(&l.games[1], "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1", "3c3d 7g7f",
                   DB_RESULT_DRAW, DB_REASON_ABORT);
        /* no result word: the rules see the fourfold repetition */
        check_game(&l.games[2], "startpos", "2h3h 8b7b 3h2h 7b8b 2h3h 8b7b 3h2h 7b8b 2h3h 8b7b 3h2h 7b8b",
                   DB_RESULT_DRAW, DB_REASON_SENNICHITE);
        check_game(&l.games[3], "4k4/9/4G4/9/9/9/9/9/4K4 b G 1", "G*5b", DB_RESULT_BLACK_WIN, DB_REASON_CHECKMATE);
    }
    rec_list_free(&l);
    /* The same game in KIF and USI reads to the same moves. */
    rec_list_t a = parse_file(FIX("game1.kif"), REC_FORMAT_AUTO), b = parse_file(FIX("games.usi"), REC_FORMAT_AUTO);
    CHECK(a.n_games == 1 && b.n_games >= 1);
    if (a.n_games == 1 && b.n_games >= 1) {
        char *x = moves_of(&a.games[0]), *y = moves_of(&b.games[0]);
        CHECK_STR(x, y);
        free(x);
        free(y);
    }
    rec_list_free(&a);
    rec_list_free(&b);
}

/* ---- endings ---------------------------------------------------------------------------- */
typedef struct {
    const char *text;
    int result;
    db_reason_t reason;
} ending_t;

static void test_endings(void) {
    /* After 7g7f it is White's move: the ending concerns White. */
    static const ending_t CSA[] = {
        {"%TORYO", 1, DB_REASON_RESIGN},           {"%CHUDAN", 0, DB_REASON_ABORT},
        {"%TIME_UP", 1, DB_REASON_TIME},           {"%ILLEGAL_MOVE", 1, DB_REASON_ILLEGAL_MOVE},
        {"%+ILLEGAL_ACTION", -1, DB_REASON_ILLEGAL_MOVE}, {"%-ILLEGAL_ACTION", 1, DB_REASON_ILLEGAL_MOVE},
        {"%JISHOGI", 0, DB_REASON_DECLARATION},    {"%KACHI", -1, DB_REASON_DECLARATION},
        {"%HIKIWAKE", 0, DB_REASON_DECLARATION},   {"%MAX_MOVES", 0, DB_REASON_MAX_PLY},
        {"%TSUMI", 1, DB_REASON_RESIGN}, /* claimed, but White has moves: a resignation */
        {"%FUZUMI", 0, DB_REASON_ABORT},           {"%SENNICHITE", 0, DB_REASON_SENNICHITE},
        {"%MATTA", 0, DB_REASON_ABORT},            {"%ERROR", 0, DB_REASON_ABORT},
    };
    for (size_t i = 0; i < sizeof CSA / sizeof CSA[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "V2.2\nPI\n+\n+7776FU\n%s\n", CSA[i].text);
        rec_list_t l = parse_text("e.csa", text, REC_FORMAT_AUTO);
        CHECK(l.n_games == 1 && l.n_rejects == 0);
        if (l.n_games == 1) check_game(&l.games[0], "startpos", "7g7f", CSA[i].result, CSA[i].reason);
        rec_list_free(&l);
    }
    static const ending_t KIF[] = {
        {"投了", 1, DB_REASON_RESIGN},           {"詰み", 1, DB_REASON_RESIGN},
        {"千日手", 0, DB_REASON_SENNICHITE},     {"持将棋", 0, DB_REASON_DECLARATION},
        {"入玉勝ち", -1, DB_REASON_DECLARATION}, {"宣言勝ち", -1, DB_REASON_DECLARATION},
        {"中断", 0, DB_REASON_ABORT},            {"切れ負け", 1, DB_REASON_TIME},
        {"時間切れ", 1, DB_REASON_TIME},         {"反則負け", 1, DB_REASON_ILLEGAL_MOVE},
        {"反則勝ち", -1, DB_REASON_ILLEGAL_MOVE}, {"不詰", 0, DB_REASON_ABORT},
    };
    for (size_t i = 0; i < sizeof KIF / sizeof KIF[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "手合割：平手\n   1 ７六歩(77)   ( 0:01/00:00:01)\n   2 %s   ( 0:01/00:00:01)\n",
                 KIF[i].text);
        rec_list_t l = parse_text("e.kif", text, REC_FORMAT_AUTO);
        CHECK(l.n_games == 1 && l.n_rejects == 0);
        if (l.n_games == 1) check_game(&l.games[0], "startpos", "7g7f", KIF[i].result, KIF[i].reason);
        rec_list_free(&l);
    }
    static const ending_t USI[] = {
        {"resign", 1, DB_REASON_RESIGN},  {"win", -1, DB_REASON_DECLARATION}, {"max_ply", 0, DB_REASON_MAX_PLY},
        {"time", 1, DB_REASON_TIME},      {"abort", 0, DB_REASON_ABORT},      {"illegal_move", 1, DB_REASON_ILLEGAL_MOVE},
        {"", 0, DB_REASON_ABORT},
    };
    for (size_t i = 0; i < sizeof USI / sizeof USI[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "startpos moves 7g7f %s\n", USI[i].text);
        rec_list_t l = parse_text("e.usi", text, REC_FORMAT_AUTO);
        CHECK(l.n_games == 1 && l.n_rejects == 0);
        if (l.n_games == 1) check_game(&l.games[0], "startpos", "7g7f", USI[i].result, USI[i].reason);
        rec_list_free(&l);
    }
    /* A record that stops on a mate without saying so: the rules see it. */
    rec_list_t l = parse_text("m.usi", "sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1 moves G*5b\n", REC_FORMAT_USI);
    CHECK(l.n_games == 1);
    if (l.n_games == 1) CHECK(l.games[0].reason == DB_REASON_CHECKMATE && l.games[0].result == DB_RESULT_BLACK_WIN);
    rec_list_free(&l);
    /* A CSA file cut at a line boundary is an unfinished game, kept as aborted. */
    l = parse_text("cut.csa", "PI\n+\n+7776FU\n-3334FU\n", REC_FORMAT_CSA);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1) check_game(&l.games[0], "startpos", "7g7f 3c3d", DB_RESULT_DRAW, DB_REASON_ABORT);
    rec_list_free(&l);
}

/* ---- notation details ---------------------------------------------------------------------- */
static void test_notation(void) {
    /* CSA: several statements on a line, comments after a comma, CRLF, no PI (the start position) */
    rec_list_t l = parse_text("s.csa", "V2.2\r\n+\r\n+7776FU,T1,-3334FU,'c\r\n+8822UM,T2\r\n%TORYO\r\n", REC_FORMAT_CSA);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1) check_game(&l.games[0], "startpos", "7g7f 3c3d 8h2b+", DB_RESULT_BLACK_WIN, DB_REASON_RESIGN);
    rec_list_free(&l);
    /* CSA as floodgate writes it: P1..P9, empty P+/P- hand lines, V2, $ lines, T times */
    l = parse_text("f.csa",
                   "V2\nN+a\nN-b\n$EVENT:x\n$START_TIME:2024/01/01 00:00:00\nP1-KY-KE-GI-KI-OU-KI-GI-KE-KY\n"
                   "P2 * -HI *  *  *  *  * -KA * \nP3-FU-FU-FU-FU-FU-FU-FU-FU-FU\nP4 *  *  *  *  *  *  *  *  * \n"
                   "P5 *  *  *  *  *  *  *  *  * \nP6 *  *  *  *  *  *  *  *  * \nP7+FU+FU+FU+FU+FU+FU+FU+FU+FU\n"
                   "P8 * +KA *  *  *  *  * +HI * \nP9+KY+KE+GI+KI+OU+KI+GI+KE+KY\nP+\nP-\n+\n+2726FU\nT1\n-8384FU\nT0\n"
                   "%TORYO\n'P1 rows again in a comment\n",
                   REC_FORMAT_AUTO);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1) check_game(&l.games[0], "startpos", "2g2f 8c8d", DB_RESULT_WHITE_WIN, DB_REASON_RESIGN);
    rec_list_free(&l);
    /* "P+"/"P-" with no pieces before any board: still the start position */
    l = parse_text("g.csa", "P+\nP-\n+\n+7776FU\n", REC_FORMAT_CSA);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    rec_list_free(&l);
    /* CSA: a promotion is the piece changing; keeping it is not promoting */
    l = parse_text("p.csa", "PI\n+\n+7776FU\n-3334FU\n+8822KA\n%CHUDAN\n", REC_FORMAT_CSA);
    CHECK(l.n_games == 1);
    if (l.n_games == 1) check_game(&l.games[0], "startpos", "7g7f 3c3d 8h2b", DB_RESULT_DRAW, DB_REASON_ABORT);
    rec_list_free(&l);
    /* KIF without origins (a drop without 打, a move without (77)) when only one move fits */
    l = parse_text("o.kif", "手合割：平手\n1 ７六歩\n2 ３四歩\n3 ２二角成\n4 同　銀\n5 ４五角\n", REC_FORMAT_KIF);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1) check_game(&l.games[0], "startpos", "7g7f 3c3d 8h2b+ 3a2b B*4e", DB_RESULT_DRAW, DB_REASON_ABORT);
    rec_list_free(&l);
    /* KIF: ASCII digits, ▲△ marks, promoted piece names (成銀), 不成 */
    l = parse_text("n.kif",
                   "手合割：平手\n1 ▲7六歩(77)\n2 △３四歩(33)\n3 ▲２二角不成(88)\n4 △３二金(41)\n5 ▲１一角成(22)\n",
                   REC_FORMAT_KIF);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    if (l.n_games == 1) check_game(&l.games[0], "startpos", "7g7f 3c3d 8h2b 4a3b 2b1a+", DB_RESULT_DRAW, DB_REASON_ABORT);
    rec_list_free(&l);
    /* KIF with a UTF-8 BOM and CRLF */
    l = parse_text("b.kif", "\xEF\xBB\xBF手合割：平手\r\n   1 ７六歩(77)\r\n   2 投了\r\n", REC_FORMAT_AUTO);
    CHECK(l.n_games == 1 && l.n_rejects == 0);
    rec_list_free(&l);
    /* USI: "position" optional; blank lines and # comments skipped; game index counts games */
    l = parse_text("u.usi", "\n# x\nposition startpos moves 7g7f\n\nstartpos\nsfen " SFEN_STARTPOS " moves 2g2f\n",
                   REC_FORMAT_USI);
    CHECK(l.n_games == 3 && l.n_rejects == 0);
    if (l.n_games == 3) {
        CHECK(l.games[0].index == 1 && l.games[0].line == 3);
        CHECK(l.games[1].n_moves == 0 && l.games[1].index == 2);
        check_game(&l.games[2], "startpos", "2g2f", DB_RESULT_DRAW, DB_REASON_ABORT);
    }
    rec_list_free(&l);
}

/* ---- malformed records ---------------------------------------------------------------------- */
static void keep_reject(void *user, const rec_reject_t *r) { *(rec_reject_t *)user = *r; }

typedef struct {
    const char *name, *text;
    rec_error_t code;
    int game, move, line;
    int games; /* games still read */
} bad_t;

static void test_malformed(void) {
    static const bad_t BAD[] = {
        /* CSA */
        {"syntax.csa", "V2.2\nPI\n+\n+7776FU\n-33X4FU\n%TORYO\n", REC_ERR_SYNTAX, 1, 2, 5, 0},
        {"illegal.csa", "PI\n+\n+7775FU\n%TORYO\n", REC_ERR_ILLEGAL, 1, 1, 3, 0},
        {"side.csa", "PI\n+\n-3334FU\n", REC_ERR_ILLEGAL, 1, 1, 3, 0},
        {"piece.csa", "PI\n+\n+7776KI\n", REC_ERR_ILLEGAL, 1, 1, 3, 0},
        {"hand.csa", "PI\n+\n+0055KA\n", REC_ERR_ILLEGAL, 1, 1, 3, 0},
        {"board.csa",
         "P1-KY-KE-GI-KI-OU-KI-GI-KE-KY\nP2 * -HI *  *  *  *  * -KA * \nP3-FU-FU-FU-XX-FU-FU-FU-FU-FU\n"
         "P4 *  *  *  *  *  *  *  *  * \nP5 *  *  *  *  *  *  *  *  * \nP6 *  *  *  *  *  *  *  *  * \n"
         "P7+FU+FU+FU+FU+FU+FU+FU+FU+FU\nP8 * +KA *  *  *  *  * +HI * \nP9+KY+KE+GI+KI+OU+KI+GI+KE+KY\n+\n+7776FU\n",
         REC_ERR_POSITION, 1, 0, 3, 0},
        {"rows.csa", "P1 *  *  *  * -OU *  *  *  * \nP9 *  *  *  * +OU *  *  *  * \n+\n+5958OU\n", REC_ERR_POSITION, 1, 0, 4,
         0},
        {"kings.csa", "P+59OU\n+\n+5958OU\n", REC_ERR_POSITION, 1, 0, 3, 0},
        {"pi.csa", "PI55KA\n+\n", REC_ERR_POSITION, 1, 0, 1, 0},
        {"stmt.csa", "PI\n+\n+7776FU\nX\n", REC_ERR_SYNTAX, 1, 2, 4, 0},
        {"after.csa", "PI\n+\n+7776FU\n%TORYO\n-3334FU\n", REC_ERR_SYNTAX, 1, 2, 5, 0},
        {"ending.csa", "PI\n+\n+7776FU\n%RESIGN\n", REC_ERR_SYNTAX, 1, 2, 4, 0},
        {"cut.csa", "PI\n+\n+7776FU\n-33", REC_ERR_TRUNCATED, 1, 2, 4, 0},
        {"cutboard.csa", "P1-KY-KE-GI-KI-OU-KI-GI-KE-KY\nP2 * -HI *  *  *  *  * -KA * \nP3-FU-FU-F", REC_ERR_TRUNCATED, 1, 0,
         3, 0},
        {"second.csa", "PI\n+\n+7776FU\n%TORYO\n/\nPI\n+\n+7776FU\n-3334FU\n+7675FU\n+2726FU\n", REC_ERR_ILLEGAL, 2, 4, 11,
         1},
        /* KIF */
        {"syntax.kif", "手合割：平手\n   1 ７六歩(77)\n   2 ３X歩(33)\n", REC_ERR_SYNTAX, 1, 2, 3, 0},
        {"illegal.kif", "手合割：平手\n   1 ７五歩(77)\n", REC_ERR_ILLEGAL, 1, 1, 2, 0},
        {"origin.kif", "手合割：平手\n   1 ７六金(77)\n", REC_ERR_ILLEGAL, 1, 1, 2, 0},
        {"dou.kif", "手合割：平手\n   1 同　歩(77)\n", REC_ERR_SYNTAX, 1, 1, 2, 0},
        {"number.kif", "手合割：平手\n   1 ７六歩(77)\n   3 ３四歩(33)\n", REC_ERR_SYNTAX, 1, 2, 3, 0},
        {"after.kif", "手合割：平手\n   1 ７六歩(77)\n   2 投了\n   3 ２六歩(27)\n", REC_ERR_SYNTAX, 1, 2, 4, 0},
        {"cut.kif", "手合割：平手\n   1 ７六歩(77)\n   2 ３四歩(3", REC_ERR_TRUNCATED, 1, 2, 3, 0},
        {"handicap.kif", "手合割：五枚落ち\n   1 ３四歩(33)\n", REC_ERR_UNSUPPORTED, 1, 0, 1, 0},
        {"pass.kif", "手合割：平手\n   1 パス\n", REC_ERR_UNSUPPORTED, 1, 1, 2, 0},
        {"ki2.ki2", "手合割：平手\n先手：A\n▲７六歩　△３四歩　▲２六歩\n", REC_ERR_UNSUPPORTED, 1, 0, 3, 0},
        {"board.kif",
         "|v香v桂v銀v金v玉v金v銀v桂v香|一\n| ・v飛 ・ ・ ・ ・ ・v角 ・|二\n|v歩v歩v歩v歩v歩v歩v歩v歩X|三\n1 ７六歩(77)\n",
         REC_ERR_POSITION, 1, 0, 3, 0},
        {"rows.kif", "|v香v桂v銀v金v玉v金v銀v桂v香|一\n   1 ７六歩(77)\n", REC_ERR_POSITION, 1, 0, 1, 0},
        {"hand.kif", "先手の持駒：王\n", REC_ERR_POSITION, 1, 0, 1, 0},
        {"euc.kif", "#KIF version=2.0 encoding=EUC-JP\n", REC_ERR_ENCODING, 0, 0, 1, 0},
        {"bytes.kif", "\x80\x80\x80 \xFF\xFE\n", REC_ERR_ENCODING, 0, 0, 0, 0},
        {"utf16.kif", "\xFF\xFE" "a", REC_ERR_ENCODING, 0, 0, 0, 0},
        /* USI */
        {"illegal.usi", "startpos moves 7g7f 3c3d 7f7d\n", REC_ERR_ILLEGAL, 1, 3, 1, 0},
        {"syntax.usi", "startpos moves 7g7f 3c3d 7f7z\n", REC_ERR_SYNTAX, 1, 3, 1, 0},
        {"cut.usi", "startpos moves 7g7f\nstartpos moves 7g7f 3c3", REC_ERR_TRUNCATED, 2, 2, 2, 1},
        {"sfen.usi", "sfen lnsgkgsnl/9/ppppppppp b - 1 moves 7g7f\n", REC_ERR_POSITION, 1, 0, 1, 0},
        {"head.usi", "position startpos 7g7f\n", REC_ERR_SYNTAX, 1, 0, 1, 0},
        {"pass.usi", "startpos moves 7g7f pass\n", REC_ERR_UNSUPPORTED, 1, 2, 1, 0},
        {"tail.usi", "startpos moves 7g7f resign 3c3d\n", REC_ERR_SYNTAX, 1, 2, 1, 0},
        /* any */
        {"empty.csa", "", REC_ERR_FORMAT, 0, 0, 0, 0},
        {"comments.csa", "' only a comment\nV2.2\n", REC_ERR_FORMAT, 0, 0, 0, 0},
        {"hello.txt", "hello world\n", REC_ERR_FORMAT, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const bad_t *b = &BAD[i];
        rec_list_t l = parse_text(b->name, b->text, REC_FORMAT_AUTO);
        CHECK(l.n_games == b->games);
        if (l.n_games != b->games) fprintf(stderr, "    %s: %d games\n", b->name, (int)l.n_games);
        check_reject(&l, b->name, b->code, b->game, b->move, b->line);
        rec_list_free(&l);
    }
    /* A NUL byte early on: refused as a whole (UTF-16, binary) */
    rec_list_t l;
    CHECK(rec_parse_list("nul.csa", "PI\n\0\n", 5, REC_FORMAT_CSA, &l) == 0);
    check_reject(&l, "nul.csa", REC_ERR_ENCODING, 0, 0, 0);
    rec_list_free(&l);
    /* Too long: 2048 legal moves (rook shuffles) in one game */
    size_t cap = 16 + 2048 * 5 + 16;
    char *text = malloc(cap);
    KOMA_ASSERT(text);
    size_t n = (size_t)snprintf(text, cap, "startpos moves");
    static const char *const CYCLE[4] = {" 2h3h", " 8b7b", " 3h2h", " 7b8b"};
    for (int k = 0; k < 2048; k++) n += (size_t)snprintf(text + n, cap - n, "%s", CYCLE[k % 4]);
    l = parse_text("long.usi", text, REC_FORMAT_USI);
    check_reject(&l, "long.usi", REC_ERR_TOO_LONG, 1, 2048, 1);
    rec_list_free(&l);
    text[n - 5] = 0; /* 2047 moves: fine */
    l = parse_text("long.usi", text, REC_FORMAT_USI);
    CHECK(l.n_games == 1 && l.n_rejects == 0 && l.n_games == 1 && l.games[0].n_moves == REC_MOVES_MAX);
    rec_list_free(&l);
    free(text);
    /* An unreadable file */
    rec_reject_t got = {0};
    rec_sink_t sink = {NULL, keep_reject, &got};
    CHECK(rec_parse_file(FIX("no-such-file.csa"), REC_FORMAT_AUTO, &sink) == 0);
    CHECK(got.code == REC_ERR_IO && strstr(got.msg, "no-such-file.csa") != NULL);
}

/* ---- robustness ----------------------------------------------------------------------------- */
/* Every game replays legally from its start; every reject is well formed. */
static int check_list_sane(const rec_list_t *l, const char *name) {
    int bad = 0;
    for (int32_t i = 0; i < l->n_games; i++) {
        const rec_game_t *g = &l->games[i];
        char err[256];
        if (sfen_parse_cstr(&g_pos, g->start_sfen, err, sizeof err) != SFEN_OK) {
            fprintf(stderr, "%s: game %d: start '%s' does not read: %s\n", name, (int)g->index, g->start_sfen, err);
            bad++;
            continue;
        }
        if (g->n_moves < 0 || g->n_moves > REC_MOVES_MAX) bad++;
        for (int32_t k = 0; k < g->n_moves && k < REC_MOVES_MAX; k++) {
            if (!pos_is_valid_move(&g_pos, g->moves[k])) {
                fprintf(stderr, "%s: game %d: move %d is not legal\n", name, (int)g->index, (int)k + 1);
                bad++;
                break;
            }
            pos_do_move(&g_pos, g->moves[k]);
        }
        if (g->result < -1 || g->result > 1 || (unsigned)g->reason >= DB_REASON_NB) bad++;
    }
    for (int32_t i = 0; i < l->n_rejects; i++) {
        const rec_reject_t *r = &l->rejects[i];
        if (!memchr(r->msg, 0, sizeof r->msg) || strncmp(r->msg, name, strlen(name)) != 0 || r->code <= REC_ERR_NONE ||
            r->code >= REC_ERR_NB)
            bad++;
    }
    if (l->n_games + l->n_rejects == 0) bad++; /* something is always said */
    return bad;
}

static const char *const FIXTURES[] = {"game1.csa", "game1.kif", "game1_sjis.kif", "multi.csa",
                                       "pi.csa",    "board.csa", "board.kif",      "games.usi"};

static void test_prefixes_and_noise(void) {
    int bad = 0;
    int64_t runs = 0;
    uint64_t rng = 12345;
    for (size_t f = 0; f < sizeof FIXTURES / sizeof FIXTURES[0]; f++) {
        char path[512], err[256];
        snprintf(path, sizeof path, "%s/tests/data/records/%s", KOMA_SOURCE_DIR, FIXTURES[f]);
        size_t len = 0;
        char *full = compat_read_file(path, &len, err, sizeof err);
        KOMA_ASSERT(full);
        /* every prefix, in an exact-size buffer (ASan sees any read past it), in every format */
        for (size_t k = 0; k <= len; k++) {
            char *d = malloc(k ? k : 1);
            KOMA_ASSERT(d);
            memcpy(d, full, k);
            for (int fmt = 0; fmt < REC_FORMAT_NB; fmt++) {
                rec_list_t l;
                KOMA_ASSERT(rec_parse_list(FIXTURES[f], d, k, (rec_format_t)fmt, &l) >= 0);
                bad += check_list_sane(&l, FIXTURES[f]);
                rec_list_free(&l);
                runs++;
            }
            free(d);
        }
        /* random corruption: byte changes, deletions, duplicated chunks */
        for (int it = 0; it < 300; it++) {
            char *d = malloc(2 * len + 8);
            KOMA_ASSERT(d);
            memcpy(d, full, len);
            size_t n = len;
            int edits = 1 + (int)((rng >> 7) % 4);
            for (int e = 0; e < edits && n > 0; e++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                size_t at = (size_t)(rng >> 33) % n;
                int kind = (int)((rng >> 20) % 3);
                if (kind == 0) d[at] = (char)(rng >> 40);
                else if (kind == 1) memmove(d + at, d + at + 1, n - at - 1), n--;
                else if (n + 8 <= 2 * len + 8) {
                    size_t k = 1 + (size_t)((rng >> 45) % 8);
                    if (at + k > n) k = n - at;
                    memmove(d + at + k, d + at, n - at);
                    n += k;
                }
            }
            char *x = malloc(n ? n : 1);
            KOMA_ASSERT(x);
            memcpy(x, d, n);
            rec_list_t l;
            KOMA_ASSERT(rec_parse_list(FIXTURES[f], x, n, REC_FORMAT_AUTO, &l) >= 0);
            bad += check_list_sane(&l, FIXTURES[f]);
            rec_list_free(&l);
            runs++;
            free(x);
            free(d);
        }
        free(full);
    }
    CHECK(bad == 0);
    printf("robustness: %lld parses of prefixes and corrupted copies\n", (long long)runs);
}

/* The sink can stop the reader. */
static int stop_after_one(void *user, const rec_game_t *g) {
    (void)g;
    (*(int *)user)++;
    return 1;
}

static void test_stop_and_guess(void) {
    int calls = 0;
    rec_sink_t sink = {stop_after_one, NULL, &calls};
    const char *t = "startpos moves 7g7f\nstartpos moves 2g2f\n";
    CHECK(rec_parse("x.usi", t, strlen(t), REC_FORMAT_USI, &sink) == 1);
    CHECK(calls == 1);
    /* format guesses: by extension, else by content */
    CHECK(rec_format_guess("A.CSA", "", 0) == REC_FORMAT_CSA);
    CHECK(rec_format_guess("a.kifu", "", 0) == REC_FORMAT_KIF);
    CHECK(rec_format_guess("a.sfen", "", 0) == REC_FORMAT_USI);
    CHECK(rec_format_guess("a.txt", "V2.2\nPI\n", 8) == REC_FORMAT_CSA);
    CHECK(rec_format_guess(NULL, "\n\nposition startpos\n", 20) == REC_FORMAT_USI);
    CHECK(rec_format_guess(NULL, "# ---- Kifu\n\x8A\x4A\n", 14) == REC_FORMAT_KIF);
    CHECK(rec_format_guess(NULL, "hello\n", 6) == REC_FORMAT_AUTO);
    rec_format_t f;
    CHECK(rec_format_parse("kif", &f) == 0 && f == REC_FORMAT_KIF);
    CHECK(rec_format_parse("ki2", &f) != 0);
    CHECK(strcmp(rec_error_name(REC_ERR_ILLEGAL), "illegal move") == 0);
    CHECK(strcmp(rec_error_name(REC_ERR_NB), "?") == 0);
    /* an explicit format wins over the extension */
    rec_list_t l = parse_text("a.csa", "startpos moves 7g7f\n", REC_FORMAT_USI);
    CHECK(l.n_games == 1);
    rec_list_free(&l);
}

int main(void) {
    engine_init();
    test_csa_game();
    test_kif_game();
    test_multi_csa();
    test_setups();
    test_usi_file();
    test_endings();
    test_notation();
    test_malformed();
    test_prefixes_and_noise();
    test_stop_and_guess();
    return t_done("test_record");
}
