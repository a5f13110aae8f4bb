/* test_usi_limits.c - koma at the edges a GUI or a user can push it to: it
 * must always answer, never hang.
 *   - Low memory: under `ulimit -v 1000000` (through /bin/sh; skipped where
 *     there is none, and under ASan/TSan, whose shadow memory needs more),
 *     `setoption Net` with a real net then `isready` gets `readyok` promptly
 *     with the net loaded (then `go nodes 64` its bestmove, and `quit` ends
 *     it), or `info string Error:` saying memory ran out and koma exits 1
 *     (OpenBLAS spins for ever when its allocator fails).
 *   - Threads 1024 under `ulimit -v 8000000` (skipped as above): an
 *     `info string Error:` naming Threads and the count used, then readyok,
 *     a bestmove and exit 0 (the OpenMP runtime ended koma before);
 *   - A FIFO as Net (made with mkfifo; skipped where there is none): an error
 *     by name at once, no `readyok`, exit status 1 (the open used to block
 *     for ever).
 *   - `go` with out-of-range values (negative clocks, nodes -1, a byoyomi
 *     beyond any clock): every `go` ends in a legal `bestmove`, and the
 *     clamped value is named in an info string.
 */
#include "usi_test.h"
#include "usi_net.h"

#include "engine/encode.h"
#include "nn/net.h"
#include "nn/weights.h"

static bool write_net(const char *path) { return usi_write_net(path, 2, 16, 7); }

static void test_low_memory(const char *net) {
#ifdef _WIN32
    fprintf(stderr, "-- low memory: skipped (no ulimit on Windows)\n");
    return;
#endif
    if (SANITIZED || !compat_file_exists("/bin/sh")) {
        fprintf(stderr, "-- low memory: skipped (sanitizer build or no /bin/sh)\n");
        return;
    }
    fprintf(stderr, "-- low memory: ulimit -v 1000000, Net, isready\n");
    usi_proc_t P;
    memset(&P, 0, sizeof P);
    const char *argv[] = {"/bin/sh", "-c", "ulimit -v 1000000 && KOMA_CPU_CONV=ref exec \"$0\"", KOMA_BIN, NULL};
    char err[512];
    P.cp = compat_proc_spawn(argv, NULL, err, sizeof err);
    if (!P.cp) {
        CHECKF(0, "cannot start koma under ulimit: %s", err);
        return;
    }
    proc_send(&P, "usi");
    CHECK(proc_expect(&P, "usiok", USI_WAIT_MS) != NULL);
    int from = P.mark;
    proc_send(&P, "setoption name Net value %s", net);
    proc_send(&P, "isready");
    long long t0 = now_ms();
    /* readyok (the net loaded), or the error that says memory ran out and
     * names the limit, and koma exits 1 */
    const char *ok = NULL;
    for (long long end = now_ms() + 60000; !ok && now_ms() < end && !P.eof;) {
        proc_pump(&P, 100);
        ok = proc_find(&P, from, P.n_lines, "readyok");
        if (proc_find(&P, from, P.n_lines, "info string Error")) break;
    }
    const char *l = proc_find(&P, from, P.n_lines, "info string Error");
    CHECKF(ok || l, "no readyok and no error within 60 s under ulimit -v 1000000 (a hang in the BLAS allocator?)");
    if (ok) {
        const char *loaded = proc_find(&P, from, P.n_lines, "info string net loaded");
        CHECKF(loaded != NULL, "readyok under low memory: the net loaded");
        fprintf(stderr, "   readyok after %lld ms: %s\n", now_ms() - t0, loaded ? loaded : "-");
        proc_send(&P, "position startpos");
        proc_send(&P, "go nodes 64");
        CHECKF(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL, "no bestmove within 60 s under low memory");
        proc_send(&P, "quit");
        CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "koma did not quit under low memory");
    } else if (l) {
        CHECKF((strstr(l, "out of memory") || strstr(l, "out of host memory")) && strstr(l, "ulimit -v"),
               "Net under low memory refused with the reason: %s", l);
        fprintf(stderr, "   error after %lld ms: %s\n", now_ms() - t0, l);
        CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 1, "koma exits 1 after the error (status %d)", P.status);
    }
    if (!P.exited) compat_proc_kill(P.cp);
    proc_end(&P);
}

/* Threads 1024 under `ulimit -v 8000000` (issue 46.7): the OpenMP runtime
 * could not start its team and ended koma ("libgomp: Thread creation
 * failed", exit 1, no readyok). Now: `info string Error: Threads 1024: ...
 * using N` (N < 1024), readyok, a bestmove, and quit with status 0. */
static void test_thread_limit(const char *net) {
#ifdef _WIN32
    fprintf(stderr, "-- Threads 1024 under ulimit -v: skipped (no ulimit on Windows)\n");
    return;
#endif
    if (SANITIZED || !compat_file_exists("/bin/sh")) {
        fprintf(stderr, "-- Threads 1024 under ulimit -v: skipped (sanitizer build or no /bin/sh)\n");
        return;
    }
    fprintf(stderr, "-- Threads 1024 under ulimit -v 8000000\n");
    usi_proc_t P;
    memset(&P, 0, sizeof P);
    const char *argv[] = {"/bin/sh", "-c", "ulimit -v 8000000 && exec \"$0\"", KOMA_BIN, NULL};
    char err[512];
    P.cp = compat_proc_spawn(argv, NULL, err, sizeof err);
    if (!P.cp) {
        CHECKF(0, "cannot start koma under ulimit: %s", err);
        return;
    }
    proc_send(&P, "usi");
    CHECK(proc_expect(&P, "usiok", USI_WAIT_MS) != NULL);
    int from = P.mark;
    proc_send(&P, "setoption name Net value %s", net);
    proc_send(&P, "setoption name Threads value 1024");
    proc_send(&P, "isready");
    CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL, "Threads 1024 under ulimit -v 8000000: readyok");
    const char *l = proc_find(&P, from, P.n_lines, "info string Error: Threads 1024");
    if (l) {
        const char *u = strstr(l, "using ");
        CHECKF(u && atoi(u + 6) >= 1 && atoi(u + 6) < 1024, "fewer threads, said so: %s", l);
    }
    fprintf(stderr, "   %s\n", l ? l : "(all 1024 threads could be started here)");
    proc_send(&P, "position startpos");
    proc_send(&P, "go btime 0 wtime 0 byoyomi 200");
    CHECKF(proc_expect(&P, "bestmove ", USI_WAIT_MS) != NULL, "Threads 1024 under ulimit -v 8000000: a bestmove");
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 0, "quit: exit 0 (status %d)", P.status);
    if (g_fail) proc_dump(&P, "Threads 1024");
    if (!P.exited) compat_proc_kill(P.cp);
    proc_end(&P);
}

static void test_fifo_net(const char *dir) {
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/net.fifo", dir);
    const char *mk[] = {"mkfifo", fifo, NULL};
    int status = -1;
    char err[512];
    if (compat_run(mk, &status, err, sizeof err) != 0 || status != 0 || !compat_file_exists(fifo)) {
        fprintf(stderr, "-- FIFO as Net: skipped (no mkfifo)\n");
        return;
    }
    fprintf(stderr, "-- FIFO as Net\n");
    usi_proc_t P;
    proc_start(&P, NULL);
    CHECK(proc_handshake(&P));
    int from = P.mark;
    proc_send(&P, "setoption name Net value %s", fifo);
    proc_send(&P, "isready");
    /* refused by name, no readyok, koma exits 1 (it never blocks on the FIFO) */
    const char *l = proc_expect(&P, "info string Error:", USI_WAIT_MS);
    CHECKF(l && strstr(l, "net.fifo") && strstr(l, "not a regular file"), "the FIFO is refused by name: %s",
           l ? l : "-");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS) && P.status == 1, "koma exits 1 after a FIFO as Net (status %d)", P.status);
    CHECKF(!proc_find(&P, from, P.n_lines, "readyok"), "no readyok after a FIFO as Net");
    proc_end(&P);
}

/* go ARGS at the start position: a legal bestmove within 30 s (after `stop`
 * when stop is set), and an info string containing `said` first. */
static void go_answers(usi_proc_t *P, pos_t *pos, const char *args, bool stop, const char *said) {
    int from = P->mark;
    proc_send(P, "position startpos");
    proc_send(P, "go %s", args);
    if (stop) {
        proc_drain(P, 300);
        proc_send(P, "stop");
    }
    const char *bm = proc_expect(P, "bestmove ", USI_WAIT_MS);
    char txt[16];
    pos_set_startpos(pos);
    CHECKF(bm && bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "'go %s': a legal bestmove: %s", args,
           bm ? bm : "(none)");
    bool found = false;
    for (int i = from; i < P->mark && !found; i++) found = starts_with(P->lines[i], "info string go:") &&
                                                           strstr(P->lines[i], said);
    CHECKF(found, "'go %s': an info string saying '%s'", args, said);
}

static void test_go_out_of_range(void) {
    fprintf(stderr, "-- go with out-of-range values\n");
    pos_t *pos = malloc(sizeof *pos);
    usi_proc_t P;
    proc_start(&P, NULL);
    CHECK(proc_handshake(&P));
    proc_send(&P, "usinewgame");
    go_answers(&P, pos, "btime -5 wtime -5 byoyomi -1", false, "taken as 0");
    go_answers(&P, pos, "nodes -1", false, "'nodes -1' out of range");
    go_answers(&P, pos, "btime 0 wtime 0 byoyomi 999999999999999", true, "taken as 1000000000000");
    go_answers(&P, pos, "btime abc wtime 1000 byoyomi 100", false, "not a number");
    proc_send(&P, "quit");
    CHECK(proc_wait_exit(&P, USI_WAIT_MS));
    proc_end(&P);
    free(pos);
}

int main(void) {
    watchdog(170);
    const char *dir = t_scratch("usi_limits");
    char net[600];
    snprintf(net, sizeof net, "%s/net.safetensors", dir);
    CHECKF(write_net(net), "net written");
    test_low_memory(net);
    test_thread_limit(net);
    test_fifo_net(dir);
    test_go_out_of_range();
    t_rm_rf(dir);
    return t_done("test_usi_limits");
}
