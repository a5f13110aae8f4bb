/* test_usi_tsume.c - tests/data/tsume.txt measured again by an independent
 * search: usi/mate.c's iterative deepening (exhaustive over checks, shortest
 * first; no df-pn code) finds every stated mate at exactly its length with a
 * line the brute force (mate_bf.h) accepts, and proves every `nomate`
 * position mate-free within USI_MATE_PLY_MAX plies. test_dfpn holds df-pn to
 * the same file.
 *
 * `test_usi_tsume --bench [FILE [SECONDS]]` (run from the source root) is the
 * benchmark of docs/BENCHMARKS.md instead: each position of FILE (default
 * tests/data/tsume.txt; `SFEN ; ...` lines, the part after ';' ignored) is
 * searched by df-pn (engine/dfpn, 64 MiB table, cleared each time) and by
 * the iterative deepening (2^20 entries, go mate's default), each with SECONDS (default 10) of
 * (wall) time; a line per position and the totals: solved (mate or nomate
 * proven), nodes, CPU time (the process's, so a loaded machine does not
 * change it much), nodes per CPU-second. */
#include <stdio.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/dfpn.h"
#include "tests/koma_test.h"
#include "usi/mate.h"

#include "mate_bf.h"

static int64_t g_deadline;
static bool past_deadline(void *user) {
    (void)user;
    return compat_now_ms() >= g_deadline;
}

/* CPU time of the process (the benchmark is one thread): load-independent */
static int64_t cpu_ms(void) { return compat_cpu_time_ns() / 1000000; }

static int bench(const char *path, int seconds) {
    pos_t *pos = malloc(sizeof *pos);
    dfpn_t *d = dfpn_new((size_t)64 << 20);
    FILE *f = fopen(path, "r");
    if (!f || !d || !pos) {
        fprintf(stderr, "bench: cannot open %s (or out of memory)\n", path);
        return 1;
    }
    char line[2048];
    int n = 0, solved[2] = {0, 0}, mates[2] = {0, 0};
    int64_t nodes[2] = {0, 0}, ms[2] = {0, 0};
    printf("%-4s %-9s %9s %7s  %-9s %9s %7s  %s\n", "#", "df-pn", "nodes", "cpu-ms", "go-mate-ID", "nodes", "cpu-ms",
           "sfen");
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == '#' || line[0] == 0) continue;
        char *semi = strchr(line, ';');
        if (semi) {
            while (semi > line && semi[-1] == ' ') semi--;
            *semi = 0;
        }
        char err[256];
        if (strcmp(line, "startpos") == 0) pos_set_startpos(pos);
        else if (sfen_parse_cstr(pos, line, err, sizeof err) != SFEN_OK) continue;
        n++;
        char res[2][16];
        /* df-pn */
        dfpn_clear(d);
        dfpn_limits_t dl;
        dfpn_limits_default(&dl);
        g_deadline = compat_now_ms() + seconds * 1000;
        dl.poll = past_deadline;
        dfpn_result_t dr;
        int64_t t0 = cpu_ms();
        dfpn_search(d, pos, &dl, &dr);
        int64_t t1 = cpu_ms();
        nodes[0] += dr.nodes;
        ms[0] += t1 - t0;
        solved[0] += dr.status != DFPN_UNKNOWN;
        mates[0] += dr.status == DFPN_PROVEN;
        if (dr.status == DFPN_PROVEN) snprintf(res[0], sizeof res[0], "mate %d%s", dr.len, dr.shortest ? "" : "?");
        else snprintf(res[0], sizeof res[0], "%s", dr.status == DFPN_DISPROVEN ? "nomate" : "unknown");
        printf("%-4d %-9s %9lld %7lld  ", n, res[0], (long long)dr.nodes, (long long)(t1 - t0));
        /* iterative deepening */
        usi_mate_limits_t ml;
        usi_mate_limits_default(&ml);
        ml.tt_log2 = 20; /* go mate's default table (16 MiB), made and filled in the time measured */
        ml.deadline_ms = compat_now_ms() + seconds * 1000;
        usi_mate_result_t mr;
        t0 = cpu_ms();
        usi_mate_search(pos, &ml, &mr);
        t1 = cpu_ms();
        nodes[1] += mr.nodes;
        ms[1] += t1 - t0;
        solved[1] += mr.status != USI_MATE_TIMEOUT;
        mates[1] += mr.status == USI_MATE_FOUND;
        if (mr.status == USI_MATE_FOUND) snprintf(res[1], sizeof res[1], "mate %d", mr.len);
        else snprintf(res[1], sizeof res[1], "%s", mr.status == USI_MATE_NONE ? "nomate" : "unknown");
        printf("%-9s %9lld %7lld  %.60s\n", res[1], (long long)mr.nodes, (long long)(t1 - t0), line);
        fflush(stdout);
    }
    fclose(f);
    const char *name[2] = {"df-pn", "go-mate-ID"};
    for (int k = 0; k < 2; k++)
        printf("%-10s solved %d of %d (%d mates), %lld nodes in %lld CPU-ms, %.0f nodes/s\n", name[k], solved[k], n,
               mates[k], (long long)nodes[k], (long long)ms[k],
               ms[k] > 0 ? (double)nodes[k] * 1000.0 / (double)ms[k] : 0.0);
    dfpn_free(d);
    free(pos);
    return 0;
}

int main(int argc, char **argv) {
    engine_init();
    if (argc > 1 && strcmp(argv[1], "--bench") == 0)
        return bench(argc > 2 ? argv[2] : "tests/data/tsume.txt", argc > 3 ? atoi(argv[3]) : 10);
    pos_t *pos = malloc(sizeof *pos);
    const char *path = "tests/data/tsume.txt";
    FILE *f = fopen(path, "r");
    CHECKF(f != NULL, "cannot open %s (run from the source root)", path);
    char line[2048];
    int lineno = 0, mates = 0, nomates = 0;
    while (f && fgets(line, sizeof line, f)) {
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
        const char *want = semi + 1;
        while (*want == ' ') want++;
        char err[256];
        if (strcmp(line, "startpos") == 0) pos_set_startpos(pos);
        else if (sfen_parse_cstr(pos, line, err, sizeof err) != SFEN_OK) {
            CHECKF(0, "%s:%d: %s", path, lineno, err);
            continue;
        }
        usi_mate_limits_t lim;
        usi_mate_limits_default(&lim);
        lim.deadline_ms = compat_now_ms() + 60000;
        lim.tt_log2 = 22;
        usi_mate_result_t r;
        usi_mate_search(pos, &lim, &r);
        if (strcmp(want, "nomate") == 0) {
            nomates++;
            CHECKF(r.status == USI_MATE_NONE, "%s:%d: %s: status %d, want nomate", path, lineno, line, (int)r.status);
            continue;
        }
        mates++;
        int plies = atoi(want);
        CHECKF(r.status == USI_MATE_FOUND && r.len == plies, "%s:%d: %s: status %d len %d, want %d", path, lineno, line,
               (int)r.status, r.len, plies);
        if (r.status != USI_MATE_FOUND) continue;
        char text[1024];
        size_t u = 0;
        text[0] = 0;
        for (int32_t i = 0; i < r.len && u + 8 < sizeof text; i++) {
            char m[MOVE_USI_MAX];
            move_to_usi(r.pv[i], m);
            u += (size_t)snprintf(text + u, sizeof text - u, "%s%s", i ? " " : "", m);
        }
        int n = 0;
        CHECKF(bf_verify_line(pos, text, &n) && n == plies, "%s:%d: '%s' is not a mate", path, lineno, text);
        /* the brute force: no mate shorter than the stated length (up to 5 plies, where it is cheap) */
        if (plies >= 3 && plies <= 7) CHECKF(!bf_or(pos, plies - 2), "%s:%d: a shorter mate", path, lineno);
    }
    if (f) fclose(f);
    CHECKF(mates >= 40 && nomates >= 5, "%d mates, %d nomates", mates, nomates);
    free(pos);
    return t_done("test_usi_tsume");
}
