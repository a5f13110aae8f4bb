/* mcts_test.h - shared helpers of the mcts/ tests: evaluators (test doubles
 * for the network), positions, and brute-force mate checks. Checks, t_done
 * and the RNG come from tests/koma_test.h. */
#ifndef KOMA_TESTS_MCTS_TEST_H
#define KOMA_TESTS_MCTS_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/encode.h"
#include "engine/movegen.h"
#include "engine/sfen.h"
#include "mcts/leaf.h"
#include "mcts/mcts.h"
#include "tests/koma_test.h"

static inline void set_sfen(pos_t *pos, const char *sfen) {
    char err[256];
    if (sfen_parse_cstr(pos, sfen, err, sizeof err) != SFEN_OK) {
        fprintf(stderr, "bad test SFEN '%s': %s\n", sfen, err);
        exit(2);
    }
}

static inline move_t usi(const pos_t *pos, const char *s) {
    move_t m = move_from_usi(pos, s, strlen(s));
    if (m == MOVE_NONE) {
        fprintf(stderr, "bad test move '%s'\n", s);
        exit(2);
    }
    return m;
}

static inline const char *usi_str(move_t m) {
    static char buf[4][MOVE_USI_MAX];
    static int k = 0;
    k = (k + 1) & 3;
    move_to_usi(m, buf[k]);
    return buf[k];
}

/* ---- evaluators (network doubles) -------------------------------------------- */

/* Counts calls and leaves. */
typedef struct {
    int64_t calls, leaves;
} eval_stats_t;

/* Uniform policy, zero value (W = D = L). */
static inline void eval_uniform(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *pol, float *wdl) {
    (void)t;
    (void)reqs;
    eval_stats_t *st = user;
    if (st) st->calls++, st->leaves += n;
    memset(pol, 0, (size_t)n * ENC_LABEL_NB * sizeof(float));
    for (int32_t i = 0; i < 3 * n; i++) wdl[i] = 0.0f;
}

/* A deterministic "network" from the position key: pseudo-random logits
 * (spread about 3 nats) and value. Different positions get different output. */
static inline void eval_hash(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n, float *pol, float *wdl) {
    (void)t;
    eval_stats_t *st = user;
    if (st) st->calls++, st->leaves += n;
    for (int32_t i = 0; i < n; i++) {
        uint64_t k = reqs[i].key;
        float *p = pol + (size_t)i * ENC_LABEL_NB;
        for (int32_t l = 0; l < ENC_LABEL_NB; l++)
            p[l] = (float)(t_mix64(k + (uint64_t)l) >> 40) * (3.0f / 16777216.0f);
        uint64_t h = t_mix64(k ^ 0x1234567ull);
        wdl[3 * i + 0] = (float)(h & 1023) / 512.0f;
        wdl[3 * i + 1] = (float)((h >> 10) & 1023) / 1024.0f;
        wdl[3 * i + 2] = (float)((h >> 20) & 1023) / 512.0f;
    }
}

/* ---- brute force ---------------------------------------------------------------- */

/* Side to move can mate at once (any legal move leaving the opponent without moves). */
static inline bool bf_mate1(pos_t *pos) {
    move_list_t l;
    movegen_legal(pos, &l);
    for (int32_t i = 0; i < l.n; i++) {
        pos_do_move(pos, l.moves[i]);
        bool m = movegen_count_legal(pos) == 0;
        pos_undo_move(pos);
        if (m) return true;
    }
    return false;
}

/* After the attacker's move m: every defender reply allows a mate in one
 * (or the defender has no reply). */
static inline bool bf_forces_mate3(pos_t *pos, move_t m) {
    pos_do_move(pos, m);
    move_list_t l;
    movegen_legal(pos, &l);
    bool ok = true;
    for (int32_t i = 0; i < l.n && ok; i++) {
        pos_do_move(pos, l.moves[i]);
        ok = bf_mate1(pos);
        pos_undo_move(pos);
    }
    pos_undo_move(pos);
    return ok;
}

static inline int32_t bf_count_checks(const pos_t *pos) {
    move_list_t l;
    movegen_legal(pos, &l);
    int32_t c = 0;
    for (int32_t i = 0; i < l.n; i++) c += pos_gives_check(pos, l.moves[i]);
    return c;
}

/* Every label of a result maps back to its legal move; the policy sums to 1. */
static inline void check_result_policy(const pos_t *pos, const mcts_result_t *r, const char *what) {
    move_list_t l;
    movegen_legal(pos, &l);
    if (r->n != l.n) {
        CHECKF(r->n == l.n, "%s: result has %d moves, position %d", what, r->n, l.n);
        return;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < r->n; i++) {
        CHECKF(r->policy[i] >= 0.0f, "%s: negative policy", what);
        sum += r->policy[i];
        CHECKF(movegen_list_contains(&l, r->moves[i]), "%s: %s not legal", what, usi_str(r->moves[i]));
        CHECKF(encode_label_move(pos, r->labels[i]) == r->moves[i], "%s: label %d does not map back to %s", what,
               r->labels[i], usi_str(r->moves[i]));
    }
    CHECKF(fabs(sum - 1.0) < 1e-5, "%s: policy sums to %.8f", what, sum);
    CHECKF(r->best != MOVE_NONE && movegen_list_contains(&l, r->best), "%s: best move %s not legal", what,
           usi_str(r->best));
}

#endif
