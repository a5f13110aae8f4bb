/* perft.c - count the leaves of the legal move tree (move generator check and benchmark).
 *
 * usage: perft [--sfen "SFEN"] [--divide] DEPTH
 * Counts leaves to DEPTH from the start position (or SFEN), counting the last
 * ply without making its moves. --divide prints each root move's count.
 * The last output line is: nodes <count> time_ms <milliseconds> nps <leaves per second>
 */
#include "compat/version.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/movegen.h"
#include "engine/sfen.h"

/* perft in the build, koma-perft where installed (compat/version.h). */
static const char *g_prog = "perft";

/* The usage: to stdout with status 0 when asked for (--help, -h), else to
 * stderr with status 2 (a wrong command line), as every other tool. */
static int usage(int asked) {
    fprintf(asked ? stdout : stderr,
            "usage: %s [--sfen \"SFEN\"] [--divide] DEPTH\n"
            "Counts the leaves of the legal move tree to DEPTH (0..20) from the start\n"
            "position or SFEN; --divide prints each root move's count. The last line:\n"
            "nodes N time_ms T nps R\n",
            g_prog);
    return asked ? 0 : 2;
}

int main(int argc, char **argv) {
    g_prog = koma_program_name(argc > 0 ? argv[0] : NULL, "perft");
    if (koma_version_asked(argc, argv, g_prog)) return 0;
    const char *sfen = "startpos";
    int divide = 0;
    long depth = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return usage(1);
        } else if (strcmp(argv[i], "--sfen") == 0 && i + 1 < argc) {
            sfen = argv[++i];
        } else if (strcmp(argv[i], "--divide") == 0) {
            divide = 1;
        } else if (argv[i][0] != '-' && depth < 0) {
            char *end;
            depth = strtol(argv[i], &end, 10);
            if (*end || depth < 0 || depth > 20) {
                fprintf(stderr, "%s: depth must be 0..20, got '%s'\n", g_prog, argv[i]);
                return 2;
            }
        } else {
            return usage(0);
        }
    }
    if (depth < 0) return usage(0);

    static pos_t pos;
    char err[256];
    if (sfen_parse_cstr(&pos, sfen, err, sizeof err) != SFEN_OK) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return 1;
    }
    int64_t t0 = compat_now_ns();
    uint64_t nodes = 0;
    if (divide && depth > 0) {
        move_list_t list;
        movegen_legal(&pos, &list);
        for (int32_t i = 0; i < list.n; i++) {
            char usi[MOVE_USI_MAX];
            move_to_usi(list.moves[i], usi);
            pos_do_move(&pos, list.moves[i]);
            uint64_t n = movegen_perft(&pos, (int32_t)depth - 1);
            pos_undo_move(&pos);
            printf("%s %" PRIu64 "\n", usi, n);
            nodes += n;
        }
    } else {
        nodes = movegen_perft(&pos, (int32_t)depth);
    }
    int64_t ns = compat_now_ns() - t0;
    uint64_t nps = ns > 0 ? (uint64_t)((double)nodes * 1e9 / (double)ns) : 0;
    printf("nodes %" PRIu64 " time_ms %" PRId64 " nps %" PRIu64 "\n", nodes, ns / 1000000, nps);
    return 0;
}
