/* test_mate1.c - mate in one.
 *
 * 1. Problems from tests/data/mate1_problems.txt, as given and colour-
 *    flipped: the listed moves are exactly the mating moves (brute force),
 *    and mate1_find / mate1_find_reference return one of them (or none).
 * 2. Random positions (playouts from several starts, biased towards checks
 *    so that mates occur): mate1_find agrees with the reference on whether a
 *    mate exists, and what it returns is a legal move that mates.
 * 3. mate1_is_mated agrees with "in check and no legal move" on every
 *    position reached by a checking move from those positions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/mate1.h"
#include "engine/movegen.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"
#include "sfen_mirror.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

/* All legal moves that mate, as USI texts joined by spaces, sorted. */
static void mating_set(pos_t *pos, char *out, size_t outlen) {
    move_list_t list;
    movegen_legal(pos, &list);
    char moves[64][MOVE_USI_MAX];
    int n = 0;
    for (int32_t i = 0; i < list.n && n < 64; i++) {
        pos_do_move(pos, list.moves[i]);
        bool mate = movegen_count_legal(pos) == 0;
        pos_undo_move(pos);
        if (mate) move_to_usi(list.moves[i], moves[n++]);
    }
    qsort(moves, (size_t)n, MOVE_USI_MAX, (int (*)(const void *, const void *))strcmp);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strncat(out, " ", outlen - strlen(out) - 1);
        strncat(out, moves[i], outlen - strlen(out) - 1);
    }
}

static void normalise_set(const char *in, bool flip, char *out, size_t outlen) {
    char moves[64][MOVE_USI_MAX];
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", in);
    for (char *t = strtok(buf, " \t"); t && n < 64; t = strtok(NULL, " \t")) {
        char m[MOVE_USI_MAX + 2];
        snprintf(m, sizeof m, "%.*s", MOVE_USI_MAX - 1, t);
        if (flip)
            mirror_usi(m, moves[n++]);
        else
            strcpy(moves[n++], m);
    }
    qsort(moves, (size_t)n, MOVE_USI_MAX, (int (*)(const void *, const void *))strcmp);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strncat(out, " ", outlen - strlen(out) - 1);
        strncat(out, moves[i], outlen - strlen(out) - 1);
    }
}

static bool in_set(const char *set, move_t m) {
    char u[MOVE_USI_MAX];
    move_to_usi(m, u);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", set);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " "))
        if (strcmp(t, u) == 0) return true;
    return false;
}

static int problems_run = 0, problem_mates = 0;

static void run_problem(const char *sfen, const char *expected, const char *what, bool flip, int lineno) {
    static pos_t pos;
    char err[256], fs[SFEN_MAX_LEN + 16], want[1024], got[1024];
    const char *s = sfen;
    if (flip) {
        if (mirror_sfen(sfen, fs, sizeof fs) != 0) {
            CHECKF(0, "line %d: cannot flip %s", lineno, sfen);
            return;
        }
        s = fs;
    }
    if (sfen_parse_cstr(&pos, s, err, sizeof err) != SFEN_OK) {
        CHECKF(0, "line %d: %s: %s", lineno, s, err);
        return;
    }
    problems_run++;
    normalise_set(expected, flip, want, sizeof want);
    mating_set(&pos, got, sizeof got);
    CHECKF(strcmp(want, got) == 0, "line %d (%s)%s: mating moves are [%s], the file says [%s]", lineno, what,
           flip ? " flipped" : "", got, want);
    move_t f = mate1_find(&pos), r = mate1_find_reference(&pos);
    char uf[MOVE_USI_MAX], ur[MOVE_USI_MAX];
    move_to_usi(f, uf);
    move_to_usi(r, ur);
    if (want[0]) {
        problem_mates++;
        CHECKF(in_set(want, f), "line %d (%s)%s: mate1_find gives %s, want one of [%s]", lineno, what,
               flip ? " flipped" : "", uf, want);
        CHECKF(in_set(want, r), "line %d (%s)%s: reference gives %s, want one of [%s]", lineno, what,
               flip ? " flipped" : "", ur, want);
    } else {
        CHECKF(f == MOVE_NONE, "line %d (%s)%s: mate1_find gives %s, no mate exists", lineno, what,
               flip ? " flipped" : "", uf);
        CHECKF(r == MOVE_NONE, "line %d (%s)%s: reference gives %s", lineno, what, flip ? " flipped" : "", ur);
    }
    char after[SFEN_MAX_LEN];
    sfen_write(&pos, after, sizeof after);
    static pos_t fresh;
    sfen_parse_cstr(&fresh, s, err, sizeof err);
    char before[SFEN_MAX_LEN];
    sfen_write(&fresh, before, sizeof before);
    CHECKF(strcmp(before, after) == 0 && pos_validate(&pos) == NULL, "line %d: position changed by mate1_find",
           lineno);
}

static void test_problems(void) {
    const char *path = "tests/data/mate1_problems.txt";
    FILE *f = fopen(path, "r");
    if (!f) {
        CHECKF(0, "cannot open %s (run from the source root)", path);
        return;
    }
    char line[2048];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == '#' || line[0] == 0) continue;
        char *a = strchr(line, ';');
        char *b = a ? strchr(a + 1, ';') : NULL;
        if (!a || !b) {
            CHECKF(0, "%s:%d: want 'SFEN ; moves ; comment'", path, lineno);
            continue;
        }
        *a = 0;
        *b = 0;
        run_problem(line, a + 1, b + 1, false, lineno);
        run_problem(line, a + 1, b + 1, true, lineno);
    }
    fclose(f);
    CHECKF(problems_run >= 40 && problem_mates >= 30, "only %d problems (%d with mates)", problems_run, problem_mates);

    /* The uchifuzume problem really is one: the pawn drop would mate. */
    static pos_t pos;
    char err[256];
    CHECKF(sfen_parse_cstr(&pos, "7nk/7p1/8G/9/9/9/9/9/K8 b P 1", err, sizeof err) == SFEN_OK, "%s", err);
    CHECKF(pos_is_pawn_drop_mate(&pos, sq_make(0, 1)), "P*1b should be a pawn-drop mate");
    CHECKF(move_from_usi(&pos, "P*1b", 4) == MOVE_NONE, "P*1b must be illegal");
}

/* ---- random agreement -------------------------------------------------------- */
static const char *STARTS[] = {
    "startpos",
    "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
    "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1",
    "4k4/9/9/9/9/9/9/9/4K4 w RBGSNLPrb3g3s3n3l17p 1",
    "ln1g5/1r2S1k2/p2pppn2/2ps2p2/1p7/2P6/PPSPPPPLP/2G2K1pr/LN4G1b b BGSLPnp 1",
    "l2kg2+R1/4n3+L/p1gpps3/4np3/6P1N/PP+rP2pS1/1pG2P3/4P1G2/LN3KB1+p b SPbslpppp 1",
    "8k/9/9/9/9/9/9/9/K8 b 2R2B4G4S4N4L18P 1",
};
enum { N_STARTS = sizeof STARTS / sizeof STARTS[0] };

static int rand_positions = 0, rand_mates = 0, rand_in_check = 0, mated_checked = 0, mated_true = 0;

static void check_random_position(pos_t *pos) {
    char sfen[SFEN_MAX_LEN];
    rand_positions++;
    if (pos_in_check(pos)) rand_in_check++;
    move_t r = mate1_find_reference(pos);
    move_t f = mate1_find(pos);
    if (r != MOVE_NONE) rand_mates++;
    if ((f == MOVE_NONE) != (r == MOVE_NONE)) {
        sfen_write(pos, sfen, sizeof sfen);
        char uf[MOVE_USI_MAX], ur[MOVE_USI_MAX];
        move_to_usi(f, uf);
        move_to_usi(r, ur);
        CHECKF(0, "%s: mate1_find %s, reference %s", sfen, uf, ur);
    }
    if (f != MOVE_NONE) {
        sfen_write(pos, sfen, sizeof sfen);
        CHECKF(pos_is_valid_move(pos, f), "%s: mate1_find returned an illegal move", sfen);
        CHECKF(!(move_is_drop(f) && move_drop_pt(f) == PT_PAWN), "%s: a pawn drop", sfen);
        if (pos_is_valid_move(pos, f)) {
            pos_do_move(pos, f);
            CHECKF(pos_in_check(pos) && movegen_count_legal(pos) == 0, "%s: mate1_find's move does not mate", sfen);
            pos_undo_move(pos);
        }
    }
    /* mate1_is_mated here and after every checking move. */
    CHECKF(mate1_is_mated(pos) == (pos_in_check(pos) && movegen_count_legal(pos) == 0), "is_mated at the root");
    move_list_t list;
    movegen_legal(pos, &list);
    for (int32_t i = 0; i < list.n; i++) {
        if (!pos_gives_check(pos, list.moves[i])) continue;
        pos_do_move(pos, list.moves[i]);
        bool want = movegen_count_legal(pos) == 0, got = mate1_is_mated(pos);
        mated_checked++;
        mated_true += want;
        if (want != got) {
            sfen_write(pos, sfen, sizeof sfen);
            CHECKF(0, "%s: mate1_is_mated %d, movegen says %d", sfen, got, want);
        }
        pos_undo_move(pos);
    }
}

static void test_random(void) {
    static pos_t pos;
    char err[256];
    for (int round = 0; round < 40; round++) {
        for (int s = 0; s < N_STARTS; s++) {
            if (sfen_parse_cstr(&pos, STARTS[s], err, sizeof err) != SFEN_OK) {
                CHECKF(0, "%s: %s", STARTS[s], err);
                continue;
            }
            for (int ply = 0; ply < 120; ply++) {
                check_random_position(&pos);
                move_list_t list, checks;
                movegen_legal(&pos, &list);
                if (list.n == 0) break;
                checks.n = 0;
                for (int32_t i = 0; i < list.n; i++)
                    if (pos_gives_check(&pos, list.moves[i])) checks.moves[checks.n++] = list.moves[i];
                /* Prefer checks a third of the time: games then reach mating nets. */
                const move_list_t *from = checks.n && t_xorshift64(&rng_state) % 3 == 0 ? &checks : &list;
                pos_do_move(&pos, from->moves[t_xorshift64(&rng_state) % (uint64_t)from->n]);
            }
        }
    }
    printf("test_mate1: %d random positions (%d in check, %d with a mate in one); mate1_is_mated on %d positions "
           "after a check (%d mated)\n",
           rand_positions, rand_in_check, rand_mates, mated_checked, mated_true);
    CHECKF(rand_positions > 10000 && rand_mates > 300 && rand_in_check > 300 && mated_true > 300,
           "too little coverage");
}

int main(void) {
    engine_init();
    test_problems();
    test_random();
    printf("test_mate1: %d problems (%d with mates, both colours)\n", problems_run, problem_mates);
    return t_done("test_mate1");
}
