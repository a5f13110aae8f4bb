/* test_bench_data.c - bench/bench_data, the seeded hcpe generator of the data
 * benchmark (bench/bench_data.sh), through the real binary: the same seed
 * gives the same bytes, also when the files are written in two parts (as
 * bench_data.sh splits them over two processes); another seed gives other
 * positions; every record reads back through data/fmt_file (import's reader)
 * with no reject; the files hold many different positions, games that end
 * in mate as well as at the ply limit, and the sizes asked for.
 *
 * Usage: test_bench_data BENCH_DATA
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/fmt_file.h"
#include "tests/tools/tools_test.h"

static const char *g_bin;

static int gen(const char *dir, const char *seed, const char *first, const char *count) {
    const char *argv[16] = {g_bin, "--out", dir, "--positions", "2500", "--per-file", "1000", "--seed", seed};
    int n = 9;
    if (first) argv[n++] = "--first", argv[n++] = first, argv[n++] = "--count", argv[n++] = count;
    argv[n] = NULL;
    return t_run(argv);
}

static char *file(const char *dir, int i, size_t *len) {
    char p[1024];
    snprintf(p, sizeof p, "%s/data-%05d.hcpe", dir, i);
    return t_read_file(p, len);
}

typedef struct {
    int64_t games, rejects, mates, max_ply;
    uint8_t (*hcp)[32];
    int64_t n;
} tally_t;

static int on_game(void *user, const fmt_game_t *g) {
    tally_t *t = user;
    t->games++;
    t->mates += g->result != DB_RESULT_DRAW; /* a mated game's records carry its winner */
    t->max_ply += g->reason == DB_REASON_MAX_PLY;
    return 0;
}

static void on_reject(void *user, const rec_reject_t *r) {
    tally_t *t = user;
    if (t->rejects++ < 5) fprintf(stderr, "reject: %s\n", r->msg);
}

static int cmp32(const void *a, const void *b) { return memcmp(a, b, 32); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_bench_data BENCH_DATA\n");
        return 2;
    }
    g_bin = argv[1];
    t_scratch("bench_data");
    char a[900], b[900], c[900];
    snprintf(a, sizeof a, "%s", t_path("a"));
    snprintf(b, sizeof b, "%s", t_path("b"));
    snprintf(c, sizeof c, "%s", t_path("c"));
    CHECK(gen(a, "7", NULL, NULL) == 0);
    CHECK(gen(b, "7", "1", "2") == 0); /* files 1 and 2 first, then 0: the same bytes */
    CHECK(gen(b, "7", "0", "1") == 0);
    CHECK(gen(c, "8", NULL, NULL) == 0);

    static const size_t want[3] = {1000 * FMT_HCPE_BYTES, 1000 * FMT_HCPE_BYTES, 500 * FMT_HCPE_BYTES};
    tally_t t = {0};
    t.hcp = malloc(2500 * sizeof *t.hcp);
    for (int i = 0; i < 3; i++) {
        size_t la = 0, lb = 0, lc = 0;
        char *da = file(a, i, &la), *db = file(b, i, &lb), *dc = file(c, i, &lc);
        CHECKF(da && la == want[i], "file %d: %lu bytes, want %lu", i, (unsigned long)la, (unsigned long)want[i]);
        CHECKF(db && lb == la && memcmp(da, db, la) == 0, "file %d: written in parts differs from written whole", i);
        CHECKF(dc && lc == la && memcmp(da, dc, la) != 0, "file %d: seed 8 wrote the same bytes as seed 7", i);
        if (da && la == want[i]) {
            for (size_t r = 0; r < la / FMT_HCPE_BYTES; r++) memcpy(t.hcp[t.n++], da + r * FMT_HCPE_BYTES, 32);
            fmt_sink_t sink = {on_game, on_reject, &t};
            CHECK(fmt_parse("bench_data", da, la, FMT_HCPE, &sink) == 0);
        }
        free(da), free(db), free(dc);
    }
    CHECKF(t.games == 2500 && t.rejects == 0, "%lld records read, %lld rejected", (long long)t.games,
           (long long)t.rejects);
    /* positions of about 10 games of 80-320 plies: mates and ply limits both occur, positions mostly distinct */
    CHECKF(t.mates > 0 && t.max_ply > 0, "records of mated games %lld, of games at the ply limit %lld",
           (long long)t.mates, (long long)t.max_ply);
    qsort(t.hcp, (size_t)t.n, 32, cmp32);
    int64_t distinct = t.n > 0;
    for (int64_t i = 1; i < t.n; i++) distinct += memcmp(t.hcp[i - 1], t.hcp[i], 32) != 0;
    CHECKF(distinct > 2000, "%lld distinct positions of %lld", (long long)distinct, (long long)t.n);
    free(t.hcp);

    const char *bad[] = {g_bin, "--out", c, "--positions", "0", NULL};
    CHECK(t_run(bad) == 2);
    const char *noout[] = {g_bin, NULL};
    CHECK(t_run(noout) == 2);
    if (atomic_load(&g_fail) == 0) t_rm_rf(t_dir);
    return t_done("test_bench_data");
}
