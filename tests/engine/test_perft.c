/* test_perft.c - perft leaf counts from tests/data/perft.txt.
 *
 * usage: test_perft [--slow] [--max-nodes N] [FILE]
 * Default: every depth whose expected count is at most the node cap
 * (60M, or $KOMA_PERFT_MAX_NODES). --slow: only the depths above the cap.
 * Each position also checks that generating and counting agree at the root.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/movegen.h"
#include "engine/sfen.h"

static pos_t pos;

int main(int argc, char **argv) {
    const char *path = "tests/data/perft.txt";
    uint64_t cap = 60000000;
    int slow = 0;
    const char *env = getenv("KOMA_PERFT_MAX_NODES");
    if (env && *env) cap = strtoull(env, NULL, 10);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--slow") == 0)
            slow = 1;
        else if (strcmp(argv[i], "--max-nodes") == 0 && i + 1 < argc)
            cap = strtoull(argv[++i], NULL, 10);
        else
            path = argv[i];
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "test_perft: cannot open %s (run from the source root)\n", path);
        return 1;
    }
    char line[4096], err[256];
    int lineno = 0, positions = 0, checks = 0, failures = 0;
    uint64_t leaves = 0;
    int64_t t0 = compat_now_ns();
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strcspn(line, "\r\n");
        line[n] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *semi = strchr(line, ';');
        if (!semi) {
            fprintf(stderr, "%s:%d: no ';D' field\n", path, lineno);
            failures++;
            continue;
        }
        *semi = '\0';
        if (sfen_parse_cstr(&pos, line, err, sizeof err) != SFEN_OK) {
            fprintf(stderr, "%s:%d: %s\n", path, lineno, err);
            failures++;
            continue;
        }
        positions++;
        move_list_t list;
        movegen_legal(&pos, &list);
        if (list.n != movegen_count_legal(&pos)) {
            fprintf(stderr, "%s:%d: movegen_legal gives %d moves, movegen_count_legal %d\n", path, lineno, list.n,
                    movegen_count_legal(&pos));
            failures++;
        }
        char *p = semi + 1;
        while (p && *p) {
            int depth;
            uint64_t expected;
            if (sscanf(p, "D%d %" SCNu64, &depth, &expected) != 2) {
                fprintf(stderr, "%s:%d: bad field '%s'\n", path, lineno, p);
                failures++;
                break;
            }
            bool run = slow ? expected > cap : expected <= cap;
            if (run) {
                uint64_t got = movegen_perft(&pos, depth);
                checks++;
                leaves += got;
                if (got != expected) {
                    fprintf(stderr, "%s:%d: %s depth %d: expected %" PRIu64 ", got %" PRIu64 "\n", path, lineno, line,
                            depth, expected, got);
                    failures++;
                }
            }
            p = strchr(p, ';');
            if (p) p++;
        }
    }
    fclose(f);
    double secs = (double)(compat_now_ns() - t0) / 1e9;
    printf("test_perft: %d positions, %d counts checked, %" PRIu64 " leaves in %.2f s, %d failures\n", positions,
           checks, leaves, secs, failures);
    if (positions < 10 || checks == 0) {
        fprintf(stderr, "test_perft: too little data in %s\n", path);
        return 1;
    }
    return failures ? 1 : 0;
}
