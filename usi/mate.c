/* mate.c - iterative-deepening AND/OR mate search over checks (see mate.h). */
#include "usi/mate.h"

#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/dfpn.h"
#include "engine/mate1.h"
#include "engine/movegen.h"
#include "engine/rules.h"

enum { MATE_NONE_LE = INT16_MAX, MATE_FOREVER = INT16_MAX - 1 };

typedef struct {
    uint64_t key;
    int16_t mate_le;   /* a mate within this many plies is known (MATE_NONE_LE: none) */
    int16_t nomate_ge; /* no mate within this many plies (-1: unknown) */
    move_t move;         /* the mating move for mate_le */
    uint16_t pad_;
} mate_entry_t;

typedef struct {
    pos_t *pos;
    mate_entry_t *tt; /* (mask + 1) */
    uint64_t mask;
    int64_t nodes, max_nodes, deadline_ms;
    const atomic_int *stop;
    bool abort; /* time, flag or node limit: results below are meaningless */
    bool cut;   /* this iteration left something unproven (depth limit, repetition) */
    move_list_t lists[USI_MATE_PLY_MAX + 2];
    int32_t score[MOVES_MAX];
    move_t tmp[MOVES_MAX];
} mate_ctx_t;

void usi_mate_limits_default(usi_mate_limits_t *lim) {
    memset(lim, 0, sizeof *lim);
    lim->max_plies = USI_MATE_PLY_MAX;
}

static bool check_abort(mate_ctx_t *c) {
    if (c->abort) return true;
    if ((++c->nodes & 63) == 0) { /* a node can cost a move generation per check: look often */
        if ((c->stop && atomic_load_explicit(c->stop, memory_order_relaxed)) ||
            (c->deadline_ms && compat_now_ms() >= c->deadline_ms) || (c->max_nodes && c->nodes >= c->max_nodes))
            c->abort = true;
    }
    return c->abort;
}

static mate_entry_t *tt_probe(mate_ctx_t *c, uint64_t key) {
    mate_entry_t *e = &c->tt[key & c->mask];
    return e->key == key ? e : NULL;
}

static void tt_store(mate_ctx_t *c, uint64_t key, int32_t mate_le, move_t m, int32_t nomate_ge) {
    mate_entry_t *e = &c->tt[key & c->mask];
    if (e->key != key) {
        e->key = key;
        e->mate_le = MATE_NONE_LE;
        e->nomate_ge = -1;
        e->move = MOVE_NONE;
    }
    if (mate_le < e->mate_le) e->mate_le = (int16_t)mate_le, e->move = m;
    if (nomate_ge > e->nomate_ge) e->nomate_ge = (int16_t)nomate_ge;
}

/* The legal checks of the side to move into l, fewest defender replies first. */
static void gen_checks(mate_ctx_t *c, move_list_t *l, bool order) {
    pos_t *pos = c->pos;
    movegen_legal(pos, l);
    int32_t n = 0;
    for (int32_t i = 0; i < l->n; i++)
        if (pos_gives_check(pos, l->moves[i])) l->moves[n++] = l->moves[i];
    l->n = n;
    if (!order || n < 2) return;
    for (int32_t i = 0; i < n; i++) {
        pos_do_move(pos, l->moves[i]);
        c->score[i] = movegen_count_legal(pos);
        pos_undo_move(pos);
    }
    for (int32_t i = 1; i < n; i++) { /* insertion sort, stable */
        move_t m = l->moves[i];
        int32_t s = c->score[i], j = i - 1;
        while (j >= 0 && c->score[j] > s) {
            l->moves[j + 1] = l->moves[j];
            c->score[j + 1] = c->score[j];
            j--;
        }
        l->moves[j + 1] = m;
        c->score[j + 1] = s;
    }
}

static bool has_check(mate_ctx_t *c, move_list_t *l) {
    movegen_legal(c->pos, l);
    for (int32_t i = 0; i < l->n; i++)
        if (pos_gives_check(c->pos, l->moves[i])) return true;
    return false;
}

/* Evasions of the side to move into l: king moves, then captures, then
 * other board moves, then drops (interpositions rarely refute). */
static void gen_evasions(mate_ctx_t *c, move_list_t *l) {
    pos_t *pos = c->pos;
    movegen_legal(pos, l);
    int32_t n = 0;
    sq_t ksq = pos_king_sq(pos, pos_side_to_move(pos));
    for (int pass = 0; pass < 4; pass++)
        for (int32_t i = 0; i < l->n; i++) {
            move_t m = l->moves[i];
            int cls = move_is_drop(m) ? 3 : move_from(m) == ksq ? 0 : pos_is_capture(pos, m) ? 1 : 2;
            if (cls == pass) c->tmp[n++] = m;
        }
    memcpy(l->moves, c->tmp, (size_t)n * sizeof(move_t));
}

static bool and_node(mate_ctx_t *c, int32_t ply, int32_t d);

/* Does the side to move (the attacker) mate within d plies (d odd)? */
static bool or_node(mate_ctx_t *c, int32_t ply, int32_t d) {
    if (check_abort(c)) return false;
    pos_t *pos = c->pos;
    uint64_t key = pos_key(pos);
    mate_entry_t *e = tt_probe(c, key);
    if (e) {
        if (e->mate_le <= d) return true;
        if (e->nomate_ge >= d) return false;
    }
    move_list_t *l = &c->lists[ply];
    move_t m = mate1_find(pos);
    if (m != MOVE_NONE) {
        tt_store(c, key, 1, m, -1);
        return true;
    }
    if (d <= 1 || ply + 2 > USI_MATE_PLY_MAX || pos_hist_len(pos) + 2 >= POS_HIST_MAX) {
        if (has_check(c, l)) {
            c->cut = true;
            tt_store(c, key, MATE_NONE_LE, MOVE_NONE, 1);
        } else {
            tt_store(c, key, MATE_NONE_LE, MOVE_NONE, MATE_FOREVER);
        }
        return false;
    }
    gen_checks(c, l, true);
    if (l->n == 0) {
        tt_store(c, key, MATE_NONE_LE, MOVE_NONE, MATE_FOREVER);
        return false;
    }
    for (int32_t i = 0; i < l->n; i++) {
        move_t mv = l->moves[i];
        pos_do_move(pos, mv);
        bool r = and_node(c, ply + 1, d - 1);
        pos_undo_move(pos);
        if (c->abort) return false;
        if (r) {
            tt_store(c, key, d, mv, -1);
            return true;
        }
    }
    tt_store(c, key, MATE_NONE_LE, MOVE_NONE, d);
    return false;
}

/* Is the side to move (the defender, in check) mated within d plies (d even)? */
static bool and_node(mate_ctx_t *c, int32_t ply, int32_t d) {
    if (check_abort(c)) return false;
    pos_t *pos = c->pos;
    move_list_t *l = &c->lists[ply];
    gen_evasions(c, l);
    if (l->n == 0) return true;
    if (d <= 0) return false;
    for (int32_t i = 0; i < l->n; i++) {
        pos_do_move(pos, l->moves[i]);
        if (rules_repetition_first(pos, -1, false, NULL) != RULES_REP_NONE) {
            pos_undo_move(pos);
            c->cut = true; /* path-dependent: never the basis of a "no mate" proof */
            return false;
        }
        bool r = or_node(c, ply + 1, d - 1);
        pos_undo_move(pos);
        if (c->abort || !r) return false;
    }
    return true;
}

/* The mating line from the root, known to mate within d plies. Attacker:
 * the fastest mate; defender: the reply that delays it most. */
static int32_t extract_pv(mate_ctx_t *c, int32_t d, move_t *pv) {
    pos_t *pos = c->pos;
    move_list_t *l = malloc(sizeof *l);
    if (!l) return 0;
    int32_t len = 0, left = d;
    bool ok = false;
    while (len < USI_MATE_PLY_MAX && left >= 1) {
        /* attacker */
        move_t best = mate1_find(pos);
        int32_t used = 1;
        if (best == MOVE_NONE) {
            gen_checks(c, l, true);
            for (int32_t dd = 3; dd <= left && best == MOVE_NONE; dd += 2)
                for (int32_t i = 0; i < l->n && best == MOVE_NONE; i++) {
                    pos_do_move(pos, l->moves[i]);
                    if (and_node(c, 1, dd - 1)) best = l->moves[i], used = dd;
                    pos_undo_move(pos);
                    if (c->abort) goto done;
                }
        }
        if (best == MOVE_NONE) goto done;
        pv[len++] = best;
        pos_do_move(pos, best);
        left = used - 1;
        /* defender */
        movegen_legal(pos, l);
        if (l->n == 0) {
            ok = true;
            goto done;
        }
        if (left < 2 || len >= USI_MATE_PLY_MAX) goto done;
        move_t reply = MOVE_NONE;
        int32_t longest = -1;
        move_list_t replies = *l;
        for (int32_t i = 0; i < replies.n; i++) {
            pos_do_move(pos, replies.moves[i]);
            int32_t found = -1;
            for (int32_t dd = 1; dd <= left - 1; dd += 2)
                if (or_node(c, 1, dd)) {
                    found = dd;
                    break;
                }
            pos_undo_move(pos);
            if (c->abort || found < 0) goto done; /* not a proof after all */
            if (found > longest) longest = found, reply = replies.moves[i];
        }
        pv[len++] = reply;
        pos_do_move(pos, reply);
        left = longest;
    }
done:
    for (int32_t i = 0; i < len; i++) pos_undo_move(pos);
    free(l);
    return ok ? len : 0;
}

bool usi_mate_verify(const pos_t *root, const move_t *pv, int32_t len) {
    return dfpn_verify(root, pv, len); /* one checker for both searches (63 < DFPN_PLY_MAX) */
}

void usi_mate_search(pos_t *pos, const usi_mate_limits_t *lim, usi_mate_result_t *res) {
    memset(res, 0, sizeof *res);
    res->status = USI_MATE_TIMEOUT;
    mate_ctx_t *c = calloc(1, sizeof *c);
    int32_t bits = lim->tt_log2 > 0 ? lim->tt_log2 : 20;
    if (bits > 30) bits = 30;
    if (c) c->tt = malloc(((size_t)1 << bits) * sizeof(mate_entry_t));
    if (!c || !c->tt) {
        if (c) free(c);
        return;
    }
    c->mask = ((uint64_t)1 << bits) - 1;
    for (uint64_t i = 0; i <= c->mask; i++) c->tt[i] = (mate_entry_t){~(uint64_t)0 ^ i ^ 1, MATE_NONE_LE, -1, 0, 0};
    c->pos = pos;
    c->deadline_ms = lim->deadline_ms;
    c->stop = lim->stop;
    c->max_nodes = lim->max_nodes;
    int32_t max = lim->max_plies > 0 ? lim->max_plies : USI_MATE_PLY_MAX;
    if (max > USI_MATE_PLY_MAX) max = USI_MATE_PLY_MAX;
    if (max % 2 == 0) max--;
    for (int32_t d = 1; d <= max; d += 2) {
        c->cut = false;
        bool r = or_node(c, 0, d);
        if (c->abort) break;
        res->depth = d;
        if (r) {
            /* The line is read back from the table, without the clock. */
            c->deadline_ms = 0;
            c->stop = NULL;
            c->max_nodes = c->nodes + 20000000;
            int32_t len = extract_pv(c, d, res->pv);
            if (len > 0 && usi_mate_verify(pos, res->pv, len)) {
                res->len = len;
                res->status = USI_MATE_FOUND;
            }
            break;
        }
        if (!c->cut || d + 2 > max) {
            res->status = USI_MATE_NONE; /* proven, or no mate within max plies */
            break;
        }
    }
    res->nodes = c->nodes;
    free(c->tt);
    free(c);
}
