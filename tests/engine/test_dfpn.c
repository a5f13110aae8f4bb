/* test_dfpn.c - the df-pn mate solver (engine/dfpn.h).
 *
 * 1. The suite tests/data/tsume.txt (shortest lengths measured by koma's
 *    exhaustive `go mate`, see tsume_make.py; test_usi_tsume measures them
 *    again): every mate proven at exactly its length with `shortest` set and
 *    a PV that a move-by-move check accepts, as given and colour-flipped;
 *    every nomate position disproven or left unknown, never proven.
 * 2. Rules: a pawn-drop mate is never part of a proof; a position whose
 *    shortest mate runs through a position of the game history gets a longer
 *    mate that does not (a repetition is a disproof for the checker), while
 *    the same position set up fresh gets the short one; perpetual checks (a
 *    lone rook, a dragon alone) never prove; a defender with no legal move is
 *    mated.
 * 3. Limits: the node budget, a stop flag set before and one set from
 *    another thread during the search, the poll callback; the position is
 *    unchanged; a second search of a solved position reuses the table.
 */
#include <stdio.h>
#include <string.h>

#include "engine/dfpn.h"
#include "engine/mate1.h"
#include "engine/movegen.h"
#include "engine/rules.h"
#include "engine/sfen.h"
#include "sfen_mirror.h"
#include "tests/koma_test.h"

static pos_t *pos;
static dfpn_t *solver;

static bool set(const char *sfen) {
    char err[256];
    bool ok = strcmp(sfen, "startpos") == 0 ? (pos_set_startpos(pos), true)
                                            : sfen_parse_cstr(pos, sfen, err, sizeof err) == SFEN_OK;
    CHECKF(ok, "%s: %s", sfen, ok ? "" : err);
    return ok;
}

static void pv_text(const dfpn_result_t *r, char *buf, size_t n) {
    size_t u = 0;
    buf[0] = 0;
    for (int32_t i = 0; i < r->len && u + 8 < n; i++) {
        char m[MOVE_USI_MAX];
        move_to_usi(r->pv[i], m);
        u += (size_t)snprintf(buf + u, n - u, "%s%s", i ? " " : "", m);
    }
}

/* Every move legal (movegen's list), every attacker move a check, mated at the end. */
static bool line_mates(const pos_t *root, const move_t *pv, int32_t len) {
    pos_t *p = malloc(sizeof *p);
    move_list_t *l = malloc(sizeof *l);
    pos_copy(p, root);
    bool ok = len % 2 == 1;
    for (int32_t i = 0; i < len && ok; i++) {
        movegen_legal(p, l);
        ok = movegen_list_contains(l, pv[i]) && (i % 2 == 1 || pos_gives_check(p, pv[i]));
        if (ok) pos_do_move(p, pv[i]);
    }
    ok = ok && pos_in_check(p) && movegen_count_legal(p) == 0;
    free(l);
    free(p);
    return ok;
}

static int64_t suite_nodes;
static int suite_mates, suite_nomates;

static void run_entry(const char *sfen, const char *want, int lineno, bool flip) {
    char buf[SFEN_MAX_LEN];
    if (flip) {
        if (mirror_sfen(sfen, buf, sizeof buf) != 0) return;
        sfen = buf;
    }
    if (!set(sfen)) return;
    uint64_t key = pos_key(pos);
    dfpn_limits_t lim;
    dfpn_limits_default(&lim);
    lim.max_nodes = 2000000;
    dfpn_result_t r;
    dfpn_clear(solver);
    dfpn_search(solver, pos, &lim, &r);
    suite_nodes += r.nodes;
    char line[2048];
    pv_text(&r, line, sizeof line);
    CHECKF(pos_key(pos) == key && pos_hist_len(pos) == 0, "line %d: position unchanged", lineno);
    if (strcmp(want, "nomate") == 0) {
        suite_nomates++;
        CHECKF(r.status != DFPN_PROVEN, "line %d%s: %s has no mate, df-pn proved '%s'", lineno,
               flip ? " flipped" : "", sfen, line);
        return;
    }
    suite_mates++;
    int plies = atoi(want);
    CHECKF(r.status == DFPN_PROVEN && r.len == plies && r.shortest, "line %d%s: %s: status %d len %d shortest %d "
           "(%s) after %lld nodes, want a mate in %d",
           lineno, flip ? " flipped" : "", sfen, (int)r.status, r.len, (int)r.shortest, line, (long long)r.nodes,
           plies);
    if (r.status == DFPN_PROVEN) {
        CHECKF(line_mates(pos, r.pv, r.len), "line %d: '%s' is not a mate", lineno, line);
        CHECKF(dfpn_verify(pos, r.pv, r.len), "line %d: dfpn_verify agrees", lineno);
    }
}

static void test_suite(void) {
    const char *path = "tests/data/tsume.txt";
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
        char *semi = strchr(line, ';');
        if (!semi) {
            CHECKF(0, "%s:%d: want 'SFEN ; plies|nomate'", path, lineno);
            continue;
        }
        char *e = semi;
        while (e > line && e[-1] == ' ') e--;
        *e = 0;
        char *want = semi + 1;
        while (*want == ' ') want++;
        run_entry(line, want, lineno, false);
        run_entry(line, want, lineno, true);
    }
    fclose(f);
    CHECKF(suite_mates >= 80 && suite_nomates >= 10, "suite: %d mates, %d nomates", suite_mates, suite_nomates);
    printf("suite: %d mates, %d nomate runs, %lld nodes\n", suite_mates, suite_nomates, (long long)suite_nodes);
}

static void search(const char *sfen, int64_t max_nodes, dfpn_result_t *r) {
    dfpn_limits_t lim;
    dfpn_limits_default(&lim);
    lim.max_nodes = max_nodes;
    dfpn_clear(solver);
    if (set(sfen)) dfpn_search(solver, pos, &lim, r);
}

static void test_rules(void) {
    dfpn_result_t r;
    /* the only mate in one would be P*1b: uchifuzume, illegal; and no other mate */
    search("7nk/9/7G1/9/9/9/9/9/K8 b P 1", 200000, &r);
    CHECKF(r.status != DFPN_PROVEN, "pawn-drop mate: status %d", (int)r.status);
    search("7nk/7p1/8G/9/9/9/9/9/K8 b P 1", 200000, &r);
    CHECKF(r.status == DFPN_DISPROVEN, "pawn-drop mate 2: status %d", (int)r.status);
    /* a pawn push on the board may mate (only the drop may not) */
    search("7nk/7p1/8P/8L/9/9/9/9/K8 b - 1", 10000, &r);
    CHECKF(r.status == DFPN_PROVEN && r.len == 1, "pawn push mates: status %d len %d", (int)r.status, r.len);
    /* no check at all */
    search("startpos", 10000, &r);
    CHECKF(r.status == DFPN_DISPROVEN && r.nodes <= 2, "startpos: status %d nodes %lld", (int)r.status,
           (long long)r.nodes);
    /* one check, after whose answer the checks run out */
    search("7gk/7sl/9/9/9/9/9/9/K8 b N 1", 10000, &r);
    CHECKF(r.status == DFPN_DISPROVEN, "checks run out: status %d", (int)r.status);
    /* a lone rook checks forever and never mates */
    search("4k4/9/9/9/9/9/9/9/4K4 b R 1", 300000, &r);
    CHECKF(r.status != DFPN_PROVEN, "lone rook: status %d", (int)r.status);
    printf("lone rook: status %d after %lld nodes\n", (int)r.status, (long long)r.nodes);

    /* Repetition and the game history. S is a mate in 3; after 3a2b (no
     * check) and 6b5a, R = S + 3a2b 6b5a mates in 5 with 2b3a, whose answer
     * 5a6b is S again (then mated in 3). Set up fresh (no history) df-pn finds
     * that mate in 5; reached from S (the history holds S) 5a6b repeats S, a
     * disproof for the checker, so 2b3a no longer mates: the mate found is
     * longer (7) and repeats no position. */
    const char *S = "6+R2/1+B1k2n2/4p1Sp1/2pps1l1g/1p3PR2/2P6/1GNPP+pN2/3S5/1+lBKG4 b GNL4Psl4p 105";
    if (set(S)) {
        dfpn_limits_t lim;
        dfpn_limits_default(&lim);
        lim.max_nodes = 500000;
        pos_t *hist = malloc(sizeof *hist), *fresh = malloc(sizeof *fresh), *walk = malloc(sizeof *walk);
        pos_copy(hist, pos);
        pos_do_move(hist, move_from_usi(hist, "3a2b", 4));
        pos_do_move(hist, move_from_usi(hist, "6b5a", 4));
        char text[SFEN_MAX_LEN], err[256];
        sfen_write(hist, text, sizeof text);
        CHECKF(pos_hist_len(hist) == 2 && sfen_parse_cstr(fresh, text, err, sizeof err) == SFEN_OK, "R set up");
        dfpn_clear(solver);
        dfpn_search(solver, fresh, &lim, &r);
        CHECKF(r.status == DFPN_PROVEN && r.len == 5 && r.shortest, "R without history: status %d len %d",
               (int)r.status, r.len);
        /* its first move 2b3a can be answered by 5a6b, which is S again */
        pos_copy(walk, fresh);
        pos_do_move(walk, move_from_usi(walk, "2b3a", 4));
        pos_do_move(walk, move_from_usi(walk, "5a6b", 4));
        CHECKF(r.status == DFPN_PROVEN && r.pv[0] == move_from_usi(fresh, "2b3a", 4) &&
                   pos_key(walk) == pos_state_ago(hist, 2)->key,
               "R's mate in 5 starts with 2b3a, which 5a6b answers with S");
        dfpn_clear(solver);
        dfpn_search(solver, hist, &lim, &r);
        CHECKF(r.status == DFPN_PROVEN && r.len > 5 && line_mates(hist, r.pv, r.len),
               "R after S: status %d len %d (the mate in 5 repeats S)", (int)r.status, r.len);
        bool repeats = false;
        pos_copy(walk, hist);
        for (int32_t i = 0; i < r.len && r.status == DFPN_PROVEN; i++) {
            pos_do_move(walk, r.pv[i]);
            repeats = repeats || rules_repetition_first(walk, -1, false, NULL) != RULES_REP_NONE;
        }
        CHECKF(!repeats, "the mate from R after S repeats a position");
        free(hist);
        free(fresh);
        free(walk);
    }
    /* a dragon alone checks in cycles (the king shuttles) and never mates */
    search("k8/9/1+R7/9/9/9/9/9/8K b - 1", 200000, &r);
    CHECKF(r.status != DFPN_PROVEN, "dragon alone: status %d", (int)r.status);
    /* White attacks */
    search("k8/9/9/9/9/9/6r2/9/8K w gn 1", 100000, &r);
    CHECKF(r.status == DFPN_PROVEN && r.len == 3 && r.shortest, "White mates in 3: status %d len %d",
           (int)r.status, r.len);
}

/* The stop flag from another thread: set once the search reports (poll) that it runs. */
typedef struct {
    atomic_int running;
    atomic_int stop;
    int64_t polls;
} stopper_t;

static bool poll_cb(void *user) {
    stopper_t *s = user;
    s->polls++;
    atomic_store(&s->running, 1);
    return false;
}

static void *stop_thread(void *arg) {
    stopper_t *s = arg;
    while (!atomic_load(&s->running)) compat_sleep_ms(1);
    atomic_store(&s->stop, 1);
    return NULL;
}

static bool poll_after_10(void *user) { return ++*(int *)user >= 10; }

static void test_limits(void) {
    dfpn_result_t r;
    dfpn_limits_t lim;
    /* unsettled after 3,000,000 nodes: the limits, not an answer, end every search below */
    const char *big = "4k4/9/9/9/9/9/9/9/4K4 b RBGSNL9Prbgsnl9p 1";
    if (!set(big)) return;
    uint64_t key = pos_key(pos);
    /* node budget */
    dfpn_limits_default(&lim);
    lim.max_nodes = 20000;
    dfpn_clear(solver);
    dfpn_search(solver, pos, &lim, &r);
    CHECKF(r.status == DFPN_UNKNOWN && r.nodes >= 20000 && r.nodes <= 20000 + 256, "node budget: status %d nodes %lld",
           (int)r.status, (long long)r.nodes);
    CHECKF(pos_key(pos) == key && pos_hist_len(pos) == 0 && pos_validate(pos) == NULL, "position unchanged");
    /* stop flag already set: at the first look */
    atomic_int stop;
    atomic_init(&stop, 1);
    dfpn_limits_default(&lim);
    lim.stop = &stop;
    dfpn_search(solver, pos, &lim, &r);
    CHECKF(r.status == DFPN_UNKNOWN && r.nodes <= 256, "stop flag set before: status %d nodes %lld", (int)r.status,
           (long long)r.nodes);
    /* poll callback */
    int calls = 0;
    dfpn_limits_default(&lim);
    lim.poll = poll_after_10;
    lim.poll_user = &calls;
    dfpn_search(solver, pos, &lim, &r);
    CHECKF(r.status == DFPN_UNKNOWN && calls == 10 && r.nodes == 2560, "poll: status %d calls %d nodes %lld",
           (int)r.status, calls, (long long)r.nodes);
    /* stop flag from another thread while the search runs (unbounded otherwise) */
    stopper_t s;
    atomic_init(&s.running, 0);
    atomic_init(&s.stop, 0);
    s.polls = 0;
    compat_thread_t th;
    CHECKF(compat_thread_create(&th, stop_thread, &s) == 0, "thread");
    dfpn_limits_default(&lim);
    lim.stop = &s.stop;
    lim.poll = poll_cb;
    lim.poll_user = &s;
    dfpn_search(solver, pos, &lim, &r);
    compat_thread_join(th);
    CHECKF(r.status == DFPN_UNKNOWN && atomic_load(&s.stop) == 1, "stopped from another thread: status %d",
           (int)r.status);
    CHECKF(pos_key(pos) == key && pos_hist_len(pos) == 0, "position unchanged after a stop");
    /* a solved position searched again: the table answers (proof kept) */
    if (set("3k5/9/g8/3N5/9/9/9/9/2K6 b RS 1")) {
        dfpn_limits_default(&lim);
        dfpn_clear(solver);
        dfpn_search(solver, pos, &lim, &r);
        int64_t first = r.nodes;
        int32_t len = r.len;
        dfpn_search(solver, pos, &lim, &r);
        CHECKF(r.status == DFPN_PROVEN && r.len == len && r.nodes < first, "again: %lld nodes (first %lld)",
               (long long)r.nodes, (long long)first);
    }
    /* a tiny table still solves (replacement), and max_plies bounds the length */
    dfpn_t *tiny = dfpn_new(4096);
    CHECKF(tiny && dfpn_tt_bytes(tiny) <= 4096, "tiny table");
    if (tiny && set("7k1/p7n/8l/7P1/9/9/9/9/4K4 b RB 1")) {
        dfpn_limits_default(&lim);
        lim.max_nodes = 2000000;
        dfpn_search(tiny, pos, &lim, &r);
        CHECKF(r.status == DFPN_PROVEN ? line_mates(pos, r.pv, r.len) : r.status == DFPN_UNKNOWN,
               "tiny table: status %d len %d", (int)r.status, r.len);
        dfpn_limits_default(&lim);
        lim.max_plies = 5;
        dfpn_clear(solver);
        dfpn_search(solver, pos, &lim, &r);
        CHECKF(r.status == DFPN_DISPROVEN, "mate in 7 within 5 plies: status %d", (int)r.status);
    }
    dfpn_free(tiny);
    dfpn_free(NULL);
}

int main(void) {
    engine_init();
    pos = malloc(sizeof *pos);
    solver = dfpn_new((size_t)16 << 20);
    CHECKF(solver != NULL, "dfpn_new");
    if (!solver) return t_done("test_dfpn");
    test_rules();
    test_limits();
    test_suite();
    dfpn_free(solver);
    free(pos);
    return t_done("test_dfpn");
}
