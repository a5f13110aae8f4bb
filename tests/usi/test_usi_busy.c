/* test_usi_busy.c - every move searched on a busy machine (issue 45.2),
 * through the real koma binary with a 4x32 net (the shipped net's size) on
 * the cpu backend, Threads 1:
 *   - the test loads the machine itself (two spinning threads per CPU) and
 *     koma plays both sides of a game at byoyomi 50 ms: the last info line
 *     before every bestmove reports nodes > 0 (a playout of that search
 *     completed: before, 11 of 40 moves reported nodes 0, several with
 *     "no move searched yet: playing the first legal move"), and no move is
 *     the first legal move played unsearched;
 *   - a position with one legal move is searched too (nodes > 0), and the
 *     move played is that move.
 * Times are printed (median and worst of koma's own `time`), not asserted:
 * the machine is loaded on purpose.
 */
#include <stdatomic.h>

#include "usi_test.h"
#include "usi_net.h"

#include "engine/encode.h"
#include "nn/net.h"
#include "nn/weights.h"

static atomic_int g_spin_stop;
static void *spin_main(void *arg) {
    (void)arg;
    volatile uint64_t x = 0;
    while (!atomic_load_explicit(&g_spin_stop, memory_order_relaxed)) x++;
    return NULL;
}

/* nodes N of the last info line with nodes between [from, to); -1 if none. */
static long long last_nodes(const usi_proc_t *p, int from, int to, long long *time_ms) {
    long long nodes = -1;
    for (int i = from; i < to && i < p->n_lines; i++) {
        const char *n = starts_with(p->lines[i], "info ") ? strstr(p->lines[i], " nodes ") : NULL;
        if (!n) continue;
        nodes = atoll(n + 7);
        const char *t = strstr(p->lines[i], " time ");
        if (t && time_ms) *time_ms = atoll(t + 6);
    }
    return nodes;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(void) {
    watchdog(170);
    const char *dir = t_scratch("test_usi_busy");
    char net[700];
    snprintf(net, sizeof net, "%s/net.safetensors", dir);
    CHECK(usi_write_net(net, 4, 32, 11));

    int spinners = 2 * compat_cpu_count();
    if (spinners < 4) spinners = 4;
    if (spinners > 32) spinners = 32;
    compat_thread_t th[32];
    atomic_init(&g_spin_stop, 0);
    int started = 0;
    for (int i = 0; i < spinners; i++) started += compat_thread_create(&th[i], spin_main, NULL) == 0;
    fprintf(stderr, "-- %d spinning threads; koma plays both sides at byoyomi 50 ms\n", started);

    usi_proc_t P;
    CHECK(proc_start_bare(&P, NULL));
    proc_send(&P, "setoption name Net value %s", net);
    proc_send(&P, "setoption name Backend value cpu");
    proc_send(&P, "setoption name Threads value 1");
    CHECK(proc_handshake(&P));
    proc_send(&P, "usinewgame");

    enum { PLIES = 40 };
    char moves[PLIES * 8 + 1] = "";
    pos_t *pos = malloc(sizeof *pos);
    long long times[PLIES];
    int n_times = 0, zero = 0, first_legal = 0;
    for (int ply = 0; ply < PLIES && !g_fail; ply++) {
        proc_send(&P, "position startpos%s%s", moves[0] ? " moves" : "", moves);
        int from = P.mark;
        proc_send(&P, "go btime 0 wtime 0 byoyomi 50");
        const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
        CHECKF(bm != NULL, "ply %d: a bestmove", ply + 1);
        if (!bm) break;
        long long ms = -1, nodes = last_nodes(&P, from, P.mark, &ms);
        if (nodes <= 0) zero++;
        CHECKF(nodes > 0, "ply %d: the move played was searched: nodes %lld", ply + 1, nodes);
        if (proc_find(&P, from, P.mark, "info string no move searched yet")) first_legal++;
        if (ms >= 0) times[n_times++] = ms;
        char txt[16];
        CHECK(play_moves(pos, "startpos", moves));
        move_t m = bestmove_of(pos, bm, txt, sizeof txt);
        if (m == MOVE_NONE) break; /* resign or win: the game is over */
        size_t used = strlen(moves);
        snprintf(moves + used, sizeof moves - used, " %s", txt);
    }
    CHECKF(first_legal == 0, "no 'first legal move' answers: %d", first_legal);
    if (n_times > 0) {
        qsort(times, (size_t)n_times, sizeof times[0], cmp_ll);
        printf("byoyomi 50 ms, %d spinning threads: %d moves, %d with nodes 0, koma's time median %lld ms, worst "
               "%lld ms\n",
               started, n_times, zero, times[n_times / 2], times[n_times - 1]);
    }

    fprintf(stderr, "-- one legal move: searched, and played\n");
    /* Black's king on 1i in check from the rook on 1a; White's knight on 3f covers 2h: only 2i (and
     * no mate follows, so df-pn does not decide the move) */
    const char *forced = "4k3r/9/9/9/9/6n2/9/9/8K b - 1";
    CHECK(play_moves(pos, forced, ""));
    move_list_t *ml = malloc(sizeof *ml);
    int32_t legal = movegen_legal(pos, ml);
    CHECKF(legal == 1, "the forced position has one legal move: %d", legal);
    proc_send(&P, "position sfen %s", forced);
    int from = P.mark;
    proc_send(&P, "go btime 0 wtime 0 byoyomi 50");
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    long long nodes = last_nodes(&P, from, P.mark, NULL);
    CHECKF(nodes > 0, "the forced move was searched: nodes %lld", nodes);
    char txt[16];
    CHECKF(bm && legal == 1 && bestmove_of(pos, bm, txt, sizeof txt) == ml->moves[0], "the one legal move: %s",
           bm ? bm : "-");
    free(ml);

    atomic_store(&g_spin_stop, 1);
    for (int i = 0; i < started; i++) compat_thread_join(th[i]);
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 0, "quit");
    if (g_fail) proc_dump(&P, "busy machine");
    proc_end(&P);
    free(pos);
    t_rm_rf(dir);
    return t_done("test_usi_busy");
}
