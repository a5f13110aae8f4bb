/* dfpn.c - df-pn mate search over checks (see dfpn.h). */
#include "engine/dfpn.h"

#include <stdlib.h>
#include <string.h>

#include "engine/mate1.h"
#include "engine/movegen.h"
#include "engine/rules.h"

/* ---- tuning constants ---------------------------------------------------------- */
enum {
    DFPN_INF = 1u << 30,        /* a proven or disproven number */
    DFPN_POLL_EVERY = 256,      /* nodes between looks at the stop flag and the poll callback */
    DFPN_CLUSTER = 4,           /* entries per table cluster (128 bytes) */
    DFPN_LEN_NONE = 0xFFFF,     /* no proof */
    DFPN_DIS_NONE = -1,         /* no disproof */
    DFPN_DIS_FINAL = 0x7FFF,    /* disproof at any depth: no check left to give */
    DFPN_PV_NODES = 20000,      /* nodes the PV may take to prove again what the table lost */
    DFPN_FIRST_BOUND = 31,      /* the first depth bound (plies); then 63, 127, 255 */
};
/* epsilon of the 1 + epsilon trick: a child may run to second * (1 + 1/4) + 1 */
#define DFPN_EPS_SHIFT 2

/* One table entry: 32 bytes. */
typedef struct {
    uint64_t key;       /* board_key of the position (board and side to move); 0 = empty */
    hand_t hand;        /* the attacker's hand there */
    uint32_t pn, dn;    /* last values found (heuristic unless a proof/disproof below holds) */
    uint32_t work;      /* nodes searched below this entry (replacement) */
    uint16_t len;       /* shortest proof known (plies), DFPN_LEN_NONE: none */
    int16_t dis;        /* disproof holds up to this remaining depth; DFPN_DIS_NONE, DFPN_DIS_FINAL */
    move_t move;        /* the proof's move (OR: the check; AND: the longest reply) */
    uint16_t gen;       /* the search that wrote it */
} dfpn_entry_t;

/* A child of the node being searched (its key and hand computed once). */
typedef struct {
    uint64_t key;
    hand_t hand;     /* the attacker's hand in the child */
    move_t move;
    uint8_t rep;     /* the child repeats a position of the path or the game */
    uint32_t init_pn; /* initial proof number (OR node's child: the defender's reply count) */
} dfpn_child_t;

/* What a lookup says of a node at a remaining depth. */
typedef struct {
    uint32_t pn, dn;
    int32_t len; /* proven: plies */
    int32_t dis; /* disproven: up to this depth */
} dfpn_val_t;

struct dfpn {
    dfpn_entry_t *tt; /* (mask + 1) * DFPN_CLUSTER */
    uint64_t mask;    /* clusters - 1 */
    uint16_t gen;
    /* one search */
    pos_t *pos;
    int64_t nodes, max_nodes;
    const atomic_int *stop;
    bool (*poll)(void *user);
    void *poll_user;
    bool stopped;
    move_list_t lists[DFPN_PLY_MAX + 2];
    dfpn_child_t *kids[DFPN_PLY_MAX + 2];
    int32_t kids_cap[DFPN_PLY_MAX + 2];
};

/* ---- table ------------------------------------------------------------------------ */

dfpn_t *dfpn_new(size_t tt_bytes) {
    dfpn_t *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    size_t clusters = 1;
    while (clusters * 2 * DFPN_CLUSTER * sizeof(dfpn_entry_t) <= tt_bytes) clusters *= 2;
    d->tt = calloc(clusters * DFPN_CLUSTER, sizeof(dfpn_entry_t));
    if (!d->tt) {
        free(d);
        return NULL;
    }
    d->mask = clusters - 1;
    return d;
}

void dfpn_free(dfpn_t *d) {
    if (!d) return;
    for (int32_t i = 0; i < DFPN_PLY_MAX + 2; i++) free(d->kids[i]);
    free(d->tt);
    free(d);
}

void dfpn_clear(dfpn_t *d) {
    memset(d->tt, 0, (size_t)(d->mask + 1) * DFPN_CLUSTER * sizeof(dfpn_entry_t));
    d->gen = 0;
}

size_t dfpn_tt_bytes(const dfpn_t *d) { return (size_t)(d->mask + 1) * DFPN_CLUSTER * sizeof(dfpn_entry_t); }

void dfpn_limits_default(dfpn_limits_t *lim) {
    memset(lim, 0, sizeof *lim);
    lim->max_plies = DFPN_PLY_MAX;
    lim->shorten = true;
}

static inline uint64_t tt_key(uint64_t board_key) { return board_key | 1; } /* never 0 (empty) */

/* The node (key, attacker's hand) at remaining depth r. A proof of a hand
 * with no more of any piece holds here, a disproof of one with no less. */
static dfpn_val_t tt_lookup(const dfpn_t *d, uint64_t board_key, hand_t hand, int32_t r, uint32_t init_pn) {
    dfpn_val_t v = {init_pn, 1, 0, DFPN_DIS_NONE};
    const uint64_t key = tt_key(board_key);
    const dfpn_entry_t *c = &d->tt[(board_key & d->mask) * DFPN_CLUSTER];
    const dfpn_entry_t *exact = NULL;
    int32_t best_len = DFPN_LEN_NONE, best_dis = DFPN_DIS_NONE;
    for (int32_t i = 0; i < DFPN_CLUSTER; i++) {
        const dfpn_entry_t *e = &c[i];
        if (e->key != key) continue;
        if (e->hand == hand) exact = e;
        if (e->len != DFPN_LEN_NONE && e->len <= r && e->len < best_len && hand_is_superior_or_equal(hand, e->hand))
            best_len = e->len;
        /* a disproof from an earlier search only when final: a repetition
         * on that search's path does not hold on this one */
        if (e->dis >= r && e->dis > best_dis && (e->dis == DFPN_DIS_FINAL || e->gen == d->gen) &&
            hand_is_superior_or_equal(e->hand, hand))
            best_dis = e->dis;
    }
    if (best_len != DFPN_LEN_NONE) return (dfpn_val_t){0, DFPN_INF, best_len, DFPN_DIS_NONE};
    if (best_dis != DFPN_DIS_NONE) return (dfpn_val_t){DFPN_INF, 0, 0, best_dis};
    if (exact && exact->pn != 0 && exact->dn != 0) {
        v.pn = exact->pn;
        v.dn = exact->dn;
    }
    return v;
}

/* The proof move stored for an exact (key, hand) entry, MOVE_NONE if none. */
static move_t tt_move(const dfpn_t *d, uint64_t board_key, hand_t hand) {
    const uint64_t key = tt_key(board_key);
    const dfpn_entry_t *c = &d->tt[(board_key & d->mask) * DFPN_CLUSTER];
    for (int32_t i = 0; i < DFPN_CLUSTER; i++)
        if (c[i].key == key && c[i].hand == hand) return c[i].move;
    return MOVE_NONE;
}

/* Writes the node's values: pn/dn always, a proof (len, move) or disproof
 * (dis) when one is given, keeping the better one already there. */
static void tt_store(dfpn_t *d, uint64_t board_key, hand_t hand, uint32_t pn, uint32_t dn, int32_t len, int32_t dis,
                     move_t move, int64_t work) {
    const uint64_t key = tt_key(board_key);
    dfpn_entry_t *c = &d->tt[(board_key & d->mask) * DFPN_CLUSTER];
    dfpn_entry_t *e = NULL, *victim = NULL;
    for (int32_t i = 0; i < DFPN_CLUSTER && !e; i++)
        if (c[i].key == key && c[i].hand == hand) e = &c[i];
    if (!e) {
        /* an empty slot, else an older search's entry, else the least work */
        for (int32_t i = 0; i < DFPN_CLUSTER; i++) {
            dfpn_entry_t *x = &c[i];
            if (x->key == 0) {
                victim = x;
                break;
            }
            if (!victim || (x->gen != d->gen && victim->gen == d->gen) ||
                ((x->gen != d->gen) == (victim->gen != d->gen) && x->work < victim->work))
                victim = x;
        }
        e = victim;
        *e = (dfpn_entry_t){key, hand, 1, 1, 0, DFPN_LEN_NONE, DFPN_DIS_NONE, MOVE_NONE, d->gen};
    }
    e->gen = d->gen;
    e->pn = pn;
    e->dn = dn;
    int64_t w = (int64_t)e->work + work;
    e->work = w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
    if (pn == 0 && len < e->len) {
        e->len = (uint16_t)len;
        e->move = move;
    }
    if (dn == 0 && dis > e->dis) e->dis = (int16_t)dis;
}

/* ---- moves -------------------------------------------------------------------------- */

static bool poll_stop(dfpn_t *d) {
    if (d->stopped) return true;
    if ((++d->nodes % DFPN_POLL_EVERY) == 0) {
        if ((d->stop && atomic_load_explicit(d->stop, memory_order_relaxed)) ||
            (d->poll && d->poll(d->poll_user)) || (d->max_nodes && d->nodes >= d->max_nodes))
            d->stopped = true;
    }
    return d->stopped;
}

/* The legal checks of the side to move. */
static int32_t gen_checks(pos_t *pos, move_list_t *l) {
    movegen_legal(pos, l);
    int32_t n = 0;
    for (int32_t i = 0; i < l->n; i++)
        if (pos_gives_check(pos, l->moves[i])) l->moves[n++] = l->moves[i];
    return l->n = n;
}

/* The evasions of the side to move: king moves, captures, other board
 * moves, drops (ties of the selection go to the earlier). */
static int32_t gen_evasions(pos_t *pos, move_list_t *l) {
    movegen_legal(pos, l);
    move_t tmp[MOVES_MAX];
    int32_t n = 0;
    const sq_t ksq = pos_king_sq(pos, pos_side_to_move(pos));
    for (int pass = 0; pass < 4; pass++)
        for (int32_t i = 0; i < l->n; i++) {
            move_t m = l->moves[i];
            int cls = move_is_drop(m) ? 3 : move_from(m) == ksq ? 0 : pos_is_capture(pos, m) ? 1 : 2;
            if (cls == pass) tmp[n++] = m;
        }
    memcpy(l->moves, tmp, (size_t)n * sizeof(move_t));
    return l->n;
}

static inline hand_t attacker_hand(const pos_t *pos, bool or_node) {
    return pos_hand(pos, or_node ? pos_side_to_move(pos) : color_flip(pos_side_to_move(pos)));
}

static inline uint32_t sat_add(uint32_t a, uint32_t b) {
    uint64_t s = (uint64_t)a + b;
    return s >= DFPN_INF ? DFPN_INF - 1 : (uint32_t)s;
}

/* (1 + epsilon) * second + 1, at most cap. */
static inline uint32_t next_threshold(uint32_t second, uint32_t cap) {
    if (second >= DFPN_INF) return cap;
    uint64_t t = (uint64_t)second + (second >> DFPN_EPS_SHIFT) + 1;
    return t < cap ? (uint32_t)t : cap;
}

/* ---- the search ------------------------------------------------------------------- */

/* Expands the node at ply into d->kids[ply]; returns the count, or -1 when
 * out of memory. or_node: the children are AND nodes (their initial pn is
 * the defender's reply count). */
static int32_t expand(dfpn_t *d, int32_t ply, const move_list_t *l, bool or_node) {
    pos_t *pos = d->pos;
    if (d->kids_cap[ply] < l->n) {
        dfpn_child_t *k = realloc(d->kids[ply], (size_t)l->n * sizeof *k);
        if (!k) return -1;
        d->kids[ply] = k;
        d->kids_cap[ply] = l->n;
    }
    dfpn_child_t *k = d->kids[ply];
    for (int32_t i = 0; i < l->n; i++) {
        pos_do_move(pos, l->moves[i]);
        k[i].key = pos_board_key(pos);
        k[i].hand = attacker_hand(pos, !or_node);
        k[i].move = l->moves[i];
        k[i].rep = rules_repetition_first(pos, -1, false, NULL) != RULES_REP_NONE;
        k[i].init_pn = or_node ? (uint32_t)movegen_count_legal(pos) : 1;
        pos_undo_move(pos);
    }
    return l->n;
}

/* Searches the node at ply (remaining depth r) until its proof number
 * reaches thpn or its disproof number thdn, and stores it. */
static void mid(dfpn_t *d, int32_t ply, int32_t r, bool or_node, uint32_t thpn, uint32_t thdn) {
    if (poll_stop(d)) return;
    pos_t *pos = d->pos;
    const int64_t nodes0 = d->nodes;
    const uint64_t key = pos_board_key(pos);
    const hand_t hand = attacker_hand(pos, or_node);
    move_list_t *l = &d->lists[ply];
    if (or_node) {
        move_t m = r >= 1 ? mate1_find(pos) : MOVE_NONE;
        if (m != MOVE_NONE) {
            tt_store(d, key, hand, 0, DFPN_INF, 1, 0, m, 1);
            return;
        }
        if (gen_checks(pos, l) == 0) {
            tt_store(d, key, hand, DFPN_INF, 0, 0, DFPN_DIS_FINAL, MOVE_NONE, 1);
            return;
        }
        if (r < 3) { /* no mate in one, so none within r plies */
            tt_store(d, key, hand, DFPN_INF, 0, 0, r >= 1 ? 2 : 0, MOVE_NONE, 1);
            return;
        }
    } else {
        if (gen_evasions(pos, l) == 0) {
            tt_store(d, key, hand, 0, DFPN_INF, 0, 0, MOVE_NONE, 1);
            return;
        }
        if (r < 2) {
            tt_store(d, key, hand, DFPN_INF, 0, 0, 1, MOVE_NONE, 1);
            return;
        }
    }
    const int32_t n = expand(d, ply, l, or_node);
    if (n < 0) {
        d->stopped = true; /* out of memory: no answer */
        return;
    }
    const dfpn_child_t *k = d->kids[ply];
    for (;;) {
        /* the node's numbers from its children */
        uint32_t pn = or_node ? DFPN_INF : 0, dn = or_node ? 0 : DFPN_INF;
        uint32_t best_v = DFPN_INF, second_v = DFPN_INF, best_other = 0;
        int32_t best = -1, len = or_node ? DFPN_LEN_NONE : 0, dis = or_node ? DFPN_DIS_FINAL : DFPN_DIS_NONE;
        move_t len_move = MOVE_NONE;
        for (int32_t i = 0; i < n; i++) {
            dfpn_val_t v = k[i].rep ? (dfpn_val_t){DFPN_INF, 0, 0, r - 1}
                                    : tt_lookup(d, k[i].key, k[i].hand, r - 1, k[i].init_pn);
            uint32_t sel = or_node ? v.pn : v.dn; /* what the node minimises */
            if (or_node) {
                pn = v.pn < pn ? v.pn : pn;
                dn = v.dn == DFPN_INF ? DFPN_INF : dn == DFPN_INF ? dn : sat_add(dn, v.dn);
                if (v.pn == 0 && v.len + 1 < len) len = v.len + 1, len_move = k[i].move;
                if (v.dn == 0 && v.dis + 1 < dis) dis = v.dis + 1;
            } else {
                dn = v.dn < dn ? v.dn : dn;
                pn = v.pn == DFPN_INF ? DFPN_INF : pn == DFPN_INF ? pn : sat_add(pn, v.pn);
                if (v.pn == 0 && v.len + 1 > len) len = v.len + 1, len_move = k[i].move;
                if (v.dn == 0 && v.dis + 1 > dis) dis = v.dis + 1;
            }
            if (sel < best_v) {
                second_v = best_v;
                best_v = sel;
                best = i;
                best_other = or_node ? v.dn : v.pn;
            } else if (sel < second_v) {
                second_v = sel;
            }
        }
        if (dis > DFPN_DIS_FINAL) dis = DFPN_DIS_FINAL;
        if (pn == 0 || dn == 0 || pn >= thpn || dn >= thdn || d->stopped) {
            tt_store(d, key, hand, pn, dn, pn == 0 ? len : 0, dn == 0 ? dis : DFPN_DIS_NONE, len_move,
                     d->nodes - nodes0);
            return;
        }
        uint32_t cthpn, cthdn;
        if (or_node) {
            cthpn = next_threshold(second_v, thpn);
            cthdn = thdn >= DFPN_INF ? DFPN_INF : sat_add(thdn - dn, best_other);
        } else {
            cthdn = next_threshold(second_v, thdn);
            cthpn = thpn >= DFPN_INF ? DFPN_INF : sat_add(thpn - pn, best_other);
        }
        pos_do_move(pos, k[best].move);
        mid(d, ply + 1, r - 1, !or_node, cthpn, cthdn);
        pos_undo_move(pos);
    }
}

/* Searches the node the position is at until it is proven or disproven
 * within r plies, or the search stops. */
static dfpn_val_t solve(dfpn_t *d, int32_t ply, int32_t r, bool or_node) {
    const uint64_t key = pos_board_key(d->pos);
    const hand_t hand = attacker_hand(d->pos, or_node);
    for (;;) {
        dfpn_val_t v = tt_lookup(d, key, hand, r, 1);
        if (v.pn == 0 || v.dn == 0 || d->stopped) return v;
        mid(d, ply, r, or_node, DFPN_INF, DFPN_INF);
    }
}

/* The mate from the root, proven within r plies: the attacker's shortest
 * proven check, the defender's longest proven reply. Returns its length, 0
 * when the table lost a proof that could not be found again. */
static int32_t extract_pv(dfpn_t *d, int32_t r, move_t *pv) {
    pos_t *pos = d->pos;
    int32_t len = 0;
    bool or_node = true, ok = false;
    while (len < DFPN_PLY_MAX && r >= 0) {
        move_list_t *l = &d->lists[len];
        int32_t n = or_node ? gen_checks(pos, l) : gen_evasions(pos, l);
        if (!or_node && n == 0) {
            ok = pos_in_check(pos);
            break;
        }
        if (or_node && r >= 1) {
            move_t m = mate1_find(pos);
            if (m != MOVE_NONE) { /* the shortest there is */
                pv[len++] = m;
                pos_do_move(pos, m);
                or_node = false;
                r = 0;
                continue;
            }
        }
        move_t pick = MOVE_NONE;
        int32_t pick_len = or_node ? DFPN_LEN_NONE : -1;
        for (int32_t i = 0; i < n; i++) {
            pos_do_move(pos, l->moves[i]);
            dfpn_val_t v = {DFPN_INF, 0, 0, 0};
            if (rules_repetition_first(pos, -1, false, NULL) == RULES_REP_NONE) {
                v = tt_lookup(d, pos_board_key(pos), attacker_hand(pos, !or_node), r - 1, 1);
                if (!or_node && v.pn != 0 && v.dn != 0) v = solve(d, len + 1, r - 1, true); /* lost: again */
            }
            pos_undo_move(pos);
            if (or_node ? (v.pn == 0 && v.len < pick_len) : (v.pn == 0 && v.len > pick_len)) {
                pick = l->moves[i];
                pick_len = v.len;
            }
            if (!or_node && v.pn != 0) {
                pick = MOVE_NONE; /* not a proof after all */
                break;
            }
        }
        if (pick == MOVE_NONE && or_node) { /* the table lost it: prove this node again */
            dfpn_val_t v = solve(d, len, r, true);
            move_t m = tt_move(d, pos_board_key(pos), attacker_hand(pos, true));
            if (v.pn == 0 && m != MOVE_NONE && pos_is_valid_move(pos, m)) pick = m, pick_len = v.len - 1;
        }
        if (pick == MOVE_NONE) break;
        pv[len++] = pick;
        pos_do_move(pos, pick);
        r = pick_len;
        or_node = !or_node;
    }
    for (int32_t i = len; i > 0; i--) pos_undo_move(pos);
    return ok && len % 2 == 1 ? len : 0;
}

bool dfpn_verify(const pos_t *root, const move_t *pv, int32_t len) {
    if (len < 1 || len % 2 == 0 || len > DFPN_PLY_MAX) return false;
    pos_t *pos = malloc(sizeof *pos);
    if (!pos) return false;
    pos_copy(pos, root);
    bool ok = true;
    for (int32_t i = 0; i < len && ok; i++) {
        if (!pos_is_valid_move(pos, pv[i])) ok = false;
        else if (i % 2 == 0 && !pos_gives_check(pos, pv[i])) ok = false;
        else pos_do_move(pos, pv[i]);
    }
    ok = ok && mate1_is_mated(pos);
    free(pos);
    return ok;
}

void dfpn_search(dfpn_t *d, pos_t *pos, const dfpn_limits_t *lim, dfpn_result_t *res) {
    memset(res, 0, sizeof *res);
    res->status = DFPN_UNKNOWN;
    int32_t max = lim->max_plies > 0 && lim->max_plies < DFPN_PLY_MAX ? lim->max_plies : DFPN_PLY_MAX;
    int32_t room = POS_HIST_MAX - 2 - pos_hist_len(pos); /* plies the history can still take */
    if (max > room) max = room;
    if (max % 2 == 0) max--;
    d->gen++;
    d->pos = pos;
    d->nodes = 0;
    d->max_nodes = lim->max_nodes;
    d->stop = lim->stop;
    d->poll = lim->poll;
    d->poll_user = lim->poll_user;
    d->stopped = false;
    if (max < 1) return;
    /* a depth bound that grows: without one df-pn wanders down endless
     * checking sequences (a mate in 7 unfound after 500000 nodes at 255
     * plies, found in 400 at 31); a disproof that holds only for the bound
     * searches again with the next one, reusing the table */
    int32_t bound = max < DFPN_FIRST_BOUND ? max : DFPN_FIRST_BOUND;
    dfpn_val_t v = solve(d, 0, bound, true);
    while (v.dn == 0 && v.dis != DFPN_DIS_FINAL && bound < max && !d->stopped) {
        bound = bound * 2 + 1 < max ? bound * 2 + 1 : max;
        v = solve(d, 0, bound, true);
    }
    if (v.dn == 0) res->status = DFPN_DISPROVEN;
    if (v.pn != 0) {
        res->nodes = d->nodes;
        return;
    }
    /* proven: shorter mates, then the line (a little beyond the budget) */
    d->max_nodes = lim->max_nodes ? lim->max_nodes + lim->max_nodes / 4 : 0;
    int32_t best = v.len;
    while (lim->shorten && best >= 3 && !d->stopped) {
        dfpn_val_t w = solve(d, 0, best - 2, true);
        if (w.pn == 0) best = w.len;
        else if (w.dn == 0) res->shortest = true;
        if (w.pn != 0) break;
    }
    if (best == 1) res->shortest = true;
    /* the line is read from the proofs found; a proof the table lost is
     * searched again within a small budget (the stop flag still counts) */
    d->stopped = false;
    d->poll = NULL;
    d->max_nodes = d->nodes + DFPN_PV_NODES;
    int32_t len = extract_pv(d, best, res->pv);
    if (len > 0 && dfpn_verify(pos, res->pv, len)) {
        res->status = DFPN_PROVEN;
        res->len = len;
        if (len > best) res->shortest = false;
    } else {
        res->status = DFPN_UNKNOWN; /* a proof whose line was lost: said as no answer */
        res->shortest = false;
    }
    res->nodes = d->nodes;
}
